"""``lbctl decide split``: the boundaries one split algorithm gives for one bundle (contracts §5).

Invariants: the input is validated before anything is computed; every error names the field and
the bad value (``topics[2].hash``, the bundle id, the algorithm with the accepted ones); a topic
outside the bundle, a one-hash bundle and an unknown algorithm are rejected; ``[]`` = no split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from balancer.bundles import BundleId, topic_hash
from balancer.errors import MalformedInput
from balancer.split import TopicLoad, split_boundaries
from lbctl.decide.inputs import config_from, integer, known_keys, mapping, number

TOP_KEYS = ("algorithm", "bundle", "config", "topics", "positions")


def run(document: dict[str, Any]) -> dict[str, Any]:
    known_keys(document, TOP_KEYS, "")
    config = config_from(document)
    algorithm = document.get("algorithm", config.default_namespace_bundle_split_algorithm)
    if not isinstance(algorithm, str):
        raise MalformedInput(f"algorithm: expected a name, got {algorithm!r}", value=algorithm)
    raw_bundle = document.get("bundle")
    if not isinstance(raw_bundle, str):
        raise MalformedInput(f"bundle: expected tenant/namespace/0xLLLLLLLL_0xUUUUUUUU, got {raw_bundle!r}",
                             value=raw_bundle)
    bundle = BundleId.parse(raw_bundle)
    topics = _topics(document.get("topics", []))
    positions = _positions(document.get("positions"))
    boundaries = split_boundaries(algorithm, bundle.range, topics, config, positions)
    return {"boundaries": list(boundaries)}


def _topics(raw: Any) -> list[TopicLoad]:
    if not isinstance(raw, list):
        raise MalformedInput(f"topics: expected a list, got {raw!r}", value="topics")
    return [topic_load(entry, f"topics[{i}]") for i, entry in enumerate(raw)]


def topic_load(raw: Any, where: str) -> TopicLoad:
    if isinstance(raw, str):
        return TopicLoad.named(raw, has_stats=False)
    record: Mapping[str, Any] = mapping(raw, where, ("name", "hash", "msgRate", "throughput"))
    name, given_hash = record.get("name"), record.get("hash")
    if name is not None and not isinstance(name, str):
        raise MalformedInput(f"{where}.name: expected a topic name, got {name!r}", value=name)
    if given_hash is not None:
        given_hash = integer(given_hash, f"{where}.hash")
        if not 0 <= given_hash <= 0xFFFFFFFF:
            raise MalformedInput(f"{where}.hash: {given_hash} is not an unsigned 32-bit hash", value=given_hash)
    hashed = topic_hash(name) if name is not None else given_hash
    if hashed is None:
        raise MalformedInput(f"{where}: needs a name or a hash", value=where)
    if given_hash is not None and hashed != given_hash:
        raise MalformedInput(f"{where}: hash {given_hash} is not the hash of {name!r} ({hashed})",
                             value=given_hash)
    rate, tput = record.get("msgRate"), record.get("throughput")
    has_stats = rate is not None or tput is not None
    msg_rate = _non_negative(rate, f"{where}.msgRate")
    throughput = _non_negative(tput, f"{where}.throughput")
    return TopicLoad(hashed, msg_rate, throughput, has_stats, name)


def _non_negative(raw: Any, where: str) -> float:
    if raw is None:
        return 0.0
    value = number(raw, where)
    if not (math.isfinite(value) and value >= 0):
        raise MalformedInput(f"{where}: {raw!r} is not a finite number >= 0", value=raw)
    return value


def _positions(raw: Any) -> list[int] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise MalformedInput(f"positions: expected a list of integers, got {raw!r}", value="positions")
    return [integer(p, f"positions[{i}]") for i, p in enumerate(raw)]
