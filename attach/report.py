"""Advise and drive, read back from a log: the proposals beside Pulsar's own moves, and each
execution with its outcome.

Advise: each advise proposal is a cycle at ``run_ms``; Pulsar's own moves in that cycle are the
``pulsar``-reason transfers and unloads stamped in ``[run_ms, next run_ms)`` (the cycle decided
just before Pulsar's next shedding run, on the load Pulsar was about to read), less the moves
that executed one of this project's requests. A move of ours and one of Pulsar's agree when
bundle, source and destination are the same (or bundle and source, where Pulsar unloaded without
a destination: the modular manager); ``destination`` differs when only that differs.

Invariants:
- pure: built from records (any order; sorted by time, then partition and offset) and nothing
  else; every Pulsar move is either compared in one cycle or counted as outside every cycle;
- each disagreement carries both inputs: the load each broker showed our cycle (the proposal's
  ``brokers``) and the last report of each broker before Pulsar's first move of that cycle (its
  own ``weightedMaxEMA`` included where the mirror kept it);
- Pulsar's runs that moved nothing (``SheddingSkipped`` under the mirror) count in the cycle
  whose window holds them, with their reason beside ours; the verdict compares moves only;
- rates are of what was compared: agreement = matched / (ours + Pulsar's - matched); a cycle
  agrees when both sides made the same moves, none included.
"""

from __future__ import annotations

import bisect
import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attach.advise import PULSAR_REASON
from attach.proposals import ADVISE, DRIVE, SPLIT, Proposal, ProposedMove
from balancer.proposals import REVIEW
from events.catalog import (
    ExecutionAccepted,
    ExecutionConfirmed,
    ExecutionFailed,
    ExecutionRefused,
    ExecutionRequested,
    ExecutionUnanswered,
    LoadReported,
    ProposalRecorded,
    SheddingSkipped,
    TransferPrepared,
    UnloadRequested,
)
from events.log.port import Record
from events.times import iso


@dataclass(frozen=True)
class PulsarMove:
    bundle: str
    source: str
    destination: str | None
    ts_ms: int
    evidence: str

    def to_dict(self) -> dict[str, Any]:
        return {"bundle": self.bundle, "source": self.source, "destination": self.destination,
                "ts_ms": self.ts_ms, "evidence": self.evidence}


@dataclass
class CycleCompare:
    proposal: Proposal
    pulsar: list[PulsarMove] = field(default_factory=list)
    pulsar_saw: dict[str, dict[str, Any]] = field(default_factory=dict)
    pulsar_skips: list[str] = field(default_factory=list)
    """Why Pulsar's runs in this cycle's window moved nothing (``SheddingSkipped`` the mirror
    read off Pulsar's leader's metrics)."""

    @property
    def pulsar_ran(self) -> bool:
        """Pulsar's shedder was seen to run in this cycle's window (it moved or it skipped)."""
        return bool(self.pulsar or self.pulsar_skips)

    @property
    def same_skip(self) -> bool:
        """Both sides moved nothing, for the same reason."""
        return not self.ours and not self.pulsar and str(self.proposal.skip) in self.pulsar_skips

    @property
    def ours(self) -> list[ProposedMove]:
        return [m for m in self.proposal.moves if m.kind != SPLIT]

    @property
    def matched(self) -> list[ProposedMove]:
        """Ours that Pulsar made too: same bundle, source and destination, or same bundle and
        source where Pulsar named no destination (an unload, placed on the next lookup)."""
        exact = {(p.bundle, p.source, p.destination) for p in self.pulsar}
        unplaced = {(p.bundle, p.source) for p in self.pulsar if p.destination is None}
        return [m for m in self.ours
                if (m.bundle, m.source, m.destination) in exact or (m.bundle, m.source) in unplaced]

    @property
    def destination_differs(self) -> list[ProposedMove]:
        theirs = {(p.bundle, p.source) for p in self.pulsar if p.destination is not None}
        exact = self.matched
        return [m for m in self.ours if (m.bundle, m.source) in theirs and m not in exact]

    @property
    def agrees(self) -> bool:
        return len(self.matched) == len(self.ours) == len(self.pulsar)


