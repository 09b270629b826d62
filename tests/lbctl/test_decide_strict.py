"""`lbctl decide` refuses what it does not understand: one line naming the bad key or value, exit 2.

The cases a user hit: a misspelled `brokerz` gave NoBrokers, a misspelled `stratgy` silently fell
back to ThresholdShedder, a NaN usage gave 8 unloads instead of 1, deep nesting and out-of-range
numbers ended in tracebacks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lbctl.main import main

BROKER = {"cpu": {"usage": 10, "limit": 100}, "msgThroughputIn": 1.0}


def _run(tmp_path: Path, command: str, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    source = tmp_path / "input.json"
    source.write_text(text)
    code = main(["decide", command, str(source)])
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize(
    ("command", "document", "message"),
    [
        ("shed", {"strategy": "OverloadShedder", "cycles": [{"now_ms": 1, "brokerz": {}}]},
         "cycles[0]: unknown key 'brokerz'; did you mean 'brokers'?"),
        ("shed", {"stratgy": "OverloadShedder", "cycles": [{"now_ms": 1, "brokers": {}}]},
         "unknown key 'stratgy'; did you mean 'strategy'?"),
        ("shed", {"cycles": [{"now_ms": 1, "brokers": {"a": {"cpu": {"usage": 10, "limt": 100}}}}]},
         "brokers.a.cpu: unknown key 'limt'; did you mean 'limit'?"),
        ("place", {"assign": [], "brokrs": {}}, "unknown key 'brokrs'; did you mean 'brokers'?"),
        ("split", {"algorithm": "range_equally_divide", "bundle": "a/b/0x00000000_0xffffffff", "topic": []},
         "unknown key 'topic'; did you mean 'topics'?"),
        ("accept", {"cases": [{"mode": "strict", "current": None, "incomming": None}]},
         "cases[0]: unknown key 'incomming'; did you mean 'incoming'?"),
    ],
)
def test_an_unknown_key_names_the_closest_valid_one(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    command: str, document: dict, message: str) -> None:
    code, err = _run(tmp_path, command, json.dumps(document), capsys)
    assert code == 2
    assert err.strip() == f"lbctl: error: {message}"


def test_a_nan_usage_is_named_not_shed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ('{"strategy": "ThresholdShedder", "cycles": [{"now_ms": 1, "brokers": '
            '{"a": {"cpu": {"usage": NaN, "limit": 100}}, "b": {}}}]}')
    code, err = _run(tmp_path, "shed", text, capsys)
    assert code == 2
    assert err.strip() == "lbctl: error: brokers.a.cpu.usage: nan is not a finite number"


@pytest.mark.parametrize(
    ("command", "text", "message"),
    [
        ("shed", '{"cycles": [{"now_ms": 1, "brokers": {"a": {"msgRateIn": Infinity}}}]}',
         "brokers.a.msgRateIn: inf is not a finite number"),
        ("shed", '{"cycles": [{"now_ms": 1e300, "brokers": {}}]}',
         "cycles[0].now_ms: 1e+300 is out of range; accepted: a signed 64-bit integer"),
        ("bundle", '{"namespace": "a/b", "bundles": 99999999999999999999999, "topics": []}',
         "bundles: 99999999999999999999999 is out of range; accepted: a signed 64-bit integer"),
        ("shed", '{"cycles": [{"now_ms": 1, "brokers": {"a": {"topics": -3}}}]}',
         "brokers.a.topics: -3 is out of range; accepted: an integer >= 0"),
        ("shed", '{"config": {"loadBalancerHistoryResourcePercentage": NaN}, "cycles": []}',
         "config: loadBalancerHistoryResourcePercentage: nan is not a number"),
    ],
)
def test_non_finite_and_out_of_range_numbers_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      command: str, text: str, message: str) -> None:
    code, err = _run(tmp_path, command, text, capsys)
    assert code == 2
    assert err.strip() == f"lbctl: error: {message}"


def test_deep_nesting_is_one_line_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(tmp_path, "shed", "[" * 100_000 + "]" * 100_000, capsys)
    assert code == 2
    assert err.count("\n") == 1 and "nested too deeply" in err
    code, err = _run(tmp_path, "shed", '{"cycles": ' + "[" * 100 + "]" * 100 + "}", capsys)
    assert code == 2
    assert "nested deeper than 64 levels" in err
