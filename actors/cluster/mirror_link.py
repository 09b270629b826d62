"""``MirrorLink``: a state directory that mirrors a real Pulsar, opened read-only.

``lbctl attach`` writes ``DIR/log``; every verb on ``--state-dir DIR`` (``namespaces bundles``,
``brokers list``, ``topics lookup``, ``broker-stats load-report``, the web service) gets a
``Cluster`` over this link: its ``ClientView`` folds the log (following it while the mirror
appends, in this process or another), and every command is refused with one line that names
Pulsar's admin URL, because the cluster's owner is Pulsar: a change goes to Pulsar's admin, and
the mirror shows it once Pulsar made it.

Invariants: the link writes nothing and takes no lock (a reader of the embedded log); a refusal
is ``InvalidInput`` (not retriable: exit status 2, one line); a lookup of a topic whose bundle the
mirror shows unowned is refused the same way (Pulsar places a bundle on its own lookup; the
mirror does not ask Pulsar to); the clock is the wall clock. The one exception: in the process
of ``lbctl attach --mode advise|drive`` the link is given that run's hook (``Steered``), which
takes the operator's pause, resume, drains and verdicts on proposals (review mode) and answers
the balancer's status; the hook records them through the mirror's single writer, so the link itself
still writes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from actors.client import ClientView
from actors.effects import Receipt
from actors.settings import ActorSettings
from actors.workload import Capacity
from balancer.config import LoadBalancerConfig
from balancer.errors import InvalidInput, LoadBalancerError
from events.catalog import (
    Command,
    DrainBroker,
    LookupBundle,
    PauseBalancer,
    ResumeBalancer,
    ReviewProposal,
    UndrainBroker,
)
from events.envelope import wall_clock_ms
from events.log.local import LocalEventLog
from events.log.port import Record

SteeringCommand = PauseBalancer | ResumeBalancer | ReviewProposal | DrainBroker | UndrainBroker
"""What only the hook of a drive run takes: the operator's pause, resume, verdicts and drains."""
STEERING = (PauseBalancer, ResumeBalancer, ReviewProposal, DrainBroker, UndrainBroker)


@runtime_checkable
class Steered(Protocol):
    """The advise or drive hook of the attach run this link serves (``lbctl.steer.SteerHook``)."""

    async def take(self, command: SteeringCommand) -> Receipt: ...

    def status(self) -> dict[str, Any] | None: ...


class MirrorLink:
    """A ``Link`` over a mirrored log: views only (and the hook's pause, resume and status)."""

    kind = "pulsar"
    virtual = False

    def __init__(self, view: ClientView, *, url: str | None, owns_view: bool,
                 config: LoadBalancerConfig | None = None, steered: Steered | None = None) -> None:
        self.view = view
        self.steered = steered
        self.url = url or "Pulsar's web service"
        self.config = config or view.config
        self.settings = ActorSettings()
        self._owns_view = owns_view

    @classmethod
    async def open(cls, log_dir: Path, url: str | None) -> MirrorLink:
        """Follow the mirrored log in ``log_dir`` (of Pulsar at ``url``) from any process."""
        config = LoadBalancerConfig()
        view = ClientView(config, LocalEventLog(log_dir, group_commit=False))
        await view.start()
        return cls(view, url=url, owns_view=True, config=config)

    def refusal(self, command: Command) -> InvalidInput:
        admin = f"pulsar-admin --admin-url {self.url}"
        if isinstance(command, LookupBundle):
            return InvalidInput(f"{command.bundle} is not owned in the mirror of {self.url}; Pulsar "
                                f"places a bundle on its own lookup ({admin} topics lookup TOPIC): the "
                                "mirror does not ask Pulsar to", value=command.bundle)
        if isinstance(command, ReviewProposal):
            return InvalidInput(f"proposal {command.proposal_id!r}: no `lbctl attach --mode drive` in "
                                "review mode serves this state directory's web service, so no verdict "
                                "can make it run", value=command.proposal_id)
        if isinstance(command, DrainBroker | UndrainBroker):
            return self._undriven(f"{command.TYPE} {command.broker}", command.broker)
        if isinstance(command, PauseBalancer | ResumeBalancer):
            return InvalidInput(f"{command.TYPE}: no `lbctl attach --mode drive` serves this state "
                                f"directory's web service, so nothing of this project balances the "
                                f"mirror of {self.url}; Pulsar's own shedding stops with {admin} brokers "
                                "update-dynamic-config --config loadBalancerSheddingEnabled --value false",
                                value=command.TYPE)
        return InvalidInput(f"{command.TYPE}: this cluster is mirrored from Pulsar at {self.url}; "
                            f"send the change to Pulsar's admin ({admin} ...), the mirror shows it "
                            "once Pulsar made it", value=command.TYPE)

    def unsteered(self, what: str) -> InvalidInput | None:
        """Why nothing answers as the leader for ``what``: no drive run serves this mirror (None
        when one does)."""
        return None if self.steered is not None else self._undriven(what, what)

    def _undriven(self, what: str, value: str) -> InvalidInput:
        return InvalidInput(f"{what}: no `lbctl attach --mode drive` serves this state directory's web "
                            f"service, so nothing of this project moves bundles of {self.url}; run one, "
                            f"or unload them with pulsar-admin --admin-url {self.url} namespaces unload",
                            value=value)

    async def call(self, target: str, command: Command,
                   timeout_s: float) -> tuple[object | None, LoadBalancerError | None]:
        if self.steered is not None and isinstance(command, STEERING):
            try:
                return await self.steered.take(command), None
            except LoadBalancerError as exc:
                return None, exc
        return None, self.refusal(command)

    async def catch_up(self) -> None:
        if self._owns_view:
            await self.view.catch_up()

    async def open_for_commands(self) -> None:
        """Nothing: a mirror takes no command (``call`` refuses each, naming Pulsar's admin)."""

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        return await self.view.wait_for(predicate, timeout_s)

    def clock_s(self) -> float:
        return time.monotonic()

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def sleep(self, ms: int) -> None:
        await asyncio.sleep(max(0.005, ms / 1000))

    def now_ms(self) -> int:
        return wall_clock_ms()

    def retry_s(self) -> float:
        return 1.0

    async def history(self) -> list[Record]:
        return list((await self.view.log.read()).records)

    def describe(self) -> Mapping[str, Any]:
        return {"pulsar_url": self.url}

    def cluster_s(self, ms: int) -> float:
        return ms / 1000

    def _no(self, what: str) -> InvalidInput:
        return InvalidInput(f"{what}: the brokers of a mirrored cluster are Pulsar's own ({self.url}); "
                            "start, stop or kill them there", value=what)

    async def spawn_broker(self, broker_id: str | None, failure_domain: str | None,
                           capacity: Capacity | None, options: Mapping[str, Any] | None) -> str:
        raise self._no("add a broker")

    def kill(self, name: str, *, broker_id: str | None = None, restart: bool) -> None:
        raise self._no(f"kill {name}")

    async def ask_broker(self, broker_id: str, method: str) -> None:
        raise self._no(f"{method} {broker_id}")

    async def retire(self, name: str) -> None:
        raise self._no(f"retire {name}")

    async def snapshots(self, target: Mapping[int, int], timeout_s: float) -> dict[str, dict[str, Any]]:
        return {}

    async def statuses(self, timeout_s: float | None = None) -> dict[str, dict[str, Any]]:
        """The steering hook's leader-shaped status, when this process runs one."""
        found = None if self.steered is None else self.steered.status()
        return {} if found is None else {str(found["name"]): found}

    async def close(self) -> None:
        if self._owns_view:
            await self.view.close()
