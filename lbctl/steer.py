"""``lbctl attach URL --mode advise|drive [--dry-run] [--conf FILE]`` and the reports of both:
``lbctl pulsar advise-report`` and ``lbctl pulsar drive-report`` (``--state-dir DIR``).

- ``--mode advise``: beside the mirror, the project's leader decides every cycle on the mirrored
  view with Pulsar's own load balancer settings (``/admin/v2/brokers/configuration/runtime``),
  ``--conf``'s broker.conf keys on top (another strategy, the ``attach*`` settings), and records
  each proposal; nothing is executed.
- ``--mode drive``: the same, and the proposals' unloads (always with a destination) and splits
  are sent to Pulsar's admin API within the caps (``attachDriveMaxExecutionsPerCycle``,
  ``attachDriveMaxExecutionsPerMinute``), each execution recorded from request to outcome;
  ``--dry-run`` prints what would be sent and records nothing. Splits are sent only when
  Pulsar's own ``loadBalancerAutoBundleSplitEnabled`` is false and the config enables them.

Invariants: drive mode on a cluster whose own shedding is on is refused before anything is read
or recorded: one line naming ``loadBalancerSheddingEnabled``, exit 2; a bad ``--conf`` key or a
``--dry-run`` without ``--mode drive`` is one line, exit 2; the reports only read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from random import Random
from typing import TYPE_CHECKING, Any

from actors.cluster.kept import LOG_SUBDIR, state_dir
from actors.effects import Receipt
from attach.drive import Steering, drive_splits, preflight
from attach.proposals import ADVISE, DRIVE
from attach.pulsar_admin import PulsarAdmin, load_balancer_config
from attach.report import (
    advise_report,
    executions,
    render_advise,
    render_drive,
    render_html,
    to_json,
)
from balancer.config import LoadBalancerConfig
from balancer.errors import MalformedInput, Unavailable
from events.catalog import DrainBroker, Event, ReviewProposal, UndrainBroker
from events.envelope import wall_clock_ms
from events.log.local import LocalEventLog
from events.log.port import Record
from lbctl.admin_http import AdminHttp
from lbctl.settings import settings_of

if TYPE_CHECKING:
    from actors.cluster.mirror_link import SteeringCommand
    from attach.mirror import Cycle, Mirror

OBSERVE = "observe"
MODES = (OBSERVE, ADVISE, DRIVE)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--mode``, ``--dry-run`` and ``--conf`` of ``lbctl attach``."""
    parser.add_argument("--mode", choices=MODES, default=OBSERVE,
                        help="observe (mirror only, the default); advise (also record the project's "
                             "proposals every cycle, never executed); drive (execute them through "
                             "Pulsar's admin API: needs Pulsar's own shedding off)")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --mode drive: print what would be sent to Pulsar, record nothing")
    parser.add_argument("--conf", default=None, metavar="BROKER_CONF",
                        help="broker.conf keys for the project's decisions, over Pulsar's own settings "
                             "(e.g. another strategy; the attach* caps and timeouts)")


class SteerHook:
    """The advise or drive hook of one ``lbctl attach`` run (a ``Steering`` once the mirror is open)."""

    def __init__(self, args: argparse.Namespace, admin: PulsarAdmin, config: LoadBalancerConfig,
                 splits: bool) -> None:
        self.args, self.admin, self.config, self.splits = args, admin, config, splits
        self.steering: Steering | None = None
        self.mirror: Mirror | None = None

    async def __call__(self, cycle: Cycle) -> None:
        mirror = cycle.mirror
        if self.steering is None:
            self.mirror = mirror
            assert mirror.log is not None
            self.steering = Steering(mirror.log, self.config, self.args.mode, admin=self.admin,
                                     dry_run=self.args.dry_run, splits=self.splits,
                                     printer=_line, rng=Random(), append=self._append)
            await self.steering.start(cycle.now_ms)
        await self.steering.cycle(cycle.now_ms)

    async def _append(self, key: str, events: Any, ts_ms: int, cause: str) -> object:
        from attach.channel import Append

        assert self.mirror is not None
        found: list[Event] = list(events)
        return await self.mirror.append(Append(key, tuple(found), ts_ms, tuple(cause for _ in found)))

    async def take(self, command: SteeringCommand) -> Receipt:
        """The operator's pause, resume, verdict, drain or undrain of this run
        (``actors.cluster.mirror_link.Steered``)."""
        if self.steering is None:
            named = getattr(command, "proposal_id", None) or getattr(command, "broker", None) or command.TYPE
            raise Unavailable(f"{command.TYPE}: {self.args.mode} mode is starting (the mirror has not "
                              "read Pulsar yet); try again in a moment", value=named)
        now_ms = wall_clock_ms()
        if isinstance(command, ReviewProposal):
            return await self.steering.review_verdict(command, now_ms)
        if isinstance(command, DrainBroker | UndrainBroker):
            return await self.steering.drain_or_undrain(command, now_ms)
        return await self.steering.pause_or_resume(command, now_ms)

    def status(self) -> dict[str, Any] | None:
        return None if self.steering is None else self.steering.status(wall_clock_ms())

    async def close(self) -> None:
        """Every open execution ends before the mirror closes."""
        if self.steering is not None:
            await self.steering.close(int(time.time() * 1000))


