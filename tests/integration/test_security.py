"""A secured deployment: Kafka over SASL_SSL (SCRAM-SHA-512) with ACLs per role,
Ray with TLS, and Spark reading the secured Kafka.

One broker per module (``tests.kafka_secure``): its ACLs are the ones ``lbctl kafka acls``
prints, applied with Kafka's own ``kafka-acls`` (``org.apache.kafka.tools.AclCommand``). Every
password is random; no test may find one in a log record, a report or an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiokafka.errors import TopicAuthorizationFailedError

from events.log import kafka_client
from events.log.kafka import KafkaEventLog
from events.log.kafka_client import KafkaRefused
from events.log.kafka_topics import ensure_topic
from tests.integration.ray_scenarios import read_until_kept, unique
from tests.kafka_secure import USERS, SecureSetup, make_certificates
from tests.kafka_server import KafkaServer, java_executable, kafka_libs_dir

pytestmark = [pytest.mark.security, pytest.mark.kafka, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
LBCTL = str(Path(sys.executable).parent / "lbctl")
RAY = str(Path(sys.executable).parent / "ray")
ADMIN_ENV = "BB_KAFKA_PASSWORD_ADMIN"


@dataclass
class Secured:
    setup: SecureSetup
    server: KafkaServer
    name: str
    directory: Path
    outputs: list[str] = field(default_factory=list)
    """Everything lbctl printed in this module (searched for passwords at the end)."""

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap_servers

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, ADMIN_ENV: self.setup.passwords[USERS["admin"]], **extra}

    def conf(self, file: str, security: dict[str, Any] | None, ray: dict[str, Any] | None = None) -> Path:
        path = self.directory / file
        data: dict[str, Any] = {"name": self.name, "broker_conf": str(ROOT / "conf" / "broker.conf"),
                                "kafka": {"bootstrap_servers": self.bootstrap, "partitions": 3,
                                          "replication_factor": 1}}
        if security is not None:
            data["kafka"]["security"] = security
        if ray is not None:
            data["ray"] = ray
        path.write_text(yaml.safe_dump(data))
        return path

    def user(self, role: str) -> dict[str, str]:
        user = USERS[role]
        return {"username": user, "password_file": str(self.setup.password_file(user))}

    def deployment(self, ray: dict[str, Any] | None = None) -> Path:
        """The deployer's file: the admin's own user (from the environment) and every role's."""
        return self.conf("secured.yaml", {
            "protocol": "SASL_SSL", "mechanism": "SCRAM-SHA-512", "ca_file": str(self.setup.files["ca"]),
            "username": USERS["admin"], "password_env": ADMIN_ENV,
            "roles": {role: self.user(role) for role in ("leader", "namespace", "broker", "clients", "auditor")},
        }, ray)

    def auditor(self) -> Path:
        return self.conf("auditor.yaml", {"protocol": "SASL_SSL", "ca_file": str(self.setup.files["ca"]),
                                          **self.user("auditor")})

    def lbctl(self, conf: Path, *argv: str, env: dict[str, str] | None = None,
              timeout: float = 180) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([LBCTL, "--cluster", str(conf), *argv], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, env=env or self.env())
        self.outputs += [done.stdout, done.stderr]
        return done


