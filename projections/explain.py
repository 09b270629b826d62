"""Why is this bundle where it is? The whole story of one bundle, from the moves of the log.

The story is every move of ``projections.moves`` that names the bundle: its assignments (with
the placement's candidates and scores when the leader chose the broker), every transfer and
unload (with the strategy, label, reason and the numbers behind it), every takeover of an
expired owner's bundle, and splits: the bundle's own split (as parent, with its children) and
the split that made it (as child, naming the parent). On a mirrored Pulsar cluster each move
says whether Pulsar made it itself or carried out this project's execution, and an execution
no move followed is listed with its outcome. A move of the project's own leader names the
proposal it belonged to and who approved it (``auto`` when none had to).

Invariants: entries come in log order (time, partition, offset); one entry per move (the rule of
``projections.moves``: a transfer told as ``UnloadRequested`` then ``TransferPrepared`` is one);
a move without a decision is listed with no numbers, never dropped; a record no fold can use
(``events.usable``) is left out here and named by the ownership view (``bad_event``); the text
never shows a Python dict or ``None``: numbers are rounded, a missing value is ``-``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from balancer.errors import DecodeError
from events.decisions import PlacementRecord
from events.log.port import Record
from events.times import iso
from projections.moves import PULSAR_REASON, REQUESTED_BY, Move, MovesFold
from projections.proposals import WATCHED as PROPOSAL_EVENTS
from projections.proposals import ProposalBook


def moves_of(bundle: str, records: Iterable[Record]) -> list[Move]:
    """The bundle's story in log order: its moves, and the split that made it."""
    fold = MovesFold()
    book = ProposalBook()
    found: dict[tuple[int, int], Move] = {}
    for record in sorted(records, key=lambda r: (r.envelope.ts_ms, r.partition, r.offset)):
        try:
            if record.envelope.type in PROPOSAL_EVENTS:
                book.fold(record.envelope.typed, record.envelope.ts_ms)
            change = fold.take(record)
        except DecodeError:
            continue  # a decision no fold can use: the ownership view names it (bad_event)
        if change is None:
            continue
        move = change.move
        if move.bundle == bundle or bundle in move.children:
            found[(move.partition, move.offset)] = move  # a move told again replaces its entry
    story = [_with_proposal(m, book) for m in [*found.values(), *fold.unmatched(bundle)]]
    story.sort(key=lambda m: (m.ts_ms, m.partition, m.offset))
    return story


def _with_proposal(move: Move, book: ProposalBook) -> Move:
    """The move with the proposal its decision names and who approved it (own leader's moves)."""
    pid = move.decision.get("proposal") if isinstance(move.decision, Mapping) else None
    entry = book.entries.get(str(pid)) if pid is not None and not move.origin else None
    if entry is None:
        return move
    return dataclasses.replace(move, execution={
        "proposal": entry.proposal.proposal_id, "mode": entry.proposal.mode, "status": entry.state,
        "approved_by": entry.approved_by, "approved_ms": entry.approved_ms})


def render(bundle: str, moves: list[Move]) -> str:
    """A table of the story (one row per move), each row followed by the numbers behind it."""
    if not moves:
        return f"{bundle}: no moves in the log"
    rows = [_row(number, bundle, move) for number, move in enumerate(moves, start=1)]
    header = ("#", "time (UTC)", "move", "from -> to", "reason", "decided by")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"{bundle}: {len(moves)} move(s)", _line(header, widths)]
    for row, move in zip(rows, moves, strict=True):
        lines.append(_line(row, widths))
        lines += [f"     {text}" for text in _details(bundle, move)]
    return "\n".join(lines)


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()


def _row(number: int, bundle: str, move: Move) -> tuple[str, ...]:
    decided = move.decided
    by = " ".join(x for x in (decided.strategy, decided.label) if x)
    if decided.placement is not None and not by:
        by = f"placement {decided.placement.strategy}".strip()
    return (f"#{number}", iso(move.ts_ms), _what(bundle, move), _route(bundle, move), _reason(move), by or "-")


