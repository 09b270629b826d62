"""The advise and drive modes of attach: the per-cycle hook beside the mirror.

Each cycle reads what the log gained since the last one (the mirror's records and this hook's
own), folds it (``Advisor``, ``Executions``), records the outcomes it decided, and when a decision
cycle is due records a ``ProposalRecorded``; in drive mode it then sends the proposal's moves that
the caps allow to Pulsar's admin API, each one an ``ExecutionRequested`` recorded before the
call and its answer recorded after it.

Invariants:
- the log is the only memory: a restarted hook reads the whole log first and goes on from what
  it says (open executions, the caps' history, the strategy's grace periods);
- a request is recorded before it is sent; if that record cannot be written nothing is sent;
  events that could not be written (the log unavailable) are kept, in order, and written first
  on the next cycle; every requested execution ends in exactly one terminal event: by the
  ownership records, its timeout, or ``close`` (``shutdown``);
- drive mode never sends anything while Pulsar's own shedding is on: ``preflight`` refuses to
  start (``DriveRefused``, naming ``loadBalancerSheddingEnabled``) and each cycle checks again;
- ``dry_run`` records and sends nothing: it prints each request it would send;
- Pulsar's own placement of new bundles (lookups) is untouched: drive mode sends only unloads
  with a destination and splits;
- this hook's records go under ``PROPOSALS_KEY``, through the log's single writer (the mirror's
  ``append``) when there is one, else straight to the log at epoch 0;
- the operator's pause holds every move back (proposals are still recorded) and the throttle's
  in-flight caps hold as the project's own leader keeps them (``attach/control.py``); with
  ``loadBalancerExecution=review`` a proposal's moves are sent only once it is approved
  (``attach/review.py``); a cycle, a verdict, a drain, a pause and a resume run one at a time,
  so the log is read and written in order;
- the operator's drains (``attach/drain.py``) move a drained broker's bundles each cycle at the
  drain's rate, neither paused nor throttled, as the leader's drains; the advisor's placement
  and shedding views leave drained brokers out, so no move of either kind goes to one.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from random import Random
from typing import Any

from actors.effects import Receipt
from actors.leader_control import expiry_event, hold_event
from actors.leader_proposals import owner_at_rest
from attach.advise import Advisor
from attach.control import DriveHold
from attach.drain import DriveDrains
from attach.execute import HELD_PAUSED, Executions, Selection
from attach.proposals import DRIVE, SPLIT, Proposal, ProposedMove
from attach.pulsar_admin import SHEDDING_KEY, SPLIT_KEY, Answer, PulsarAdmin, describe, enabled
from attach.review import DriveReview, reviewing
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, LoadBalancerError, Unavailable
from events.catalog import (
    PROPOSALS_KEY,
    BalancerPaused,
    Command,
    DrainBroker,
    Event,
    ExecutionRequested,
    PauseBalancer,
    ProposalApproved,
    ResumeBalancer,
    ReviewProposal,
    UndrainBroker,
)
from events.log.port import DeadLetter, EventLog, Record
from projections.drain import Drain
from projections.ownership import OwnershipProjection
from projections.proposals import WATCHED as PROPOSAL_TYPES

Printer = Callable[[str], None]
HELD_TYPES = frozenset({"BalancerPaused", "BalancerResumed", "ExecutionRequested", "LoadReported"})
"""What ``DriveHold`` folds: the pause, this hook's moves, the brokers' report times."""
DRAIN_TYPES = frozenset({"ExecutionRequested", "ExecutionRefused"})
"""What ``DriveDrains`` folds (the drains themselves are the advisor's replay's)."""
Appender = Callable[[str, Sequence[Event], int, str], Awaitable[object]]
"""Appends events under a key, stamped at a time, with a causation id: the log's single writer
(the mirror) when there is one."""


def direct_appender(log: EventLog) -> Appender:
    """Appends straight to ``log`` at epoch 0 (a log this hook is the only writer of a key of)."""
    async def append(key: str, events: Sequence[Event], ts_ms: int, cause: str) -> object:
        return await log.append(key, list(events), epoch=0, causation_id=cause or None)

    return append


class DriveRefused(InvalidInput):
    code = "drive_refused"


def preflight(settings: Mapping[str, str], url: str) -> None:
    """Refuse drive mode on a cluster whose own shedding is on (one line naming the key)."""
    if enabled(settings, SHEDDING_KEY):
        raise DriveRefused(f"drive mode needs Pulsar's own shedding off: {SHEDDING_KEY}=true at {url} "
                           f"(pulsar-admin brokers update-dynamic-config --config {SHEDDING_KEY} --value false)",
                           value=SHEDDING_KEY)


def drive_splits(settings: Mapping[str, str], config: LoadBalancerConfig) -> bool:
    """Drive mode splits only where Pulsar does not split on its own and the config says so."""
    return not enabled(settings, SPLIT_KEY) and config.load_balancer_auto_bundle_split_enabled


class Steering:
    """The advise or drive hook: call ``start``, then ``cycle`` as often as the mirror runs, then
    ``close``."""

    def __init__(self, log: EventLog, config: LoadBalancerConfig, mode: str, *,
                 admin: PulsarAdmin | None = None, dry_run: bool = False, splits: bool = True,
                 printer: Printer = print, rng: Random | None = None, append: Appender | None = None) -> None:
        if mode == DRIVE and admin is None:
            raise InvalidInput("drive mode needs Pulsar's admin URL", value=mode)
        self.log, self.config, self.mode, self.admin = log, config, mode, admin
        self.dry_run, self.printer = dry_run, printer
        self.append = append or direct_appender(log)
        self.advisor = Advisor(config, mode, rng=rng or Random(0), splits=splits)
        self.hold = DriveHold(config)
        self.executions = Executions(per_cycle=config.attach_drive_max_executions_per_cycle,
                                     per_minute=min(config.attach_drive_max_executions_per_minute,
                                                    self.hold.caps.per_minute),
                                     timeout_ms=config.attach_drive_execution_timeout_seconds * 1000,
                                     caps=self.hold.caps)
        self.review = DriveReview(config) if mode == DRIVE and reviewing(config) else None
        """Review mode: proposals wait for an operator's verdict (``attach/review.py``)."""
        self._offered: tuple[int, int, bool] | None = None
        """When the approved proposals' moves were last offered (see ``_execute_approved``)."""
        self.drains = DriveDrains()
        """The operator's drains: their executions and pace (``attach/drain.py``)."""
        self._drain_waits: dict[str, str] = {}
        """Drained broker -> the bundle no broker could take, as last said."""
        self._busy = asyncio.Lock()
        """One cycle, verdict, pause or resume at a time: each reads the log and writes to it in order."""
        self.position: dict[int, int] = {}
        self.unwritten: list[tuple[Event, str]] = []
        self.proposals: list[Proposal] = []
        self.dead_letters = 0
        self._shedding_noted = False

    # -- the hook's life -------------------------------------------------------------------
    async def start(self, now_ms: int) -> None:
        """Read the whole log (a restart resumes from it) and end what it already decided."""
        self.hold.started_ms = now_ms
        await self.catch_up()
        self.advisor.due(now_ms)  # the first decision cycle comes an interval from now
        await self._record(self.executions.settle(), now_ms)
        if self.executions.open:
            self.printer(f"{self.mode}: {len(self.executions.open)} execution(s) open from before; "
                         f"waiting for Pulsar's channel or their timeout")

    async def cycle(self, now_ms: int) -> Proposal | None:
        """One cycle at ``now_ms``: the proposal made, if a decision cycle was due."""
        async with self._busy:
            return await self._cycle(now_ms)

    async def _cycle(self, now_ms: int) -> Proposal | None:
        await self.catch_up()
        await self._record([*self.executions.settle(), *self.executions.expire(now_ms, self._ownership)], now_ms)
        await self._pause_ended(now_ms)
        if self.mode == DRIVE and not self.dry_run:
            await self._drain_moves(now_ms)
        due = self.advisor.due(now_ms)
        if self.review is not None and not self.dry_run:
            await self._record(self.review.stale(now_ms, self._throughputs(), self._owner), now_ms)
            await self._execute_approved(now_ms, again=due)
        if not due:
            return None
        proposal = self.advisor.decide(now_ms)
        self.proposals.append(proposal)
        self.hold.decided(proposal)
        if self.dry_run:
            self._print_dry(proposal)
            return proposal
        if self.review is not None:
            await self._propose_for_review(proposal, now_ms)
            return proposal
        if not await self._record([proposal.to_event()], now_ms):
            return proposal
        self._print_proposal(proposal)
        if self.mode == DRIVE:
            await self._execute(proposal, now_ms)
            await self.catch_up()  # its own requests and answers: the status counts them at once
        return proposal

    async def close(self, now_ms: int) -> None:
        """Attach stops: every open execution gets its terminal event."""
        async with self._busy:
            await self._close(now_ms)

    async def _close(self, now_ms: int) -> None:
        await self.catch_up()
        ending = self.executions.shutdown(now_ms, self._ownership)
        await self._record(ending, now_ms)
        for event in ending:
            self.printer(f"{self.mode}: {event.TYPE} {getattr(event, 'execution_id', '')}")

    # -- review mode (attach/review.py) -----------------------------------------------------
    async def _propose_for_review(self, proposal: Proposal, now_ms: int) -> None:
        assert self.review is not None
        recorded, superseded = self.review.to_record(proposal, now_ms)
        if recorded is None:
            return  # a waiting proposal plans the same moves: it stands
        if await self._record([*superseded, recorded.to_event()], now_ms) and recorded.moves:
            self.printer(f"drive: {recorded.proposal_id} waits for review ({len(recorded.moves)} move(s); "
                         f"lbctl proposals approve {recorded.proposal_id})")
        await self.catch_up()

    async def review_verdict(self, command: ReviewProposal, now_ms: int) -> Receipt:
        """Record an operator's verdict on a waiting proposal (``attach.review.DriveReview.verdict``);
        an approval's moves are sent at once, within the caps."""
        if self.review is None:
            raise InvalidInput(f"{command.TYPE}: this attach run executes without review "
                               "(loadBalancerExecution=auto, or advise mode): no proposal waits",
                               value=command.proposal_id)
        async with self._busy:
            await self.catch_up()
            event = self.review.verdict(command, now_ms, self._throughputs(), self._owner)
            await self._record_or_refuse(event, now_ms, command, command.proposal_id)
            self.printer(f"drive: {event.TYPE} {command.proposal_id} by {command.by}")
            if isinstance(event, ProposalApproved):
                await self._execute_approved(now_ms)
                await self.catch_up()
            return Receipt(command.command_id, ((event.TYPE, event.to_payload()),))

    async def _execute_approved(self, now_ms: int, *, again: bool = True) -> None:
        """Send what the approved proposals still hold, oldest approval first: at once after an
        approval, on each decision cycle (``again``), and whenever an execution ended, an
        approval came or a pause ended since the last offer (so a held move is not printed as
        held on every poll)."""
        assert self.review is not None
        moment = (len(self.executions.ended), len(self.review.book.approved), self.hold.held.paused(now_ms) is None)
        if not again and moment == self._offered:
            return
        self._offered = moment
        for proposal in self.review.approved():
            if self.review.left(proposal, self.executions.was_sent, self._owner):
                await self._execute(proposal, now_ms)

    def _throughputs(self) -> dict[str, float]:
        return self.advisor.replay.load.throughputs()

    def _owner(self, move: ProposedMove) -> str | None:
        return owner_at_rest(self._ownership.records.get(move.bundle))

    # -- the operator's hold (attach/control.py) --------------------------------------------
    async def pause_or_resume(self, command: PauseBalancer | ResumeBalancer, now_ms: int) -> Receipt:
        """Record the operator's pause or resume (refused beyond ``loadBalancerMaxPauseMinutes``;
        a resume with nothing paused records nothing), then fold it."""
        async with self._busy:
            await self.catch_up()
            event = hold_event(command, self.hold.held, self.config, now_ms)
            if event is None:
                return Receipt(command.command_id, detail={"paused": False})
            await self._record_or_refuse(event, now_ms, command, command.TYPE)
            until = f" until {event.until_ms} ms: {event.reason}" if isinstance(event, BalancerPaused) else ""
            self.printer(f"{self.mode}: {event.TYPE} by {event.by}{until}")
            return Receipt(command.command_id, ((event.TYPE, event.to_payload()),))

    def status(self, now_ms: int) -> dict[str, Any]:
        """The leader-shaped status of this hook (``attach.control.DriveHold.status``)."""
        stalled: list[str] = []
        if self._shedding_noted:
            stalled.append(f"Pulsar's {SHEDDING_KEY} is true: drive mode sends nothing while Pulsar sheds by itself")
        if self.unwritten:
            stalled.append(f"the log refused {len(self.unwritten)} record(s); they are written first next cycle")
        document = self.hold.status(self.executions, now_ms, self.position, stalled)
        document["control"]["drains"] = self.drains.status(self._drained, self.advisor.replay.registry,
                                                           self._ownership.records)
        return document

    # -- the operator's drains (attach/drain.py) ---------------------------------------------
    async def drain_or_undrain(self, command: DrainBroker | UndrainBroker, now_ms: int) -> Receipt:
        """Record the operator's drain or undrain of a broker as the leader judges it (an undrain
        of a broker not drained records nothing), then fold it."""
        if self.mode != DRIVE or self.dry_run:
            raise InvalidInput(f"{command.TYPE} {command.broker}: only `lbctl attach --mode drive` "
                               f"without --dry-run moves bundles; this run is {self.mode}"
                               f"{' --dry-run' if self.dry_run else ''}", value=command.broker)
        async with self._busy:
            await self.catch_up()
            event = self.drains.judge(command, self._drained, self.advisor.replay.registry,
                                      self._ownership.records, self.executions.by_bundle, now_ms)
            if event is None:
                return Receipt(command.command_id, detail={"drained": False})
            await self._record_or_refuse(event, now_ms, command, command.broker)
            self.printer(f"drive: {event.TYPE} {command.broker} by {command.by}")
            await self._drain_moves(now_ms)  # the first move at once, as the leader's next tick
            return Receipt(command.command_id, ((event.TYPE, event.to_payload()),))

    @property
    def _drained(self) -> dict[str, Drain]:
        return self.advisor.replay.drains.drains

    async def _drain_moves(self, now_ms: int) -> None:
        """Start the drain moves each drain's rate allows now, each to the placement's broker
        (drained brokers left out); a bundle with no broker to go to waits, and so its drain."""
        due = self.drains.due(self._drained, self.advisor.replay.registry, self._ownership.records,
                              self.executions.by_bundle, now_ms)
        if not due or not await self._shedding_off():
            return
        stuck: set[str] = set()
        for drain, bundle in due:
            record = self._ownership.records[bundle]
            placement = self.advisor.place(bundle, drain.broker, now_ms)
            if drain.broker in stuck or placement.broker is None or placement.broker == drain.broker:
                if drain.broker not in stuck and self._drain_waits.get(drain.broker) != bundle:
                    self.printer(f"drive: drain of {drain.broker}: no broker can take {bundle} now; it waits")
                    self._drain_waits[drain.broker] = bundle  # said once, not every cycle
                stuck.add(drain.broker)
                continue
            self._drain_waits.pop(drain.broker, None)
            request = self.drains.request(drain, bundle, record, placement.broker, placement.to_dict())
            if not await self._request(request, now_ms):
                return
        await self.catch_up()

    async def _pause_ended(self, now_ms: int) -> None:
        event = expiry_event(self.hold.held, now_ms, self.hold.expired_sent)
        if event is None:
            return
        self.hold.expired_sent = event.since_ms  # once: written now, or first next cycle if refused
        if await self._record([event], now_ms):
            self.printer(f"{self.mode}: the pause since {event.since_ms} ms ended ({event.by})")

    # -- reading ---------------------------------------------------------------------------
    async def catch_up(self) -> int:
        """Fold every record appended since the last call; how many were read."""
        result = await self.log.read(self.position)
        for item in result.items:
            if isinstance(item, DeadLetter):
                self.dead_letters += 1
                self._ownership.apply_dead_letter(item.offset, item.key, f"{item.reason}: {item.error}")
            else:
                self._fold(item)
        self.position = {**self.position, **result.next}
        return len(result.items)

    def _fold(self, record: Record) -> None:
        self.advisor.fold(record.partition, record.offset, record.envelope)
        if self.review is not None and record.envelope.type in PROPOSAL_TYPES:
            self.review.fold(record.envelope.typed, record.envelope.ts_ms)
        self.executions.fold(record.envelope, self._ownership)
        self.drains.touch(record.envelope.typed, self._ownership.records)
        if record.envelope.type in HELD_TYPES:
            self.hold.fold(record.envelope.typed, record.envelope.ts_ms)
        if record.envelope.type in DRAIN_TYPES:
            self.drains.fold(record.envelope.typed, record.envelope.ts_ms)

    @property
    def _ownership(self) -> OwnershipProjection:
        return self.advisor.replay.ownership

    # -- writing ---------------------------------------------------------------------------
    async def _record_or_refuse(self, event: Event, now_ms: int, command: Command, value: str) -> None:
        """Record an operator's ``event`` now and fold it, or refuse ``command``: an event the log
        refused is dropped, never written later (the operator was told nothing changed)."""
        if not await self._record([event], now_ms, cause=command.command_id):
            self.unwritten = [(e, c) for e, c in self.unwritten if e is not event]
            raise Unavailable(f"{command.TYPE}: the log refused the record; nothing changed, try again",
                              value=value)
        await self.catch_up()

    async def _record(self, events: Sequence[Event], now_ms: int, cause: str = "") -> bool:
        """Write what earlier cycles could not, then ``events``; False if the log refused
        (they are kept for the next cycle). ``cause``: the command they answer."""
        self.unwritten.extend((event, cause) for event in events)
        while self.unwritten:
            event, asked = self.unwritten[0]
            cause = asked or str(getattr(event, "execution_id", "") or getattr(event, "proposal_id", ""))
            try:
                await self.append(PROPOSALS_KEY, [event], now_ms, cause)
            except (LoadBalancerError, OSError) as exc:
                self.printer(f"{self.mode}: the log refused {event.TYPE} ({exc}); written next cycle")
                return False
            self.unwritten.pop(0)
        return True

    # -- drive -----------------------------------------------------------------------------
    async def _execute(self, proposal: Proposal, now_ms: int) -> None:
        assert self.admin is not None
        if not await self._shedding_off():
            return
        pause = self.hold.held.paused(now_ms)
        if pause is not None:
            self.hold.hold_back([(move, HELD_PAUSED) for move in proposal.moves], now_ms)
            if proposal.moves:
                self.printer(f"drive: paused until {pause.until_ms} ms by {pause.by} ({pause.reason}): "
                             f"{len(proposal.moves)} move(s) of {proposal.proposal_id} not sent")
            return
        selection = self.executions.select(proposal, self._ownership, now_ms)
        self.hold.hold_back(selection.held, now_ms)
        self._print_held(selection)
        for request in selection.send:
            if not await self._request(request, now_ms):
                return

    async def _request(self, request: ExecutionRequested, now_ms: int) -> bool:
        """Record ``request``, send it, record Pulsar's answer; False if the log refused the
        request (then nothing was sent)."""
        method, path, query = _call_of(request)
        request = dataclasses.replace(request, request=describe(method, path, query))
        if not await self._record([request], now_ms):
            return False  # not recorded, so not sent
        answer, error = await self._send(request)
        event = self.executions.answer(request, answer.status if answer else None,
                                       answer.message if answer else error)
        self.printer(_said(request, answer, error))
        await self._record([event], now_ms)
        return True

    async def _send(self, request: ExecutionRequested) -> tuple[Answer | None, str]:
        """Pulsar's answer, or None and why no answer came."""
        admin = self.admin
        assert admin is not None
        try:
            if request.kind == SPLIT:
                return await asyncio.to_thread(admin.split, request.bundle, str(request.algorithm)), ""
            return await asyncio.to_thread(admin.unload, request.bundle, str(request.dst)), ""
        except Unavailable as exc:
            return None, exc.message

    async def _shedding_off(self) -> bool:
        """Pulsar's own shedding is still off (checked each cycle: it is a dynamic setting)."""
        assert self.admin is not None
        try:
            settings = await asyncio.to_thread(self.admin.settings)
        except LoadBalancerError as exc:
            self.printer(f"drive: cannot read Pulsar's settings ({exc}); nothing executed this cycle")
            return False
        if enabled(settings, SHEDDING_KEY):
            if not self._shedding_noted:
                self.printer(f"drive: Pulsar's {SHEDDING_KEY} is now true; nothing is executed while it is")
            self._shedding_noted = True
            return False
        self._shedding_noted = False
        return True

    # -- what the user sees ------------------------------------------------------------------
    def _print_proposal(self, proposal: Proposal) -> None:
        if not proposal.moves:
            self.printer(f"{self.mode}: {proposal.proposal_id} {proposal.strategy}: no move ({proposal.skip})")
            return
        for move in proposal.moves:
            self.printer(f"{self.mode}: {proposal.proposal_id} {move.kind} {move.bundle} "
                         f"{move.source} -> {move.destination or '(split)'} ({move.reason})")

    def _print_dry(self, proposal: Proposal) -> None:
        if self.mode != DRIVE:
            self._print_proposal(proposal)
            return
        selection = self.executions.select(proposal, self._ownership, proposal.run_ms)
        for request in selection.send:
            method, path, query = _call_of(request)
            self.printer(f"dry run: would send {describe(method, path, query)} "
                         f"({request.kind} {request.src} -> {request.dst or '(split)'})")
        self._print_held(selection)
        if not proposal.moves:
            self.printer(f"dry run: nothing to execute ({proposal.skip})")

    def _print_held(self, selection: Selection) -> None:
        for move, why in selection.held:
            self.printer(f"{self.mode}: held {move.kind} {move.bundle}: {why}")


def _call_of(request: ExecutionRequested) -> tuple[str, str, dict[str, str]]:
    base = f"/admin/v2/namespaces/{request.bundle}"
    if request.kind == SPLIT:
        return "PUT", f"{base}/split", {"unload": "false", "splitAlgorithmName": str(request.algorithm)}
    return "PUT", f"{base}/unload", {"destinationBroker": str(request.dst)}


def _said(request: ExecutionRequested, answer: Answer | None, error: str) -> str:
    where = f"{request.kind} {request.bundle} {request.src} -> {request.dst or '(split)'}"
    if answer is None:
        return f"drive: {request.execution_id} {where}: no answer ({error})"
    verdict = "accepted" if answer.ok else "refused"
    return f"drive: {request.execution_id} {where}: {verdict} {answer.status} {answer.message}".rstrip()
