"""O1's figures from a log (bench/drain.py): what a bundle that moves, a broker that leaves and
a crashed broker cost in unavailable bundle-seconds, and when a lookup counts as failed; and
one tiny rolling restart each way, drained and as Pulsar shuts a broker down."""

from __future__ import annotations

import asyncio
from typing import Any

from bench.drain import LOOKUP_TIMEOUT_MS, failed_lookups, o1, unavailability
from events.envelope import Envelope
from events.log.port import Record


def _log(*rows: tuple[int, str, dict[str, Any]]) -> list[Record]:
    return [Record(0, offset, Envelope(f"e{offset}", kind, 1, "public/a", offset, 1, ts, None, None, payload))
            for offset, (ts, kind, payload) in enumerate(rows)]


def test_a_move_counts_from_its_first_record_until_owned_again_and_a_crash_from_its_start() -> None:
    log = _log((0, "BundleOwned", {"bundle": "a", "owner": "b1"}),
               (0, "BundleOwned", {"bundle": "b", "owner": "b2"}),
               (1_000, "TransferPrepared", {"bundle": "a", "src": "b1", "dst": "b2"}),
               (1_250, "BundleOwned", {"bundle": "a", "owner": "b2"}),
               (9_000, "BrokerLeft", {"broker_id": "b2"}))
    down = unavailability(log, 0, 10_000, outages=[("b2", 2_000, 5_000)])
    assert down["a"] == [(1_000, 1_250), (2_000, 5_000), (9_000, 10_000)]
    assert down["b"] == [(2_000, 5_000), (9_000, 10_000)]


def test_a_lookup_fails_only_when_its_bundle_stays_unavailable_past_the_timeout() -> None:
    short = {"a": [(0, LOOKUP_TIMEOUT_MS // 2)]}
    assert failed_lookups(short, ["a"], 0, 10_000)[0] == 0
    long = {"a": [(0, 10 * LOOKUP_TIMEOUT_MS)]}
    failed, probes = failed_lookups(long, ["a"], 0, 10 * LOOKUP_TIMEOUT_MS)
    assert probes == 10 * LOOKUP_TIMEOUT_MS * 20 // 1000 and 0.8 * probes < failed < probes


def test_a_drained_rolling_restart_leaves_bundles_unavailable_far_less_than_pulsars_shutdown() -> None:
    # Pulsar's shutdown unloads every bundle at once, each placed again at its next lookup; a
    # drain transfers them at its rate before the broker goes down.
    pulsar = asyncio.run(o1(3, 64, "unload", 1200))
    drained = asyncio.run(o1(3, 64, "drain", 1200))
    assert pulsar["bundles_unavailable"] == drained["bundles_unavailable"] == 64
    assert drained["unavailable_bundle_s"] * 10 < pulsar["unavailable_bundle_s"]
    assert drained["failed_lookups"] == 0
