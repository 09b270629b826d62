"""lbctl entry point: parses the verb and hands off to its module.

Invariants (the exit statuses the README lists): a usage error (a bad flag or number,
``lbctl.numargs``), any ``InvalidInput`` (and malformed JSON) or
``Unavailable`` prints one line naming the bad value or the unreachable part on stderr and exits
with status 2; other ``LoadBalancerError``s (a refused change) exit with status 1, as does a verb
that ran and found something wrong; anything else is a bug: its traceback and status 3; a closed
stdout pipe (``| head``) ends quietly with status 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import cast

from balancer.errors import InvalidInput, LoadBalancerError, Unavailable
from lbctl.numargs import LbctlParser

Handler = Callable[[argparse.Namespace], int]
Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def _registrars() -> list[Registrar]:
    # Each verb module adds its sub-parser; imported here so `lbctl --help` lists them all.
    from lbctl import decide

    registrars: list[Registrar] = [decide.register]
    for module_name in ("lbctl.admin", "lbctl.control", "lbctl.proposals", "lbctl.log", "lbctl.run", "lbctl.replay", "lbctl.sim", "lbctl.bench",
                        "lbctl.explain", "lbctl.conformance", "lbctl.kafka", "lbctl.tokens",
                        "lbctl.pulsar", "lbctl.mirror"):
        try:
            module = __import__(module_name, fromlist=["register"])
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        registrars.append(module.register)
    return registrars


def build_parser() -> argparse.ArgumentParser:
    parser = LbctlParser(
        prog="lbctl", description="bundle-balancer: Pulsar-style broker load balancing"
    )
    parser.add_argument("--cluster", dest="cluster_conf", metavar="CLUSTER_YAML",
                        default=os.environ.get("LBCTL_CLUSTER"),
                        help="a deployment's conf/cluster.yaml (Kafka + a Ray cluster): `run` starts "
                             "the actors there, the admin verbs attach to them (env LBCTL_CLUSTER)")
    rest = parser.add_argument_group("the admin REST API (pulsar-admin's options; docs/admin-api.md)")
    rest.add_argument("--admin-url", default=None, metavar="URL",
                      help="send the admin verbs to this web service (lbctl run --web-service-port) "
                           "instead of attaching to the cluster; default: client.conf's webServiceUrl")
    rest.add_argument("--auth-plugin", default=None,
                      help="org.apache.pulsar.client.impl.auth.AuthenticationToken (client.conf: authPlugin)")
    rest.add_argument("--auth-params", default=None,
                      help="token:<jwt> or file:///path/to/token (client.conf: authParams)")
    rest.add_argument("--client-conf", default=os.environ.get("PULSAR_CLIENT_CONF"), metavar="FILE",
                      help="a Pulsar client.conf: webServiceUrl, authPlugin, authParams "
                           "(env PULSAR_CLIENT_CONF)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    # Sub-parsers are made of the parser's class (LbctlParser), whatever the verbs' annotations say.
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               parser.add_subparsers(dest="verb", metavar="VERB"))
    sub.required = True
    for register in _registrars():
        register(sub)
    return parser


def _version() -> str:
    try:
        return version("bundle-balancer")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    # aiokafka logs each failed connection; lbctl says why in one line of its own (exit 2).
    logging.getLogger("aiokafka").addHandler(logging.NullHandler())
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except InvalidInput as exc:
        print(f"lbctl: error: {exc.message}", file=sys.stderr)
        return 2
    except Unavailable as exc:
        print(f"lbctl: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except LoadBalancerError as exc:
        print(f"lbctl: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lbctl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`lbctl ... | head`): not an error; silence the final flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception:
        traceback.print_exc()
        print("lbctl: internal error (a bug): the traceback above says where", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
