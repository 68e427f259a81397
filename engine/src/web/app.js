// sluice web UI: a page per hash route (#/overview, #/jobs, #/job/<id>/<tab>, #/taskmanagers,
// #/taskmanager/<id>, #/jobmanager/<tab>, #/submit), each polling the JobManager's REST API every 2 s. Plain
// JavaScript and SVG: no dependencies, no build step.
"use strict";

const POLL_MS = 2000;
const CHART_POINTS = 90; // three minutes at one point per poll
const SVG_NS = "http://www.w3.org/2000/svg";
const TERMINAL = new Set(["FINISHED", "CANCELED", "FAILED"]);

// What the pages remember between polls.
const memory = {
  throughput: new Map(), // job id -> { times: [], series: Map(vertex id -> []) }
  checkpoint: null, // the checkpoint whose details are shown
  checkpointVertex: null, // the vertex of that checkpoint whose subtasks are shown
  subtaskVertex: null, // the vertex on the job's subtask tab
  logs: new Map(), // daemon ("/jobmanager", "/taskmanagers/<id>") -> the log file shown
  job: null, // the job the remembered selections belong to
};

// --- helpers ---------------------------------------------------------------------------------

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
  if (!response.ok) {
    const errors = json && Array.isArray(json.errors) ? json.errors.join("; ") : text;
    throw new Error(`${response.status}: ${errors}`);
  }
  return json;
}

// A plain-text answer (a log file).
async function apiText(path) {
  const response = await fetch(path);
  const text = await response.text();
  if (!response.ok) {
    let reason = text;
    try { reason = JSON.parse(text).errors.join("; "); } catch (_) { /* not JSON */ }
    throw new Error(`${response.status}: ${reason}`);
  }
  return text;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  append(node, children);
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

const $ = (id) => document.getElementById(id);

function panel(title, id, ...extra) {
  return el("section", { class: "panel" },
    el("div", { class: "panel-head" }, el("h2", {}, title), ...extra),
    el("div", { class: "panel-body", id }));
}

function table(headers, rows, empty = "none") {
  const head = el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h))));
  const body = el("tbody");
  if (rows.length === 0) {
    body.append(el("tr", {}, el("td", { class: "empty", colspan: headers.length }, empty)));
  }
  for (const row of rows) body.append(row);
  return el("table", {}, head, body);
}

function fill(id, ...children) {
  const node = $(id);
  if (node) node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
}

function badge(state) {
  return el("span", { class: `badge state-${state}` }, state);
}

function formatTime(ms) {
  return ms > 0 ? new Date(ms).toLocaleString() : "–";
}

function formatClock(ms) {
  return ms > 0 ? new Date(ms).toLocaleTimeString() : "–";
}

function formatDuration(ms) {
  if (ms === undefined || ms === null || ms < 0) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 10000) return `${(ms / 1000).toFixed(2)} s`;
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60), sec = s % 60;
  if (d > 0) return `${d}d ${h}h ${m}m`;
  if (h > 0) return `${h}h ${m}m ${sec}s`;
  return m > 0 ? `${m}m ${sec}s` : `${sec}s`;
}

function formatCount(n) {
  if (n === undefined || n === null || Number.isNaN(Number(n))) return "–";
  return Math.round(Number(n)).toLocaleString("en-US");
}

// 1234567 -> "1.23 M"; for rates and axis labels.
function formatShort(n) {
  const v = Number(n);
  if (!Number.isFinite(v)) return "–";
  const abs = Math.abs(v);
  if (abs >= 1e9) return `${(v / 1e9).toFixed(2)} G`;
  if (abs >= 1e6) return `${(v / 1e6).toFixed(2)} M`;
  if (abs >= 1e4) return `${(v / 1e3).toFixed(1)} k`;
  return abs >= 100 || v === Math.round(v) ? `${Math.round(v)}` : v.toFixed(1);
}

function formatBytes(n) {
  if (n === undefined || n === null || n < 0) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

// A vertex's low watermark (the least input watermark of its subtasks): event time as a
// clock time when it looks like one (ms since the epoch), else the number of ms.
function formatWatermark(ms) {
  if (ms === undefined || ms === null || ms < -1e15) return "no watermark";
  if (ms >= 9e15) return "end of input";
  return ms > 1e11 ? new Date(ms).toLocaleTimeString([], { hour12: false, fractionalSecondDigits: 3 })
    : `${formatCount(ms)} ms`;
}

function percent(msPerSecond) {
  return msPerSecond === undefined ? "–" : `${Math.round(msPerSecond / 10)}%`;
}

function taskCounts(tasks) {
  // A bar of the subtasks by state, with the counts as its tooltip and label.
  const entries = Object.entries(tasks || {}).filter(([s, n]) => s.toLowerCase() !== "total" && n > 0);
  const total = entries.reduce((sum, [, n]) => sum + n, 0);
  const label = entries.map(([s, n]) => `${n} ${s.toLowerCase()}`).join(", ") || "none";
  return el("span", { class: "tasks", title: label },
    el("span", { class: "taskbar" }, entries.map(([s, n]) =>
      el("span", { class: `seg state-bg-${s.toUpperCase()}`, style: `flex-grow:${n}` }))),
    ` ${total}`);
}

function setStatus(text, isError) {
  const status = $("status");
  status.textContent = text;
  status.classList.toggle("error", Boolean(isError));
}

function message(id, text, kind) {
  const node = $(id);
  if (!node) return;
  node.textContent = text;
  node.className = `message ${kind || ""}`;
}

// --- routes ----------------------------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  return { page: parts[0] || "overview", args: parts.slice(1) };
}

const pages = {
  overview: { title: () => "Overview", mount: mountOverview, update: updateOverview },
  jobs: { title: () => "Jobs", mount: mountJobs, update: updateJobs },
  job: { title: () => "Job", mount: mountJob, update: updateJob },
  taskmanagers: { title: () => "TaskManagers", mount: mountTaskManagers, update: updateTaskManagers },
  taskmanager: { title: (r) => `TaskManager ${r.args[0] || ""}`, mount: mountTaskManager, update: updateTaskManager },
  jobmanager: { title: () => "JobManager", mount: mountJobManager, update: updateJobManager },
  submit: { title: () => "Submit a job", mount: mountSubmit, update: async () => {} },
};

