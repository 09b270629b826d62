"""The Pulsar oracle: conf/pulsar/PulsarOracle.java on Pulsar 4.0's jars, one JVM for many cases.

Invariants: the driver is compiled once into ``.cache/pulsar-oracle`` (again when the source is newer);
requests and answers are JSON lines in the same order; a missing jar directory is one clear error
naming ``make pulsar-jars``.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from balancer.errors import MalformedInput

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "conf" / "pulsar" / "PulsarOracle.java"
LOG_CONFIG = ROOT / "conf" / "pulsar" / "log4j2.xml"


def libs_dir() -> Path:
    return Path(os.environ.get("PULSAR_LIBS", ROOT / ".cache" / "pulsar-libs"))


def _classes_dir() -> Path:
    return libs_dir().parent / "pulsar-oracle"


def compiled() -> Path:
    """The directory holding PulsarOracle.class, compiling it first if needed."""
    libs = libs_dir()
    if not (libs / "pulsar-broker-4.0.0.jar").is_file():
        raise MalformedInput(f"no Pulsar jars in {libs}; run 'make pulsar-jars' first", value=str(libs))
    classes = _classes_dir()
    target = classes / "PulsarOracle.class"
    if not target.is_file() or target.stat().st_mtime < SOURCE.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-XDignore.symbol.file", "-cp", f"{libs}/*", "-d", str(classes),
                        str(SOURCE)], check=True, capture_output=True, text=True)
    return classes


def ask(requests: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Pulsar's answer to each request, in order (a writer thread keeps the pipes flowing)."""
    classes = compiled()
    command = ["java", "-XX:+UseSerialGC", "-Xss8m", f"-Dlog4j2.configurationFile={LOG_CONFIG}",
               "-cp", f"{classes}{os.pathsep}{libs_dir()}/*", "PulsarOracle"]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                          encoding="utf-8") as process:
        assert process.stdin is not None and process.stdout is not None
        stdin = process.stdin

        def write() -> None:
            for request in requests:
                stdin.write(json.dumps(request) + "\n")
            stdin.close()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        for line in process.stdout:
            if line.startswith("{"):
                yield json.loads(line)
        writer.join()
