"""``balancer status``: idle, executing, draining, paused or stalled, and why, from the leader's own words.

Invariants:
- the figures are the leading body's (its pause, throttle and last cycle, ``LeaderBody.status``)
  at its own time; the client adds only what it sees better: how far the log goes (the fold
  lag) and which registered brokers it knows;
- stalled wins over paused, paused over draining, draining over executing: a reason to act
  comes first; a drain holds until its undrain, the broker empty or not; every reason
  for stalled is listed, one line each (no leader; a move in flight longer than
  ``loadBalancerStalledMoveSeconds``; brokers without a load report for
  ``loadBalancerStalledLoadReportSeconds``; the leader's fold ``loadBalancerStalledFoldLagRecords``
  records or more behind the log);
- reading the status sends no command and appends nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from balancer.config import LoadBalancerConfig

STATES = ("idle", "executing", "draining", "paused", "stalled")


def fold_lag(log_end: Mapping[Any, int], leader_at: Mapping[Any, int]) -> int:
    """Records the leader has not read of those the log holds (positions: partition -> next)."""
    theirs = {int(p): int(o) for p, o in leader_at.items()}
    return sum(max(0, int(end) - theirs.get(int(p), 0)) for p, end in log_end.items())


def leader_of(statuses: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    leading = [s for s in statuses.values() if s.get("leads") and isinstance(s.get("control"), dict)]
    return max(leading, key=lambda s: int(s.get("my_epoch") or 0), default=None)


def status_document(config: LoadBalancerConfig, leader: Mapping[str, Any] | None,
                    log_end: Mapping[Any, int], brokers: Iterable[str]) -> dict[str, Any]:
    """The status of the balancer (see the module's invariants)."""
    if leader is None:
        return {"state": "stalled", "stalled": ["no leader: no body holds the newest epoch"],
                "leader": None, "paused": None, "draining": None, "throttle": None, "lastCycle": None,
                "movesLastHour": None, "foldLag": None, "proposals": None}
    control: dict[str, Any] = dict(leader["control"])
    control["nowMs"] = now = max(int(control["nowMs"]), int(leader.get("now_ms") or 0))
    pause = control["paused"]
    if pause is not None and now >= int(pause["untilMs"]):
        control["paused"] = None  # its time is up; the leader records the end at its next tick
    lag = fold_lag(log_end, leader.get("position") or {})
    reasons = _stalled(config, control, lag, leader.get("load_seen") or {}, brokers)
    reasons += [str(r) for r in control.get("stalled") or ()]  # what only that leader can tell
    throttle = control["throttle"]
    waiting = len(throttle["queue"]) + int(throttle["inFlight"])
    if reasons:
        state = "stalled"
    elif control["paused"] is not None:
        state = "paused"
    elif control.get("drains"):
        state = "draining"
    else:
        state = "executing" if waiting else "idle"
    planned = max(int(control["lastCycle"]["moves"]), waiting)
    return {"state": state, "stalled": reasons, "leader": leader.get("name"), "epoch": leader.get("my_epoch"),
            "nowMs": control["nowMs"], "paused": control["paused"],
            "executing": {"done": planned - waiting, "of": planned} if waiting else None,
            "draining": list(control.get("drains") or []),
            "throttle": throttle, "lastCycle": control["lastCycle"],
            "movesLastHour": control["movesLastHour"], "foldLag": lag, "maxPauseMs": control["maxPauseMs"],
            "proposals": leader.get("proposals")}


def _stalled(config: LoadBalancerConfig, control: Mapping[str, Any], lag: int,
             seen: Mapping[str, int], brokers: Iterable[str]) -> list[str]:
    now = int(control["nowMs"])
    out: list[str] = []
    oldest = int(control["oldestMoveMs"])
    if oldest > config.load_balancer_stalled_move_seconds * 1000:
        out.append(f"a move has been in flight {oldest // 1000} s "
                   f"(loadBalancerStalledMoveSeconds={config.load_balancer_stalled_move_seconds})")
    bound = config.load_balancer_stalled_load_report_seconds * 1000
    rule = f"loadBalancerStalledLoadReportSeconds={config.load_balancer_stalled_load_report_seconds}"
    if isinstance(control.get("loadReportBound"), Mapping):  # a leader whose brokers report less often
        bound, rule = int(control["loadReportBound"]["ms"]), str(control["loadReportBound"]["rule"])
    # A broker not heard from counts from when the leader began to watch (-inf: the log's start).
    since = int(control.get("watchingSinceMs", -(1 << 62)))
    silent = sorted(b for b in brokers if now - max(since, int(seen.get(b, -(1 << 62)))) > bound)
    if silent and now > bound:  # a cluster younger than the bound has not had the time
        out.append(f"no fresh load data from {', '.join(silent)} ({rule})")
    if lag >= config.load_balancer_stalled_fold_lag_records:
        out.append(f"the leader's fold is {lag} records behind the log "
                   f"(loadBalancerStalledFoldLagRecords={config.load_balancer_stalled_fold_lag_records})")
    return out


def mirrored_status(url: str) -> dict[str, Any]:
    """The status of a state directory that mirrors a real Pulsar (``lbctl attach``): no leader
    of the project's runs there, so none can be stalled, paused or throttled."""
    return {"state": "mirrored", "stalled": [], "leader": None, "paused": None, "throttle": None,
            "lastCycle": None, "movesLastHour": None, "foldLag": None,
            "detail": f"Pulsar at {url} balances this cluster (its own shedding, or lbctl attach "
                      "--mode drive); this state directory mirrors it"}


def status_text(document: Mapping[str, Any]) -> str:
    """The status as ``lbctl balancer status`` prints it."""
    state = str(document["state"])
    if state == "mirrored":
        return f"state: mirrored\n  {document['detail']}"
    lines = [f"state: {_headline(document)}"]
    for reason in document.get("stalled") or ():
        lines.append(f"  stalled: {reason}")
    if state != "stalled" or document.get("leader") is not None:
        last, throttle = document["lastCycle"], document["throttle"]
        outcome = "none yet" if last["atMs"] is None else f"at {last['atMs']} ms: {last['outcome']}" + (
            f" ({last['moves']} move(s))" if last["moves"] else "")
        caps = throttle["caps"]
        lines += [f"leader: {document['leader']} (epoch {document['epoch']}), cluster time {document['nowMs']} ms",
                  f"last cycle: {outcome}",
                  f"moves in the last hour: {document['movesLastHour']}",
                  *_proposals_line(document.get("proposals")),
                  f"throttle: {throttle['inFlight']} in flight, {len(throttle['queue'])} queued; caps "
                  f"{caps['perBroker']}/broker, {caps['cluster']} in the cluster, {caps['perMinute']}/min"]
        lines += [f"  queued: {q['bundle']} (from {q['src']})" for q in throttle["queue"]]
        lines += [f"draining: {_drain_line(d)}" for d in document.get("draining") or ()]
    return "\n".join(lines)


def _drain_line(drain: Mapping[str, Any]) -> str:
    total = max(int(drain["bundles"]), int(drain["left"]))
    away = "" if drain.get("registered", True) else ", restarting"
    stays = int(drain.get("stays", 0))  # bundles Pulsar keeps on the broker (drive mode names them)
    left = f"{drain['left']} left" + (f" ({stays} stay)" if stays else "")
    return (f"{drain['broker']} ({drain['done']} of {total} moved, {left}, "
            f"{drain['ratePerMinute']:g}/min, ETA {math.ceil(float(drain['etaS']))} s{away}; "
            f"by {drain['by']} since {drain['sinceMs']} ms)")
def _proposals_line(proposals: Mapping[str, Any] | None) -> list[str]:
    if not proposals:
        return []
    return [f"proposals: {proposals['pending']} pending (loadBalancerExecution={proposals['mode']}; "
            "`lbctl proposals list`)"]


def _headline(document: Mapping[str, Any]) -> str:
    state = str(document["state"])
    if state == "draining":
        drains = document["draining"]
        return "draining (" + "; ".join(f"{d['broker']}: {d['done']} of {max(int(d['bundles']), int(d['left']))}"
                                        f" moved" for d in drains) + ")"
    if state == "paused":
        pause = document["paused"]
        return f"paused until {pause['untilMs']} ms (cluster time), by {pause['by']}: {pause['reason']}"
    if state == "executing":
        running = document["executing"]
        return f"executing ({running['done']} of {running['of']})"
    return state