@dataclass
class AdviseReport:
    cycles: list[CycleCompare]
    outside: list[PulsarMove]
    strategy: str

    @property
    def ours(self) -> int:
        return sum(len(c.ours) for c in self.cycles)

    @property
    def pulsars(self) -> int:
        return sum(len(c.pulsar) for c in self.cycles)

    @property
    def matched(self) -> int:
        return sum(len(c.matched) for c in self.cycles)

    @property
    def agreement(self) -> float:
        """matched / (ours + Pulsar's - matched); 1.0 when neither side moved."""
        union = self.ours + self.pulsars - self.matched
        return 1.0 if union == 0 else self.matched / union

    @property
    def cycles_agreeing(self) -> int:
        return sum(c.agrees for c in self.cycles)

    def summary(self) -> dict[str, Any]:
        n = len(self.cycles)
        return {"strategy": self.strategy, "cycles": n, "cycles_agreeing": self.cycles_agreeing,
                "cycle_agreement": 1.0 if n == 0 else self.cycles_agreeing / n,
                "ours": self.ours, "pulsar": self.pulsars, "matched": self.matched,
                "destination_differs": sum(len(c.destination_differs) for c in self.cycles),
                "agreement": self.agreement,
                "pulsar_also_ours": 1.0 if not self.pulsars else self.matched / self.pulsars,
                "ours_also_pulsar": 1.0 if not self.ours else self.matched / self.ours,
                "pulsar_outside_cycles": len(self.outside),
                "pulsar_runs_seen": sum(c.pulsar_ran for c in self.cycles),
                "same_skip_reason": sum(c.same_skip for c in self.cycles)}


def _ordered(records: Iterable[Record]) -> list[Record]:
    return sorted(records, key=lambda r: (r.envelope.ts_ms, r.partition, r.offset))


def advise_report(records: Iterable[Record], mode: str = ADVISE) -> AdviseReport:
    """Every ``mode`` proposal of the log beside Pulsar's own moves in its cycle (drive mode's
    include those that waited for review)."""
    ordered = _ordered(records)
    modes = (DRIVE, REVIEW) if mode == DRIVE else (mode,)
    proposals = [Proposal.from_event(r.envelope.typed) for r in ordered
                 if isinstance(r.envelope.typed, ProposalRecorded) and r.envelope.typed.mode in modes]
    cycles = [CycleCompare(p) for p in proposals]
    outside: list[PulsarMove] = []
    reports: dict[str, dict[str, Any]] = {}
    requested: dict[str, str | None] = {}  # bundle -> destination of our newest request
    for record in ordered:
        event, ts = record.envelope.typed, record.envelope.ts_ms
        if isinstance(event, LoadReported):
            reports[str(event.broker_id)] = {"ts_ms": ts, **dict(event.broker_load)}
        elif isinstance(event, SheddingSkipped):
            skipped = _cycle_of(cycles, ts)
            if skipped is not None:
                skipped.pulsar_skips.append(str(event.reason))
        elif isinstance(event, ExecutionRequested):
            requested[event.bundle] = event.dst
        elif isinstance(event, TransferPrepared | UnloadRequested) and event.reason == PULSAR_REASON:
            dst = event.dst if isinstance(event, TransferPrepared) else None
            if requested.pop(str(event.bundle), False) is not False:
                continue  # Pulsar executing a request of ours, not its own shedder
            move = PulsarMove(str(event.bundle), str(event.src), dst, ts,
                              record.envelope.causation_id or f"{record.partition}:{record.offset}")
            cycle = _cycle_of(cycles, ts)
            if cycle is None:
                outside.append(move)
                continue
            if not cycle.pulsar:
                cycle.pulsar_saw = {b: dict(v) for b, v in sorted(reports.items())}
            cycle.pulsar.append(move)
    strategy = proposals[0].strategy if proposals else ""
    return AdviseReport(cycles, outside, strategy)


def _cycle_of(cycles: list[CycleCompare], ts_ms: int) -> CycleCompare | None:
    """The cycle whose window holds ``ts_ms``: from its run to the next run (the last one's as
    wide as the one before it; a lone cycle's never ends)."""
    starts = [c.proposal.run_ms for c in cycles]
    index = bisect.bisect_right(starts, ts_ms) - 1
    if index < 0:
        return None
    if index == len(cycles) - 1 and len(cycles) > 1 and ts_ms >= 2 * starts[-1] - starts[-2]:
        return None
    return cycles[index]


# -- drive: executions and their outcomes ------------------------------------------------------


@dataclass
class ExecutionRow:
    request: ExecutionRequested
    requested_ms: int
    decided_ms: int
    answer: str = ""
    outcome: str = ""
    detail: str = ""
    owned_ms: int | None = None
    """When Pulsar's channel showed it Owned at the destination (the confirming record's time)."""

    @property
    def decision_to_owned_ms(self) -> int | None:
        return None if self.owned_ms is None else self.owned_ms - self.decided_ms


