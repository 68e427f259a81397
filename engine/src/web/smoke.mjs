// Test driver, not served: opens the web UI of a live JobManager in headless Chromium (the
// DevTools protocol over --remote-debugging-pipe, so no WebSocket client is needed), walks
// through the pages of a running job, triggers a savepoint, cancels the job, and saves a
// screenshot of each page. Used by `integration/tests/web_ui.rs`; needs node >= 18.
// Usage: node smoke.mjs http://127.0.0.1:PORT <job id> <screenshot dir> [chromium]
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [base, jid, outDir, chromium = "/usr/bin/chromium"] = process.argv.slice(2);
if (!base || !jid || !outDir) {
  console.error("usage: node smoke.mjs <rest base url> <job id> <screenshot dir> [chromium]");
  process.exit(2);
}
const WIDTH = 1440;
const profile = mkdtempSync(join(tmpdir(), "sluice-ui-profile-"));
const browser = spawn(chromium, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--hide-scrollbars", "--remote-debugging-pipe", `--user-data-dir=${profile}`,
  `--window-size=${WIDTH},1000`, "about:blank",
], { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
let browserLog = "";
browser.stderr.on("data", (d) => { browserLog = (browserLog + d).slice(-4000); });

function finish(code, text) {
  (code === 0 ? console.log : console.error)(text);
  browser.kill("SIGKILL");
  try { rmSync(profile, { recursive: true, force: true }); } catch (_) { /* best effort */ }
  process.exit(code);
}
function fail(what) { finish(1, `FAIL: ${what}`); }
setTimeout(() => fail("the walk through the UI took longer than 4 minutes"), 240_000).unref();
browser.on("exit", (code) => fail(`chromium exited (${code}): ${browserLog}`));

// --- the DevTools protocol: NUL-terminated JSON messages on fds 3 (in) and 4 (out) ---------
const toBrowser = browser.stdio[3];
const fromBrowser = browser.stdio[4];
let nextId = 1;
const waiting = new Map();
const listeners = [];
let buffered = "";
fromBrowser.on("data", (chunk) => {
  buffered += chunk.toString("utf8");
  let end;
  while ((end = buffered.indexOf("\0")) >= 0) {
    const message = JSON.parse(buffered.slice(0, end));
    buffered = buffered.slice(end + 1);
    if (message.id && waiting.has(message.id)) {
      const { resolve, reject, method } = waiting.get(message.id);
      waiting.delete(message.id);
      if (message.error) reject(new Error(`${method}: ${message.error.message}`));
      else resolve(message.result);
    } else if (message.method) {
      for (const f of listeners) f(message);
    }
  }
});
function send(method, params = {}, sessionId) {
  const id = nextId++;
  toBrowser.write(`${JSON.stringify({ id, method, params, sessionId })}\0`);
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject, method }));
}

const { targetId } = await send("Target.createTarget", { url: "about:blank" });
const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
const page = (method, params) => send(method, params, sessionId);
let dialogs = 0;
const consoleErrors = [];
listeners.push((m) => {
  if (m.sessionId !== sessionId) return;
  if (m.method === "Page.javascriptDialogOpening") {
    dialogs++;
    page("Page.handleJavaScriptDialog", { accept: true });
  } else if (m.method === "Runtime.exceptionThrown") {
    consoleErrors.push(m.params.exceptionDetails.exception?.description || m.params.exceptionDetails.text);
  }
});
await page("Page.enable");
await page("Runtime.enable");
await page("Emulation.setDeviceMetricsOverride", { width: WIDTH, height: 1000, deviceScaleFactor: 1, mobile: false });