let mounted = null; // the hash the page was built for
let updating = false;

async function refresh(force) {
  if (updating && !force) return;
  updating = true;
  const r = route();
  const page = pages[r.page] || pages.overview;
  try {
    if (mounted !== location.hash) {
      mounted = location.hash;
      $("title").textContent = page.title(r);
      for (const a of document.querySelectorAll("#sidebar a[data-page]")) {
        const current = a.dataset.page === r.page || (r.page === "job" && a.dataset.page === "jobs")
          || (r.page === "taskmanager" && a.dataset.page === "taskmanagers");
        a.classList.toggle("current", current);
      }
      $("page").replaceChildren();
      page.mount($("page"), r.args);
    }
    await page.update(r.args);
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    setStatus(`JobManager unreachable or refused: ${e.message}`, true);
  } finally {
    updating = false;
  }
}

// --- overview and jobs ---------------------------------------------------------------------

function mountOverview(root) {
  root.append(
    el("div", { id: "overview-cards", class: "cards" }),
    panel("Running jobs", "running-jobs"),
    panel("Completed jobs", "completed-jobs"),
  );
}

function card(value, label, kind) {
  return el("div", { class: `card ${kind || ""}` },
    el("div", { class: "value" }, value), el("div", { class: "label" }, label));
}

async function updateOverview() {
  const [o, jobs] = await Promise.all([api("GET", "/overview"), api("GET", "/jobs/overview")]);
  $("version").textContent = o["flink-version"];
  fill("overview-cards",
    card(o["taskmanagers"], "TaskManagers"),
    card(`${o["slots-available"]} / ${o["slots-total"]}`, "Slots available / total"),
    card(o["jobs-running"], "Jobs running", o["jobs-running"] > 0 ? "ok" : ""),
    card(o["jobs-finished"], "Jobs finished"),
    card(o["jobs-cancelled"], "Jobs cancelled", o["jobs-cancelled"] > 0 ? "warn" : ""),
    card(o["jobs-failed"], "Jobs failed", o["jobs-failed"] > 0 ? "bad" : ""));
  renderJobLists(jobs.jobs);
}

function mountJobs(root) {
  root.append(panel("Running jobs", "running-jobs"), panel("Completed jobs", "completed-jobs"));
}

async function updateJobs() {
  renderJobLists((await api("GET", "/jobs/overview")).jobs);
}

function renderJobLists(jobs) {
  jobs.sort((a, b) => b["start-time"] - a["start-time"]);
  const row = (job) => el("tr", { class: "clickable", onclick: () => { location.hash = `#/job/${job.jid}`; } },
    el("td", {}, el("a", { href: `#/job/${job.jid}` }, job.name), el("div", { class: "mono muted" }, job.jid)),
    el("td", {}, badge(job.state)),
    el("td", {}, formatTime(job["start-time"])),
    el("td", {}, job["end-time"] > 0 ? formatTime(job["end-time"]) : "–"),
    el("td", { class: "num" }, formatDuration(job.duration)),
    el("td", {}, taskCounts(job.tasks)));
  const headers = ["Job", "State", "Started", "Ended", "Duration", "Tasks"];
  fill("running-jobs", table(headers, jobs.filter((j) => !TERMINAL.has(j.state)).map(row), "no running jobs"));
  fill("completed-jobs", table(headers, jobs.filter((j) => TERMINAL.has(j.state)).map(row), "no completed jobs"));
}

// --- one job ---------------------------------------------------------------------------------

const JOB_TABS = ["overview", "subtasks", "checkpoints", "exceptions", "configuration"];

function mountJob(root, [jid, tab = "overview"]) {
  if (memory.job !== jid) {
    Object.assign(memory, { job: jid, checkpoint: null, checkpointVertex: null, subtaskVertex: null });
  }
  root.append(
    el("div", { class: "job-head" },
      el("div", {},
        el("div", { class: "job-name" }, el("span", { id: "job-name" }), " ", el("span", { id: "job-state" })),
        el("div", { id: "job-meta", class: "muted" })),
      el("div", { class: "actions" },
        el("input", { id: "savepoint-dir", placeholder: "savepoint directory (optional)", size: 28, title: "empty: execution.checkpointing.savepoint-dir" }),
        el("button", { id: "action-savepoint", type: "button", onclick: () => savepoint(jid, false) }, "Trigger savepoint"),
        el("button", { id: "action-stop", type: "button", onclick: () => savepoint(jid, true) }, "Stop with savepoint"),
        el("button", { id: "action-cancel", class: "danger", type: "button", onclick: () => cancelJob(jid) }, "Cancel job"))),
    el("div", { id: "job-message", class: "message" }),
    el("nav", { class: "tabs" }, JOB_TABS.map((t) =>
      el("a", { href: `#/job/${jid}/${t}`, class: t === tab ? "current" : "" }, t[0].toUpperCase() + t.slice(1)))),
    el("div", { id: "job-tab" }));
  const body = $("job-tab");
  if (tab === "overview") {
    body.append(
      panel("Job graph", "job-graph", el("span", { class: "muted hint" },
        "boxes: vertices with parallelism, rates and the busiest subtask; arrows: how records are shipped")),
      panel("Throughput (records per second into each vertex; out of sources)", "job-chart"),
      panel("Vertices", "job-vertices", el("span", { class: "muted hint" },
        "busy and back-pressured: the busiest subtask's share of the last seconds")));
  } else if (tab === "subtasks") {
    body.append(el("div", { id: "vertex-picker", class: "picker" }), panel("Subtasks", "job-subtasks"));
  } else if (tab === "checkpoints") {
    body.append(
      el("div", { id: "checkpoint-cards", class: "cards" }),
      panel("Summary of completed checkpoints", "checkpoint-summary"),
      panel("History (newest first; click one for its vertices)", "checkpoint-history"),
      panel("Checkpoint details", "checkpoint-details"));
  } else if (tab === "exceptions") {
    body.append(panel("Root exception", "job-root-exception"), panel("Exception history", "job-exceptions"));
  } else {
    body.append(panel("Program arguments", "job-user-config"), panel("Checkpointing", "job-checkpoint-config"));
  }
}

