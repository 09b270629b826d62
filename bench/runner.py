"""The whole benchmark suite (docs/spec/bench.md): every bench module, one combined result.

Each module runs in its own process (``python -m bench.X [--quick]``), so Ray, the Kafka client
and Spark never share an interpreter and a crash or a hang costs one table, not the run. The
runner reads back the JSON the module wrote (``--json PATH`` or its fixed results file) and
its printed table, and writes one timestamped file, ``bench/results/run-<UTC>.json``.

Invariants:
- a module that is not installed (``bench.replay`` until the Spark work lands) is reported as
  "not run (module missing)", never as a failure; a module that exits non-zero, times out or
  leaves no fresh JSON is "failed" with its last stderr lines;
- a fixed results file counts only if the module rewrote it during this run (a stale file from
  an earlier run is never reported as this run's figures);
- the header states the machine (cores, memory) and versions (python, ray, aiokafka, pyspark,
  kafka) without importing Ray or Spark (package metadata only);
- ``compare`` matches rows by their identity (id plus scenario/strategy/size fields) and shows
  the change of each headline figure; rows present in only one run are listed as such.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
NOT_RUN_MISSING = "not run (module missing)"


@dataclass(frozen=True)
class Module:
    """One bench module: its tables, how it is started and where its JSON lands."""

    name: str  # importable module, e.g. "bench.eventlog"
    ids: tuple[str, ...]  # the tables it produces
    what: str
    json_flag: bool = True  # True: pass ``--json PATH``; False: it writes ``result_file``
    result_file: str | None = None  # relative to the repository root
    timeout_quick_s: float = 170.0
    timeout_full_s: float = 1500.0
    on_request: bool = False  # run only when ``--only`` names one of its tables


SUITE: tuple[Module, ...] = (
    Module("bench.eventlog", ("A1", "A3", "A4"), "event log: codec, Kafka, embedded",
           json_flag=False, result_file="bench/results/eventlog.json"),
    Module("bench.projection", ("A2",), "ownership projection fold"),
    Module("bench.cluster_latency", ("A5", "A6", "A7", "A8"), "live system on Ray (+ Kafka)",
           json_flag=False, result_file="bench/results/live.json"),
    Module("bench.leader_cycle", ("A9",), "one leader cycle, 10..1000 brokers"),
    Module("bench.proposal_cost", ("O3",), "a proposal's cost vs a plain shedding cycle"),
    Module("bench.replay", ("A10", "A11"), "Spark audit and what-if sweep",
           json_flag=False, result_file="bench/results/replay.json"),
    Module("bench.quality", ("B",), "balancing quality, every scenario x strategy"),
    Module("bench.scale", ("S1", "S2", "S3", "S4", "S5"), "the live system at scale, inproc",
           timeout_quick_s=300.0, timeout_full_s=3000.0),
    Module("bench.drain", ("O1", "O2"), "drains and the throttle: rolling restart, scale-out, inproc",
           timeout_quick_s=900.0, timeout_full_s=14_400.0, on_request=True),
    Module("bench.report_traffic", ("S6",), "load report traffic in a steady run, inproc",
           timeout_quick_s=300.0, timeout_full_s=1500.0),
    Module("bench.scale_ray", ("S1r",), "cold start on Ray with real Kafka",
           timeout_quick_s=600.0, timeout_full_s=3600.0, on_request=True),
    Module("bench.scale_ray_nodes", ("S1r-50", "S2r-50"), "50 brokers on 2 Ray nodes with real Kafka: "
           "cold start, full restart, peak memory", timeout_quick_s=900.0, timeout_full_s=3600.0, on_request=True),
    Module("bench.pulsar_drive", ("P3",), "drive mode on a real Pulsar: decision to Owned",
           timeout_quick_s=600.0, timeout_full_s=1500.0, on_request=True),
)
ALL_IDS = tuple(i for m in SUITE for i in m.ids)


@dataclass
class Outcome:
    """What one module's run gave: status ok | failed | missing | skipped."""

    module: str
    ids: tuple[str, ...]
    status: str
    seconds: float = 0.0
    output: str = ""
    error: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"module": self.module, "ids": list(self.ids), "status": self.status,
                "seconds": round(self.seconds, 2), "output": self.output, "error": self.error,
                "data": self.data}


# -- selection ------------------------------------------------------------------------------
def select(suite: Sequence[Module], only: str | None) -> list[Module]:
    """The modules producing any table of ``only`` ("A1,B"; case-insensitive); all if None but
    those run on request only (S1r: a Ray cluster over Kafka at 65,536 bundles)."""
    if not only:
        return [m for m in suite if not m.on_request]
    wanted = {part.strip().upper() for part in only.split(",") if part.strip()}
    known = {i.upper() for m in suite for i in m.ids}
    unknown = sorted(wanted - known)
    if unknown:
        raise ValueError(f"unknown table {unknown[0]!r}; known: {', '.join(i for m in suite for i in m.ids)}")
    return [m for m in suite if wanted & {i.upper() for i in m.ids}]


