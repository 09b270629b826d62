"""`reportAgeMs` in `lbctl decide shed`: a broker's report dated before the cycle's `now_ms`.

The extensible manager reads the report's time twice (behaviour §4.4): load data older than
`loadBalancerBrokerLoadDataTTLInSeconds` is left out (all of it: Skip/OutDatedData), and a source
broker's cool-down counts from its last unload to its report's time, not to `now_ms`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from balancer.errors import MalformedInput
from lbctl.decide import decide

BASE = json.loads((Path(__file__).resolve().parents[1] / "vectors" / "shed-transfer-base.json").read_text())


def _document() -> dict[str, Any]:
    return copy.deepcopy(BASE["input"])


def test_reports_older_than_the_ttl_are_all_outdated() -> None:
    document = _document()
    for report in document["cycles"][0]["brokers"].values():
        report["reportAgeMs"] = 1_801_000  # default TTL 1800 s
    assert decide("shed", document)["cycles"][0] == {"decisions": [], "skip": "OutDatedData"}


def test_a_report_just_inside_the_ttl_counts() -> None:
    document = _document()
    for report in document["cycles"][0]["brokers"].values():
        report["reportAgeMs"] = 1_799_000
    assert len(decide("shed", document)["cycles"][0]["decisions"]) == 2


def test_the_cool_down_counts_to_the_report_time() -> None:
    document = _document()
    later = copy.deepcopy(document["cycles"][0])
    later["now_ms"] += 181_000  # past the 180 s delay by now_ms ...
    fresh = decide("shed", document | {"cycles": [document["cycles"][0], later]})["cycles"][1]
    assert fresh["skip"] != "CoolDown"
    for report in later["brokers"].values():
        report["reportAgeMs"] = 2_000  # ... but the reports were published 179 s after the unloads
    stale = decide("shed", document | {"cycles": [document["cycles"][0], later]})["cycles"][1]
    assert stale == {"decisions": [], "skip": "CoolDown"}


def test_a_negative_age_is_refused() -> None:
    document = _document()
    document["cycles"][0]["brokers"]["broker1"]["reportAgeMs"] = -1
    with pytest.raises(MalformedInput, match="reportAgeMs"):
        decide("shed", document)
