"""S6 (bench/report_traffic.py): in a steady run, brokers' reports carry what changed."""

from __future__ import annotations

from bench import report_traffic
from events.report_parts import FULL_EVERY


async def test_a_steady_run_reports_few_bundle_entries_and_a_full_report_now_and_then() -> None:
    row = await report_traffic.steady(4, 256, window_ms=240_000)
    # A full report every 10 s heartbeat would be 6 entries per bundle a minute.
    assert row["reports"] >= 4 * 24 - 4
    assert row["full_reports"] <= -(-row["reports"] // FULL_EVERY) + 4
    assert 0 < row["entries_per_bundle_minute"] <= 6 / 4
    assert "bytes per bundle per minute" in report_traffic.render(row)
