"""Optional abilities: what some logs, transports and snapshot stores can do beyond their port.

Each is a small runtime-checkable protocol that a host checks once, when it is made (``LiveHost``
keeps the answer), instead of probing an attribute by name at every use. A body's optional part
is its class: a ``Follower`` keeps an ownership view and names dead letters.

Invariant: an object without the ability is used through its port alone, never refused for
lacking one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from events.envelope import Envelope
from events.skim import Skim

if TYPE_CHECKING:
    from actors.runtime.paced import PaceReport


@runtime_checkable
class FencedLog(Protocol):
    """A log whose writer a newer incarnation fences (Kafka's transactional producer): once
    fenced, the host sends nothing more."""

    @property
    def fenced(self) -> bool: ...


@runtime_checkable
class ObservedLog(Protocol):
    """A log that keeps per-writer heads (Kafka): it is told of every record folded, so a key
    two processes write continues after the other writer's records."""

    def observe(self, envelope: Envelope) -> None: ...


@runtime_checkable
class SkimmingLog(Protocol):
    """A log that can hand the records its reader skims with their header only
    (``events.skim``): memory, local and Kafka handles."""

    skim: Skim | None


@runtime_checkable
class TopicLog(Protocol):
    """A log that is a named topic (Kafka), named in what a start refuses."""

    topic: str


@runtime_checkable
class CountingTransport(Protocol):
    """A transport that counts its failed sends and the batches it sent (``status()``)."""

    failed_sends: int
    batches: int


@runtime_checkable
class NotingStore(Protocol):
    """A snapshot store that names each snapshot it could not use."""

    notes: list[str]


@runtime_checkable
class DirectoryStore(Protocol):
    """A snapshot store on a disk, named where a start found no snapshot."""

    directory: Path


@runtime_checkable
class PacedLink(Protocol):
    """A link whose cluster time is a paced clock that this process runs (``RayLink``): it
    says how long that clock stood still for late actors."""

    def pace(self) -> PaceReport | None: ...
