"""How the admin verbs print: the one place that turns their answers into text.

Two forms, as ``pulsar-admin`` has them (its ``CliCommand.print``): a string as it is, a list one
item per line, an object as indented JSON; and the project's tables (``namespaces bundles``,
``brokers list``, ``clusters list-failure-domains``). ``--json`` turns any of them into one
compact JSON document with sorted keys.

Invariants: nothing here talks to a cluster or a service; warnings go to stderr, prefixed
``lbctl: warning:``, never to stdout (a script reading stdout sees only the answer).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any


def emit(args: argparse.Namespace, document: Any, text: str) -> None:
    """``document`` as JSON with ``--json``, else ``text``."""
    print(json.dumps(document, sort_keys=True) if args.json else text)


def emit_lines(args: argparse.Namespace, items: Sequence[str]) -> None:
    """A list as pulsar-admin prints one: an item per line (nothing for an empty list)."""
    if args.json:
        print(json.dumps(list(items)))
    elif items:
        print("\n".join(items))


def emit_object(args: argparse.Namespace, document: Mapping[str, Any]) -> None:
    """An object as pulsar-admin prints one: JSON indented by two spaces, keys sorted."""
    print(json.dumps(document, indent=None if args.json else 2, sort_keys=True))


def warn(text: str) -> None:
    print(f"lbctl: warning: {text}", file=sys.stderr)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = [list(headers), *map(list, rows)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)


def print_bundles(args: argparse.Namespace, document: Mapping[str, Any]) -> None:
    """A namespace's bundles document (``web.documents.bundles_document``) as a table."""
    rows = document["bundles"]
    text = table(("RANGE", "STATE", "OWNER", "VERSION"),
                 [(r["range"], r["state"], r["owner"] or "-", str(r["version"])) for r in rows])
    degraded = document.get("degraded")
    if degraded is not None:
        text += f"\nDEGRADED: {args.namespace}: a record under it cannot be read ({degraded}); states may be wrong"
        warn(f"the view of {args.namespace} is degraded: {degraded}")
    emit(args, document, text)


def print_brokers(args: argparse.Namespace, document: Mapping[str, Any]) -> None:
    """The brokers document (``web.documents.brokers_document``) as a table and the leader."""
    lines = [(r["broker"], str(r["url"]), str(r["failureDomain"] or "-"), str(r["bundles"]),
              "-" if r["maxResourceUsage"] is None else f"{100 * r['maxResourceUsage']:.1f}%")
             for r in document["brokers"]]
    text = table(("BROKER", "URL", "DOMAIN", "BUNDLES", "LOAD"), lines)
    emit(args, document, f"{text}\nleader: {document['leader'] or '-'} (epoch {document['epoch']})")


def print_domains(args: argparse.Namespace, domains: Mapping[str, Sequence[str]]) -> None:
    emit(args, {d: {"brokers": list(b)} for d, b in domains.items()},
         table(("DOMAIN", "BROKERS"), [(d, ",".join(b)) for d, b in sorted(domains.items())]))
