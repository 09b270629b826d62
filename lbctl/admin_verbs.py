"""pulsar-admin's verbs, each written once against ``AdminTransport`` (contracts §4).

    lbctl tenants list
    lbctl namespaces list TENANT | policies NS | bundles NS | create NS [-b|--bundles N]
    lbctl namespaces split-bundle NS (-b RANGE | -bt LARGEST|HOT) [-san ALGORITHM] [-sb P1,P2] [-u]
    lbctl namespaces unload NS [-b RANGE] [-d|--destinationBroker BROKER|HOST:PORT]
    lbctl namespaces set-anti-affinity-group NS -g G | get-anti-affinity-group NS | delete-...
    lbctl clusters create-failure-domain [CLUSTER] --domain-name D --broker-list B1,B2
    lbctl clusters list-failure-domains [CLUSTER] | get-failure-domain | delete-failure-domain
    lbctl topics lookup TOPIC [--table] | bundle-range TOPIC
    lbctl brokers list [CLUSTER] [--table] | leader-broker | healthcheck
    lbctl broker-stats load-report [BROKER]

Two transports meet the protocol, as an HTTP client library has one client over several
transports: ``lbctl.admin_cluster`` (the ``Cluster`` itself: a kept state directory or a
deployment) and ``lbctl.admin_rest`` (the admin REST service, ``--admin-url``); ``lbctl.admin``
picks one. A verb is added here, in both transports, and nowhere else (docs/recipes.md).

Invariants:
- a verb never knows which transport it has: the same arguments give the same output and exit
  status on both (tests/contracts/test_admin_transports.py runs one suite over both); printing is
  ``lbctl.admin_print``'s;
- names are checked before any call (``lbctl.admin_names``: a tenant, a namespace, a topic in
  any of Pulsar's ``TopicName`` forms, a broker as an id or ``host:port``): a bad one is one line
  naming it, exit 2, and nothing is sent; what only the cluster can judge (unknown namespace,
  bundle or broker, an unsplittable bundle, a transfer to the current owner) arrives as the
  cluster's own error;
- read verbs send no command; a verb that moves ownership returns once the move is done, or
  fails with ``Unavailable`` after ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeAlias

from actors.cluster.kept import FINDING_HELP
from balancer.bundles import BundleId, validate_namespace
from balancer.errors import MalformedInput, Unavailable, UnknownBroker, UnknownFailureDomain
from balancer.topics import namespace_of_topic
from lbctl import numargs
from lbctl.admin_names import split_positions, tenant_name, topic_name
from lbctl.admin_print import (
    emit,
    emit_lines,
    emit_object,
    print_brokers,
    print_bundles,
    print_domains,
    warn,
)
from web.shapes import broker_at, local_broker_data

Doc = dict[str, Any]
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


@dataclass(frozen=True)
class Move:
    """A bundle that left ``src`` (for a transfer: to ``dst``)."""

    bundle: str
    src: str | None
    dst: str | None = None


@dataclass(frozen=True)
class Split:
    """A completed split: the children (``[parent]``: no boundary found) and their owner."""

    parent: str
    children: list[str]
    owner: str | None
    algorithm: str
    """The algorithm the cluster used (its default when none was asked for)."""


@dataclass(frozen=True)
class Located:
    """A topic's broker as Pulsar's lookup answers it, and whether the view behind it is degraded."""

    broker_url: str
    degraded: str | None = None


class AdminTransport(Protocol):
    """The admin operations, as both the ``Cluster`` and the REST service answer them. Names are
    checked by the verbs; documents are those of ``web.documents`` and ``web.shapes``."""

    async def tenants(self) -> list[str]: ...
    async def namespaces(self, tenant: str) -> list[str]: ...
    async def policies(self, namespace: str) -> Doc: ...
    async def create_namespace(self, namespace: str, bundles: int | None) -> int: ...
    async def bundles(self, namespace: str) -> Doc: ...
    async def split(self, namespace: str, bundle: str, algorithm: str | None,
                    positions: list[int] | None, unload: bool, timeout_s: float) -> Split: ...
    async def unload(self, namespace: str, bundle: str | None, timeout_s: float) -> list[Move]: ...
    async def transfer(self, namespace: str, bundle: str, dst: str, timeout_s: float) -> Move: ...
    async def anti_affinity_group(self, namespace: str) -> str | None: ...
    async def set_anti_affinity_group(self, namespace: str, group: str | None) -> None: ...
    async def failure_domains(self, cluster: str | None) -> dict[str, list[str]]: ...
    async def set_failure_domain(self, cluster: str | None, domain: str, brokers: list[str]) -> None: ...
    async def delete_failure_domain(self, cluster: str | None, domain: str) -> None: ...
    async def lookup(self, topic: str, timeout_s: float) -> Located: ...
    async def bundle_range(self, topic: str) -> str: ...
    async def brokers(self) -> Doc: ...
    async def load_report(self, broker: str) -> Doc: ...
    async def healthcheck(self) -> None: ...
    async def pause_balancer(self, duration: str, reason: str) -> Doc: ...
    async def resume_balancer(self) -> Doc | None: ...
    async def balancer_status(self, timeout_s: float) -> Doc: ...
    async def drain_broker(self, broker: str, rate_per_minute: float | None) -> Doc: ...
    async def undrain_broker(self, broker: str) -> Doc: ...
    async def drain_progress(self, broker: str, wait_s: float) -> Doc: ...
    async def restart_broker(self, broker: str, timeout_s: float) -> None: ...
    async def proposals(self) -> list[Doc]: ...
    async def proposal(self, proposal_id: str) -> Doc: ...
    async def review_proposal(self, proposal_id: str, verdict: str, note: str) -> Doc: ...


SPECIFIED = "specified_positions_divide"
Verb = Callable[[AdminTransport, argparse.Namespace], Coroutine[Any, Any, int]]
Runner = Callable[[Verb, argparse.Namespace], int]


def register(sub: SubParsers, run: Runner) -> None:
    tenants = group(sub, "tenants", "tenants (the first name of each namespace)")
    verb(tenants, run, "list", "the tenants, one per line", _tenants)
    _namespaces(sub, run)
    _clusters(sub, run)
    topics = group(sub, "topics", "topic lookups")
    lookup = verb(topics, run, "lookup", "the broker URL serving a topic (assigns its bundle if unowned)",
                  _lookup)
    lookup.add_argument("topic", help="persistent://tenant/namespace/topic (or tenant/namespace/topic)")
    lookup.add_argument("--table", action="store_true", help="the broker id, a tab, the URL")
    ranged = verb(topics, run, "bundle-range", "the range of the bundle a topic belongs to", _bundle_range)
    ranged.add_argument("topic", help="persistent://tenant/namespace/topic (or tenant/namespace/topic)")
    brokers = group(sub, "brokers", "registered brokers")
    listing = verb(brokers, run, "list", "registered brokers, one id per line", _list_brokers)
    listing.add_argument("cluster", nargs="?", default=None, help="cluster name (accepted, unused)")
    listing.add_argument("--table", action="store_true",
                         help="a table: id, URL, failure domain, bundles and load, then the leader")
    verb(brokers, run, "leader-broker", "the leader: its id and epoch", _leader)
    verb(brokers, run, "healthcheck", "ok if a leader is elected and a broker registered", _healthcheck)
    stats = group(sub, "broker-stats", "broker load data")
    report = verb(stats, run, "load-report", "a broker's latest load report (Pulsar's LocalBrokerData)",
                  _load_report)
    report.add_argument("broker", nargs="?", default=None,
                        help="broker id or host:port, as `lbctl brokers list` shows it (default: the first)")


def _namespaces(sub: SubParsers, run: Runner) -> None:
    ns = group(sub, "namespaces", "namespaces and their bundles")
    listed = verb(ns, run, "list", "the namespaces of a tenant, one per line", _list_namespaces)
    listed.add_argument("tenant", help="the tenant")
    for name, text, handler in (("policies", "the namespace's policies (Pulsar's Policies)", _policies),
                                ("bundles", "the bundles of a namespace, their state and owner", _bundles),
                                ("get-anti-affinity-group", "the namespace's anti-affinity group",
                                 _get_affinity),
                                ("delete-anti-affinity-group", "remove the namespace's anti-affinity group",
                                 _delete_affinity)):
        verb(ns, run, name, text, handler).add_argument("namespace", help="tenant/namespace")
    create = verb(ns, run, "create", "create a namespace", _create)
    create.add_argument("namespace", help="tenant/namespace")
    create.add_argument("-b", "--bundles", type=numargs.COUNT, default=None,
                        help="number of bundles (default: defaultNumberOfNamespaceBundles)")
    split = verb(ns, run, "split-bundle", "split a bundle (waits until done)", _split)
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
    unload = verb(ns, run, "unload", "unload a namespace or a bundle; -d transfers it", _unload)
    unload.add_argument("namespace", help="tenant/namespace")
    unload.add_argument("-b", "--bundle", default=None, help="0xLLLLLLLL_0xUUUUUUUU (default: all)")
    unload.add_argument("-d", "--destinationBroker", "--destination-broker", default=None, dest="destination",
                        help="transfer the bundle to this broker: its id or host:port (needs -b)")
    affinity = verb(ns, run, "set-anti-affinity-group", "set the namespace's anti-affinity group", _affinity)
    affinity.add_argument("namespace", help="tenant/namespace")
    affinity.add_argument("-g", "--group", required=True, help="the anti-affinity group name")


def _clusters(sub: SubParsers, run: Runner) -> None:
    clusters = group(sub, "clusters", "cluster-wide settings: failure domains")
    for name, text, handler in (
            ("create-failure-domain", "put brokers in a failure domain", _create_domain),
            ("list-failure-domains", "the failure domains and their brokers", _list_domains),
            ("get-failure-domain", "one failure domain's brokers", _get_domain),
            ("delete-failure-domain", "dissolve a failure domain", _delete_domain)):
        one = verb(clusters, run, name, text, handler)
        one.add_argument("cluster", nargs="?", default=None,
                         help="cluster name (over --admin-url: the service's; default its first)")
        if handler is not _list_domains:
            one.add_argument("--domain-name", required=True, help="the failure domain")
        if handler is _create_domain:
            one.add_argument("--broker-list", required=True, help="comma-separated broker ids or host:port")


def verbs_of(sub: SubParsers, name: str) -> SubParsers:
    """The verbs of the group ``name`` made by ``group`` (another module adds its own to it)."""
    parser = sub.choices[name]
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return found[0]


def group(sub: SubParsers, name: str, text: str) -> SubParsers:
    parser = sub.add_parser(name, help=text, description=f"{text}.", epilog=FINDING_HELP)
    verbs = parser.add_subparsers(dest=f"{name}_verb", metavar="VERB")
    verbs.required = True
    return verbs


def verb(verbs: SubParsers, run: Runner, name: str, text: str, handler: Verb) -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=text, description=text, epilog=FINDING_HELP)
    parser.add_argument("--state-dir", default=None,
                        help="where `lbctl run --keep` recorded the cluster "
                             "(default: $LBCTL_STATE_DIR or .lbctl)")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of text")
    parser.add_argument("--timeout", type=numargs.POSITIVE, default=30.0,
                        help="seconds to wait for a move to complete (wall time on Ray, "
                             "cluster time in an inproc cluster)")
    parser.set_defaults(handler=lambda args: run(handler, args))
    return parser


# -- brokers as Pulsar names them -----------------------------------------------------------


async def broker_ids(admin: AdminTransport, given: list[str], flag: str) -> list[str]:
    """Brokers as ids: an id as it is; ``host:port`` (Pulsar's form of a broker's id) as the broker
    whose broker service or web service listens there (``web.shapes.broker_at``)."""
    if not any(":" in b for b in given):
        return given  # no call: an unknown id is the cluster's to refuse
    brokers = [(r["broker"], r["url"]) for r in (await admin.brokers())["brokers"]]
    return [broker_at(b, brokers, flag) for b in given]


# -- tenants and namespaces ---------------------------------------------------------------------


async def _tenants(admin: AdminTransport, args: argparse.Namespace) -> int:
    """pulsar-admin's ``CmdTenants`` ``list``: a tenant per line."""
    emit_lines(args, await admin.tenants())
    return 0


