"""The ``pulsar-admin``-like verbs of contracts §4, against a live cluster (``actors.api.Cluster``).

    lbctl namespaces create tenant/ns [-b|--bundles N]
    lbctl namespaces bundles tenant/ns
    lbctl namespaces split-bundle tenant/ns (-b RANGE | -bt LARGEST|HOT) [-san ALGORITHM] [-sb P1,P2] [-u]
    lbctl namespaces unload tenant/ns [-b RANGE] [-d|--destinationBroker BROKER]
    lbctl namespaces set-anti-affinity-group tenant/ns -g|--group G
    lbctl namespaces get-anti-affinity-group | delete-anti-affinity-group tenant/ns
    lbctl clusters create-failure-domain [CLUSTER] --domain-name D --broker-list B1,B2
    lbctl clusters list-failure-domains [CLUSTER]
    lbctl clusters get-failure-domain | delete-failure-domain [CLUSTER] --domain-name D
    lbctl topics lookup persistent://tenant/ns/topic
    lbctl brokers list [CLUSTER]; lbctl brokers leader-broker
    lbctl broker-stats load-report [BROKER]        (default: the first registered broker)

Flag names and short forms are pulsar-admin's; the earlier spellings (``-b LARGEST``,
``--destination-broker``) keep working. With ``lbctl --admin-url URL`` (or client.conf's
``webServiceUrl``) every verb here goes over the admin REST API instead (``lbctl.admin_rest``).

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
from balancer.errors import MalformedInput, Unavailable, UnknownFailureDomain
from events.log.port import Record
from lbctl import numargs
from lbctl.admin_http import endpoint
from lbctl.attach import session
from web.documents import brokers_document, bundles_document

Verb = Callable[[Cluster, argparse.Namespace], Awaitable[int]]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _namespaces(sub)
    clusters = _group(sub, "clusters", "cluster-wide settings: failure domains")
    domain = _verb(clusters, "create-failure-domain", "put brokers in a failure domain", _create_domain)
    domain.add_argument("cluster", nargs="?", default=None, help="cluster name (accepted, unused)")
    domain.add_argument("--domain-name", required=True, help="the failure domain")
    domain.add_argument("--broker-list", required=True, help="comma-separated broker ids")
    listed = _verb(clusters, "list-failure-domains", "the failure domains and their brokers", _list_domains)
    listed.add_argument("cluster", nargs="?", default=None, help="cluster name (accepted, unused)")
    for name, text, verb in (("get-failure-domain", "one failure domain's brokers", _get_domain),
                             ("delete-failure-domain", "dissolve a failure domain", _delete_domain)):
        one = _verb(clusters, name, text, verb)
        one.add_argument("cluster", nargs="?", default=None, help="cluster name (accepted, unused)")
        one.add_argument("--domain-name", required=True, help="the failure domain")
    topics = _group(sub, "topics", "topic lookups")
    lookup = _verb(topics, "lookup", "the broker serving a topic (assigns its bundle if unowned)", _lookup)
    lookup.add_argument("topic", help="persistent://tenant/namespace/topic")
    brokers = _group(sub, "brokers", "registered brokers")
    listing = _verb(brokers, "list", "registered brokers with their bundles and load", _list_brokers)
    listing.add_argument("cluster", nargs="?", default=None, help="cluster name (accepted, unused)")
    _verb(brokers, "leader-broker", "the leader: its id and epoch", _leader)
    stats = _group(sub, "broker-stats", "broker load data")
    report = _verb(stats, "load-report", "a broker's latest load report (JSON)", _load_report)
    report.add_argument("broker", nargs="?", default=None,
                        help="broker id, as `lbctl brokers list` shows it (default: the first)")


def _namespaces(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ns = _group(sub, "namespaces", "namespaces and their bundles")
    create = _verb(ns, "create", "create a namespace", _create)
    create.add_argument("namespace", help="tenant/namespace")
    create.add_argument("-b", "--bundles", type=numargs.COUNT, default=None,
                        help="number of bundles (default: defaultNumberOfNamespaceBundles)")
    bundles = _verb(ns, "bundles", "the bundles of a namespace, their state and owner", _bundles)
    bundles.add_argument("namespace", help="tenant/namespace")
    split = _verb(ns, "split-bundle", "split a bundle (waits until done)", _split)
    split.add_argument("namespace", help="tenant/namespace")
    which = split.add_mutually_exclusive_group(required=True)
    which.add_argument("-b", "--bundle", help="0xLLLLLLLL_0xUUUUUUUU (LARGEST and HOT as for -bt)")
    which.add_argument("-bt", "--bundle-type", choices=("LARGEST", "HOT"), dest="bundle",
                       help="LARGEST (most topics) or HOT (most traffic)")
    split.add_argument("-san", "--split-algorithm-name", default=None, dest="algorithm",
                       help="range_equally_divide, topic_count_equally_divide, "
                            "specified_positions_divide or flow_or_qps_equally_divide "
                            "(default: defaultNamespaceBundleSplitAlgorithm)")
    split.add_argument("-sb", "--split-boundaries", default=None,
                       help="comma-separated hash positions (specified_positions_divide)")
    split.add_argument("-u", "--unload", action="store_true", help="unload the children after")
    unload = _verb(ns, "unload", "unload a namespace or a bundle; -d transfers it", _unload)
    unload.add_argument("namespace", help="tenant/namespace")
    unload.add_argument("-b", "--bundle", default=None, help="0xLLLLLLLL_0xUUUUUUUU (default: all)")
    unload.add_argument("-d", "--destinationBroker", "--destination-broker", default=None, dest="destination",
                        help="transfer the bundle to this broker (needs -b)")
    group = _verb(ns, "set-anti-affinity-group", "set the namespace's anti-affinity group", _affinity)
    group.add_argument("namespace", help="tenant/namespace")
    group.add_argument("-g", "--group", required=True, help="the anti-affinity group name")
    for name, text, verb in (("get-anti-affinity-group", "the namespace's anti-affinity group", _get_affinity),
                             ("delete-anti-affinity-group", "remove the namespace's anti-affinity group",
                              _delete_affinity)):
        one = _verb(ns, name, text, verb)
        one.add_argument("namespace", help="tenant/namespace")


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
    parser.add_argument("--timeout", type=numargs.POSITIVE, default=30.0,
                        help="seconds to wait for a move to complete (wall time on Ray, "
                             "cluster time in an inproc cluster)")
    parser.set_defaults(handler=_handler(verb))
    return parser


def _handler(verb: Verb) -> Callable[[argparse.Namespace], int]:
    def handle(args: argparse.Namespace) -> int:
        http = endpoint(getattr(args, "admin_url", None), getattr(args, "auth_plugin", None),
                        getattr(args, "auth_params", None), getattr(args, "client_conf", None))
        if http is not None:
            from lbctl.admin_rest import run_rest

            return run_rest(verb.__name__, http, args)

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
    emit(args, {"namespace": args.namespace, "numBundles": count},
          f"created {args.namespace} with {count} bundle(s)")
    return 0


async def _bundles(cluster: Cluster, args: argparse.Namespace) -> int:
    print_bundles(args, bundles_document(cluster, args.namespace))
    return 0


def print_bundles(args: argparse.Namespace, document: Mapping[str, Any]) -> None:
    rows = document["bundles"]
    text = _table(("RANGE", "STATE", "OWNER", "VERSION"),
                  [(r["range"], r["state"], r["owner"] or "-", str(r["version"])) for r in rows])
    degraded = document.get("degraded")
    if degraded is not None:
        text += f"\nDEGRADED: {args.namespace}: a record under it cannot be read ({degraded}); states may be wrong"
        print(f"lbctl: warning: the view of {args.namespace} is degraded: {degraded}", file=sys.stderr)
    emit(args, document, text)


async def _split(cluster: Cluster, args: argparse.Namespace) -> int:
    algorithm = args.algorithm or cluster.config.default_namespace_bundle_split_algorithm
    receipt = await cluster.split_bundle(args.namespace, args.bundle, algorithm,
                                         split_positions(args.split_boundaries), args.unload, wait=False,
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
    emit(args, {"parent": target, "children": children, "owner": done["owner"],
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
        emit(args, {"bundle": bundle, "src": src, "dst": args.destination},
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
    emit(args, {"unloaded": moved}, text)
    return 0


async def _affinity(cluster: Cluster, args: argparse.Namespace) -> int:
    receipt = await cluster.set_anti_affinity_group(args.namespace, args.group)
    policy = _event(receipt, "NamespacePolicySet")
    emit(args, dict(policy), f"{args.namespace}: anti-affinity group {args.group}")
    return 0


async def _get_affinity(cluster: Cluster, args: argparse.Namespace) -> int:
    group = cluster.anti_affinity_group(args.namespace)
    emit(args, {"namespace": args.namespace, "antiAffinityGroup": group}, group or "")
    return 0


async def _delete_affinity(cluster: Cluster, args: argparse.Namespace) -> int:
    await cluster.set_anti_affinity_group(args.namespace, None)
    emit(args, {"namespace": args.namespace, "antiAffinityGroup": None},
          f"{args.namespace}: no anti-affinity group")
    return 0


# -- clusters, topics, brokers ------------------------------------------------------------------


async def _create_domain(cluster: Cluster, args: argparse.Namespace) -> int:
    brokers = [b.strip() for b in args.broker_list.split(",") if b.strip()]
    if not brokers:
        raise MalformedInput(f"--broker-list {args.broker_list!r}: expected broker ids, e.g. b1,b2",
                             value=args.broker_list)
    receipt = await cluster.set_failure_domain(args.domain_name, brokers)
    event = _event(receipt, "FailureDomainSet")
    emit(args, dict(event), f"failure domain {args.domain_name}: {', '.join(brokers)}")
    return 0


async def _list_domains(cluster: Cluster, args: argparse.Namespace) -> int:
    emit_domains(args, cluster.failure_domains())
    return 0


async def _get_domain(cluster: Cluster, args: argparse.Namespace) -> int:
    found = cluster.failure_domains().get(args.domain_name)
    if found is None:
        raise UnknownFailureDomain(f"failure domain {args.domain_name!r} does not exist",
                                   value=args.domain_name)
    emit(args, {"brokers": found}, ", ".join(found))
    return 0


async def _delete_domain(cluster: Cluster, args: argparse.Namespace) -> int:
    await cluster.delete_failure_domain(args.domain_name)
    emit(args, {"deleted": args.domain_name}, f"failure domain {args.domain_name} deleted")
    return 0


def emit_domains(args: argparse.Namespace, domains: Mapping[str, Sequence[str]]) -> None:
    emit(args, {d: {"brokers": list(b)} for d, b in domains.items()},
          _table(("DOMAIN", "BROKERS"), [(d, ",".join(b)) for d, b in sorted(domains.items())]))


async def _leader(cluster: Cluster, args: argparse.Namespace) -> int:
    leader_id, epoch = cluster.leader()
    emit(args, {"brokerId": leader_id, "epoch": epoch}, f"{leader_id or '-'} (epoch {epoch})")
    return 0


async def _lookup(cluster: Cluster, args: argparse.Namespace) -> int:
    owner = await cluster.lookup(args.topic, timeout_s=args.timeout)
    registered = cluster.view.brokers.get(owner)
    url = registered.url if registered is not None else ""
    bundle = cluster.ownership().bundle_of_topic(args.topic)
    degraded = cluster.ownership().degraded_reason(bundle.rsplit("/", 1)[0])
    if degraded is not None:
        print(f"lbctl: warning: the view of {bundle} is degraded: {degraded}", file=sys.stderr)
    emit(args, {"broker": owner, "brokerUrl": url, "bundle": bundle}, f"{owner}\t{url}")
    return 0


async def _list_brokers(cluster: Cluster, args: argparse.Namespace) -> int:
    print_brokers(args, brokers_document(cluster))
    return 0


def print_brokers(args: argparse.Namespace, document: Mapping[str, Any]) -> None:
    lines = [(r["broker"], str(r["url"]), str(r["failureDomain"] or "-"), str(r["bundles"]),
              "-" if r["maxResourceUsage"] is None else f"{100 * r['maxResourceUsage']:.1f}%")
             for r in document["brokers"]]
    text = _table(("BROKER", "URL", "DOMAIN", "BUNDLES", "LOAD"), lines)
    emit(args, document, f"{text}\nleader: {document['leader'] or '-'} (epoch {document['epoch']})")


async def _load_report(cluster: Cluster, args: argparse.Namespace) -> int:
    broker = args.broker or next((b.broker_id for b in cluster.brokers()), "")
    report = cluster.load_report(broker)  # an unregistered broker is named
    if report["ts_ms"] is None:
        raise Unavailable(f"broker {broker} has not reported its load yet")
    payload = {k: v for k, v in report.items() if k != "ts_ms"}  # the LoadReported payload
    print(json.dumps(payload, indent=None if args.json else 2, sort_keys=True))
    return 0


# -- helpers ----------------------------------------------------------------------------------


def _event(receipt: Receipt, kind: str) -> Mapping[str, Any]:
    payload = receipt.first(kind)
    if payload is None:
        raise Unavailable(f"expected a {kind} in the reply, got {receipt.types() or 'nothing'}")
    return payload


def _is(kind: str, field: str, value: str) -> Callable[[Record], bool]:
    return lambda r: r.envelope.type == kind and r.envelope.payload.get(field) == value


def split_positions(raw: str | None) -> list[int] | None:
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


def emit(args: argparse.Namespace, document: Mapping[str, Any], text: str) -> None:
    print(json.dumps(document, sort_keys=True) if args.json else text)
