"""Spark replay acceptance: audits of a live log over real Kafka, faults found with their
offsets, corrupt records skipped, what-if over a recorded run, Pulsar import, bad grids."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from events.catalog import (
    BundleAssigned,
    BundleOwned,
    LoadReported,
    Message,
    SheddingSkipped,
    TransferPrepared,
)
from events.codec import encode
from events.envelope import Envelope
from events.log.kafka import KafkaEventLog
from events.log.local import LocalEventLog
from events.log.port import Record
from lbctl.main import main
from spark_replay.audit import audit, move_stats, timeline
from spark_replay.report import write_report
from spark_replay.sources import dead_letters, export_parquet, read_kafka, read_local, read_parquet
from spark_replay.whatif import parse_grid, whatif

pytestmark = [pytest.mark.spark, pytest.mark.slow]
CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")
STRATEGIES = ["ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder", "TransferShedder"]


def _heads(records: list[Record]) -> dict[str, Envelope]:
    return {r.envelope.key: r.envelope for r in records}


def _env(last: Envelope, message: Message, ts: int, *, seq_step: int = 1, epoch: int | None = None,
         tag: str) -> Envelope:
    return Envelope(f"fault-{tag}", message.TYPE, message.VERSION, last.key, last.seq + seq_step,
                    last.epoch if epoch is None else epoch, ts, None, None, message.to_payload())


def _owned_at_end(records: list[Record]) -> dict[str, tuple[str, str]]:
    """bundle -> (namespace key, owner) for bundles whose last event is BundleOwned."""
    last: dict[str, Envelope] = {}
    for r in records:
        bundle = r.envelope.payload.get("bundle")
        if bundle is not None:
            last[bundle] = r.envelope
    return {b: (e.key, e.payload["owner"]) for b, e in sorted(last.items()) if e.type == "BundleOwned"}


def faults(records: list[Record]) -> list[Envelope | bytes]:
    """A double owner, a never-completing transfer, a seq gap, a stale epoch and a corrupt record,
    each on its own key, after the end of the recording."""
    heads, end = _heads(records), records[-1].envelope.ts_ms
    owned = _owned_at_end(records)
    (b1, (ns1, o1)), (b2, (ns2, o2)) = next(
        ((a, x), (b, y)) for a, x in owned.items() for b, y in owned.items() if x[0] != y[0])
    other = next(b for b in ("broker-1", "broker-2", "broker-3") if b not in (o1, o2))
    return [
        _env(heads[ns1], BundleOwned(bundle=b1, owner=other), end + 1_000, tag="double"),
        _env(heads[ns2], TransferPrepared(bundle=b2, src=o2, dst=other, reason="Overloaded"),
             end + 2_000, tag="stuck"),
        _env(heads["broker-2"], LoadReported(broker_id="broker-2", broker_load={}), end + 3_000,
             seq_step=2, tag="gap"),
        _env(heads["_leader"], SheddingSkipped(strategy="ThresholdShedder", reason="Balanced"),
             end + 4_000, epoch=0, tag="stale"),
        b"\xc1 not msgpack",
        _env(heads["broker-3"], LoadReported(broker_id="broker-3", broker_load={}), end + 120_000,
             tag="later"),
    ]


async def _write(log: Any, items: list[Envelope | bytes], key_of_raw: str = "broker-1") -> None:
    for item in items:
        if isinstance(item, bytes):
            await log.append_raw(key_of_raw, [item], ts_ms=0)
        else:
            await log.append_raw(item.key, [encode(item)], ts_ms=item.ts_ms)


def test_live_log_over_kafka_audits_clean_and_each_fault_is_reported_with_offsets(
        spark: Any, kafka: Any, recorded: list[Record], new_topic_name: Any) -> None:
    cluster = new_topic_name("replay")
    log = KafkaEventLog(kafka.bootstrap_servers, cluster=cluster, partitions=3)

    async def record() -> tuple[dict[int, int], dict[str, tuple[int, int]]]:
        async with log:
            await _write(log, [r.envelope for r in recorded])
            clean_end = await log.end_offsets()
            await _write(log, faults(recorded))
            result = await log.read()
        where = {r.envelope.event_id: (r.partition, r.offset) for r in result.records}
        (dead,) = result.dead_letters
        where["corrupt"] = (dead.partition, dead.offset)
        return clean_end, where

    clean_end, where = asyncio.run(record())
    ending = json.dumps({log.topic: {str(p): o for p, o in clean_end.items()}})
    clean = audit(read_kafka(spark, kafka.bootstrap_servers, [log.topic], ending=ending))
    assert clean.events == len(recorded)
    assert clean.clean, clean.violations

    report = audit(read_kafka(spark, kafka.bootstrap_servers, [log.topic]))
    found = {(v.check, v.partition, v.offset) for v in report.violations}
    expected = {("double_owner", *where["fault-double"]), ("in_flight_timeout", *where["fault-stuck"]),
                ("seq_gap", *where["fault-gap"]), ("stale_epoch", *where["fault-stale"]),
                ("corrupt_record", *where["corrupt"])}
    assert found == expected
    double = report.of("double_owner")[0]
    assert double.related_offset is not None and double.related_offset < double.offset
    assert "never completed" in report.of("in_flight_timeout")[0].detail


def test_a_corrupt_record_in_log_files_is_reported_and_the_rest_still_reads(
        spark: Any, recorded: list[Record], tmp_path: Path) -> None:
    async def write() -> None:
        async with LocalEventLog(tmp_path / "log", fsync=False) as log:
            await _write(log, [r.envelope for r in recorded[:50]])
            await _write(log, [b"\x93garbage"])
            await _write(log, [r.envelope for r in recorded[50:]])

    asyncio.run(write())
    df = read_local(spark, tmp_path / "log")
    dead = dead_letters(df).collect()
    assert [(d["partition"], d["offset"]) for d in dead] == [(0, 50)]
    report = audit(df)
    assert [(v.check, v.offset) for v in report.violations] == [("corrupt_record", 50)]
    export_parquet(df, str(tmp_path / "export"))
    again = read_parquet(spark, str(tmp_path / "export"))
    assert again.count() == len(recorded) + 1
    assert audit(again).by_check() == {"corrupt_record": 1}
    # Exit status 1 and the offset on the command line.
    assert main(["replay", "audit", str(tmp_path / "log"), "--json"]) == 1


def late_and_stray(records: list[Record]) -> list[Envelope]:
    """A transfer completed 40 s after it was prepared, a bundle owned by a broker it was not
    assigned to and a repeated seq, each on its own key, after the end of the recording."""
    heads, end = _heads(records), records[-1].envelope.ts_ms
    owned = _owned_at_end(records)
    (b1, (ns1, o1)), (b2, (ns2, o2)) = next(
        ((a, x), (b, y)) for a, x in owned.items() for b, y in owned.items() if x[0] != y[0])
    other = next(b for b in ("broker-1", "broker-2", "broker-3") if b not in (o1, o2))
    out: list[Envelope] = []
    for key, message, ts, tag in [
        (ns1, TransferPrepared(bundle=b1, src=o1, dst=other, reason="Overloaded"), end + 1_000, "late-0"),
        (ns1, BundleAssigned(bundle=b1, dst=other, src=o1), end + 41_000, "late-1"),
        (ns1, BundleOwned(bundle=b1, owner=other, src=o1), end + 41_000, "late-2"),
        (ns2, BundleAssigned(bundle=b2, dst=other, src=o2, reason="admin"), end + 1_000, "stray-0"),
        (ns2, BundleOwned(bundle=b2, owner=o2), end + 2_000, "stray-1"),
    ]:
        heads[key] = _env(heads[key], message, ts, tag=tag)
        out.append(heads[key])
    out.append(_env(heads["broker-2"], LoadReported(broker_id="broker-2", broker_load={}), end + 3_000,
                    seq_step=0, tag="repeat"))
    return out


def test_a_late_transfer_a_stray_owner_and_a_repeated_seq_name_their_offsets(
        spark: Any, recorded: list[Record], tmp_path: Path) -> None:
    async def append() -> dict[str, int]:
        async with LocalEventLog(tmp_path / "log", fsync=False) as log:
            await _write(log, [r.envelope for r in recorded] + late_and_stray(recorded))
            result = await log.read()
        return {r.envelope.event_id: r.offset for r in result.records}

    at = asyncio.run(append())
    report = audit(read_local(spark, tmp_path / "log"))
    found = {(v.check, v.offset, v.related_offset) for v in report.violations}
    assert found == {("in_flight_timeout", at["fault-late-0"], at["fault-late-2"]),
                     ("unassigned_owner", at["fault-stray-1"], at["fault-stray-0"]),
                     ("seq_repeat", at["fault-repeat"], at[recorded_head(recorded, "broker-2")])}
    assert "completed after 40000 ms" in report.of("in_flight_timeout")[0].detail


def test_a_cluster_slow_in_every_handover_is_not_stuck_but_one_move_far_behind_the_rest_is(
        spark: Any, recorded: list[Record], tmp_path: Path) -> None:
    # A machine busy with other work: the same history, but every move takes 60 s to end (past
    # the 30 s in-flight wait, which a fixed wall-clock rule would count as stuck, every one).
    slow = slowed_handovers([r.envelope for r in recorded], 60_000)

    async def write(items: list[Envelope]) -> None:
        async with LocalEventLog(tmp_path / "log", fsync=False) as log:
            await _write(log, items)

    asyncio.run(write(slow))
    report = audit(read_local(spark, tmp_path / "log"))
    assert report.clean, report.violations
    assert report.median_handover_ms == 60_000 and report.in_flight_bound_ms == 600_000
    # One transfer that never ends, far past ten median handovers, is still named.
    as_records = [Record(0, i, e) for i, e in enumerate(slow)]
    heads, end = _heads(as_records), max(e.ts_ms for e in slow)
    bundle, (ns, owner) = next(iter(_owned_at_end(as_records).items()))
    other = "broker-3" if owner != "broker-3" else "broker-2"
    stuck = _env(heads[ns], TransferPrepared(bundle=bundle, src=owner, dst=other, reason="Overloaded"),
                 end + 1_000, tag="stuck")
    tail = _env(heads["broker-1"], LoadReported(broker_id="broker-1", broker_load={}),
                end + 2 * report.in_flight_bound_ms, tag="tail")
    asyncio.run(write([stuck, tail]))
    late = audit(read_local(spark, tmp_path / "log"))
    assert [v.check for v in late.violations] == ["in_flight_timeout"], late.violations
    assert "never completed" in late.violations[0].detail


def slowed_handovers(envelopes: list[Envelope], delay_ms: int) -> list[Envelope]:
    """The same records, each move's end (its bundle's next Owned or Free) ``delay_ms`` later."""
    moving: set[str] = set()
    out: list[Envelope] = []
    for e in envelopes:
        bundle = e.payload.get("bundle")
        if e.type in ("TransferPrepared", "UnloadRequested"):
            moving.add(bundle)
        elif e.type in ("BundleOwned", "BundleReleased") and bundle in moving:
            moving.discard(bundle)
            e = e._replace(ts_ms=e.ts_ms + delay_ms)
        out.append(e)
    assert len(out) == len(envelopes) and not moving
    return out


def recorded_head(records: list[Record], key: str) -> str:
    return _heads(records)[key].event_id


def test_timeline_and_move_stats_follow_the_recorded_moves(spark: Any, recorded: list[Record],
                                                           tmp_path: Path) -> None:
    asyncio.run(_local(tmp_path, recorded))
    df = read_local(spark, tmp_path / "log")
    moves = [r.envelope.payload for r in recorded if r.envelope.type in ("TransferPrepared", "UnloadRequested")]
    intervals = timeline(df).collect()
    for move in moves:
        mine = [i for i in intervals if i["bundle"] == move["bundle"]]
        assert any(i["owner"] == move["src"] and i["ended_by"] == "TransferPrepared" for i in mine)
        assert any(i["owner"] == move["dst"] for i in mine)
    stats = move_stats(df).collect()
    assert sum(s["moves"] for s in stats if s["direction"] == "out") == len(moves)
    assert {s["reason"] for s in stats} == {m["reason"] for m in moves}


async def _local(tmp_path: Path, recorded: list[Record]) -> None:
    async with LocalEventLog(tmp_path / "log", fsync=False) as log:
        await _write(log, [r.envelope for r in recorded])


def test_whatif_reproduces_the_live_strategy_and_ranks_the_others(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A recording of the live system: leader, namespace shards, brokers splitting hot bundles.
    state = tmp_path / "state"
    # Seed 1 makes a dozen ThresholdShedder transfers (seed 0 makes 5 since usages above 100 %
    # count as they are, Pulsar PR #18645): enough decisions for the replay to reproduce.
    assert main(["run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "500", "--bundles", "8",
                 "--minutes", "30", "--speed", "0", "--seed", "1", "--keep", "--state-dir", str(state)]) == 0
    capsys.readouterr()
    df = read_local(spark, state / "log", raw=True)
    grid = parse_grid("strategies: [" + ", ".join(STRATEGIES) + "]\nsweep: {}\n")
    result = whatif(spark, df, grid)
    summary = result.summary
    assert len(summary) == len(STRATEGIES) + 2  # + the live configuration + as recorded
    # Brokers send deltas (only the bundles whose load changed): every cycle still holds all
    # 8 bundles or more (splits add some), never only those a broker's last delta listed.
    assert min(len(loads) for loads in result.recording.trace[3:]) >= 8, \
        [len(loads) for loads in result.recording.trace]
    recorded_row = summary.iloc[-1]
    assert recorded_row["config"] == "as recorded (ThresholdShedder)"
    assert recorded_row["decisions"] >= 10 and recorded_row["reproduced"] >= 0.95
    assert "split" in recorded_row["not_replayed"]  # split children unloads: counted, not replayed
    assert result.alignment is not None and len(result.alignment.runs) >= 28
    ranked = summary.iloc[:-1]
    assert list(ranked["max_over_mean"]) == sorted(ranked["max_over_mean"])
    assert {label.split()[0] for label in ranked["config"]} == set(STRATEGIES)
    html = write_report(tmp_path / "report", result).read_text()
    assert html.count("data:image/png;base64,") == 2 and "as recorded" in html
    # The live configuration is ThresholdShedder at Pulsar's defaults: the grid's own is its twin.
    twin = ranked[ranked["config"] == "ThresholdShedder"].iloc[0]
    assert twin["same_as"] == "same settings as ThresholdShedder (live config)"
    assert f"best: {ranked.iloc[0]['config']}" in html and "None" not in html.split("<h1>Plots")[0]

    # the report with the audit's findings and the ownership Gantt chart.
    intervals = [r.asDict() for r in timeline(df).collect()]
    audited = audit(df)
    html = write_report(tmp_path / "full", result, audited, intervals, end_ms=audited.end_ms).read_text()
    assert f"Audit: {df.count()} records, 0 violation(s)" in html and "Every check passed" in html
    assert html.count("data:image/png;base64,") == 3
    gantt = tmp_path / "full" / "ownership-public-default.png"
    assert "<h2>ownership-public-default.png</h2>" in html and gantt.stat().st_size > 10_000


@pytest.mark.parametrize(("argv", "named"), [
    (["--strategy", "NoSuchShedder"], "NoSuchShedder"),
    (["--set", "loadBalancerNoSuchKey=1,2"], "loadBalancerNoSuchKey"),
])
def test_an_unknown_strategy_or_key_in_the_grid_is_an_error_naming_it(
        argv: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "whatif", str(tmp_path), *argv]) == 2
    assert named in capsys.readouterr().err
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"strategies: [ThresholdShedder]\nsweep: {{{named if 'Key' in named else 'x'}: [1]}}\n"
                    if "Key" in named else f"strategies: [{named}]\n")
    assert main(["replay", "whatif", str(tmp_path), "--grid", str(grid)]) == 2
    assert named in capsys.readouterr().err


MODULAR = {"webServiceUrl": "http://pulsar-1:8080", "cpu": {"usage": 40.0, "limit": 100.0},
           "memory": {"usage": 1024.0, "limit": 4096.0}, "msgRateIn": 100.0, "msgRateOut": 200.0,
           "msgThroughputIn": 1e5, "msgThroughputOut": 2e5, "numTopics": 2, "numBundles": 1,
           "lastUpdate": 1700000060000, "loadReportType": "LocalBrokerData",
           "lastStats": {"public/default/0x00000000_0xffffffff": {
               "msgRateIn": 100.0, "msgRateOut": 200.0, "msgThroughputIn": 1e5,
               "msgThroughputOut": 2e5, "topics": 2, "producerCount": 1, "consumerCount": 1}}}
EXTENSIBLE = {"cpu": {"usage": 10.0, "limit": 100.0}, "memory": {"usage": 1.0, "limit": 4.0},
              "msgThroughputIn": 5.0, "msgThroughputOut": 6.0, "msgRateIn": 1.0, "msgRateOut": 2.0,
              "bundleCount": 3, "topics": 7, "updatedAt": 1700000000000}


def test_import_pulsar_reports_become_load_reported_events(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pulsar-1.json").write_text(json.dumps(MODULAR))
    (tmp_path / "pulsar-2.json").write_text(json.dumps(EXTENSIBLE))
    assert main(["replay", "import-pulsar", str(tmp_path / "pulsar-1.json"),
                 str(tmp_path / "pulsar-2.json"), "--log-dir", str(tmp_path / "log")]) == 0
    rows = read_local(spark, tmp_path / "log").orderBy("offset").collect()
    assert [(r["type"], r["broker"], r["ts"]) for r in rows] == [
        ("LoadReported", "pulsar-2", 1700000000000), ("LoadReported", "pulsar-1:8080", 1700000060000)]
    assert rows[1]["cpu"] == pytest.approx(0.4) and rows[1]["msg_throughput"] == pytest.approx(3e5)
    assert rows[1]["bundle_loads"][0]["bundle"] == "public/default/0x00000000_0xffffffff"
    (tmp_path / "bad.json").write_text(json.dumps({"hello": 1}))
    assert main(["replay", "import-pulsar", str(tmp_path / "bad.json"), "--log-dir",
                 str(tmp_path / "log2")]) == 2
    assert "bad.json[0]" in capsys.readouterr().err
