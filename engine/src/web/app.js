// sluice web UI: polls the JobManager's REST API every 2 s. No dependencies, no build step.
"use strict";

const POLL_MS = 2000;
let selectedJob = null;

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

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function fillTable(id, rows, columns) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren();
  if (rows.length === 0) {
    body.append(el("tr", {}, el("td", { class: "empty", colspan: columns }, "none")));
  }
  for (const row of rows) body.append(row);
}

function stateBadge(state) {
  return el("span", { class: `state state-${state}` }, state);
}

function formatTime(ms) {
  return ms > 0 ? new Date(ms).toLocaleString() : "–";
}

function formatDuration(ms) {
  if (ms < 0) return "–";
  const s = Math.floor(ms / 1000);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return h > 0 ? `${h}h ${m}m ${sec}s` : m > 0 ? `${m}m ${sec}s` : `${sec}s`;
}

function formatCount(n) {
  return Number(n).toLocaleString();
}

function formatBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function taskSummary(tasks) {
  // Counts of non-zero states, e.g. "4 running, 2 scheduled".
  return Object.entries(tasks)
    .filter(([state, n]) => state !== "total" && n > 0)
    .map(([state, n]) => `${n} ${state.toLowerCase()}`)
    .join(", ") || "–";
}

function setStatus(text, isError) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.classList.toggle("error", Boolean(isError));
}

// --- views -----------------------------------------------------------------------------------

function renderOverview(o) {
  const card = (value, label) =>
    el("div", { class: "card" }, el("div", { class: "value" }, value), el("div", { class: "label" }, label));
  document.getElementById("overview").replaceChildren(
    card(o["taskmanagers"], "TaskManagers"),
    card(o["slots-total"], "Slots total"),
    card(o["slots-available"], "Slots available"),
    card(o["jobs-running"], "Jobs running"),
    card(o["jobs-finished"], "Jobs finished"),
    card(o["jobs-cancelled"], "Jobs cancelled"),
    card(o["jobs-failed"], "Jobs failed"),
  );
  document.getElementById("version").textContent = o["flink-version"];
}

const TERMINAL = new Set(["FINISHED", "CANCELED", "FAILED"]);

function jobRow(job, withCancel) {
  const cells = [
    el("td", {}, job.name),
    el("td", { class: "mono" }, job.jid),
    el("td", {}, stateBadge(job.state)),
    el("td", {}, formatTime(job["start-time"])),
    el("td", {}, formatDuration(job.duration)),
    el("td", {}, `${job.tasks.total} (${taskSummary(job.tasks)})`),
  ];
  if (withCancel) {
    cells.push(el("td", {}, el("button", {
      class: "danger",
      type: "button",
      onclick: (event) => { event.stopPropagation(); cancelJob(job.jid, job.name); },
    }, "Cancel")));
  }
  return el("tr", { class: "clickable", onclick: () => selectJob(job.jid) }, ...cells);
}

function renderJobs(jobs) {
  jobs.sort((a, b) => b["start-time"] - a["start-time"]);
  const running = jobs.filter((j) => !TERMINAL.has(j.state));
  const finished = jobs.filter((j) => TERMINAL.has(j.state));
  fillTable("running-jobs", running.map((j) => jobRow(j, j.state !== "CANCELLING")), 7);
  fillTable("finished-jobs", finished.map((j) => jobRow(j, false)), 6);
}

function renderTaskManagers(tms) {
  fillTable("taskmanagers", tms.map((tm) => el("tr", {},
    el("td", { class: "mono" }, tm.id),
    el("td", { class: "mono" }, tm.path),
    el("td", {}, tm.dataPort),
    el("td", {}, formatTime(tm.timeSinceLastHeartbeat)),
    el("td", {}, tm.slotsNumber),
    el("td", {}, tm.freeSlots),
    el("td", {}, tm.hardware.cpuCores),
  )), 7);
}

async function renderDetail() {
  const section = document.getElementById("job-detail");
  if (!selectedJob) { section.hidden = true; return; }
  const [job, exceptions] = await Promise.all([
    api("GET", `/jobs/${selectedJob}`),
    api("GET", `/jobs/${selectedJob}/exceptions`),
  ]);
  section.hidden = false;
  document.getElementById("detail-name").replaceChildren(job.name, " ", stateBadge(job.state));
  document.getElementById("detail-summary").textContent =
    `${job.jid} · started ${formatTime(job["start-time"])} · ${formatDuration(job.duration)}`;
  fillTable("detail-vertices", job.vertices.map((v) => el("tr", {},
    el("td", {}, v.name),
    el("td", {}, v.parallelism),
    el("td", {}, stateBadge(v.status)),
    el("td", {}, formatCount(v.metrics["read-records"])),
    el("td", {}, formatCount(v.metrics["write-records"])),
    el("td", {}, formatBytes(v.metrics["read-bytes"])),
    el("td", {}, formatBytes(v.metrics["write-bytes"])),
    el("td", {}, taskSummary(v.tasks)),
  )), 8);
  const pre = document.getElementById("detail-exception");
  const root = exceptions["root-exception"];
  pre.hidden = !root;
  pre.textContent = root || "";
}

// --- actions ---------------------------------------------------------------------------------

function selectJob(jid) {
  selectedJob = jid;
  renderDetail().catch((e) => setStatus(e.message, true));
}

async function cancelJob(jid, name) {
  if (!confirm(`Cancel job "${name}" (${jid})?`)) return;
  try {
    await api("PATCH", `/jobs/${jid}?mode=cancel`);
    setStatus(`Cancelling ${jid}`);
    await refresh();
  } catch (e) {
    setStatus(`Cancel failed: ${e.message}`, true);
  }
}

async function loadExamples() {
  const { examples } = await api("GET", "/sluice/examples");
  const select = document.getElementById("submit-job");
  select.replaceChildren(...examples.map((e) => el("option", { value: e.name }, e.name)));
  const usage = () => {
    const e = examples.find((x) => x.name === select.value);
    document.getElementById("submit-usage").textContent = e ? `${e.description} Arguments: ${e.usage}` : "";
  };
  select.addEventListener("change", usage);
  usage();
}

async function submitJob(event) {
  event.preventDefault();
  const result = document.getElementById("submit-result");
  const args = document.getElementById("submit-args").value.trim();
  const parallelism = document.getElementById("submit-parallelism").value;
  const body = {
    job: document.getElementById("submit-job").value,
    args: args ? args.split(/\s+/) : [],
  };
  if (parallelism) body.parallelism = Number(parallelism);
  try {
    const { jobid } = await api("POST", "/sluice/jobs", body);
    result.textContent = `Submitted ${jobid}`;
    selectJob(jobid);
    await refresh();
  } catch (e) {
    result.textContent = `Submission failed: ${e.message}`;
  }
}

// --- polling ---------------------------------------------------------------------------------

async function refresh() {
  try {
    const [overview, jobs, tms] = await Promise.all([
      api("GET", "/overview"),
      api("GET", "/jobs/overview"),
      api("GET", "/taskmanagers"),
    ]);
    renderOverview(overview);
    renderJobs(jobs.jobs);
    renderTaskManagers(tms.taskmanagers);
    await renderDetail();
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    setStatus(`JobManager unreachable: ${e.message}`, true);
  }
}

document.getElementById("submit").addEventListener("submit", submitJob);
document.getElementById("detail-close").addEventListener("click", () => {
  selectedJob = null;
  document.getElementById("job-detail").hidden = true;
});
loadExamples().catch((e) => setStatus(e.message, true));
refresh();
setInterval(refresh, POLL_MS);