async function updateJob([jid, tab = "overview"]) {
  const job = await api("GET", `/jobs/${jid}`);
  $("title").textContent = `Job · ${job.name}`;
  fill("job-name", job.name);
  fill("job-state", badge(job.state));
  fill("job-meta",
    el("span", { class: "mono" }, job.jid), " · ", job["job-type"].toLowerCase(),
    " · started ", formatTime(job["start-time"]),
    job["end-time"] > 0 ? ` · ended ${formatTime(job["end-time"])}` : "",
    " · ", formatDuration(job.duration));
  const live = !TERMINAL.has(job.state) && job.state !== "CANCELLING";
  for (const id of ["action-savepoint", "action-stop", "action-cancel"]) $(id).disabled = !live;
  const note = $("job-message");
  if (!live && note.classList.contains("info")) message("job-message", `The job is ${job.state}.`, "");
  if (tab === "overview") await updateJobOverview(job, live);
  else if (tab === "subtasks") await updateSubtasks(job);
  else if (tab === "checkpoints") await updateCheckpoints(job);
  else if (tab === "exceptions") await updateExceptions(job);
  else await updateConfiguration(job);
}

const RATE_METRICS = [
  "numRecordsInPerSecond", "numRecordsOutPerSecond", "busyTimeMsPerSecond",
  "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond",
];

// Per vertex id: { in, out } summed over subtasks, { busy, backPressured, idle } of the busiest.
async function vertexRates(job) {
  const rates = new Map();
  await Promise.all(job.vertices.map(async (v) => {
    const [list, marks] = await Promise.all([
      api("GET", `/jobs/${job.jid}/vertices/${v.id}/subtasks/metrics?get=${RATE_METRICS.join(",")}&agg=sum,max`),
      api("GET", `/jobs/${job.jid}/vertices/${v.id}/watermarks`),
    ]);
    const m = Object.fromEntries(list.map((e) => [e.id, e]));
    const pick = (id, agg) => (m[id] ? m[id][agg] : undefined);
    const watermarks = marks.map((e) => Number(e.value));
    rates.set(v.id, {
      watermark: watermarks.length ? Math.min(...watermarks) : undefined,
      in: pick("numRecordsInPerSecond", "sum"),
      out: pick("numRecordsOutPerSecond", "sum"),
      busy: pick("busyTimeMsPerSecond", "max"),
      backPressured: pick("backPressuredTimeMsPerSecond", "max"),
      idle: pick("idleTimeMsPerSecond", "max"),
    });
  }));
  return rates;
}

async function updateJobOverview(job, live) {
  const rates = live ? await vertexRates(job) : new Map();
  const sources = new Set(job.plan.nodes.filter((n) => n.inputs.length === 0).map((n) => n.id));
  if (live) recordThroughput(job, rates, sources);
  fill("job-graph", drawGraph(job, rates));
  fitGraphText();
  fill("job-chart", drawChart(job));
  fill("job-vertices", table(
    ["Vertex", "Parallelism", "Status", "Records in", "Records out", "Bytes in / out",
      "Busy", "Back-pressured", "Low watermark", "Duration", "Tasks"],
    job.vertices.map((v) => {
      const r = rates.get(v.id) || {};
      return el("tr", { "data-vertex": v.id },
        el("td", { class: "name" }, v.name),
        el("td", { class: "num" }, v.parallelism),
        el("td", {}, badge(v.status)),
        el("td", { class: "num records-in" }, counted(v.metrics["read-records"], r.in)),
        el("td", { class: "num records-out" }, counted(v.metrics["write-records"], r.out)),
        el("td", { class: "num" }, `${formatBytes(v.metrics["read-bytes"])} / ${formatBytes(v.metrics["write-bytes"])}`),
        el("td", { class: "num" }, percent(r.busy)),
        el("td", { class: "num" }, percent(r.backPressured)),
        el("td", { class: "num watermark", title: "the least input watermark of the vertex's subtasks" },
          live ? formatWatermark(r.watermark) : "–"),
        el("td", { class: "num" }, formatDuration(v.duration)),
        el("td", {}, taskCounts(v.tasks)));
    })));
}

// A total with its current rate under it.
function counted(total, rate) {
  return [el("div", { class: "count" }, formatCount(total)),
    rate === undefined ? null : el("div", { class: "rate" }, `${formatShort(rate)}/s`)];
}

function recordThroughput(job, rates, sources) {
  let t = memory.throughput.get(job.jid);
  if (!t) {
    t = { times: [], series: new Map() };
    memory.throughput.set(job.jid, t);
  }
  t.times.push(Date.now());
  for (const v of job.vertices) {
    const r = rates.get(v.id) || {};
    const value = sources.has(v.id) ? r.out : r.in;
    if (!t.series.has(v.id)) t.series.set(v.id, new Array(t.times.length - 1).fill(null));
    t.series.get(v.id).push(value === undefined ? null : value);
  }
  if (t.times.length > CHART_POINTS) {
    t.times.shift();
    for (const s of t.series.values()) s.shift();
  }
}

const PALETTE = ["#2f6fdf", "#e07b00", "#1a9a5a", "#b0309e", "#c62828", "#00838f", "#6d4c41"];

