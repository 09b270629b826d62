"""Table S's arithmetic and its smallest size: rows carry the smallest size's figure
and the growth exponent; a cold start places every bundle and a restart brings them all back."""

from __future__ import annotations

import asyncio
import math

from bench import scale


def test_growth_exponents() -> None:
    assert scale.exponent(1.0, 64.0, 1024, 65536) == 1.0
    assert abs(scale.exponent(2.0, 2.0, 10_000, 1_000_000)) < 1e-12  # flat
    assert math.isnan(scale.exponent(0.0, 1.0, 1, 2))


def test_rows_compare_each_size_with_the_smallest() -> None:
    sizes = [{"brokers": 10, "bundles": 1024, "cold_s": 1.0, "cold_wall_s": 2.0, "events_per_s": 2000.0,
              "restart_s": 0.5, "restart_wall_s": 1.0, "failover_s": 0.1, "failover_wall_s": 0.2,
              "history": 2100, "peak_mib": 40.0},
             {"brokers": 20, "bundles": 4096, "cold_s": 4.0, "cold_wall_s": 8.0, "events_per_s": 2000.0,
              "restart_s": 2.0, "restart_wall_s": 4.0, "failover_s": 0.4, "failover_wall_s": 0.8,
              "history": 8300, "peak_mib": 80.0},
             {"brokers": 100, "bundles": 65536, "error": "killed"}]
    table = scale.rows({"sizes": sizes, "history": [{"events": 10_000, "seconds": 0.1},
                                                     {"events": 100_000, "seconds": 0.1}]})
    s1 = [r for r in table if r["id"] == "S1" and "error" not in r]
    assert [round(r["exponent"], 6) for r in s1[1:]] == [1.0]
    assert [r["mib_per_10k"] for r in table if r["id"] == "S5"] == [40.0 / 1024 * 10_000, 80.0 / 4096 * 10_000]
    assert [round(r["exponent"], 6) for r in table if r["id"] == "S4"][1] == 0.0
    text = scale.render(table)
    assert "100 x 65,536" in text and "failed: killed" in text and "exponent 1.00" in text


def test_the_smallest_size_places_restarts_and_fails_over() -> None:
    row = asyncio.run(scale.one(3, 64))
    assert row["events"] >= 2 * 64  # assigned, then owned, each bundle
    assert row["cold_sim_ms"] > 0 and row["history"] > row["events"]
    assert row["peak_mib"] > 0
