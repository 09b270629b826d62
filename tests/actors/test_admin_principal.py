"""The Python API names who asked for an admin write (``by=``) and the cluster records it: in the
event of a namespace's creation and policy, a failure domain set or deleted, a split (both its
records), as an unload (of a bundle, or of each bundle of a namespace) keeps it in its decision; without ``by`` nobody is named. A principal is
bounded like every string of admin input: past ``adminInputMaxStringLength`` it is refused,
naming the limit, and nothing is recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actors.api import Cluster
from balancer.errors import InputTooLarge

KINDS = ("NamespaceCreated", "NamespacePolicySet", "FailureDomainSet", "SplitRequested", "SplitCompleted")


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    async with Cluster.start(brokers=2, host="inproc") as started:
        await started.wait_ready(2)
        yield started


async def _recorded(cluster: Cluster, since: int) -> list[tuple[str, object]]:
    return [(r.envelope.type, r.envelope.payload["by"]) for r in (await cluster.log_tail(10_000))[since:]
            if r.envelope.type in KINDS]


async def _owned(cluster: Cluster, namespace: str) -> str:
    owner = await cluster.lookup(f"persistent://{namespace}/t")
    return next(r.bundle for r in cluster.bundles(namespace) if r.owner == owner).rsplit("/", 1)[1]


async def test_every_admin_write_records_the_principal_it_was_given(cluster: Cluster) -> None:
    since = len(await cluster.log_tail(10_000))
    await cluster.create_namespace("public/p", 2, by="svc-deployer")
    await cluster.split_bundle("public/p", await _owned(cluster, "public/p"), "range_equally_divide", by="svc-a")
    await cluster.set_anti_affinity_group("public/p", "g1", by="svc-b")
    await cluster.set_failure_domain("d1", ["broker-1"], by="svc-c")
    await cluster.delete_failure_domain("d1", by="svc-d")
    await cluster.unload("public/p", by="svc-e")
    unloads = [r.envelope.payload["decision"] for r in (await cluster.log_tail(10_000))[since:]
               if r.envelope.type == "UnloadRequested"]
    # The split's two children are owned (the other bundle was never looked up): each one unloaded.
    assert len(unloads) == 2 and {d.get("requested_by") for d in unloads} == {"svc-e"}
    assert await _recorded(cluster, since) == [
        ("NamespaceCreated", "svc-deployer"), ("SplitRequested", "svc-a"), ("SplitCompleted", "svc-a"),
        ("NamespacePolicySet", "svc-b"), ("FailureDomainSet", "svc-c"), ("FailureDomainSet", "svc-d")]


async def test_without_a_principal_nobody_is_named(cluster: Cluster) -> None:
    since = len(await cluster.log_tail(10_000))
    await cluster.create_namespace("public/q", 2)
    await cluster.split_bundle("public/q", await _owned(cluster, "public/q"), "range_equally_divide")
    await cluster.set_failure_domain("d1", ["broker-2"])
    assert {by for _, by in await _recorded(cluster, since)} == {None}


async def test_a_principal_past_the_string_limit_is_refused_and_nothing_recorded(cluster: Cluster) -> None:
    await cluster.create_namespace("public/r", 2)
    bundle = await _owned(cluster, "public/r")
    await cluster.catch_up()
    before = cluster.ownership().applied
    huge = "p" * 1025  # adminInputMaxStringLength is 1024 by default
    for write in (lambda: cluster.create_namespace("public/s", 2, by=huge),
                  lambda: cluster.split_bundle("public/r", bundle, "range_equally_divide", by=huge),
                  lambda: cluster.set_anti_affinity_group("public/r", "g1", by=huge),
                  lambda: cluster.set_failure_domain("d1", ["broker-1"], by=huge),
                  lambda: cluster.unload("public/r", bundle, by=huge),
                  lambda: cluster.unload("public/r", by=huge)):
        with pytest.raises(InputTooLarge, match=r"\.by 'ppp.*adminInputMaxStringLength=1024"):
            await write()
    await cluster.catch_up()
    assert cluster.ownership().applied == before and cluster.namespaces() == ["public/r"]
