"""Each actor body alone, given / when / then (docs/design/actors.md §1-2): history in, one
command, event or tick, and the events it asks its host to append. No host runs here."""

from __future__ import annotations

from random import Random

import pytest

from actors.broker import BrokerBody
from actors.leader import LeaderBody, Role
from actors.namespace import NamespaceBody
from actors.workload import ClientsBody, Workload
from balancer.bundles import NamespaceBundles
from balancer.config import LoadBalancerConfig
from balancer.control import Move
from balancer.errors import TransferToCurrentOwner, UnknownBroker, UnknownNamespace
from balancer.proposals import ProposedMove
from events.catalog import (
    LEADER_KEY,
    AssignBundle,
    BrokerRegistered,
    BundleAssigned,
    BundleOwned,
    BundleReleased,
    LeaderElected,
    LookupBundle,
    NamespaceCreated,
    UnloadBundle,
    UnloadRequested,
)
from projections.proposals import Proposal
from tests.support.given import GivenBody, appended

CONFIG = LoadBalancerConfig()
NS = "public/default"
LAYOUT = NamespaceBundles.initial(NS, 4)
FIRST = f"{NS}/{next(iter(LAYOUT)).name}"


def registered(broker: str) -> BrokerRegistered:
    return BrokerRegistered(broker_id=broker, url=f"pulsar://{broker}:6650")


def a_namespace_with_brokers(*brokers: str) -> GivenBody:
    return GivenBody(NamespaceBody(CONFIG)).given(
        LeaderElected(leader_id="leader", epoch=1), *(registered(b) for b in brokers),
        NamespaceCreated(namespace=NS, boundaries=list(LAYOUT.boundaries())))


# -- the namespace shard --------------------------------------------------------------------


def test_namespace_assigns_a_free_bundle_to_the_broker_the_leader_named() -> None:
    shard = a_namespace_with_brokers("broker-1", "broker-2")
    effects = shard.when_command(AssignBundle(command_id="c-1", epoch=1, bundle=FIRST, dst="broker-2"))
    assert effects.error is None
    assert [(k, t, p["bundle"], p["dst"]) for k, t, p in appended(effects)] == [
        (NS, "BundleAssigned", FIRST, "broker-2")]
    assert effects.epoch == 1 and effects.causation_id == "c-1"


def test_namespace_answers_a_repeated_command_with_the_first_receipt_and_appends_nothing() -> None:
    shard = a_namespace_with_brokers("broker-1")
    command = AssignBundle(command_id="c-1", epoch=1, bundle=FIRST, dst="broker-1")
    first = shard.when_command(command)
    shard.fold(first)
    again = shard.when_command(command)
    assert again.append == ()
    assert again.reply is not None and again.reply.duplicate  # type: ignore[attr-defined]
    assert again.reply.events == first.reply.events  # type: ignore[attr-defined]


def test_namespace_refuses_a_transfer_to_the_current_owner_with_one_rejection() -> None:
    shard = a_namespace_with_brokers("broker-1", "broker-2")
    shard.given(BundleAssigned(bundle=FIRST, dst="broker-1"), BundleOwned(bundle=FIRST, owner="broker-1"))
    effects = shard.when_command(UnloadBundle(command_id="c-2", epoch=1, bundle=FIRST, dst="broker-1"))
    assert isinstance(effects.error, TransferToCurrentOwner)
    assert [t for _, t, _ in appended(effects)] == ["CommandRejected"]


def test_namespace_refuses_an_unknown_broker_and_an_unknown_namespace_by_name() -> None:
    shard = a_namespace_with_brokers("broker-1")
    to_nobody = shard.when_command(AssignBundle(command_id="c-3", epoch=1, bundle=FIRST, dst="broker-9"))
    assert isinstance(to_nobody.error, UnknownBroker) and "broker-9" in to_nobody.error.message
    elsewhere = shard.when_command(AssignBundle(
        command_id="c-4", epoch=1, bundle="public/other/0x00000000_0xffffffff", dst="broker-1"))
    assert isinstance(elsewhere.error, UnknownNamespace) and "public/other" in elsewhere.error.message


def test_namespace_events_carry_the_newest_epoch_it_has_seen_never_an_older_one() -> None:
    shard = a_namespace_with_brokers("broker-1")
    shard.given(LeaderElected(leader_id="leader", epoch=3), epoch=3)
    effects = shard.when_command(AssignBundle(command_id="c-5", epoch=1, bundle=FIRST, dst="broker-1"))
    assert effects.epoch == 3


# -- a broker ---------------------------------------------------------------------------------


def a_broker() -> GivenBody:
    workload = Workload.zipf(Random(0), [NS], topics_per_namespace=20, total_msg_rate=1_000.0)
    return GivenBody(BrokerBody("broker-1", CONFIG, workload))


def test_a_new_broker_registers_itself_on_its_first_tick_under_its_own_key() -> None:
    broker = a_broker().given(LeaderElected(leader_id="leader", epoch=1))
    effects = broker.when_tick()
    assert [(k, t) for k, t, _ in appended(effects)] == [("broker-1", "BrokerRegistered")]


def test_a_broker_confirms_a_bundle_assigned_to_it_and_only_to_it() -> None:
    broker = a_broker().given(LeaderElected(leader_id="leader", epoch=1), registered("broker-1"),
                              NamespaceCreated(namespace=NS, boundaries=list(LAYOUT.boundaries())))
    mine = broker.when_event(BundleAssigned(bundle=FIRST, dst="broker-1"))
    assert [(c.TYPE, c.bundle, c.owner) for c in mine.send] == [  # type: ignore[attr-defined]
        ("ConfirmOwnership", FIRST, "broker-1")]
    second = f"{NS}/{list(LAYOUT)[1].name}"
    theirs = broker.when_event(BundleAssigned(bundle=second, dst="broker-2"))
    assert theirs.send == () and theirs.append == ()


