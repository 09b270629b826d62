"""Direct tests of the fixes the simulator led to (each also has its seed in test_seeds.py)."""

from __future__ import annotations

from random import Random

import pytest

from actors.broker import BrokerBody
from actors.effects import Receipt
from actors.leader import LeaderBody
from actors.runtime.inproc import InProcessHost
from actors.runtime.sim import SimHost
from actors.runtime.sim.run import build
from actors.runtime.sim.scenarios import SCENARIOS
from actors.runtime.tickets import run_sync
from actors.settings import drain_request_id
from balancer.bundles import namespace_of
from balancer.errors import StateConflict
from balancer.liveness import LogOutages
from balancer.ownership import BundleState
from events.catalog import AssignBundle, DrainBundle, SplitBundle
from tests.support.cluster_scenarios import assert_consistent, bundles, make_host, owner, place_all


def _placed() -> tuple[InProcessHost, str, str, str]:
    """A placed cluster, its first bundle, the broker that owns it and another broker."""
    host = make_host()
    place_all(host)
    bundle = bundles(host)[0]
    held_by = owner(host, bundle)
    return host, bundle, held_by, next(b for b in sorted(host.client.brokers) if b != held_by)


def test_forced_orphan_reassignment_of_a_registered_owner_is_refused() -> None:
    # Seed 165 rolling_restart: the leader's cleanup of an expired broker was delivered after the
    # broker had re-registered and served its bundle again; the force moved it away while the
    # owner still served it (two owners). Re-registration cancels the cleanup (behaviour §6.3).
    host, bundle, held_by, other = _placed()
    with pytest.raises(StateConflict, match="re-registration"):
        host.call(AssignBundle(command_id=host.command_id(), epoch=host.epoch, bundle=bundle,
                               dst=other, reason="orphan", force=True))
    assert owner(host, bundle) == held_by
    assert_consistent(host)


def test_forced_reassignment_of_an_unregistered_owner_still_goes_ahead() -> None:
    host = make_host()
    place_all(host)
    bundle = bundles(host)[0]
    held_by = owner(host, bundle)
    host.crash(f"broker:{held_by}")
    assert host.run_until(lambda: held_by not in host.client.brokers, 60_000)
    assert host.run_until(lambda: host.view.owner(bundle) not in (None, held_by), 30_000)
    assert_consistent(host)


# -- seed 1533 steady: a live broker expired around a log outage ------------------------------
def _calm_sim_host() -> SimHost:
    """The steady scenario's cluster on a SimHost, no delivery faults, every bundle placed."""
    host, _ = build(SCENARIOS["steady"], 11)
    assert host.run_until(lambda: all(r.state is BundleState.OWNED for r in host.view.records.values())
                          and len(host.view.records) == 16, 60_000)
    return host


def _expired(host: SimHost, since: int = 0) -> list[str]:
    return [r.envelope.key for r in host.records[since:]
            if r.envelope.type == "BrokerLeft" and r.envelope.payload["reason"] == "expired"]


def test_an_outage_longer_than_a_session_expires_no_live_broker() -> None:
    # Time the log refused appends is not silence: the leader counts only time it saw the log up
    # (and none while it is down), and a broker whose report was refused retries soon.
    host = _calm_sim_host()
    start = len(host.records)
    host.log_down(45_000)
    host.advance(45_000 + 20_000)
    assert _expired(host, start) == []
    reports = [r.envelope.ts_ms for r in host.records[start:] if r.envelope.type == "LoadReported"]
    assert reports and min(reports) - host.log_down_until <= host.settings.retry_ms + host.tick_ms
    assert host.log_up_ms(host.log_down_until - 45_000, host.now_ms) == 20_000


def test_a_broker_silent_for_a_session_of_log_time_still_expires_after_an_outage() -> None:
    host = _calm_sim_host()
    host.crash("broker:broker-1")
    host.advance(10_000)
    host.log_down(20_000)
    host.advance(20_000 + 15_000)  # 25 s of log time since the crash: not yet
    assert "broker-1" not in _expired(host)
    host.advance(10_000)
    assert "broker-1" in _expired(host)


