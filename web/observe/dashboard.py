"""The live dashboard's data: one JSON state, pushed as server-sent events, and a bundle's story.

- ``GET /bb/v1/dashboard/state``: the state once (what the page draws; the page itself comes with
  it drawn, ``web.observe.page``);
- ``GET /bb/v1/dashboard/events``: ``text/event-stream``; a ``state`` event at once and after
  every change of the log (at most every ``PUSH_EVERY_S``), a comment line as a heartbeat when
  nothing changed for ``HEARTBEAT_S``; the page's ``EventSource`` reconnects by itself; every
  stream ends when the service shuts down (``Observer.release``), so an open page never holds it;
- ``GET /bb/v1/dashboard/explain?bundle=ID``: ``Cluster.explain`` of the bundle, its current row,
  as JSON: ``moves`` (``projections.moves.Move.to_dict``: kind, route, label, reason, the
  decision with a placement's candidates and scores) and ``text``, the table ``lbctl explain``
  prints (an unknown bundle: 404 with one line naming it).

Invariants: every value comes from the observer and the client's views (``Cluster``); nothing
here sends a command. Times are cluster time in epoch milliseconds (the page prints them).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
from aiohttp import web

from balancer.bundles import BundleId, namespace_of
from balancer.errors import LoadBalancerError
from projections.explain import render
from web.observe.observer import Observer, move_row
from web.observe.whynot import rule, threshold_line

PUSH_EVERY_S = 0.5
HEARTBEAT_S = 10.0


def state(observer: Observer) -> dict[str, Any]:
    """Brokers with their load series, every namespace's ranges, moves, leader, anomalies."""
    cluster = observer.cluster
    leader = cluster.leader()
    brokers = [{"id": b.broker_id, "bundles": b.bundles, "domain": b.failure_domain,
                "series": [list(s) for s in observer.series.get(b.broker_id, ())]}
               for b in cluster.brokers()]
    return {
        "now_ms": cluster.now_ms(),
        "host": cluster.kind,
        "leader": {"id": leader.leader_id, "epoch": leader.epoch},
        "brokers": brokers,
        "namespaces": [{"name": ns, "bundles": _ranges(observer, ns)} for ns in cluster.namespaces()],
        "moves": [move_row(m) for m in reversed(observer.moves)],
        "anomalies": {"counts": dict(observer.anomaly_counts),
                      "recent": list(reversed(observer.recent_anomalies))},
        "balancer": observer.balancer,  # the status fetched in the background; None: none yet
        "why_not": observer.why_not.panel(cluster.config, observer.balancer),
        "threshold": _threshold(observer),
        "totals": {"unloads": sum(observer.tally.unload_bundles.values()),
                   "splits": sum(observer.tally.splits.values()),
                   "records": observer.version},
    }


def _threshold(observer: Observer) -> dict[str, Any]:
    """The configured shedder's overload line for the charts (percent; None: not a usage level)."""
    config = observer.cluster.config
    strategy = config.load_balancer_load_shedding_strategy
    values = [samples[-1][1] for samples in observer.series.values() if samples]
    return {"strategy": strategy, "percent": threshold_line(strategy, config, values),
            "key": rule(strategy, config, values)["key"]}


def _ranges(observer: Observer, namespace: str) -> list[dict[str, Any]]:
    out = []
    for row in observer.cluster.bundles(namespace):
        hash_range = BundleId.parse(row.bundle).range
        out.append({"bundle": row.bundle, "lower": hash_range.lower, "upper": hash_range.upper,
                    "state": row.state, "owner": row.owner})
    return out


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def handlers(observer: Observer) -> list[web.RouteDef]:
    """The three routes above, over ``observer``."""

    async def get_state(request: web.Request) -> web.Response:
        return _json(state(observer))

    async def get_events(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        sent = -1
        with contextlib.suppress(ConnectionResetError):  # the page went away
            while not observer.closing:
                if observer.version != sent:
                    sent = observer.version
                    await response.write(b"event: state\ndata: " + orjson.dumps(state(observer)) + b"\n\n")
                    await asyncio.sleep(PUSH_EVERY_S)  # a burst of records is one push
                elif not await observer.wait_changed(HEARTBEAT_S):
                    await response.write(b": quiet\n\n")
        return response

    async def get_explain(request: web.Request) -> web.Response:
        bundle = request.query.get("bundle", "")
        row = _row_of(observer, bundle)
        if row is None:
            return _json({"error": f"bundle {bundle!r}: no such bundle in the current view"}, 404)
        try:
            moves = await observer.cluster.explain(bundle)
        except LoadBalancerError as exc:
            return _json({"error": str(exc)}, 503)
        return _json({"bundle": bundle, "row": row, "moves": [m.to_dict() for m in moves],
                      "text": render(bundle, moves)})

    return [web.get("/bb/v1/dashboard/state", get_state),
            web.get("/bb/v1/dashboard/events", get_events),
            web.get("/bb/v1/dashboard/explain", get_explain)]


def _row_of(observer: Observer, bundle: str) -> dict[str, Any] | None:
    namespace = namespace_of(bundle)
    if namespace not in observer.cluster.namespaces():
        return None
    for row in observer.cluster.bundles(namespace):
        if row.bundle == bundle:
            return {"state": row.state, "owner": row.owner, "src": row.src, "dst": row.dst,
                    "version": row.version, "updated_ms": row.updated_ms}
    return None