// A line chart of the recorded rates: one line per vertex, time along x.
function drawChart(job) {
  const t = memory.throughput.get(job.jid);
  if (!t || t.times.length < 2) {
    return el("p", { class: "muted" },
      TERMINAL.has(job.state) ? "The job has ended: no live rates." : "Collecting rates… (a point every 2 s)");
  }
  const W = 900, H = 220, left = 64, right = 16, top = 12, bottom = 28;
  const values = [...t.series.values()].flat().filter((v) => v !== null);
  const max = niceMax(Math.max(1, ...values));
  const t0 = t.times[0], t1 = t.times[t.times.length - 1];
  const x = (ms) => left + ((ms - t0) / Math.max(1, t1 - t0)) * (W - left - right);
  const y = (v) => top + (1 - v / max) * (H - top - bottom);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img" });
  for (const frac of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
    const v = max * frac;
    chart.append(svg("line", { x1: left, x2: W - right, y1: y(v), y2: y(v), class: "grid" }));
    const label = max >= 1e4 ? `${+(v / 1e3).toFixed(1)} k` : formatShort(v); // one unit per axis
    chart.append(svg("text", { x: left - 8, y: y(v) + 4, class: "axis", "text-anchor": "end" }, label));
  }
  chart.append(svg("text", { x: left, y: H - 8, class: "axis" }, formatClock(t0)));
  chart.append(svg("text", { x: W - right, y: H - 8, class: "axis", "text-anchor": "end" }, formatClock(t1)));
  const legend = el("div", { class: "legend" });
  job.vertices.forEach((v, i) => {
    const series = t.series.get(v.id) || [];
    const color = PALETTE[i % PALETTE.length];
    const points = series.map((value, k) => (value === null ? null : `${x(t.times[k]).toFixed(1)},${y(value).toFixed(1)}`))
      .filter(Boolean).join(" ");
    // Every other line dashed: equal rates (a source and its consumer) stay visible.
    if (points) {
      chart.append(svg("polyline", {
        points, fill: "none", stroke: color, "stroke-width": 2, class: "series",
        "stroke-dasharray": i % 2 === 1 ? "7 4" : null,
      }));
    }
    const last = series.filter((value) => value !== null).pop();
    legend.append(el("span", { class: "key" }, el("span", { class: `swatch${i % 2 === 1 ? " dashed" : ""}`, style: `--c:${color}` }),
      `${shorten(v.name, 40)}: `, el("b", {}, last === undefined ? "–" : `${formatShort(last)}/s`)));
  });
  return [chart, legend];
}

function niceMax(v) {
  const magnitude = 10 ** Math.floor(Math.log10(v));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (v <= step * magnitude) return step * magnitude;
  }
  return 10 * magnitude;
}

