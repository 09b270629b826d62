"""What a Python, Spark or Pulsar user expects of the package, and the spec the
code cites living in the repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from balancer.errors import ConfigError, InvalidInput
from events.times import iso, parse_instant
from lbctl import main as lbctl_main
from spark_replay.session import check_jar_versions

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"\b(behaviour|contracts|infrastructure|ARCHITECTURE)(?:\.md)? ?§ ?(\d+(?:\.\d+)?)")
SPEC = {"behaviour": "spec/behaviour.md", "contracts": "spec/contracts.md",
        "infrastructure": "spec/infrastructure.md", "ARCHITECTURE": "design/README.md"}
"""What a citation names -> its page under docs/ (ARCHITECTURE is the map in docs/design)."""
PACKAGES = ("balancer", "events", "projections", "actors", "spark_replay", "lbctl", "bench")


def test_python_dash_m_lbctl_and_version_answer_like_any_python_tool() -> None:
    for argv in ([sys.executable, "-m", "lbctl", "--version"],):
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.returncode == 0 and re.fullmatch(r"lbctl \d+\.\d+\.\d+\S*\n", done.stdout)


def test_every_package_ships_py_typed() -> None:
    assert all((ROOT / package / "py.typed").is_file() for package in PACKAGES)


def test_a_bug_exits_3_with_its_traceback_not_1_like_a_finding(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(_: object) -> int:
        raise KeyError("surprise")

    parser = lbctl_main.build_parser()
    args = parser.parse_args(["sim", "--seed", "1"])
    monkeypatch.setattr(lbctl_main, "build_parser", lambda: _Fixed(args, broken))
    assert lbctl_main.main([]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyError: 'surprise'" in err and "internal error" in err


class _Fixed:
    def __init__(self, args: object, handler: object) -> None:
        self.args, self.handler = args, handler

    def parse_args(self, _: object) -> object:
        self.args.handler = self.handler  # type: ignore[attr-defined]
        return self.args


@pytest.mark.parametrize("text, ms", [
    ("2026-11-25T10:00:00Z", 1795600800000),
    ("2026-11-25T10:00:00.123Z", 1795600800123),
    ("2026-11-25T11:00:00+01:00", 1795600800000),
    ("2026-11-25T10:00:00", 1795600800000),  # naive: UTC
    ("1795600800123", 1795600800123),
])
def test_instants_are_typed_as_iso_or_epoch_ms(text: str, ms: int) -> None:
    assert parse_instant(text) == ms


def test_instants_print_as_iso_utc_and_read_back_exactly() -> None:
    assert iso(1795600800123) == "2026-11-25T10:00:00.123Z"
    assert parse_instant(iso(1795600800123)) == 1795600800123
    with pytest.raises(InvalidInput, match="'next tuesday'"):
        parse_instant("next tuesday")


def test_an_unreadable_time_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        lbctl_main.main(["log", "tail", "--log-dir", "x", "--from-ts", "soon"])
    assert exit_.value.code == 2 and "'soon'" in capsys.readouterr().err


def test_kafka_source_jars_of_another_spark_major_are_refused_by_name() -> None:
    check_jar_versions(["/j/spark-sql-kafka-0-10_2.13-4.2.0.jar"], "4.3.0")
    with pytest.raises(ConfigError, match=r"spark-sql-kafka-0-10_2.12-3.5.1.jar is Spark 3's .* PySpark is 4.3.0"):
        check_jar_versions(["/j/spark-sql-kafka-0-10_2.12-3.5.1.jar"], "4.3.0")


def _sections(page: Path) -> set[str]:
    return {m[1] for m in re.finditer(r"^#+ (?:\d+\. )?(\d+(?:\.\d+)?)[ .]", page.read_text(), re.M)}


def test_every_spec_section_the_code_cites_is_in_the_repository() -> None:
    sections = {name: _sections(ROOT / "docs" / page) for name, page in SPEC.items()}
    files = [p for package in (*PACKAGES, "tests", "docs") for p in (ROOT / package).rglob("*")
             if p.suffix in (".py", ".md") and "spec" not in p.parts]
    missing = sorted({f"{p.relative_to(ROOT)}: {m[1]} §{m[2]}" for p in files
                      for m in CITATION.finditer(p.read_text()) if m[2] not in sections[m[1]]})
    assert not missing, missing


def test_replay_takes_its_spark_master_from_the_flag_then_spark_submit_then_the_deployment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from lbctl.replay import SUBMITTED, _master

    deployment = tmp_path / "cluster.yaml"
    deployment.write_text("name: lb\nkafka:\n  bootstrap_servers: 127.0.0.1:9092\n"
                          "spark:\n  master: spark://spark-head:7077\n")
    monkeypatch.delenv(SUBMITTED, raising=False)
    assert _master(argparse.Namespace(master=None, cluster_conf=str(deployment))) == "spark://spark-head:7077"
    assert _master(argparse.Namespace(master="local[1]", cluster_conf=str(deployment))) == "local[1]"
    assert _master(argparse.Namespace(master=None, cluster_conf=None)) == "local[2]"
    monkeypatch.setenv(SUBMITTED, "1")
    assert _master(argparse.Namespace(master=None, cluster_conf=str(deployment))) is None


TRACKER = re.compile(r"\b[Ii]ssues? \d+\b")


def test_comments_give_reasons_not_tracker_numbers() -> None:
    # The tracker is not in the repository: a number in it tells a reader nothing. Public
    # trackers named with their project (Pulsar's, a client's) are fine.
    files = [p for package in (*PACKAGES, "web", "attach", "tests") for p in (ROOT / package).rglob("*.py")]
    cited = sorted(f"{p.relative_to(ROOT)}:{n}" for p in files
                   for n, line in enumerate(p.read_text().splitlines(), 1)
                   if TRACKER.search(line) and not re.search(r"(pulsar|client|apache|ray|kafka)[-\w/]* #?issues? \d", line, re.I)
                   and "TRACKER" not in line)
    assert not cited, cited
