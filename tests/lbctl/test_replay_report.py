"""The replay report as a reader sees it, built from a what-if result without Spark: labelled
columns with units, no ``None``, the best configuration named, identical configurations marked,
plots against time; the audit lists the checks it ran and shows no empty table."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from rich.console import Console

from spark_replay.audit import CHECKS, AuditReport, Violation
from spark_replay.report import (
    audit_tables,
    best_line,
    plots,
    summary_frame,
    whatif_table,
    write_report,
)
from spark_replay.whatif import GridConfig, Recording, WhatIf, twins

KEY = "loadBalancerLoadSheddingStrategy"
PCT = "loadBalancerBrokerThresholdShedderPercentage"
GRID = [GridConfig("ThresholdShedder (live config)", ((KEY, "ThresholdShedder"),)),
        GridConfig(f"ThresholdShedder {PCT}=10", ((KEY, "ThresholdShedder"), (PCT, 10))),
        GridConfig(f"PlannedTransferShedder {PCT}=5", ((KEY, "PlannedTransferShedder"), (PCT, 5))),
        GridConfig(f"PlannedTransferShedder {PCT}=10", ((KEY, "PlannedTransferShedder"), (PCT, 10)))]
CYCLES = 60


def _run(config_id: int, settle_at: int, moves_at: list[int], low: float = 0.52) -> list[dict[str, object]]:
    rows = []
    for c in range(CYCLES):
        high = 0.9 if c < settle_at else low
        rows.append({"config_id": config_id, "cycle": c, "max_over_mean": high / 0.5, "std": 0.3 if c < settle_at else 0.02,
                     "moves": moves_at.count(c), "flaps": 0,
                     "usages": json.dumps({"b1": high, "b2": 0.5, "b3": 0.5}),
                     "moved": json.dumps([f"ns/b{c}|b1|b2|Overloaded"] * moves_at.count(c))})
    return rows


def result() -> WhatIf:
    live = _run(0, 8, [2, 3])
    cycles = pd.DataFrame([*live, *[dict(r, config_id=1) for r in live],  # the same settings
                           *_run(2, 4, [1, 2, 3], 0.505),
                           *[dict(r, config_id=3) for r in _run(2, 4, [1, 2, 3], 0.505)]])  # the same run
    recording = Recording(start_ms=1_795_600_800_000, interval_ms=60_000, brokers={}, owners={},
                          trace=[{}] * CYCLES, usages=[{"b1": 0.7, "b2": 0.5}] * CYCLES,
                          moves=[(2, "ns/b", "b1", "b2", "Overloaded")], strategy="ThresholdShedder")
    from spark_replay.whatif import summarize

    ranked = summarize(cycles, GRID)
    same = twins(cycles, GRID)
    ranked["same_as"] = [f"same {same[i][0]} as {GRID[same[i][1]].label}" if i in same else ""
                         for i in ranked.pop("config_id")]
    recorded = {"config": "as recorded (ThresholdShedder)", "max_over_mean": 1.4, "std": 0.1, "moves": 1,
                "flaps": 0, "settle_cycles": None, "reproduced": 1.0, "decisions": 1, "not_replayed": "split 2"}
    summary = pd.DataFrame([*ranked.to_dict(orient="records"), recorded])
    return WhatIf(summary, cycles, GRID, recording)


def test_twins_are_the_same_settings_or_the_same_run() -> None:
    found = result()
    assert twins(found.cycles, GRID) == {1: ("settings", 0), 3: ("result", 2)}


def test_the_table_has_units_no_none_and_names_the_best_and_the_twins() -> None:
    found = result()
    frame = summary_frame(found)
    assert list(frame.columns)[:4] == ["#", "configuration", "max/mean\n(settled)",
                                       "std, pp\n(settled)"]
    assert "settled\nat (min)" in frame.columns and "reproduced\n(%)" in frame.columns
    text = frame.to_string()
    assert "None" not in text and "nan" not in text.lower()
    first = frame.iloc[0]
    assert first["configuration"].startswith("PlannedTransferShedder") and first["note"].startswith("best")
    notes = dict(zip(frame["configuration"], frame["note"], strict=True))
    assert notes[f"PlannedTransferShedder {PCT}=10"] == "same result as #1"
    assert notes[f"ThresholdShedder {PCT}=10"] == "same settings as #3"
    assert frame.iloc[2]["configuration"] == "ThresholdShedder (live config)"
    recorded = frame.iloc[-1]
    assert (recorded["#"], recorded["settled\nat (min)"], recorded["reproduced\n(%)"]) == ("-", "never", "100")
    assert first["settled\nat (min)"] == "4"
    line = best_line(found)
    assert line.startswith(f"best: PlannedTransferShedder {PCT}=5 (tied with PlannedTransferShedder {PCT}=10)")
    assert "as recorded: 1.400 with 1 moves" in line
    console = Console(record=True, width=250)
    console.print(whatif_table(found))
    shown = console.export_text()
    assert "best: PlannedTransferShedder" in shown and "None" not in shown


def test_the_plots_are_drawn_against_time_with_a_zoom_on_the_moves(tmp_path: Path) -> None:
    images = plots(result())
    assert set(images) == {"broker_load.png", "moves.png"}
    assert all(data.startswith(b"\x89PNG") and len(data) > 20_000 for data in images.values())


def _report(violations: tuple[Violation, ...] = ()) -> AuditReport:
    return AuditReport(1234, violations, 1_795_600_800_000, 30_000, 500,
                       tuple(name for name, _ in CHECKS if name != "throttle_cap"))


def test_a_clean_audit_lists_its_checks_and_prints_no_empty_table() -> None:
    tables = audit_tables(_report())
    assert len(tables) == 1
    console = Console(record=True, width=200)
    console.print(tables[0])
    shown = console.export_text()
    assert "audit: 1,234 records, 0 violation(s) (every check passed)" in shown
    assert all(name in shown for name, _ in CHECKS if name != "throttle_cap") and "throttle_cap" not in shown


def test_a_violation_keeps_its_check_key_bundle_and_offsets_whole_beside_a_long_topic_and_detail() -> None:
    found = Violation("seq_repeat", "sec-b9017f3a-events-with-a-long-prefix", "broker-12",
                      "public/default/0x40000000_0x80000000", 0, 592, 590, 1_795_600_800_000,
                      "seq 148 after 148 (duplicate or out of order: " + "x" * 120 + ")")
    console = Console(record=True, width=160)  # lbctl's width where stdout is no terminal
    console.print(audit_tables(_report((found,)))[1])
    text = console.export_text()
    assert "…" not in text, text
    for whole in ("seq_repeat", "broker-12", "public/default/0x40000000_0x80000000", "592", "590"):
        assert whole in text, (whole, text)


def test_violations_come_after_the_checks_with_their_instants_in_utc(tmp_path: Path) -> None:
    found = Violation("double_owner", "events", "ns", "ns/b", 0, 17, 12, 1_795_600_800_000, "owned by b2 while b1 owns it")
    tables = audit_tables(_report((found,)))
    assert len(tables) == 2
    console = Console(record=True, width=250)
    for shown in tables:
        console.print(shown)
    text = console.export_text()
    assert "double_owner: 1" in text and "2026-11-25T10:00:00.000Z" in text and "related offset" in text
    html = write_report(tmp_path, result(), _report((found,))).read_text()
    assert "best: PlannedTransferShedder" in html and "what it holds" in html and "None" not in html
