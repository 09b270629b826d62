"""``lbctl bench --compare OLD.json NEW.json``: the change of every headline figure between runs.

Invariants:
- rows match by identity: the table id plus whichever of scenario, strategy, brokers, bundles
  the row has; a row in only one run is listed as added or gone, never compared;
- each table has headline figures (A1: events/s and ratio; B: max/mean ... unloads/h); tables
  this module does not know (a new A10) compare every numeric field they share;
- a change is printed as old -> new and a relative change; "better"/"worse" only for figures
  whose direction is known, and only beyond ``NOISE`` (shared machines are noisy).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

IDENTITY = ("scenario", "strategy", "brokers", "bundles")
_A_LOG = ("figure", "reference", "ratio")
_LATENCY = ("p50", "p99")
HEADLINE: dict[str, tuple[str, ...]] = {
    "A1": _A_LOG, "A3": _A_LOG, "A3r": _A_LOG, "A4": _A_LOG, "A4n": _A_LOG,
    "A2": ("events_per_s", "reference_per_s"),
    "A5": _LATENCY, "A6": _LATENCY, "A7": _LATENCY, "A7c": _LATENCY, "A8": _LATENCY,
    "A9": ("cycle_ms", "cycle_exponent"),
    "B": ("max_mean", "std", "moved_x", "cycles", "flaps", "unloads_h"),
}
LOWER_IS_BETTER = frozenset({"p50", "p99", "cycle_ms", "cycle_exponent", "max_mean", "std",
                             "moved_x", "cycles", "flaps", "unloads_h"})
HIGHER_IS_BETTER = frozenset({"figure", "ratio", "events_per_s"})
NOISE = 0.05
_SKIP = frozenset({"seed", "run_s", "window", "run_cycles", "ok", "target", "n"})


def load(path: str | Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    if "modules" not in data:
        raise ValueError(f"{path}: not an `lbctl bench` run file (no 'modules')")
    return data


def rows_of(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Identity -> row, over every module that ran."""
    found: dict[str, dict[str, Any]] = {}
    for module in record["modules"]:
        for row in _module_rows(module.get("data") or {}):
            found[identity(row)] = row
    return found


def _module_rows(data: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    rows = data.get("rows")
    if isinstance(rows, list):
        yield from (r for r in rows if isinstance(r, dict) and "id" in r)
    elif "id" in data:
        yield dict(data)


def identity(row: Mapping[str, Any]) -> str:
    parts = [str(row["id"])] + [str(row[k]) for k in IDENTITY if k in row]
    return " ".join(parts)


def fields_of(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    headline = HEADLINE.get(str(new["id"]))
    if headline:
        return [f for f in headline if f in old or f in new]
    return [k for k, v in new.items() if k not in _SKIP and _is_number(v) and _is_number(old.get(k))]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def change(field: str, old: Any, new: Any) -> tuple[str, str]:
    """(relative change, verdict) of one figure; None values (cycles "never") compare as text."""
    if not (_is_number(old) and _is_number(new)):
        return ("=" if old == new else "changed"), ""
    if old == new:
        return "=", ""
    if old == 0:
        return "new", ""
    rel = (new - old) / abs(old)
    verdict = ""
    if abs(rel) > NOISE and (field in LOWER_IS_BETTER or field in HIGHER_IS_BETTER):
        better = rel < 0 if field in LOWER_IS_BETTER else rel > 0
        verdict = "better" if better else "worse"
    return f"{rel:+.1%}", verdict


def _fmt(value: Any) -> str:
    if value is None:
        return "never"
    if _is_number(value):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3f}"
    return str(value)


def compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The comparison table."""
    before, after = rows_of(old), rows_of(new)
    lines = [f"old: {old['started']}{' (quick)' if old.get('quick') else ''}, "
             f"{old['machine']['cores']} cores; {_versions(old)}",
             f"new: {new['started']}{' (quick)' if new.get('quick') else ''}, "
             f"{new['machine']['cores']} cores; {_versions(new)}"]
    if bool(old.get("quick")) != bool(new.get("quick")):
        lines.append("warning: one run is --quick and the other is not; sizes differ")
    lines.append(f"{'row':<44} {'figure':<16} {'old':>12} {'new':>12} {'change':>8}  verdict")
    for key in sorted(set(before) | set(after), key=_order):
        if key not in before or key not in after:
            lines.append(f"{key:<44} {'(added)' if key not in before else '(gone)'}")
            continue
        for name in fields_of(before[key], after[key]):
            a, b = before[key].get(name), after[key].get(name)
            rel, verdict = change(name, a, b)
            lines.append(f"{key:<44} {name:<16} {_fmt(a):>12} {_fmt(b):>12} {rel:>8}  {verdict}")
    return "\n".join(lines)


def _versions(record: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in record.get("versions", {}).items())


def _order(key: str) -> tuple[int, str]:
    head = key.split(" ", 1)[0]
    digits = "".join(ch for ch in head if ch.isdigit())
    return (1000 if head == "B" else int(digits or 999)), key