function shorten(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

// The job graph: vertices in layers by their longest path from a source, left to right; each
// edge from the right side of its source to the left side of its target, labelled with its
// ship strategy.
function drawGraph(job, rates) {
  const nodes = job.plan.nodes;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const layer = new Map();
  const depth = (n, seen = new Set()) => {
    if (layer.has(n.id)) return layer.get(n.id);
    if (seen.has(n.id)) return 0;
    seen.add(n.id);
    const d = n.inputs.length === 0 ? 0
      : 1 + Math.max(...n.inputs.map((i) => (byId.has(i.id) ? depth(byId.get(i.id), seen) : 0)));
    layer.set(n.id, d);
    return d;
  };
  nodes.forEach((n) => depth(n));
  const layers = [];
  for (const n of nodes) (layers[layer.get(n.id)] ||= []).push(n);
  const BW = 250, BH = 104, GX = 110, GY = 36, PAD = 16;
  const tallest = Math.max(...layers.map((l) => l.length));
  const W = PAD * 2 + layers.length * BW + (layers.length - 1) * GX;
  const H = PAD * 2 + tallest * BH + (tallest - 1) * GY;
  const pos = new Map();
  layers.forEach((l, li) => {
    const offset = ((tallest - l.length) * (BH + GY)) / 2;
    l.forEach((n, k) => pos.set(n.id, { x: PAD + li * (BW + GX), y: PAD + offset + k * (BH + GY) }));
  });
  const vertex = new Map(job.vertices.map((v) => [v.id, v]));
  const graph = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "graph", width: W, height: H },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))));
  for (const n of nodes) {
    const to = pos.get(n.id);
    n.inputs.forEach((input, k) => {
      const from = pos.get(input.id);
      if (!from) return;
      const x1 = from.x + BW, y1 = from.y + BH / 2;
      const x2 = to.x, y2 = to.y + BH / 2 + (k - (n.inputs.length - 1) / 2) * 14;
      const mx = (x1 + x2) / 2;
      graph.append(svg("path", { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 2},${y2}`, class: "edge", "marker-end": "url(#arrow)" }));
      const label = input.ship_strategy;
      const lw = label.length * 7 + 12;
      const ly = (y1 + y2) / 2;
      graph.append(svg("g", { class: "edge-label" },
        svg("rect", { x: mx - lw / 2, y: ly - 10, width: lw, height: 20, rx: 4 }),
        svg("text", { x: mx, y: ly + 4, "text-anchor": "middle" }, label)));
    });
  }
  for (const n of nodes) {
    const p = pos.get(n.id);
    const v = vertex.get(n.id) || {};
    const r = rates.get(n.id) || {};
    const busy = r.busy === undefined ? 0 : r.busy / 1000;
    const hot = r.backPressured !== undefined && r.backPressured > 500;
    const g = svg("g", { class: `node${hot ? " backpressured" : ""}`, transform: `translate(${p.x},${p.y})`, "data-vertex": n.id },
      svg("title", {}, `${n.description}\n${n.id}`),
      svg("rect", { width: BW, height: BH, rx: 8, class: "box", style: `fill:${busyColor(busy)}` }),
      svg("rect", { width: 6, height: BH, rx: 3, class: `stripe state-fill-${v.status || "CREATED"}` }),
      svg("text", { x: 16, y: 24, class: "node-name" }, shorten(n.description, 30)),
      svg("text", { x: 16, y: 44, class: "node-line" }, `Parallelism ${n.parallelism} · ${v.status || ""}`),
      ...boxLines(n, v, r).map((line, k) => svg("text", { x: 16, y: 64 + k * 20, class: "node-line" }, line)));
    graph.append(g);
  }
  return el("div", { class: "graph-scroll" }, graph);
}

// The third and fourth line of a vertex box: live rates and time shares while the job runs,
// totals once it ended.
function boxLines(node, vertex, r) {
  const rate = (x) => (x === undefined ? "–" : `${formatShort(x)}/s`);
  if (r.in === undefined && r.out === undefined && vertex.metrics) {
    return [`records in ${formatShort(vertex.metrics["read-records"])} · out ${formatShort(vertex.metrics["write-records"])}`,
      `ran ${formatDuration(vertex.duration)}`];
  }
  const flow = node.inputs.length === 0 ? `out ${rate(r.out)}` : `in ${rate(r.in)} · out ${rate(r.out)}`;
  return [flow, `busy ${percent(r.busy)} · back-pressured ${percent(r.backPressured)}`];
}

// Shortens each line of a vertex box (with "…") until it fits the box; SVG text does not wrap,
// and only the browser knows how wide the text is drawn.
function fitGraphText() {
  for (const g of document.querySelectorAll("#job-graph g.node")) {
    const room = Number(g.querySelector("rect.box").getAttribute("width")) - 24;
    for (const t of g.querySelectorAll("text")) {
      let content = t.textContent;
      while (content.length > 4 && t.getComputedTextLength() > room) {
        content = content.slice(0, -2);
        t.textContent = `${content}…`;
      }
    }
  }
}

// White when idle, towards red when busy (as Flink's graph colours its vertices).
function busyColor(busy) {
  const b = Math.max(0, Math.min(1, busy));
  return `hsl(${Math.round(210 - 210 * b)}, ${Math.round(20 + 60 * b)}%, ${Math.round(97 - 14 * b)}%)`;
}

async function updateSubtasks(job) {
  if (!memory.subtaskVertex || !job.vertices.some((v) => v.id === memory.subtaskVertex)) {
    memory.subtaskVertex = job.vertices[0] && job.vertices[0].id;
  }
  fill("vertex-picker", job.vertices.map((v) => el("button", {
    type: "button",
    class: v.id === memory.subtaskVertex ? "current" : "",
    onclick: () => { memory.subtaskVertex = v.id; refresh(true); },
  }, `${shorten(v.name, 40)} (${v.parallelism})`)));
  if (!memory.subtaskVertex) return;
  const vid = memory.subtaskVertex;
  const [detail, metrics] = await Promise.all([
    api("GET", `/jobs/${job.jid}/vertices/${vid}`),
    api("GET", `/jobs/${job.jid}/vertices/${vid}/metrics?get=${detailMetricIds(job, vid).join(",")}`),
  ]);
  const m = Object.fromEntries(metrics.map((e) => [e.id, Number(e.value)]));
  fill("job-subtasks", table(
    ["#", "Status", "Attempt", "Host", "TaskManager", "Duration", "Records in", "Records out",
      "Busy", "Back-pressured", "Buffers in / out", "Bytes in / out"],
    detail.subtasks.map((s) => el("tr", {},
      el("td", { class: "num" }, s.subtask),
      el("td", {}, badge(s.status)),
      el("td", { class: "num" }, s.attempt),
      el("td", { class: "mono nowrap" }, s.endpoint || "–"),
      el("td", { class: "mono nowrap" }, s["taskmanager-id"] || "–"),
      el("td", { class: "num", title: `started ${formatTime(s["start-time"])}` }, formatDuration(s.duration)),
      el("td", { class: "num" }, counted(s.metrics["read-records"], m[`${s.subtask}.numRecordsInPerSecond`])),
      el("td", { class: "num" }, counted(s.metrics["write-records"], m[`${s.subtask}.numRecordsOutPerSecond`])),
      el("td", { class: "num" }, percent(m[`${s.subtask}.busyTimeMsPerSecond`])),
      el("td", { class: "num" }, percent(m[`${s.subtask}.backPressuredTimeMsPerSecond`])),
      el("td", { class: "num nowrap", title: "inPoolUsage / outPoolUsage: the input channels' and output pools' buffers in use" },
        `${poolUsage(m[`${s.subtask}.inPoolUsage`])} / ${poolUsage(m[`${s.subtask}.outPoolUsage`])}`),
      el("td", { class: "num" }, `${formatBytes(s.metrics["read-bytes"])} / ${formatBytes(s.metrics["write-bytes"])}`)))));
}

// A pool usage (0..1) as a percentage.
function poolUsage(u) {
  return u === undefined || Number.isNaN(u) ? "–" : `${Math.round(u * 100)}%`;
}

function detailMetricIds(job, vid) {
  const v = job.vertices.find((x) => x.id === vid);
  const ids = [];
  for (let s = 0; s < (v ? v.parallelism : 0); s++) {
    for (const name of ["numRecordsInPerSecond", "numRecordsOutPerSecond", "busyTimeMsPerSecond", "backPressuredTimeMsPerSecond",
      "inPoolUsage", "outPoolUsage"]) {
      ids.push(`${s}.${name}`);
    }
  }
  return ids;
}

async function updateCheckpoints(job) {
  const stats = await api("GET", `/jobs/${job.jid}/checkpoints`);
  const c = stats.counts;
  fill("checkpoint-cards",
    card(c.total, "Triggered"), card(c.in_progress, "In progress"),
    card(c.completed, "Completed", c.completed > 0 ? "ok" : ""),
    card(c.failed, "Failed", c.failed > 0 ? "bad" : ""), card(c.restored, "Restored"));
  const s = stats.summary;
  const row = (label, f, d) => el("tr", {}, el("td", {}, label),
    ...["min", "avg", "p90", "max"].map((k) => el("td", { class: "num" }, c.completed > 0 ? f(d[k]) : "–")));
  const latest = stats.latest || {};
  fill("checkpoint-summary",
    table(["", "Minimum", "Average", "90th percentile", "Maximum"], [
      row("End-to-end duration", formatDuration, s.end_to_end_duration),
      row("Checkpointed size", formatBytes, s.checkpointed_size),
      row("Full state size", formatBytes, s.state_size),
    ]),
    el("p", { class: "muted paths" },
      "Latest checkpoint: ", el("span", { class: "mono" }, latest.completed ? latest.completed.external_path : "–"),
      el("br"), "Latest savepoint: ", el("span", { class: "mono", id: "latest-savepoint" }, latest.savepoint ? latest.savepoint.external_path : "–"),
      latest.restored ? [el("br"), "Restored from: ", el("span", { class: "mono" }, latest.restored.external_path)] : null));
  const history = stats.history || [];
  if (memory.checkpoint === null && history.length > 0) memory.checkpoint = history[0].id;
  fill("checkpoint-history", table(
    ["ID", "Type", "Status", "Triggered", "Latest ack", "End-to-end", "Checkpointed", "State size", "Acknowledged"],
    history.map((h) => el("tr", {
      class: `clickable${h.id === memory.checkpoint ? " selected" : ""}`,
      onclick: () => { memory.checkpoint = h.id; memory.checkpointVertex = null; refresh(true); },
    },
    el("td", { class: "num" }, h.id),
    el("td", {}, h.is_savepoint ? "savepoint" : "checkpoint"),
    el("td", {}, badge(h.status), h.failure_message ? el("div", { class: "failure" }, h.failure_message) : null),
    el("td", {}, formatClock(h.trigger_timestamp)),
    el("td", {}, formatClock(h.latest_ack_timestamp)),
    el("td", { class: "num" }, formatDuration(h.end_to_end_duration)),
    el("td", { class: "num" }, formatBytes(h.checkpointed_size)),
    el("td", { class: "num" }, formatBytes(h.state_size)),
    el("td", { class: "num" }, `${h.num_acknowledged_subtasks} / ${h.num_subtasks}`))),
    "no checkpoints yet (set execution.checkpointing.interval, or trigger a savepoint)"));
  if (memory.checkpoint === null) {
    fill("checkpoint-details", el("p", { class: "muted" }, "No checkpoint selected."));
    return;
  }
  let details;
  try {
    details = await api("GET", `/jobs/${job.jid}/checkpoints/details/${memory.checkpoint}`);
  } catch (e) {
    fill("checkpoint-details", el("p", { class: "muted" }, `Checkpoint ${memory.checkpoint}: ${e.message}`));
    return;
  }
  const names = new Map(job.vertices.map((v) => [v.id, v.name]));
  const rows = Object.values(details.tasks).map((t) => el("tr", {
    class: `clickable${t.id === memory.checkpointVertex ? " selected" : ""}`,
    onclick: () => { memory.checkpointVertex = t.id; refresh(true); },
  },
  el("td", { class: "name" }, names.get(t.id) || t.id),
  el("td", { class: "num" }, `${t.num_acknowledged_subtasks} / ${t.num_subtasks}`),
  el("td", {}, formatClock(t.latest_ack_timestamp)),
  el("td", { class: "num" }, t.num_acknowledged_subtasks > 0 ? formatDuration(t.end_to_end_duration) : "–"),
  el("td", { class: "num" }, formatBytes(t.checkpointed_size)),
  el("td", { class: "num" }, formatBytes(t.state_size))));
  const parts = [
    el("p", {}, `${details.is_savepoint ? "Savepoint" : "Checkpoint"} ${details.id} · `, badge(details.status),
      details.external_path ? [" · ", el("span", { class: "mono" }, details.external_path)] : null),
    table(["Vertex (click for its subtasks)", "Acknowledged", "Latest ack", "End-to-end", "Checkpointed", "State size"], rows),
  ];
  if (memory.checkpointVertex) {
    const sub = await api("GET", `/jobs/${job.jid}/checkpoints/details/${details.id}/subtasks/${memory.checkpointVertex}`);
    parts.push(el("h3", {}, `Subtasks of ${names.get(memory.checkpointVertex) || memory.checkpointVertex}`),
      table(["#", "Status", "Acknowledged at", "End-to-end", "Checkpointed", "State size"],
        sub.subtasks.map((st) => el("tr", {},
          el("td", { class: "num" }, st.index),
          el("td", {}, st.status === "completed" ? "acknowledged" : "pending or failed"),
          el("td", {}, formatClock(st.ack_timestamp)),
          el("td", { class: "num" }, formatDuration(st.end_to_end_duration)),
          el("td", { class: "num" }, formatBytes(st.checkpointed_size)),
          el("td", { class: "num" }, formatBytes(st.state_size))))));
  }
  fill("checkpoint-details", parts);
}

async function updateExceptions(job) {
  const ex = await api("GET", `/jobs/${job.jid}/exceptions`);
  fill("job-root-exception", ex["root-exception"]
    ? el("pre", { class: "stack" }, ex["root-exception"])
    : el("p", { class: "muted" }, "No failure: the job has not failed or restarted."));
  const entries = (ex.exceptionHistory && ex.exceptionHistory.entries) || [];
  fill("job-exceptions", table(["Time", "Exception", "Task", "Location", "Details"],
    entries.map((e) => el("tr", {},
      el("td", {}, formatTime(e.timestamp)),
      el("td", { class: "mono" }, e.exceptionName),
      el("td", {}, e.taskName || "(the job)"),
      el("td", { class: "mono" }, e.location || "–"),
      el("td", {}, el("details", {}, el("summary", {}, "stack trace"), el("pre", { class: "stack" }, e.stacktrace))))),
    "no exceptions"));
}

async function updateConfiguration(job) {
  const [config, checkpoints] = await Promise.all([
    api("GET", `/jobs/${job.jid}/config`),
    api("GET", `/jobs/${job.jid}/checkpoints/config`),
  ]);
  const user = Object.entries(config["execution-config"]["user-config"] || {});
  fill("job-user-config", table(["Key", "Value"],
    user.map(([k, v]) => el("tr", {}, el("td", { class: "mono" }, k), el("td", { class: "mono" }, v))),
    "the program has no arguments"));
  const interval = checkpoints.interval >= 9e15 ? "off" : formatDuration(checkpoints.interval);
  const rows = [
    ["Mode", checkpoints.mode],
    ["Interval", interval],
    ["Timeout", formatDuration(checkpoints.timeout)],
    ["Minimum pause", formatDuration(checkpoints.min_pause)],
    ["Maximum concurrent", checkpoints.max_concurrent],
    ["Tolerable failed checkpoints", checkpoints.tolerable_failed_checkpoints],
    ["Retained after cancellation", checkpoints.externalization.enabled ? "yes" : "no"],
    ["State backend", checkpoints.state_backend],
    ["Checkpoint storage", checkpoints.checkpoint_storage],
  ];
  fill("job-checkpoint-config", table(["Setting", "Value"],
    rows.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { class: "mono" }, v)))));
}

// --- actions ---------------------------------------------------------------------------------

async function cancelJob(jid) {
  if (!confirm(`Cancel job ${jid}? Its tasks stop without a savepoint.`)) return;
  try {
    await api("PATCH", `/jobs/${jid}?mode=cancel`);
    message("job-message", `Cancelling ${jid}…`, "info");
    await refresh(true);
  } catch (e) {
    message("job-message", `Cancel failed: ${e.message}`, "bad");
  }
}

async function savepoint(jid, stop) {
  if (stop && !confirm(`Stop job ${jid} with a savepoint?`)) return;
  const dir = $("savepoint-dir").value.trim();
  const body = stop ? { drain: false } : { "cancel-job": false };
  if (dir) body[stop ? "targetDirectory" : "target-directory"] = dir;
  const what = stop ? "Stop with savepoint" : "Savepoint";
  try {
    const { "request-id": trigger } = await api("POST", `/jobs/${jid}/${stop ? "stop" : "savepoints"}`, body);
    message("job-message", `${what} triggered (request ${trigger}); waiting for it to complete…`, "info");
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      const status = await api("GET", `/jobs/${jid}/savepoints/${trigger}`);
      if (status.status.id !== "COMPLETED") continue;
      const op = status.operation || {};
      if (op.location) message("job-message", `${what} completed: ${op.location}`, "ok");
      else message("job-message", `${what} failed: ${(op["failure-cause"] || {})["stack-trace"] || "unknown reason"}`, "bad");
      break;
    }
    await refresh(true);
  } catch (e) {
    message("job-message", `${what} failed: ${e.message}`, "bad");
  }
}

// --- TaskManagers ----------------------------------------------------------------------------

function mountTaskManagers(root) {
  root.append(panel("TaskManagers", "tm-list"));
}

const TM_METRICS = ["Status.Process.Memory.RSS", "Status.Process.CPU.Load", "Status.Process.Threads.Count"];

async function updateTaskManagers() {
  const { taskmanagers } = await api("GET", "/taskmanagers");
  const details = await Promise.all(taskmanagers.map(async (tm) => {
    const [detail, metrics] = await Promise.all([
      api("GET", `/taskmanagers/${encodeURIComponent(tm.id)}`),
      api("GET", `/taskmanagers/${encodeURIComponent(tm.id)}/metrics?get=${TM_METRICS.join(",")}`),
    ]);
    return { detail, metrics: Object.fromEntries(metrics.map((m) => [m.id, Number(m.value)])) };
  }));
  fill("tm-list", table(
    ["TaskManager", "Slots", "CPU cores", "Memory (process / physical)", "Managed / network memory",
      "Resident memory", "CPU load", "Threads", "Last heartbeat"],
    details.map(({ detail: tm, metrics: m }) => {
      const used = new Map((tm.allocatedSlots || []).map((s) => [s.index, s.jobId]));
      const slots = [];
      for (let i = 0; i < tm.slotsNumber; i++) {
        const job = used.get(i);
        slots.push(el("span", { class: `slot ${job ? "used" : "free"}`, title: job ? `slot ${i}: job ${job}` : `slot ${i}: free` }));
      }
      return el("tr", {},
        el("td", {}, el("a", { class: "mono nowrap", href: `#/taskmanager/${encodeURIComponent(tm.id)}` }, tm.id),
          el("div", { class: "muted" }, `data port ${tm.dataPort}`)),
        el("td", { class: "nowrap" }, el("span", { class: "slots" }, slots), ` ${tm.slotsNumber - tm.freeSlots} of ${tm.slotsNumber} used`),
        el("td", { class: "num" }, tm.hardware.cpuCores),
        el("td", { class: "num" }, `${formatBytes(tm.memoryConfiguration.totalProcessMemory)} / ${formatBytes(tm.hardware.physicalMemory)}`),
        el("td", { class: "num" }, `${formatBytes(tm.memoryConfiguration.managedMemory)} / ${formatBytes(tm.memoryConfiguration.networkMemory)}`),
        el("td", { class: "num" }, m["Status.Process.Memory.RSS"] === undefined ? "–" : formatBytes(m["Status.Process.Memory.RSS"])),
        el("td", { class: "num" }, m["Status.Process.CPU.Load"] === undefined ? "–" : `${(m["Status.Process.CPU.Load"] * 100).toFixed(1)}%`),
        el("td", { class: "num" }, m["Status.Process.Threads.Count"] === undefined ? "–" : m["Status.Process.Threads.Count"]),
        el("td", {}, formatClock(tm.timeSinceLastHeartbeat)));
    }),
    "no TaskManager has registered"));
}

