"""A real Apache Pulsar 4.0.7 cluster for the tests, run from Maven jars, all on 127.0.0.1.

`PulsarCluster` starts, each as its own JVM on `java -cp <PULSAR_SERVER_LIBS>/*` (jars from
`make pulsar-server-jars`, conf/pulsar-server/pom.xml; logging conf/pulsar-server/log4j2.xml, WARN,
to a file per process): ZooKeeper, the cluster metadata setup (once), one BookKeeper bookie and N
brokers with the extensible load manager (TransferShedder) or the modular one. Pulsar's own
single-JVM helpers (standalone's ZooKeeper and bookie) listen on every interface; separate JVMs
bind 127.0.0.1 only. docs/pulsar.md ("The test cluster") gives the ports, times and memory.

Invariants:
- Every port is chosen once per cluster (broker i keeps its ports across `kill_broker(i)` and
  `start_broker(i)`, so its id `127.0.0.1:<webServicePort>` stays the same); every data dir is a
  fresh temporary folder, removed by `close()` (env PULSAR_TEST_KEEP_DATA=1 keeps it, with logs).
- `start()` returns only when every broker answers `GET /admin/v2/brokers/{cluster}` listing all
  brokers, `GET /admin/v2/brokers/leaderBroker` names a leader and `GET /admin/v2/brokers/health`
  (a lookup, a produce and a consume) succeeds; otherwise it kills what it started and raises
  `PulsarStartError` with the tail of the failing process's logs.
- Every JVM runs in its own process group and is stopped with SIGKILL (a broker under the
  extensible manager takes ~40 s to stop gracefully; tests start from fresh dirs anyway).
  `close()` is idempotent, and after it (or at interpreter exit) no JVM of the cluster runs.
- Brokers decide nothing on their own unless asked: Pulsar's shedding and automatic bundle splits
  are off by default, so tests and the project's drive mode choose every move.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.kafka_server import free_ports
from tests.pulsar_conf import (
    FAST_START,
    HEAP,
    JVM_FLAGS,
    LOAD_MANAGERS,
    BrokerPorts,
    LoadManagerKind,
    bookie_conf,
    broker_conf,
    write_props,
    zookeeper_conf,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIBS = REPO_ROOT / ".cache" / "pulsar-server-libs"
LOG4J2_CONFIG = REPO_ROOT / "conf" / "pulsar-server" / "log4j2.xml"
START_TIMEOUT_S = 180.0
SETUP_TIMEOUT_S = 120.0

class PulsarStartError(RuntimeError):
    """The cluster could not be provisioned or did not become ready in time."""


def pulsar_server_libs() -> Path:
    """The folder of server jars (env PULSAR_SERVER_LIBS), checked to be non-empty."""
    libs = Path(os.environ.get("PULSAR_SERVER_LIBS") or DEFAULT_LIBS)
    if not libs.is_dir() or not any(libs.glob("pulsar-broker-*.jar")):
        raise PulsarStartError(
            f"no Pulsar server jars in {libs}: run `make pulsar-server-jars` (or set "
            "PULSAR_SERVER_LIBS to a folder holding pulsar-broker 4.0.x and its dependencies)"
        )
    return libs


def java_executable() -> str:
    """`$JAVA_HOME/bin/java` if set, else `java` on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        raise PulsarStartError("no `java` found (Pulsar 4.0 needs Java 17+); set JAVA_HOME")
    return java


def tail(path: Path, max_lines: int = 40) -> str:
    """The last lines of a text file, or a note that it does not exist."""
    if not path.exists():
        return f"<{path.name}: missing>"
    lines = path.read_text(errors="replace").splitlines()[-max_lines:]
    return "\n".join(lines) or f"<{path.name}: empty>"


