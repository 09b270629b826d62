"""Retries back off (issue 19: a poisoned broker key made a broker retry its registration 151
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
