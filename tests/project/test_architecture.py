"""The dependency direction of ARCHITECTURE §1, enforced by scanning imports.

lbctl -> web -> actors, lbctl -> {actors, spark_replay} -> projections -> events -> balancer; attach (the
shell beside a real Pulsar) -> {actors, projections, lbctl's admin client}; balancer imports none of
them and nothing that reads a clock, a global RNG, or talks to Ray, Kafka, Spark or asyncio.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("balancer", "events", "projections", "actors", "spark_replay", "web", "lbctl", "attach")
ALLOWED: dict[str, set[str]] = {
    "balancer": {"balancer"},
    "events": {"events", "balancer"},
    "projections": {"projections", "events", "balancer"},
    # attach's pure translators of Pulsar's formats (attach.loads): `replay import-pulsar` and the
    # live mirror read a load report one way.
    "spark_replay": {"spark_replay", "projections", "events", "balancer", "attach"},
    "actors": {"actors", "projections", "events", "balancer"},
    "web": {"web", "actors", "projections", "events", "balancer"},
    "lbctl": set(PACKAGES) | {"bench"},
    "attach": {"attach", "actors", "projections", "events", "balancer", "lbctl"},
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


def _module_of(path: Path) -> str:
    if not path.is_relative_to(ROOT):  # a module written by a test
        return path.stem
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_imports(path: Path, modules: set[str]) -> set[str]:
    """Project modules ``path`` imports anywhere: at module level, inside a function, or under
    TYPE_CHECKING. A function-local import only delays a circle, and an annotation-only one is
    still a module that must know another that knows it: both are edges of the circle."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != _module_of(path):
                found.add(name)
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


# Circles allowed while they are being removed: none today. A module added here must leave it.
BEING_REMOVED: set[str] = set()


def test_no_module_imports_itself_round_a_circle() -> None:
    files = [p for package in (*PACKAGES, "bench") for p in _files(package)]
    modules = {_module_of(p) for p in files}
    graph = {_module_of(p): _project_imports(p, modules) for p in files}
    circles = [c for c in _circles(graph) if not set(c) <= BEING_REMOVED]
    assert not circles, circles


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]


def test_function_local_and_type_checking_imports_are_edges(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a.b\n"
                      "def f() -> None:\n    from c import d\n")
    assert _project_imports(module, {"a.b", "c", "c.d"}) == {"a.b", "c", "c.d"}
