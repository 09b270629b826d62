"""Replay output: terminal tables (rich), PNG plots (matplotlib) and one self-contained HTML file.

Invariants: plots are drawn with the non-interactive Agg backend (no display needed); the HTML
embeds every PNG as base64 and links nothing, so the file can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from balancer.bundles import namespace_of

if TYPE_CHECKING:
    from spark_replay.audit import AuditReport
    from spark_replay.whatif import WhatIf


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def table(title: str, frame: pd.DataFrame, columns: Sequence[str] | None = None, *,
          wrapped: Mapping[str, int | None] | None = None) -> Table:
    """A rich table of ``frame``; cells never wrap but those of the ``wrapped`` columns (column ->
    its least width), which fold rather than being cut."""
    shown = list(columns or frame.columns)
    folds = dict(wrapped or {})
    out = Table(title=title)
    for column in shown:
        out.add_column(column, no_wrap=column not in folds, min_width=folds.get(column),
                       overflow="fold" if column in folds else "ellipsis")
    for row in frame[shown].itertuples(index=False):
        out.add_row(*(_cell(v) for v in row))
    return out


VIOLATION_HEADERS = {"check": "check", "topic": "topic", "partition": "partition",
                     "offset": "offset", "related_offset": "related offset", "key": "key",
                     "bundle": "bundle", "ts": "time (UTC)", "detail": "detail"}


def checks_frame(report: AuditReport) -> pd.DataFrame:
    """Every check the audit ran, what it holds, and how many violations it found."""
    from spark_replay.audit import CHECKS

    counts = report.by_check()
    return pd.DataFrame([{"check": name, "what it holds": what, "violations": counts.get(name, 0)}
                         for name, what in CHECKS if name in report.checks])


def violations_frame(report: AuditReport) -> pd.DataFrame:
    """The violations with labelled columns, instants as ISO-8601 UTC and blanks as ``-``."""
    from events.times import iso

    rows = [{VIOLATION_HEADERS[k]: (iso(v) if k == "ts" and v is not None else v)
             for k, v in violation.to_dict().items()} for violation in report.violations]
    return pd.DataFrame(rows, columns=list(VIOLATION_HEADERS.values()))


def audit_headline(report: AuditReport) -> str:
    verdict = "every check passed" if report.clean else \
        ", ".join(f"{name}: {n}" for name, n in report.by_check().items())
    return (f"audit: {report.events:,} records, {len(report.violations)} violation(s) "
            f"({verdict})")


def audit_tables(report: AuditReport) -> list[Table]:
    """The checks that ran (always), then the violations (only when there are some)."""
    checks = table(audit_headline(report), checks_frame(report))
    checks.caption = "\n".join([in_flight_rule(report), *report.notes])
    if report.clean:
        return [checks]
    # The long cells (a topic name, the detail) fold onto more lines, so the ones a reader
    # looks a violation up by (check, offsets, key, bundle, time) stay whole at any width.
    return [checks, table("violations, in log order", violations_frame(report),
                          wrapped={"topic": 12, "detail": 24})]


def in_flight_rule(report: AuditReport) -> str:
    """How long a move could stay in flight, and why that long."""
    median = "no completed move" if report.median_handover_ms is None \
        else f"median handover {report.median_handover_ms:,} ms"
    return f"in-flight bound {report.in_flight_bound_ms:,} ms; {median}"


# -- the what-if table -----------------------------------------------------------------------------

SUMMARY_HEADERS = ("#", "configuration", "max/mean\n(settled)", "std, pp\n(settled)",
                   "moves", "flaps", "settled\nat (min)", "reproduced\n(%)", "recorded\ndecisions",
                   "not\nreplayed", "note")
"""Two-line headers: the quantity, then its unit (an HTML table shows them on one line)."""
SETTLED_NOTE = ("settled: the median over the last third of the recording; max/mean 1.000 is an even "
                "spread; std in percentage points (pp) of broker load; settled at: the first minute "
                "from which max/mean stays at or under 1.25")


def _blank(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and pd.isna(value))


def _minutes(cycles: Any, interval_ms: int) -> str:
    return "never" if _blank(cycles) else f"{int(cycles) * interval_ms / 60_000:g}"


def summary_frame(result: WhatIf) -> pd.DataFrame:
    """The what-if summary for people: labelled columns with units, ranks, the best configuration
    and identical ones named, ``-`` where a column does not apply (never ``None``)."""
    interval = result.recording.interval_ms
    records = result.summary.to_dict(orient="records")
    rank_of = {str(r["config"]): k for k, r in enumerate(records, start=1)}
    rows = []
    for rank, row in enumerate(records, start=1):
        recorded = str(row["config"]).startswith("as recorded")
        note = "" if _blank(row.get("same_as")) else _same(str(row["same_as"]), rank_of)
        if rank == 1 and not recorded:
            note = "best" + (f"; {note}" if note else "")
        reproduced = row.get("reproduced")
        rows.append(dict(zip(SUMMARY_HEADERS, [
            "-" if recorded else str(rank), row["config"], f"{row['max_over_mean']:.3f}",
            f"{100 * row['std']:.1f}", str(int(row["moves"])), str(int(row["flaps"])),
            _minutes(row.get("settle_cycles"), interval),
            "-" if _blank(reproduced) else f"{100 * float(reproduced):.0f}",
            "-" if _blank(row.get("decisions")) else str(int(row["decisions"])),
            "-" if _blank(row.get("not_replayed")) else str(row["not_replayed"]),
            note or "-"], strict=True)))
    return pd.DataFrame(rows, columns=list(SUMMARY_HEADERS))


def _same(text: str, rank_of: Mapping[str, int]) -> str:
    """``same settings as LABEL`` -> ``same settings as #3`` (the rank shown in the ``#`` column)."""
    for kind in ("settings", "result"):
        prefix = f"same {kind} as "
        if text.startswith(prefix) and text[len(prefix):] in rank_of:
            return f"{prefix}#{rank_of[text[len(prefix):]]}"
    return text


