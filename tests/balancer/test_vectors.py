"""Every file of tests/vectors passes through `lbctl decide` (a new file is a new test).

Comparison rules come from tests/vectors/README.md: exact equality, except `candidates` (a set)
and `brokerOneOf` (a random placement must land on one of the listed brokers).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lbctl.decide import decide

VECTOR_DIR = Path(__file__).resolve().parent.parent / "vectors"
VECTORS = sorted(VECTOR_DIR.glob("*.json"))


def _normalise_place(expected: dict[str, Any], got: dict[str, Any]) -> None:
    got_assignments = got.get("assignments", {})
    assert list(got_assignments) == list(expected["assignments"]), "assignment order differs"
    for bundle, want in expected["assignments"].items():
        have = got_assignments[bundle]
        assert sorted(have["candidates"]) == sorted(want["candidates"]), bundle
        if want.get("brokerOneOf") is not None:
            assert have["broker"] in want["brokerOneOf"], bundle
        else:
            assert have["broker"] == want["broker"], bundle


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_vector_passes_through_decide(path: Path) -> None:
    case = json.loads(path.read_text())
    got = decide(case["command"], case["input"])
    if case["command"] == "place":
        _normalise_place(case["expected"], got)
    else:
        assert got == case["expected"], case.get("notes", "")


def test_vectors_are_all_here() -> None:
    # The repo carries its own copy: a user's machine has no ../shared.
    assert len(VECTORS) >= 30


@pytest.mark.parametrize("path", VECTORS[:3], ids=[p.stem for p in VECTORS[:3]])
def test_vector_through_the_real_command_line(path: Path, tmp_path: Path) -> None:
    case = json.loads(path.read_text())
    source = tmp_path / "input.json"
    source.write_text(json.dumps(case["input"]))
    done = subprocess.run(
        [sys.executable, "-m", "lbctl.main", "decide", case["command"], str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    if case["command"] == "place":
        _normalise_place(case["expected"], got)
    else:
        assert got == case["expected"]


def test_a_vector_file_is_read_as_its_input(capsys: pytest.CaptureFixture[str]) -> None:
    from lbctl.main import main

    path = VECTOR_DIR / "split-topic-count-abc.json"
    assert main(["decide", "split", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(path.read_text())["expected"]
    assert main(["decide", "shed", str(path)]) == 2
    assert "'split' vector, not 'shed'" in capsys.readouterr().err
