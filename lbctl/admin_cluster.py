"""``ClusterTransport``: the admin operations of ``lbctl.admin_verbs`` on the ``Cluster`` itself
(a kept state directory, a deployment, or one a test or an embedding program holds).

Invariants:
- every operation is a call or a read of the one ``Cluster`` (no verb is re-implemented here);
  the documents are ``web.documents``' builders, the ones the REST service answers with;
- reads send no command and append nothing; a move returns once its completion is in the log:
  a split's ``SplitCompleted``, a transfer's ``BundleOwned`` at the destination, an unload's
  ``BundleReleased`` of every bundle it released; only records after the command count (the
  caller polled the ones before); none within ``timeout_s`` is ``Unavailable``;
- every admin write (an unload or transfer, a split, a namespace's creation and policy, a failure
  domain set or deleted, the balancer's pause and resume, a drain, a verdict) is recorded as asked
  by the local user (``lbctl:USER``).
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Mapping
from typing import Any

from actors.api import Cluster
from actors.cluster.draining import progress_document
from actors.effects import Receipt
from balancer.bundles import BundleId
from balancer.control import parse_duration
from balancer.errors import Unavailable
from balancer.topics import namespace_of_topic
from events.log.port import Record
from lbctl.admin_verbs import Doc, Located, Move, Split
from web import documents


def who() -> str:
    """The local user, as an admin write records who asked for it."""
    try:
        return f"lbctl:{getpass.getuser()}"
    except (KeyError, OSError):  # no passwd entry for the uid (a container)
        return "lbctl"


class ClusterTransport:
    """``AdminTransport`` over ``cluster``."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def _read(self) -> Cluster:
        await self.cluster.catch_up()
        return self.cluster

    async def tenants(self) -> list[str]:
        return documents.tenants(await self._read())

    async def namespaces(self, tenant: str) -> list[str]:
        return documents.tenant_namespaces(await self._read(), tenant)

    async def policies(self, namespace: str) -> Doc:
        return documents.policies_document(await self._read(), namespace)

    async def create_namespace(self, namespace: str, bundles: int | None) -> int:
        created = _event(await self.cluster.create_namespace(namespace, bundles=bundles, by=who()),
                         "NamespaceCreated")
        return len(created["boundaries"]) - 1

    async def bundles(self, namespace: str) -> Doc:
        return documents.bundles_document(await self._read(), namespace)

    async def split(self, namespace: str, bundle: str, algorithm: str | None,
                    positions: list[int] | None, unload: bool, timeout_s: float) -> Split:
        used = algorithm or self.cluster.config.default_namespace_bundle_split_algorithm
        receipt = await self.cluster.split_bundle(namespace, bundle, used, positions, unload, wait=False,
                                                  timeout_s=timeout_s, by=who())
        target = str(_event(receipt, "SplitRequested")["bundle"])
        done = (await self.cluster.next_record(_is("SplitCompleted", "parent", target), timeout_s=timeout_s,
                                               what=f"split of {target}")).envelope.payload
        return Split(target, [str(c) for c in done["children"]], str(done["owner"]), used)

    async def unload(self, namespace: str, bundle: str | None, timeout_s: float) -> list[Move]:
        receipt = await self.cluster.unload(namespace, bundle, wait=False, timeout_s=timeout_s, by=who())
        moved = [Move(str(p["bundle"]), str(p["src"])) for kind, p in receipt.events if kind == "UnloadRequested"]
        pending = {m.bundle for m in moved}

        def all_released(record: Record) -> bool:
            if record.envelope.type == "BundleReleased":
                pending.discard(str(record.envelope.payload.get("bundle")))
            return not pending

        if pending:
            await self.cluster.next_record(all_released, timeout_s=timeout_s,
                                           what=f"unload of {len(pending)} bundle(s)")
        return moved

    async def transfer(self, namespace: str, bundle: str, dst: str, timeout_s: float) -> Move:
        receipt = await self.cluster.unload(namespace, bundle, dst, wait=False, timeout_s=timeout_s,
                                            by=who())
        move = _event(receipt, "TransferPrepared")
        moved = str(move["bundle"])
        await self.cluster.next_record(lambda r: _is("BundleOwned", "bundle", moved)(r)
                                       and r.envelope.payload.get("owner") == dst,
                                       timeout_s=timeout_s, what=f"transfer of {moved}")
        return Move(moved, str(move["src"]), dst)

    async def anti_affinity_group(self, namespace: str) -> str | None:
        return (await self._read()).anti_affinity_group(namespace)

    async def set_anti_affinity_group(self, namespace: str, group: str | None) -> None:
        await self.cluster.set_anti_affinity_group(namespace, group, by=who())

    async def failure_domains(self, cluster: str | None) -> dict[str, list[str]]:
        return (await self._read()).failure_domains()

    async def set_failure_domain(self, cluster: str | None, domain: str, brokers: list[str]) -> None:
        await self.cluster.set_failure_domain(domain, brokers, by=who())

    async def delete_failure_domain(self, cluster: str | None, domain: str) -> None:
        await self.cluster.delete_failure_domain(domain, by=who())

    async def lookup(self, topic: str, timeout_s: float) -> Located:
        owner = await self.cluster.lookup(topic, timeout_s=timeout_s)
        url = next((b.url for b in self.cluster.brokers() if b.broker_id == owner), "")
        return Located(url, self.cluster.ownership().degraded_reason(namespace_of_topic(topic)))

    async def bundle_range(self, topic: str) -> str:
        cluster = await self._read()
        cluster.bundles(namespace_of_topic(topic))  # names an unknown namespace
        return BundleId.parse(cluster.ownership().bundle_of_topic(topic)).range.name

    async def brokers(self) -> Doc:
        return documents.brokers_document(await self._read())

    async def load_report(self, broker: str) -> Doc:
        report = (await self._read()).load_report(broker)  # an unregistered broker is named
        if report["ts_ms"] is None:
            raise Unavailable(f"broker {broker} has not reported its load yet", value=broker)
        return report

    async def healthcheck(self) -> None:
        documents.check_health(await self._read())

    async def pause_balancer(self, duration: str, reason: str) -> Doc:
        receipt = await self.cluster.pause_balancer(parse_duration(duration), reason, who())
        return dict(_event(receipt, "BalancerPaused"))

    async def resume_balancer(self) -> Doc | None:
        resumed = (await self.cluster.resume_balancer(who())).first("BalancerResumed")
        return dict(resumed) if resumed is not None else None

    async def balancer_status(self, timeout_s: float) -> Doc:
        return await self.cluster.balancer_status(timeout_s=timeout_s)

    async def drain_broker(self, broker: str, rate_per_minute: float | None) -> Doc:
        receipt = await self.cluster.drain_broker(broker, rate_per_minute, who())
        return dict(_event(receipt, "BrokerDrainRequested"))

    async def undrain_broker(self, broker: str) -> Doc:
        undrained = (await self.cluster.undrain_broker(broker, who())).first("BrokerUndrained")
        return {"undrained": dict(undrained) if undrained is not None else None}

    async def drain_progress(self, broker: str, wait_s: float) -> Doc:
        if wait_s > 0:
            await self.cluster.sleep(int(wait_s * 1000))
        return progress_document(broker, *await self.cluster.drain_progress(broker))

    async def restart_broker(self, broker: str, timeout_s: float) -> None:
        await self.cluster.shutdown_broker(broker, timeout_s=timeout_s)
        await self.cluster.add_broker(broker, timeout_s=timeout_s)
    async def proposals(self) -> list[Doc]:
        return (await self.cluster.proposals()).listing()

    async def proposal(self, proposal_id: str) -> Doc:
        return (await self.cluster.proposals()).entry(proposal_id).to_dict()

    async def review_proposal(self, proposal_id: str, verdict: str, note: str) -> Doc:
        receipt = await self.cluster.review_proposal(proposal_id, verdict, who(), note)
        kind, payload = receipt.events[0]
        return {"event": kind, **payload}


def _event(receipt: Receipt, kind: str) -> Mapping[str, Any]:
    payload = receipt.first(kind)
    if payload is None:
        raise Unavailable(f"expected a {kind} in the reply, got {receipt.types() or 'nothing'}")
    return payload


def _is(kind: str, field: str, value: str) -> Callable[[Record], bool]:
    return lambda r: r.envelope.type == kind and r.envelope.payload.get(field) == value