async def _list_namespaces(admin: AdminTransport, args: argparse.Namespace) -> int:
    """pulsar-admin's ``CmdNamespaces`` ``list TENANT``: a namespace per line."""
    emit_lines(args, await admin.namespaces(tenant_name(args.tenant)))
    return 0


async def _policies(admin: AdminTransport, args: argparse.Namespace) -> int:
    """pulsar-admin's ``CmdNamespaces`` ``policies NS``: Pulsar's ``Policies`` as indented JSON."""
    emit_object(args, await admin.policies(validate_namespace(args.namespace)))
    return 0


async def _create(admin: AdminTransport, args: argparse.Namespace) -> int:
    count = await admin.create_namespace(validate_namespace(args.namespace), args.bundles)
    emit(args, {"namespace": args.namespace, "numBundles": count},
         f"created {args.namespace} with {count} bundle(s)")
    return 0


async def _bundles(admin: AdminTransport, args: argparse.Namespace) -> int:
    print_bundles(args, await admin.bundles(validate_namespace(args.namespace)))
    return 0


async def _split(admin: AdminTransport, args: argparse.Namespace) -> int:
    positions = split_positions(args.split_boundaries)
    algorithm = args.algorithm or (SPECIFIED if positions else None)  # Pulsar's rule for -sb alone
    done = await admin.split(validate_namespace(args.namespace), args.bundle, algorithm, positions,
                             args.unload, args.timeout)
    if done.children == [done.parent]:
        text = f"{done.parent}: {done.algorithm} found no boundary; not split (owner {done.owner or '-'})"
    else:
        names = ", ".join(BundleId.parse(c).range.name for c in done.children)
        text = (f"split {done.parent} into {names} (owner {done.owner or '-'})"
                + ("; children unloaded" if args.unload else ""))
    emit(args, {**asdict(done), "unloaded": args.unload}, text)
    return 0


