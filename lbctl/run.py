"""``lbctl run``: start a cluster, create a namespace, drive a synthetic workload, watch, summarise.

    lbctl run [--conf conf/broker.conf] [--brokers 3] [--workload zipf --topics 2000]
              [--minutes 60] [--speed 60] [--host ray|inproc] [--seed 0] [--keep]
              [--web-service-port PORT] [--plot FILE]

``--minutes`` is simulated time; ``--speed`` is simulated seconds per wall second (60: a
simulated hour takes a wall minute; 0: as fast as the host can). With the defaults the run ends
by itself after about a minute and exits 0.

Invariants:
- the summary is computed from the log only (``RunStats`` over every record of the run) and
  the memory line from ``/proc`` (``MemorySampler`` over this process and all its descendants);
- the run ends when ``--minutes`` of cluster time have passed since the namespace was created;
  the cluster is then closed, unless ``--keep``: ``cluster.json`` goes to ``--state-dir`` so the
  admin verbs can find it (inproc: the log stays there, read verbs answer from it and a verb
  that sends a command restarts the cluster from it; Ray: this process keeps the cluster alive
  until interrupted, its workload and cluster time still running at ``--speed``, as a real
  cluster's clients would);
- inproc with ``--keep``: ``cluster.json`` is written before the cluster's first record, so a
  run killed at any moment leaves a cluster the verbs reopen; a ``run --keep`` on a state
  directory that keeps one resumes it (its recorded shape; differing flags are named);
- with ``--web-service-port`` (else broker.conf's ``webServicePort``) the web service
  (``web.serve``: Pulsar's admin REST API) listens on 127.0.0.1 from when the cluster is ready
  until the cluster closes; with ``--keep`` the process, the cluster and the service stay up
  until SIGINT/SIGTERM on either host (inproc: cluster time keeps running at ``--speed``, at
  the wall clock's pace for ``--speed 0``);
- bad input (a missing ``--conf``, an unknown broker.conf key, a non-positive count, a bad port
  or auth setting) is one line and exit status 2, before any cluster starts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib.util
import signal
import sys
import textwrap
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.api import Cluster
from actors.cluster.kept import (
    FINDING_HELP,
    HOSTS,
    LOG_SUBDIR,
    STATE_FILE,
    ClusterSpec,
    open_kept,
    read_spec,
    state_dir,
    write_spec,
)
from actors.cluster_conf import ClusterConf
from actors.conf import Settings, load_settings
from balancer.bundles import validate_namespace
from balancer.config import LoadBalancerConfig
from balancer.errors import MalformedInput
from lbctl import numargs
from lbctl.procmem import MemorySampler
from lbctl.run_plot import check_plot_path, write_plot
from lbctl.run_view import BrokerLine, Frame, Pace, PlainView, RichView, View
from lbctl.runstats import RunStats
from lbctl.summary import summary
from projections.moves import Move

if TYPE_CHECKING:  # aiohttp is imported only when a run serves the web API
    from web.serve import WebService
    from web.settings import WebSettings

DEFAULT_CONF = "conf/broker.conf"
FRAME_S = 0.25
FAST_STEP_MS = 10_000
READY_S = 120.0
"""How long the brokers have to register and a leader to be elected (the host's own clock)."""


DESCRIPTION = """\
Start a cluster (--host ray: a local Ray and the embedded log; inproc: this process on a
virtual clock), create a namespace, drive a Zipf workload for --minutes of simulated time at
--speed (simulated seconds per wall second; 60: a simulated hour per wall minute; 0: as fast as
possible, inproc only), show a live view (brokers with load bars, bundle moves with their
reason, the leader epoch; plain progress lines when stdout is not a terminal), then print a
summary: balance, moves by reason, unloads/h and the peak memory of all its processes.
With the defaults it ends by itself after about a minute and exits 0.

--keep leaves the cluster to the admin verbs (lbctl namespaces|clusters|topics|brokers|
broker-stats ...); on Ray the process stays up and the workload keeps running at --speed
until Ctrl-C.

--web-service-port PORT (or webServicePort in broker.conf) serves Pulsar's admin REST API
(/admin/v2, /lookup/v2; docs/admin-api.md) on 127.0.0.1:PORT while the cluster runs; with
--keep the process and the service stay up until Ctrl-C/SIGTERM, on inproc as on Ray."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("run", help="run a cluster with a synthetic workload, live view and summary",
                            description=DESCRIPTION, epilog=textwrap.fill(FINDING_HELP, 92),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conf", default=None,
                        help=f"broker.conf (default: {DEFAULT_CONF} if present, else Pulsar's defaults)")
    parser.add_argument("--brokers", type=numargs.COUNT, default=3, help="number of brokers")
    parser.add_argument("--workload", choices=("zipf",), default="zipf",
                        help="zipf: topics whose rates follow Zipf(1.1)")
    parser.add_argument("--topics", type=numargs.COUNT, default=2000, help="topics in the namespace")
    parser.add_argument("--rate", type=numargs.NON_NEGATIVE, default=120_000.0, help="total msg/s published")
    parser.add_argument("--namespace", default="public/default", help="the namespace to create")
    parser.add_argument("--bundles", type=numargs.COUNT, default=16, help="its initial bundles")
    parser.add_argument("--minutes", type=numargs.POSITIVE, default=60.0, help="simulated minutes to run")
    parser.add_argument("--speed", type=numargs.NON_NEGATIVE, default=60.0,
                        help="simulated seconds per wall second (0: as fast as possible)")
    parser.add_argument("--host", choices=HOSTS, default=default_host(),
                        help=f"ray: actors on a local Ray; inproc: one process, virtual clock "
                             f"(default: {default_host()})")
    parser.add_argument("--seed", type=numargs.NATURAL, default=0, help="seed of the workload and the bodies")
    parser.add_argument("--keep", action="store_true",
                        help="keep the cluster for the admin verbs (writes --state-dir/cluster.json); "
                             "on Ray its workload keeps running at --speed until Ctrl-C")
    parser.add_argument("--state-dir", default=None, help="where --keep records the cluster "
                        "(default: $LBCTL_STATE_DIR or .lbctl)")
    parser.add_argument("--snapshot-dir", default=None, metavar="DIR",
                        help="with --cluster (Kafka): where the actors keep their snapshots on "
                             "each node (default: the file's ray.snapshot_dir, else "
                             "~/.local/state/bundle-balancer)")
    parser.add_argument("--plain", action="store_true", help="progress lines even on a terminal")
    parser.add_argument("--plot", default=None, metavar="FILE",
                        help="write the balance over time (each broker's load, the moves, "
                             "max/mean) to FILE (.png, .svg or .pdf) when the run ends")
    parser.add_argument("--web-service-port", type=numargs.PORT, default=None, metavar="PORT",
                        help="serve Pulsar's admin REST API on 127.0.0.1:PORT (0: a free port; "
                             "default: broker.conf's webServicePort, else none)")
    parser.set_defaults(handler=_handle)


def default_host() -> str:
    """Ray when it is installed, else the in-process host (looked up, not imported: building the
    parser must not import Ray)."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except ImportError:
        found = False
    return "ray" if found else "inproc"


def spec_from(args: argparse.Namespace) -> tuple[ClusterSpec, ClusterConf | None]:
    """The run's spec, and the deployment its ``--cluster`` file describes (read once, here)."""
    for name in ("brokers", "topics", "bundles"):
        if getattr(args, name) < 1:
            raise MalformedInput(f"--{name} {getattr(args, name)}: must be at least 1",
                                 value=getattr(args, name))
    for name in ("minutes", "rate", "speed"):
        if getattr(args, name) < 0 or (name == "minutes" and args.minutes == 0):
            raise MalformedInput(f"--{name} {getattr(args, name):g}: must be positive", value=getattr(args, name))
    validate_namespace(args.namespace)
    if args.host == "ray" and args.speed == 0:
        raise MalformedInput("--speed 0: Ray runs on the wall clock; give a factor above 0, or use "
                             "--host inproc for 'as fast as possible'", value=args.speed)
    deployment = getattr(args, "cluster_conf", None)
    found = None
    if deployment is not None:
        if args.host != "ray":
            raise MalformedInput(f"--cluster {deployment}: a deployment runs on Ray, not "
                                 f"--host {args.host}", value=args.host)
        found = ClusterConf.load(deployment)  # a bad file fails here, before anything starts
        deployment = str(Path(deployment).resolve())
        if args.conf is None and found.broker_conf is not None:
            args.conf = found.broker_conf
    elif getattr(args, "snapshot_dir", None) is not None:
        raise MalformedInput(f"--snapshot-dir {args.snapshot_dir}: only with --cluster (a Kafka log); an "
                             "embedded log keeps its snapshots in its own directory", value=args.snapshot_dir)
    conf = args.conf if args.conf is not None else (DEFAULT_CONF if Path(DEFAULT_CONF).is_file() else None)
    return ClusterSpec(host=args.host, brokers=args.brokers, conf=str(Path(conf).resolve()) if conf else None,
                       seed=args.seed, namespace=args.namespace, topics=args.topics, rate=args.rate,
                       speed=args.speed, deployment=deployment), found


def _handle(args: argparse.Namespace) -> int:
    spec, found = spec_from(args)
    if args.keep:
        spec = resumed(spec, state_dir(args.state_dir))
    # The process's one read of its settings files: every host and the web service get them.
    loaded = load_settings(spec.conf, deployment=found)
    settings = loaded
    if args.bundles > loaded.balancer.load_balancer_namespace_maximum_bundles:
        # The operator's own namespace, not admin input: the cap makes room for it (no auto-split
        # grows a namespace already at its cap, as before).
        settings = loaded.with_overrides({"loadBalancerNamespaceMaximumBundles": args.bundles})
    web = web_settings(settings, args.web_service_port)  # bad port or auth keys: before any start
    # Keys of other broker components ignored, deprecated ones named; the web service's own keys
    # are applied while it runs, so they are not counted then.
    notice = settings.notice(applied=web_applied_keys() if web.port is not None else ())
    if notice is not None:
        print(f"lbctl: {spec.conf}: {notice}", file=sys.stderr)
    if args.plot is not None:
        check_plot_path(args.plot)
    return asyncio.run(run(spec, Loaded(settings, loaded), args, web))


def web_applied_keys() -> frozenset[str]:
    from web.settings import APPLIED_KEYS

    return APPLIED_KEYS


def web_settings(settings: Settings, port: int | None) -> WebSettings:
    """broker.conf's web settings, the port overridden by ``--web-service-port``."""
    from web.settings import WebSettings

    found = WebSettings.from_pairs(settings.pairs)
    if port is not None:
        if not 0 <= port <= 65535:
            raise MalformedInput(f"--web-service-port {port}: expected a port number 0-65535", value=port)
        found = dataclasses.replace(found, port=port)
    return found


_SHAPE = ("brokers", "conf", "seed", "namespace", "topics", "rate")
"""What a kept cluster's spec fixes (its bodies, its workload): a resumed run keeps them."""


def resumed(spec: ClusterSpec, directory: Path) -> ClusterSpec:
    """``spec``, or the one recorded in ``directory`` when it keeps an in-process cluster (a
    finished or a killed ``run --keep``): that cluster is resumed, its shape as recorded (a flag
    that differs is named on stderr), at this run's ``--speed``."""
    if spec.host != "inproc" or not (directory / STATE_FILE).is_file():
        return spec
    recorded = read_spec(directory)
    if recorded.host != "inproc":
        return spec
    ignored = [f"--{name} {getattr(spec, name)}" for name in _SHAPE
               if getattr(spec, name) != getattr(recorded, name)]
    print(f"lbctl: resuming the cluster kept in {directory}"
          + (f" as recorded there ({', '.join(ignored)} ignored)" if ignored else ""), file=sys.stderr)
    return dataclasses.replace(recorded, speed=spec.speed, web_service_url=None)


@dataclasses.dataclass(frozen=True)
class Loaded:
    """The run's settings (``run``), and the files' own (``file``: a kept cluster resumes with
    them, as the verbs that restart it do; the run's may raise the bundle cap)."""

    run: Settings
    file: Settings

    @property
    def config(self) -> LoadBalancerConfig:
        return self.run.balancer


async def start_cluster(spec: ClusterSpec, settings: Loaded, keep_in: Path | None,
                        snapshot_dir: str | None = None) -> Cluster:
    options: dict[str, Any] = {"workload": spec.workload(), "clients": True, "seed": spec.seed}
    if spec.host == "inproc" and keep_in is not None and (keep_in / STATE_FILE).is_file():
        return Cluster(await open_kept(keep_in, settings.file))  # resumed from its log (``resumed``)
    if spec.host == "inproc":
        kept = keep_in / LOG_SUBDIR if keep_in is not None else None
        return await Cluster.start(settings.run, spec.brokers, host="inproc", log_dir=kept, **options)
    if settings.run.deployment is not None:  # its Kafka and its Ray cluster
        if snapshot_dir is not None:
            options["snapshot_dir"] = snapshot_dir
        return await Cluster.deploy(settings.run.deployment, spec.brokers, conf=settings.run, speed=spec.speed,
                                    **options)
    log_dir = str((keep_in / LOG_SUBDIR).resolve()) if keep_in is not None else None
    return await Cluster.start(settings.run, spec.brokers, log_dir=log_dir, speed=spec.speed, **options)


async def run(spec: ClusterSpec, settings: Loaded, args: argparse.Namespace,
              web: WebSettings) -> int:
    sampler = MemorySampler().start()
    wall0 = time.monotonic()
    keep_in = state_dir(args.state_dir) if args.keep else None
    config = settings.config
    cluster = await start_cluster(spec, settings, keep_in, getattr(args, "snapshot_dir", None))
    if keep_in is not None and cluster.kind == "inproc":
        # Before the first record: a run killed from here on leaves a cluster that the verbs
        # and `run` reopen from its log.
        write_spec(keep_in, cluster.describe(spec))
    service: WebService | None = None
    try:
        await cluster.wait_ready(spec.brokers, READY_S)
        if web.port is not None:
            from web.serve import serve

            service = await serve(cluster, web.port, host=web.bind_address, auth=web.auth, limits=web.limits,
                                  cluster_name=web.cluster_name, observe_settings=web.observe)
            print(f"web service: {service.url}", flush=True)
            spec = dataclasses.replace(spec, web_service_url=service.url)
        if spec.namespace not in cluster.view.ownership.namespaces:  # a resumed cluster may have it
            await cluster.create_namespace(spec.namespace, bundles=args.bundles)
        stats = RunStats(start_ms=cluster.now_ms())
        view: View = RichView() if sys.stdout.isatty() and not args.plain else PlainView()
        try:
            pace = await drive(cluster, stats, view, spec, int(args.minutes * 60_000))
        finally:
            view.close()
        print(summary(stats, spec, config, cluster, time.monotonic() - wall0, sampler.stop(),
                      bundles=args.bundles, pace=pace))
        if args.plot is not None:
            title = f"{spec.brokers} brokers on {spec.host}, {spec.namespace}, {spec.topics} topics"
            print(f"plot: {write_plot(stats, Path(args.plot), title)}", flush=True)
        if keep_in is not None:
            await keep(cluster, spec, keep_in)
    finally:
        if service is not None:
            await service.close()
        await cluster.close()
    return 0


async def drive(cluster: Cluster, stats: RunStats, view: View, spec: ClusterSpec, total_ms: int) -> Pace:
    """Let ``total_ms`` of cluster time pass, paced to ``spec.speed``, feeding the view; how
    cluster time kept up with the wall clock meanwhile (it runs slower on a host that cannot
    keep the speed, and the run takes longer)."""
    wall0 = next_frame = time.monotonic()
    recent: deque[Move] = deque(maxlen=10)
    while True:
        fresh = stats.fold(cluster.poll())
        recent.extend(fresh)
        elapsed = stats.tick(cluster.now_ms())
        stats.sample()
        shown = frame(cluster, stats, spec, elapsed, total_ms, time.monotonic() - wall0, recent)
        view.update(shown, fresh)
        if elapsed >= total_ms:
            stats.end(total_ms)
            return shown.pace()
        step = FAST_STEP_MS if spec.speed <= 0 else max(1, int(FRAME_S * 1000 * spec.speed))
        await cluster.sleep(min(step, total_ms - elapsed))
        if spec.speed > 0:
            next_frame += FRAME_S
            wait = next_frame - time.monotonic()
            if not cluster.virtual:  # a clock that fell behind: wake when the run's time is up
                wait = min(wait, (total_ms - stats.tick(cluster.now_ms())) / 1000 / spec.speed)
            await asyncio.sleep(max(0.0, wait))
        else:
            await asyncio.sleep(0)  # as fast as possible, yet the web service answers meanwhile


def frame(cluster: Cluster, stats: RunStats, spec: ClusterSpec, elapsed: int, total: int,
          wall_s: float, recent: deque[Move]) -> Frame:
    counts: dict[str, int] = {}
    for owner in cluster.ownership().owners().values():
        counts[owner] = counts.get(owner, 0) + 1
    lines = [BrokerLine(b, stats.loads.get(b), counts.get(b, 0), stats.msg_rates.get(b, 0.0))
             for b in sorted(cluster.view.brokers)]
    leader, epoch = cluster.leader()
    return Frame(spec.host, spec.namespace, min(elapsed, total), total, wall_s, spec.speed, leader,
                 epoch, lines, list(recent), stats.start_ms, len(stats.moves), list(stats.expiries))


async def keep(cluster: Cluster, spec: ClusterSpec, directory: Path) -> None:
    path = write_spec(directory, cluster.describe(spec))
    hint = f"lbctl namespaces bundles {spec.namespace} --state-dir {directory}"
    if spec.deployment is not None:
        hint = f"lbctl --cluster {spec.deployment} namespaces bundles {spec.namespace}"
    if spec.web_service_url is not None:
        hint = f"lbctl --admin-url {spec.web_service_url} namespaces bundles {spec.namespace}"
    if cluster.kind == "inproc" and spec.web_service_url is None:
        print(f"kept: {path} (the log is in {directory}/log); try `{hint}`")
        return
    print(f"kept: {path}; the cluster and its workload keep running (at --speed {spec.speed:g}) "
          f"until this process is interrupted (Ctrl-C). "
          f"Try `{hint}`", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):  # also when started with SIGINT ignored (&)
        loop.add_signal_handler(signum, stop.set)
    try:
        if cluster.virtual:
            await run_clock(cluster, spec, stop)
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        if cluster.virtual:  # its log stays for the verbs to restart it; the service is gone
            write_spec(directory, dataclasses.replace(cluster.describe(spec), web_service_url=None))
        else:
            path.unlink(missing_ok=True)  # a Ray-hosted cluster goes with this process
        print("stopping the cluster", flush=True)


async def run_clock(cluster: Cluster, spec: ClusterSpec, stop: asyncio.Event) -> None:
    """Let an in-process cluster's time pass at ``--speed`` (0: the wall clock's pace) until
    ``stop``, as a Ray-hosted one's does by itself; what it folds is not kept (nobody polls)."""
    step_ms = int(FRAME_S * 1000 * (spec.speed or 1.0))
    while not stop.is_set():
        await cluster.sleep(step_ms)
        cluster.poll()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), FRAME_S)
