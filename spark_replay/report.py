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
    return table(f"audit: {report.events} records, {len(report.violations)} violation(s)", frame)


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


def write_report(directory: str | Path, result: WhatIf, audit: AuditReport | None = None) -> Path:
    """PNGs and ``report.html`` (self-contained) into ``directory``; returns the HTML path."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    images = plots(result)
    for name, data in images.items():
        (root / name).write_bytes(data)
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>bundle-balancer replay</title>",
             "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px}</style></head><body>",
             "<h1>What-if</h1>", result.summary.to_html(index=False, na_rep="-")]
    if audit is not None:
        parts += [f"<h1>Audit: {audit.events} records, {len(audit.violations)} violation(s)</h1>",
                  pd.DataFrame([v.to_dict() for v in audit.violations]).to_html(index=False)]
    for name, data in images.items():
        parts.append(f"<h2>{html.escape(name)}</h2><img alt='{html.escape(name)}' "
                     f"src='data:image/png;base64,{base64.b64encode(data).decode()}'>")
    parts.append("</body></html>")
    path = root / "report.html"
    path.write_text("\n".join(parts))
    return path
