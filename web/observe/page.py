"""The dashboard's page as the server sends it: already drawn from the current state.

``render(state, role)`` fills ``static/index.html``: the header's pills, the balancer strip, the
brokers, the "why not" panel, every namespace's strip, the moves and the anomalies are HTML in the
answer, so the first paint shows the cluster without waiting for the event feed; the state itself
rides along as JSON (``#initial-state``) for the script, which draws the charts at once and then
redraws on every push with the same markup (``static/dashboard.js``).

Invariants: every value from the cluster is escaped (``html.escape``; the JSON with ``<`` escaped
so no text closes its script element); the markup's classes and data attributes are the script's;
with a role (a logged-in session or a bearer token) the header names it and offers "Log out".
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

TEMPLATE = Path(__file__).resolve().parent / "static" / "index.html"
HASH_SPACE = 1 << 32
MIN_BUNDLE_PX = 8
"""Every bundle is at least this wide in the strip, so a split's small children can be clicked."""
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
           "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#d62728")
UNOWNED = "#c9ced6"
HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY",
           "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                      "img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"}
"""The page's and the login form's headers: never cached (it holds the cluster's state), never
framed by another site, and no script but the service's own."""
BUNDLE_CELL = ' class="bundle"'


def render(state: Mapping[str, Any], role: str | None) -> str:
    """The page with ``state`` drawn in it (see the module docstring)."""
    colours = {b: PALETTE[i % len(PALETTE)] for i, b in enumerate(sorted(x["id"] for x in state["brokers"]))}
    parts = {
        "leader": _e(f"leader: {state['leader']['id'] or '-'} (epoch {state['leader']['epoch']})"),
        "clock": _e(f"cluster time: {iso(state['now_ms'])} ({state['host']})"),
        "totals": _e(f"{len(state['brokers'])} brokers, {state['totals']['unloads']} unloads and "
                     f"transfers, {state['totals']['splits']} splits"),
        "account": _account(role),
        "brokers": "".join(_broker(b, colours) for b in state["brokers"]),
        "whynot": why_not_html(state["why_not"]),
        "namespaces": "".join(_namespace(ns, colours) for ns in state["namespaces"]),
        "legend": "".join(f'<span><i style="background:{c}"></i>{_e(b)}</span>' for b, c in colours.items()),
        "moves": "".join(_move(m) for m in state["moves"]),
        "state": orjson.dumps(state).decode().replace("<", "\\u003c"),
    }
    page = TEMPLATE.read_text(encoding="utf-8")
    for name, markup in parts.items():
        page = page.replace(f"<!--{name}-->", markup, 1)
    return page


def iso(ms: int | None) -> str:
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _account(role: str | None) -> str:
    if role is None:
        return ""
    return (f'<form method="post" action="/logout" id="logout"><span class="pill">{_e(role)}</span>'
            '<button type="submit">Log out</button></form>')


def _broker(broker: Mapping[str, Any], colours: Mapping[str, str]) -> str:
    series = broker["series"]
    last = series[-1] if series else None
    meta = (f"{broker['bundles']} bundles, {last[1]:.1f} % max usage, {round(last[2])} msg/s"
            if last else f"{broker['bundles']} bundles, no report yet")
    return (f'<div class="broker" data-broker="{_e(broker["id"])}" style="border-left-color:'
            f'{colours.get(broker["id"], UNOWNED)}"><div class="name">{_e(broker["id"])}</div>'
            f'<div class="meta">{_e(meta)}</div><div class="chart"></div></div>')


def why_not_lines(entry: Mapping[str, Any]) -> list[str]:
    """The panel's lines for one strategy (the script writes the same ones)."""
    lines = [f"{entry['strategy']}: skipped {entry['runs']} run{'s' if entry['runs'] != 1 else ''} in a row "
             f"as {entry['reason']} (since {iso(entry['since_ms'])}, last {iso(entry['last_ms'])})"]
    if entry["meaning"]:
        lines.append(f"{entry['reason']}: {entry['meaning']}")
    figures = entry["figures"]
    if figures:
        lines.append(f"highest {figures['highest']['broker']} {figures['highest']['percent']:.1f} %, "
                     f"lowest {figures['lowest']['broker']} {figures['lowest']['percent']:.1f} %, "
                     f"mean {figures['mean_percent']:.1f} %, spread (std) {figures['std_percent']:.1f} %")
    if entry.get("shedder"):
        lines.append(f"the shedder's own figures at its last run (smoothed): {entry['shedder']}")
    rule = entry["rule"]
    lines.append(f"it {rule['text']} ({rule['key']}={rule['value']})")
    return lines


def why_not_html(entries: Iterable[Mapping[str, Any]]) -> str:
    out = []
    for entry in entries:
        head, *rest = why_not_lines(entry)
        totals = ", ".join(f"{r} {n}" for r, n in sorted(entry["totals"].items()))
        out.append(f'<div class="whynot" data-strategy="{_e(entry["strategy"])}"><div class="head">'
                   f'{_e(head)}</div>' + "".join(f"<div>{_e(line)}</div>" for line in rest)
                   + f'<div class="note">every skip in the log: {_e(totals)}</div></div>')
    return "".join(out) or '<div class="empty">no shedding run has skipped yet</div>'


def _namespace(ns: Mapping[str, Any], colours: Mapping[str, str]) -> str:
    cells = []
    for b in ns["bundles"]:
        share = 100 * (b["upper"] - b["lower"]) / HASH_SPACE
        classes = "bundle" + ("" if b["state"] == "Owned" else " inflight")
        cells.append(f'<div class="{classes}" data-bundle="{_e(b["bundle"])}" data-owner="{_e(b["owner"] or "")}"'
                     f' title="{_e(b["bundle"])}&#10;{_e(b["state"])} {_e(b["owner"] or "")}"'
                     f' tabindex="0" role="button" aria-label="{_e(b["bundle"])}, {_e(b["state"])} {_e(b["owner"] or "")}"'
                     f' style="flex:{share:.6f} 1 0;min-width:{MIN_BUNDLE_PX}px;'
                     f'background:{colours.get(b["owner"] or "", UNOWNED)}"></div>')
    return (f'<div class="ns-name">{_e(ns["name"])} ({len(ns["bundles"])} bundles)</div>'
            f'<div class="strip" data-namespace="{_e(ns["name"])}">{"".join(cells)}</div>')


def _move(move: Mapping[str, Any]) -> str:
    dst = move["dst"] or ("-" if move["kind"] == "split" else "(placement)")
    cells = (iso(move["ts_ms"]), move["kind"], move["bundle"], move["src"] or "-", dst, move["reason"])
    tds = "".join(f"<td{BUNDLE_CELL if i == 2 else ''}>{_e(c)}</td>" for i, c in enumerate(cells))
    return f'<tr class="move" data-bundle="{_e(move["bundle"])}">{tds}</tr>'