def zk_command(port: int, word: str, timeout_s: float = 2.0) -> str:
    """ZooKeeper's answer to a four-letter word (`ruok`, `dump`), or "" if it does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def admin_call(base_url: str, method: str, path: str, body: Any = None,
               timeout_s: float = 15.0) -> tuple[int, Any]:
    """One admin REST call: (HTTP status, parsed JSON or text or None).

    Follows Pulsar's 307 (the bundle or topic is owned by another broker) for every method,
    which urllib does only for GET; never raises on an HTTP error status.
    """
    url = base_url.rstrip("/") + path
    data = None if body is None else json.dumps(body).encode()
    for _ in range(5):
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Content-Type": "application/json",
                                                  "Accept": "application/json"})
        try:
            with _NO_REDIRECTS.open(request, timeout=timeout_s) as response:
                return response.status, _parse(response.read())
        except urllib.error.HTTPError as err:
            location = err.headers.get("Location")
            if err.code in (301, 302, 307, 308) and location:
                url = urllib.parse.urljoin(url, location)
                continue
            return err.code, _parse(err.read())
    raise PulsarStartError(f"{method} {path}: more than 5 redirects (last {url})")


class _KeepRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_REDIRECTS = urllib.request.build_opener(_KeepRedirects())


def _parse(raw: bytes) -> Any:
    text = raw.decode(errors="replace")
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass
class Process:
    """One JVM of the cluster, in its own process group, logging into `home`."""

    name: str
    home: Path
    cmd: list[str]
    popen: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.home / f"{self.name}.log"

    @property
    def console(self) -> Path:
        return self.home / "console.log"

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def launch(self) -> None:
        with self.console.open("ab") as out:
            self.popen = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, cwd=self.home,
                                          start_new_session=True)

    def kill(self) -> None:
        """SIGKILL the process group and reap it; nothing if it is not running."""
        proc, self.popen = self.popen, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def logs(self) -> str:
        return (f"--- {self.name}: {self.console} (tail) ---\n{tail(self.console)}\n"
                f"--- {self.name}: {self.log} (tail) ---\n{tail(self.log)}")


class PulsarCluster:
    """ZooKeeper, one bookie and `brokers` brokers of one Pulsar cluster on 127.0.0.1.

    Usage: `with PulsarCluster(brokers=2) as c: use(c.web_urls, c.service_url, c.broker_ids)`.
    `load_manager`: "extensible" (ExtensibleLoadManagerImpl + TransferShedder) or "modular"
    (ModularLoadManagerImpl); `shedding`: Pulsar's own loadBalancerSheddingEnabled;
    `session_timeout_ms`: the metadata store session (a killed broker's bundles move after it);
    `overrides`: more broker.conf keys, applied last.
    """

    def __init__(self, brokers: int = 2, *, load_manager: LoadManagerKind = "extensible",
                 shedding: bool = False, overrides: dict[str, Any] | None = None,
                 session_timeout_ms: int = 8000, cluster_name: str = "test-cluster",
                 libs: Path | None = None) -> None:
        if load_manager not in LOAD_MANAGERS:
            raise ValueError(f"load_manager {load_manager!r}: one of {sorted(LOAD_MANAGERS)}")
        self.libs = libs or pulsar_server_libs()
        self.java = java_executable()
        self.load_manager = load_manager
        self.shedding = shedding
        self.overrides = dict(overrides or {})
        self.session_timeout_ms = session_timeout_ms
        self.cluster_name = cluster_name
        self.data_dir = Path(tempfile.mkdtemp(prefix="pulsar-test-"))
        self.zk_port, self.bookie_port = free_ports(2)
        self._ports: list[BrokerPorts] = []
        self._brokers: list[Process] = []
        self._others: list[Process] = []
        self.timings: dict[str, float] = {}
        """Seconds of each phase of the last `start()`: zookeeper, metadata, bookie, brokers, total."""
        for _ in range(brokers):
            self._add_broker()
        atexit.register(self.close)

    # --- what tests use ----------------------------------------------------------------

    @property
    def broker_ids(self) -> list[str]:
        """`127.0.0.1:<webServicePort>` of every broker, by index (killed ones included)."""
        return [ports.broker_id for ports in self._ports]

    @property
    def web_urls(self) -> list[str]:
        """`http://127.0.0.1:<webServicePort>` of every broker, by index (killed ones included)."""
        return [f"http://127.0.0.1:{ports.web}" for ports in self._ports]

    @property
    def service_urls(self) -> list[str]:
        return [f"pulsar://127.0.0.1:{ports.service}" for ports in self._ports]

    @property
    def alive(self) -> list[bool]:
        return [proc.running for proc in self._brokers]

    @property
    def web_url(self) -> str:
        """The web service of the first running broker."""
        return self.web_urls[self._first_alive()]

    @property
    def service_url(self) -> str:
        """`pulsar://` with every running broker (the client tries them in turn)."""
        hosts = [f"127.0.0.1:{p.service}" for p, up in zip(self._ports, self.alive, strict=True) if up]
        return "pulsar://" + ",".join(hosts or [f"127.0.0.1:{self._ports[0].service}"])

    @property
    def metadata_store_url(self) -> str:
        return f"zk:127.0.0.1:{self.zk_port}"

    @property
    def start_seconds(self) -> float:
        return self.timings.get("total", 0.0)

    def pids(self) -> dict[str, int]:
        """Name -> pid of every running JVM (zookeeper, bookie, broker-0, ...)."""
        return {p.name: p.popen.pid for p in [*self._others, *self._brokers]
                if p.running and p.popen is not None}

    def admin(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """`admin_call` on the first running broker (307s to the owner are followed)."""
        return admin_call(self.web_url, method, path, body)

    def log_of(self, name: str) -> str:
        """The tails of one process's logs (`zookeeper`, `bookie`, `broker-1`, ...)."""
        return next(p.logs() for p in [*self._others, *self._brokers] if p.name == name)

    def __enter__(self) -> PulsarCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """ZooKeeper, the metadata setup, the bookie, then every broker; see the invariants."""
        if self._others:
            raise PulsarStartError("start() once per PulsarCluster: use start_broker(i) after it")
        began = mark = time.monotonic()
        try:
            for phase, step in (("zookeeper", self._start_zookeeper),
                                ("metadata", self._setup_metadata),
                                ("bookie", self._start_bookie),
                                ("brokers", self._start_all_brokers)):
                step()
                now = time.monotonic()
                self.timings[phase], mark = now - mark, now
        except BaseException:
            self.kill_all()
            raise
        self.timings["total"] = time.monotonic() - began

    def kill_broker(self, index: int) -> None:
        """SIGKILL broker `index` (its ports and id stay reserved for `start_broker(index)`)."""
        self._brokers[index].kill()

    def start_broker(self, index: int | None = None) -> str:
        """Start broker `index` again (same ports and id), or a new one (`None` or the next
        index); returns its id once every running broker lists it and it knows the leader."""
        if index is None or index == len(self._brokers):
            index = self._add_broker()
        if self._brokers[index].running:
            raise PulsarStartError(f"broker {index} ({self.broker_ids[index]}) is running")
        self._brokers[index].launch()
        self._wait_brokers(time.monotonic() + START_TIMEOUT_S)
        return self.broker_ids[index]

    def kill_all(self) -> None:
        """SIGKILL every JVM of the cluster (brokers first); the data dirs stay."""
        for proc in [*self._brokers, *reversed(self._others)]:
            proc.kill()

    def close(self) -> None:
        """Kill everything and remove the data dirs; idempotent."""
        self.kill_all()
        atexit.unregister(self.close)
        if not os.environ.get("PULSAR_TEST_KEEP_DATA"):
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # --- internals ---------------------------------------------------------------------

    def _first_alive(self) -> int:
        return next((i for i, up in enumerate(self.alive) if up), 0)

    def _add_broker(self) -> int:
        web, service = free_ports(2)
        self._ports.append(BrokerPorts(web=web, service=service))
        index = len(self._brokers)
        home = self._home(f"broker-{index}")
        conf = home / "broker.conf"
        write_props(conf, self._broker_conf(self._ports[index]))
        self._brokers.append(self._process(
            f"broker-{index}", "broker", "org.apache.pulsar.PulsarBrokerStarter",
            "--broker-conf", str(conf)))
        return index

    def _home(self, name: str) -> Path:
        home = self.data_dir / name
        home.mkdir(parents=True, exist_ok=True)
        return home

    def _process(self, name: str, role: str, main_class: str, *args: str) -> Process:
        home = self._home(name)
        jvm = os.environ.get("PULSAR_TEST_JVM_OPTS", "").split() or [*HEAP[role], *FAST_START]
        cmd = [self.java, *jvm, *JVM_FLAGS,
               f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}", "-Dlog4j.shutdownHookEnabled=false",
               f"-Dpulsar.log.dir={home}", f"-Dpulsar.log.file={name}.log",
               "-cp", f"{self.libs}/*", main_class, *args]
        return Process(name=name, home=home, cmd=cmd)

    def _fail(self, proc: Process, why: str) -> None:
        logs = proc.logs()
        self.kill_all()
        raise PulsarStartError(f"Pulsar test cluster ({self.data_dir}): {proc.name}: {why}\n{logs}")

    def _start_zookeeper(self) -> None:
        home = self._home("zookeeper")
        conf = home / "zoo.cfg"
        write_props(conf, zookeeper_conf(self.zk_port, home))
        proc = self._process("zookeeper", "zookeeper",
                             "org.apache.zookeeper.server.ZooKeeperServerMain", str(conf))
        self._others.append(proc)
        proc.launch()
        self._wait(proc, lambda: zk_command(self.zk_port, "ruok") == "imok", 60.0,
                   "ZooKeeper does not answer `ruok`")

    def _setup_metadata(self) -> None:
        first = self._ports[0]
        proc = self._process(
            "metadata-setup", "setup", "org.apache.pulsar.PulsarClusterMetadataSetup",
            "--cluster", self.cluster_name,
            "--metadata-store", self.metadata_store_url,
            "--configuration-metadata-store", self.metadata_store_url,
            "--web-service-url", f"http://127.0.0.1:{first.web}",
            "--broker-service-url", f"pulsar://127.0.0.1:{first.service}",
            "--initial-num-stream-storage-containers", "0",
            "--initial-num-transaction-coordinators", "1")  # fmt: skip
        proc.launch()
        assert proc.popen is not None
        try:
            code = proc.popen.wait(timeout=SETUP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._others.append(proc)
            self._fail(proc, f"PulsarClusterMetadataSetup still running after {SETUP_TIMEOUT_S:.0f}s")
        if code != 0:
            self._fail(proc, f"PulsarClusterMetadataSetup exited with {code}")
        proc.popen = None

    def _start_bookie(self) -> None:
        home = self._home("bookie")
        conf = home / "bookie.conf"
        write_props(conf, bookie_conf(self.bookie_port, self.zk_port, home))
        proc = self._process("bookie", "bookie", "org.apache.bookkeeper.server.Main",
                             "--conf", str(conf))
        self._others.append(proc)
        proc.launch()
        registered = f"/ledgers/available/127.0.0.1:{self.bookie_port}"
        self._wait(proc, lambda: registered in zk_command(self.zk_port, "dump"), 90.0,
                   f"the bookie did not register ({registered} not in ZooKeeper)")

    def _start_all_brokers(self) -> None:
        for proc in self._brokers:
            proc.launch()
        self._wait_brokers(time.monotonic() + START_TIMEOUT_S)

    def _wait(self, proc: Process, ready: Any, timeout_s: float, why: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not proc.running:
                self._fail(proc, "exited during startup")
            if ready():
                return
            time.sleep(0.2)
        self._fail(proc, f"{why} after {timeout_s:.0f}s")

    def _wait_brokers(self, deadline: float) -> None:
        """Until every running broker lists every running broker and names a leader."""
        pending = [i for i, up in enumerate(self.alive) if up]
        wanted = {self.broker_ids[i] for i in pending}
        while pending:
            for proc in (self._brokers[i] for i in pending):
                if not proc.running:
                    self._fail(proc, "exited during startup")
            pending = [i for i in pending if not self._broker_ready(i, wanted)]
            if pending and time.monotonic() > deadline:
                self._fail(self._brokers[pending[0]],
                           f"not ready after {START_TIMEOUT_S:.0f}s (wanted brokers {sorted(wanted)})")
            if pending:
                time.sleep(0.5)

    def _broker_ready(self, index: int, wanted: set[str]) -> bool:
        url = self.web_urls[index]
        try:
            status, listed = admin_call(url, "GET", f"/admin/v2/brokers/{self.cluster_name}",
                                        timeout_s=5.0)
            if status != 200 or not wanted <= set(listed or ()):
                return False
            status, leader = admin_call(url, "GET", "/admin/v2/brokers/leaderBroker", timeout_s=5.0)
            if status != 200 or not isinstance(leader, dict) or not leader.get("brokerId"):
                return False
            # Listed is not yet serving: under the extensible manager lookups fail until the
            # ownership channel runs. The health check looks up, produces and consumes.
            status, _ = admin_call(url, "GET", "/admin/v2/brokers/health", timeout_s=30.0)
        except OSError:
            return False
        return status == 200

    def _broker_conf(self, ports: BrokerPorts) -> dict[str, Any]:
        return {
            **broker_conf(self.cluster_name, self.metadata_store_url, ports,
                          self.session_timeout_ms),
            **LOAD_MANAGERS[self.load_manager],
            "loadBalancerSheddingEnabled": self.shedding,
            **self.overrides,
        }


def rss_mb(pid: int) -> float:
    """Resident memory of a process, in MiB (0 when it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
    return int(line.split()[1]) / 1024


def main(argv: list[str] | None = None) -> int:
    """`python -m tests.pulsar_server [--brokers N] [--starts K] [--modular] [--settle S]`:
    start a fresh cluster K times in a row (each from new dirs, killed after), print how long
    each start took, by phase, and every process's RSS `--settle` seconds after the start."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.pulsar_server")
    parser.add_argument("--brokers", type=int, default=2)
    parser.add_argument("--starts", type=int, default=1)
    parser.add_argument("--modular", action="store_true")
    parser.add_argument("--settle", type=float, default=10.0)
    args = parser.parse_args(argv)
    for run in range(1, args.starts + 1):
        with PulsarCluster(args.brokers, load_manager="modular" if args.modular else "extensible") as c:
            phases = ", ".join(f"{k} {v:.1f}" for k, v in c.timings.items() if k != "total")
            print(f"start {run}: {c.start_seconds:.1f} s ({phases})", flush=True)
            time.sleep(args.settle)
            print("  RSS MiB: " + ", ".join(f"{name} {rss_mb(pid):.0f}"
                                            for name, pid in c.pids().items()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
