"""How our ``lbctl decide`` output is held against Pulsar's (docs/conformance.md, tests/vectors/README.md).

Invariants: only what Pulsar decides is compared; where Pulsar leaves the answer open, the
relaxation is the one of the vectors' README:
- shed: per cycle the set of (bundle, source, destination); Pulsar's strategies return a
  multimap in hash-map order and have no labels, reasons or skips;
- place: our broker must be one of Pulsar's best brokers (its pick among them is random);
- split, bundle, accept: exact; an error on both sides agrees.
"""

from __future__ import annotations

from typing import Any

Output = dict[str, Any]


def _decisions(cycle: Output) -> set[tuple[str, str, str | None]]:
    return {(d["bundle"], d["source"], d.get("destination")) for d in cycle.get("decisions", [])}


def agree(command: str, ours: Output, pulsar: Output) -> bool:
    if "error" in ours or "error" in pulsar:
        return "error" in ours and "error" in pulsar
    if command == "shed":
        mine, theirs = ours["cycles"], pulsar["cycles"]
        return len(mine) == len(theirs) and all(
            _decisions(a) == _decisions(b) for a, b in zip(mine, theirs, strict=True))
    if command == "place":
        return all(ours["assignments"][bundle]["broker"] in answer["best"]
                   for bundle, answer in pulsar["assignments"].items())
    if command == "split":
        return sorted(ours["boundaries"]) == sorted(pulsar["boundaries"])
    return ours == pulsar
