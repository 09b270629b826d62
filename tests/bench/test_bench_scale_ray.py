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
    assert "target S1r: 10 x 65,536 in <= 60 s" in text


def test_a_size_that_stopped_says_how_far_it_got() -> None:
    text = scale_ray.render(scale_ray.rows([_size(1024, 189.0, owned=3)]))
    assert "stopped after 189 s: 3 of 1,024 bundles Owned" in text


def test_bad_sizes_or_settings_are_one_line() -> None:
    with pytest.raises(SystemExit, match="--sizes '10by2'"):
        scale_ray.main(["--sizes", "10by2"])
    with pytest.raises(SystemExit, match="--settings 'nope=1'"):
        scale_ray.main(["--settings", "nope=1"])
    with pytest.raises(SystemExit, match="--nodes 0: at least 1"):
        scale_ray.main(["--nodes", "0"])


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


def test_on_several_nodes_the_rows_are_s1r_50_and_s2r_50_with_placement_and_memory() -> None:
    size = {**_size(65536, 150.0), "brokers": 50, "nodes": 2, "brokers_per_node": [25, 25],
            "peak": {"rss": 9 << 30, "pss": 8 << 30, "processes": 61, "text": "peak memory: 8.00 GiB PSS"},
            "restart": {"seconds": 95.5, "registered_s": 20.25, "expired_s": 31.0, "owned": 65536,
                        "load_start": 3.0, "load_end": 5.0}}
    table = scale_ray.rows([size])
    assert [r["id"] for r in table] == ["S1r-50", "S2r-50"]
    text = scale_ray.render(table)
    assert "50 x 65,536 on 2 nodes" in text and "brokers per Ray node: 25, 25" in text
    assert "peak memory: 8.00 GiB PSS" in text
    assert "registered again after 20.2 s" in text and "95.5" in text
    assert "target S1r-50: 50 x 65,536 on 2 nodes in <= 180 s" in text
    assert "target S2r-50: a full restart of those 50 brokers in <= 180 s" in text


def test_a_restart_that_stopped_says_how_far_it_got() -> None:
    size = {**_size(1024, 10.0), "nodes": 2,
            "restart": {"seconds": 300.0, "registered_s": 12.0, "expired_s": 31.0, "owned": 1000,
                        "load_start": 3.0, "load_end": 5.0, "error": "stopped after 300 s: 1,000 of 1,024 bundles Owned"}}
    text = scale_ray.render(scale_ray.rows([size]))
    assert "S2r-10" in text and "stopped after 300 s: 1,000 of 1,024 bundles Owned" in text


def test_the_nodes_module_runs_50_brokers_on_2_nodes_with_a_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import scale_ray_nodes

    seen: list[list[str]] = []
    monkeypatch.setattr(scale_ray, "main", lambda argv: seen.append(list(argv)) or 0)
    scale_ray_nodes.main(["--json", "out.json"])
    scale_ray_nodes.main(["--quick"])
    assert seen[0] == ["--sizes", "50x65536", "--nodes", "2", "--restart", "--json", "out.json"]
    assert seen[1] == ["--sizes", "10x1024", "--nodes", "2", "--restart"]
