"""Random but plausible namespace histories for property tests of the projections.

A tiny model walks bundles through the ownership protocols (assign, own, unload, release,
transfer, split) and emits the events a namespace actor would append, with per-key seq numbers.
Invalid steps are allowed on purpose (the projection must refuse them, not crash).
"""

from __future__ import annotations

import random
from typing import Any

from balancer.bundles import HashRange, NamespaceBundles
from events.envelope import Envelope

BROKERS = ("b1", "b2", "b3")


class HistoryBuilder:
    def __init__(self, seed: int, namespaces: int = 2) -> None:
        self.rng = random.Random(seed)
        self.envelopes: list[Envelope] = []
        self.seq: dict[str, int] = {}
        self.ts = 1_700_000_000_000
        self.layouts: dict[str, NamespaceBundles] = {}
        for i in range(namespaces):
            name = f"t/ns{i}"
            layout = NamespaceBundles.initial(name, self.rng.choice((1, 2, 4)))
            self.layouts[name] = layout
            self.emit(name, "NamespaceCreated", namespace=name, boundaries=list(layout.boundaries()),
                      anti_affinity_group=None, isolation=None)

    def emit(self, key: str, kind: str, **payload: Any) -> None:
        self.seq[key] = self.seq.get(key, 0) + 1
        self.ts += self.rng.randint(1, 50)
        self.envelopes.append(Envelope(f"id-{len(self.envelopes)}", kind, 1, key, self.seq[key], 1,
                                       self.ts, None, None, payload))

    def step(self) -> None:
        namespace = self.rng.choice(sorted(self.layouts))
        layout = self.layouts[namespace]
        hash_range = self.rng.choice(list(layout))
        bundle = f"{namespace}/{hash_range.name}"
        a, b = self.rng.sample(BROKERS, 2)
        action = self.rng.randrange(8)
        if action == 0:
            self.emit(namespace, "BundleAssigned", bundle=bundle, dst=a, src=None, reason="lookup", force=False)
        elif action == 1:
            self.emit(namespace, "BundleOwned", bundle=bundle, owner=a, src=None)
        elif action == 2:
            self.emit(namespace, "UnloadRequested", bundle=bundle, src=a, reason="Overloaded", decision={})
        elif action == 3:
            self.emit(namespace, "BundleReleased", bundle=bundle, src=a)
        elif action == 4:
            self.emit(namespace, "TransferPrepared", bundle=bundle, src=a, dst=b, reason="Admin", decision={})
        elif action == 5:
            self.emit(namespace, "BundleAssigned", bundle=bundle, dst=b, src=a, reason="transfer", force=False)
        elif action == 6:
            self._split(namespace, hash_range, bundle, a)
        else:
            self.emit(namespace, "BundleAssigned", bundle=bundle, dst=b, src=a, reason="orphan", force=True)

    def _split(self, namespace: str, hash_range: HashRange, bundle: str, owner: str) -> None:
        if not hash_range.splittable:
            return
        self.emit(namespace, "SplitRequested", bundle=bundle, src=owner, algorithm="range_equally_divide",
                  positions=None, reason="admin", unload_children=False)
        middle = hash_range.lower + (hash_range.upper - hash_range.lower) // 2
        if self.rng.random() < 0.8:
            children = [f"{namespace}/{r.name}" for r in hash_range.split_at([middle])]
            self.emit(namespace, "SplitCompleted", parent=bundle, children=children, owner=owner,
                      boundaries=[middle])
            self.layouts[namespace] = self.layouts[namespace].split(hash_range, [middle])


def history(seed: int, steps: int) -> list[Envelope]:
    builder = HistoryBuilder(seed)
    for _ in range(steps):
        builder.step()
    return builder.envelopes


def with_redeliveries(envelopes: list[Envelope], seed: int, count: int) -> list[Envelope]:
    """Insert ``count`` copies of earlier envelopes later in the stream (at-least-once delivery)."""
    rng = random.Random(seed)
    out = list(envelopes)
    for _ in range(count):
        if not out:
            break
        position = rng.randrange(len(out))
        out.insert(rng.randrange(position, len(out) + 1), out[position])
    return out
