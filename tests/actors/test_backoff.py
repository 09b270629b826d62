"""Retries back off (a poisoned broker key made a broker retry its registration 151
times and the leader its expiry 270 times in 5 cluster-minutes). Registration and expiry retry
after ``retry_ms``, then twice as long each time, up to ``retry_backoff_max_ms``."""

from __future__ import annotations

from itertools import pairwise

from actors.broker import BrokerBody
from actors.settings import ActorSettings, backoff_ms
from actors.workload import Workload
from balancer.config import LoadBalancerConfig

FIVE_MINUTES = 5 * 60_000


def test_the_backoff_doubles_from_the_retry_interval_to_its_bound() -> None:
    settings = ActorSettings(retry_ms=2_000, retry_backoff_max_ms=16_000)
    assert [backoff_ms(settings, n) for n in range(6)] == [2_000, 4_000, 8_000, 16_000, 16_000, 16_000]
    assert backoff_ms(settings, 10_000) == 16_000


def test_a_registration_that_never_lands_is_retried_with_backoff() -> None:
    settings = ActorSettings()
    body = BrokerBody("broker-1", LoadBalancerConfig(), Workload([]), settings=settings)
    sent = [now for now in range(0, FIVE_MINUTES, 100) if body.on_tick(now).append]
    gaps = [b - a for a, b in pairwise(sent)]
    assert gaps[:4] == [2_000, 4_000, 8_000, 16_000] and set(gaps[4:]) == {16_000}
    assert len(sent) <= 5 + FIVE_MINUTES // settings.retry_backoff_max_ms  # not 151


def _confirmation_times(settings: ActorSettings) -> list[int]:
    """When a broker with one bundle Assigning to it sends ``ConfirmOwnership``, none landing."""
    from events.catalog import BrokerRegistered, BundleAssigned, Message, NamespaceCreated
    from events.envelope import Stamper, counting_ids
    from events.log.port import Record

    body = BrokerBody("broker-1", LoadBalancerConfig(), Workload([]), settings=settings)
    stamper, seqs = Stamper(clock_ms=lambda: 0, new_id=counting_ids()), {}
    history: list[tuple[str, Message]] = [
        ("broker-1", BrokerRegistered(broker_id="broker-1", url="pulsar://broker-1:6650",
                                      failure_domain=None, version="3.3.0", capacity={})),
        ("public/default", NamespaceCreated(namespace="public/default", boundaries=[0, 0xFFFFFFFF])),
        ("public/default", BundleAssigned(bundle="public/default/0x00000000_0xffffffff", dst="broker-1")),
    ]
    for offset, (key, message) in enumerate(history):
        seqs[key] = seqs.get(key, 0) + 1
        body.fold(Record(0, offset, stamper.seal(message, key=key, seq=seqs[key], epoch=0)))
    return [now for now in range(0, FIVE_MINUTES, 100)
            if any(c.TYPE == "ConfirmOwnership" for c in body.on_tick(now).send)]


def test_in_a_storm_a_confirmation_that_never_lands_backs_off_to_the_bound() -> None:
    settings = ActorSettings(confirm_backoff_from=1)  # one waiting bundle makes a storm here
    gaps = [b - a for a, b in pairwise(_confirmation_times(settings))]
    assert gaps[:4] == [2_000, 4_000, 8_000, 16_000] and set(gaps[4:]) == {settings.retry_backoff_max_ms}


def test_a_handover_s_few_confirmations_are_sent_again_every_retry_interval() -> None:
    settings = ActorSettings()
    gaps = {b - a for a, b in pairwise(_confirmation_times(settings))}
    assert gaps == {settings.retry_ms}  # one bundle waiting is no storm: no backoff
