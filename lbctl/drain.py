"""Drains from the command line (docs/control.md):

    lbctl brokers drain BROKER [--rate N/min] [--wait]    the broker takes no new bundles; its own move away
    lbctl brokers undrain BROKER                          back in service; the drain's moves not started stop
    lbctl brokers restart-plan [BROKER ...] [--rate N/min] drain, restart and undrain each broker in turn

Each verb is written once against ``lbctl.admin_verbs.AdminTransport``: on the cluster itself, or
with ``--admin-url`` over the REST service (``web.drain``).

Invariants:
- a drain and an undrain are commands to the leader that it records with who asked; a rate of 0,
  negative, NaN, infinite or unreadable, an unknown broker, or the last broker not drained is
  refused in one line naming it, exit 2, and nothing is recorded;
- ``--wait`` and ``restart-plan`` show the progress (bundles left, rate, ETA) on the link's clock
  (cluster time in process, wall time on Ray and over REST), one line each time it changes; a
  wait ends when the broker is empty, or holds only bundles that stay (named with why);
- ``drain`` and ``undrain`` on a state directory that ``lbctl attach --mode drive`` writes go to
  that process's web service (``steering``), as ``balancer pause`` does;
- an undrain says how many of the drain's moves it cancelled and that those handing over finish.
"""

from __future__ import annotations

import argparse

from actors.cluster.draining import progress_of
from balancer.drain import Progress, parse_rate
from balancer.errors import UnknownBroker
from lbctl.admin_print import emit
from lbctl.admin_verbs import AdminTransport, Runner, SubParsers, verb


def register(brokers: SubParsers, run: Runner) -> None:
    drain = verb(brokers, run, "drain", "move a broker's bundles away at a rate; it takes no new ones",
                 _drain)
    drain.add_argument("broker", help="the broker id, as `lbctl brokers list` shows it")
    drain.add_argument("--rate", default=None,
                       help="moves per minute: 120/min, 2/s, 600/h or a number (per minute; default "
                            "loadBalancerDrainMovesPerMinute)")
    drain.add_argument("--wait", action="store_true", help="show the progress until the broker is empty")
    undrain = verb(brokers, run, "undrain", "return a drained broker to service (stops the moves "
                   "not started)", _undrain)
    undrain.add_argument("broker", help="the broker id")
    plan = verb(brokers, run, "restart-plan", "drain, restart and undrain each broker in turn",
                _restart_plan)
    plan.add_argument("brokers", nargs="*", help="the brokers, in order (default: every registered one)")
    plan.add_argument("--rate", default=None, help="moves per minute of each drain (as for drain)")
    for parser in (drain, undrain):
        # On a state directory that `lbctl attach --mode drive` writes, that process answers.
        parser.set_defaults(steering=True)


def _rate(args: argparse.Namespace) -> float | None:
    return None if args.rate is None else parse_rate(str(args.rate))


async def _drain(admin: AdminTransport, args: argparse.Namespace) -> int:
    rate = _rate(args)  # judged before anything is sent
    drained = await admin.drain_broker(args.broker, rate)
    emit(args, drained, f"draining {args.broker}: {drained['bundles']} bundle(s) to move at "
                        f"{drained['rate_per_minute']:g}/min; it takes no new bundles until undrained")
    if args.wait:
        await _watch(admin, args, args.broker)
    return 0


async def _watch(admin: AdminTransport, args: argparse.Namespace, broker: str) -> None:
    shown = None
    wait_s = 0.0
    while True:
        document = await admin.drain_progress(broker, wait_s)
        progress = progress_of(document)
        if not args.json and progress.left != shown:
            print(f"{broker} {progress.bar()}", flush=True)
            shown = progress.left
        if progress.finished or not document["drained"]:
            break
        wait_s = 1.0
    if not args.json:
        print(_end_of(broker, progress, bool(document["drained"])), flush=True)


def _end_of(broker: str, progress: Progress, drained: bool) -> str:
    if progress.left == 0:
        return f"{broker} is empty"
    if drained and progress.finished:
        return f"{broker} holds only the {progress.stays} bundle(s) that stay: {progress.kept}"
    return f"{broker} was undrained"


async def _undrain(admin: AdminTransport, args: argparse.Namespace) -> int:
    undrained = (await admin.undrain_broker(args.broker))["undrained"]
    if undrained is None:
        emit(args, {"undrained": None}, f"{args.broker} was not drained; nothing recorded")
        return 0
    cancelled, left = undrained["cancelled"], undrained["left"]
    emit(args, {"undrained": undrained},
         f"{args.broker} back in service; {cancelled} move(s) not started cancelled, "
         f"{left - cancelled} handing over will finish; it still holds {left} bundle(s)")
    return 0


async def _restart_plan(admin: AdminTransport, args: argparse.Namespace) -> int:
    rate = _rate(args)
    known = [str(r["broker"]) for r in (await admin.brokers())["brokers"]]
    order = list(args.brokers) or known
    for broker in order:
        if broker not in known:  # named before any broker is drained
            raise UnknownBroker(f"broker {broker!r} is not registered; brokers: {', '.join(known)}",
                                value=broker)
    for number, broker in enumerate(order, 1):
        print(f"[{number}/{len(order)}] {broker}: draining", flush=True)
        await admin.drain_broker(broker, rate)
        await _watch(admin, args, broker)
        print(f"[{number}/{len(order)}] {broker}: restarting", flush=True)
        await admin.restart_broker(broker, args.timeout)
        await admin.undrain_broker(broker)
        print(f"[{number}/{len(order)}] {broker}: back in service", flush=True)
    emit(args, {"restarted": order}, f"restarted {len(order)} broker(s), one at a time")
    return 0
