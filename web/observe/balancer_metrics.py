"""``bb_balancer_*``: the balancer's status (``lbctl balancer status``) as Prometheus gauges.

Invariants: built from the status the observer last fetched in the background (never during
a scrape); before the first fetch, or when the status could not be fetched, only
``bb_balancer_status_up`` 0 is exported; every state is one series of ``bb_balancer_state``
(1 for the current one, 0 for the others), so an alert can say ``state="stalled"``; each
drained broker is one series of ``bb_balancer_drain_bundles_left`` (none when nothing drains).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from actors.control_status import STATES


def balancer_families(status: Mapping[str, Any] | None, c: str) -> Iterable[Metric]:
    up = GaugeMetricFamily("bb_balancer_status_up", "1 when the balancer's status was fetched "
                           "from the leader at the last try", labels=["cluster"])
    up.add_metric([c], 0 if status is None else 1)
    yield up
    if status is None:
        return
    state = GaugeMetricFamily("bb_balancer_state", "The balancer's state: 1 for the current one "
                              "(idle, executing, draining, paused, stalled)", labels=["cluster", "state"])
    for name in STATES:
        state.add_metric([c, name], 1 if status["state"] == name else 0)
    stalled = GaugeMetricFamily("bb_balancer_stalled_reasons", "Reasons the balancer is stalled "
                                "(no leader, a move in flight too long, stale load data, fold lag)",
                                labels=["cluster"])
    stalled.add_metric([c], len(status.get("stalled") or ()))
    yield from (state, stalled)
    pause = status.get("paused")
    until = GaugeMetricFamily("bb_balancer_paused_until_seconds", "End of the operator's pause, "
                              "cluster time in seconds since the epoch (0: not paused)", labels=["cluster"])
    until.add_metric([c], 0 if pause is None else pause["untilMs"] / 1000)
    yield until
    yield from _drains(status.get("draining") or (), c)
    proposals = status.get("proposals") or {}
    pending = GaugeMetricFamily("bb_balancer_proposals_pending", "Proposals waiting for an approval "
                                "(loadBalancerExecution=review)", labels=["cluster"])
    pending.add_metric([c], int(proposals.get("pending") or 0))
    yield pending
    throttle = status.get("throttle")
    if throttle is None:
        return
    flying = GaugeMetricFamily("bb_balancer_moves_in_flight", "Shedding moves in flight",
                               labels=["cluster"])
    flying.add_metric([c], throttle["inFlight"])
    queued = GaugeMetricFamily("bb_balancer_moves_queued", "Shedding moves waiting for the throttle",
                               labels=["cluster"])
    queued.add_metric([c], len(throttle["queue"]))
    hour = GaugeMetricFamily("bb_balancer_moves_last_hour", "Shedding moves started in the last "
                             "hour of cluster time", labels=["cluster"])
    hour.add_metric([c], status.get("movesLastHour") or 0)
    caps = GaugeMetricFamily("bb_balancer_throttle_cap", "The throttle's caps: per_broker and "
                             "cluster (moves in flight), per_minute (moves started)", labels=["cluster", "cap"])
    for name, key in (("per_broker", "perBroker"), ("cluster", "cluster"), ("per_minute", "perMinute")):
        caps.add_metric([c, name], throttle["caps"][key])
    yield from (flying, queued, hour, caps)


def _drains(drains: Iterable[Mapping[str, Any]], c: str) -> Iterable[Metric]:
    """One series per drained broker: the bundles it still holds, and its drain's rate."""
    left = GaugeMetricFamily("bb_balancer_drain_bundles_left", "Bundles a drained broker still "
                             "holds (0: empty, waiting for its restart or undrain)", labels=["cluster", "broker"])
    rate = GaugeMetricFamily("bb_balancer_drain_rate_per_minute", "A drained broker's drain rate, "
                             "moves per minute", labels=["cluster", "broker"])
    for drain in drains:
        left.add_metric([c, str(drain["broker"])], drain["left"])
        rate.add_metric([c, str(drain["broker"])], drain["ratePerMinute"])
    yield from (left, rate)
