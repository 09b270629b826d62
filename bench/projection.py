"""Benchmark A2: folding events into the ownership projection vs a bare loop of dict updates.

The reference does the same dict updates the fold must do (per-key last seq, per-bundle
(state, dst, src, version)) without any checks; the ratio is what the state machine costs.

The fold reads typed events (``Envelope.message()``), built from the payload once per envelope:
the headline folds fresh envelopes, as one reader of a log gets them (typing included); the
``shared`` figure folds envelopes already typed, as every further body folding the same records
in one process does (the in-process and simulated hosts hand one record to every body).

``signed`` (A2s) folds the same kind of events from a signed log (docs/design/authority.md), as a
reader in another process than its writers gets them (nothing it signed itself): each append's
first record verified (Ed25519), every other record checked by its digest; once with one event
per append, once with appends of 100 (a host's group commit in a storm).

``python -m bench.projection [--quick] [--json PATH]`` prints the row (and writes it as JSON).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from events import signing
from events.catalog import (
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    Event,
    NamespaceCreated,
    UnloadRequested,
)
from events.codec import decode, encode
from events.envelope import Envelope
from projections.ownership import OwnershipProjection

_CYCLE: tuple[Callable[[str], Event], ...] = (
    lambda bundle: BundleAssigned(bundle=bundle, dst="b1"),
    lambda bundle: BundleOwned(bundle=bundle, owner="b1"),
    lambda bundle: UnloadRequested(bundle=bundle, src="b1", reason="admin"),
    lambda bundle: BundleReleased(bundle=bundle, src="b1"),
)


def protocol_events(count: int, namespaces: int = 100) -> list[Envelope]:
    """Namespaces created, then bundles walked through assign -> own -> unload -> release."""
    events: list[Envelope] = []
    seq: dict[str, int] = {}

    def emit(key: str, event: Event) -> None:
        # The payload a writer stores (every field, as ``seal`` takes it from the event).
        seq[key] = seq.get(key, 0) + 1
        events.append(Envelope(str(len(events)), event.TYPE, event.VERSION, key, seq[key], 1, len(events),
                               None, None, event.to_payload()))

    for n in range(namespaces):
        name = f"t/ns{n}"
        emit(name, NamespaceCreated(namespace=name,
                                    boundaries=[0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]))
    for i in range(count - namespaces):
        name = f"t/ns{i % namespaces}"
        bundle = f"{name}/0x{(i // namespaces // 4 % 4) * 0x40000000:08x}_0x{min((i // namespaces // 4 % 4 + 1) * 0x40000000, 0xFFFFFFFF):08x}"
        step = _CYCLE[(i // namespaces) % 4]
        emit(name, step(bundle))
    return events


def _fold(events: list[Envelope]) -> float:
    projection = OwnershipProjection()
    apply = projection.apply  # as a runner folding a batch would hold it
    start = time.perf_counter()
    for offset, envelope in enumerate(events):
        apply(offset, envelope)
    elapsed = time.perf_counter() - start
    assert not projection.anomalies, projection.anomalies[:3]
    return elapsed


def _bare(events: list[Envelope]) -> float:
    start = time.perf_counter()
    last: dict[str, int] = {}
    records: dict[Any, tuple[str, Any, Any, int]] = {}
    for envelope in events:
        last[envelope.key] = envelope.seq
        payload = envelope.payload
        bundle = payload.get("bundle")
        previous = records.get(bundle)
        records[bundle] = (envelope.type, payload.get("dst") or payload.get("owner"),
                           payload.get("src"), 1 if previous is None else previous[3] + 1)
    return time.perf_counter() - start


def _fresh(events: list[Envelope]) -> list[Envelope]:
    """The same envelopes, not typed yet (as a log read hands them)."""
    return [Envelope(*envelope) for envelope in events]


def signed(events: list[Envelope], per_append: int) -> list[Envelope]:
    """``events`` as a signed log holds them: per key, appends of ``per_append`` signed by the
    namespace shard (records of one key keep their order), decoded from their wire bytes."""
    identity = signing.Root().issue("namespace:0/1")
    out: list[Envelope] = []
    pending: dict[str, list[Envelope]] = {}

    def flush(key: str) -> None:
        unit = pending.pop(key)
        _, raws = identity.sign_append(unit, [encode(e) for e in unit])
        out.extend(decode(raw) for raw in raws)

    for envelope in events:
        pending.setdefault(envelope.key, []).append(envelope)
        if len(pending[envelope.key]) >= per_append:
            flush(envelope.key)
    for key in list(pending):
        flush(key)
    signing._SIGNED.clear()  # a reader in another process: it signed none of them
    signing._CERTS.clear()
    return out


def run_signed(count: int = 20_000, repeats: int = 3) -> dict[str, Any]:
    events = protocol_events(count)
    one = min(_fold(signed(events, 1)) for _ in range(repeats))
    hundred = min(_fold(signed(events, 100)) for _ in range(repeats))
    plain = min(_fold(_fresh(events)) for _ in range(repeats))
    return {"id": "A2s", "what": "fold of a signed log (verified)", "events": len(events),
            "per_append_1_per_s": len(events) / one, "per_append_100_per_s": len(events) / hundred,
            "unsigned_per_s": len(events) / plain}


def run(count: int = 200_000, repeats: int = 3) -> dict[str, Any]:
    events = protocol_events(count)
    fold = min(_fold(_fresh(events)) for _ in range(repeats))
    shared = min(_fold(events) for _ in range(repeats))  # typed by the first of them
    bare = min(_bare(events) for _ in range(repeats))
    return {"id": "A2", "what": "fold into the ownership projection", "events": len(events),
            "events_per_s": len(events) / fold, "shared_per_s": len(events) / shared,
            "reference_per_s": len(events) / bare, "ratio": fold / bare}


def render(row: dict[str, Any]) -> str:
    return (f"A2  fold into the ownership projection, {row['events']:,} events: "
            f"{row['events_per_s']:,.0f} ev/s (already typed: {row['shared_per_s']:,.0f} ev/s); "
            f"bare dict-update loop {row['reference_per_s']:,.0f} ev/s; "
            f"ratio {row['events_per_s'] / row['reference_per_s']:.2f} ({row['ratio']:.1f}x slower)")


def render_signed(row: dict[str, Any]) -> str:
    return (f"A2s fold of a signed log, {row['events']:,} events: appends of 1 "
            f"{row['per_append_1_per_s']:,.0f} ev/s, of 100 {row['per_append_100_per_s']:,.0f} ev/s; "
            f"the same unsigned {row['unsigned_per_s']:,.0f} ev/s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.projection", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="50k events instead of 200k")
    parser.add_argument("--json", metavar="PATH", help="also write the row as JSON")
    args = parser.parse_args(argv)
    row = run(50_000 if args.quick else 200_000)
    print(render(row))
    row_signed = run_signed(5_000 if args.quick else 20_000)
    print(render_signed(row_signed))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"rows": [row, row_signed]}, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