async function evaluate(expression) {
  const { result, exceptionDetails } = await page("Runtime.evaluate", {
    expression, returnByValue: true, awaitPromise: true,
  });
  if (exceptionDetails) throw new Error(`${expression}: ${exceptionDetails.exception?.description || exceptionDetails.text}`);
  return result.value;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(expression, what, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await evaluate(expression);
      if (last) return last;
    } catch (e) {
      last = e.message;
    }
    await sleep(250);
  }
  const status = await evaluate("document.getElementById('status').textContent").catch(() => "?");
  fail(`${what} (last: ${JSON.stringify(last)}; page status: ${status})`);
}
async function open(hash) {
  await page("Page.navigate", { url: `${base}/${hash}` });
}
const shots = [];
async function screenshot(name) {
  const { cssContentSize } = await page("Page.getLayoutMetrics");
  const height = Math.min(4000, Math.ceil(cssContentSize.height));
  const { data } = await page("Page.captureScreenshot", {
    format: "png", captureBeyondViewport: true, clip: { x: 0, y: 0, width: WIDTH, height, scale: 1 },
  });
  const path = join(outDir, `${name}.png`);
  writeFileSync(path, Buffer.from(data, "base64"));
  shots.push(path);
}
const text = (selector) => `(document.querySelector(${JSON.stringify(selector)})?.textContent ?? "")`;

// --- the walk ----------------------------------------------------------------------------------

// Overview: the cluster's numbers and the running job.
await open("#/overview");
await waitFor(`${text("#running-jobs")}.includes(${JSON.stringify(jid)}) && ${text("#running-jobs")}.includes("RUNNING")`,
  "the overview lists the job as running");
const cards = await evaluate("document.querySelectorAll('#overview-cards .card').length");
if (cards !== 6) fail(`six overview cards, not ${cards}`);
await screenshot("overview");

// The job: its graph, numbers that change, the throughput chart.
await open(`#/job/${jid}`);
const nodes = await waitFor("document.querySelectorAll('#job-graph g.node').length >= 2 && document.querySelectorAll('#job-graph g.node').length",
  "the job graph draws its vertices");
const labels = await evaluate("[...document.querySelectorAll('#job-graph .edge-label text')].map((t) => t.textContent)");
if (labels.length < 1 || labels.some((l) => !l)) fail(`edges name their ship strategy: ${JSON.stringify(labels)}`);
// No text of a vertex box runs past the box.
const overflow = await evaluate(`[...document.querySelectorAll('#job-graph g.node')].flatMap((g) => {
  const box = g.querySelector('rect.box').getBBox();
  return [...g.querySelectorAll('text')].filter((t) => t.getBBox().x + t.getBBox().width > box.width - 4).map((t) => t.textContent);
})`);
if (overflow.length > 0) fail(`text runs out of its vertex box: ${JSON.stringify(overflow)}`);
const recordsIn = `[...document.querySelectorAll('#job-vertices td.records-in .count')].reduce((s, c) => s + Number(c.textContent.replace(/,/g, '')), 0)`;
const first = await waitFor(`${recordsIn} > 0 && ${recordsIn}`, "records flow into the vertices");
await waitFor(`${recordsIn} > ${first}`, "the record counts grow while the page is open");
await waitFor("document.querySelectorAll('#job-chart polyline').length >= 1", "the throughput chart draws a line", 20_000);
// The job has no event time: every vertex says so (read from each vertex's watermarks).
await waitFor("document.querySelectorAll('#job-vertices td.watermark').length >= 2", "the vertices have a low watermark column");
const watermarks = await evaluate("[...document.querySelectorAll('#job-vertices td.watermark')].map((td) => td.textContent)");
if (!watermarks.every((w) => w === "no watermark")) fail(`a job without event time has no watermarks: ${JSON.stringify(watermarks)}`);
await waitFor(`/in [0-9][0-9.,]*( [kMG])?\\/s/.test(${text("#job-graph")}) && !${text("#job-graph")}.includes("in –/s")`, "the graph shows live input rates", 20_000);
await screenshot("job-overview");

// A savepoint through its button.
await evaluate("document.getElementById('action-savepoint').click()");
const done = await waitFor(`${text("#job-message")}.startsWith("Savepoint completed: ") && ${text("#job-message")}`,
  "the savepoint completes", 90_000);
