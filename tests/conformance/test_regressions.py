"""Disagreements `make conformance` once found, replayed without Java (tests/vectors/conformance/).

Each file holds the input, Pulsar 4.0's answer (from the oracle) and the command; `lbctl decide`
must now agree with Pulsar on it, by the rules of lbctl/conformance/compare.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lbctl.conformance import ours
from lbctl.conformance.compare import agree

SAVED = Path(__file__).resolve().parents[1] / "vectors" / "conformance"
CASES = sorted(SAVED.glob("*.json"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_saved_disagreement_now_agrees(path: Path) -> None:
    case = json.loads(path.read_text())
    assert agree(case["command"], ours(case["command"], case["input"]), case["pulsar"]), case.get("notes")


def test_there_are_saved_cases() -> None:
    assert len(CASES) >= 5
