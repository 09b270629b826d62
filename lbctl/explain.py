"""``lbctl explain BUNDLE``: every move of one bundle from the log, with the decision behind it.

Reads the embedded log (``--log-dir``), Kafka (``--bootstrap``) like ``lbctl log``, or by
default the log of a kept cluster (``--state-dir``, default ``.lbctl``: its ``log`` folder), or
with ``lbctl --admin-url URL`` the web service's ``/bb/v1/explain``; only reads. Output: one block per move (``projections.explain.render``) or JSON lines with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio

from actors.cluster.kept import LOG_SUBDIR, state_dir
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


def _explain(args: argparse.Namespace) -> int:
    http = endpoint(getattr(args, "admin_url", None), getattr(args, "auth_plugin", None),
                    getattr(args, "auth_params", None), getattr(args, "client_conf", None))
    if http is not None:
        found = http.call("GET", f"/bb/v1/explain/{args.bundle}")["moves"]
        moves = [Move.from_dict(move) for move in found]
    else:
        moves = moves_of(args.bundle, asyncio.run(_read(args)))
    if args.json:
        for move in moves:
            print(to_json_value(move.to_dict()).decode())
    else:
        print(render(args.bundle, moves))
    return 0
