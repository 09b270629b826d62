"""``lbctl log ownership`` and ``lbctl log anomalies`` on an embedded log: the view, the view as of
an earlier time, and what the fold refused, each named with its offset."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from events.catalog import BundleAssigned, BundleOwned, BundleReleased, NamespaceCreated
from events.envelope import Stamper
from events.log.local import LocalEventLog
from lbctl.main import main

NS = "p/d"
BUNDLE = "p/d/0x00000000_0xffffffff"


def _fill(directory: Path) -> None:
    ticks = iter(range(1_000, 10**9, 1_000))

    async def fill() -> None:
        log = LocalEventLog(directory, fsync=False, stamper=Stamper(clock_ms=lambda: next(ticks)))
        await log.start()
        await log.append(NS, [NamespaceCreated(namespace=NS, boundaries=[0, 0xFFFFFFFF])], epoch=1)
        await log.append(NS, [BundleAssigned(bundle=BUNDLE, dst="b1")], epoch=1)
        await log.append(NS, [BundleOwned(bundle=BUNDLE, owner="b1")], epoch=1)
        await log.append(NS, [BundleReleased(bundle=BUNDLE, src="b9")], epoch=1)  # invalid
        await log.close()

    asyncio.run(fill())


def _json_lines(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[dict[str, object]]:
    assert main(argv) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_ownership_now_and_as_of_an_earlier_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "log")
    now = _json_lines(capsys, ["log", "ownership", "--log-dir", str(tmp_path / "log"), "--json"])
    assert [(r["bundle"], r["state"], r["owner"]) for r in now] == [(BUNDLE, "Owned", "b1")]
    before = _json_lines(capsys, ["log", "ownership", "--log-dir", str(tmp_path / "log"),
                                  "--as-of-ts", "2000", "--json"])
    assert [(r["state"], r["dst"]) for r in before] == [("Assigning", "b1")]


def test_anomalies_name_the_refused_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "log")
    found = _json_lines(capsys, ["log", "anomalies", "--log-dir", str(tmp_path / "log"), "--json"])
    assert [(a["kind"], a["offset"], a["event_type"]) for a in found] == [
        ("invalid_transition", 3, "BundleReleased")
    ]


def test_unknown_namespace_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _fill(tmp_path / "log")
    assert main(["log", "ownership", "--log-dir", str(tmp_path / "log"), "--namespace", "x/y"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "x/y" in err[0] and "p/d" in err[0]
