"""The replay verbs as Spark users expect them: a Parquet export verb, bounded
Kafka reads named as Spark names them, ISO-8601 instants in timelines, and the jobs run through
``spark-submit`` with the master spark-submit chose."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from events.log.port import Record
from events.times import parse_instant
from lbctl.main import main
from tests.spark.test_replay import _local

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def _log(tmp_path: Path, recorded: list[Record]) -> Path:
    asyncio.run(_local(tmp_path, recorded))
    return tmp_path / "log"


def test_export_parquet_writes_every_record_and_the_export_replays(
        spark: Any, recorded: list[Record], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path, recorded)
    assert main(["replay", "export-parquet", str(log), str(tmp_path / "out")]) == 0
    assert f"exported {len(recorded)} record(s)" in capsys.readouterr().out
    assert main(["replay", "audit", str(tmp_path / "out"), "--json"]) == 0


def test_timeline_prints_iso_instants_beside_the_epoch_ms(
        spark: Any, recorded: list[Record], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path, recorded)
    assert main(["replay", "timeline", str(log), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and all(r["from"].endswith("Z") and "T" in r["from"] for r in rows)
    assert all(parse_instant(r["from"]) == r["from_ts"] for r in rows)


def test_offset_bounds_on_a_non_kafka_source_are_refused_by_name(
        recorded: list[Record], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path, recorded)
    code = main(["replay", "audit", str(log), "--ending-offsets", "latest"])
    err = capsys.readouterr().err
    assert code == 2 and "Kafka source only" in err and len(err.splitlines()) == 1


def test_spark_submit_runs_the_audit_with_its_own_master(recorded: list[Record], tmp_path: Path) -> None:
    log = _log(tmp_path, recorded)
    submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([str(submit), "--master", "local[1]", "--driver-memory", "1g",
                           str(ROOT / "bin" / "spark-replay.py"), "audit", str(log), "--json"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    # spark-submit merges the driver's stderr (the progress lines) into its stdout.
    assert "auditing" in done.stdout
    assert not [line for line in done.stdout.splitlines() if line.startswith("{")]  # clean: no violation


@pytest.mark.parametrize(("verb", "source", "named"), [
    ("audit", "/no/such/log", "no such file or directory"),
    ("timeline", "kafka://127.0.0.1:1", "needs --topic"),
    ("whatif", str(ROOT / "docs"), "neither an event log"),
])
def test_a_source_that_cannot_be_read_is_one_line_before_spark_starts(
        verb: str, source: str, named: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark import SparkContext

    started = SparkContext._active_spark_context is not None
    assert main(["replay", verb, source]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("lbctl: error: source ") and named in err and "\n" not in err
    assert (SparkContext._active_spark_context is not None) == started  # no JVM was started for it


def test_a_clean_audit_lists_the_checks_it_ran_and_no_empty_table(
        spark: Any, recorded: list[Record], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path, recorded)
    assert main(["replay", "audit", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"audit: {len(recorded):,} records, 0 violation(s) (every check passed)" in out
    for check in ("seq_gap", "double_owner", "in_flight_timeout", "ranges_tile", "throttle_cap"):
        assert check in out
    assert "related offset" not in out and "None" not in out  # no table of violations when none