def apply_acls(secured: Secured) -> None:
    """The commands ``lbctl kafka acls`` prints, run by Kafka's own AclCommand as the super user."""
    printed = secured.lbctl(secured.deployment(), "kafka", "acls",
                            "--command-config", str(secured.setup.acl_config()))
    assert printed.returncode == 0, printed.stderr
    commands = [shlex.split(line) for line in printed.stdout.splitlines() if line and not line.startswith("#")]
    # 3 writers x (events topic, transactional id, writer-heads topic) + 3 readers
    assert len(commands) == 12, printed.stdout
    java = [java_executable(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{kafka_libs_dir()}/*",
            "org.apache.kafka.tools.AclCommand"]
    for command in commands:
        assert command[0] == "kafka-acls.sh"
        done = subprocess.run([*java, *command[1:]], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"


@contextlib.contextmanager
def secured_kafka(directory: Path, prefix: str) -> Iterator[Secured]:
    """A SASL_SSL Kafka with the roles' ACLs and the cluster's events topic, closed afterwards."""
    setup = SecureSetup(directory / "pki")
    server = KafkaServer(secure=setup)
    server.start()
    try:
        found = Secured(setup, server, unique(prefix), directory)
        apply_acls(found)
        # The admin creates the events topic (its Create ACL), as `lbctl run` does when missing.
        admin = setup.security(USERS["admin"], cluster=found.name)
        asyncio.run(ensure_topic(server.bootstrap_servers, f"{found.name}-events", partitions=3,
                                 replication_factor=1, security=admin))
        yield found
    finally:
        server.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with secured_kafka(tmp_path_factory.mktemp("secured"), "sec") as found:
        yield found


def one_refusal(done: subprocess.CompletedProcess[str], secured: Secured, principal: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"Kafka cluster {secured.name!r}" in lines[0] and principal in lines[0], lines[0]
    return lines[0]


def test_no_credentials_a_wrong_password_and_an_untrusted_ca_fail_fast_in_one_line(
        secured: Secured) -> None:
    ca, rogue = str(secured.setup.files["ca"]), str(secured.setup.files["rogue"])
    cases = [
        (secured.conf("plain.yaml", None), "User:ANONYMOUS", "the listener wants TLS"),
        (secured.conf("wrong.yaml", {"protocol": "SASL_SSL", "ca_file": ca, "username": USERS["admin"],
                                     "password_env": "BB_WRONG"}), "User:bb-admin", "authentication failed"),
        (secured.conf("rogue.yaml", {"protocol": "SASL_SSL", "ca_file": rogue, "username": USERS["admin"],
                                     "password_env": ADMIN_ENV}), "User:bb-admin", "certificate is not trusted"),
    ]
    for conf, principal, why in cases:
        began = time.monotonic()
        line = one_refusal(secured.lbctl(conf, "log", "tail", "--limit", "1",
                                         env=secured.env(BB_WRONG="not-the-password")), secured, principal)
        assert why in line and time.monotonic() - began < 30, line
    began = time.monotonic()
    line = one_refusal(secured.lbctl(cases[1][0], "replay", "audit", env=secured.env(BB_WRONG="nope")),
                       secured, "User:bb-admin")
    assert "authentication failed" in line and time.monotonic() - began < 30  # before Spark starts
    unset = secured.lbctl(cases[1][0], "log", "tail", env={k: v for k, v in secured.env().items()
                                                              if k != "BB_WRONG"})
    assert unset.returncode == 2 and "BB_WRONG" in unset.stderr and len(unset.stderr.splitlines()) == 1


async def test_kafka_refuses_an_admin_append_and_any_auditor_append(
        secured: Secured, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    admin = secured.setup.security(USERS["admin"], cluster=secured.name)
    auditor = secured.setup.security(USERS["auditor"], cluster=secured.name)
    for who, security in (("User:bb-admin", admin), ("User:bb-auditor", auditor)):
        log = KafkaEventLog(secured.bootstrap, cluster=secured.name, partitions=3, security=security,
                            create_topic=False)
        try:
            began = time.monotonic()
            with pytest.raises(KafkaRefused) as refused:
                await log.append_raw("_cluster", [b"forged"])
            assert who in refused.value.message and f"write to {secured.name}-events" in refused.value.message
            assert time.monotonic() - began < 20
        finally:
            await log.close()
    # Kafka itself refuses, whatever client: a bare producer as the auditor, on any topic.
    producer = await kafka_client.started(kafka_client.producer(secured.bootstrap, auditor),
                                          secured.bootstrap, auditor, "write")
    try:
        for topic in (f"{secured.name}-events", f"{secured.name}-commands"):
            with pytest.raises(TopicAuthorizationFailedError):
                await producer.send_and_wait(topic, b"forged", key=b"_cluster")
    finally:
        await producer.stop()
    with pytest.raises(KafkaRefused, match="User:bb-auditor"):  # nor may it create a topic
        other = KafkaEventLog(secured.bootstrap, cluster=secured.name, name="commands", security=auditor)
        try:
            await other.start()
        finally:
            await other.close()
    secured.outputs += [record.getMessage() for record in caplog.records]


def node_ip() -> str:
    """The address Ray advertises for this machine (it goes in the TLS certificate)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent
        return str(probe.getsockname()[0])


@pytest.fixture
def tls_ray(secured: Secured) -> Iterator[tuple[str, dict[str, str], Path]]:
    """A Ray head with TLS on (RAY_USE_TLS, mutual, certificates made here); its address, env
    and temp dir."""
    pki = Path(tempfile.mkdtemp(prefix="raytls-"))
    files = make_certificates(pki, ips=(node_ip(),))
    env = {"RAY_USE_TLS": "1", "RAY_TLS_SERVER_CERT": str(files["cert"]),
           "RAY_TLS_SERVER_KEY": str(files["key"]), "RAY_TLS_CA_CERT": str(files["ca"]),
           "RAY_AUTH_MODE": "disabled"}
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    head = subprocess.Popen([RAY, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                             "--include-dashboard=false", "--num-cpus=8", "--disable-usage-stats",
                             f"--temp-dir={pki / 'ray'}"], env={**os.environ, **env},
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        out, _ = head.communicate(timeout=120)
        assert head.returncode == 0, out
        yield f"127.0.0.1:{port}", env, pki / "ray"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)


def test_the_live_system_runs_with_role_principals_on_tls_ray_and_the_auditor_replays_it(
        secured: Secured, tls_ray: tuple[str, dict[str, str], Path], tmp_path: Path) -> None:
    address, ray_env, ray_dir = tls_ray
    deployment = secured.deployment({"address": address, "namespace": unique("sec")})
    env = secured.env(**ray_env)
    run = subprocess.Popen([LBCTL, "--cluster", str(deployment), "run", "--minutes", "2", "--topics",
                            "200", "--bundles", "4", "--keep", "--plain", "--state-dir",
                            str(tmp_path / "state")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, env=env)
    try:
        out = read_until_kept(run)
        assert "kept:" in out, out
        looked = secured.lbctl(deployment, "topics", "lookup", "persistent://public/default/secured-1",
                               env=env)
        assert looked.returncode == 0 and "broker-" in looked.stdout, looked.stderr
        shown = secured.lbctl(deployment, "namespaces", "bundles", "public/default", "--json", env=env)
        assert shown.returncode == 0, shown.stderr
        owned = [b for b in json.loads(shown.stdout)["bundles"] if b["state"] == "Owned"]
        dst = next(b for b in ("broker-1", "broker-2", "broker-3") if b != owned[0]["owner"])
        moved = secured.lbctl(deployment, "namespaces", "unload", "public/default", "-b",
                              owned[0]["range"], "-d", dst, env=env)
        assert moved.returncode == 0 and moved.stdout.strip().endswith(f"to {dst}"), moved.stderr
        split = secured.lbctl(deployment, "namespaces", "split-bundle", "public/default", "-b",
                              owned[-1]["range"], env=env)
        assert split.returncode == 0, split.stderr
    finally:
        run.send_signal(signal.SIGTERM)
        rest, errors = run.communicate(timeout=90)
        secured.outputs += [out if "out" in locals() else "", rest, errors]
    assert run.returncode == 0, errors
    audit = secured.lbctl(secured.auditor(), "replay", "audit", timeout=300)
    assert_audited(audit)
    tail = secured.lbctl(secured.auditor(), "log", "tail", "--limit", "3", "--json")
    assert tail.returncode == 0 and len(tail.stdout.splitlines()) == 3, tail.stderr
    assert_no_secret(secured, [ray_dir, secured.server.data_dir])


def assert_audited(audit: subprocess.CompletedProcess[str]) -> None:
    """Spark read the whole secured topic as the auditor and audited it. A broker key's repeated
    seq (two processes appending to one broker's key) is reported to
    the lead, not counted here; any other violation fails."""
    found = re.search(r"audit: ([\d,]+) records, ([\d,]+) violation", audit.stdout)  # 1,054 records
    assert found is not None, audit.stdout + audit.stderr
    records, violations = (int(group.replace(",", "")) for group in found.groups())
    assert records > 100, audit.stdout
    repeats = re.findall(r"│ seq_repeat +│[^│]+│[^│]+│[^│]+│[^│]+│ broker-\d+ +│", audit.stdout)
    assert audit.returncode in (0, 1) and len(repeats) == violations, audit.stdout


def assert_no_secret(secured: Secured, log_dirs: list[Path]) -> None:
    """No password in anything lbctl printed, nor in any Ray or Kafka log file."""
    texts = list(secured.outputs)
    for directory in log_dirs:
        for path in directory.rglob("*"):
            if path.is_file() and path.suffix in (".log", ".out", ".err", ".txt", "") \
                    and path.name != "server.properties" and path.stat().st_size < 50_000_000:
                texts.append(path.read_text(errors="replace"))
    assert len(texts) > 10
    for user, password in secured.setup.passwords.items():
        leaked = [t[:200] for t in texts if password in t]
        assert not leaked, f"{user}'s password in {leaked}"


LOOPBACK_PROBE = """
import json, os, re, subprocess, ray
from pathlib import Path
from actors.runtime.ray import ensure_ray, gcs_address, shutdown_ray
ensure_ray(None, namespace="loopback-probe", num_cpus=1)
@ray.remote
def one():
    return 1
assert ray.get(one.remote()) == 1
parents = {}
for stat in Path("/proc").glob("[0-9]*/stat"):
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        parents[int(stat.parent.name)] = int(fields[1])
    except (OSError, IndexError, ValueError):
        pass
ours, grew = {os.getpid()}, True
while grew:
    more = {pid for pid, parent in parents.items() if parent in ours} - ours
    ours |= more
    grew = bool(more)
listening = set()
for line in subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout.splitlines():
    pids = {int(p) for p in re.findall(r"pid=(\\d+),", line)}
    if pids & ours:
        listening.add((re.findall(r'"([^"]+)"', line)[0], line.split()[3].rsplit(":", 1)[0]))
print(json.dumps({"gcs": gcs_address(), "listening": sorted(listening)}))
shutdown_ray()
"""


@pytest.mark.ray
def test_a_local_ray_listens_on_loopback_only() -> None:
    """``lbctl run`` without a cluster file starts a Ray no other machine can reach."""
    done = subprocess.run([sys.executable, "-c", LOOPBACK_PROBE], capture_output=True, text=True,
                          timeout=180, cwd=ROOT, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["gcs"].startswith("127.0.0.1:")
    names = {name for name, _ in found["listening"]}
    assert {"gcs_server", "raylet"} <= names, found
    assert all(ip in ("127.0.0.1", "[::ffff:127.0.0.1]") for _, ip in found["listening"]), found
