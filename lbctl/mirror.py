"""``lbctl attach URL``: mirror a running Apache Pulsar cluster into a state directory's log.

    lbctl attach http://127.0.0.1:8080 [--state-dir DIR] [--minutes N] [--pulsar-cluster NAME]
                 [--manager extensible|modular] [--poll-s S] [--web-service-port PORT] [--plain]

URL is Pulsar's web service (default: client.conf's ``webServiceUrl``); ``lbctl``'s
``--auth-plugin``/``--auth-params``/``--client-conf`` give pulsar-admin's token auth. It runs
until Ctrl-C/SIGTERM or ``--minutes``, printing one live line (records, brokers, bundles owned,
lag behind Pulsar); every verb works on DIR meanwhile and afterwards (docs/pulsar.md).

Invariants: bad input (no URL, a non-positive ``--minutes``, a bad port, a state directory that
holds another kind of cluster) is one line and exit status 2 before anything is read; an
unreachable Pulsar at start is ``Unavailable`` (exit 2); a stop commits everything read and exits
0; ``attach(args, http, hooks=...)`` is the loop other modes build on: each hook is called after
every cycle with the ``attach.mirror.Cycle``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import signal
import sys
import time
from collections.abc import Sequence

from actors.cluster.kept import read_spec, state_dir, write_spec
from attach.mirror import Cycle, CycleHook, Mirror, status_line
from attach.source import EXTENSIBLE, MODULAR, PulsarSource
from balancer.errors import MalformedInput
from lbctl import numargs, steer
from lbctl.admin_http import AdminHttp, endpoint
from lbctl.settings import settings_of

LINE_EVERY_S = 1.0
PLAIN_EVERY_S = 10.0

DESCRIPTION = """\
Mirror a running Apache Pulsar cluster (URL: its web service, http://host:port) into the
embedded log of --state-dir, continuously, as the project's own events: brokers joining and
leaving, the leader, every load report, every namespace and bundle, every ownership transition
and split, each stamped with Pulsar's time and carrying where it came from (topic and message
id, or REST path). It catches up from the beginning of Pulsar's ownership channel, resumes
where it stopped after a restart, and names every message it cannot translate
(SourceMessageRejected). Runs until Ctrl-C/SIGTERM or --minutes. Meanwhile and afterwards,
every verb works on the state directory: namespaces bundles, brokers list, topics lookup,
explain, log, replay audit|timeline|whatif, and the dashboard (--web-service-port)."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("attach", help="mirror a running Pulsar cluster into a state directory",
                            description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", nargs="?", default=None, metavar="URL",
                        help="Pulsar's web service URL (default: client.conf's webServiceUrl)")
    parser.add_argument("--state-dir", default=None,
                        help="where the mirror's log goes (default: $LBCTL_STATE_DIR or .lbctl)")
    parser.add_argument("--minutes", type=numargs.POSITIVE, default=None, help="stop after this many minutes")
    parser.add_argument("--pulsar-cluster", default=None, metavar="NAME",
                        help="the Pulsar cluster's name (default: the first of /admin/v2/clusters)")
    parser.add_argument("--manager", choices=(EXTENSIBLE, MODULAR), default=None,
                        help="Pulsar's load manager (default: asked of Pulsar)")
    parser.add_argument("--poll-s", type=numargs.POSITIVE, default=1.0,
                        help="seconds between REST polls (brokers, leader; the modular manager's "
                             "ownership and load reports)")
    parser.add_argument("--web-service-port", type=numargs.PORT, default=None, metavar="PORT",
                        help="serve the dashboard, /metrics and the read side of the admin API for "
                             "the mirror on 127.0.0.1:PORT (0: a free port)")
    parser.add_argument("--plain", action="store_true", help="a progress line every 10 s even on a terminal")
    steer.add_arguments(parser)
    parser.set_defaults(handler=_handle)