# -- machine and versions -------------------------------------------------------------------
def _package_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def kafka_version() -> str:
    """From the broker jar the bench modules would start (``kafka_2.13-X.jar``); external if given."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return f"external ({os.environ['KAFKA_BOOTSTRAP_SERVERS']})"
    libs = Path(os.environ.get("KAFKA_LIBS") or ROOT / ".cache" / "kafka-libs")
    jars = sorted(libs.glob("kafka_2.*-*.jar")) if libs.is_dir() else []
    if not jars:
        return "no jars"
    return jars[-1].stem.split("-", 1)[1]


def machine() -> dict[str, Any]:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cores": os.cpu_count(), "memory_gib": round(memory, 1),
            "platform": platform.platform(terse=True)}


def versions() -> dict[str, str]:
    return {"python": platform.python_version(), "ray": _package_version("ray"),
            "aiokafka": _package_version("aiokafka"), "pyspark": _package_version("pyspark"),
            "kafka": kafka_version()}


def header(info: Mapping[str, Any], vers: Mapping[str, str], quick: bool, started: str) -> str:
    return (f"bundle-balancer bench{' --quick' if quick else ''}, {started}\n"
            f"machine: {info['cores']} cores, {info['memory_gib']} GiB, {info['platform']}\n"
            f"versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()))


# -- running one module ---------------------------------------------------------------------
def is_installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def run_module(module: Module, quick: bool, env: Mapping[str, str], root: Path = ROOT) -> Outcome:
    """Run one module in a child process and read back its JSON."""
    if not is_installed(module.name):
        return Outcome(module.name, module.ids, "missing", error=NOT_RUN_MISSING)
    with tempfile.TemporaryDirectory(prefix="lbctl-bench-") as tmp:
        target = Path(tmp) / "out.json" if module.json_flag else root / str(module.result_file)
        before = target.stat().st_mtime_ns if target.exists() else None
        argv = [sys.executable, "-m", module.name, *(["--quick"] if quick else [])]
        if module.json_flag:
            argv += ["--json", str(target)]
        started = time.perf_counter()
        try:
            done = subprocess.run(argv, cwd=root, env=dict(env), capture_output=True, text=True,
                                  timeout=module.timeout_quick_s if quick else module.timeout_full_s)
        except subprocess.TimeoutExpired as exc:
            return Outcome(module.name, module.ids, "failed", time.perf_counter() - started,
                           _text(exc.stdout), f"timed out after {exc.timeout:.0f} s")
        seconds = time.perf_counter() - started
        fresh = target.exists() and target.stat().st_mtime_ns != before
        if done.returncode != 0 or not fresh:
            why = f"exit status {done.returncode}" if done.returncode else "it wrote no result JSON"
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            return Outcome(module.name, module.ids, "failed", seconds, done.stdout,
                           f"{why}{': ' + tail if tail else ''}")
        data = json.loads(target.read_text(encoding="utf-8"))
    return Outcome(module.name, module.ids, "ok", seconds, done.stdout, data=data)


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def child_env(extra_path: Sequence[str] = ()) -> dict[str, str]:
    """The children's environment: this one, with the repository (and extras) on PYTHONPATH."""
    env = dict(os.environ)
    paths = [*extra_path, str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


@contextmanager
def shared_kafka(modules: Sequence[Module], env: dict[str, str]) -> Iterator[None]:
    """One Kafka for every module that needs one (A3, A7, S1r, S1r-50), started from the jars as the modules
    would, so it starts once; nothing is started when one is configured or none is needed."""
    needs = any({"A3", "A7", "S1r", "S1r-50"} & set(m.ids) for m in modules)
    if not needs or env.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield
        return
    from bench.eventlog import kafka_servers

    with kafka_servers(None) as servers:
        if servers:
            env["KAFKA_BOOTSTRAP_SERVERS"] = servers
        yield


# -- the whole run --------------------------------------------------------------------------
Listener = Callable[[Module, Outcome | None], None]
"""Called with (module, None) when a module starts and (module, outcome) when it ends."""


def run_suite(modules: Sequence[Module], quick: bool, *, listener: Listener | None = None,
              env: dict[str, str] | None = None, start_kafka: bool = True,
              root: Path = ROOT) -> dict[str, Any]:
    """Run the modules in order; the combined, JSON-ready record of the run."""
    started = datetime.now(UTC)
    began = time.perf_counter()
    env = child_env() if env is None else env
    outcomes: list[Outcome] = []
    with shared_kafka(modules, env) if start_kafka else _nothing():
        for module in modules:
            if listener:
                listener(module, None)
            outcome = run_module(module, quick, env, root)
            outcomes.append(outcome)
            if listener:
                listener(module, outcome)
    return {"started": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "quick": quick,
            "machine": machine(), "versions": versions(),
            "seconds": round(time.perf_counter() - began, 1),
            "modules": [o.to_dict() for o in outcomes]}


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def write_run(record: Mapping[str, Any], directory: Path = RESULTS) -> Path:
    """``run-<UTC stamp>[-quick].json`` in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = str(record["started"]).replace("-", "").replace(":", "")
    path = directory / f"run-{stamp}{'-quick' if record.get('quick') else ''}.json"
    path.write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
    return path


def render_run(record: Mapping[str, Any]) -> str:
    """Header, every module's table as it printed it, and the status of each."""
    started = str(record["started"])
    lines = [header(record["machine"], record["versions"], bool(record["quick"]), started)]
    for module in record["modules"]:
        ids = " ".join(module["ids"])
        lines += ["", f"== {ids}  ({module['module']}, {module['status']}, {module['seconds']:.1f} s)"]
        if module["status"] == "missing":
            lines.append(f"{ids}: {NOT_RUN_MISSING}")
            continue
        lines.append(module["output"].rstrip())
        if module["error"]:
            lines.append(f"{ids}: {module['status']}: {module['error']}")
    lines += ["", f"total {record['seconds']:.1f} s"]
    return "\n".join(lines)