def test_an_expiry_is_a_compare_and_set_on_the_brokers_key() -> None:
    # The leader's subscription lagged: it had not folded the broker's newest report when it
    # expired the broker. The expiry names the last seq it folded, so the log refuses it.
    host = _calm_sim_host()
    leader = host.leader()
    assert isinstance(leader, LeaderBody)
    stale = LeaderBody(host.config, rng=Random(1), settings=host.settings)
    newest = max(r.offset for r in host.records if r.envelope.key == "broker-1")
    stale.recover(r for r in host.records if r.offset < newest)
    stale.role, stale.attempt, stale.leader_since = leader.role, leader.attempt, leader.leader_since
    effects = stale._expire(host.now_ms + 10 * host.settings.session_timeout_ms)
    appends = dict(effects.append)
    assert "broker-1" in appends and effects.expected_seq["broker-1"] < stale.key_seq("broker-1") + 1
    with pytest.raises(StateConflict):
        run_sync(host.log.append("broker-1", [appends["broker-1"]], epoch=effects.epoch,
                                 expected_seq=effects.expected_seq["broker-1"]))


def test_log_outages_count_only_available_time() -> None:
    outages = LogOutages()
    outages.observe(False, 1_000)
    assert outages.available_ms(0, 5_000) == 0  # down: no deadline passes
    outages.observe(False, 2_000)
    outages.observe(True, 4_000)
    assert outages.windows == [(1_000, 4_000)]
    assert outages.available_ms(0, 10_000) == 7_000
    assert outages.available_ms(2_000, 10_000) == 6_000
    assert outages.available_ms(5_000, 10_000) == 5_000


def test_an_outage_counts_from_the_last_healthy_look_so_no_broker_expires_early() -> None:
    # Seed 927290 steady: four outages inside one broker's silence, each seen a tick after it
    # began; counted from the first failed look they were undercounted by up to a tick each,
    # and the leader expired a live broker 4 ms before its session, counted in available time.
    outages = LogOutages()
    outages.observe(True, 1_000)
    outages.observe(False, 2_000)  # the log went down some time after 1,000
    outages.observe(True, 4_000)
    assert outages.windows == [(1_000, 4_000)]
    assert outages.available_ms(0, 10_000) == 7_000


# -- seeds 1676, 3279, 3748 scale_in: a drain request from a lagging view -----------------------
def test_a_drain_request_for_a_bundle_the_broker_no_longer_owns_moves_nothing() -> None:
    # The draining broker's view still showed a bundle that had moved to another broker; the
    # leader took the request for the other broker's and counted that broker as draining, so
    # placement never used it again and orphans found no broker (expiry broken).
    host, bundle, held_by, other = _placed()
    reply = host.call(DrainBundle(command_id=drain_request_id(other, bundle, host.epoch, host.now_ms),
                                  epoch=host.epoch, bundle=bundle, broker=other))
    assert isinstance(reply, Receipt) and reply.detail["owner"] == held_by
    leader = host.leader()
    assert isinstance(leader, LeaderBody) and leader.draining == {}
    host.advance(5_000)
    assert owner(host, bundle) == held_by
    own = host.call(DrainBundle(command_id=drain_request_id(held_by, bundle, host.epoch, host.now_ms),
                                epoch=host.epoch, bundle=bundle, broker=held_by))
    assert isinstance(own, Receipt) and held_by in leader.draining


def test_drain_request_ids_of_two_brokers_never_collide() -> None:
    # Broker ids and namespace names may hold ':': the broker's id is length-prefixed.
    assert (drain_request_id("a:b", "c/d/0x00000000_0xffffffff", 3, 7)
            != drain_request_id("a", "b:c/d/0x00000000_0xffffffff", 3, 7))


