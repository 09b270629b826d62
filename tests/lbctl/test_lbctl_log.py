"""``lbctl log dead-letters`` lists what a reader could not read, with offset and reason.

Bad input of three kinds lands in a log: garbage bytes, an unknown event type and a version
newer than the code. The embedded log and a Kafka topic written by a plain producer (not our
adapter) must both show all three, between readable events, through the command line.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from events.catalog import BundleOwned
from events.codec import encode
from events.envelope import Envelope
from events.log.local import LocalEventLog
from lbctl.main import main

GOOD = Envelope("00000000-0000-4000-8000-000000000001", "BundleOwned", 1, "t/n", 1, 1,
                1_700_000_000_000, None, None,
                BundleOwned(bundle="t/n/0x00000000_0xffffffff", owner="b1").to_payload())
BAD = {
    b"\x00\x01garbage \xff\xfe": "corrupt",
    encode(GOOD._replace(type="BundleVanished", seq=2)): "unknown_type",
    encode(GOOD._replace(version=9, seq=3)): "future_version",
}


def _letters(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[dict[str, object]]:
    assert main(argv) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_lbctl_lists_dead_letters_of_the_embedded_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def fill() -> None:
        log = LocalEventLog(tmp_path / "log", fsync=False)
        await log.append_raw("t/n", [encode(GOOD), *BAD, encode(GOOD._replace(seq=2))])
        await log.close()

    asyncio.run(fill())
    letters = _letters(capsys, ["log", "dead-letters", "--log-dir", str(tmp_path / "log"), "--json"])
    assert [(d["offset"], d["reason"]) for d in letters] == [(1, "corrupt"), (2, "unknown_type"),
                                                            (3, "future_version")]
    assert main(["log", "dead-letters", "--log-dir", str(tmp_path / "log")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 3 and "BundleVanished" in table[1]


def test_lbctl_refuses_a_directory_that_is_no_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["log", "tail", "--log-dir", str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


@pytest.mark.kafka
def test_lbctl_lists_dead_letters_of_a_kafka_topic(kafka: object, capsys: pytest.CaptureFixture[str]) -> None:
    servers: str = getattr(kafka, "bootstrap_servers")  # noqa: B009 - the fixture's handle type is the helper's
    cluster = f"c{uuid.uuid4().hex[:10]}"

    async def fill() -> None:
        from events.log.kafka_topics import ensure_topic, topic_name

        topic = topic_name(cluster, "events")
        await ensure_topic(servers, topic, partitions=1)
        producer = AIOKafkaProducer(bootstrap_servers=servers, enable_idempotence=True)
        await producer.start()
        try:
            for value in [encode(GOOD), *BAD]:
                await producer.send_and_wait(topic, value, key=b"t/n")
        finally:
            await producer.stop()

    asyncio.run(fill())
    letters = _letters(capsys, ["log", "dead-letters", "--bootstrap", servers, "--cluster", cluster, "--json"])
    assert [(d["partition"], d["offset"], d["reason"]) for d in letters] == [
        (0, 1, "corrupt"), (0, 2, "unknown_type"), (0, 3, "future_version")]
    assert main(["log", "tail", "--bootstrap", servers, "--cluster", cluster, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["type"] == "BundleOwned" and len(lines) == 4
