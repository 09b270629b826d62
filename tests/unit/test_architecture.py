"""The dependency direction of ARCHITECTURE §1, enforced by scanning imports.

lbctl -> {actors, spark_replay} -> projections -> events -> balancer; balancer imports none of
them and nothing that reads a clock, a global RNG, or talks to Ray, Kafka, Spark or asyncio.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("balancer", "events", "projections", "actors", "spark_replay", "lbctl")
ALLOWED: dict[str, set[str]] = {
    "balancer": {"balancer"},
    "events": {"events", "balancer"},
    "projections": {"projections", "events", "balancer"},
    "spark_replay": {"spark_replay", "projections", "events", "balancer"},
    "actors": {"actors", "projections", "events", "balancer"},
    "lbctl": set(PACKAGES) | {"bench"},
}
FORBIDDEN_IN_BALANCER = {"ray", "aiokafka", "pyspark", "asyncio", "time", "random", "kafka"}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    # Imports under `if TYPE_CHECKING:` are annotations only; they never run.
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = _type_checking_nodes(tree)
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.extend((f"{node.module}.{alias.name}", node.lineno) for alias in node.names)
    return found


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_dependency_direction(package: str) -> None:
    bad = []
    for path in _files(package):
        for name, line in _imports(path):
            top = name.split(".")[0]
            if top in PACKAGES and top not in ALLOWED[package]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not bad, "\n".join(bad)


def test_balancer_is_pure() -> None:
    bad = []
    for path in _files("balancer"):
        for name, line in _imports(path):
            top = name.split(".")[0]
            if top in FORBIDDEN_IN_BALANCER or (name.startswith("datetime.datetime") and "now" in name):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
        text = path.read_text()
        for needle in ("datetime.now(", "time.time(", "time.monotonic(", "random.random("):
            if needle in text:
                bad.append(f"{path.relative_to(ROOT)} calls {needle}")
    assert not bad, "\n".join(bad)
