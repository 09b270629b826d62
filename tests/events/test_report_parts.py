"""A broker with 50,000 bundles still reports.

Its report is appended in parts that each fit a Kafka message (1 MiB), and the leader's load view
folded from the parts equals the view folded from one unsplit report: the broker's load once,
every bundle one sample.
"""

from __future__ import annotations

import random

from actors.broker import BrokerBody
from actors.workload import Workload
from balancer.config import LoadBalancerConfig
from events.codec import encode
from events.envelope import Envelope
from events.log.port import Record
from events.report_parts import BUNDLES_PER_PART, is_continuation
from projections.load import LoadProjection

BUNDLES = 50_000
KAFKA_MESSAGE_MAX = 1 << 20


def _envelope(seq: int, kind: str, payload: dict, key: str = "broker-1") -> Envelope:
    return Envelope(f"id-{seq}", kind, 1, key, seq, 1, 1_700_000_000_000 + seq, None, None, payload)


def _broker_owning(count: int) -> BrokerBody:
    workload = Workload.zipf(random.Random(1), ["public/default"], topics_per_namespace=3 * count)
    body = BrokerBody("broker-1", LoadBalancerConfig(), workload)
    width = (1 << 32) // count
    history = [_envelope(1, "BrokerRegistered", {"broker_id": "broker-1", "url": "", "version": "3.3.0"})]
    for i in range(count):
        bundle = f"public/default/0x{i * width:08x}_0x{(i + 1) * width:08x}"
        history.append(_envelope(i + 1, "BundleOwned", {"bundle": bundle, "owner": "broker-1"},
                                 key="public/default"))
    body.recover(Record(0, offset, e) for offset, e in enumerate(history))
    return body


def test_a_broker_with_50000_bundles_reports_in_parts_that_fit_a_kafka_message() -> None:
    body = _broker_owning(BUNDLES)
    effects = body._publish(1_700_000_100_000)
    parts = [event for _, event in effects.append]
    assert len(parts) == -(-BUNDLES // BUNDLES_PER_PART)
    assert sum(len(p.bundles) for p in parts) == BUNDLES
    assert not is_continuation(parts[0].broker_load) and all(is_continuation(p.broker_load) for p in parts[1:])
    for seq, part in enumerate(parts, start=10):
        assert len(encode(_envelope(seq, "LoadReported", part.to_payload()))) < KAFKA_MESSAGE_MAX

    split, whole = LoadProjection(), LoadProjection()
    for seq, part in enumerate(parts, start=10):
        split.apply(seq, _envelope(seq, "LoadReported", part.to_payload()))
    one = {"broker_id": "broker-1", "broker_load": parts[0].broker_load,
           "bundles": [b for p in parts for b in p.bundles]}
    whole.apply(10, _envelope(10, "LoadReported", one))
    assert split.brokers["broker-1"].load == whole.brokers["broker-1"].load
    assert split.brokers["broker-1"].load.reports == 1  # the broker's load folded once
    assert split.bundles.keys() == whole.bundles.keys()
    for bundle, data in whole.bundles.items():
        other = split.bundles[bundle]
        assert (other.stats, other.long_term.msg_rate) == (data.stats, data.long_term.msg_rate)


def test_a_small_report_is_one_event_as_before() -> None:
    body = _broker_owning(100)
    effects = body._publish(1_700_000_100_000)
    assert len(effects.append) == 1
    event = effects.append[0][1]
    assert len(event.bundles) == 100 and "continued" not in event.broker_load


def _fold(view: LoadProjection, seq: int, events: list) -> int:
    for event in events:
        seq += 1
        view.apply(seq, _envelope(seq, "LoadReported", event.to_payload()))
    return seq


def test_a_delta_report_folds_into_exactly_the_averages_of_the_full_report() -> None:
    """A broker's reports list only the bundles whose stats changed; the leader's averages of
    every bundle are bit for bit those that full reports of the same stats give, across a
    restart of the view from its snapshot, a change of the broker's bundles and full reports."""
    import dataclasses

    from events.catalog import LoadReported
    from events.report_parts import FULL_EVERY, is_delta

    rng = random.Random(7)
    body = _broker_owning(300)
    report, stats = body._load()
    deltas, fulls = LoadProjection(), LoadProjection()
    seq_d = seq_f = 0
    kinds: list[bool] = []
    for turn in range(40):
        stats = [dataclasses.replace(s, msg_rate_in=s.msg_rate_in * rng.uniform(0.5, 2.0))
                 if rng.random() < 0.05 else s for s in stats]
        if turn == 25:
            stats = stats[:-1]  # a bundle left the broker: the next report is full
        effects = body._publish(1_700_000_100_000 + turn * 10_000, (report, stats))
        sent = [event for _, event in effects.append]
        kinds.append(is_delta(sent[0].broker_load))
        if kinds[-1]:
            assert len(sent) == 1 and len(sent[0].bundles) < len(stats)
        seq_d = _fold(deltas, seq_d, sent)
        seq_f = _fold(fulls, seq_f, LoadReported.parts(report, stats))
        if turn == 17:  # a restarted leader: the view from its snapshot goes on folding deltas
            deltas = LoadProjection.restore(deltas.snapshot())
    assert not kinds[0] and not kinds[25] and kinds.count(True) >= 30
    assert all(not kinds[i] for i in range(0, 25, FULL_EVERY))
    assert deltas.bundles.keys() == fulls.bundles.keys()
    for bundle, data in fulls.bundles.items():
        other = deltas.bundles[bundle]
        assert (other.stats, other.short_term, other.long_term) == (data.stats, data.short_term, data.long_term)
    assert deltas.brokers["broker-1"].load == fulls.brokers["broker-1"].load
