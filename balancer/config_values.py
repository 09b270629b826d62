"""The values a broker.conf key may take: Pulsar's class-name tables and one parser per kind of
value (booleans, bounded numbers, class names, lists), each naming the key and the bad value.

Invariants: a parser returns the parsed value or raises ``ConfigError(key, value)``; numbers are
finite; strategy and class values come back in their short form whatever spelling came in.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from balancer.errors import ConfigError

_IMPL = "org.apache.pulsar.broker.loadbalance.impl."
_EXT = "org.apache.pulsar.broker.loadbalance.extensions."

SHEDDING_STRATEGIES: dict[str, str] = {
    "ThresholdShedder": _IMPL + "ThresholdShedder",
    "OverloadShedder": _IMPL + "OverloadShedder",
    "UniformLoadShedder": _IMPL + "UniformLoadShedder",
    "AvgShedder": _IMPL + "AvgShedder",
    "TransferShedder": _EXT + "scheduler.TransferShedder",
    "PlannedTransferShedder": "bundle_balancer.PlannedTransferShedder",
}
"""Short name -> Pulsar class name. Project strategies register themselves here too."""

PLACEMENT_STRATEGIES: dict[str, str] = {
    "LeastLongTermMessageRate": _IMPL + "LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight": _IMPL + "LeastResourceUsageWithWeight",
    "AvgShedder": _IMPL + "AvgShedder",
    "RoundRobin": _IMPL + "RoundRobinBrokerSelector",
}

LOAD_MANAGERS: dict[str, str] = {
    "ModularLoadManagerImpl": _IMPL + "ModularLoadManagerImpl",
    "ExtensibleLoadManagerImpl": _EXT + "ExtensibleLoadManagerImpl",
}

TABLE_VIEWS: dict[str, str] = {
    "ServiceUnitStateTableViewImpl": _EXT + "channel.ServiceUnitStateTableViewImpl",
    "ServiceUnitStateMetadataStoreTableViewImpl": _EXT
    + "channel.ServiceUnitStateMetadataStoreTableViewImpl",
}

SPLIT_ALGORITHMS: tuple[str, ...] = (
    "range_equally_divide",
    "topic_count_equally_divide",
    "specified_positions_divide",
    "flow_or_qps_equally_divide",
)


def resolve_class_name(value: str, table: Mapping[str, str], what: str, key: str) -> str:
    """Map a short name, ``impl.X``/``ext.X`` or a full class name to the short name."""
    text = value.strip()
    if text in table:
        return text
    for short, full in table.items():
        if text == full or text.endswith("." + short) or full.endswith("." + text):
            return short
    raise ConfigError(
        f"{key}: unknown {what} {text!r}; accepted: {', '.join(sorted(table))}",
        key=key,
        value=text,
    )


def snake_case(pulsar_key: str) -> str:
    """``loadBalancerCPUResourceWeight`` -> ``load_balancer_cpu_resource_weight``."""
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", pulsar_key)
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", spaced)
    return spaced.lower()


Parser = Callable[[str, Any], Any]


def boolean(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ConfigError(f"{key}: {raw!r} is not a boolean; accepted: true, false", key=key, value=raw)


def bounded(kind: type, low: float | None, high: float | None) -> Parser:
    def parse(key: str, raw: Any) -> Any:
        if isinstance(raw, bool):
            raise ConfigError(f"{key}: {raw!r} is not a number", key=key, value=raw)
        try:
            value = kind(float(raw)) if kind is float else _to_int(raw)
            if not math.isfinite(value):
                raise ValueError(raw)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(
                f"{key}: {raw!r} is not {'an integer' if kind is int else 'a number'}",
                key=key,
                value=raw,
            ) from None
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"[{_fmt(low)}, {_fmt(high)}]"
            raise ConfigError(
                f"{key}: {raw!r} is out of range; accepted: {bounds}", key=key, value=raw
            )
        return value

    return parse


def _to_int(raw: Any) -> int:
    if isinstance(raw, int):
        return raw
    as_float = float(raw)
    if not as_float.is_integer():
        raise ValueError(raw)
    return int(as_float)


def _fmt(bound: float | None) -> str:
    return "inf" if bound is None else f"{bound:g}"


def choice(table: Mapping[str, str], what: str) -> Parser:
    def parse(key: str, raw: Any) -> str:
        return resolve_class_name(str(raw), table, what, key)

    return parse


def text(key: str, raw: Any) -> str | None:
    if raw is None:
        return None
    text = str(raw).strip()
    return text or None


ROOT_KEY_BYTES = 32


def root_key(key: str, raw: Any) -> str | None:
    """A cluster's root public key (base64 of its 32 bytes), or None when the key is empty."""
    value = text(key, raw)
    if value is None:
        return None
    try:
        size = len(base64.b64decode(value, validate=True))
    except ValueError:
        size = -1
    if size != ROOT_KEY_BYTES:
        raise ConfigError(f"{key}: {value[:60]!r} is not a root public key (base64 of "
                          f"{ROOT_KEY_BYTES} bytes)", key=key, value=value[:60])
    return value


def csv_list(allowed: Iterable[str] | None = None) -> Parser:
    allowed_set = frozenset(allowed) if allowed is not None else None

    def parse(key: str, raw: Any) -> tuple[str, ...]:
        items = raw if isinstance(raw, list | tuple) else str(raw or "").split(",")
        values = tuple(str(item).strip() for item in items if str(item).strip())
        if allowed_set is not None:
            for value in values:
                if value not in allowed_set:
                    raise ConfigError(
                        f"{key}: unknown value {value!r}; accepted: {', '.join(sorted(allowed_set))}",
                        key=key,
                        value=value,
                    )
        return values

    return parse


def split_algorithm(key: str, raw: Any) -> str:
    text = str(raw).strip()
    if text not in SPLIT_ALGORITHMS:
        raise ConfigError(
            f"{key}: unknown split algorithm {text!r}; accepted: {', '.join(SPLIT_ALGORITHMS)}",
            key=key,
            value=text,
        )
    return text


ASSIGNER = "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner"


def assigner(key: str, raw: Any) -> str:
    text = str(raw).strip()
    if text not in (ASSIGNER, "ConsistentHashingTopicBundleAssigner"):
        raise ConfigError(f"{key}: {text!r} is not supported; accepted: {ASSIGNER}", key=key, value=text)
    return ASSIGNER


PCT = bounded(float, 0, None)  # Pulsar caps no percentage (its own tests use 400)
NONNEG_F = bounded(float, 0, None)
NONNEG_I = bounded(int, 0, None)
POS_I = bounded(int, 1, None)
FRACTION = bounded(float, 0, 1)