// One TaskManager: its resources and its log files (fetched through the JobManager).
function mountTaskManager(root, [id]) {
  root.append(panel("TaskManager", "tm-details"));
  mountLogs(root, "tm", `/taskmanagers/${encodeURIComponent(id)}`);
}

async function updateTaskManager([id]) {
  const base = `/taskmanagers/${encodeURIComponent(id)}`;
  const tm = await api("GET", base);
  const rows = [
    ["Id", tm.id],
    ["Address", tm.path],
    ["Data port", tm.dataPort],
    ["Slots", `${tm.slotsNumber - tm.freeSlots} of ${tm.slotsNumber} used`],
    ["CPU cores", tm.hardware.cpuCores],
    ["Process memory", formatBytes(tm.memoryConfiguration.totalProcessMemory)],
    ["Managed / network memory", `${formatBytes(tm.memoryConfiguration.managedMemory)} / ${formatBytes(tm.memoryConfiguration.networkMemory)}`],
    ["Prometheus reporter port", tm.prometheusReporterPort ?? "–"],
    ["Last heartbeat", formatClock(tm.timeSinceLastHeartbeat)],
  ];
  fill("tm-details", table(["Property", "Value"], rows.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { class: "mono" }, v ?? "–")))));
  await updateLogs("tm", base);
}

