"""``lbctl explain BUNDLE``: every move of one bundle from the log, with the decision behind it.

Reads the embedded log (``--log-dir``), Kafka (``--bootstrap``) like ``lbctl log``, or by
default the log of a kept cluster (``--state-dir``, default ``.lbctl``: its ``log`` folder), or
with ``lbctl --admin-url URL`` the web service's ``/bb/v1/explain``; only reads. A bundle no record names is an ``UnknownBundle`` (exit 2), not an empty story. Output: one block per move (``projections.explain.render``) or JSON lines with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from collections.abc import Iterable
from typing import Any

from actors.cluster.kept import LOG_SUBDIR, state_dir
from balancer.bundles import BundleId, HashRange, format_bundle_id, namespace_of
from balancer.errors import UnknownBundle
from events.codec import to_json_value
from events.log.port import Record
from lbctl.admin_http import endpoint
from lbctl.log import open_log
from projections.explain import moves_of, render
from projections.moves import Move


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("explain", help="every move of a bundle, with the inputs and scores that decided it")
    parser.add_argument("bundle", metavar="BUNDLE", help="tenant/namespace/0xLLLLLLLL_0xUUUUUUUU")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--log-dir", help="an embedded log directory")
    source.add_argument("--bootstrap", help="Kafka bootstrap servers (host:port,...)")
    source.add_argument("--state-dir", default=None,
                        help="a kept cluster's state (default $LBCTL_STATE_DIR or .lbctl)")
    parser.add_argument("--cluster", default="lb", help="cluster name, the topic prefix (Kafka)")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of text")
    parser.set_defaults(handler=_explain, topic="events")


async def _read(args: argparse.Namespace) -> list[Record]:
    deployment = getattr(args, "cluster_conf", None)
    if args.log_dir is None and args.bootstrap is None and deployment is None:
        args.log_dir = str(state_dir(args.state_dir) / LOG_SUBDIR)
    log = open_log(args)  # lbctl --cluster FILE: the deployment's Kafka, with its security
    try:
        await log.start()
        return list((await log.read()).records)
    finally:
        await log.close()


def named_in(bundle: str, records: Iterable[Record]) -> bool:
    """Whether any record names ``bundle``: as a bundle, a split's parent or child, or one of a
    created namespace's initial bundles."""
    namespace = namespace_of(bundle)
    for record in records:
        payload = record.envelope.payload
        if bundle in (payload.get("bundle"), payload.get("parent")) \
                or bundle in (payload.get("children") or ()):
            return True
        if record.envelope.type == "NamespaceCreated" and payload.get("namespace") == namespace:
            edges = [int(b) for b in payload.get("boundaries") or ()]
            if any(format_bundle_id(namespace, HashRange(a, b)) == bundle
                   for a, b in itertools.pairwise(edges)):
                return True
    return False


def _unknown(bundle: str) -> UnknownBundle:
    return UnknownBundle(f"bundle {bundle!r} is in no record of the log (never created, assigned "
                         "or split off); `lbctl namespaces bundles NAMESPACE` lists the bundles",
                         value=bundle)


def _explain(args: argparse.Namespace) -> int:
    bundle = str(BundleId.parse(args.bundle))  # not a bundle id at all: named here (exit 2)
    http = endpoint(getattr(args, "admin_url", None), getattr(args, "auth_plugin", None),
                    getattr(args, "auth_params", None), getattr(args, "client_conf", None))
    if http is not None:
        found = http.call("GET", f"/bb/v1/explain/{bundle}")["moves"]
        moves = [Move.from_dict(move) for move in found]
        if not moves:  # the service lists no move: a bundle of the current layout, or none
            rows = http.call("GET", f"/bb/v1/namespaces/{namespace_of(bundle)}/bundles")
            if not any(f"{namespace_of(bundle)}/{row.get('range')}" == bundle
                       for row in _rows_of(rows)):
                raise _unknown(bundle)
    else:
        records = asyncio.run(_read(args))
        moves = moves_of(bundle, records)
        if not moves and not named_in(bundle, records):
            raise _unknown(bundle)
    if args.json:
        for move in moves:
            print(to_json_value(move.to_dict()).decode())
    else:
        print(render(bundle, moves))
    return 0


def _rows_of(document: Any) -> list[dict[str, Any]]:
    """The bundle rows of ``/bb/v1/namespaces/{ns}/bundles`` (a list, or under ``bundles``)."""
    rows = document.get("bundles", []) if isinstance(document, dict) else document
    return [row for row in rows or [] if isinstance(row, dict)]