def best_line(result: WhatIf) -> str:
    """One sentence naming the best configuration against the recording."""
    rows = result.summary.to_dict(orient="records")
    simulated = [r for r in rows if not str(r["config"]).startswith("as recorded")]
    if not simulated:
        return "best: no configuration was simulated"
    best = simulated[0]
    ties = [r["config"] for r in simulated[1:]
            if (r["max_over_mean"], r["moves"]) == (best["max_over_mean"], best["moves"])]
    also = f" (tied with {', '.join(ties)})" if ties else ""
    recorded = next((r for r in rows if str(r["config"]).startswith("as recorded")), None)
    against = "" if recorded is None else \
        f"; as recorded: {recorded['max_over_mean']:.3f} with {int(recorded['moves'])} moves"
    return (f"best: {best['config']}{also}: max/mean {best['max_over_mean']:.3f} settled with "
            f"{int(best['moves'])} moves and {int(best['flaps'])} flaps{against}")


def whatif_table(result: WhatIf) -> Table:
    out = table("what-if (ranked by settled max/mean, then moves)", summary_frame(result),
                wrapped={**dict.fromkeys(SUMMARY_HEADERS), "configuration": 30, "note": 12})
    out.caption = f"{best_line(result)}\n{SETTLED_NOTE}"
    return out


def print_table(console: Console, renderable: Table) -> None:
    console.print(renderable)


# -- plots -------------------------------------------------------------------------------------

