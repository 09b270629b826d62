"""Replay output: terminal tables (rich), PNG plots (matplotlib) and one self-contained HTML file.

Invariants: plots are drawn with the non-interactive Agg backend (no display needed); the HTML
embeds every PNG as base64 and links nothing, so the file can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from spark_replay.audit import AuditReport
    from spark_replay.whatif import WhatIf


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def table(title: str, frame: pd.DataFrame, columns: Sequence[str] | None = None) -> Table:
    shown = list(columns or frame.columns)
    out = Table(title=title)
    for column in shown:
        out.add_column(column, no_wrap=True)
    for row in frame[shown].itertuples(index=False):
        out.add_row(*(_cell(v) for v in row))
    return out


def audit_table(report: AuditReport) -> Table:
    frame = pd.DataFrame([v.to_dict() for v in report.violations],
                         columns=["check", "topic", "partition", "offset", "related_offset", "key",
                                  "bundle", "ts", "detail"])
    out = table(f"audit: {report.events} records, {len(report.violations)} violation(s)", frame)
    out.caption = in_flight_rule(report)
    return out


def in_flight_rule(report: AuditReport) -> str:
    """How long a move could stay in flight, and why that long."""
    median = "no completed move" if report.median_handover_ms is None \
        else f"median handover {report.median_handover_ms:,} ms"
    return f"in-flight bound {report.in_flight_bound_ms:,} ms; {median}"


def whatif_table(result: WhatIf) -> Table:
    return table("what-if (ranked by settled max/mean, then moves)", result.summary)


def print_table(console: Console, renderable: Table) -> None:
    console.print(renderable)


# -- plots -------------------------------------------------------------------------------------


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return buf.getvalue()


def plots(result: WhatIf) -> dict[str, bytes]:
    """name -> PNG: max broker load over time per strategy, and moves over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, bytes] = {}
    fig, ax = plt.subplots(figsize=(9, 4))
    for config_id, group in result.cycles.sort_values("cycle").groupby("config_id"):
        peak = [max(json.loads(u).values(), default=0.0) for u in group["usages"]]
        ax.plot(group["cycle"], peak, label=result.grid[int(config_id)].label)
    recorded = [max(u.values(), default=0.0) for u in result.recording.usages]
    ax.plot(range(len(recorded)), recorded, "k--", label="as recorded")
    ax.set(xlabel="shedding cycle", ylabel="most loaded broker (usage)", title="broker load over time")
    ax.legend(fontsize="small")
    out["broker_load.png"] = _png(fig)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(9, 4))
    for config_id, group in result.cycles.sort_values("cycle").groupby("config_id"):
        ax.plot(group["cycle"], group["moves"].cumsum(), label=result.grid[int(config_id)].label)
    moves = pd.Series([m[0] for m in result.recording.moves], dtype="int64").value_counts()
    cumulative = [int(moves[moves.index <= c].sum()) for c in range(len(result.recording.trace))]
    ax.plot(range(len(cumulative)), cumulative, "k--", label="as recorded")
    ax.set(xlabel="shedding cycle", ylabel="moves (cumulative)", title="moves over time")
    ax.legend(fontsize="small")
    out["moves.png"] = _png(fig)
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
        by_namespace.setdefault(str(row["bundle"]).rsplit("/", 1)[0], []).append(row)
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
    if audit.clean:
        return [head, "<p>Every check passed: no violation in the log.</p>"]
    counts = ", ".join(f"{html.escape(k)}: {n}" for k, n in sorted(audit.by_check().items()))
    return [head, f"<p>{counts}</p>",
            pd.DataFrame([v.to_dict() for v in audit.violations]).to_html(index=False, na_rep="-")]


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
             "<h1>What-if</h1>", result.summary.to_html(index=False, na_rep="-")]
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