# -- the leader ---------------------------------------------------------------------------------


def test_a_fresh_leader_campaigns_with_a_compare_and_set_on_the_leader_key() -> None:
    leader = GivenBody(LeaderBody(CONFIG, rng=Random(1)))
    effects = leader.when_tick()
    assert appended(effects) == [(LEADER_KEY, "LeaderElected", {"leader_id": "leader", "epoch": 1})]
    assert dict(effects.expected_seq) == {LEADER_KEY: 0} and effects.epoch == 1


def test_a_restarted_leader_campaigns_one_epoch_above_the_newest_in_the_log() -> None:
    leader = GivenBody(LeaderBody(CONFIG, rng=Random(1))).given(
        LeaderElected(leader_id="leader", epoch=1), LeaderElected(leader_id="leader", epoch=4))
    effects = leader.when_tick()
    assert appended(effects)[0][2]["epoch"] == 5 and dict(effects.expected_seq) == {LEADER_KEY: 2}


def test_a_leader_leads_once_its_own_election_is_folded_back_and_yields_to_a_newer_one() -> None:
    body = LeaderBody(CONFIG, rng=Random(1))
    leader = GivenBody(body)
    leader.fold(leader.when_tick())
    assert body.role is Role.LEADER
    leader.when_event(LeaderElected(leader_id="other", epoch=2), epoch=2)
    assert body.role is not Role.LEADER


def test_a_new_term_forgets_the_plans_of_the_last_as_a_restarted_leader_would() -> None:
    """Held splits and queued moves were chosen in a term that ended: a leader that loses its
    term, or wins another, drops them (approvals are queued again from the book, checked for
    staleness), so a re-elected leader never sends a plan another leader's term overtook."""
    body = LeaderBody(CONFIG, rng=Random(1))
    leader = GivenBody(body)
    leader.fold(leader.when_tick())
    held = Proposal("split-1", "split", "review", 0, (ProposedMove(FIRST, "split", "broker-1", None, "split"),))
    body.splits_held, body.approved_seen = [held], 3
    body.control.throttle.queue.append(Move(FIRST, "broker-1", None, 0))
    leader.when_event(LeaderElected(leader_id="other", epoch=2), epoch=2)
    assert (body.role, body.splits_held, body.control.throttle.queue) == (Role.FOLLOWER, [], [])
    body.splits_held = [held]
    leader.fold(leader.when_tick(after_ms=2 * body.settings.session_timeout_ms))  # the other never acts
    assert body.role is Role.LEADER and body.my_epoch == 3
    assert (body.splits_held, body.approved_seen) == ([], 0)


@pytest.mark.parametrize("broker", ["broker-1", "broker-2"])
def test_a_leader_places_a_lookup_on_a_registered_broker(broker: str) -> None:
    body = LeaderBody(CONFIG, rng=Random(1))
    leader = GivenBody(body).given(registered(broker),
                                   NamespaceCreated(namespace=NS, boundaries=list(LAYOUT.boundaries())))
    leader.fold(leader.when_tick())
    effects = leader.when_command(LookupBundle(command_id="lookup-1", epoch=1, bundle=FIRST))
    assert [(c.TYPE, c.bundle, c.dst) for c in effects.send] == [  # type: ignore[attr-defined]
        ("AssignBundle", FIRST, broker)]


def test_a_leader_asks_again_for_an_unmoved_bundle_later_and_later() -> None:
    """In a storm, an assignment still waiting in the shard's queue is not sent again at
    every lookup; the same record version is asked again after retry_ms, 2x, 4x ..."""
    body = LeaderBody(CONFIG, rng=Random(1))
    leader = GivenBody(body).given(registered("broker-1"),
                                   NamespaceCreated(namespace=NS, boundaries=list(LAYOUT.boundaries())))
    leader.fold(leader.when_tick())
    sent_at: list[int] = []
    for step in range(16):  # a client's lookup every second, the bundle never moves
        leader.now_ms += 1_000 if step else 0
        if leader.when_command(LookupBundle(command_id=f"lookup-{step}", epoch=1, bundle=FIRST)).send:
            sent_at.append(step)
    assert sent_at == [0, 2, 6, 14]  # retry_ms 2 s, then 4 s, then 8 s


def test_clients_look_an_unowned_bundle_up_again_later_and_later() -> None:
    """Pulsar clients back off their lookups: after lookup_retry_ms, then twice as long each
    time up to retry_backoff_max_ms; a bundle that moved is asked at once."""
    workload = Workload.zipf(Random(3), [NS], topics_per_namespace=40)
    clients = GivenBody(ClientsBody(CONFIG, workload)).given(
        NamespaceCreated(namespace=NS, boundaries=list(LAYOUT.boundaries())))
    asked: list[int] = []
    for second in range(40):
        if any(c.bundle == FIRST for c in clients.when_tick(1_000 if second else 0).send):  # type: ignore[attr-defined]
            asked.append(second)
    assert asked == [0, 1, 3, 7, 15, 31]
    for event in (BundleAssigned(bundle=FIRST, dst="broker-1"), BundleOwned(bundle=FIRST, owner="broker-1"),
                  UnloadRequested(bundle=FIRST, src="broker-1", reason="admin"), BundleReleased(bundle=FIRST, src="broker-1")):
        clients.when_event(event)  # owned, then unloaded: Free again, a new version
    assert any(c.bundle == FIRST for c in clients.when_tick(1_000).send)  # type: ignore[attr-defined]