// --- JobManager ------------------------------------------------------------------------------

const JM_TABS = ["metrics", "configuration", "logs"];

function mountJobManager(root, [tab = "metrics"]) {
  root.append(el("nav", { class: "tabs" }, JM_TABS.map((t) =>
    el("a", { href: `#/jobmanager/${t}`, class: t === tab ? "current" : "" }, t[0].toUpperCase() + t.slice(1)))));
  if (tab === "metrics") root.append(el("div", { id: "jm-cards", class: "cards" }));
  else if (tab === "configuration") root.append(panel("Configuration", "jm-config"));
  else mountLogs(root, "jm", "/jobmanager");
}

async function updateJobManager([tab = "metrics"]) {
  if (tab === "metrics") {
    const ids = ["numRegisteredTaskManagers", "taskSlotsTotal", "taskSlotsAvailable", "numRunningJobs", ...TM_METRICS, "Status.Process.FileDescriptors.Open"];
    const list = await api("GET", `/jobmanager/metrics?get=${ids.join(",")}`);
    const m = Object.fromEntries(list.map((e) => [e.id, Number(e.value)]));
    fill("jm-cards",
      card(formatBytes(m["Status.Process.Memory.RSS"]), "Resident memory"),
      card(`${((m["Status.Process.CPU.Load"] || 0) * 100).toFixed(1)}%`, "CPU load"),
      card(m["Status.Process.Threads.Count"], "Threads"),
      card(m["Status.Process.FileDescriptors.Open"], "Open files"),
      card(m.numRegisteredTaskManagers, "TaskManagers"),
      card(`${m.taskSlotsAvailable} / ${m.taskSlotsTotal}`, "Slots available / total"),
      card(m.numRunningJobs, "Jobs running"));
  } else if (tab === "configuration") {
    const entries = await api("GET", "/jobmanager/config");
    entries.sort((a, b) => a.key.localeCompare(b.key));
    fill("jm-config", table(["Key", "Value"],
      entries.map((e) => el("tr", {}, el("td", { class: "mono" }, e.key), el("td", { class: "mono" }, e.value)))));
  } else {
    await updateLogs("jm", "/jobmanager");
  }
}