async def _unload(admin: AdminTransport, args: argparse.Namespace) -> int:
    namespace = validate_namespace(args.namespace)
    if args.destination is not None:
        if args.bundle is None:
            raise MalformedInput(f"-d {args.destination}: a destination needs a bundle (-b RANGE)",
                                 value=args.destination)
        [dst] = await broker_ids(admin, [args.destination], "-d")
        move = await admin.transfer(namespace, args.bundle, dst, args.timeout)
        emit(args, asdict(move), f"transferred {move.bundle} from {move.src} to {move.dst}")
        return 0
    moved = await admin.unload(namespace, args.bundle, args.timeout)
    if args.bundle is not None:
        text = f"unloaded {moved[0].bundle} from {moved[0].src}"
    else:
        text = (f"unloaded {len(moved)} bundle(s) of {namespace}" if moved
                else f"nothing to unload: no bundle of {namespace} is owned")
    emit(args, {"unloaded": [{"bundle": m.bundle, "src": m.src} for m in moved]}, text)
    return 0


async def _affinity(admin: AdminTransport, args: argparse.Namespace) -> int:
    await admin.set_anti_affinity_group(validate_namespace(args.namespace), args.group)
    emit(args, {"namespace": args.namespace, "antiAffinityGroup": args.group},
         f"{args.namespace}: anti-affinity group {args.group}")
    return 0


