"""A real single-node Apache Kafka 4.x broker (KRaft) for the tests, run from Maven jars.

`KafkaServer` runs `java -cp <KAFKA_LIBS>/* kafka.Kafka server.properties` on 127.0.0.1, with
the broker also acting as its own KRaft controller (standalone dynamic quorum). The jars come from
`make kafka-jars` (conf/kafka/pom.xml); logging config is conf/kafka/log4j2.yaml (WARN, to a file).

`kafka_bootstrap()` picks where the tests' Kafka comes from, in this order:
env `KAFKA_BOOTSTRAP_SERVERS` (used as is), a Docker engine (testcontainers KafkaContainer,
KRaft), else a `KafkaServer` from the jars.

Invariants:
- Ports and the data dir are chosen once per `KafkaServer` and never change: `restart()` reuses
  both, so `bootstrap_servers` stays valid and acknowledged data survives stop/kill + restart.
- Storage is formatted exactly once per data dir (first start); a restart never reformats.
- `start()` returns only once the broker accepts TCP and answers an aiokafka metadata request with
  itself as a live broker; otherwise it kills the JVM and raises `KafkaStartError` with the tail of
  the broker's logs.
- The JVM runs in its own process group; `stop()`/`kill()`/`close()` are idempotent, and after any
  of them (or at interpreter exit) no JVM started by this object is left running.
- The sync methods run their Kafka readiness probe on a private event loop in a worker thread, so
  they are safe to call from sync code and from inside a running event loop (which they then
  block; `restart_async()` keeps it running). `create_topics` is async, on the caller's loop.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import concurrent.futures
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from events.log.kafka_client import KafkaSecurity
    from tests.kafka_secure import SecureSetup

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIBS = REPO_ROOT / ".cache" / "kafka-libs"
LOG4J2_CONFIG = REPO_ROOT / "conf" / "kafka" / "log4j2.yaml"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
# C1-only JIT + serial GC: ~1 s faster start on a 2-core box; env KAFKA_TEST_JVM_OPTS overrides.
JVM_OPTS = (
    "-Xmx512m",
    "-Xms256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
)

T = TypeVar("T")


class KafkaStartError(RuntimeError):
    """The broker could not be provisioned or did not become ready in time."""


class KafkaHandle(Protocol):
    """What the `kafka` fixture yields, whatever the source."""

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def restartable(self) -> bool: ...

    def restart(self) -> None: ...

    def stop(self) -> None: ...


def kafka_libs_dir() -> Path:
    """The folder of broker jars (env KAFKA_LIBS), checked to be non-empty."""
    libs = Path(os.environ.get("KAFKA_LIBS") or DEFAULT_LIBS)
    if not libs.is_dir() or not any(libs.glob("*.jar")):
        raise KafkaStartError(
            f"no Kafka jars in {libs}: run `make kafka-jars` (or set KAFKA_LIBS to a folder "
            "holding kafka_2.13-4.x and its runtime dependencies)"
        )
    return libs


def java_executable() -> str:
    """`$JAVA_HOME/bin/java` if set, else `java` on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        raise KafkaStartError("no `java` found (Kafka 4.x needs Java 17+); set JAVA_HOME")
    return java


def free_ports(count: int) -> list[int]:
    """`count` distinct currently-free TCP ports on 127.0.0.1 (all held open while picking)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def new_cluster_id() -> str:
    """A random Kafka cluster id: URL-safe base64 of 16 bytes, unpadded, not starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def render_properties(broker_port: int, controller_port: int, log_dir: Path,
                      overrides: dict[str, str] | None = None) -> str:
    """server.properties for a combined broker+controller node on 127.0.0.1 (``overrides``:
    e.g. a SASL_SSL listener from ``tests.kafka_secure``)."""
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "5",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "5",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "5",
        "group.initial.rebalance.delay.ms": "0",
        # After a SIGKILL the restarted node cannot re-register until the old broker session
        # expires (DUPLICATE_BROKER_REGISTRATION): 9 s by default, 3 s here.
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "2",
        **(overrides or {}),
    }
    return "".join(f"{key}={value}\n" for key, value in props.items())