def _what(bundle: str, move: Move) -> str:
    if move.kind == "split":
        return "split (as child)" if move.bundle != bundle else "split (as parent)"
    return move.kind


def _route(bundle: str, move: Move) -> str:
    src = move.src or "-"
    if move.kind == "split":
        if move.bundle != bundle:
            return f"{src}: {_short(move.bundle)} -> {_short(bundle)}"
        made = ", ".join(_short(c) for c in move.children) if move.children else "(not completed)"
        return f"{src}: -> {made}"
    if move.kind == "unload" and move.dst is None:
        return f"{src} -> (released, no destination)"
    return f"{src} -> {move.dst or '-'}"


def _reason(move: Move) -> str:
    why = move.why
    return why if why == move.reason or not move.reason else f"{why} ({move.reason})"


def _short(bundle: str) -> str:
    return bundle.rpartition("/")[2]


def _details(bundle: str, move: Move) -> list[str]:
    decided = move.decided
    lines = [f"record {move.partition}:{move.offset} {move.event or '-'}, epoch {move.epoch}"]
    if move.kind == "split" and move.bundle != bundle:
        lines.append(f"made by the split of {move.bundle}")
    lines += _origin_lines(move)
    if decided.strategy or decided.label:
        lines.append(f"decision: {decided.strategy or '-'} {decided.label or ''} {decided.reason or ''}".rstrip())
    if decided.extra.get(REQUESTED_BY):
        lines.append(f"requested by: {decided.extra[REQUESTED_BY]}")
    for key, value in sorted(decided.numbers.items()):
        lines.append(f"{key} = {_fmt(value)}")
    if decided.placement is not None:
        lines += _placement_lines(decided.placement)
    return lines


def _placement_lines(placement: PlacementRecord) -> list[str]:
    lines = [f"placement: {placement.broker or 'no broker qualified'} chosen by "
             f"{placement.strategy or '-'} ({placement.source or '-'}) among "
             f"{placement.candidate_count} candidate(s)"
             + (f", the first {len(placement.candidates)} shown" if placement.candidate_count > len(placement.candidates)
                else "")]
    best = set(placement.best)
    for broker in placement.candidates:
        score = placement.scores.get(broker)
        mark = " (chosen)" if broker == placement.broker else " (best)" if broker in best else ""
        lines.append(f"  {broker}: score {'-' if score is None else _fmt(score)}{mark}")
    for step in placement.steps:
        names = step.get("brokers")
        count = step.get("count", len(names) if isinstance(names, list) else 0)
        brokers = ", ".join(str(b) for b in names) if isinstance(names, list) else f"{count} broker(s)"
        note = f" ({step['note']})" if step.get("note") else ""
        lines.append(f"  after {step.get('name', '-')}: {brokers or 'none'}{note}")
    return lines


def _origin_lines(move: Move) -> list[str]:
    run = move.execution
    if move.origin == PULSAR_REASON:
        return [f"made by Pulsar itself, not by this project: {move.source_id or 'no message id'}"]
    if not move.origin and run.get("proposal"):
        when = run.get("approved_ms")
        return [f"proposal {run['proposal']} ({run.get('mode') or '-'} mode, {run.get('status') or '-'}), "
                f"approved by {run.get('approved_by') or '-'}"
                + (f" at {iso(int(when))}" if isinstance(when, int) else "")]
    if move.origin not in ("driven", "execution"):
        return []
    lines = [f"{'driven by' if move.origin == 'driven' else 'execution of'} proposal {run.get('proposal')} "
             f"({run.get('strategy') or '-'}, {run.get('mode') or '-'} mode), execution {run.get('id')}"]
    if move.origin == "driven":
        lines.append(f"carried out by Pulsar: {move.source_id or 'no message id'}")
    lines.append(f"execution: requested {iso(int(run.get('requested_ms', 0)))} {run.get('request', '')}; "
                 f"{run.get('answer', 'no answer recorded')}; {run.get('outcome', 'open')}")
    return lines


def _fmt(value: Any) -> str:
    """A value as a reader wants it: floats to 4 significant digits, maps and lists spelled out."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_fmt(v)}" for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))) or "-"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)

