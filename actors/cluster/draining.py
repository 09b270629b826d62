"""Drains as verbs of ``Cluster``: drain, undrain, the progress of a drain, a rolling restart.

Invariants:
- bad input is refused here, before a command is sent, so nothing is recorded: a rate of 0,
  negative, NaN or infinite; an unknown broker; the drain of the last broker not drained (the
  drained set is the leader's, asked at once); the leader judges the same rules again;
- who asked is recorded with the drain and the undrain (``by``);
- the progress of a drain is read from the client's view (bundles the broker still holds,
  moving ones included) and the leader's drain (its rate, the bundles it started with, and
  those that stay whatever it asks, with why: a real Pulsar's ``pulsar/system``); a wait ends
  when only those are left;
  waiting measures time on the link's clock (cluster time in process, wall time on Ray);
- a rolling restart takes one broker at a time: drain it, wait until it holds nothing,
  shut it down (nothing to reassign), start it again, wait until it is registered, undrain it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actors.client import ClientView
from actors.cluster.life import TIMEOUT_S
from actors.cluster.link import LinkClock, LinkFleet, LinkTransport
from actors.effects import Receipt
from actors.workload import Capacity
from balancer.config import LoadBalancerConfig
from balancer.drain import Progress, check_drain, check_rate
from balancer.errors import Unavailable, UnknownBroker
from events.catalog import DrainBroker, UndrainBroker

Report = Callable[[str, Progress], None]


class DrainVerbs:
    """The drain verbs of ``Cluster`` (mixed in; it provides these fields and methods)."""

    transport: LinkTransport
    clock: LinkClock
    fleet: LinkFleet
    view: ClientView
    config: LoadBalancerConfig

    async def _issue(self, cls: Any, *, timeout_s: float = TIMEOUT_S, **fields: Any) -> Receipt:
        raise NotImplementedError

    async def shutdown_broker(self, broker_id: str, *, timeout_s: float | None = None) -> None:
        raise NotImplementedError

    async def add_broker(self, broker_id: str | None = None, *, failure_domain: str | None = None,
                         capacity: Capacity | None = None, options: Mapping[str, Any] | None = None,
                         timeout_s: float = TIMEOUT_S) -> str:
        raise NotImplementedError

    async def drains(self, timeout_s: float = TIMEOUT_S) -> dict[str, dict[str, Any]]:
        """Broker -> its drain as the leader holds it (rate, since, who, bundles at the start)."""
        from actors.control_status import leader_of

        leader = leader_of(await self.fleet.statuses(timeout_s))
        if leader is None:
            unsteered = getattr(self.transport, "unsteered", None)  # a mirror says why none leads
            if callable(unsteered) and (why := unsteered("drain")) is not None:
                raise why
            raise Unavailable("no leader answered: the drains are the leader's to tell")
        return {str(d["broker"]): dict(d) for d in leader["control"].get("drains") or ()}

    async def drain_broker(self, broker: str, rate_per_minute: float | None, by: str) -> Receipt:
        """Drain ``broker`` at ``rate_per_minute`` (None: ``loadBalancerDrainMovesPerMinute``)."""
        rate = check_rate(self.config.load_balancer_drain_moves_per_minute
                          if rate_per_minute is None else rate_per_minute)
        await self.transport.catch_up()
        drained = await self.drains()
        check_drain(broker, set(self.view.brokers), [b for b in drained if b != broker])
        return await self._issue(DrainBroker, broker=broker, rate_per_minute=rate, by=by)

    async def undrain_broker(self, broker: str, by: str) -> Receipt:
        """Return ``broker`` to service (a receipt without events: it was not drained)."""
        await self.transport.catch_up()
        if broker not in self.view.brokers and broker not in await self.drains():
            known = ", ".join(sorted(self.view.brokers)) or "none"
            raise UnknownBroker(f"broker {broker!r} is neither registered nor drained; brokers: {known}",
                                value=broker)
        return await self._issue(UndrainBroker, broker=broker, by=by)

    def held_by(self, broker: str) -> int:
        """Bundles ``broker`` holds in the client's view (owned, or moving to or from it)."""
        records = self.view.ownership.records
        return sum(1 for b in self.view.by_broker.involving(broker)
                   if (r := records.get(b)) is not None and r.dst == broker and r.state.active)

    async def drain_progress(self, broker: str) -> tuple[Progress, bool]:
        """The drain's progress, and whether ``broker`` is still drained."""
        await self.transport.catch_up()
        drain = (await self.drains()).get(broker)
        left = self.held_by(broker)
        if drain is None:
            return Progress(left, left, self.config.load_balancer_drain_moves_per_minute), False
        return Progress(max(int(drain["bundles"]), left), left, int(drain["ratePerMinute"]),
                        *_staying(drain)), True

    async def wait_drained(self, broker: str, timeout_s: float, report: Report | None = None,
                           every_ms: int = 1000) -> Progress:
        """Until ``broker`` holds nothing (or is undrained), reporting the progress each
        ``every_ms`` of the link's clock; ``Unavailable`` after ``timeout_s``."""
        deadline = self.clock.clock_s() + timeout_s
        while True:
            progress, drained = await self.drain_progress(broker)
            if report is not None:
                report(broker, progress)
            if progress.finished or not drained:
                return progress
            if self.clock.clock_s() > deadline:
                raise Unavailable(f"broker {broker} still holds {progress.left} bundle(s) after "
                                  f"{timeout_s:g} s of its drain")
            await self.clock.sleep(every_ms)

    async def restart_plan(self, brokers: Sequence[str], rate_per_minute: float | None, by: str,
                           timeout_s: float, report: Report | None = None,
                           step: Callable[[str, str], None] | None = None) -> None:
        """Drain, restart and undrain each of ``brokers`` in turn (see the module's invariants)."""
        for broker in brokers:
            if broker not in self.view.brokers:
                raise UnknownBroker(f"broker {broker!r} is not registered", value=broker)
        for broker in brokers:
            tell = step or (lambda _b, _s: None)
            tell(broker, "draining")
            await self.drain_broker(broker, rate_per_minute, by)
            await self.wait_drained(broker, timeout_s, report)
            tell(broker, "restarting")
            await self.shutdown_broker(broker)
            await self.add_broker(broker)
            tell(broker, "undraining")
            await self.undrain_broker(broker, by)
            tell(broker, "done")


def _staying(drain: Mapping[str, Any]) -> tuple[int, str]:
    """How many of a drain's bundles stay, and why (a drive-mode drain of a real Pulsar names
    them: ``attach.drain``; the project's own leader moves every one)."""
    staying = drain.get("staying") or ()
    whys = sorted({str(s["why"]) for s in staying})
    return int(drain.get("stays", 0)), "; ".join(whys)


def progress_document(broker: str, progress: Progress, drained: bool) -> dict[str, Any]:
    """A drain's progress as ``lbctl brokers drain --json`` and the REST service give it."""
    return {"broker": broker, "drained": drained, "total": progress.total, "left": progress.left,
            "done": progress.done, "ratePerMinute": progress.rate_per_minute, "etaS": progress.eta_s(),
            "stays": progress.stays, "kept": progress.kept}


def progress_of(document: dict[str, Any]) -> Progress:
    return Progress(int(document["total"]), int(document["left"]), int(document["ratePerMinute"]),
                    int(document.get("stays", 0)), str(document.get("kept", "")))