def run_in_private_loop(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine on a fresh event loop in a worker thread (works inside a running loop)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


async def probe_metadata(bootstrap_servers: str, timeout_s: float = 5.0,
                         security: KafkaSecurity | None = None) -> bool:
    """True if the broker answers a metadata request listing at least one live broker."""
    from events.log import kafka_client

    admin = kafka_client.admin(bootstrap_servers, security, request_timeout_ms=3000)
    try:
        async with asyncio.timeout(timeout_s):
            await admin.start()
            cluster = await admin.describe_cluster()
        return bool(cluster.get("brokers"))
    except Exception:
        return False
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


async def create_topics(bootstrap_servers: str, names: Iterable[str], partitions: int = 1) -> None:
    """Create topics (replication factor 1) and wait until their metadata shows leaders."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    wanted = list(names)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        topics = [
            NewTopic(name, num_partitions=partitions, replication_factor=1) for name in wanted
        ]
        response = await admin.create_topics(topics)
        errors = [t for t in response.topic_errors if t[1] != 0]
        if errors:
            raise RuntimeError(f"create_topics failed: {errors}")
        async with asyncio.timeout(30):
            while not _all_led(await admin.describe_topics(wanted), partitions):
                await asyncio.sleep(0.05)
    finally:
        await admin.close()


def _all_led(described: list[Any], partitions: int) -> bool:
    """Every described topic has no error and `partitions` partitions, each with a leader."""
    return all(
        t["error_code"] == 0
        and len(t["partitions"]) == partitions
        and all(p["leader"] >= 0 for p in t["partitions"])
        for t in described
    )


def tail(path: Path, max_lines: int = 40) -> str:
    """The last lines of a text file, or a note that it does not exist."""
    if not path.exists():
        return f"<{path.name}: missing>"
    lines = path.read_text(errors="replace").splitlines()[-max_lines:]
    return "\n".join(lines) or f"<{path.name}: empty>"


class KafkaServer:
    """One broker JVM on 127.0.0.1 with a fixed data dir and fixed ports across restarts.

    Usage: `with KafkaServer() as k: use(k.bootstrap_servers); k.restart()`.
    """

    restartable = True

    def __init__(self, libs: Path | None = None, secure: SecureSetup | None = None) -> None:
        self.libs = libs or kafka_libs_dir()
        self.secure = secure
        """A SASL_SSL listener (certificates, SCRAM users, the authorizer) instead of PLAINTEXT."""
        self.java = java_executable()
        self.data_dir = Path(tempfile.mkdtemp(prefix="kafka-test-"))
        self.broker_port, self.controller_port = free_ports(2)
        self.properties = self.data_dir / "server.properties"
        self.console_log = self.data_dir / "console.log"
        self.server_log = self.data_dir / "server.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.last_start_s = 0.0
        atexit.register(self.kill)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc else None

    def __enter__(self) -> KafkaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Format storage if new, launch the JVM, and wait until it serves metadata."""
        if self.running:
            return
        began = time.monotonic()
        if not (self.data_dir / "kraft-logs" / "meta.properties").exists():
            self._format()
        self._launch()
        self._wait_ready(began + START_TIMEOUT_S)
        self.last_start_s = time.monotonic() - began

    def stop(self) -> None:
        """Graceful shutdown: SIGTERM to the process group, SIGKILL after STOP_TIMEOUT_S."""
        self._signal_and_wait(signal.SIGTERM, STOP_TIMEOUT_S)

    def kill(self) -> None:
        """Crash the broker: SIGKILL to the process group (unflushed page cache survives)."""
        self._signal_and_wait(signal.SIGKILL, STOP_TIMEOUT_S)

    def restart(self, graceful: bool = True) -> None:
        """Stop (or kill) and start again on the same data dir and ports."""
        if graceful:
            self.stop()
        else:
            self.kill()
        self.start()

    async def restart_async(self, graceful: bool = True) -> None:
        """`restart()` in a worker thread so the caller's event loop keeps running."""
        await asyncio.to_thread(self.restart, graceful)

    def close(self) -> None:
        """Stop the broker and delete its data dir (KAFKA_TEST_KEEP_DATA=1 keeps it, with logs)."""
        self.stop()
        atexit.unregister(self.kill)
        if not os.environ.get("KAFKA_TEST_KEEP_DATA"):
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def _java_cmd(self, main_class: str, *args: str) -> list[str]:
        jvm_opts = os.environ.get("KAFKA_TEST_JVM_OPTS", "").split() or list(JVM_OPTS)
        return [
            self.java, *jvm_opts,
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            f"-Dkafka.logs.dir={self.data_dir}",
            "-cp", f"{self.libs}/*",
            main_class, *args,
        ]  # fmt: skip

    def _format(self) -> None:
        log_dir = self.data_dir / "kraft-logs"
        overrides = self.secure.properties(self.broker_port, self.controller_port) if self.secure else None
        self.properties.write_text(
            render_properties(self.broker_port, self.controller_port, log_dir, overrides)
        )
        cmd = self._java_cmd(
            "kafka.tools.StorageTool", "format", "--standalone",
            "-t", new_cluster_id(), "-c", str(self.properties),
            *(self.secure.format_args() if self.secure else []),
        )  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise KafkaStartError(
                f"StorageTool format failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"
            )

    def _launch(self) -> None:
        with self.console_log.open("ab") as out:
            self._proc = subprocess.Popen(
                self._java_cmd("kafka.Kafka", str(self.properties)),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )

    def _wait_ready(self, deadline: float) -> None:
        security = self.secure.security() if self.secure else None
        while time.monotonic() < deadline:
            if not self.running:
                self._fail("broker process exited during startup")
            if self._port_open() and run_in_private_loop(
                lambda: probe_metadata(self.bootstrap_servers, security=security)
            ):
                return
            time.sleep(0.1)
        self._fail(f"broker not ready after {START_TIMEOUT_S:.0f}s")

    def _port_open(self) -> bool:
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", self.broker_port), timeout=0.5),
        ):
            return True
        return False

    def _fail(self, why: str) -> None:
        self.kill()
        raise KafkaStartError(
            f"Kafka at {self.bootstrap_servers} ({self.data_dir}): {why}\n"
            f"--- console.log (tail) ---\n{tail(self.console_log)}\n"
            f"--- server.log (tail) ---\n{tail(self.server_log)}"
        )

    def _signal_and_wait(self, sig: signal.Signals, timeout_s: float) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout_s)


