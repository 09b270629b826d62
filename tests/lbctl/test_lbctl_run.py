"""``lbctl run --host inproc``: a short run finishes by itself and prints its summary (balance,
moves by reason, unloads/h, peak memory); its pieces (run statistics, /proc memory, the views)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from events.envelope import Envelope
from events.log.port import Record
from lbctl.main import main
from lbctl.procmem import MemorySampler, rss_of, tree_of
from lbctl.run_view import BrokerLine, Frame, PlainView, render
from lbctl.runstats import RunStats
from projections.moves import Move

CONF = str(Path(__file__).resolve().parents[2] / "conf" / "broker.conf")
SHORT = ["run", "--host", "inproc", "--conf", CONF, "--plain", "--topics", "500"]


def test_a_short_run_finishes_and_prints_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*SHORT, "--minutes", "12", "--speed", "0"])
    out = capsys.readouterr().out
    assert code == 0
    summary = out[out.index("summary:"):]
    assert "simulated 00:12:00" in summary and "leader leader, epoch 1" in summary
    assert "brokers expired: none" in summary and "pace:" not in summary  # as fast as possible
    assert "max/mean" in summary and "std" in summary
    moves = summary[summary.index("moves by reason:"):summary.index("unloads/h")]
    assert "split     MsgRate" in moves and "unload    split" in moves  # hot bundles split, children unloaded
    assert "unloads/h:" in summary
    # MiB or GiB: the in-process run also counts whatever else this test process started.
    assert re.search(r"peak memory: [\d.]+ (MiB|GiB) PSS, .* process\(es\)", summary), summary
    # Plain progress lines: one per move and one every 5 simulated minutes.
    progress = [line for line in out.splitlines() if line.startswith("[00:") and " / 00:12:00]" in line]
    assert [line[:10] for line in progress] == ["[00:00:00 ", "[00:05:00 ", "[00:10:00 ", "[00:12:00 "]
    assert any(line.startswith("[00:") and " split " in line for line in out.splitlines())


def test_the_speed_paces_the_run_in_wall_time(capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert main([*SHORT, "--minutes", "3", "--speed", "300"]) == 0  # 180 s at 300x: 0.6 s
    assert time.monotonic() - started >= 0.55
    out = capsys.readouterr().out
    assert "simulated 00:03:00" in out
    pace = next(line for line in out.splitlines() if line.startswith("  pace: "))
    assert pace == "  pace: kept 300x" or " behind (" in pace, pace  # a busy host falls behind


def test_keep_records_the_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SHORT, "--minutes", "1", "--speed", "0", "--keep", "--state-dir", str(tmp_path)]) == 0
    spec = json.loads((tmp_path / "cluster.json").read_text())
    assert spec["host"] == "inproc" and spec["brokers"] == 3 and spec["conf"] == CONF
    assert (tmp_path / "log").is_dir()
    assert "kept:" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "bad"), [
    (["--brokers", "0"], "--brokers: '0'"),
    (["--minutes", "0"], "--minutes: '0'"),
    (["--conf", "/nonexistent/broker.conf"], "/nonexistent/broker.conf"),
])
def test_bad_run_input_is_one_line_and_exit_2(argv: list[str], bad: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["run", "--host", "inproc", *argv])
    except SystemExit as exit_:  # a number out of range ends the parse
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and bad in err


def test_an_unknown_conf_key_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("loadBalancerSheddingIntervalMinute=1\n")
    assert main(["run", "--host", "inproc", "--conf", str(conf)]) == 2
    assert "loadBalancerSheddingIntervalMinute" in capsys.readouterr().err


# -- pieces --------------------------------------------------------------------------------------


def _record(offset: int, kind: str, key: str, payload: dict[str, object], ts: int = 0, epoch: int = 1) -> Record:
    return Record(0, offset, Envelope(f"id-{offset}", kind, 1, key, offset + 1, epoch, ts, None, None, payload))


def _load(broker: str, cpu: float) -> dict[str, object]:
    usage = {"usage": 0.0, "limit": 100.0}
    return {"broker_id": broker, "bundles": [], "broker_load": {
        "cpu": {"usage": cpu, "limit": 100.0}, "memory": usage, "direct_memory": usage,
        "bandwidth_in": usage, "bandwidth_out": usage, "msg_rate_in": 10.0, "msg_rate_out": 5.0}}


def test_run_stats_fold_moves_loads_and_balance() -> None:
    stats = RunStats(start_ms=0)
    fresh = stats.fold([
        _record(0, "LeaderElected", "_leader", {"leader_id": "leader", "epoch": 2}),
        _record(1, "LoadReported", "b1", _load("b1", 60.0)),
        _record(2, "LoadReported", "b2", _load("b2", 20.0)),
        _record(3, "TransferPrepared", "t/n", {"bundle": "t/n/x", "src": "b1", "dst": "b2", "reason": "Overloaded"}, 5),
        _record(4, "UnloadRequested", "t/n", {"bundle": "t/n/y", "src": "b1", "reason": "split"}, 6),
        _record(5, "BundleAssigned", "t/n", {"bundle": "t/n/z", "dst": "b2", "src": "b3", "reason": "orphan",
                                             "force": True}, 7),
        _record(6, "BundleAssigned", "t/n", {"bundle": "t/n/w", "dst": "b2", "reason": "lookup", "force": False}),
    ])
    assert [(m.kind, m.reason) for m in fresh] == [("transfer", "Overloaded"), ("unload", "split"),
                                                   ("takeover", "orphan")]
    first = fresh[0]
    assert (first.ts_ms, first.kind, first.bundle, first.src, first.dst, first.reason, first.epoch,
            first.leader) == (5, "transfer", "t/n/x", "b1", "b2", "Overloaded", 1, "leader")
    # the children a split unloads are the split's: not counted as unloads (as /metrics counts)
    assert (stats.epoch, stats.leader_id, stats.placements, stats.unloads()) == (2, "leader", 1, 1)
    balance = stats.balance()
    assert balance is not None
    assert balance.mean == pytest.approx(0.4) and balance.max_over_mean == pytest.approx(1.5)
    assert balance.std == pytest.approx(0.2)
    stats.fold([_record(7, "BrokerLeft", "b2", {"broker_id": "b2", "reason": "expired"})])
    assert set(stats.loads) == {"b1"}


def test_memory_sampler_sums_the_process_tree() -> None:
    alone = sum(rss_of(p) for p in tree_of(os.getpid()))
    child = subprocess.Popen([sys.executable, "-c",
                              "import sys, time; b = b'x' * (96 << 20); print(1, flush=True); time.sleep(30)"],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline()  # its 96 MiB are touched
        sampler = MemorySampler(interval_s=0.05).start()
        time.sleep(0.2)
        peak = sampler.stop()
        assert child.pid in tree_of(sampler.root)
        assert peak.max_processes >= 2 and peak.processes >= 2
        assert peak.rss > alone + (80 << 20) and peak.pss > 80 << 20
        assert peak.samples >= 2
        assert "peak memory:" in peak.describe() and "process(es)" in peak.describe()
    finally:
        child.kill()
        child.wait()


def _frame(moves: list[Move]) -> Frame:
    return Frame("inproc", "public/default", 300_000, 3_600_000, 5.0, 60.0, "leader", 1,
                 [BrokerLine("broker-1", 0.77, 8, 1234.0), BrokerLine("broker-2", None, 0, 0.0)],
                 moves, 0, len(moves))


def test_views_show_brokers_loads_moves_and_the_epoch() -> None:
    move = Move("transfer", "public/default/0x00000000_0x10000000", "broker-1", "broker-2",
                "Overloaded", ts_ms=125_000, epoch=1)
    console = Console(file=io.StringIO(), width=140, force_terminal=False)
    console.print(render(_frame([move])))
    screen = console.file.getvalue()  # type: ignore[attr-defined]
    assert "00:05:00 / 01:00:00" in screen and "leader epoch 1" in screen
    assert "█" in screen and "77.0%" in screen and "no report yet" in screen
    assert "0x00000000_0x10000000" in screen and "Overloaded" in screen
    out = io.StringIO()
    PlainView(out).update(_frame([move]), [move])
    lines = out.getvalue().splitlines()
    assert lines[0] == ("[00:02:05] transfer public/default/0x00000000_0x10000000  "
                        "broker-1 -> broker-2  Overloaded")
    assert lines[1].startswith("[00:05:00 / 01:00:00]") and "broker-1=77%(8)" in lines[1]


def test_a_hundred_brokers_show_as_a_spread_with_the_busiest_and_idlest() -> None:
    lines = [BrokerLine(f"broker-{i:03d}", i / 100, 655, 1000.0 * i) for i in range(1, 100)]
    lines.append(BrokerLine("broker-new", None, 0, 0.0))
    wide = Frame("inproc", "public/default", 60_000, 120_000, 5.0, 0.0, "leader", 1, lines, [], 0, 0)
    out = io.StringIO()
    PlainView(out).update(wide, [])
    line = out.getvalue().splitlines()[0]
    assert "100 brokers (99 reporting), 64845 bundles held" in line
    assert "min 1% p50 50% p90 90% max 99%" in line
    assert "busiest broker-099=99%(655)" in line and "idlest broker-001=1%(655)" in line
    assert "broker-050=" not in line and "broker-new" not in line  # the middle stays off the line
    console = Console(file=io.StringIO(), width=160, force_terminal=False)
    console.print(render(wide))
    screen = console.file.getvalue()  # type: ignore[attr-defined]
    assert "broker-099" in screen and "broker-001" in screen and "broker-050" not in screen
    assert "100 brokers (99 reporting)" in screen


def test_views_announce_each_expiry_once_and_say_how_far_behind_the_run_fell() -> None:
    late = Frame("ray", "public/default", 300_000, 3_600_000, 6.6, 60.0, "leader", 1,
                 [BrokerLine("broker-1", 0.5, 8, 10.0)], [], 0, 0, [(125_000, "broker-2")])
    assert late.pace().behind and late.pace().text() == "1.6 s behind (45.5x kept of 60x)"
    out = io.StringIO()
    view = PlainView(out)
    view.update(late, [])
    view.update(dataclasses.replace(late, elapsed_ms=310_000, wall_s=6.7), [])
    lines = out.getvalue().splitlines()
    expiries = [line for line in lines if "EXPIRED" in line]
    assert expiries == ["[00:02:05] EXPIRED  broker-2: no load report within the session timeout; "
                        "its bundles go to other brokers"]
    assert lines[1].endswith("| 1.6 s behind (45.5x kept of 60x)")
    console = Console(file=io.StringIO(), width=160, force_terminal=False)
    console.print(render(late))
    screen = console.file.getvalue()  # type: ignore[attr-defined]
    assert "1.6 s behind (45.5x kept of 60x)" in screen and "EXPIRED  broker-2" in screen
    on_time = dataclasses.replace(late, wall_s=5.2, expiries=[])
    console = Console(file=io.StringIO(), width=160, force_terminal=False)
    console.print(render(on_time))
    screen = console.file.getvalue()  # type: ignore[attr-defined]
    assert "behind" not in screen and "EXPIRED" not in screen


def test_run_stats_keep_expiries_not_graceful_leaves() -> None:
    stats = RunStats(start_ms=0)
    stats.fold([_record(0, "BrokerLeft", "broker-2", {"broker_id": "broker-2", "reason": "expired"}, 90_000),
                _record(1, "BrokerLeft", "broker-3", {"broker_id": "broker-3", "reason": "graceful"}, 95_000)])
    assert stats.expiries == [(90_000, "broker-2")]