# -- seed 4283 split_storm: a restarted broker that could not register served its old bundles ----
def test_an_unregistered_broker_serves_nothing() -> None:
    # Expired during a crash, restarted during a log outage (its registration refused): it
    # served, from the log, the bundles the leader was handing to other brokers.
    host = _calm_sim_host()
    host.crash("broker:broker-1")
    assert host.run_until(lambda: "broker-1" not in host.client.brokers, 60_000)
    host.log_down(5_000)  # at once: the orphans are not reassigned yet, nor can they be now
    body = host.restart("broker:broker-1")
    assert isinstance(body, BrokerBody) and not body.registered
    assert any(r.dst == "broker-1" and r.state is BundleState.OWNED for r in body.ownership.records.values())
    assert body.owned() == []
    assert host.run_until(lambda: body.registered, 30_000)


# -- seed 300296 scale_in: a void record's cleanup refused as "cancelled by re-registration" ----
def test_a_departed_sessions_bundle_is_reassigned_after_its_broker_registers_again() -> None:
    # broker-1 was expired and its orphans' reassignments failed; it registered again and (as it
    # must) did not serve its departed session's bundles, while the namespace refused the
    # leader's forced reassignment because broker-1 was registered: nobody served them, and
    # their lookups went unanswered for good.
    host = _calm_sim_host()
    held = [b for b, r in host.view.records.items() if r.dst == "broker-1"]
    host.crash("broker:broker-1")
    host.crash("ns:0")  # the leader's forced reassignments of the orphans cannot land
    assert host.run_until(lambda: "broker-1" not in host.client.brokers, 60_000)
    body = host.restart("broker:broker-1")
    assert isinstance(body, BrokerBody)
    assert host.run_until(lambda: body.registered, 30_000)
    assert all(host.view.records[b].dst == "broker-1" for b in held)  # still the void records
    host.restart("ns:0")

    def served() -> bool:
        owners = {b: host.view.records[b].dst for b in held}
        return all(o is not None and o in host.client.brokers
                   and b in host.body(f"broker:{o}").owned()  # type: ignore[attr-defined]
                   for b, o in owners.items())
    assert host.run_until(served, 60_000)


# -- seed 4773 split_storm: a split's confirmation taken for an earlier split's ----------------
def test_every_split_of_a_bundle_that_never_splits_completes() -> None:
    # A split that finds no boundary leaves the bundle Owned at version 1 again (its child is
    # itself), so the next split of it is Splitting at the same version as the one before: the
    # owner's ConfirmSplit had the same id, the namespace answered it as a repeat, and the
    # bundle stayed Splitting until the monitor overrode it (a lookup waited > 60 s).
    host = make_host()
    place_all(host)
    bundle = bundles(host)[0]
    for _ in range(3):
        # No limit of the bundle is exceeded: flow_or_qps_equally_divide finds no boundary (a
        # position outside the bundle did the same, but admin input may no longer hold one).
        host.call(SplitBundle(command_id=host.command_id(), epoch=host.epoch, namespace=namespace_of(bundle),
                              bundle=bundle, algorithm="flow_or_qps_equally_divide"))
        assert host.run_until(lambda: host.view.records[bundle].state is BundleState.OWNED, 5_000)
    completed = [r for r in host.records if r.envelope.type == "SplitCompleted"]
    assert len(completed) == 3 and len({r.envelope.causation_id for r in completed}) == 3
    assert_consistent(host)


# -- seed 7867 split_storm: the leader hung --------------------------------------------------------
def test_a_free_bundle_that_split_into_itself_does_not_hang_the_leader() -> None:
    # A split without a boundary completes with the parent as its only child; the leader noted
    # the bundle as its own parent, and when it was Free with no report of its own, the search
    # for its traffic through its parents never ended (the leader's tick hung).
    host = make_host()
    place_all(host)
    leader = host.leader()
    assert isinstance(leader, LeaderBody)
    bundle = bundles(host)[0]
    host.call(SplitBundle(command_id=host.command_id(), epoch=host.epoch, namespace=namespace_of(bundle),
                          bundle=bundle, algorithm="flow_or_qps_equally_divide"))  # finds no boundary
    assert host.run_until(lambda: host.view.records[bundle].state is BundleState.OWNED, 5_000)
    assert bundle not in leader.parents
    leader.load.bundles.pop(bundle, None)
    leader.parents[bundle] = bundle  # whatever the map holds, the search ends
    assert leader._has_traffic(bundle) is False
