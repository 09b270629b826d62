"""Pulsar load reports -> LoadReported events, so a what-if runs on a real cluster's data.

Reads the JSON ``pulsar-admin broker-stats load-report`` prints for the modular load manager
(``LocalBrokerData``: resource usages, rates, ``lastStats`` per bundle, ``lastUpdate``) and the
extensible manager's ``BrokerLoadData`` (usages and rates, ``updatedAt``/``reportedAt``, no
bundles). A file holds one report, a JSON array of them, or JSON lines.

The converter itself is ``attach.loads.to_event`` (the live mirror's, ``lbctl attach``): one
converter for files and for a running cluster.

Invariants: every report becomes one ``LoadReported`` under its broker's key, stamped with the
report's own time; a report that is neither format is a ``MalformedInput`` naming the file and
the entry; nothing is written unless every file parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attach.loads import to_event
from balancer.errors import MalformedInput
from events.catalog import LoadReported

__all__ = ["read_reports", "to_event"]


def _documents(path: Path) -> list[Any]:
    text = path.read_text()
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise MalformedInput(f"{path}: not JSON or JSON lines ({exc})", value=str(path)) from None


def read_reports(files: Iterable[str | Path]) -> list[tuple[int, LoadReported]]:
    """Every report of every file, in time order (stable for equal times)."""
    out: list[tuple[int, LoadReported]] = []
    for file in files:
        path = Path(file)
        if not path.is_file():
            raise MalformedInput(f"{file}: no such file", value=str(file))
        for i, doc in enumerate(_documents(path)):
            out.append(to_event(doc, where=f"{path}[{i}]", fallback_broker=path.stem))
    return sorted(out, key=lambda item: item[0])