STYLES = ("-", "--", "-.", ":")
Line = tuple[str, list[int], list[float], list[int]]
"""One line of the plots: label, cycles, the most loaded broker's usage, cumulative moves."""


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def _series(result: WhatIf) -> list[Line]:
    """Per line: (label, cycles, most loaded broker's usage, cumulative moves); the recording last."""
    out = []
    for config_id, group in result.cycles.sort_values("cycle").groupby("config_id"):
        peak = [max(json.loads(u).values(), default=0.0) for u in group["usages"]]
        out.append((result.grid[int(config_id)].label, list(group["cycle"]), peak,
                    [int(n) for n in group["moves"].cumsum()]))
    recorded = [max(u.values(), default=0.0) for u in result.recording.usages]
    moves = pd.Series([m[0] for m in result.recording.moves], dtype="int64").value_counts()
    cumulative = [int(moves[moves.index <= c].sum()) for c in range(len(recorded))]
    out.append(("as recorded", list(range(len(recorded))), recorded, cumulative))
    return out


def _active_until(series: list[Line]) -> int:
    """The cycle after which no line moves a bundle any more (0: nothing moved)."""
    last = 0
    for _, cycles, _, moves in series:
        changed = [c for c, before, after in zip(cycles[1:], moves, moves[1:], strict=False) if after != before]
        last = max([last, *changed, *(cycles[:1] if moves[:1] and moves[0] else [])])
    return last


def _panel(ax: Any, series: list[Line], times: dict[str, Any], index: int, until: int | None) -> None:
    """One panel: every line of ``series`` (its usage, ``index`` 2, or its moves, 3) up to cycle
    ``until`` (None: all), each in its own colour, style and width, the recording in black."""
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    for n, (label, cycles, usage, moves) in enumerate(series):
        values = [100 * v for v in usage] if index == 2 else moves
        shown = [(at, v) for c, at, v in zip(cycles, times[label], values, strict=True)
                 if until is None or c <= until]
        recorded = label == "as recorded"
        ax.plot([s[0] for s in shown], [s[1] for s in shown], label=label,
                color="black" if recorded else plt.get_cmap("tab10")(n % 10),
                linestyle="--" if recorded else STYLES[n % len(STYLES)],
                linewidth=max(0.9, 2.6 - 0.35 * n), alpha=0.9, zorder=10 - n)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz="UTC"))  # type: ignore[no-untyped-call]
    ax.grid(alpha=0.3)


