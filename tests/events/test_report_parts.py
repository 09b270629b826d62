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
