"""The modular load manager's ownership, polled -> the project's ownership events.

With ``ModularLoadManagerImpl`` Pulsar keeps ownership in ZooKeeper and writes no channel; the
shell polls each broker's ``GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces`` (bundle ->
status; the request is redirected to that broker) and each namespace's ``GET
/admin/v2/namespaces/{tenant}/{ns}/bundles``. ``OwnershipPoll`` turns one complete poll into the
events that make the log's records equal to it: a bundle newly owned is assigned and owned; one
owned elsewhere than the log says moved (``TransferPrepared`` then assigned and owned); one no
broker owns was unloaded (``UnloadRequested`` then released); a bundle Pulsar's layout split is
``SplitRequested`` + ``SplitCompleted`` by its owner.

Invariants: pure (no I/O, no clock); a poll sees states, not transitions, so a move between two
polls is told as the shortest path the fold accepts (``Shadow.path_to``), a bundle that moved
and came back between two polls is not told at all (the docs say how fresh the poll is); every
event returned is applied to the shadow already.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from attach.channel import Append
from attach.shadow import SPLIT_ALGORITHM, Shadow, Want
from balancer.bundles import HashRange, NamespaceBundles, namespace_of
from balancer.ownership import BundleState
from events.catalog import (
    Event,
    NamespaceCreated,
    SplitCompleted,
    SplitRequested,
    TransferPrepared,
    UnloadRequested,
)

DECISION = {"label": "pulsar", "reason": "Pulsar's own move (modular manager, polled)"}
"""No "strategy": the move is Pulsar's, not one of a strategy the what-if could replay."""


class OwnershipPoll:
    """Polls of owners and layouts -> appends, keeping what the fold holds (``shadow``)."""

    def __init__(self, shadow: Shadow | None = None) -> None:
        self.shadow = shadow or Shadow()

    def layout_seen(self, namespace: str, boundaries: Sequence[int], owners: Mapping[str, str], *,
                    ts_ms: int, causation_id: str) -> list[Append]:
        """The namespace created, or its bundles split, to match Pulsar's layout ``boundaries``."""
        layout = self.shadow.layouts.get(namespace)
        if layout is None:
            event = NamespaceCreated(namespace=namespace, boundaries=list(boundaries))
            self.shadow.apply(event)
            return [Append(namespace, (event,), ts_ms, (causation_id,))]
        now = NamespaceBundles.from_boundaries(namespace, boundaries)
        events: list[Event] = []
        for parent in list(layout):
            if parent in now:
                continue
            inside = [r for r in now if parent.lower <= r.lower and r.upper <= parent.upper]
            if len(inside) < 2:
                continue  # not a split of this parent (Pulsar merges nothing): left as it is
            events.extend(self._split(f"{namespace}/{parent.name}", inside, owners))
        return [Append(namespace, tuple(events), ts_ms, (causation_id,) * len(events))] if events else []

    def _split(self, parent: str, children: list[HashRange], owners: Mapping[str, str]) -> list[Event]:
        namespace = namespace_of(parent)
        record = self.shadow.record(parent)
        owner = (record.dst if record is not None and record.state is BundleState.OWNED else None) \
            or next((owners[f"{namespace}/{c.name}"] for c in children if f"{namespace}/{c.name}" in owners), None)
        if owner is None:
            return []
        positions = [c.lower for c in children[1:]]
        events: list[Event] = []
        split = SplitRequested(bundle=parent, src=owner, algorithm=SPLIT_ALGORITHM, positions=positions,
                               reason="pulsar")
        if self.shadow.apply(split):
            events.append(split)
        else:
            path = self.shadow.path_to(parent, Want(BundleState.SPLITTING, None, owner)) or []
            for event in path:
                self.shadow.apply(event)
            events.extend(path)
        completed = SplitCompleted(parent=parent, children=[f"{namespace}/{c.name}" for c in children],
                                   owner=owner, boundaries=positions)
        if self.shadow.apply(completed):
            events.append(completed)
        return events

    def owners_seen(self, namespace: str, owners: Mapping[str, str], *, ts_ms: int,
                    causation_id: str) -> list[Append]:
        """The events that make the owners of ``namespace``'s bundles ``owners`` (bundle -> broker;
        a bundle left out is owned by no broker)."""
        layout = self.shadow.layouts.get(namespace)
        if layout is None:
            return []
        events: list[Event] = []
        for bundle in layout.bundle_ids():
            record = self.shadow.record(bundle)
            owner = owners.get(bundle)
            held = record.dst if record is not None and record.state is BundleState.OWNED else None
            if owner == held:
                continue
            if owner is None:
                if record is None or record.state in (BundleState.FREE, BundleState.DELETED):
                    continue
                want = Want(BundleState.FREE, None, held or record.src)
            else:
                want = Want(BundleState.OWNED, owner, held)
            path = self.shadow.path_to(bundle, want) or []
            for event in path:
                self.shadow.apply(event)
            events.extend(_explained(path))
        return [Append(namespace, tuple(events), ts_ms, (causation_id,) * len(events))] if events else []


def _explained(events: list[Event]) -> list[Event]:
    return [dataclasses.replace(e, decision={**DECISION, "kind": "transfer" if isinstance(e, TransferPrepared)
                                             else "unload"})
            if isinstance(e, TransferPrepared | UnloadRequested) else e for e in events]
