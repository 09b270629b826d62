"""Disagreements `make conformance` once found, replayed without Java (tests/vectors/conformance/).

Each file holds the input, Pulsar 4.0's answer (from the oracle) and the command; `lbctl decide`
must now agree with Pulsar on it, by the rules of lbctl/conformance/compare.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lbctl.conformance import ours
from lbctl.conformance.compare import agree, documented

SAVED = Path(__file__).resolve().parents[1] / "vectors" / "conformance"
CASES = sorted(SAVED.glob("*.json"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_saved_disagreement_now_agrees(path: Path) -> None:
    case = json.loads(path.read_text())
    assert agree(case["command"], ours(case["command"], case["input"]), case["pulsar"]), case.get("notes")


DOCUMENTED = sorted((SAVED / "documented").glob("*.json"))


@pytest.mark.parametrize("path", DOCUMENTED, ids=[p.stem for p in DOCUMENTED])
def test_documented_difference_is_only_that(path: Path) -> None:
    """A deliberate difference (docs/conformance.md): `lbctl decide` still answers as saved, and the
    first cycle that differs from Pulsar differs only by what the difference names."""
    case = json.loads(path.read_text())
    mine = ours(case["command"], case["input"])
    assert mine == case["ours"]
    assert not agree(case["command"], mine, case["pulsar"])
    assert documented(case["command"], case["input"], mine, case["pulsar"]) == case["difference"]
    if case["difference"] == "PR #23626":  # Pulsar 4.0.0 also moves bundles of zero throughput
        cycle = next(i for i, (a, b) in enumerate(zip(mine["cycles"], case["pulsar"]["cycles"], strict=True))
                     if not agree("shed", {"cycles": [a]}, {"cycles": [b]}))
        bundles = case["input"]["cycles"][cycle]["bundles"]
        extra = {d["bundle"] for d in case["pulsar"]["cycles"][cycle]["decisions"]} - {
            d["bundle"] for d in mine["cycles"][cycle]["decisions"]}
        assert extra and all(bundles[b]["msgThroughputIn"] + bundles[b]["msgThroughputOut"] == 0 for b in extra)
        kept = [d for d in case["pulsar"]["cycles"][cycle]["decisions"] if d["bundle"] not in extra]
        assert agree("shed", {"cycles": [mine["cycles"][cycle]]},
                     {"cycles": [case["pulsar"]["cycles"][cycle] | {"decisions": kept}]})


def test_there_are_saved_cases() -> None:
    assert len(CASES) >= 5
