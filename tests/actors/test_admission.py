"""Admission instead of retries: a live actor too far behind answers a retried command "busy,
retry after T" at once instead of letting it wait past its sender's timeout; two lookups of one
bundle waiting together are one decision; a sender does not send a retry while its first try is
still on its way, nor before a busy answer's retry-after."""

from __future__ import annotations

import asyncio

from actors.runtime.admission import RETRY_AFTER_MIN_MS, InFlight
from balancer.errors import Busy, LoadBalancerError
from events.catalog import AssignBundle, CreateNamespace, LookupBundle
from tests.actors.test_group_commit import BROKERS, BUNDLES, _shard, _written


def _assign(i: int, bundle: str) -> AssignBundle:
    return AssignBundle(command_id=f"leader:assign:{bundle}:{i}", epoch=1, bundle=bundle,
                        dst=BROKERS[i % len(BROKERS)], reason="lookup")


async def test_a_busy_shard_refuses_retried_commands_with_a_retry_after_and_decides_nothing_for_them() -> None:
    host, log = await _shard(max_group=1_000)
    host.gate.max_queued = 3
    try:
        before = len(await _written(log))
        assigns = [_assign(i, bundle) for i, bundle in enumerate(BUNDLES)]
        # A namespace command is no retry: it is taken even while the shard is busy.
        create = CreateNamespace(command_id="admin:ns", epoch=1, namespace="public/other", bundles=4)
        answers = await host.commands([(c, None) for c in [*assigns, create]])
        busy = [error for _, error in answers if isinstance(error, Busy)]
        assert len(busy) == len(BUNDLES) - 3
        assert all(error.retry_after_ms >= RETRY_AFTER_MIN_MS for error in busy)
        assert all(error is None for _, error in answers[:3])
        assert answers[-1][1] is None
        written = (await _written(log))[before:]
        assert [row[3] for row in written].count("BundleAssigned") == 3
        status = host.status()
        assert status["counts"]["commands"] == 4
        assert status["admission"]["refused_busy"] == len(BUNDLES) - 3
        assert status["admission"]["waiting"] == 0
    finally:
        await host.close()


async def test_two_lookups_of_one_bundle_waiting_together_are_one_decision() -> None:
    host, _ = await _shard(max_group=1_000)
    try:
        bundle = BUNDLES[0]
        lookups = [LookupBundle(command_id=f"clients:lookup:{bundle}:{i}", epoch=1, bundle=bundle) for i in range(5)]
        async with host._lock:  # the body is busy: all five wait
            task = asyncio.create_task(host.commands([(c, None) for c in lookups]))
            await asyncio.sleep(0.01)
        answers = await task
        assert len({repr(a) for a in answers}) == 1  # every caller hears the one decision
        assert host.status()["counts"]["commands"] == 1
        assert host.status()["admission"]["shared_lookups"] == 4
    finally:
        await host.close()


def test_a_sender_sends_no_retry_while_the_first_try_waits_and_honours_busy() -> None:
    sender = InFlight()
    bundle = BUNDLES[0]
    first = LookupBundle(command_id="c:1", epoch=1, bundle=bundle)
    retry = LookupBundle(command_id="c:2", epoch=1, bundle=bundle)
    assert sender.admit("leader", first, 0.0)
    assert not sender.admit("leader", retry, 1.0)  # the first still waits at the leader
    assert sender.admit("leader", LookupBundle(command_id="c:3", epoch=1, bundle=BUNDLES[1]), 1.0)
    sender.answered("leader", first, Busy("leader busy", retry_after_ms=2_000), 1.5)
    assert not sender.admit("leader", retry, 3.0)  # before the retry-after
    assert sender.admit("leader", retry, 3.6)
    sender.answered("leader", retry, None, 3.7)
    assert sender.admit("leader", first, 3.8)  # answered: the key is free again
    assert sender.coalesced == 2 and sender.busy == 1


def test_a_busy_answer_crosses_a_process_boundary_with_its_retry_after() -> None:
    import pickle

    again = pickle.loads(pickle.dumps(Busy("leader busy", retry_after_ms=2_500)))
    assert isinstance(again, Busy) and again.retry_after_ms == 2_500 and again.message == "leader busy"


def test_commands_that_are_not_retries_are_never_held() -> None:
    sender = InFlight()
    create = CreateNamespace(command_id="admin:ns", epoch=1, namespace="public/other", bundles=4)
    assert sender.admit("ns:0", create, 0.0) and sender.admit("ns:0", create, 0.0)
    error: LoadBalancerError = Busy("busy", retry_after_ms=10_000)
    sender.answered("ns:0", create, error, 0.0)
    assert sender.admit("ns:0", create, 0.1)
