"""Admission instead of retries: a live actor too far behind answers a retried command "busy,
retry after T" at once instead of letting it wait past its sender's timeout; two lookups of one
bundle waiting together are one decision; a sender does not send a retry while its first try is
still on its way, nor before a busy answer's retry-after."""

from __future__ import annotations

import asyncio

from actors.runtime.admission import PRIOR_RATE, RETRY_AFTER_MIN_MS, Gate, InFlight
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


def test_a_send_a_busy_target_refused_is_kept_and_goes_when_the_hold_ends() -> None:
    sender = InFlight()
    bundle = BUNDLES[0]
    first = LookupBundle(command_id="c:1", epoch=1, bundle=bundle)
    assert sender.admit("leader", first, 0.0)
    assert not sender.admit("leader", first, 0.5)  # on its way: dropped, not kept
    assert sender.next_due() is None
    sender.answered("leader", first, Busy("leader busy", retry_after_ms=2_000), 1.0)
    for i, at in enumerate((1.5, 2.0, 2.5)):  # the body's retries meanwhile: the newest is kept
        assert not sender.admit("leader", LookupBundle(command_id=f"c:{i + 2}", epoch=1, bundle=bundle), at, i)
    assert sender.next_due() == 3.0
    assert sender.due(2.9) == []
    (again,) = sender.due(3.0)
    assert again[0] == "leader" and again[1].command_id == "c:4" and again[2] == 2
    assert sender.admit("leader", again[1], 3.0)  # the hold is over: it goes
    assert sender.next_due() is None and sender.due(99.0) == []


def test_a_kept_send_that_went_out_another_way_is_not_sent_twice() -> None:
    sender = InFlight()
    lookup = LookupBundle(command_id="c:1", epoch=1, bundle=BUNDLES[0])
    assert sender.admit("leader", lookup, 0.0)
    sender.answered("leader", lookup, Busy("busy", retry_after_ms=1_000), 0.0)
    assert not sender.admit("leader", lookup, 0.5)  # kept
    assert sender.admit("leader", lookup, 1.2)  # the body's own retry after the hold: it goes
    assert sender.next_due() is None and sender.due(5.0) == []


def test_a_storms_refusals_come_back_spread_over_the_time_the_body_needs_for_them() -> None:
    gate = Gate("leader", max_queued=2)
    lookups = [LookupBundle(command_id=f"c:{i}", epoch=1, bundle=f"t/n/0x{i:08x}_0x{i + 1:08x}") for i in range(3_002)]
    assert gate.refuse(lookups[0], 0.0) is None and gate.refuse(lookups[1], 0.0) is None
    busy = [gate.refuse(command, 0.0) for command in lookups[2:]]
    afters = [b.retry_after_ms for b in busy if b is not None]
    assert len(afters) == 3_000 and afters == sorted(afters)
    # Before any pace is measured a body is taken to answer PRIOR_RATE commands a second.
    assert afters[0] == RETRY_AFTER_MIN_MS and abs(afters[-1] - 1000 * 3_002 / PRIOR_RATE) <= 100
    assert len({id(b) for b in busy}) <= 31  # one Busy per tenth of a second of the line
    # Time passes at the body's pace: a refusal later stands behind what is left of the line.
    later = gate.refuse(LookupBundle(command_id="c:late", epoch=1, bundle="t/n/x"), 2.0)
    assert later is not None and abs(later.retry_after_ms - 1000 * (2 + 1_001) / PRIOR_RATE) <= 1


def test_a_body_idle_before_the_storm_is_not_taken_for_a_slow_one() -> None:
    gate = Gate("leader", max_queued=1)
    gate.pace.answered(3, 100.0, gate.refused)
    gate.pace.answered(2, 105.0, gate.refused)  # five commands in five quiet seconds
    assert gate.pace.rate == 1.0 and not gate.pace.full
    assert gate.pace.capacity() == PRIOR_RATE
    gate.refused = 7  # refusals in the next window: what it answered then is what it can do
    gate.pace.answered(2_000, 110.0, gate.refused)
    assert gate.pace.full and gate.pace.capacity() == 400.0


async def test_a_transport_sends_a_refused_lookup_again_when_its_retry_after_ends() -> None:
    from actors.runtime.ray import RayTransport

    transport = RayTransport("nowhere")
    delivered: list[tuple[float, str]] = []
    loop = asyncio.get_running_loop()

    async def deliver(target: str, batch: list[tuple[LookupBundle, object]]) -> None:
        delivered.append((loop.time(), batch[0][0].command_id))
        error = Busy("busy", retry_after_ms=300) if len(delivered) == 1 else None
        transport._over(target, batch, [(None, error) for _ in batch])

    transport._deliver_batch = deliver  # type: ignore[method-assign]  # no Ray: the answer is ours
    lookup = LookupBundle(command_id="c:1", epoch=1, bundle=BUNDLES[0])
    transport.send("leader", lookup)
    await asyncio.sleep(0.05)
    transport.send("leader", LookupBundle(command_id="c:2", epoch=1, bundle=BUNDLES[0]))  # held: kept
    await asyncio.sleep(0.5)
    assert [c for _, c in delivered] == ["c:1", "c:2"]  # no send of the body's but the first two
    assert 0.28 <= delivered[1][0] - delivered[0][0] <= 0.45  # at the retry-after, not later
    await transport.close()


def test_a_storm_of_busy_answers_costs_the_sender_no_pass_over_every_hold_per_answer() -> None:
    sender = InFlight()
    lookups = [LookupBundle(command_id=f"c:{i}", epoch=1, bundle=f"t/n/{i}") for i in range(60_000)]
    busy = Busy("busy", retry_after_ms=60_000)
    for command in lookups:
        assert sender.admit("leader", command, 0.0)
    for command in lookups:  # every one held a minute: none expires while the storm lasts
        sender.answered("leader", command, busy, 1.0)
    # A pass over every live hold per answer past 16,000 holds was 44,000 passes (minutes of
    # a client actor's loop, every lookup of the storm waiting behind it); now they double.
    assert sender.prunes <= 3
    assert sender.busy == 60_000 and not sender.admit("leader", lookups[0], 2.0)
