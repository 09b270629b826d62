"""Who may write what, held against a hostile writer on the embedded log.

Each attack writes as a hostile process would (well-formed envelopes straight into the log,
``append_raw``, with the key's next seq and whatever epoch it likes) and checks that the forged
record changes no view (the view equals a fold of the legitimate records alone) and is named
as an anomaly at its offset.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.body import Follower
from balancer.config import LoadBalancerConfig
from balancer.errors import WriterFenced
from events.catalog import (
    CLUSTER_KEY,
    BrokerLeft,
    BrokerRegistered,
    BundleAssigned,
    BundleOwned,
    FailureDomainSet,
    LeaderElected,
    Message,
    NamespaceCreated,
)
from events.codec import encode
from events.envelope import Envelope, Stamper
from events.log.local import LocalEventLog
from events.log.port import Record
from events.signing import Root
from projections.ownership import OwnershipProjection
from tests.support.cluster_scenarios import lookup

NS = "public/default"
BUNDLE = f"{NS}/0x00000000_0xffffffff"


async def legit(log: LocalEventLog) -> None:
    """A small honest history: leader-1 at epoch 1, two brokers, a namespace owned by broker-1,
    then leader-2 elected at epoch 2."""
    await log.append("_leader", [LeaderElected(leader_id="leader-1", epoch=1)], epoch=1, expected_seq=0)
    for broker in ("broker-1", "broker-2"):
        await log.append(broker, [BrokerRegistered(broker_id=broker, url=f"pulsar://{broker}:6650")], epoch=1)
    await log.append(NS, [NamespaceCreated(namespace=NS, boundaries=[0, 0xFFFFFFFF])], epoch=1)
    await log.append(NS, [BundleAssigned(bundle=BUNDLE, dst="broker-1"),
                          BundleOwned(bundle=BUNDLE, owner="broker-1")], epoch=1)
    await log.append(CLUSTER_KEY, [FailureDomainSet(domain="rack-a", brokers=["broker-1"])], epoch=1)
    await log.append("_leader", [LeaderElected(leader_id="leader-2", epoch=2)], epoch=2, expected_seq=1)


async def forge(log: LocalEventLog, key: str, epoch: int, messages: list[Message],
                stamper: Stamper | None = None) -> int:
    """Append ``messages`` under ``key`` as a hostile writer; the offset of the first."""
    stamper = stamper or Stamper()
    at = (await log.end_offsets())[0]
    seq, _ = await log.head(key)
    await log.append_raw(key, [encode(stamper.seal(m, key=key, seq=seq + i, epoch=epoch))
                               for i, m in enumerate(messages, start=1)])
    return at


def fold(records: list[Record]) -> tuple[OwnershipProjection, Follower]:
    view, follower = OwnershipProjection(), Follower(LoadBalancerConfig())
    for record in records:
        view.apply(record.offset, _fresh(record.envelope))
        follower.fold(record._replace(envelope=_fresh(record.envelope)))
    return view, follower


def _fresh(envelope: Envelope) -> Envelope:
    return Envelope(*envelope)  # a record as another process reads it: nothing cached on it


async def read(directory: Path) -> list[Record]:
    log = LocalEventLog(directory)
    try:
        return (await log.read()).records
    finally:
        await log.close()


def same_view(a: OwnershipProjection, b: OwnershipProjection) -> bool:
    return a.state_equals(b) and a.elected == b.elected


async def attack(tmp_path: Path, key: str, epoch: int, messages: list[Message]) -> tuple[
        OwnershipProjection, Follower, OwnershipProjection, list[int]]:
    """The legitimate history, then the attack: (view, follower, view of the legitimate records
    alone, the forged offsets)."""
    log = LocalEventLog(tmp_path / "log")
    await legit(log)
    at = await forge(log, key, epoch, messages)
    await log.close()
    records = await read(tmp_path / "log")
    view, follower = fold(records)
    honest, _ = fold([r for r in records if r.offset < at])
    return view, follower, honest, list(range(at, at + len(messages)))


def named(view: OwnershipProjection, offsets: list[int], *kinds: str) -> bool:
    found = {a.offset for a in view.anomalies if a.kind in kinds}
    return set(offsets) <= found


# -- fencing on the newest election -----------------------------------------------------------

async def test_a_deposed_leader_cannot_write_a_key_the_new_leader_has_not_written(tmp_path: Path) -> None:
    """Before: leader-1 at epoch 1 wrote ``_cluster`` after epoch 2 was elected, accepted."""
    view, follower, honest, forged = await attack(
        tmp_path, CLUSTER_KEY, 1, [FailureDomainSet(domain="rack-evil", brokers=["broker-1", "broker-2"])])
    assert view.failure_domains == {"broker-1": "rack-a"}
    assert same_view(view, honest)
    assert named(view, forged, "stale_epoch")
    assert follower.ownership.failure_domains == {"broker-1": "rack-a"}


async def test_a_deposed_leader_cannot_expire_a_broker(tmp_path: Path) -> None:
    view, follower, honest, forged = await attack(
        tmp_path, "broker-2", 1, [BrokerLeft(broker_id="broker-2", reason="expired")])
    assert "broker-2" in follower.brokers
    assert same_view(view, honest)
    assert named(view, forged, "stale_epoch")


async def test_the_store_fences_a_deposed_leader_on_every_key_it_writes(tmp_path: Path) -> None:
    log = LocalEventLog(tmp_path / "log")
    await legit(log)
    with pytest.raises(WriterFenced, match="epoch 2 was elected since"):
        await log.append(CLUSTER_KEY, [FailureDomainSet(domain="rack-evil", brokers=["broker-2"])], epoch=1)
    with pytest.raises(WriterFenced, match="epoch 2 was elected since"):
        await log.append("broker-2", [BrokerLeft(broker_id="broker-2", reason="expired")], epoch=1,
                         expected_seq=1)
    # The broker itself, at the epoch it last folded, is no leader: its own key stays its own.
    await log.append("broker-2", [BrokerLeft(broker_id="broker-2", reason="graceful")], epoch=1)
    await log.close()


# -- an owner must be a registered broker -----------------------------------------------------

async def test_a_bundle_cannot_be_given_to_a_broker_that_never_registered(tmp_path: Path) -> None:
    """Before: a forced assignment and confirmation under the namespace's own key, at the
    elected epoch and the next seqs, gave the bundle to broker-evil with 0 anomalies."""
    view, follower, honest, forged = await attack(tmp_path, NS, 2, [
        BundleAssigned(bundle=BUNDLE, dst="broker-evil", src="broker-1", reason="admin", force=True),
        BundleOwned(bundle=BUNDLE, owner="broker-evil", src="broker-1")])
    assert view.owner(BUNDLE) == "broker-1" and follower.ownership.owner(BUNDLE) == "broker-1"
    assert same_view(view, honest)
    assert named(view, forged[:1], "unregistered_owner")


# -- a stamped log refuses unstamped records --------------------------------------------------

async def test_a_stamped_log_refuses_a_record_without_a_cluster_id(tmp_path: Path) -> None:
    """Before: a record with no cluster id passed in a stamped log, 0 anomalies."""
    log = LocalEventLog(tmp_path / "log", stamper=Stamper(cluster_id="east"))
    await legit(log)
    at = await forge(log, "broker-3", 2, [BrokerRegistered(broker_id="broker-3", url="pulsar://evil:6650"),
                                          BundleAssigned(bundle=BUNDLE, dst="broker-3")])
    await forge(log, NS, 2, [BundleAssigned(bundle=BUNDLE, dst="broker-2", src="broker-1",
                                            reason="admin", force=True)])
    await log.close()
    records = await read(tmp_path / "log")
    view, follower = fold(records)
    honest, _ = fold([r for r in records if r.offset < at])
    assert view.cluster_id == "east" and same_view(view, honest)
    assert "broker-3" not in follower.brokers and follower.ownership.owner(BUNDLE) == "broker-1"
    unstamped = [a for a in view.anomalies if "unstamped" in a.detail]
    assert [a.offset for a in unstamped] == [at, at + 1, at + 2]
    assert all(a.kind == "unauthorized" for a in unstamped)


# -- signed appends: a record counts only from the identity whose role writes it --------------

class Writers:
    """The cluster's honest writers: one log handle whose appends are signed as the identity
    named for each (identities certified by ``root``)."""

    def __init__(self, directory: Path, root: Root | None = None) -> None:
        self.root = root or Root()
        self.stamper = Stamper(cluster_id="east")
        self.log = LocalEventLog(directory, stamper=self.stamper)

    async def append(self, signer: str, key: str, messages: list[Message], epoch: int,
                     expected_seq: int | None = None) -> list[Record]:
        self.stamper.signer = self.root.issue(signer)
        try:
            return await self.log.append(key, messages, epoch=epoch, expected_seq=expected_seq)
        finally:
            self.stamper.signer = None


async def signed_legit(w: Writers) -> None:
    await w.append("leader:leader-1", "_leader", [LeaderElected(leader_id="leader-1", epoch=1)], 1, 0)
    for broker in ("broker-1", "broker-2"):
        await w.append(f"broker:{broker}", broker,
                       [BrokerRegistered(broker_id=broker, url=f"pulsar://{broker}:6650")], 1)
    await w.append("namespace:0/1", NS, [NamespaceCreated(namespace=NS, boundaries=[0, 0xFFFFFFFF])], 1)
    await w.append("namespace:0/1", NS, [BundleAssigned(bundle=BUNDLE, dst="broker-1"),
                                         BundleOwned(bundle=BUNDLE, owner="broker-1")], 1)
    await w.append("leader:leader-1", CLUSTER_KEY, [FailureDomainSet(domain="rack-a", brokers=["broker-1"])], 1)
    await w.append("leader:leader-2", "_leader", [LeaderElected(leader_id="leader-2", epoch=2)], 2, 1)


MOVE: list[Message] = [
    BundleAssigned(bundle=BUNDLE, dst="broker-2", src="broker-1", reason="admin", force=True),
    BundleOwned(bundle=BUNDLE, owner="broker-2", src="broker-1")]

SIGNED_ATTACKS: dict[str, tuple[str | None, str, int, list[Message], str]] = {
    # name: (signer: None unsigned, "rogue:..." another root's identity; key; epoch; records; kind)
    "force move, unsigned": (None, NS, 2, MOVE, "forged"),
    "force move, another root's namespace shard": ("rogue:namespace:0/1", NS, 2, MOVE, "forged"),
    "force move, signed by a broker": ("broker:broker-2", NS, 2, MOVE, "unauthorized"),
    "force move, by the deposed leader at its epoch": ("leader:leader-1", NS, 1, MOVE, "unauthorized"),
    "registration under broker-1's key, unsigned": (
        None, "broker-1", 2, [BrokerRegistered(broker_id="broker-1", url="pulsar://evil:6650")], "forged"),
    "registration under broker-1's key, by broker-2": (
        "broker:broker-2", "broker-1", 2, [BrokerRegistered(broker_id="broker-1", url="pulsar://evil:6650")],
        "unauthorized"),
    "a higher election, unsigned": (None, "_leader", 3, [LeaderElected(leader_id="evil", epoch=3)], "forged"),
    "a higher election, by a broker": (
        "broker:broker-1", "_leader", 3, [LeaderElected(leader_id="evil", epoch=3)], "unauthorized"),
    "a candidate electing another": (
        "leader:leader-1", "_leader", 3, [LeaderElected(leader_id="evil", epoch=3)], "unauthorized"),
    "a candidate jumping epochs": (
        "leader:leader-1", "_leader", 2**62, [LeaderElected(leader_id="leader-1", epoch=2**62)], "unauthorized"),
    "BrokerLeft, unsigned": (None, "broker-1", 2, [BrokerLeft(broker_id="broker-1", reason="graceful")], "forged"),
    "BrokerLeft(expired), by another broker": (
        "broker:broker-2", "broker-1", 2, [BrokerLeft(broker_id="broker-1", reason="expired")], "unauthorized"),
    "FailureDomainSet, unsigned": (
        None, CLUSTER_KEY, 2, [FailureDomainSet(domain="rack-evil", brokers=["broker-2"])], "forged"),
    "FailureDomainSet, by a broker": (
        "broker:broker-1", CLUSTER_KEY, 2, [FailureDomainSet(domain="rack-evil", brokers=["broker-2"])],
        "unauthorized"),
    "FailureDomainSet, the deposed leader at the new epoch": (
        "leader:leader-1", CLUSTER_KEY, 2, [FailureDomainSet(domain="rack-evil", brokers=["broker-2"])],
        "unauthorized"),
}


async def signed_attack(tmp_path: Path, signer: str | None, key: str, epoch: int,
                        messages: list[Message]) -> tuple[list[Record], int]:
    w = Writers(tmp_path / "log")
    await signed_legit(w)
    at = (await w.log.end_offsets())[0]
    stamper = Stamper(cluster_id="east")
    if signer is not None:
        rogue, _, name = signer.partition("rogue:")
        stamper.signer = (Root() if rogue == "" and name else w.root).issue(name or signer)
    seq, _ = await w.log.head(key)
    envelopes = [stamper.seal(m, key=key, seq=seq + i, epoch=epoch) for i, m in enumerate(messages, start=1)]
    _, raws = stamper.sign(envelopes, [encode(e) for e in envelopes])
    await w.log.append_raw(key, raws)
    await w.log.close()
    return await read(tmp_path / "log"), at


async def test_an_honest_signed_history_folds_without_an_anomaly(tmp_path: Path) -> None:
    w = Writers(tmp_path / "log")
    await signed_legit(w)
    await w.log.close()
    records = await read(tmp_path / "log")
    assert [r.envelope.sig is not None for r in records] == [True] * 5 + [False, True, True]
    view, follower = fold(records)
    assert view.anomalies == [] and view.owner(BUNDLE) == "broker-1" and view.elected == 2
    assert follower.leader_id == "leader-2" and sorted(follower.brokers) == ["broker-1", "broker-2"]


@pytest.mark.parametrize("case", list(SIGNED_ATTACKS))
async def test_a_signed_log_counts_a_record_only_from_the_identity_that_may_write_it(
        tmp_path: Path, case: str) -> None:
    signer, key, epoch, messages, kind = SIGNED_ATTACKS[case]
    records, at = await signed_attack(tmp_path, signer, key, epoch, messages)
    view, follower = fold(records)
    honest, honest_follower = fold([r for r in records if r.offset < at])
    assert same_view(view, honest), view.anomalies
    assert (follower.epoch, follower.leader_id) == (2, "leader-2")
    assert {b: e.url for b, e in follower.brokers.items()} == {b: e.url for b, e in honest_follower.brokers.items()}
    assert follower.ownership.failure_domains == {"broker-1": "rack-a"}
    forged = list(range(at, at + len(messages)))
    assert {a.offset: a.kind for a in view.anomalies} == dict.fromkeys(forged, kind)


# -- the live service ---------------------------------------------------------------------------

def test_a_forged_election_does_not_take_the_live_service_down() -> None:
    """Before: a ``LeaderElected`` with a higher epoch under ``_leader`` made the live leader
    step down, and nothing was placed until a restart."""
    from actors.runtime.inproc_cluster import build_cluster, wait_ready
    from actors.runtime.tickets import run_sync
    from events.catalog import CreateNamespace

    host = build_cluster(3, seed=7, shared_fold=True)
    assert wait_ready(host, 3)
    host.call(CreateNamespace(command_id="create", epoch=host.epoch, namespace=NS, bundles=4))
    epoch = host.epoch
    seq, _ = run_sync(host.log.head("_leader"))
    forged = LeaderElected(leader_id="evil", epoch=epoch + 1)
    run_sync(host.log.append_raw("_leader", [encode(host.stamper.seal(forged, key="_leader", seq=seq + 1,
                                                                      epoch=epoch + 1))]))
    host.advance(5_000)
    assert host.epoch == epoch and host.client.leader_id == "leader"
    leader = host.leader()
    assert leader is not None and leader.leads  # type: ignore[attr-defined]
    assert lookup(host, f"persistent://{NS}/after-the-forgery") in {"broker-1", "broker-2", "broker-3"}
    assert [a.kind for a in host.view.anomalies] == ["forged"]


# -- leader liveness: a leader that never acts is replaced --------------------------------------

def test_an_elected_leader_that_never_acts_is_replaced() -> None:
    """An election the rules let in (a candidate holding the role's certificate, not one of its
    own) names a leader that does not exist: the real leader steps down, then runs again once
    the named one has written nothing for a session timeout, and lookups are answered again."""
    from actors.runtime.inproc_cluster import build_cluster, wait_ready
    from actors.runtime.tickets import run_sync
    from events.catalog import CreateNamespace

    host = build_cluster(3, seed=11, shared_fold=True)
    assert wait_ready(host, 3)
    host.call(CreateNamespace(command_id="create", epoch=host.epoch, namespace=NS, bundles=4))
    epoch = host.epoch
    seq, _ = run_sync(host.log.head("_leader"))
    stamper = Stamper(clock_ms=lambda: host.now_ms, signer=host.keyring.identity("leader"))
    envelopes = [stamper.seal(LeaderElected(leader_id="nobody", epoch=epoch + 1), key="_leader",
                              seq=seq + 1, epoch=epoch + 1)]
    _, raws = stamper.sign(envelopes, [encode(e) for e in envelopes])
    run_sync(host.log.append_raw("_leader", raws))
    host.advance(2_000)
    assert (host.epoch, host.client.leader_id, host.leader()) == (epoch + 1, "nobody", None)
    host.advance(host.settings.session_timeout_ms + 5_000)
    assert host.epoch == epoch + 2 and host.client.leader_id == "leader"
    assert lookup(host, f"persistent://{NS}/after-nobody") in {"broker-1", "broker-2", "broker-3"}


def test_a_standby_candidate_takes_over_from_a_leader_that_is_gone() -> None:
    """Before: a candidate that lost an election never ran again, so a cluster whose leader
    was gone for good had none."""
    from actors.leader import LeaderBody
    from actors.runtime.inproc_cluster import build_cluster, wait_ready

    host = build_cluster(3, seed=12, shared_fold=True)
    host.add(lambda: LeaderBody(host.config, rng=host.rng_for("leader-2"), settings=host.settings,
                                leader_id="leader-2", name="leader-2"))
    assert wait_ready(host, 3)
    first = host.leader()
    assert first is not None
    host.crash(first.name)
    host.advance(host.settings.session_timeout_ms + 5_000)
    second = host.leader()
    assert second is not None and second.name != first.name and host.client.leader_id == second.name


def test_a_forged_record_under_leader_does_not_block_the_next_election() -> None:
    """The candidate's compare-and-set is on the log's seqs of ``_leader``, which a refused
    record takes too: compared against the records it accepted, a restarted leader lost every
    election to the log itself."""
    from actors.runtime.inproc_cluster import build_cluster, wait_ready
    from actors.runtime.tickets import run_sync
    from events.catalog import SheddingSkipped

    host = build_cluster(2, seed=13, shared_fold=True)
    assert wait_ready(host, 2)
    epoch = host.epoch
    host.crash("leader")
    seq, _ = run_sync(host.log.head("_leader"))
    forged = SheddingSkipped(strategy="evil", reason="forged")
    run_sync(host.log.append_raw("_leader", [encode(host.stamper.seal(forged, key="_leader", seq=seq + 1,
                                                                      epoch=epoch))]))
    host.restart("leader")
    host.advance(10_000)
    assert host.leader() is not None and host.epoch == epoch + 1
