"""``web.observe.latency``: the phases PIP-307 times, on the clock the caller passes.

A transfer, a plain unload and a lookup are fed as the log holds them, each record at a time the
test chooses: every phase lasts what the clock says between its first and last record, is
attributed to the broker Pulsar attributes it to, is not timed when its start was history
(replayed at start-up), and a phase that never ends is forgotten past ``MAX_PENDING``.
"""

from __future__ import annotations

from events.catalog import (
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    Event,
    TransferPrepared,
    UnloadRequested,
)
from tests.support.given import GivenBody
from web.observe.latency import MAX_PENDING, Latencies

B = "public/default/0x00000000_0x80000000"


class _NoBody:
    pass


def feed(latencies: Latencies, steps: list[tuple[float, Event]], live: bool = True) -> None:
    log = GivenBody(_NoBody())  # type: ignore[arg-type]  (only its record stamping is used)
    for at_ms, event in steps:
        latencies.take(log.record(event), at_ms, live)


def observed(latencies: Latencies, phase: str) -> dict[str, tuple[int, float]]:
    return {broker: (h.observations, h.total) for (p, broker), h in latencies.histograms.items()
            if p == phase and h.observations}


def test_a_transfer_times_release_assign_unload_and_transfer() -> None:
    latencies = Latencies()
    feed(latencies, [(100.0, TransferPrepared(bundle=B, src="b1", dst="b2", reason="admin")),
                     (103.0, BundleAssigned(bundle=B, dst="b2", src="b1", reason="transfer")),
                     (110.0, BundleOwned(bundle=B, owner="b2", src="b1"))])
    assert observed(latencies, "release") == {"b1": (1, 3.0)}  # until the source let it go
    assert observed(latencies, "assign") == {"b2": (1, 7.0)}  # on the destination
    assert observed(latencies, "unload") == {"b1": (1, 10.0)}
    assert observed(latencies, "transfer") == {"b1": (1, 10.0)}


def test_a_plain_unload_ends_when_released_and_a_lookup_when_owned() -> None:
    latencies = Latencies()
    feed(latencies, [(0.0, UnloadRequested(bundle=B, src="b1", reason="admin")),
                     (4.0, BundleReleased(bundle=B, src="b1")),
                     (5.0, BundleAssigned(bundle=B, dst="b3", reason="lookup")),
                     (7.5, BundleOwned(bundle=B, owner="b3"))])
    assert observed(latencies, "unload") == observed(latencies, "release") == {"b1": (1, 4.0)}
    assert observed(latencies, "lookup") == {"b3": (1, 2.5)}
    assert observed(latencies, "transfer") == {}


def test_history_replayed_at_start_up_is_not_timed() -> None:
    latencies = Latencies()
    feed(latencies, [(0.0, TransferPrepared(bundle=B, src="b1", dst="b2", reason="admin"))], live=False)
    feed(latencies, [(0.1, BundleOwned(bundle=B, owner="b2", src="b1"))])
    assert not any(h.observations for h in latencies.histograms.values())
    assert [b for b, _ in latencies.series("unload", ["b1", "b2"])] == ["b1", "b2"]  # there, at 0


def test_phases_that_never_end_are_bounded() -> None:
    latencies = Latencies()
    feed(latencies, [(float(i), UnloadRequested(bundle=f"public/default/0x{i:08x}_0x{i + 1:08x}", src="b1",
                                                reason="admin")) for i in range(MAX_PENDING + 5)])
    assert all(len(table) <= MAX_PENDING for table in latencies._open.values())