def executions(records: Iterable[Record]) -> list[ExecutionRow]:
    """Every execution of the log, in request order, with its answer and outcome."""
    rows: dict[str, ExecutionRow] = {}
    decided: dict[str, int] = {}
    owned_at: dict[str, int] = {}
    for record in _ordered(records):
        event, ts = record.envelope.typed, record.envelope.ts_ms
        if isinstance(event, ProposalRecorded):
            decided[event.proposal_id] = event.run_ms
        elif isinstance(event, ExecutionRequested):
            rows[event.execution_id] = ExecutionRow(event, ts, decided.get(event.proposal_id, ts))
        elif isinstance(event, ExecutionAccepted | ExecutionUnanswered | ExecutionRefused):
            row = rows.get(event.execution_id)
            if row is not None:
                row.answer = (f"{event.status} {event.message}".strip()
                              if not isinstance(event, ExecutionUnanswered) else f"no answer: {event.error}")
                if isinstance(event, ExecutionRefused):
                    row.outcome = "refused"
        elif isinstance(event, ExecutionConfirmed | ExecutionFailed):
            row = rows.get(event.execution_id)
            if row is None:
                continue
            row.outcome = "confirmed" if isinstance(event, ExecutionConfirmed) else event.reason
            row.detail = event.evidence if isinstance(event, ExecutionConfirmed) else event.detail
            if isinstance(event, ExecutionConfirmed):
                owned_at[event.execution_id] = row.requested_ms + event.waited_ms
    for execution_id, when in owned_at.items():
        rows[execution_id].owned_ms = when
    return sorted(rows.values(), key=lambda r: r.requested_ms)


# -- rendering ---------------------------------------------------------------------------------


def _moves(moves: Iterable[ProposedMove | PulsarMove]) -> str:
    return ", ".join(f"{m.bundle.rsplit('/', 1)[-1]} {m.source}->{m.destination or '-'}" for m in moves) or "-"


def _broker_line(name: str, ours: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None) -> str:
    mine = "-" if ours is None else (f"ema {ours.get('weighted_max_ema', 0):.3f} "
                                     f"tput {float(ours.get('msg_throughput', 0)) / 2**20:.2f} MB/s")
    pulsar = theirs.get("pulsar") or {} if theirs else {}
    if theirs is None:
        other = "-"
    else:
        tput = (float(theirs.get("msg_throughput_in", 0)) + float(theirs.get("msg_throughput_out", 0))) / 2**20
        ema = pulsar.get("weightedMaxEMA")
        other = (f"ema {float(ema):.3f} " if ema is not None else "") + f"tput {tput:.2f} MB/s"
    return f"    {name}: ours {mine} | Pulsar's {other}"


def render_advise(report: AdviseReport) -> str:
    s = report.summary()
    lines = [f"advise ({report.strategy or 'no proposals'}): {s['cycles']} cycles, "
             f"{s['cycles_agreeing']} agree ({s['cycle_agreement']:.0%}); moves: ours {s['ours']}, "
             f"Pulsar's {s['pulsar']}, same {s['matched']} (agreement {s['agreement']:.0%}; "
             f"destination differs {s['destination_differs']}); Pulsar's moves outside every "
             f"cycle: {s['pulsar_outside_cycles']}; Pulsar's runs seen in {s['pulsar_runs_seen']} cycles, "
             f"the same skip reason in {s['same_skip_reason']}"]
    for cycle in report.cycles:
        p = cycle.proposal
        verdict = "agree" if cycle.agrees else "DIFFER"
        lines.append(f"{iso(p.run_ms)} {p.proposal_id} {verdict}: ours [{_moves(cycle.ours)}]"
                     f"{'' if cycle.ours else ' (' + str(p.skip) + ')'} | Pulsar's [{_moves(cycle.pulsar)}]"
                     f"{_skips(cycle)}")
        if not cycle.agrees:
            for broker in sorted(set(p.brokers) | set(cycle.pulsar_saw)):
                lines.append(_broker_line(broker, p.brokers.get(broker), cycle.pulsar_saw.get(broker)))
            for move in cycle.ours:
                inputs = move.decision.get("inputs") or {}
                shown = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(inputs.items())
                                  if not isinstance(v, list | dict))
                lines.append(f"    ours {move.bundle}: {move.reason} {shown}")
    return "\n".join(lines)