// --- log files of the JobManager and of each TaskManager ---------------------------------------

// The log files of a daemon (`base`: "/jobmanager" or "/taskmanagers/<id>") in panel
// `<prefix>-logs` and the chosen file's text in `<prefix>-log`.
function mountLogs(root, prefix, base) {
  root.append(panel("Log files", `${prefix}-logs`),
    panel("Log", `${prefix}-log`, el("button", { type: "button", id: `${prefix}-log-reload`, onclick: () => showLog(prefix, base) }, "Reload")));
}

async function updateLogs(prefix, base) {
  let logs;
  try {
    logs = (await api("GET", `${base}/logs`)).logs;
  } catch (e) {
    fill(`${prefix}-logs`, el("p", { class: "muted" }, e.message));
    return;
  }
  const chosen = memory.logs.get(base);
  if (!chosen || !logs.some((l) => l.name === chosen)) memory.logs.set(base, logs.length ? logs[0].name : null);
  fill(`${prefix}-logs`, table(["File", "Size", "Last written"], logs.map((l) => el("tr", {
    class: `clickable${l.name === memory.logs.get(base) ? " selected" : ""}`,
    onclick: () => { memory.logs.set(base, l.name); showLog(prefix, base); refresh(true); },
  }, el("td", { class: "mono" }, l.name), el("td", { class: "num" }, formatBytes(l.size)), el("td", {}, formatTime(l.mtime)))),
  "no log file: the daemon logs to a terminal"));
  if (!$(`${prefix}-log`).hasChildNodes()) await showLog(prefix, base);
}

const LOG_TAIL = 256 * 1024;

async function showLog(prefix, base) {
  const name = memory.logs.get(base);
  if (!name) { fill(`${prefix}-log`, el("p", { class: "muted" }, "No log file.")); return; }
  let text;
  try {
    text = await apiText(`${base}/logs/${encodeURIComponent(name)}`);
  } catch (e) {
    fill(`${prefix}-log`, el("p", { class: "muted" }, e.message));
    return;
  }
  const tail = text.length > LOG_TAIL ? `… (first ${formatBytes(text.length - LOG_TAIL)} left out)\n${text.slice(-LOG_TAIL)}` : text;
  const pre = el("pre", { class: "log", id: `${prefix}-log-text` }, tail);
  fill(`${prefix}-log`, el("p", { class: "muted" }, `${name}, ${formatBytes(text.length)}`), pre);
  pre.scrollTop = pre.scrollHeight; // the newest lines
}

// --- submission ------------------------------------------------------------------------------

function mountSubmit(root) {
  root.append(el("section", { class: "panel" },
    el("div", { class: "panel-head" }, el("h2", {}, "Submit a bundled example job")),
    el("div", { class: "panel-body" },
      el("form", { id: "submit", onsubmit: submitJob },
        el("label", {}, "Job ", el("select", { id: "submit-job", required: true })),
        el("label", {}, "Arguments ", el("input", { id: "submit-args", placeholder: "--key value …", size: 36 })),
        el("label", {}, "Parallelism ", el("input", { id: "submit-parallelism", type: "number", min: 1, placeholder: "default" })),
        el("button", { type: "submit" }, "Submit")),
      el("p", { id: "submit-usage", class: "muted" }),
      el("p", { id: "submit-result", class: "message" }))));
  loadExamples().catch((e) => message("submit-result", e.message, "bad"));
}

async function loadExamples() {
  const { examples } = await api("GET", "/sluice/examples");
  const select = $("submit-job");
  select.replaceChildren(...examples.map((e) => el("option", { value: e.name }, e.name)));
  const usage = () => {
    const e = examples.find((x) => x.name === select.value);
    $("submit-usage").textContent = e ? `${e.description} Arguments: ${e.usage}` : "";
  };
  select.addEventListener("change", usage);
  usage();
}

async function submitJob(event) {
  event.preventDefault();
  const args = $("submit-args").value.trim();
  const parallelism = $("submit-parallelism").value;
  const body = { job: $("submit-job").value, args: args ? args.split(/\s+/) : [] };
  if (parallelism) body.parallelism = Number(parallelism);
  try {
    const { jobid } = await api("POST", "/sluice/jobs", body);
    location.hash = `#/job/${jobid}`;
  } catch (e) {
    message("submit-result", `Submission failed: ${e.message}`, "bad");
  }
}

// --- start -----------------------------------------------------------------------------------

window.addEventListener("hashchange", () => refresh(true));
api("GET", "/config").then((c) => { $("version").textContent = c["flink-version"]; }).catch(() => {});
refresh(true);
setInterval(() => refresh(false), POLL_MS);
