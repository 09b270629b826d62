"""`lbctl decide` on bad input: one line naming the bad value, exit status 2, nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

VECTORS = Path(__file__).resolve().parent.parent / "vectors"


def _lbctl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lbctl.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
    )


def _vector_input(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((VECTORS / name).read_text())["input"]
    return loaded


def _assert_rejected(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_stdin_is_read_with_a_dash() -> None:
    document = _vector_input("split-range-full.json")
    done = _lbctl("decide", "split", "-", stdin=json.dumps(document))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"boundaries": [0x7FFFFFFF]}


def test_malformed_json_names_the_position() -> None:
    _assert_rejected(_lbctl("decide", "shed", "-", stdin='{"strategy": '), "malformed JSON", "line 1")


def test_missing_file_is_named(tmp_path: Path) -> None:
    _assert_rejected(_lbctl("decide", "shed", str(tmp_path / "nope.json")), "nope.json")


def test_unknown_strategy_is_named() -> None:
    document = _vector_input("shed-threshold-docs-example.json")
    document["strategy"] = "MagicShedder"
    _assert_rejected(_lbctl("decide", "shed", "-", stdin=json.dumps(document)), "MagicShedder", "ThresholdShedder")


def test_unknown_config_key_is_named_with_the_closest_one() -> None:
    document = _vector_input("shed-threshold-docs-example.json")
    document["config"] = {"loadBalancerBrokerThresholdShedderPercent": 10}
    _assert_rejected(
        _lbctl("decide", "shed", "-", stdin=json.dumps(document)),
        "loadBalancerBrokerThresholdShedderPercent",
        "loadBalancerBrokerThresholdShedderPercentage",
    )


def test_a_bundle_that_is_not_a_range_is_named() -> None:
    document = _vector_input("split-range-full.json")
    document["bundle"] = "public/default/0x00000000_0xzzzzzzzz"
    _assert_rejected(_lbctl("decide", "split", "-", stdin=json.dumps(document)), "0x00000000_0xzzzzzzzz")


def test_a_split_of_a_one_hash_range_is_refused() -> None:
    document = _vector_input("split-range-full.json")
    document["bundle"] = "public/default/0x00000010_0x00000011"
    _assert_rejected(_lbctl("decide", "split", "-", stdin=json.dumps(document)), "0x00000010_0x00000011")


@pytest.mark.parametrize("field", ["now_ms", "brokers"])
def test_wrong_field_types_are_named(field: str) -> None:
    document = _vector_input("shed-threshold-docs-example.json")
    document["cycles"][0][field] = "soon"
    _assert_rejected(_lbctl("decide", "shed", "-", stdin=json.dumps(document)), field)