def _skips(cycle: CycleCompare) -> str:
    """Pulsar's skip reasons in a cycle's window, as the line shows them."""
    if cycle.pulsar or not cycle.pulsar_skips:
        return ""
    return " (" + ", ".join(cycle.pulsar_skips) + ")"


def render_drive(rows: list[ExecutionRow]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.outcome or "open"] = counts.get(row.outcome or "open", 0) + 1
    lines = [f"drive: {len(rows)} executions: "
             + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none")]
    for row in rows:
        r = row.request
        took = "" if row.decision_to_owned_ms is None else f" decision->Owned {row.decision_to_owned_ms} ms"
        lines.append(f"{iso(row.requested_ms)} {r.execution_id} {r.kind} {r.bundle} {r.src} -> "
                     f"{r.dst or '(split)'}: {row.answer or '-'}; {row.outcome or 'open'}{took} {row.detail}".rstrip())
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def to_json(report: AdviseReport, rows: list[ExecutionRow]) -> dict[str, Any]:
    return {
        "advise": {"summary": report.summary(),
                   "cycles": [{"proposal": c.proposal.to_event().to_payload(), "agrees": c.agrees,
                               "pulsar": [m.to_dict() for m in c.pulsar], "pulsar_saw": c.pulsar_saw,
                               "pulsar_skips": c.pulsar_skips}
                              for c in report.cycles],
                   "outside": [m.to_dict() for m in report.outside]},
        "drive": [{"execution": r.request.to_payload(), "requested_ms": r.requested_ms,
                   "answer": r.answer, "outcome": r.outcome or "open", "detail": r.detail,
                   "decision_to_owned_ms": r.decision_to_owned_ms} for r in rows]}


_STYLE = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;vertical-align:top}"
          ".DIFFER{background:#fde2e2}.agree{background:#e6f4ea}")


def render_html(report: AdviseReport, rows: list[ExecutionRow]) -> str:
    """One self-contained page: the summary, each cycle side by side, and the executions."""
    e = html.escape
    s = report.summary()
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>advise and drive</title>"
           f"<style>{_STYLE}</style></head><body><h1>Advise: ours beside Pulsar's</h1>",
           f"<p>{e(report.strategy or 'no proposals')}: {s['cycles']} cycles, {s['cycles_agreeing']} agree; "
           f"moves ours {s['ours']}, Pulsar's {s['pulsar']}, same {s['matched']} "
           f"(agreement {s['agreement']:.0%}, destination differs {s['destination_differs']}); "
           f"Pulsar's moves outside every cycle: {s['pulsar_outside_cycles']}</p>",
           "<table><tr><th>cycle</th><th>verdict</th><th>ours</th><th>Pulsar's</th><th>load each side saw</th></tr>"]
    for c in report.cycles:
        verdict = "agree" if c.agrees else "DIFFER"
        saw = "<br>".join(e(_broker_line(b, c.proposal.brokers.get(b), c.pulsar_saw.get(b)).strip())
                          for b in sorted(set(c.proposal.brokers) | set(c.pulsar_saw)))
        ours = e(_moves(c.ours)) + ("" if c.ours else f" ({e(str(c.proposal.skip))})")
        out.append(f"<tr class='{verdict}'><td>{e(iso(c.proposal.run_ms))}<br>{e(c.proposal.proposal_id)}</td>"
                   f"<td>{verdict}</td><td>{ours}</td><td>{e(_moves(c.pulsar) + _skips(c))}</td><td>{saw}</td></tr>")
    out.append("</table><h1>Drive: executions</h1><table><tr><th>requested</th><th>execution</th>"
               "<th>move</th><th>Pulsar's answer</th><th>outcome</th><th>decision to Owned</th></tr>")
    for r in rows:
        q = r.request
        took = "-" if r.decision_to_owned_ms is None else f"{r.decision_to_owned_ms} ms"
        out.append(f"<tr><td>{e(iso(r.requested_ms))}</td><td>{e(q.execution_id)}</td>"
                   f"<td>{e(q.kind)} {e(q.bundle)} {e(q.src)} &rarr; {e(q.dst or '(split)')}</td>"
                   f"<td>{e(r.answer or '-')}</td><td>{e(r.outcome or 'open')} {e(r.detail)}</td><td>{took}</td></tr>")
    out.append("</table></body></html>")
    return "\n".join(out)


__all__ = ["ADVISE", "DRIVE", "AdviseReport", "ExecutionRow", "PulsarMove", "advise_report", "executions",
           "render_advise", "render_drive", "render_html", "to_json"]
