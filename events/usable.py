"""What the folds need of a payload beyond its catalog schema: the shapes inside its maps and lists.

The catalog types a field ``dict[str, Any]`` or ``list[dict[str, Any]]`` where the writers store
a structure (a broker's load, a shedding decision, an isolation policy); the codec checks the
type and the bounds of every value, not the structure. A fold reading ``raw["bundle"]`` from a
report, ``float(...)`` of a rate or ``int(...)`` of a partition would raise on a record the codec
accepted. ``problem(type, payload)`` says, before any fold reads the event, whether every fold can
use it: ``Envelope.typed`` (``catalog.view_of``) refuses an unusable payload with a
``DecodeError`` (``bad_payload``), which every fold names a ``bad_event`` at the record's offset.

Invariants:
- a rule never raises and returns None (usable) or one short reason naming the field; a payload
  that is not even what its schema says is left to the codec and the event's class;
- every payload the project's writers store is usable (``tests/events/test_fold_totality.py``
  folds the writers' events and hostile ones through every fold);
- optional structure stays optional: a key a fold reads with a default may be absent, but
  present it has the type the fold needs;
- load figures are finite numbers of at most ``FIGURE_MAX`` in magnitude, so sums and squares
  over thousands of them stay finite; counts are ints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Rule = Callable[[Mapping[str, Any]], "str | None"]

FIGURE_MAX = 1e18
"""The largest magnitude of a load figure (a rate, a throughput, a usage or a limit)."""
_RESOURCES = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")
_RATES = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
_COUNTS = ("topics", "bundles", "producers", "consumers")
_BUNDLE_COUNTS = ("topics", "producers", "consumers")
_DECISION_TEXT = ("strategy", "destination", "source", "bundle", "reason", "label", "kind")


def _figure(value: Any) -> bool:
    kind = type(value)
    return (kind is float or kind is int) and -FIGURE_MAX <= value <= FIGURE_MAX


def _figures(raw: Mapping[str, Any], names: tuple[str, ...], where: str) -> str | None:
    for name in names:
        if name in raw and not _figure(raw[name]):
            return f"{where}{name} {raw[name]!r:.40} is not a load figure"
    return None


def _counts(raw: Mapping[str, Any], names: tuple[str, ...], where: str) -> str | None:
    for name in names:
        if name in raw and type(raw[name]) is not int:
            return f"{where}{name} {raw[name]!r:.40} is not a count"
    return None


def _broker_load(load: Mapping[str, Any]) -> str | None:
    if load.get("continued"):
        return None  # a later part of a report: a marker, never read as load
    for name in _RESOURCES:
        usage = load.get(name)
        if usage is None:
            continue
        if type(usage) is not dict:
            return f"broker_load.{name} is not a map of usage and limit"
        problem = _figures(usage, ("usage", "limit"), f"broker_load.{name}.")
        if problem:
            return problem
    return _figures(load, _RATES, "broker_load.") or _counts(load, _COUNTS, "broker_load.")


def _load_reported(payload: Mapping[str, Any]) -> str | None:
    load, bundles = payload.get("broker_load"), payload.get("bundles") or []
    if type(load) is not dict or type(bundles) is not list:
        return None  # not what its schema says: the codec or the event's class refuses it
    problem = _broker_load(load)
    if problem:
        return problem
    for i, raw in enumerate(bundles):
        if type(raw) is not dict or type(raw.get("bundle")) is not str:
            return f"bundles[{i}] names no bundle"
        problem = (_figures(raw, _RATES, f"bundles[{i}].")
                   or _counts(raw, _BUNDLE_COUNTS, f"bundles[{i}]."))
        if problem:
            return problem
    return None


def _positions(value: Any, where: str) -> str | None:
    """A ``folded`` stamp: partition (an int, or an int as text) -> offset (an int)."""
    if value is None:
        return None
    if type(value) is not dict:
        return f"{where} is not a map of partition to offset"
    for partition, offset in value.items():
        if not (type(partition) is int or (type(partition) is str and partition.isdecimal()
                                            and len(partition) < 10)) or type(offset) is not int:
            return f"{where}[{partition!r:.20}] = {offset!r:.20} is not partition -> offset"
    return None


def _decision(payload: Mapping[str, Any]) -> str | None:
    decision = payload.get("decision")
    if not decision or type(decision) is not dict:
        return None
    for name in _DECISION_TEXT:
        value = decision.get(name)
        if value is not None and type(value) is not str:
            return f"decision.{name} {value!r:.40} is not text"
    inputs = decision.get("inputs")
    if inputs is not None and type(inputs) is not dict:
        return "decision.inputs is not a map"
    run_ms = decision.get("run_ms")
    if run_ms is not None and type(run_ms) is not int:
        return f"decision.run_ms {run_ms!r:.40} is not a time"
    return _positions(decision.get("folded"), "decision.folded")


def _isolation(payload: Mapping[str, Any]) -> str | None:
    policy = payload.get("isolation")
    if not policy or type(policy) is not dict:
        return None
    for name in ("primary", "secondary"):
        patterns = policy.get(name)
        if patterns is None:
            continue
        if type(patterns) is not list or any(type(p) is not str for p in patterns):
            return f"isolation.{name} is not a list of broker regexes"
        for pattern in patterns:
            try:
                re.compile(pattern)
            except (re.error, RecursionError, OverflowError) as exc:
                return f"isolation.{name}: {pattern!r:.40} is not a regex ({exc})"
    limit = policy.get("min_limit")
    if limit is not None and type(limit) is not int:
        return f"isolation.min_limit {limit!r:.40} is not a count"
    return None


def _skipped(payload: Mapping[str, Any]) -> str | None:
    return _positions(payload.get("folded"), "folded")


def _rejected(payload: Mapping[str, Any]) -> str | None:
    error = payload.get("error")
    if type(error) is not dict:
        return None
    for name in ("code", "message"):
        if name in error and type(error[name]) is not str:
            return f"error.{name} {error[name]!r:.40} is not text"
    return None


def _proposal(payload: Mapping[str, Any]) -> str | None:
    moves = payload.get("moves")
    if type(moves) is not list:
        return None  # the schema holds the list itself
    for i, move in enumerate(moves):
        if type(move) is not dict:
            return f"moves[{i}] is not a map"
        for name in ("bundle", "kind", "source", "destination", "reason"):
            value = move.get(name)
            if value is not None and type(value) is not str:
                return f"moves[{i}].{name} {value!r:.40} is not text"
        why = _decision(move)
        if why is not None:
            return f"moves[{i}].{why}"
    return _positions(payload.get("folded"), "folded")


def _unloads_counted(payload: Mapping[str, Any]) -> str | None:
    unloaded = payload.get("unloaded")
    if type(unloaded) is not dict:
        return None  # the schema holds the map itself
    for reason, count in unloaded.items():
        if type(reason) is not str or type(count) is not int or count < 0:
            return f"unloaded[{reason!r:.40}] {count!r:.40} is not a count"
    return None


def _drain(raw: Mapping[str, Any]) -> str | None:
    rate = raw.get("rate_per_minute")
    if type(rate) is not int or not 1 <= rate <= 1_000_000:
        return f"rate_per_minute {rate!r:.40} is not a drain's rate (1 to 1000000 moves a minute)"
    return None


RULES: dict[str, Rule] = {
    "BrokerDrainRequested": _drain,
    "ShedderUnloadsCounted": _unloads_counted,
    "ProposalRecorded": _proposal,
    "ExecutionRequested": _decision,
    "LoadReported": _load_reported,
    "UnloadRequested": _decision,
    "TransferPrepared": _decision,
    "NamespaceCreated": _isolation,
    "NamespacePolicySet": _isolation,
    "SheddingSkipped": _skipped,
    "CommandRejected": _rejected,
}
"""Type name -> its rule; a type not listed is usable whenever its schema holds."""


def problem(type_name: str, payload: Mapping[str, Any]) -> str | None:
    """Why no fold can use this schema-valid payload of ``type_name``, or None."""
    rule = RULES.get(type_name)
    return None if rule is None else rule(payload)