def _line(text: str) -> None:
    # On a terminal the mirror rewrites its live line in place: clear it first.
    print(("\r\033[K" if sys.stdout.isatty() else "") + text, flush=True)


def prepare(args: argparse.Namespace, http: AdminHttp) -> SteerHook | None:
    """The hook for ``--mode advise|drive`` (None for observe), refusing what must be refused
    before the mirror reads or records anything."""
    mode = getattr(args, "mode", OBSERVE)
    if getattr(args, "dry_run", False) and mode != DRIVE:
        raise MalformedInput("--dry-run goes with --mode drive", value="--dry-run")
    if mode == OBSERVE:
        return None
    overrides = settings_of(args).balancer_pairs  # --conf, read once and validated
    admin = PulsarAdmin(http)
    settings = admin.settings()
    if mode == DRIVE:
        preflight(settings, http.url)
    config, notes = load_balancer_config(settings, overrides)
    for note in notes:
        print(f"{mode}: {note}", flush=True)
    splits = mode == ADVISE or drive_splits(settings, config)
    print(f"{mode}: {config.load_balancer_load_shedding_strategy} on "
          f"{'the extensible' if config.extensible else 'the modular'} manager's view; "
          + ("proposals recorded, never executed" if mode == ADVISE else
             f"at most {config.attach_drive_max_executions_per_cycle} execution(s) per cycle and "
             f"{config.attach_drive_max_executions_per_minute} per minute"
             + ("; dry run: nothing is sent or recorded" if args.dry_run else "")
             + ("" if splits else "; splits left to Pulsar")
             + "; Pulsar keeps placing new bundles on lookup"), flush=True)
    return SteerHook(args, admin, config, splits)


# -- the reports --------------------------------------------------------------------------------


def add_report_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``advise-report`` and ``drive-report`` under ``lbctl pulsar``."""
    for name, what in (("advise-report", "the project's proposals beside Pulsar's own moves, cycle by cycle"),
                       ("drive-report", "each execution of drive mode: Pulsar's answer and the outcome")):
        parser = verbs.add_parser(name, help=what)
        parser.add_argument("--state-dir", default=None, help="the attach state directory (default .lbctl)")
        parser.add_argument("--html", default=None, metavar="FILE", help="also write a self-contained HTML page")
        parser.add_argument("--json", action="store_true", help="JSON instead of text")
        parser.set_defaults(handler=_advise_report if name == "advise-report" else _drive_report)


def _records(args: argparse.Namespace) -> list[Record]:
    directory = state_dir(args.state_dir) / LOG_SUBDIR
    if not (directory / "LOCK").exists():
        raise MalformedInput(f"--state-dir {str(directory.parent)!r}: no log there (lbctl attach "
                             "--state-dir DIR writes one)", value=str(directory.parent))

    async def read() -> list[Record]:
        async with LocalEventLog(directory, fsync=False) as log:
            return list((await log.read()).records)

    return asyncio.run(read())


def _advise_report(args: argparse.Namespace) -> int:
    return _report(args, ADVISE)


def _drive_report(args: argparse.Namespace) -> int:
    return _report(args, DRIVE)


def _report(args: argparse.Namespace, mode: str) -> int:
    records = _records(args)
    report, rows = advise_report(records, mode=mode), executions(records)
    if args.json:
        print(json.dumps(to_json(report, rows), indent=2, default=str))
    else:
        print(render_advise(report) if mode == ADVISE else render_drive(rows))
    if args.html:
        Path(args.html).write_text(render_html(report, rows), encoding="utf-8")
        print(f"wrote {args.html}")
    return 0
