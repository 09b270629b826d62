"""Admin input is bounded where it enters: no command makes a record too large to read, or a
namespace too large to hold.

``check_command`` walks a command's fields before anything else judges it: the client's precheck
(``actors.precheck``, which every ``Cluster`` verb runs: lbctl, the Python API, the REST service)
and the writers (the namespace shard, the leader) call it first, so a command that reaches a
writer some other way is held to the same bounds.

Invariants:
- a string holds at most ``adminInputMaxStringLength`` characters (the principal who asked, ``by``
  or an unload's ``requested_by``, too), a list or map at most
  ``adminInputMaxListLength`` items, nested at most ``MAX_DEPTH`` levels; ints are int64 and
  floats finite (what a log record holds, ``events._fields``);
- a namespace's bundle count (``numBundles``, or its boundaries) and a split's positions are at
  most ``loadBalancerNamespaceMaximumBundles``; a boundary or position is a 32-bit hash;
- a refusal is one ``InputTooLarge`` (an ``InvalidInput``: exit 2, HTTP 412) naming the field,
  the value (cut short) and the limit with its broker.conf key; its message stays short, so
  even a rejection recorded for it fits a record;
- pure: no clock, no I/O; the limits are ``LoadBalancerConfig``'s.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from balancer.bundles import HASH_MAX
from balancer.config import LoadBalancerConfig
from balancer.errors import InputTooLarge
from events.catalog import Command, ConfirmOwnership, ConfirmRelease, ConfirmSplit
from projections.moves import REQUESTED_BY

MAX_DEPTH = 8
"""Levels of maps and lists inside one field of a command (an isolation policy needs two)."""
_INT64 = 2**63
_HASHES = ("boundaries", "positions")
"""List fields of 32-bit hashes, capped by the namespace's bundle limit."""
INTERNAL = (ConfirmOwnership, ConfirmRelease, ConfirmSplit)
"""Commands only brokers send, about the state the writer holds."""


def check_command(command: Command, config: LoadBalancerConfig) -> None:
    """``InputTooLarge`` if any field of ``command`` is past its limit (a broker's confirmation
    and the leader's decision are the cluster's own: their writer checks them against its state)."""
    if isinstance(command, INTERNAL):
        return
    for f in fields(command):
        if f.name == "decision":
            # The leader's own decisions are the cluster's; an admin's names who asked, bounded as
            # every principal is.
            asked = getattr(command, f.name)
            if isinstance(asked, dict) and REQUESTED_BY in asked:
                _value(f"{command.TYPE}.by", asked[REQUESTED_BY], config, 0)
            continue
        value = getattr(command, f.name)
        where = f"{command.TYPE}.{f.name}"
        if f.name in _HASHES and value is not None:
            _hashes(where, value, config)
        elif f.name == "bundles" and isinstance(value, int):
            _bundle_count(where, value, config)
        else:
            _value(where, value, config, 0)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}..."


def _value(where: str, value: Any, config: LoadBalancerConfig, depth: int) -> None:
    if isinstance(value, str):
        limit = config.admin_input_max_string_length
        if len(value) > limit:
            raise InputTooLarge(f"{where} {_short(value)} has {len(value):,} characters, more than "
                                f"adminInputMaxStringLength={limit}", value=value[:60])
        return
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise InputTooLarge(f"{where} {_short(value)} is outside the 64-bit integers", value=str(value)[:60])
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputTooLarge(f"{where} {value!r} is not a finite number", value=value)
        return
    if isinstance(value, list | tuple | dict):
        _container(where, value, config, depth)
        return
    raise InputTooLarge(f"{where}: a {type(value).__name__} is not plain data", value=type(value).__name__)


def _container(where: str, value: list[Any] | tuple[Any, ...] | dict[Any, Any],
               config: LoadBalancerConfig, depth: int) -> None:
    limit = config.admin_input_max_list_length
    if len(value) > limit:
        raise InputTooLarge(f"{where} has {len(value):,} items, more than adminInputMaxListLength={limit}",
                            value=len(value))
    if depth >= MAX_DEPTH:
        raise InputTooLarge(f"{where} is nested more than {MAX_DEPTH} levels deep", value=depth)
    if isinstance(value, dict):
        for key, item in value.items():
            _value(f"{where}[{_short(key)}]", key, config, depth + 1)
            _value(f"{where}[{_short(key)}]", item, config, depth + 1)
    else:
        for i, item in enumerate(value):
            _value(f"{where}[{i}]", item, config, depth + 1)


def _bundle_count(where: str, count: int, config: LoadBalancerConfig) -> None:
    cap = config.load_balancer_namespace_maximum_bundles
    if not 1 <= count <= cap:
        raise InputTooLarge(f"{where} {_short(count)}: a namespace has 1 to "
                            f"loadBalancerNamespaceMaximumBundles={cap} bundles", value=str(count)[:60])


def _hashes(where: str, value: Any, config: LoadBalancerConfig) -> None:
    cap = config.load_balancer_namespace_maximum_bundles
    if not isinstance(value, list | tuple):
        raise InputTooLarge(f"{where} {_short(value)}: expected a list of hash positions", value=_short(value))
    most = cap + 1 if where.endswith("boundaries") else cap
    if len(value) > most:
        raise InputTooLarge(f"{where} has {len(value):,} items, more than {most} "
                            f"(loadBalancerNamespaceMaximumBundles={cap})", value=len(value))
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= HASH_MAX:
            raise InputTooLarge(f"{where}[{i}] {_short(item)} is not a hash position "
                                f"(0 to 0x{HASH_MAX:08x})", value=_short(item))
