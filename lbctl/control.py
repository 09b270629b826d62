"""The operator's hold on the balancer (docs/control.md):

    lbctl balancer pause --for DURATION --reason TEXT     stop shedding and splitting for a while
    lbctl balancer resume                                 end the pause now
    lbctl balancer status                                 idle, executing, paused or stalled, and why

With ``--admin-url`` the same verbs go over the REST service (``lbctl.control_rest``).

Invariants:
- a pause and a resume are commands to the leader that it records with who asked
  (``lbctl:<local user>`` here, the token's role over REST); a duration of 0, negative, NaN,
  unreadable or longer than ``loadBalancerMaxPauseMinutes`` is refused in one line naming it,
  exit 2, and nothing is recorded;
- ``status`` sends no command and appends nothing.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from actors.api import Cluster
from actors.control_status import status_text
from balancer.control import parse_duration
from lbctl.admin import _group, _verb, emit


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verbs = _group(sub, "balancer", "pause, resume and the status of the balancer")
    pause = _verb(verbs, "pause", "stop shedding and splitting for a while (placing unowned "
                  "bundles goes on)", _balancer_pause)
    pause.add_argument("--for", dest="duration", required=True,
                       help="how long: 90s, 5m, 1h (cluster time; at most loadBalancerMaxPauseMinutes)")
    pause.add_argument("--reason", required=True, help="why: recorded with the pause")
    _verb(verbs, "resume", "end the pause now", _balancer_resume)
    _verb(verbs, "status", "idle, executing (n of m), paused (until, why, who) or stalled (why)",
          _balancer_status)


def who() -> str:
    """The local user, as a pause records who asked for it."""
    try:
        return f"lbctl:{getpass.getuser()}"
    except (KeyError, OSError):  # no passwd entry for the uid (a container)
        return "lbctl"


async def _balancer_pause(cluster: Cluster, args: argparse.Namespace) -> int:
    receipt = await cluster.pause_balancer(parse_duration(args.duration), args.reason, who())
    paused = receipt.first("BalancerPaused")
    assert paused is not None, receipt
    emit(args, dict(paused), f"balancer paused until {paused['until_ms']} ms (cluster time), "
                             f"{(paused['until_ms'] - paused['since_ms']) // 1000} s from now: {args.reason}")
    return 0


async def _balancer_resume(cluster: Cluster, args: argparse.Namespace) -> int:
    receipt = await cluster.resume_balancer(who())
    resumed = receipt.first("BalancerResumed")
    if resumed is None:
        print("lbctl: the balancer was not paused; nothing recorded", file=sys.stderr)
        emit(args, {"resumed": None}, "not paused")
        return 0
    emit(args, {"resumed": dict(resumed)}, f"balancer resumed (the pause since {resumed['since_ms']} ms)")
    return 0


async def _balancer_status(cluster: Cluster, args: argparse.Namespace) -> int:
    document = await cluster.balancer_status(timeout_s=args.timeout)
    emit(args, document, status_text(document))
    return 0
