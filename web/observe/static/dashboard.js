// The live dashboard: draws the state /bb/v1/dashboard/events pushes (server-sent events).
// Plain script, no library, no build step: every element is made with the DOM API and text is
// set with textContent, so nothing from the cluster is ever parsed as HTML.
"use strict";

const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                 "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#d62728"];
const UNOWNED = "#c9ced6";
const HASH_SPACE = 4294967296;
let colours = {};
let selected = null;
let lastMoveKey = null;

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function iso(ms) {
  return ms ? new Date(ms).toISOString().replace(".000Z", "Z") : "-";
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
    `${state.brokers.length} brokers, ${state.totals.unloads} unloads, ${state.totals.splits} splits`;
  renderBalancer(state.balancer);
  renderBrokers(state);
  renderRanges(state);
  renderMoves(state.moves);
  renderAnomalies(state.anomalies);
}

// The balancer's status strip: its state first, then why (stalled, paused), the throttle's
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

function renderBrokers(state) {
  const box = document.getElementById("brokers");
  box.replaceChildren();
  for (const broker of state.brokers) {
    const card = el("div", {class: "broker", "data-broker": broker.id});
    card.style.borderLeftColor = colourOf(broker.id);
    const last = broker.series.length ? broker.series[broker.series.length - 1] : null;
    card.append(el("div", {class: "name"}, broker.id));
    card.append(el("div", {class: "meta"},
      `${broker.bundles} bundles, ${last ? last[1].toFixed(1) + " % max usage, " +
       Math.round(last[2]) + " msg/s" : "no report yet"}`));
    card.append(sparkline(broker.series, colourOf(broker.id)));
    box.append(card);
  }
}

function sparkline(series, colour) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 200 48");
  svg.setAttribute("preserveAspectRatio", "none");
  if (series.length > 1) {
    const t0 = series[0][0], t1 = series[series.length - 1][0] || t0 + 1;
    const top = Math.max(100, ...series.map(s => s[1]));
    const points = series.map(s => `${(200 * (s[0] - t0) / Math.max(1, t1 - t0)).toFixed(1)},` +
                                    `${(46 - 44 * s[1] / top).toFixed(1)}`).join(" ");
    const area = document.createElementNS(ns, "polygon");
    area.setAttribute("points", `0,48 ${points} 200,48`);
    area.setAttribute("fill", colour);
    area.setAttribute("fill-opacity", "0.25");
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", points);
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", colour);
    line.setAttribute("stroke-width", "2");
    svg.append(area, line);
  }
  return svg;
}

function renderRanges(state) {
  const box = document.getElementById("namespaces");
  box.replaceChildren();
  for (const ns of state.namespaces) {
    box.append(el("div", {class: "ns-name"}, `${ns.name} (${ns.bundles.length} bundles)`));
    const strip = el("div", {class: "strip", "data-namespace": ns.name});
    for (const b of ns.bundles) {
      const part = el("div", {class: "bundle", "data-bundle": b.bundle, "data-owner": b.owner || "",
                              title: `${b.bundle}\n${b.state} ${b.owner || ""}`});
      part.style.width = `${100 * (b.upper - b.lower) / HASH_SPACE}%`;
      part.style.background = colourOf(b.owner);
      if (b.state !== "Owned") part.classList.add("inflight");
      if (b.bundle === selected) part.classList.add("selected");
      part.addEventListener("click", () => explain(b.bundle));
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
    row.addEventListener("click", () => explain(move.bundle));
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

async function explain(bundle) {
  selected = bundle;
  document.querySelectorAll(".strip .bundle").forEach(
    node => node.classList.toggle("selected", node.dataset.bundle === bundle));
  document.getElementById("explain-bundle").textContent = bundle;
  const box = document.getElementById("explain");
  box.textContent = "loading";
  const response = await fetch(`/bb/v1/dashboard/explain?bundle=${encodeURIComponent(bundle)}`);
  const data = await response.json();
  box.replaceChildren();
  if (!response.ok) { box.textContent = data.error; return; }
  box.append(el("div", {}, `${data.row.state} ${data.row.owner || ""}, version ${data.row.version}`));
  if (!data.moves.length) box.append(el("div", {}, "no moves in the log"));
  data.moves.forEach((move, i) => {
    const d = move.decision || {};
    box.append(el("div", {class: "explain-move"},
      `#${i + 1} ${iso(move.ts_ms)} epoch ${move.epoch} ${move.event}: ${move.src || "-"} -> ` +
      `${move.dst || "(placement)"} reason ${move.reason}`));
    if (d.strategy || d.inputs) {
      box.append(el("pre", {}, `${d.strategy || "-"} ${d.label || ""} ${d.reason || ""}\n` +
                                JSON.stringify(d.inputs || {}, null, 1)));
    }
  });
}

function connect() {
  const link = document.getElementById("link");
  const source = new EventSource("/bb/v1/dashboard/events");
  source.addEventListener("state", event => {
    link.textContent = "live";
    link.className = "pill on";
    render(JSON.parse(event.data));
  });
  source.onerror = () => { link.textContent = "reconnecting"; link.className = "pill off"; };
}

connect();