def check(args: argparse.Namespace) -> AdminHttp:
    """The Pulsar to attach to; every bad argument is one line, before anything is read."""
    http = endpoint(args.url, getattr(args, "auth_plugin", None), getattr(args, "auth_params", None),
                    getattr(args, "client_conf", None))
    if http is None:
        raise MalformedInput("attach: give Pulsar's web service URL (http://host:port), or a "
                             "client.conf with webServiceUrl (--client-conf)", value=None)
    if args.minutes is not None and args.minutes <= 0:
        raise MalformedInput(f"--minutes {args.minutes:g}: must be positive", value=args.minutes)
    if args.poll_s <= 0:
        raise MalformedInput(f"--poll-s {args.poll_s:g}: must be positive", value=args.poll_s)
    port = args.web_service_port
    if port is not None and not 0 <= port <= 65535:
        raise MalformedInput(f"--web-service-port {port}: expected a port number 0-65535", value=port)
    return http


def _handle(args: argparse.Namespace) -> int:
    http = check(args)
    hook = steer.prepare(args, http)  # advise or drive: refused here, before anything is read
    return asyncio.run(attach(args, http, [] if hook is None else [hook]))


async def attach(args: argparse.Namespace, http: AdminHttp, hooks: Sequence[CycleHook] = ()) -> int:
    """Run the mirror as the verb does, with ``hooks`` after every cycle (other modes)."""
    directory = state_dir(args.state_dir)
    mirror = Mirror(directory, PulsarSource(http), poll_s=args.poll_s, cluster_name=args.pulsar_cluster,
                    manager=args.manager)
    await mirror.open()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    service = None
    try:
        print(f"attached to {mirror.source.url} (cluster {mirror.source.cluster}, {mirror.manager} load "
              f"manager); mirroring into {directory}/log (held {mirror.status.started[0]} records)", flush=True)
        if args.web_service_port is not None:
            service = await _serve(mirror, args.web_service_port, next(iter(hooks), None), args)
        printer = _Printer(mirror, plain=args.plain or not sys.stdout.isatty())
        await mirror.run(stop=stop, minutes=args.minutes, on_cycle=_chain([*hooks, printer]))
        printer.done()
        for hook in hooks:
            close = getattr(hook, "close", None)
            if close is not None:
                await close()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        if service is not None:
            await service.close()
            with contextlib.suppress(Exception):
                write_spec(directory, dataclasses.replace(read_spec(directory), web_service_url=None))
        await mirror.close()
    print(f"stopped: {status_line(mirror.status, mirror)}", flush=True)
    return 0


async def _serve(mirror: Mirror, port: int, hook: CycleHook | None,  # type: ignore[no-untyped-def]
                 args: argparse.Namespace):
    """The web service of the mirror; with an advise or drive hook, its pause, resume and
    status are that hook's (the hook records them through the mirror's writer). ``--conf``'s
    broker.conf auth keys apply as on ``lbctl run``: a pause then needs a super-user's token."""
    from actors.api import Cluster
    from actors.cluster.mirror_link import MirrorLink, Steered
    from web.serve import serve
    from web.settings import WebSettings

    assert mirror.view is not None
    steered = hook if isinstance(hook, Steered) else None
    cluster = Cluster(MirrorLink(mirror.view, url=mirror.source.url, owns_view=False, steered=steered))
    web = WebSettings.from_pairs(settings_of(args).pairs)
    service = await serve(cluster, port, cluster_name=mirror.source.cluster, auth=web.auth, limits=web.limits)
    write_spec(mirror.state_dir, dataclasses.replace(read_spec(mirror.state_dir), web_service_url=service.url))
    print(f"web service: {service.url} (the dashboard of the mirror)", flush=True)
    return service


def _chain(hooks: Sequence[CycleHook]) -> CycleHook:
    async def every(cycle: Cycle) -> None:
        for hook in hooks:
            done = hook(cycle)
            if done is not None:
                await done

    return every


class _Printer:
    """The live line: rewritten in place on a terminal, a plain line every 10 s otherwise."""

    def __init__(self, mirror: Mirror, *, plain: bool) -> None:
        self.mirror, self.plain = mirror, plain
        self.every = PLAIN_EVERY_S if plain else LINE_EVERY_S
        self.next = 0.0

    def __call__(self, cycle: Cycle) -> None:
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + self.every
        line = status_line(self.mirror.status, self.mirror)
        if self.plain:
            print(line, flush=True)
        else:
            print(f"\r\033[K{line}", end="", flush=True)

    def done(self) -> None:
        if not self.plain:
            print(flush=True)