const savepoint = done.slice("Savepoint completed: ".length);

// Its entry among the checkpoints, with per-vertex and per-subtask details.
await open(`#/job/${jid}/checkpoints`);
await waitFor(`${text("#checkpoint-history")}.includes("savepoint")`, "the savepoint is in the checkpoint history");
await evaluate(`[...document.querySelectorAll('#checkpoint-history tbody tr')].find((tr) => tr.textContent.includes('savepoint')).click()`);
await waitFor(`${text("#checkpoint-details")}.startsWith("Savepoint") && document.querySelectorAll('#checkpoint-details tbody tr.clickable').length >= 2`,
  "the savepoint's vertices are listed");
await evaluate("document.querySelector('#checkpoint-details tbody tr.clickable').click()");
await waitFor(`${text("#checkpoint-details")}.includes("Subtasks of") && ${text("#checkpoint-details")}.includes("acknowledged")`,
  "a vertex's subtasks acknowledged the savepoint");
await waitFor(`${text("#latest-savepoint")} === ${JSON.stringify(savepoint)}`, "the latest savepoint's path is shown");
await screenshot("job-checkpoints");

// Subtasks: where each runs.
await open(`#/job/${jid}/subtasks`);
await waitFor(`document.querySelectorAll('#job-subtasks tbody tr').length >= 2 && ${text("#job-subtasks")}.includes("RUNNING") && /:[0-9]+/.test(${text("#job-subtasks")})`,
  "the subtasks are listed with their hosts");
await screenshot("job-subtasks");

// Configuration: the program's arguments.
await open(`#/job/${jid}/configuration`);
await waitFor(`${text("#job-user-config")}.includes("rate") && ${text("#job-checkpoint-config")}.includes("exactly_once")`,
  "the job's configuration is shown");
await open(`#/job/${jid}/exceptions`);
await waitFor(`${text("#job-exceptions")}.length > 0`, "the exception history is shown");

// TaskManagers with their slots and resident memory.
await open("#/taskmanagers");
await waitFor(`document.querySelectorAll('#tm-list .slot.used').length >= 1 && /[0-9.]+ MiB/.test(${text("#tm-list")})`,
  "the TaskManagers show used slots and memory");
await screenshot("taskmanagers");

// A TaskManager's page: its log files, fetched through the JobManager, and its log's text.
await evaluate("document.querySelector('#tm-list a[href^=\"#/taskmanager/\"]').click()");
await waitFor(`document.querySelectorAll('#tm-logs tbody tr').length >= 1 && ${text("#tm-log-text")}.includes("TaskManager started")`,
  "a TaskManager's page lists its log files and shows its log");
await screenshot("taskmanager-log");

// The JobManager's log.
await open("#/jobmanager/logs");
await waitFor(`${text("#jm-log-text")}.includes(${JSON.stringify(jid)})`, "the JobManager's log mentions the job");
await screenshot("jobmanager-log");

// Cancel through its button (the confirmation is accepted).
await open(`#/job/${jid}`);
await waitFor("document.getElementById('action-cancel') && !document.getElementById('action-cancel').disabled", "the cancel button is enabled");
await evaluate("document.getElementById('action-cancel').click()");
await waitFor(`${text("#job-state")} === "CANCELED"`, "the job is cancelled", 60_000);
if (dialogs < 1) fail("cancelling asked for confirmation");
await waitFor("document.getElementById('action-cancel').disabled", "the actions are disabled once the job ended");
await screenshot("job-canceled");
await open("#/jobs");
await waitFor(`${text("#completed-jobs")}.includes(${JSON.stringify(jid)}) && ${text("#completed-jobs")}.includes("CANCELED")`,
  "the job is listed as completed");
if (consoleErrors.length > 0) fail(`the page threw: ${consoleErrors.join("; ")}`);
finish(0, JSON.stringify({ ok: true, vertices: nodes, savepoint, screenshots: shots }));
