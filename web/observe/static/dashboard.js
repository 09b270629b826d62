// The live dashboard: the server sends the page already drawn with the state inside it
// (#initial-state); this script draws the charts from that state at once, then redraws on every
// push of /bb/v1/dashboard/events (server-sent events). Plain script, no library, no build step:
// every element is made with the DOM API and text is set with textContent, so nothing from the
// cluster is ever parsed as HTML. Requests are same-origin: the session cookie of /login rides
// along; a feed that answers 401 sends the browser back to the login form.
"use strict";

const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                 "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#d62728"];
const UNOWNED = "#c9ced6";
const HASH_SPACE = 4294967296;
const MIN_BUNDLE_PX = 8;  // as web/observe/page.py: a split's small children stay clickable
const SVG = "http://www.w3.org/2000/svg";
let colours = {};
let selected = null;
let lastMoveKey = null;

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function iso(ms) {
  return ms ? new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z") : "-";
}

function hhmm(ms) {
  return new Date(ms).toISOString().slice(11, 16);
}

function colourOf(broker) {
  return broker && colours[broker] ? colours[broker] : UNOWNED;
}

function render(state) {
  colours = {};
  state.brokers.map(b => b.id).sort().forEach((id, i) => { colours[id] = PALETTE[i % PALETTE.length]; });
  document.getElementById("leader").textContent =
    `leader: ${state.leader.id || "-"} (epoch ${state.leader.epoch})`;
  document.getElementById("clock").textContent = `cluster time: ${iso(state.now_ms)} (${state.host})`;
  document.getElementById("totals").textContent =
    `${state.brokers.length} brokers, ${state.totals.unloads} unloads and transfers, ${state.totals.splits} splits`;
  renderBalancer(state.balancer);
  refreshProposals(state.balancer);
  renderBrokers(state);
  renderWhyNot(state.why_not);
  renderRanges(state);
  renderMoves(state.moves);
  renderAnomalies(state.anomalies);
}

// The balancer's status strip: its state first, then why (stalled, paused, draining), the throttle's
// figures and the last shedding run.
function renderBalancer(status) {
  const strip = document.getElementById("balancer");
  const state = status ? status.state : "unknown";
  strip.dataset.state = state;
  strip.className = `balancer-strip state-${state}`;
  if (!status) { strip.textContent = "balancer: status not available yet"; return; }
  let head = `balancer: ${state}`;
  if (state === "paused" && status.paused) {
    head += ` until ${iso(status.paused.untilMs)} by ${status.paused.by}: ${status.paused.reason}`;
  } else if (state === "executing" && status.executing) {
    head += ` (${status.executing.done} of ${status.executing.of})`;
  } else if (state === "draining" && status.draining) {
    head += ` (${status.draining.map(d => `${d.broker}: ${d.done} of ${Math.max(d.bundles, d.left)} moved, ` +
                                          `${d.left} left, ${d.ratePerMinute}/min`).join("; ")})`;
  } else if (state === "stalled") {
    head += `: ${(status.stalled || []).join("; ")}`;
  } else if (state === "mirrored") {
    head += `: ${status.detail}`;
  }
  const parts = [head];
  if (status.throttle) {
    const t = status.throttle;
    parts.push(`${t.inFlight} in flight, ${t.queue.length} queued (caps ${t.caps.perBroker}/broker, ` +
               `${t.caps.cluster} cluster, ${t.caps.perMinute}/min)`);
  }
  if (status.lastCycle && status.lastCycle.atMs) {
    parts.push(`last run ${iso(status.lastCycle.atMs)}: ${status.lastCycle.outcome}`);
  }
  if (status.movesLastHour !== null && status.movesLastHour !== undefined) {
    parts.push(`${status.movesLastHour} moves in the last hour`);
  }
  strip.textContent = parts.join(" \u00b7 ");
}

