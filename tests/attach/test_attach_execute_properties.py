"""Whatever happens, in any order (Pulsar's answers, moves to the destination or elsewhere,
splits, time passing, attach restarting, attach stopping), every requested execution ends in
exactly one terminal event and no bundle ever has two executions open."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from attach.execute import Executions
from attach.proposals import Proposal, ProposedMove
from events.catalog import PROPOSALS_KEY, Event, ExecutionRequested
from projections.ownership import OwnershipProjection
from tests.support.mirrored import Mirrored

OPS = ("request", "accept", "refuse", "unanswered", "land", "elsewhere", "split", "wait", "restart")
TERMINAL = ("ExecutionRefused", "ExecutionConfirmed", "ExecutionFailed")


class Harness:
    def __init__(self) -> None:
        self.m = Mirrored()
        self.bundles: list[str] = []
        self.executions = Executions(per_cycle=1, per_minute=100, timeout_ms=30_000)
        self.ownership = OwnershipProjection()
        self.position: dict[int, int] = {}
        self.number = 0

    async def start(self) -> None:
        self.bundles = await self.m.cluster(["b1", "b2", "b3"], bundles=4, owners={0: "b1", 1: "b1", 2: "b1", 3: "b1"})
        await self.fold()

    async def fold(self) -> None:
        result = await self.m.log.read(self.position)
        for record in result.records:
            self.ownership.apply(record.offset, record.envelope)
            self.executions.fold(record.envelope, self.ownership)
        self.position = {**self.position, **result.next}

    async def write(self, events: list[Event]) -> None:
        for event in events:
            await self.m.log.append(PROPOSALS_KEY, [event], epoch=0)
        await self.fold()

    def owner(self, bundle: str) -> str | None:
        record = self.ownership.records.get(bundle)
        return None if record is None else record.dst

    async def step(self, op: str, index: int) -> None:
        bundle = self.bundles[index % len(self.bundles)] if self.bundles else ""
        open_one = self.executions.open.get(self.executions.by_bundle.get(bundle, ""))
        now = self.m.clock.advance(1000)
        if op == "request" and self.owner(bundle) is not None:
            self.number += 1
            source = str(self.owner(bundle))
            target = "b2" if source != "b2" else "b3"
            move = ProposedMove(bundle, "transfer", source, target, "Overloaded")
            chosen = self.executions.select(Proposal(f"drive-{self.number}", "T", "drive", now, (move,)),
                                            self.ownership, now)
            await self.write(list(chosen.send))
        elif op in ("accept", "refuse", "unanswered") and open_one is not None and not open_one.answered:
            status = {"accept": 204, "refuse": 500, "unanswered": None}[op]
            await self.write([self.executions.answer(open_one.request, status, "said")])
        elif op in ("land", "elsewhere") and open_one is not None:
            request = open_one.request
            dst = str(request.dst) if op == "land" else next(b for b in ("b1", "b2", "b3") if b not in (request.dst, request.src))
            await self.m.pulsar_transfer(bundle, request.src, dst)
            await self.fold()
        elif op == "split" and self.owner(bundle) is not None and bundle in self.bundles:
            low, high = (int(x, 16) for x in bundle.rsplit("/", 1)[1].split("_"))
            children = await self.m.pulsar_split(bundle, str(self.owner(bundle)), low + (high - low) // 2)
            self.bundles = [b for b in self.bundles if b != bundle] + children
            await self.fold()
        elif op == "wait":
            self.m.clock.advance(31_000)
        elif op == "restart":
            self.executions = Executions(per_cycle=1, per_minute=100, timeout_ms=30_000)
            self.ownership, self.position = OwnershipProjection(), {}
            await self.fold()
        await self.write([*self.executions.settle(), *self.executions.expire(self.m.clock(), self.ownership)])
        opened = [e.bundle for e in self.executions.open.values()]
        assert len(opened) == len(set(opened)), opened

    async def ends(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for record in (await self.m.log.read()).records:
            event: Any = record.envelope.typed
            if isinstance(event, ExecutionRequested):
                out.setdefault(event.execution_id, [])
            elif record.envelope.type in TERMINAL:
                out.setdefault(event.execution_id, []).append(record.envelope.type)
        return out


@settings(max_examples=150)
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 7)), max_size=40))
def test_every_execution_ends_exactly_once(steps: list[tuple[str, int]]) -> None:
    async def play() -> dict[str, list[str]]:
        harness = Harness()
        await harness.start()
        for op, index in steps:
            await harness.step(op, index)
        await harness.write(harness.executions.shutdown(harness.m.clock.advance(1), harness.ownership))
        return await harness.ends()

    ends = asyncio.run(play())
    assert all(len(found) == 1 for found in ends.values()), ends
