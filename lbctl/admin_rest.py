"""The admin verbs of ``lbctl.admin`` over the admin REST API (``lbctl --admin-url URL``): the same
flags, the same output, through Pulsar's ``/admin/v2`` and ``/lookup/v2`` paths and the project's
``/bb/v1`` reads of the web service, which answers them with the one ``Cluster``.

Invariants: every verb is the REST calls of its name and nothing else (no log, no Ray); its
output is what the verb prints against the cluster directly, the documents being the same
builders (``web.documents``); what the REST answer does not carry (the source of a move, the
children of a split) is read from ``/bb/v1`` before and after; the service's refusals arrive as
``lbctl.admin_http`` errors, one line each.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from balancer.errors import MalformedInput, Unavailable
from lbctl import control_rest
from lbctl.admin import emit, emit_domains, print_brokers, print_bundles, split_positions
from lbctl.admin_http import AdminHttp

RestVerb = Callable[[AdminHttp, argparse.Namespace], int]
V2 = "/admin/v2"


def run_rest(name: str, http: AdminHttp, args: argparse.Namespace) -> int:
    verb = VERBS.get(name)
    if verb is None:
        raise MalformedInput(f"--admin-url: {name.strip('_')} has no REST form", value=name)
    return verb(http, args)


def _rows(http: AdminHttp, namespace: str) -> dict[str, dict[str, Any]]:
    document = http.call("GET", f"/bb/v1/namespaces/{namespace}/bundles")
    return {row["range"]: row for row in document["bundles"]}


def _create(http: AdminHttp, args: argparse.Namespace) -> int:
    policies = {"bundles": {"numBundles": args.bundles}} if args.bundles else {}
    http.call("PUT", f"{V2}/namespaces/{args.namespace}", policies)
    count = http.call("GET", f"{V2}/namespaces/{args.namespace}/bundles")["numBundles"]
    emit(args, {"namespace": args.namespace, "numBundles": count},
          f"created {args.namespace} with {count} bundle(s)")
    return 0


def _bundles(http: AdminHttp, args: argparse.Namespace) -> int:
    print_bundles(args, http.call("GET", f"/bb/v1/namespaces/{args.namespace}/bundles"))
    return 0


def _split(http: AdminHttp, args: argparse.Namespace) -> int:
    before = _rows(http, args.namespace)
    query = {"unload": str(args.unload).lower()}
    if args.algorithm:
        query["splitAlgorithmName"] = args.algorithm
    at = split_positions(args.split_boundaries)
    http.call("PUT", f"{V2}/namespaces/{args.namespace}/{args.bundle}/split", query=query,
              raw=json.dumps(at) if at else "")
    after = _rows(http, args.namespace)
    gone, new = sorted(set(before) - set(after)), sorted(set(after) - set(before))
    parent = f"{args.namespace}/{gone[0] if gone else args.bundle}"
    children = [f"{args.namespace}/{r}" for r in new] or [parent]
    # The parent's owner when the split started: children unloaded with -u have none yet.
    owner = (before.get(gone[0] if gone else args.bundle) or {}).get("owner")
    by = f" (owner {owner})" if owner else ""
    if not new:
        text = f"{parent}: no boundary found; not split{by}"
    else:
        text = (f"split {parent} into {', '.join(new)}{by}"
                + ("; children unloaded" if args.unload else ""))
    emit(args, {"parent": parent, "children": children, "owner": owner,
                 "algorithm": args.algorithm, "unloaded": args.unload}, text)
    return 0


def _unload(http: AdminHttp, args: argparse.Namespace) -> int:
    if args.destination is not None and args.bundle is None:
        raise MalformedInput(f"-d {args.destination}: a destination needs a bundle (-b RANGE)",
                             value=args.destination)
    before = _rows(http, args.namespace)
    if args.bundle is None:
        http.call("PUT", f"{V2}/namespaces/{args.namespace}/unload", raw="")
        moved = [{"bundle": f"{args.namespace}/{r}", "src": row["owner"]}
                 for r, row in before.items() if row["state"] == "Owned"]
        text = (f"unloaded {len(moved)} bundle(s) of {args.namespace}" if moved
                else f"nothing to unload: no bundle of {args.namespace} is owned")
        emit(args, {"unloaded": moved}, text)
        return 0
    query = {"destinationBroker": args.destination} if args.destination else None
    http.call("PUT", f"{V2}/namespaces/{args.namespace}/{args.bundle}/unload", query=query, raw="")
    bundle, src = f"{args.namespace}/{args.bundle}", (before.get(args.bundle) or {}).get("owner")
    if args.destination is not None:
        emit(args, {"bundle": bundle, "src": src, "dst": args.destination},
              f"transferred {bundle} from {src} to {args.destination}")
    else:
        emit(args, {"unloaded": [{"bundle": bundle, "src": src}]}, f"unloaded {bundle} from {src}")
    return 0


def _affinity(http: AdminHttp, args: argparse.Namespace) -> int:
    http.call("POST", f"{V2}/namespaces/{args.namespace}/antiAffinity", raw=args.group)
    emit(args, {"namespace": args.namespace, "anti_affinity_group": args.group},
          f"{args.namespace}: anti-affinity group {args.group}")
    return 0


def _get_affinity(http: AdminHttp, args: argparse.Namespace) -> int:
    group = http.call("GET", f"{V2}/namespaces/{args.namespace}/antiAffinity") or None
    emit(args, {"namespace": args.namespace, "antiAffinityGroup": group}, group or "")
    return 0


def _delete_affinity(http: AdminHttp, args: argparse.Namespace) -> int:
    http.call("DELETE", f"{V2}/namespaces/{args.namespace}/antiAffinity")
    emit(args, {"namespace": args.namespace, "antiAffinityGroup": None},
          f"{args.namespace}: no anti-affinity group")
    return 0


def _cluster(http: AdminHttp, args: argparse.Namespace) -> str:
    return str(args.cluster or http.call("GET", f"{V2}/clusters")[0])


def _create_domain(http: AdminHttp, args: argparse.Namespace) -> int:
    brokers = [b.strip() for b in args.broker_list.split(",") if b.strip()]
    if not brokers:
        raise MalformedInput(f"--broker-list {args.broker_list!r}: expected broker ids, e.g. b1,b2",
                             value=args.broker_list)
    http.call("POST", f"{V2}/clusters/{_cluster(http, args)}/failureDomains/{args.domain_name}",
              {"brokers": brokers})
    emit(args, {"domain": args.domain_name, "brokers": brokers},
          f"failure domain {args.domain_name}: {', '.join(brokers)}")
    return 0


def _list_domains(http: AdminHttp, args: argparse.Namespace) -> int:
    found = http.call("GET", f"{V2}/clusters/{_cluster(http, args)}/failureDomains")
    emit_domains(args, {d: sorted(v["brokers"]) for d, v in found.items()})
    return 0


def _get_domain(http: AdminHttp, args: argparse.Namespace) -> int:
    found = http.call("GET", f"{V2}/clusters/{_cluster(http, args)}/failureDomains/{args.domain_name}")
    brokers = sorted(found["brokers"])
    emit(args, {"brokers": brokers}, ", ".join(brokers))
    return 0


def _delete_domain(http: AdminHttp, args: argparse.Namespace) -> int:
    http.call("DELETE", f"{V2}/clusters/{_cluster(http, args)}/failureDomains/{args.domain_name}")
    emit(args, {"deleted": args.domain_name}, f"failure domain {args.domain_name} deleted")
    return 0


def _lookup(http: AdminHttp, args: argparse.Namespace) -> int:
    domain, _, rest = args.topic.partition("://")
    if not rest or rest.count("/") != 2:
        raise MalformedInput(f"topic {args.topic!r}: expected persistent://tenant/namespace/topic",
                             value=args.topic)
    url = http.call("GET", f"/lookup/v2/topic/{domain}/{rest}")["brokerUrl"]
    namespace = rest.rsplit("/", 1)[0]
    bundle_range = http.call("GET", f"/lookup/v2/topic/{domain}/{rest}/bundle")
    owner = (_rows(http, namespace).get(bundle_range) or {}).get("owner")
    emit(args, {"broker": owner, "brokerUrl": url, "bundle": f"{namespace}/{bundle_range}"},
          f"{owner}\t{url}")
    return 0


def _list_brokers(http: AdminHttp, args: argparse.Namespace) -> int:
    print_brokers(args, http.call("GET", "/bb/v1/brokers"))
    return 0


def _leader(http: AdminHttp, args: argparse.Namespace) -> int:
    document = http.call("GET", "/bb/v1/brokers")
    leader_id, epoch = document["leader"], document["epoch"]
    emit(args, {"brokerId": leader_id, "epoch": epoch}, f"{leader_id or '-'} (epoch {epoch})")
    return 0


def _load_report(http: AdminHttp, args: argparse.Namespace) -> int:
    broker = args.broker or next(iter(http.call("GET", f"{V2}/brokers")), None)
    if broker is None:
        raise Unavailable("no broker is registered")
    report = http.call("GET", f"/bb/v1/brokers/{broker}/load-report")
    payload = {k: v for k, v in report.items() if k != "ts_ms"}
    print(json.dumps(payload, indent=None if args.json else 2, sort_keys=True))
    return 0


VERBS: dict[str, RestVerb] = {f.__name__: f for f in (
    _create, _bundles, _split, _unload, _affinity, _get_affinity, _delete_affinity, _create_domain,
    _list_domains, _get_domain, _delete_domain, _lookup, _list_brokers, _leader, _load_report)}
VERBS.update(control_rest.VERBS)