// The waiting proposals, read from /bb/v1/proposals when the status counts any (at most every
// 2 s): each with its moves and the predicted balance, and approve / reject buttons for a
// logged-in super-user (with authentication on, only a super-user gets the page at all; the
// buttons appear where a session's account is shown).
let proposalsAsked = 0;
function refreshProposals(status) {
  const pending = status && status.proposals ? status.proposals.pending : 0;
  const box = document.getElementById("proposals");
  if (!pending && !box.querySelector(".proposal")) return;
  const now = Date.now();
  if (now - proposalsAsked < 2000) return;
  proposalsAsked = now;
  fetch("/bb/v1/proposals", {credentials: "same-origin"})
    .then(r => r.ok ? r.json() : [])
    .then(all => renderProposals(all.filter(p => p.status === "pending")))
    .catch(() => {});
}

function renderProposals(waiting) {
  const box = document.getElementById("proposals");
  box.replaceChildren();
  if (!waiting.length) { box.textContent = "none waiting"; return; }
  const canDecide = document.getElementById("logout") !== null;
  for (const p of waiting) {
    const card = el("div", {class: "proposal", "data-proposal": p.id});
    card.append(el("span", {class: "name"}, `${p.id}: ${p.moves} move(s), ${p.strategy}, computed ${iso(p.runMs)}`));
    if (canDecide) {
      for (const verdict of ["approve", "reject"]) {
        const button = el("button", {type: "button", class: verdict, "data-verdict": verdict}, verdict);
        button.addEventListener("click", () => decide(p.id, verdict, card));
        card.append(button);
      }
    }
    box.append(card);
  }
}

function decide(id, verdict, card) {
  fetch(`/bb/v1/proposals/${encodeURIComponent(id)}/${verdict}`, {
    method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({note: "from the dashboard"}),
  }).then(r => r.json().then(body => {
    card.replaceChildren(el("span", {class: "verdict"},
      r.ok ? `${id}: ${body.event === "ProposalApproved" ? "approved" : "rejected"} by ${body.by}`
           : `${id}: ${body.reason || r.status}`));
    card.dataset.decided = r.ok ? verdict : "refused";
  })).catch(() => {});
}

function renderBrokers(state) {
  const box = document.getElementById("brokers");
  box.replaceChildren();
  for (const broker of state.brokers) {
    const card = el("div", {class: "broker", "data-broker": broker.id});
    card.style.borderLeftColor = colourOf(broker.id);
    const last = broker.series.length ? broker.series[broker.series.length - 1] : null;
    card.append(el("div", {class: "name"}, broker.id));
    card.append(el("div", {class: "meta"}, `${broker.bundles} bundles, ` +
      (last ? `${last[1].toFixed(1)} % max usage, ${Math.round(last[2])} msg/s` : "no report yet")));
    const chart = el("div", {class: "chart"});
    chart.append(usageChart(broker.series, colourOf(broker.id), state.threshold));
    card.append(chart);
    box.append(card);
  }
}

