"""Signed appends (events.signing) as a reader's fold sees them (projections.authority)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from actors.settings import namespace_shard
from balancer.errors import ConfigError
from events.authority import may_write
from events.catalog import BundleAssigned, BundleOwned, NamespaceCreated
from events.codec import decode, encode
from events.envelope import Envelope, Stamper
from events.signing import Identity, Root, identity_file, issue_file, keyring_root, load_identity
from projections.ownership import OwnershipProjection

NS = "public/default"
BUNDLE = f"{NS}/0x00000000_0xffffffff"


def signed_append(identity: Identity, key: str, first_seq: int, messages: list) -> list[Envelope]:  # type: ignore[type-arg]
    stamper = Stamper(signer=identity)
    envelopes = [stamper.seal(m, key=key, seq=first_seq + i, epoch=0) for i, m in enumerate(messages)]
    _, raws = stamper.sign(envelopes, [encode(e) for e in envelopes])
    return [decode(raw) for raw in raws]


def fold(envelopes: list[Envelope]) -> OwnershipProjection:
    view = OwnershipProjection()
    for offset, envelope in enumerate(envelopes):
        view.apply(offset, envelope)
    return view


def test_one_signature_covers_an_append_and_a_changed_record_of_it_is_forged() -> None:
    shard = Root().issue("namespace:0/1")
    create = signed_append(shard, NS, 1, [NamespaceCreated(namespace=NS, boundaries=[0, 0xFFFFFFFF])])
    append = signed_append(shard, NS, 2, [BundleAssigned(bundle=BUNDLE, dst="b1"), BundleOwned(bundle=BUNDLE, owner="b1")])
    assert [e.sig is not None for e in create + append] == [True, True, False]
    assert fold(create + append).anomalies == []
    swapped = append[1]._replace(payload={**append[1].payload, "owner": "b2"})
    view = fold([*create, append[0], swapped])
    assert [(a.offset, a.kind) for a in view.anomalies] == [(2, "forged")]
    assert str(view.state(BUNDLE)) == "Assigning"


def test_an_append_is_read_whole_across_another_writers_records_in_between() -> None:
    root = Root()
    shard, other = root.issue("namespace:0/1"), root.issue("namespace:0/1")
    a = signed_append(shard, NS, 1, [NamespaceCreated(namespace=NS, boundaries=[0, 0xFFFFFFFF]),
                                     BundleAssigned(bundle=BUNDLE, dst="b1")])
    b = signed_append(other, "public/other", 1, [NamespaceCreated(namespace="public/other", boundaries=[0, 0xFFFFFFFF])])
    assert fold([a[0], b[0], a[1]]).anomalies == []


def test_a_view_restored_in_the_middle_of_an_append_decides_the_rest_the_same() -> None:
    shard = Root().issue("namespace:0/1")
    records = signed_append(shard, NS, 1, [NamespaceCreated(namespace=NS, boundaries=[0, 0xFFFFFFFF]),
                                           BundleAssigned(bundle=BUNDLE, dst="b1"),
                                           BundleOwned(bundle=BUNDLE, owner="b1")])
    half = fold(records[:2])
    restored = OwnershipProjection.restore(half.snapshot())
    restored.apply(2, Envelope(*records[2]))
    assert restored.anomalies == [] and restored.owner(BUNDLE) == "b1"


def test_another_roots_identity_is_forged_even_with_the_same_name() -> None:
    ours, theirs = Root(), Root()
    first = signed_append(ours.issue("namespace:0/1"), NS, 1, [NamespaceCreated(namespace=NS, boundaries=[0, 0xFFFFFFFF])])
    rogue = signed_append(theirs.issue("namespace:0/1"), NS, 2, [BundleAssigned(bundle=BUNDLE, dst="b1")])
    view = fold(first + rogue)
    assert [(a.offset, a.kind) for a in view.anomalies] == [(1, "forged")]
    assert "another root key" in view.anomalies[0].detail


def test_a_root_issues_the_same_identity_every_time() -> None:
    root = Root()
    again = Root(root.seed())
    assert root.issue("broker:broker-1").public == again.issue("broker:broker-1").public
    assert root.issue("broker:broker-1").public != root.issue("broker:broker-2").public


def test_a_keyring_keeps_its_root_and_private_files(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    path = issue_file(keys, "namespace:0/2")
    assert path == identity_file(keys, "namespace:0/2") and path.name == "namespace@0-of-2.key"
    for file in (path, keys / "root.key"):
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert keyring_root(keys).public == load_identity(keys, "namespace:0/2").root
    forged = path.read_bytes().replace(b'"name": "namespace:0/2"', b'"name": "leader"')
    (keys / "leader.key").write_bytes(forged)
    with pytest.raises(ConfigError, match="certificate of 'leader' does not hold"):
        load_identity(keys, "leader")
    with pytest.raises(ConfigError, match="no signing identity 'broker:x'"):
        load_identity(keys, "broker:x")


@pytest.mark.parametrize("shards", [2, 3, 8])
def test_a_shards_identity_writes_exactly_the_namespaces_routed_to_it(shards: int) -> None:
    for n in range(40):
        key = f"tenant/ns-{n}"
        owner = namespace_shard(key, shards)
        for shard in range(shards):
            why = may_write(f"namespace:{shard}/{shards}", key, "BundleAssigned", {}, 1, 1, {1: "leader"})
            assert (why is None) == (shard == owner), (key, shard, why)
