"""`lbctl decide` against Pulsar 4.0's own classes on random inputs (make conformance's CI size).

Needs the jars of `make pulsar-jars` (`make test` fetches them first); without them this fails
with the command to run, it does not skip. Every family runs CASES inputs; a disagreement fails
with the family and the input, unless it starts where Pulsar leaves a tie to hash-map order
(docs/conformance.md).
"""

from __future__ import annotations

import json
import os

import pytest

from lbctl.conformance import run_family
from lbctl.conformance.generate import FAMILIES
from lbctl.conformance.oracle import libs_dir

CASES = int(os.environ.get("CONFORMANCE_CI_CASES", "200"))


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    if not (libs_dir() / "pulsar-broker-4.0.0.jar").is_file():
        pytest.fail(f"no Pulsar jars in {libs_dir()}: run 'make pulsar-jars' (make test does)")


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_agrees_with_pulsar(family: str) -> None:
    result = run_family(family, seed=7, count=CASES)
    assert result.cases == CASES
    assert result.agreeing + result.ties + result.documented == CASES, json.dumps(result.first)[:4000]
    assert result.ties <= CASES // 10, f"{result.ties} ties: the generator makes too many"
    assert result.documented <= CASES // 10, f"{result.documented} documented differences: too many"