// A broker's max usage over time: a y axis in percent (0 to 100, or more if it went above), a
// time axis in cluster time, and the configured shedder's threshold as a dashed line.
function usageChart(series, colour, threshold) {
  const W = 300, H = 130, L = 34, R = 6, T = 8, B = 20;
  const svg = svgEl("svg", {viewBox: `0 0 ${W} ${H}`, class: "usage", role: "img"});
  const line = threshold && threshold.percent !== null && threshold.percent !== undefined ? threshold.percent : null;
  const top = Math.max(100, line || 0, ...series.map(s => s[1]));
  const y = v => T + (H - T - B) * (1 - v / top);
  for (const tick of [0, 25, 50, 75, 100]) {
    svg.append(svgEl("line", {x1: L, x2: W - R, y1: y(tick), y2: y(tick), class: "grid"}));
    svg.append(svgEl("text", {x: L - 4, y: y(tick) + 3, class: "tick", "text-anchor": "end"}, `${tick}%`));
  }
  svg.append(svgEl("line", {x1: L, x2: L, y1: T, y2: H - B, class: "axis"}));
  svg.append(svgEl("line", {x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis"}));
  if (series.length > 1) {
    const t0 = series[0][0], t1 = series[series.length - 1][0];
    const x = t => L + (W - R - L) * (t - t0) / Math.max(1, t1 - t0);
    const points = series.map(s => `${x(s[0]).toFixed(1)},${y(s[1]).toFixed(1)}`).join(" ");
    svg.append(svgEl("polygon", {points: `${L},${y(0)} ${points} ${W - R},${y(0)}`, fill: colour,
                                 "fill-opacity": "0.2"}));
    svg.append(svgEl("polyline", {points, fill: "none", stroke: colour, "stroke-width": "2"}));
    svg.append(svgEl("text", {x: L, y: H - 6, class: "tick"}, `${hhmm(t0)}`));
    svg.append(svgEl("text", {x: W - R, y: H - 6, class: "tick", "text-anchor": "end"},
                     `${hhmm(t1)} UTC (cluster time)`));
  } else {
    svg.append(svgEl("text", {x: (L + W) / 2, y: H / 2, class: "tick", "text-anchor": "middle"},
                     "waiting for load reports"));
  }
  if (line !== null) {
    svg.append(svgEl("line", {x1: L, x2: W - R, y1: y(line), y2: y(line), class: "threshold"}));
    svg.append(svgEl("text", {x: W - R, y: y(line) - 3, class: "threshold-label", "text-anchor": "end"},
                     `${threshold.strategy} threshold ${line.toFixed(1)} %`));
  }
  return svg;
}

function whyNotLines(entry) {
  const runs = `${entry.runs} run${entry.runs === 1 ? "" : "s"}`;
  const lines = [`${entry.strategy}: skipped ${runs} in a row as ${entry.reason} ` +
                 `(since ${iso(entry.since_ms)}, last ${iso(entry.last_ms)})`];
  if (entry.meaning) lines.push(`${entry.reason}: ${entry.meaning}`);
  const f = entry.figures;
  if (f && f.highest) {
    lines.push(`highest ${f.highest.broker} ${f.highest.percent.toFixed(1)} %, lowest ${f.lowest.broker} ` +
               `${f.lowest.percent.toFixed(1)} %, mean ${f.mean_percent.toFixed(1)} %, spread (std) ` +
               `${f.std_percent.toFixed(1)} %`);
  }
  if (entry.shedder) lines.push(`the shedder's own figures at its last run (smoothed): ${entry.shedder}`);
  lines.push(`it ${entry.rule.text} (${entry.rule.key}=${entry.rule.value})`);
  return lines;
}

function renderWhyNot(entries) {
  const box = document.getElementById("whynot");
  box.replaceChildren();
  if (!entries || !entries.length) {
    box.append(el("div", {class: "empty"}, "no shedding run has skipped yet"));
    return;
  }
  for (const entry of entries) {
    const item = el("div", {class: "whynot", "data-strategy": entry.strategy});
    const [head, ...rest] = whyNotLines(entry);
    item.append(el("div", {class: "head"}, head));
    rest.forEach(line => item.append(el("div", {}, line)));
    const totals = Object.entries(entry.totals).sort().map(([r, n]) => `${r} ${n}`).join(", ");
    item.append(el("div", {class: "note"}, `every skip in the log: ${totals}`));
    box.append(item);
  }
  box.append(el("div", {class: "note"}, "usage: each broker's latest report (the highest of CPU, " +
    "memory, direct memory and bandwidth); the shedders compare a smoothed, weighted usage"));
}

function renderRanges(state) {
  const box = document.getElementById("namespaces");
  box.replaceChildren();
  for (const ns of state.namespaces) {
    box.append(el("div", {class: "ns-name"}, `${ns.name} (${ns.bundles.length} bundles)`));
    const strip = el("div", {class: "strip", "data-namespace": ns.name});
    for (const b of ns.bundles) {
      const part = el("div", {class: "bundle", "data-bundle": b.bundle, "data-owner": b.owner || "",
                              title: `${b.bundle}\n${b.state} ${b.owner || ""}`, tabindex: "0",
                              role: "button", "aria-label": `${b.bundle}, ${b.state} ${b.owner || ""}`});
      part.style.flex = `${(100 * (b.upper - b.lower) / HASH_SPACE).toFixed(6)} 1 0`;
      part.style.minWidth = `${MIN_BUNDLE_PX}px`;
      part.style.background = colourOf(b.owner);
      if (b.state !== "Owned") part.classList.add("inflight");
      if (b.bundle === selected) part.classList.add("selected");
      strip.append(part);
    }
    box.append(strip);
  }
  const legend = document.getElementById("legend");
  legend.replaceChildren();
  for (const [broker, colour] of Object.entries(colours)) {
    const item = el("span", {}, broker);
    const swatch = el("i");
    swatch.style.background = colour;
    item.prepend(swatch);
    legend.append(item);
  }
}

function renderMoves(moves) {
  const body = document.getElementById("moves");
  body.replaceChildren();
  const newest = moves.length ? `${moves[0].ts_ms}:${moves[0].bundle}` : null;
  moves.forEach((move, i) => {
    const row = el("tr", {class: "move", "data-bundle": move.bundle});
    if (i === 0 && newest !== lastMoveKey && lastMoveKey !== null) row.classList.add("fresh");
    row.append(el("td", {}, iso(move.ts_ms)), el("td", {}, move.kind),
               el("td", {class: "bundle"}, move.bundle), el("td", {}, move.src || "-"),
               el("td", {}, move.dst || (move.kind === "split" ? "-" : "(placement)")),
               el("td", {}, move.reason));
    body.append(row);
  });
  lastMoveKey = newest;
}

function renderAnomalies(anomalies) {
  const box = document.getElementById("anomalies");
  box.replaceChildren();
  const counts = Object.entries(anomalies.counts);
  if (!counts.length) { box.textContent = "none"; return; }
  box.append(el("div", {}, counts.map(([k, n]) => `${k}: ${n}`).join(", ")));
  for (const a of anomalies.recent) {
    box.append(el("div", {class: "anomaly"}, `@${a.offset} ${a.kind} ${a.type} ${a.key}: ${a.detail}`));
  }
}

// -- explain: a bundle's moves as a table, numbers rounded and with their units ---------------

const FRACTION = /usage|ema|average|^avg$|threshold|fraction|std|^(max|min)_load$|^offload$|boundary|utilisation|ratio/;

function figure(key, value) {
  if (typeof value === "boolean" || typeof value === "string") return String(value);
  if (Array.isArray(value)) return value.length ? value.join(", ") : "none";
  if (value === null || value === undefined) return "-";
  if (typeof value === "object") {
    return Object.entries(value).map(([k, v]) => `${k} ${figure(key, v)}`).join(", ");
  }
  if (/throughput|need|marked/.test(key)) return bytesPerSecond(value);
  if (/rate_threshold|throughput_threshold/.test(key)) return `${round(value)} %`;
  if (/rate/.test(key)) return `${round(value)} msg/s`;
  if (FRACTION.test(key) && Math.abs(value) <= 2) return `${(100 * value).toFixed(1)} %`;
  return round(value);
}

function round(value) {
  if (Number.isInteger(value)) return String(value);
  return Math.abs(value) >= 100 ? value.toFixed(0) : Number(value.toPrecision(3)).toString();
}

function bytesPerSecond(value) {
  if (value >= 1048576) return `${(value / 1048576).toFixed(1)} MiB/s`;
  if (value >= 1024) return `${(value / 1024).toFixed(1)} KiB/s`;
  return `${Math.round(value)} B/s`;
}

function words(key) {
  return key.replace(/_/g, " ");
}

// The CLI's word for a move of the explain: a transfer names its destination, an unload leaves
// it to placement; other events (an assignment, a split) by their own name.
function kindOf(move) {
  if (move.kind) return move.kind;
  if (move.event === "UnloadRequested" || move.event === "TransferPrepared") return move.dst ? "transfer" : "unload";
  if (move.event === "BundleAssigned") return "assign";
  if (move.event && move.event.startsWith("Split")) return "split";
  return move.event || "-";
}

function explainRow(move, i) {
  const d = move.decision || {};
  const kind = kindOf(move);
  const row = el("tr", {class: "explain-move", "data-event": move.event});
  const inputs = Object.entries(d.inputs || {}).map(([k, v]) => `${words(k)} ${figure(k, v)}`).join("; ");
  row.append(el("td", {}, `${i + 1}`), el("td", {}, iso(move.ts_ms)),
             el("td", {title: move.event}, kind), el("td", {}, move.src || "-"),
             el("td", {}, move.dst || (kind === "split" ? "-" : "(placement)")),
             el("td", {}, d.strategy || move.origin || "-"),
             el("td", {}, d.reason || move.reason), el("td", {class: "figures"}, inputs || "-"));
  return row;
}

function placementRow(placement) {
  const scores = Object.entries(placement.scores || {}).sort((a, b) => Number(a[1]) - Number(b[1]));
  const listed = scores.length
    ? scores.map(([b, s]) => `${b} ${typeof s === "number" ? round(s) : s}`).join(", ")
    : (placement.candidates || []).join(", ") || "none";
  const row = el("tr", {class: "placement"});
  row.append(el("td", {}), el("td", {colspan: "7"},
    `placement by ${placement.strategy || "-"} (${placement.source || "strategy"}): chose ` +
    `${placement.broker || "none"}; candidates and scores: ${listed}`));
  return row;
}

async function explain(bundle) {
  selected = bundle;
  document.querySelectorAll(".strip .bundle").forEach(
    node => node.classList.toggle("selected", node.dataset.bundle === bundle));
  document.getElementById("explain-bundle").textContent = bundle;
  const box = document.getElementById("explain");
  box.textContent = "loading";
  const response = await fetch(`/bb/v1/dashboard/explain?bundle=${encodeURIComponent(bundle)}`,
                               {credentials: "same-origin"});
  if (response.status === 401) { toLogin(); return; }
  const data = await response.json();
  box.replaceChildren();
  if (!response.ok) { box.textContent = data.error || data.reason; return; }
  box.append(el("div", {class: "explain-row"}, `now ${data.row.state} ${data.row.owner || ""}, ` +
                `version ${data.row.version}, last change ${iso(data.row.updated_ms)}`));
  if (!data.moves.length) { box.append(el("div", {}, "no moves in the log")); return; }
  const table = el("table", {class: "explain-table"});
  const head = el("tr");
  ["#", "time", "kind", "from", "to", "strategy", "reason", "figures"].forEach(h => head.append(el("th", {}, h)));
  table.append(el("thead"));
  table.firstChild.append(head);
  const body = el("tbody");
  data.moves.forEach((move, i) => {
    body.append(explainRow(move, i));
    if (move.decision && move.decision.placement) body.append(placementRow(move.decision.placement));
  });
  table.append(body);
  box.append(table);
}

// -- the feed --------------------------------------------------------------------------------

function toLogin() {
  window.location.assign("/login?ended=1");
}

function connect() {
  const link = document.getElementById("link");
  const source = new EventSource("/bb/v1/dashboard/events", {withCredentials: true});
  source.addEventListener("state", event => {
    link.textContent = "live";
    link.className = "pill on";
    render(JSON.parse(event.data));
  });
  source.onerror = async () => {
    link.textContent = "reconnecting";
    link.className = "pill off";
    try {  // an EventSource does not say why: ask once whether the session ended
      const probe = await fetch("/bb/v1/dashboard/state", {credentials: "same-origin"});
      if (probe.status === 401) { source.close(); toLogin(); }
    } catch (e) { /* the service is away: the EventSource retries by itself */ }
  };
}

// Clicks (and Enter on a focused bundle) are delegated: the strip and the moves are redrawn on
// every push.
document.addEventListener("click", event => {
  const target = event.target.closest(".strip .bundle, tr.move");
  if (target && target.dataset.bundle) explain(target.dataset.bundle);
});
document.addEventListener("keydown", event => {
  const target = event.target.closest(".strip .bundle");
  if (target && (event.key === "Enter" || event.key === " ")) {
    event.preventDefault();
    explain(target.dataset.bundle);
  }
});

const initial = document.getElementById("initial-state");
if (initial && initial.textContent.trim().startsWith("{")) render(JSON.parse(initial.textContent));
connect();
