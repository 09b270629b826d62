"""S1r's table (bench/scale_ray.py) without running it: what a reader of the row sees."""

from __future__ import annotations

import pytest

from bench import scale_ray


def _size(bundles: int, seconds: float, owned: int | None = None) -> dict[str, object]:
    row: dict[str, object] = {"brokers": 10, "bundles": bundles, "seconds": seconds, "events": 2 * bundles,
                              "events_per_s": 2 * bundles / seconds, "owned": owned or bundles,
                              "load_start": 4.0, "load_end": 9.5, "settings": "defaults"}
    if owned is not None:
        row["error"] = f"stopped after {seconds:.0f} s: {owned:,} of {bundles:,} bundles Owned"
    return row


def test_a_row_shows_seconds_events_growth_and_the_load_beside_it() -> None:
    table = scale_ray.rows([_size(1024, 10.0), _size(8192, 80.0)])
    assert table[1]["exponent"] == pytest.approx(1.0)
    text = scale_ray.render(table)
    assert "10 x 8,192" in text and "exponent 1.00" in text and "4.0 -> 9.5" in text
    assert "target: 10 x 65,536 in <= 60 s" in text


def test_a_size_that_stopped_says_how_far_it_got() -> None:
    text = scale_ray.render(scale_ray.rows([_size(1024, 189.0, owned=3)]))
    assert "stopped after 189 s: 3 of 1,024 bundles Owned" in text


def test_bad_sizes_or_settings_are_one_line() -> None:
    with pytest.raises(SystemExit, match="--sizes '10by2'"):
        scale_ray.main(["--sizes", "10by2"])
    with pytest.raises(SystemExit, match="--settings 'nope=1'"):
        scale_ray.main(["--settings", "nope=1"])


def test_the_storm_counts_and_an_actors_profile_are_printed() -> None:
    actors = {"clients": {"sends": 70_000, "failed_sends": 3}, "leader": {"commands": 65_600, "sends": 65_536},
              "ns": {"commands": 140_000, "appends": 150}, "broker": {"sends": 66_000, "failed_sends": 0}}
    row = {**_size(65536, 50.0), "actors": actors,
           "profiles": {"leader": {"samples": 100, "busy": 80,
                                   "self": [["load.py:add", 20, 25.0]],
                                   "total": [["threading.py:run", 80, 100.0], ["leader.py:fold_more", 40, 50.0]]}}}
    table = scale_ray.rows([row])
    assert "lookups sent 70,000" in scale_ray.render(table) and "failed sends 3" in scale_ray.render(table)
    text = scale_ray.render_profiles(table)
    assert "load.py:add" in text and "leader.py:fold_more" in text and "threading.py" not in text
