"""Memory stays bounded over a long run.

Command outcomes (idempotent repeats) and anomalies are the state that grew with history; both
keep the newest within a bound (``ActorSettings.outcomes_kept``, ``SequenceTracker.kept``), and
a body rebuilt from the log remembers exactly what the live one does.
"""

from __future__ import annotations

from actors.effects import Outcomes
from actors.runtime import build_cluster, wait_ready
from actors.settings import ActorSettings
from events.catalog import BundleReleased, CreateNamespace, UnloadBundle
from events.envelope import Envelope
from projections.tracking import SequenceTracker


def test_outcomes_stay_within_their_bound_over_a_long_run() -> None:
    settings = ActorSettings(outcomes_kept=40)
    host = build_cluster(3, settings=settings)
    assert wait_ready(host, 3)
    host.call(CreateNamespace(command_id="ns", epoch=host.epoch, namespace="t/n", bundles=4))
    bundles = [row.bundle for row in host.view.bundles("t/n")]
    sizes = []
    for round_ in range(60):
        for bundle in bundles:
            host.submit(UnloadBundle(command_id=f"unload-{round_}-{bundle}", epoch=host.epoch, bundle=bundle))
        host.advance(5_000)
        sizes.append(len(host.body("ns:0").outcomes))  # type: ignore[attr-defined]
    assert max(sizes) <= 40 and sizes[-1] == 40  # full, never above
    recent = UnloadBundle(command_id=f"unload-59-{bundles[0]}", epoch=host.epoch, bundle=bundles[0])
    assert host.body("ns:0").outcomes.repeat(recent) is not None  # type: ignore[attr-defined]
    host.restart("ns:0")
    assert len(host.body("ns:0").outcomes) == 40  # type: ignore[attr-defined]


def test_the_newest_outcomes_are_kept_in_log_order() -> None:
    outcomes = Outcomes(kept=3)
    for i in range(10):
        outcomes.fold(BundleReleased(bundle="b", src="b1"), f"c{i}")
    assert len(outcomes) == 3
    assert outcomes._by_id.keys() == {"c7", "c8", "c9"}


def test_anomalies_keep_the_newest_and_count_the_rest() -> None:
    tracker = SequenceTracker(kept=100)
    for offset in range(10_000):
        envelope = Envelope(str(offset), "BundleOwned", 1, "k", 1, 1, offset, None, None, {})
        tracker.admit(offset, envelope)  # every one after the first is a duplicate
    assert len(tracker.anomalies) <= 125
    assert tracker.dropped + len(tracker.anomalies) == 9_999
    assert tracker.anomalies[-1].offset == 9_999
    restored = SequenceTracker.restore(tracker.snapshot())
    assert restored.dropped == tracker.dropped and restored.anomalies == tracker.anomalies
