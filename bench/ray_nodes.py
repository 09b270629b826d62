"""A Ray cluster of separate processes on loopback, as an operator starts one: ``ray start
--head`` and ``ray start --address`` for each worker node, each in its own process group so a
node can be killed whole (a machine lost), without ``ray stop`` (which would end every Ray on
this machine, a test session's own included). The distributed tests and the benchmarks on
several nodes (``bench.scale_ray --nodes``) start theirs here.

Invariants:
- every node is a child of this process, so its whole tree (raylet, GCS, workers) is this
  process's descendants (``lbctl.procmem`` measures it);
- ``kill`` returns once every process of the node is gone; ``stop`` kills every node;
- every wait takes its bound as an argument (a test stretches it by the machine's load).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RayNodes:
    address: str
    temp_dir: str
    nodes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, resources: Mapping[str, float], *, head: bool = False,
              num_cpus: int = 2) -> None:
        where = [f"--port={self.address.rsplit(':', 1)[1]}", "--head", "--include-dashboard=false",
                 f"--ray-client-server-port={free_port()}"] if head else [f"--address={self.address}"]
        command = [RAY, "start", "--block", *where, "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}",
                   f"--resources={json.dumps(dict(resources))}", "--disable-usage-stats",
                   f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}"]
        if head:
            command.append(f"--temp-dir={self.temp_dir}")
        env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
        self.nodes[name] = subprocess.Popen(command, env=env, start_new_session=True,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def kill(self, name: str, timeout_s: float = 30.0) -> None:
        """The node's machine is gone: every process it started, at once.

        Its group is not enough: the raylet starts each worker (an actor's process) in a group
        of its own, and a worker outliving its raylet goes on writing to Kafka as a live broker
        until it notices, which no lost machine does."""
        process = self.nodes.pop(name)
        tree: list[psutil.Process] = []
        with suppress(psutil.Error):
            tree = psutil.Process(process.pid).children(recursive=True)
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        for child in tree:
            with suppress(psutil.Error):
                child.kill()
        process.wait(timeout=timeout_s)
        _wait_gone(tree, timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        for name in list(self.nodes):
            self.kill(name, timeout_s)


def _wait_gone(processes: list[psutil.Process], timeout_s: float) -> None:
    """Until each process is gone (a zombie whose parent died is gone: it runs nothing)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(_running(p) for p in processes):
            return
        time.sleep(0.1)
    raise TimeoutError(f"processes still running {timeout_s:.0f} s after SIGKILL: "
                       f"{[p.pid for p in processes if _running(p)]}")


def _running(process: psutil.Process) -> bool:
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def wait_for_nodes(address: str, count: int, timeout_s: float = 90.0) -> None:
    probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
             "print(len([n for n in ray.nodes() if n['Alive']]))")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = subprocess.run([sys.executable, "-c", probe, address], capture_output=True, text=True,
                              timeout=max(60.0, timeout_s), env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        if done.returncode == 0 and done.stdout.strip().isdigit() and int(done.stdout) >= count:
            return
        time.sleep(1.0)
    raise TimeoutError(f"{count} Ray node(s) not alive at {address} within {timeout_s}s")


@contextmanager
def ray_cluster(workers: Mapping[str, Mapping[str, float]], head: Mapping[str, float], *,
                timeout_s: float = 90.0, num_cpus: int = 2) -> Iterator[RayNodes]:
    """A head (with ``head`` resources) and named worker nodes, all alive (within ``timeout_s``
    each step); killed at the end (each within ``timeout_s``)."""
    temp = tempfile.mkdtemp(prefix="rn-", dir="/tmp")  # short: Ray's socket paths have a limit
    nodes = RayNodes(f"127.0.0.1:{free_port()}", temp)
    try:
        nodes.start("head", head, head=True, num_cpus=num_cpus)
        wait_for_nodes(nodes.address, 1, timeout_s)
        for name, resources in workers.items():
            nodes.start(name, resources, num_cpus=num_cpus)
        wait_for_nodes(nodes.address, 1 + len(workers), timeout_s)
        yield nodes
    finally:
        nodes.stop(timeout_s)
        shutil.rmtree(temp, ignore_errors=True)  # the nodes' session logs
