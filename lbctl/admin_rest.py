"""``HttpTransport``: the admin operations of ``lbctl.admin_verbs`` over the admin REST service
(``lbctl --admin-url URL``): Pulsar's ``/admin/v2`` and ``/lookup/v2`` paths, and the project's
``/bb/v1`` reads where Pulsar's answer lacks what a verb prints.

Invariants:
- each operation is the HTTP calls of its name and nothing else (no log, no Ray); the calls are
  ``lbctl.admin_http.AdminHttp``'s, made off the event loop (a service in this process keeps
  answering meanwhile); its refusals arrive as the project's errors, one line each;
- what a change's answer (204) does not carry, the bundle's source before a move and the
  children of a split, is read from ``/bb/v1/namespaces/{ns}/bundles`` before and after; the
  service answers a change once it settled, so "after" is the settled view;
- a split's owner is its parent's, and its algorithm the one the service names in
  ``X-BB-Split-Algorithm`` (its default when none was asked for);
- a lookup answered from a degraded view (the service's ``X-BB-Degraded``) says so, as on the
  cluster itself;
- the balancer's pause is recorded as asked by the token's role, as the service reads it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from balancer.errors import Unavailable
from balancer.topics import TopicName
from lbctl.admin_http import AdminHttp
from lbctl.admin_verbs import Doc, Located, Move, Split
from web.replies import ALGORITHM_HEADER, DEGRADED_HEADER

V2 = "/admin/v2"
BB = "/bb/v1"


class HttpTransport:
    """``AdminTransport`` over the REST service ``http`` names."""

    def __init__(self, http: AdminHttp) -> None:
        self.http = http

    async def _call(self, method: str, path: str, body: Any = None, *, raw: str | None = None,
                    query: dict[str, str] | None = None) -> Any:
        return await asyncio.to_thread(self.http.call, method, path, body, raw=raw, query=query)

    async def _rows(self, namespace: str) -> dict[str, dict[str, Any]]:
        document = await self.bundles(namespace)
        return {row["range"]: row for row in document["bundles"]}

    async def _cluster(self, cluster: str | None) -> str:
        return str(cluster or (await self._call("GET", f"{V2}/clusters"))[0])

    async def tenants(self) -> list[str]:
        return list(await self._call("GET", f"{V2}/tenants"))

    async def namespaces(self, tenant: str) -> list[str]:
        return list(await self._call("GET", f"{V2}/namespaces/{tenant}"))

    async def policies(self, namespace: str) -> Doc:
        return dict(await self._call("GET", f"{V2}/namespaces/{namespace}"))

    async def create_namespace(self, namespace: str, bundles: int | None) -> int:
        policies = {"bundles": {"numBundles": bundles}} if bundles else {}
        await self._call("PUT", f"{V2}/namespaces/{namespace}", policies)
        return int((await self._call("GET", f"{V2}/namespaces/{namespace}/bundles"))["numBundles"])

    async def bundles(self, namespace: str) -> Doc:
        return dict(await self._call("GET", f"{BB}/namespaces/{namespace}/bundles"))

    async def split(self, namespace: str, bundle: str, algorithm: str | None,
                    positions: list[int] | None, unload: bool, timeout_s: float) -> Split:
        before = await self._rows(namespace)
        query = {"unload": str(unload).lower(), **({"splitAlgorithmName": algorithm} if algorithm else {})}
        _, headers = await asyncio.to_thread(
            self.http.exchange, "PUT", f"{V2}/namespaces/{namespace}/{bundle}/split", query=query,
            raw=json.dumps(positions) if positions else "")
        after = await self._rows(namespace)
        gone, new = sorted(set(before) - set(after)), sorted(set(after) - set(before))
        parent = gone[0] if gone else bundle
        owner = (before.get(parent) or {}).get("owner")  # the split's owner: the parent's
        used = headers.get(ALGORITHM_HEADER.lower()) or algorithm or "the service's default"
        return Split(f"{namespace}/{parent}", [f"{namespace}/{r}" for r in new] or [f"{namespace}/{parent}"],
                     owner, used)

    async def unload(self, namespace: str, bundle: str | None, timeout_s: float) -> list[Move]:
        before = await self._rows(namespace)
        if bundle is None:
            await self._call("PUT", f"{V2}/namespaces/{namespace}/unload", raw="")
            return [Move(f"{namespace}/{r}", row["owner"]) for r, row in before.items() if row["state"] == "Owned"]
        await self._call("PUT", f"{V2}/namespaces/{namespace}/{bundle}/unload", raw="")
        return [Move(f"{namespace}/{bundle}", (before.get(bundle) or {}).get("owner"))]

    async def transfer(self, namespace: str, bundle: str, dst: str, timeout_s: float) -> Move:
        before = await self._rows(namespace)
        await self._call("PUT", f"{V2}/namespaces/{namespace}/{bundle}/unload",
                         query={"destinationBroker": dst}, raw="")
        return Move(f"{namespace}/{bundle}", (before.get(bundle) or {}).get("owner"), dst)

    async def anti_affinity_group(self, namespace: str) -> str | None:
        return await self._call("GET", f"{V2}/namespaces/{namespace}/antiAffinity") or None

    async def set_anti_affinity_group(self, namespace: str, group: str | None) -> None:
        if group is None:
            await self._call("DELETE", f"{V2}/namespaces/{namespace}/antiAffinity")
        else:
            await self._call("POST", f"{V2}/namespaces/{namespace}/antiAffinity", raw=group)

    async def failure_domains(self, cluster: str | None) -> dict[str, list[str]]:
        found = await self._call("GET", f"{V2}/clusters/{await self._cluster(cluster)}/failureDomains")
        return {d: sorted(v["brokers"]) for d, v in found.items()}

    async def set_failure_domain(self, cluster: str | None, domain: str, brokers: list[str]) -> None:
        await self._call("POST", f"{V2}/clusters/{await self._cluster(cluster)}/failureDomains/{domain}",
                         {"brokers": brokers})

    async def delete_failure_domain(self, cluster: str | None, domain: str) -> None:
        await self._call("DELETE", f"{V2}/clusters/{await self._cluster(cluster)}/failureDomains/{domain}")

    async def lookup(self, topic: str, timeout_s: float) -> Located:
        found, headers = await asyncio.to_thread(self.http.exchange, "GET", _lookup_path(topic))
        return Located(str(found["brokerUrl"]), headers.get(DEGRADED_HEADER.lower()))

    async def bundle_range(self, topic: str) -> str:
        return str(await self._call("GET", _lookup_path(topic) + "/bundle"))

    async def brokers(self) -> Doc:
        return dict(await self._call("GET", f"{BB}/brokers"))

    async def load_report(self, broker: str) -> Doc:
        return dict(await self._call("GET", f"{BB}/brokers/{broker}/load-report"))

    async def healthcheck(self) -> None:
        await self._call("GET", f"{V2}/brokers/health")

    async def pause_balancer(self, duration: str, reason: str) -> Doc:
        return dict(await self._call("POST", f"{BB}/balancer/pause", {"for": duration, "reason": reason}))

    async def resume_balancer(self) -> Doc | None:
        resumed = (await self._call("POST", f"{BB}/balancer/resume", {}))["resumed"]
        return dict(resumed) if resumed is not None else None

    async def balancer_status(self, timeout_s: float) -> Doc:
        return dict(await self._call("GET", f"{BB}/balancer/status"))

    async def drain_broker(self, broker: str, rate_per_minute: float | None) -> Doc:
        body = {} if rate_per_minute is None else {"ratePerMinute": rate_per_minute}
        return dict(await self._call("POST", f"{BB}/brokers/{broker}/drain", body))

    async def undrain_broker(self, broker: str) -> Doc:
        return dict(await self._call("POST", f"{BB}/brokers/{broker}/undrain", {}))

    async def drain_progress(self, broker: str, wait_s: float) -> Doc:
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        return dict(await self._call("GET", f"{BB}/brokers/{broker}/drain"))

    async def restart_broker(self, broker: str, timeout_s: float) -> None:
        """Over REST the operator restarts the broker: wait until it has left and is back."""
        loop = asyncio.get_running_loop()
        deadline, gone = loop.time() + timeout_s, False
        while loop.time() < deadline:
            present = any(r["broker"] == broker for r in (await self.brokers())["brokers"])
            gone = gone or not present
            if gone and present:
                return
            await asyncio.sleep(1.0)
        raise Unavailable(f"broker {broker} did not leave and register again within {timeout_s:g} s",
                          value=broker)
    async def proposals(self) -> list[Doc]:
        return [dict(p) for p in await self._call("GET", f"{BB}/proposals")]

    async def proposal(self, proposal_id: str) -> Doc:
        return dict(await self._call("GET", f"{BB}/proposals/{quote(proposal_id, safe='')}"))

    async def review_proposal(self, proposal_id: str, verdict: str, note: str) -> Doc:
        path = f"{BB}/proposals/{quote(proposal_id, safe='')}/{quote(verdict, safe='')}"
        return dict(await self._call("POST", path, {"note": note}))


def _lookup_path(topic: str) -> str:
    """Pulsar's lookup path of a full topic name: v2 (tenant/namespace) or v1 (with a cluster)."""
    name = TopicName.parse(topic)
    kind = "topic" if name.cluster is None else "destination"
    return f"/lookup/v2/{kind}/{name.domain}/{name.namespace}/{name.local}"
