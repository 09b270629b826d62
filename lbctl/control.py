"""The operator's hold on the balancer (docs/control.md):

    lbctl balancer pause --for DURATION --reason TEXT     stop shedding and splitting for a while
    lbctl balancer resume                                 end the pause now
    lbctl balancer status                                 idle, executing, paused or stalled, and why

Each verb is written once against ``lbctl.admin_verbs.AdminTransport``: on the cluster itself, or
with ``--admin-url`` over the REST service (``web.control``).

Invariants:
- a pause and a resume are commands to the leader that it records with who asked
  (``lbctl:<local user>`` on the cluster, the token's role over REST); a duration of 0, negative,
  NaN, unreadable or longer than ``loadBalancerMaxPauseMinutes`` is refused in one line naming
  it, exit 2, and nothing is recorded;
- ``status`` sends no command and appends nothing;
- on a state directory that ``lbctl attach --mode advise|drive --web-service-port`` writes, the
  three verbs go to that process's web service (it alone can hold its moves back): the same
  verbs, the same output (``lbctl.admin.run``).
"""

from __future__ import annotations

import argparse

from actors.control_status import status_text
from lbctl.admin import run
from lbctl.admin_print import emit, warn
from lbctl.admin_verbs import AdminTransport, SubParsers, group, verb


def register(sub: SubParsers) -> None:
    verbs = group(sub, "balancer", "pause, resume and the status of the balancer")
    pause = verb(verbs, run, "pause", "stop shedding and splitting for a while (placing unowned "
                 "bundles goes on)", _balancer_pause)
    pause.add_argument("--for", dest="duration", required=True,
                       help="how long: 90s, 5m, 1h (cluster time; at most loadBalancerMaxPauseMinutes)")
    pause.add_argument("--reason", required=True, help="why: recorded with the pause")
    resume = verb(verbs, run, "resume", "end the pause now", _balancer_resume)
    status = verb(verbs, run, "status", "idle, executing (n of m), paused (until, why, who) or stalled (why)",
                  _balancer_status)
    for parser in (pause, resume, status):
        # On a state directory that `lbctl attach --mode drive` writes, that process answers.
        parser.set_defaults(steering=True)


async def _balancer_pause(admin: AdminTransport, args: argparse.Namespace) -> int:
    paused = await admin.pause_balancer(args.duration, args.reason)
    emit(args, paused, f"balancer paused until {paused['until_ms']} ms (cluster time), "
                       f"{(paused['until_ms'] - paused['since_ms']) // 1000} s from now: {args.reason}")
    return 0


async def _balancer_resume(admin: AdminTransport, args: argparse.Namespace) -> int:
    resumed = await admin.resume_balancer()
    if resumed is None:
        warn("the balancer was not paused; nothing recorded")
        emit(args, {"resumed": None}, "not paused")
        return 0
    emit(args, {"resumed": resumed}, f"balancer resumed (the pause since {resumed['since_ms']} ms)")
    return 0


async def _balancer_status(admin: AdminTransport, args: argparse.Namespace) -> int:
    document = await admin.balancer_status(args.timeout)
    emit(args, document, status_text(document))
    return 0