async def _get_affinity(admin: AdminTransport, args: argparse.Namespace) -> int:
    group_name = await admin.anti_affinity_group(validate_namespace(args.namespace))
    emit(args, {"namespace": args.namespace, "antiAffinityGroup": group_name}, group_name or "")
    return 0


async def _delete_affinity(admin: AdminTransport, args: argparse.Namespace) -> int:
    await admin.set_anti_affinity_group(validate_namespace(args.namespace), None)
    emit(args, {"namespace": args.namespace, "antiAffinityGroup": None},
         f"{args.namespace}: no anti-affinity group")
    return 0


# -- clusters -----------------------------------------------------------------------------------


async def _create_domain(admin: AdminTransport, args: argparse.Namespace) -> int:
    given = [b.strip() for b in args.broker_list.split(",") if b.strip()]
    if not given:
        raise MalformedInput(f"--broker-list {args.broker_list!r}: expected broker ids, e.g. b1,b2",
                             value=args.broker_list)
    brokers = await broker_ids(admin, given, "--broker-list")
    await admin.set_failure_domain(args.cluster, args.domain_name, brokers)
    emit(args, {"domain": args.domain_name, "brokers": brokers},
         f"failure domain {args.domain_name}: {', '.join(brokers)}")
    return 0


async def _list_domains(admin: AdminTransport, args: argparse.Namespace) -> int:
    print_domains(args, await admin.failure_domains(args.cluster))
    return 0