def plots(result: WhatIf) -> dict[str, bytes]:
    """name -> PNG: the most loaded broker over time per configuration, and moves over time; each
    drawn against UTC time, every line in its own style (a line under another stays visible),
    with a second panel zoomed on the stretch where the moves happen when that is short."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = _series(result)
    start, step = result.recording.start_ms, result.recording.interval_ms
    span = max((len(cycles) for _, cycles, _, _ in series), default=1)
    active = _active_until(series)
    until = active + max(3, active // 4) if 0 < active < span * 0.4 else None
    times = {label: pd.to_datetime([start + c * step for c in cycles], unit="ms", utc=True)
             for label, cycles, _, _ in series}
    out: dict[str, bytes] = {}
    for name, index, ylabel, title in (
            ("broker_load.png", 2, "most loaded broker (% of its capacity)", "most loaded broker over time"),
            ("moves.png", 3, "bundle moves (cumulative)", "moves over time")):
        fig, axes = plt.subplots(1, 1 if until is None else 2, squeeze=False,
                                 figsize=(10, 4.2) if until is None else (13, 4.2),
                                 gridspec_kw=None if until is None else {"width_ratios": [3, 2]})
        for k, ax in enumerate(axes[0]):
            _panel(ax, series, times, index, None if k == 0 else until)
            ax.set(xlabel="time (UTC)", ylabel=ylabel, title=title if k == 0 else
                   f"zoom: the first {(until or 0) * step / 60_000:g} min, where the moves are")
        axes[0][-1].legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        out[name] = _png(fig)
        plt.close(fig)
    return out


def gantt(intervals: Sequence[dict[str, Any]], end_ms: int) -> dict[str, bytes]:
    """name -> PNG: per namespace, one row per bundle (in hash order), a bar per owner interval,
    coloured by owner; an interval still open at the end of the log runs to ``end_ms``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    by_namespace: dict[str, list[dict[str, Any]]] = {}
    for row in intervals:
        by_namespace.setdefault(namespace_of(str(row["bundle"])), []).append(row)
    out: dict[str, bytes] = {}
    for namespace, rows in sorted(by_namespace.items()):
        bundles = sorted({str(r["bundle"]) for r in rows}, key=lambda b: b.rsplit("/", 1)[1])
        owners = sorted({str(r["owner"]) for r in rows})
        colours = {o: plt.get_cmap("tab10")(i % 10) for i, o in enumerate(owners)}
        start = min(int(r["from_ts"]) for r in rows)
        fig, ax = plt.subplots(figsize=(10, max(2.5, 0.22 * len(bundles) + 1.2)))
        for y, bundle in enumerate(bundles):
            for r in (r for r in rows if r["bundle"] == bundle):
                begin = (int(r["from_ts"]) - start) / 60_000
                until = ((int(r["to_ts"]) if r["to_ts"] is not None else end_ms) - start) / 60_000
                ax.broken_barh([(begin, max(until - begin, 0.01))], (y - 0.4, 0.8),
                               color=colours[str(r["owner"])])
        ax.set_yticks(range(len(bundles)), [b.rsplit("/", 1)[1] for b in bundles], fontsize=7)
        ax.invert_yaxis()  # the hash space from the top down
        ax.set(xlabel="minutes since the first owner", title=f"ownership of {namespace}")
        ax.legend(handles=[Patch(color=colours[o]) for o in owners],
                  labels=owners, fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
        out[f"ownership-{namespace.replace('/', '-')}.png"] = _png(fig)
        plt.close(fig)
    return out


def _audit_html(audit: AuditReport) -> list[str]:
    head = (f"<h1>Audit: {audit.events} records, {len(audit.violations)} violation(s)</h1>"
            f"<p>{html.escape(in_flight_rule(audit))}</p>")
    checks = checks_frame(audit).to_html(index=False)
    if audit.clean:
        return [head, "<p>Every check passed: no violation in the log. The checks it ran:</p>", checks]
    return [head, checks, "<h2>Violations, in log order</h2>",
            violations_frame(audit).to_html(index=False, na_rep="-")]


def write_report(directory: str | Path, result: WhatIf, audit: AuditReport | None = None,
                 intervals: Sequence[dict[str, Any]] | None = None, end_ms: int | None = None) -> Path:
    """PNGs and ``report.html`` (self-contained) into ``directory``; returns the HTML path. With
    ``audit``, its findings; with ``intervals`` (``audit.timeline``'s rows), a Gantt chart of
    ownership per namespace up to ``end_ms`` (the log's last record; default: the last change)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    images = plots(result)
    last = max((int(r["to_ts"] or r["from_ts"]) for r in intervals or ()), default=0)
    charts = gantt(intervals, max(last, end_ms or 0)) if intervals else {}
    for name, data in {**images, **charts}.items():
        (root / name).write_bytes(data)
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>bundle-balancer replay</title>",
             "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>",
             "<h1>What-if</h1>", f"<p><b>{html.escape(best_line(result))}</b></p>",
             summary_frame(result).to_html(index=False, na_rep="-"),
             f"<p>{html.escape(SETTLED_NOTE)}</p>"]
    if audit is not None:
        parts += _audit_html(audit)
    for title, shown in (("Plots", images), ("Ownership", charts)):
        if shown:
            parts.append(f"<h1>{title}</h1>")
        for name, data in shown.items():
            parts.append(f"<h2>{html.escape(name)}</h2><img alt='{html.escape(name)}' "
                         f"src='data:image/png;base64,{base64.b64encode(data).decode()}'>")
    parts.append("</body></html>")
    path = root / "report.html"
    path.write_text("\n".join(parts))
    return path
