"""``lbctl decide report``: whether a broker publishes its load report at each check (behaviour §3).

Invariants: checks are taken in order; the first one always publishes; a published report becomes
the one later checks compare with (``max(100·|Δ max usage|, pct(Σrate), pct(Σtput), pct(bundles))``
against ``loadBalancerReportUpdateThresholdPercentage``, or more than
``loadBalancerReportUpdateMaxIntervalMinutes`` since the last publication, or ``forced``). Input::

    {"config": {...}, "checks": [{"now_ms": 0, "report": <a decide shed broker record>, "forced": false}]}

Output: ``{"results": [true | false, ...]}``.
"""

from __future__ import annotations

from typing import Any

from balancer.errors import MalformedInput
from balancer.load import BrokerReport, should_publish_report
from lbctl.decide.inputs import broker_report, config_from, integer, known_keys, mapping


def run(document: dict[str, Any]) -> dict[str, Any]:
    known_keys(document, ("config", "checks"), "")
    config = config_from(document)
    checks = document.get("checks")
    if not isinstance(checks, list):
        raise MalformedInput(f"checks: expected a list, got {checks!r}", value="checks")
    last: BrokerReport | None = None
    last_ms = 0
    results = []
    for index, raw in enumerate(checks):
        where = f"checks[{index}]"
        check = mapping(raw, where, ("now_ms", "report", "forced"))
        now_ms = integer(check.get("now_ms"), f"{where}.now_ms")
        report = broker_report(f"{where}.report", check.get("report") or {})
        forced = check.get("forced", False)
        if not isinstance(forced, bool):
            raise MalformedInput(f"{where}.forced: expected true or false, got {forced!r}", value=forced)
        publish = should_publish_report(last, report, last_published_ms=last_ms, now_ms=now_ms,
                                        config=config, forced=forced)
        if publish:
            last, last_ms = report, now_ms
        results.append(publish)
    return {"results": results}
