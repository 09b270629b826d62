"""The ``pulsar-admin``-like verbs of contracts §4, against a live cluster (``actors.api.Cluster``).

    lbctl namespaces create tenant/ns [--bundles N]
    lbctl namespaces bundles tenant/ns
    lbctl namespaces split-bundle tenant/ns -b RANGE|LARGEST|HOT [-san ALGORITHM] [-u]
    lbctl namespaces unload tenant/ns [-b RANGE] [-d BROKER]
    lbctl namespaces set-anti-affinity-group tenant/ns --group G
    lbctl clusters create-failure-domain [CLUSTER] --domain-name D --broker-list B1,B2
    lbctl topics lookup persistent://tenant/ns/topic
    lbctl brokers list [CLUSTER]
    lbctl broker-stats load-report BROKER

Invariants:
- the cluster is the judge of every command (unknown namespace, bundle or broker, unsplittable
  bundle, transfer to the current owner): its typed refusal reaches ``lbctl.main``, which prints
  one line naming the bad value and exits 2; the refusal appends only ``CommandRejected``;
- read verbs (``bundles``, ``brokers list``, ``load-report``, lookup of an owned topic) send no
  command and append nothing;
- a verb that moves ownership returns once the move is done (split completed, bundle released
  or owned by the destination), or fails with ``Unavailable`` after ``--timeout`` seconds
  (cluster time on a virtual clock, wall time on Ray); only records after the command count
  as its completion;
- output is a plain table, or one JSON document with ``--json`` (sorted keys).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from actors.api import Cluster
from actors.cluster.kept import FINDING_HELP
from actors.effects import Receipt
from balancer.bundles import validate_namespace
from balancer.errors import MalformedInput, Unavailable, UnknownNamespace
from balancer.load import max_usage
from events.log.port import Record
from lbctl.attach import session
from projections.load import report_from_payload

Verb = Callable[[Cluster, argparse.Namespace], Awaitable[int]]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _namespaces(sub)
    clusters = _group(sub, "clusters", "cluster-wide settings: failure domains")
    domain = _verb(clusters, "create-failure-domain", "put brokers in a failure domain", _create_domain)
    domain.add_argument("cluster", nargs="?", default=None, help="cluster name (accepted, unused)")
    domain.add_argument("--domain-name", required=True, help="the failure domain")
    domain.add_argument("--broker-list", required=True, help="comma-separated broker ids")
    topics = _group(sub, "topics", "topic lookups")
    lookup = _verb(topics, "lookup", "the broker serving a topic (assigns its bundle if unowned)", _lookup)
    lookup.add_argument("topic", help="persistent://tenant/namespace/topic")
    brokers = _group(sub, "brokers", "registered brokers")
    listing = _verb(brokers, "list", "registered brokers with their bundles and load", _list_brokers)
    listing.add_argument("cluster", nargs="?", default=None, help="cluster name (accepted, unused)")
    stats = _group(sub, "broker-stats", "broker load data")
    report = _verb(stats, "load-report", "a broker's latest load report (JSON)", _load_report)
    report.add_argument("broker", help="broker id, as `lbctl brokers list` shows it")


def _namespaces(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ns = _group(sub, "namespaces", "namespaces and their bundles")
    create = _verb(ns, "create", "create a namespace", _create)
    create.add_argument("namespace", help="tenant/namespace")
    create.add_argument("--bundles", type=int, default=None,
                        help="number of bundles (default: defaultNumberOfNamespaceBundles)")
    bundles = _verb(ns, "bundles", "the bundles of a namespace, their state and owner", _bundles)
    bundles.add_argument("namespace", help="tenant/namespace")
    split = _verb(ns, "split-bundle", "split a bundle (waits until done)", _split)
    split.add_argument("namespace", help="tenant/namespace")
    split.add_argument("-b", "--bundle", required=True,
                       help="0xLLLLLLLL_0xUUUUUUUU, LARGEST (most topics) or HOT (most traffic)")
    split.add_argument("-san", "--split-algorithm-name", default=None, dest="algorithm",
                       help="range_equally_divide, topic_count_equally_divide, "
                            "specified_positions_divide or flow_or_qps_equally_divide "
                            "(default: defaultNamespaceBundleSplitAlgorithm)")
    split.add_argument("--split-boundaries", default=None,
                       help="comma-separated hash positions (specified_positions_divide)")
    split.add_argument("-u", "--unload", action="store_true", help="unload the children after")
    unload = _verb(ns, "unload", "unload a namespace or a bundle; -d transfers it", _unload)
    unload.add_argument("namespace", help="tenant/namespace")
    unload.add_argument("-b", "--bundle", default=None, help="0xLLLLLLLL_0xUUUUUUUU (default: all)")
    unload.add_argument("-d", "--destination-broker", default=None, dest="destination",
                        help="transfer the bundle to this broker (needs -b)")
    group = _verb(ns, "set-anti-affinity-group", "set the namespace's anti-affinity group", _affinity)
    group.add_argument("namespace", help="tenant/namespace")
    group.add_argument("--group", required=True, help="the anti-affinity group name")


def _group(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str,
           text: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    parser = sub.add_parser(name, help=text, description=f"{text}.", epilog=FINDING_HELP)
    verbs = parser.add_subparsers(dest=f"{name}_verb", metavar="VERB")
    verbs.required = True
    return verbs


def _verb(verbs: argparse._SubParsersAction[argparse.ArgumentParser], name: str, text: str,
          verb: Verb) -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=text, description=text, epilog=FINDING_HELP)
    parser.add_argument("--state-dir", default=None,
                        help="where `lbctl run --keep` recorded the cluster "
                             "(default: $LBCTL_STATE_DIR or .lbctl)")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds to wait for a move to complete (wall time on Ray, "
                             "cluster time in an inproc cluster)")
    parser.set_defaults(handler=_handler(verb))
    return parser


def _handler(verb: Verb) -> Callable[[argparse.Namespace], int]:
    def handle(args: argparse.Namespace) -> int:
        async def go() -> int:
            async with session(args.state_dir, getattr(args, "cluster_conf", None)) as cluster:
                await cluster.catch_up()
                cluster.poll()  # what happened before this command is not its completion
                return await verb(cluster, args)

        return asyncio.run(go())

    return handle


# -- namespaces -------------------------------------------------------------------------------


async def _create(cluster: Cluster, args: argparse.Namespace) -> int:
    receipt = await cluster.create_namespace(args.namespace, bundles=args.bundles)
    created = _event(receipt, "NamespaceCreated")
    count = len(created["boundaries"]) - 1
    _emit(args, {"namespace": args.namespace, "numBundles": count},
          f"created {args.namespace} with {count} bundle(s)")
    return 0


async def _bundles(cluster: Cluster, args: argparse.Namespace) -> int:
    namespace = _known_namespace(cluster, args.namespace)
    rows = list(cluster.ownership().bundles(namespace))
    ranges = [row.bundle.rsplit("/", 1)[1] for row in rows]
    document = {
        "numBundles": len(rows),
        "boundaries": [r.split("_")[0] for r in ranges] + ([ranges[-1].split("_")[1]] if ranges else []),
        "bundles": [{"range": r, "state": row.state, "owner": row.owner, "version": row.version}
                    for r, row in zip(ranges, rows, strict=True)],
    }
    lines = [(r, row.state, row.owner or "-", str(row.version)) for r, row in zip(ranges, rows, strict=True)]
    text = _table(("RANGE", "STATE", "OWNER", "VERSION"), lines)
    degraded = cluster.ownership().degraded_reason(namespace)
    if degraded is not None:
        document["degraded"] = degraded
        text += f"\nDEGRADED: {namespace}: a record under it cannot be read ({degraded}); states may be wrong"
        print(f"lbctl: warning: the view of {namespace} is degraded: {degraded}", file=sys.stderr)
    _emit(args, document, text)
    return 0


async def _split(cluster: Cluster, args: argparse.Namespace) -> int:
    algorithm = args.algorithm or cluster.config.default_namespace_bundle_split_algorithm
    receipt = await cluster.split_bundle(args.namespace, args.bundle, algorithm,
                                         _positions(args.split_boundaries), args.unload, wait=False,
                                         timeout_s=args.timeout)
    target = str(_event(receipt, "SplitRequested")["bundle"])
    done = (await cluster.next_record(_is("SplitCompleted", "parent", target), timeout_s=args.timeout,
                                      what=f"split of {target}")).envelope.payload
    children = [str(c) for c in done["children"]]
    if children == [target]:
        text = f"{target}: {algorithm} found no boundary; not split (owner {done['owner']})"
    else:
        names = ", ".join(c.rsplit("/", 1)[1] for c in children)
        text = (f"split {target} into {names} (owner {done['owner']})"
                + ("; children unloaded" if args.unload else ""))
    _emit(args, {"parent": target, "children": children, "owner": done["owner"],
                 "algorithm": algorithm, "unloaded": args.unload}, text)
    return 0


async def _unload(cluster: Cluster, args: argparse.Namespace) -> int:
    if args.destination is not None and args.bundle is None:
        raise MalformedInput(f"-d {args.destination}: a destination needs a bundle (-b RANGE)",
                             value=args.destination)
    receipt = await cluster.unload(args.namespace, args.bundle, args.destination, wait=False,
                                   timeout_s=args.timeout)
    if args.destination is not None:
        move = _event(receipt, "TransferPrepared")
        bundle, src = str(move["bundle"]), str(move["src"])
        await cluster.next_record(lambda r: _is("BundleOwned", "bundle", bundle)(r)
                                  and r.envelope.payload.get("owner") == args.destination,
                                  timeout_s=args.timeout, what=f"transfer of {bundle}")
        _emit(args, {"bundle": bundle, "src": src, "dst": args.destination},
              f"transferred {bundle} from {src} to {args.destination}")
        return 0
    unloads = [p for kind, p in receipt.events if kind == "UnloadRequested"]
    pending = {str(p["bundle"]) for p in unloads}

    def all_released(record: Record) -> bool:
        if record.envelope.type == "BundleReleased":
            pending.discard(str(record.envelope.payload.get("bundle")))
        return not pending

    if pending:
        await cluster.next_record(all_released, timeout_s=args.timeout,
                                  what=f"unload of {len(pending)} bundle(s)")
    moved = [{"bundle": str(p["bundle"]), "src": str(p["src"])} for p in unloads]
    if args.bundle is not None:
        text = f"unloaded {moved[0]['bundle']} from {moved[0]['src']}"
    else:
        text = f"unloaded {len(moved)} bundle(s) of {args.namespace}" if moved else \
            f"nothing to unload: no bundle of {args.namespace} is owned"
    _emit(args, {"unloaded": moved}, text)
    return 0


async def _affinity(cluster: Cluster, args: argparse.Namespace) -> int:
    receipt = await cluster.set_anti_affinity_group(args.namespace, args.group)
    policy = _event(receipt, "NamespacePolicySet")
    _emit(args, dict(policy), f"{args.namespace}: anti-affinity group {args.group}")
    return 0


# -- clusters, topics, brokers ------------------------------------------------------------------


async def _create_domain(cluster: Cluster, args: argparse.Namespace) -> int:
    brokers = [b.strip() for b in args.broker_list.split(",") if b.strip()]
    if not brokers:
        raise MalformedInput(f"--broker-list {args.broker_list!r}: expected broker ids, e.g. b1,b2",
                             value=args.broker_list)
    receipt = await cluster.set_failure_domain(args.domain_name, brokers)
    event = _event(receipt, "FailureDomainSet")
    _emit(args, dict(event), f"failure domain {args.domain_name}: {', '.join(brokers)}")
    return 0


async def _lookup(cluster: Cluster, args: argparse.Namespace) -> int:
    owner = await cluster.lookup(args.topic, timeout_s=args.timeout)
    registered = cluster.view.brokers.get(owner)
    url = registered.url if registered is not None else ""
    bundle = cluster.ownership().bundle_of_topic(args.topic)
    degraded = cluster.ownership().degraded_reason(bundle.rsplit("/", 1)[0])
    if degraded is not None:
        print(f"lbctl: warning: the view of {bundle} is degraded: {degraded}", file=sys.stderr)
    _emit(args, {"broker": owner, "brokerUrl": url, "bundle": bundle}, f"{owner}\t{url}")
    return 0


async def _list_brokers(cluster: Cluster, args: argparse.Namespace) -> int:
    owners = cluster.ownership().owners()
    leader = cluster.leader()
    leader_id, epoch = leader.leader_id, leader.epoch
    rows: list[dict[str, Any]] = []
    for broker, info in sorted(cluster.view.brokers.items()):
        report = cluster.load_report(broker)
        load = report["broker_load"]
        usage = max_usage(report_from_payload(broker, load)) if load is not None else None
        rows.append({"broker": broker, "url": info.url, "failureDomain": info.failure_domain,
                     "bundles": sum(1 for o in owners.values() if o == broker),
                     "maxResourceUsage": usage})
    lines = [(r["broker"], str(r["url"]), str(r["failureDomain"] or "-"), str(r["bundles"]),
              "-" if r["maxResourceUsage"] is None else f"{100 * r['maxResourceUsage']:.1f}%")
             for r in rows]
    text = _table(("BROKER", "URL", "DOMAIN", "BUNDLES", "LOAD"), lines)
    _emit(args, {"brokers": rows, "leader": leader_id, "epoch": epoch},
          f"{text}\nleader: {leader_id or '-'} (epoch {epoch})")
    return 0


async def _load_report(cluster: Cluster, args: argparse.Namespace) -> int:
    report = cluster.load_report(args.broker)  # an unregistered broker is named
    if report["ts_ms"] is None:
        raise Unavailable(f"broker {args.broker} has not reported its load yet")
    payload = {k: v for k, v in report.items() if k != "ts_ms"}  # the LoadReported payload
    print(json.dumps(payload, indent=None if args.json else 2, sort_keys=True))
    return 0


# -- helpers ----------------------------------------------------------------------------------


def _known_namespace(cluster: Cluster, namespace: str) -> str:
    validate_namespace(namespace)
    known = cluster.ownership().namespaces
    if namespace not in known:
        raise UnknownNamespace(f"namespace {namespace!r} does not exist; known: "
                               f"{', '.join(sorted(known)) or 'none'}", value=namespace)
    return namespace


def _event(receipt: Receipt, kind: str) -> Mapping[str, Any]:
    payload = receipt.first(kind)
    if payload is None:
        raise Unavailable(f"expected a {kind} in the reply, got {receipt.types() or 'nothing'}")
    return payload


def _is(kind: str, field: str, value: str) -> Callable[[Record], bool]:
    return lambda r: r.envelope.type == kind and r.envelope.payload.get(field) == value


def _positions(raw: str | None) -> list[int] | None:
    if raw is None:
        return None
    try:
        return [int(p.strip(), 0) for p in raw.split(",") if p.strip()]
    except ValueError:
        raise MalformedInput(f"--split-boundaries {raw!r}: expected integers, e.g. 0x40000000,0x80000000",
                             value=raw) from None


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = [list(headers), *map(list, rows)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)


def _emit(args: argparse.Namespace, document: Mapping[str, Any], text: str) -> None:
    print(json.dumps(document, sort_keys=True) if args.json else text)