class ExternalKafka:
    """A broker someone else runs (env KAFKA_BOOTSTRAP_SERVERS): no restart, nothing to stop."""

    restartable = False

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def restart(self) -> None:
        raise RuntimeError("restart unsupported: Kafka comes from KAFKA_BOOTSTRAP_SERVERS")

    def stop(self) -> None:
        return None


class ContainerKafka:
    """A testcontainers KafkaContainer in KRaft mode (host port changes on restart: unsupported)."""

    restartable = False

    def __init__(self) -> None:
        try:
            from testcontainers.community.kafka import KafkaContainer
        except ImportError:  # testcontainers < 4.15
            from testcontainers.kafka import KafkaContainer
        self._container = KafkaContainer().with_kraft()
        self._container.start()
        self.bootstrap_servers: str = self._container.get_bootstrap_server()

    def restart(self) -> None:
        raise RuntimeError("restart unsupported for the Docker KafkaContainer")

    def stop(self) -> None:
        self._container.stop()


def docker_available() -> bool:
    """True if a Docker engine answers a ping right now (fails fast, never raises)."""
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


@contextlib.contextmanager
def kafka_bootstrap() -> Iterator[KafkaHandle]:
    """Yield a running Kafka (external env > Docker > jars) and shut it down on exit."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    handle: KafkaHandle
    if external:
        handle = ExternalKafka(external)
    elif docker_available():
        handle = ContainerKafka()
    else:
        server = KafkaServer()
        server.start()
        handle = server
    try:
        yield handle
    finally:
        (handle.close if isinstance(handle, KafkaServer) else handle.stop)()