async def _get_domain(admin: AdminTransport, args: argparse.Namespace) -> int:
    found = (await admin.failure_domains(args.cluster)).get(args.domain_name)
    if found is None:
        raise UnknownFailureDomain(f"failure domain {args.domain_name!r} does not exist",
                                   value=args.domain_name)
    emit(args, {"brokers": found}, ", ".join(found))
    return 0


async def _delete_domain(admin: AdminTransport, args: argparse.Namespace) -> int:
    await admin.delete_failure_domain(args.cluster, args.domain_name)
    emit(args, {"deleted": args.domain_name}, f"failure domain {args.domain_name} deleted")
    return 0


# -- topics, brokers ----------------------------------------------------------------------------


async def _lookup(admin: AdminTransport, args: argparse.Namespace) -> int:
    """pulsar-admin's ``CmdTopics`` ``lookup``: the broker URL (``Lookup.lookupTopic``'s string);
    ``--table`` the broker id, a tab and the URL; ``--json`` both and the bundle."""
    topic = topic_name(args.topic)
    found = await admin.lookup(topic, args.timeout)
    if found.degraded is not None:
        warn(f"the view of {namespace_of_topic(topic)} is degraded: {found.degraded}")
    if not (args.table or args.json):
        print(found.broker_url)
        return 0
    rows = (await admin.brokers())["brokers"]
    owner = next((r["broker"] for r in rows if r["url"] == found.broker_url), None)
    bundle = f"{namespace_of_topic(topic)}/{await admin.bundle_range(topic)}"
    emit(args, {"broker": owner, "brokerUrl": found.broker_url, "bundle": bundle},
         f"{owner or '-'}\t{found.broker_url}")
    return 0


async def _bundle_range(admin: AdminTransport, args: argparse.Namespace) -> int:
    """pulsar-admin's ``CmdTopics`` ``bundle-range``: the range (``Lookup.getBundleRange``)."""
    topic = topic_name(args.topic)
    found = await admin.bundle_range(topic)
    emit(args, {"topic": topic, "range": found}, found)
    return 0


async def _list_brokers(admin: AdminTransport, args: argparse.Namespace) -> int:
    """pulsar-admin's ``CmdBrokers`` ``list``: one broker per line; ``--table`` (or ``--json``)
    the whole brokers document."""
    document = await admin.brokers()
    if args.table or args.json:
        print_brokers(args, document)
    else:
        emit_lines(args, [row["broker"] for row in document["brokers"]])
    return 0


async def _leader(admin: AdminTransport, args: argparse.Namespace) -> int:
    document = await admin.brokers()
    leader_id, epoch = document["leader"], document["epoch"]
    emit(args, {"brokerId": leader_id, "epoch": epoch}, f"{leader_id or '-'} (epoch {epoch})")
    return 0


async def _healthcheck(admin: AdminTransport, args: argparse.Namespace) -> int:
    """pulsar-admin's ``CmdBrokers`` ``healthcheck``: ``ok``, or the reason, exit 2."""
    await admin.healthcheck()
    emit(args, {"status": "ok"}, "ok")
    return 0


async def _load_report(admin: AdminTransport, args: argparse.Namespace) -> int:
    """pulsar-admin's ``CmdBrokerStats`` ``load-report``: Pulsar's ``LocalBrokerData``, camelCase,
    as ``/admin/v2/broker-stats/load-report`` answers it, for any registered broker."""
    rows = (await admin.brokers())["brokers"]
    if args.broker is not None:
        [broker] = await broker_ids(admin, [args.broker], "broker")
    elif rows:
        broker = rows[0]["broker"]
    else:
        raise Unavailable("no broker is registered")
    report = await admin.load_report(broker)  # an unregistered broker is named
    row = next((r for r in rows if r["broker"] == broker), None)
    if row is None:
        raise UnknownBroker(f"broker {broker!r} is not registered", value=broker)
    emit_object(args, local_broker_data(report, row["url"], row.get("version", "")))
    return 0
