"""The leader's proposals (docs/control.md#proposals):

    lbctl proposals list                  every kept proposal: id, status, moves, who decided
    lbctl proposals show ID               its moves (reason, numbers, load) and the predicted balance
    lbctl proposals approve ID            run it (loadBalancerExecution=review): through the throttle
    lbctl proposals reject ID [--note T]  never run it
    lbctl proposals cancel ID             drop its moves not started (those handing over finish)

Each verb is written once against ``lbctl.admin_verbs.AdminTransport``: on the cluster itself, or
with ``--admin-url`` over the REST service (``web.proposals``). On the state directory of
``lbctl attach --mode drive`` in review mode the verdicts go to that process's web service.

Invariants: a verdict is recorded with who gave it (``lbctl:<local user>`` on the cluster, the
token's role over REST); an unknown id, or a verdict the proposal cannot take (approving a
stale, rejected, cancelled or executed one), is one line naming it, exit 2, nothing recorded;
``list`` and ``show`` only read.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from lbctl.admin import run
from lbctl.admin_print import emit
from lbctl.admin_verbs import AdminTransport, SubParsers, group, verb


def register(sub: SubParsers) -> None:
    verbs = group(sub, "proposals", "the leader's proposals: list, show, approve, reject, cancel")
    verb(verbs, run, "list", "every kept proposal: id, status, moves, who decided", _list)
    show = verb(verbs, run, "show", "a proposal's moves, their reasons and numbers, and the predicted "
                "balance", _show)
    show.add_argument("id", help="the proposal's id, as `lbctl proposals list` shows it")
    for name, text in (("approve", "run a waiting proposal's moves (through the throttle)"),
                       ("reject", "never run a waiting proposal"),
                       ("cancel", "drop a proposal's moves not started yet (moves handing over finish)")):
        one = verb(verbs, run, name, text, _verdict)
        one.add_argument("id", help="the proposal's id")
        one.add_argument("--note", default="", help="why (recorded with a rejection)")
        # On a mirror's state directory the verdict goes to the running `lbctl attach --mode drive`.
        one.set_defaults(verdict=name, steering=True)


async def _list(admin: AdminTransport, args: argparse.Namespace) -> int:
    found = await admin.proposals()
    lines = [f"{'ID':<24} {'STATUS':<10} {'MODE':<7} {'MOVES':>5}  BY"]
    lines += [f"{p['id']:<24} {p['status']:<10} {p['mode']:<7} {p['moves']:>5}  {p['by'] or '-'}" for p in found]
    emit(args, found, "\n".join(lines) if found else "no proposals yet")
    return 0


async def _show(admin: AdminTransport, args: argparse.Namespace) -> int:
    found = await admin.proposal(args.id)
    emit(args, found, show_text(found))
    return 0


async def _verdict(admin: AdminTransport, args: argparse.Namespace) -> int:
    recorded = await admin.review_proposal(args.id, args.verdict, args.note)
    done = {"approve": "approved", "reject": "rejected", "cancel": "cancelled"}[args.verdict]
    extra = f"; not started, dropped: {len(recorded.get('bundles') or [])}" if args.verdict == "cancel" else ""
    emit(args, recorded, f"proposal {args.id} {done} by {recorded.get('by')}{extra}")
    return 0


def show_text(p: Mapping[str, Any]) -> str:
    """A proposal as ``lbctl proposals show`` prints it."""
    head = f"proposal {p['id']}: {p['status']} ({p['mode']}, {p['strategy']}, computed at {p['runMs']} ms)"
    lines = [head]
    if p.get("by"):
        lines.append(f"  decided by {p['by']} at {p['atMs']} ms")
    if p.get("reason"):
        lines.append(f"  reason: {p['reason']}")
    for m in p["moves"]:
        dst = m["destination"] or "(placement picks when it starts)"
        load = float((m.get("load") or {}).get("msg_throughput", 0.0))
        started = " [started]" if m["bundle"] in p.get("started", ()) else ""
        lines.append(f"  {m['kind']:<8} {m['bundle']} {m['source']} -> {dst}: {m['reason']}, "
                     f"{load:.0f} B/s{started}")
        inputs = (m.get("decision") or {}).get("inputs") or {}
        if inputs:
            lines.append("           " + ", ".join(f"{k}={_num(v)}" for k, v in sorted(inputs.items())))
    predicted = p.get("predicted")
    if predicted:
        lines.append(f"  predicted max/mean throughput: {predicted['max_over_mean_before']:.3f} -> "
                     f"{predicted['max_over_mean_after']:.3f}")
    return "\n".join(lines)


def _num(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
