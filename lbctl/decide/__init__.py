"""``lbctl decide shed|place|split|bundle|accept|autosplit|report FILE``: one decision, no cluster, JSON in and out.

Invariants: the input is read whole (``-`` = stdin) and validated before anything is decided;
the output is deterministic JSON (sorted keys off: field order as in contracts §5) on stdout.
Each command lives in its own module exposing ``run(document: dict) -> dict``. A test vector
(``{"command", "input", "expected", ...}``, tests/vectors/) is read as its ``input``, once its
``command`` is checked against the one asked for.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

from balancer.errors import MalformedInput
from lbctl import numargs

COMMANDS: dict[str, str] = {
    "shed": "lbctl.decide.shed",
    "place": "lbctl.decide.place",
    "split": "lbctl.decide.split",
    "bundle": "lbctl.decide.bundle",
    "accept": "lbctl.decide.accept",
    "autosplit": "lbctl.decide.autosplit",
    "report": "lbctl.decide.report",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("decide", help="one decision from a JSON file, no cluster")
    parser.add_argument("command", choices=sorted(COMMANDS), help="which decision")
    parser.add_argument("file", help="input JSON file, or - for stdin")
    parser.add_argument("--indent", type=numargs.NATURAL, default=None, help="pretty-print the output")
    parser.set_defaults(handler=_handle)


def read_document(path: str) -> dict[str, Any]:
    """Read and parse the input; malformed JSON names the file and the position."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise MalformedInput(f"cannot read {path!r}: {exc.strerror}", value=path) from None
    try:
        document = json.loads(text)  # NaN / Infinity parse; the field that holds one names it
    except json.JSONDecodeError as exc:
        raise MalformedInput(
            f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", value=path
        ) from None
    except RecursionError:
        raise MalformedInput(f"{path}: JSON nested too deeply", value=path) from None
    if _depth(document) > MAX_DEPTH:
        raise MalformedInput(f"{path}: JSON nested deeper than {MAX_DEPTH} levels", value=path)
    if not isinstance(document, dict):
        raise MalformedInput(f"{path}: expected a JSON object, got {type(document).__name__}")
    return document


MAX_DEPTH = 64
"""No decide input is nested more than a few levels; deeper is refused before anything reads it."""


def _depth(value: Any) -> int:
    """Nesting depth, iteratively (a deep document must not exhaust the stack here either)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                return level
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def decide(command: str, document: dict[str, Any]) -> dict[str, Any]:
    """Run one decide command on a parsed document (the function the tests call)."""
    module = importlib.import_module(COMMANDS[command])
    result: dict[str, Any] = module.run(document)
    return result


def unwrap_vector(command: str, document: dict[str, Any], path: str) -> dict[str, Any]:
    """A test vector's ``input``; any other document as it is."""
    if not ({"command", "input", "expected"} <= document.keys() and isinstance(document["input"], dict)):
        return document
    if document["command"] != command:
        raise MalformedInput(f"{path} is a {document['command']!r} vector, not {command!r}",
                             value=document["command"])
    inner: dict[str, Any] = document["input"]
    return inner


def _handle(args: argparse.Namespace) -> int:
    result = decide(args.command, unwrap_vector(args.command, read_document(args.file), args.file))
    print(json.dumps(result, indent=args.indent))
    return 0
