"""`lbctl bench`: the runner over stub modules (no Ray, no Kafka, no Spark) and `--compare`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from bench import compare, runner
from bench.runner import Module
from lbctl.main import main

STUBS = {
    "with_json.py": """
        import json, sys
        args = sys.argv[1:]
        path = args[args.index("--json") + 1]
        quick = "--quick" in args
        print("T1 table", "quick" if quick else "full")
        json.dump({"rows": [{"id": "T1", "figure": 10.0 if quick else 20.0, "ratio": 0.5}]},
                  open(path, "w"))
        """,
    "fixed_file.py": """
        import json, pathlib
        out = pathlib.Path("results") / "fixed.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({"rows": [{"id": "T2", "scenario": "s", "strategy": "x",
                                             "max_mean": 1.2, "cycles": None}]}))
        print("T2 table")
        """,
    "stale.py": "print('forgot to write')\n",
    "boom.py": "import sys; print('oops', file=sys.stderr); sys.exit(3)\n",
}


@pytest.fixture()
def stubs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    package = tmp_path / "stubbench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in STUBS.items():
        (package / name).write_text(textwrap.dedent(text))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "stale.json").write_text('{"rows": []}')  # from an earlier run
    monkeypatch.syspath_prepend(str(tmp_path))
    suite = (
        Module("stubbench.with_json", ("T1",), "json flag"),
        Module("stubbench.fixed_file", ("T2",), "fixed file", json_flag=False,
               result_file="results/fixed.json"),
        Module("stubbench.missing", ("T3", "T4"), "not there", json_flag=False,
               result_file="results/missing.json"),
        Module("stubbench.stale", ("T5",), "stale file", json_flag=False,
               result_file="results/stale.json"),
        Module("stubbench.boom", ("T6",), "fails"),
    )
    return {"root": tmp_path, "suite": suite, "env": runner.child_env([str(tmp_path)])}


def _run(stubs: dict[str, Any], quick: bool = True) -> dict[str, Any]:
    return runner.run_suite(stubs["suite"], quick, env=stubs["env"], start_kafka=False,
                            root=stubs["root"])


def test_the_runner_records_every_module_with_its_status(stubs: dict[str, Any]) -> None:
    seen: list[tuple[str, str | None]] = []
    record = runner.run_suite(stubs["suite"], True, env=stubs["env"], start_kafka=False,
                              root=stubs["root"],
                              listener=lambda m, o: seen.append((m.name, o and o.status)))
    status = {m["module"]: m["status"] for m in record["modules"]}
    assert status == {"stubbench.with_json": "ok", "stubbench.fixed_file": "ok",
                      "stubbench.missing": "missing", "stubbench.stale": "failed",
                      "stubbench.boom": "failed"}
    assert seen[:2] == [("stubbench.with_json", None), ("stubbench.with_json", "ok")]
    by_name = {m["module"]: m for m in record["modules"]}
    assert by_name["stubbench.with_json"]["data"]["rows"][0]["figure"] == 10.0
    assert "T1 table quick" in by_name["stubbench.with_json"]["output"]
    assert "no result JSON" in by_name["stubbench.stale"]["error"]
    assert "exit status 3" in by_name["stubbench.boom"]["error"] and "oops" in by_name["stubbench.boom"]["error"]
    assert set(record["versions"]) == {"python", "ray", "aiokafka", "pyspark", "kafka"}
    assert {"cores", "memory_gib"} <= set(record["machine"])
    text = runner.render_run(record)
    assert "T3 T4: not run (module missing)" in text and "cores" in text and "T2 table" in text


def test_run_files_are_timestamped_and_compare_shows_the_change(stubs: dict[str, Any], tmp_path: Path) -> None:
    old = _run(stubs, quick=True)
    new = _run(stubs, quick=False)
    new["started"] = "2099-01-01T00:00:00Z"
    old_path, new_path = runner.write_run(old, tmp_path / "out"), runner.write_run(new, tmp_path / "out")
    assert old_path.name.startswith("run-") and old_path.name.endswith("-quick.json")
    assert new_path.name == "run-20990101T000000Z.json"
    text = compare.compare(compare.load(old_path), compare.load(new_path))
    assert "warning: one run is --quick" in text
    line = next(x for x in text.splitlines() if x.startswith("T1") and "figure" in x)
    assert "+100.0%" in line and "better" in line
    assert any(x.startswith("T2 s x") and "max_mean" in x and "=" in x for x in text.splitlines())


def test_compare_matches_rows_by_identity_and_lists_added_and_gone() -> None:
    def record(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {"started": "t", "machine": {"cores": 2}, "versions": {},
                "modules": [{"data": {"rows": rows}}]}
    old = record([{"id": "B", "scenario": "a", "strategy": "S", "max_mean": 1.2, "cycles": 3},
                  {"id": "A9", "brokers": 10, "bundles": 1000, "cycle_ms": 1.0}])
    new = record([{"id": "B", "scenario": "a", "strategy": "S", "max_mean": 1.0, "cycles": None},
                  {"id": "A1", "figure": 5.0, "reference": 6.0, "ratio": 0.8}])
    text = compare.compare(old, new)
    assert "A9 10 1000" in text and "(gone)" in text and "(added)" in text
    row = next(x for x in text.splitlines() if "max_mean" in x)
    assert "-16.7%" in row and "better" in row
    assert any("cycles" in x and "never" in x and "changed" in x for x in text.splitlines())


def test_only_selects_modules_by_table_and_rejects_unknown_tables() -> None:
    assert [m.name for m in runner.select(runner.SUITE, "a1, b")] == ["bench.eventlog", "bench.quality"]
    assert runner.select(runner.SUITE, None) == [m for m in runner.SUITE if not m.on_request]
    assert [m.name for m in runner.select(runner.SUITE, "s1r")] == ["bench.scale_ray"]  # on request
    assert [m.name for m in runner.select(runner.SUITE, "p3")] == ["bench.pulsar_drive"]  # a real Pulsar
    assert {i for m in runner.SUITE for i in m.ids} >= {f"A{i}" for i in range(1, 12)} | {"B"} | {f"S{i}" for i in range(1, 6)}
    with pytest.raises(ValueError, match="A12"):
        runner.select(runner.SUITE, "A12")


def test_cli_bad_only_and_bad_compare_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--only", "Z9"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rows": []}))
    assert main(["bench", "--compare", str(bad), str(bad)]) == 2
    assert "not an `lbctl bench` run file" in capsys.readouterr().err


def test_cli_runs_the_selected_tables_and_writes_one_run_file(
        stubs: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runner, "SUITE", stubs["suite"][:3])
    monkeypatch.setattr(runner, "ROOT", stubs["root"])
    monkeypatch.setenv("PYTHONPATH", str(stubs["root"]))
    out = tmp_path / "runs"
    original = runner.run_suite
    monkeypatch.setattr(runner, "run_suite", lambda modules, quick, **kw: original(
        modules, quick, root=stubs["root"], start_kafka=False, **kw))
    assert main(["bench", "--quick", "--only", "T1,T3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "T1 table quick" in printed and "T3 T4: not run (module missing)" in printed
    [written] = list(out.glob("run-*-quick.json"))
    assert [m["status"] for m in json.loads(written.read_text())["modules"]] == ["ok", "missing"]
