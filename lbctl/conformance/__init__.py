"""``lbctl conformance``: random inputs through ``lbctl decide`` and through Pulsar 4.0's own classes.

Invariants: every family runs ``cases`` inputs (lbctl/conformance/generate.py) through both; the
table lists family, cases and agreeing; the first disagreement of each family is printed and saved
as a regression file under ``--save`` (``{command, input, pulsar, ours}``), which
tests/conformance/test_regressions.py replays without Java. Exit 0 only when every case agrees.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from balancer.errors import LoadBalancerError
from lbctl import numargs
from lbctl.conformance.compare import agree, documented, open_tie
from lbctl.conformance.generate import FAMILIES, case
from lbctl.conformance.oracle import ROOT, ask

DEFAULT_SAVE = ROOT / "tests" / "vectors" / "conformance"


@dataclass
class FamilyResult:
    family: str
    cases: int = 0
    agreeing: int = 0
    ties: int = 0
    """Disagreements that start where Pulsar leaves a tie to hash-map order (compare.open_tie)."""
    documented: int = 0
    """Disagreements explained by a deliberate difference (compare.documented, docs/conformance.md)."""
    first: dict[str, Any] | None = field(default=None, repr=False)


def ours(command: str, document: dict[str, Any]) -> dict[str, Any]:
    """What ``lbctl decide`` answers, an error as ``{"error": message}``."""
    from lbctl.decide import decide

    try:
        return decide(command, json.loads(json.dumps(document)))
    except LoadBalancerError as exc:
        return {"error": exc.message}


def _requests(family: str, seed: int, count: int) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    for index in range(count):
        command, document = case(family, seed, index)
        mine = ours(command, document)
        request: dict[str, Any] = {"command": command, "input": document}
        if command == "place" and "assignments" in mine:
            request["follow"] = [a["broker"] for a in mine["assignments"].values()]
        yield command, document, mine | {"_request": request}


def run_family(family: str, seed: int, count: int) -> FamilyResult:
    result = FamilyResult(family)
    pending = list(_requests(family, seed, count))
    answers = ask(p[2].pop("_request") for p in pending)
    for (command, document, mine), pulsar in zip(pending, answers, strict=True):
        result.cases += 1
        if agree(command, mine, pulsar):
            result.agreeing += 1
            continue
        if open_tie(command, document, mine, pulsar):
            result.ties += 1
            continue
        if documented(command, document, mine, pulsar):
            result.documented += 1
            continue
        if result.first is None:
            result.first = {"family": family, "seed": seed, "command": command, "input": document,
                            "pulsar": pulsar, "ours": mine}
    return result


def table(results: list[FamilyResult]) -> str:
    lines = [f"{'family':<20} {'cases':>7} {'agreeing':>9} {'open ties':>10} {'documented':>11} {'other':>6}"]
    lines += [_row(r) for r in results]
    return "\n".join(lines)


def _row(r: FamilyResult) -> str:
    other = r.cases - r.agreeing - r.ties - r.documented
    return f"{r.family:<20} {r.cases:>7} {r.agreeing:>9} {r.ties:>10} {r.documented:>11} {other:>6}"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("conformance", help="random inputs through lbctl decide and Pulsar 4.0's own code")
    parser.add_argument("--cases", type=numargs.COUNT, default=300, help="cases per family (default 300)")
    parser.add_argument("--seed", type=numargs.NATURAL, default=1, help="generator seed")
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES), help="only these families")
    parser.add_argument("--save", type=Path, default=DEFAULT_SAVE,
                        help="where first disagreements are saved (default tests/vectors/conformance)")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    results = []
    for family in args.family or list(FAMILIES):
        result = run_family(family, args.seed, args.cases)
        results.append(result)
        print(_row(result), flush=True)
        if result.first is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            path = args.save / f"{family}-seed{args.seed}.json"
            path.write_text(json.dumps(result.first, indent=1) + "\n", encoding="utf-8")
            print(f"  first disagreement saved to {path}", flush=True)
    print()
    print(table(results))
    return 0 if all(r.cases == r.agreeing + r.ties + r.documented for r in results) else 1
