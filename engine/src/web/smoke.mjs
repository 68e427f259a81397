// Test helper, not served: runs app.js under Node against a live JobManager with a tiny fake DOM
// and checks that the page renders the API's answers and its actions work. Used by the ignored
// test `rest::tests::web_ui_runs_against_the_api` (needs `node` ≥ 18).
// Usage: node smoke.mjs http://127.0.0.1:PORT path/to/app.js
import { readFileSync } from "node:fs";
import vm from "node:vm";

const [base, appPath] = process.argv.slice(2);

class Element {
  constructor(tag, id) {
    this.tag = tag;
    this.id = id;
    this.children = [];
    this.attrs = {};
    this.listeners = {};
    this.hidden = false;
    this.className = "";
    this.value = "";
    this._text = null;
    this.classList = { toggle: (c, on) => { this.className = on ? c : ""; } };
  }
  append(...nodes) { this._text = null; this.children.push(...nodes); }
  replaceChildren(...nodes) { this._text = null; this.children = nodes; }
  setAttribute(k, v) { this.attrs[k] = v; }
  addEventListener(type, f) { (this.listeners[type] ||= []).push(f); }
  async fire(type, event = {}) {
    for (const f of this.listeners[type] || []) {
      await f({ preventDefault() {}, stopPropagation() {}, ...event });
    }
  }
  set textContent(t) { this._text = String(t); this.children = []; }
  get textContent() {
    return this._text ?? this.children.map((c) => (typeof c === "string" ? c : c.textContent)).join("");
  }
  find(pred) {
    if (pred(this)) return this;
    for (const c of this.children) {
      const hit = c instanceof Element && c.find(pred);
      if (hit) return hit;
    }
    return null;
  }
}
class Text extends Element {
  constructor(t) { super("#text"); this._text = t; }
}

const byId = new Map();
const get = (id) => { if (!byId.has(id)) byId.set(id, new Element("div", id)); return byId.get(id); };
const tbodies = new Map();
globalThis.Node = Element;
globalThis.document = {
  getElementById: get,
  querySelector(sel) {
    const m = /^#([\w-]+) tbody$/.exec(sel);
    if (!m) throw new Error(`unsupported selector ${sel}`);
    if (!tbodies.has(m[1])) tbodies.set(m[1], new Element("tbody"));
    return tbodies.get(m[1]);
  },
  createElement: (tag) => new Element(tag),
  createTextNode: (t) => new Text(t),
};
const realFetch = globalThis.fetch;
globalThis.fetch = (path, init) => realFetch(base + path, init);
globalThis.setInterval = () => 0;
globalThis.confirm = () => true;

function check(cond, what) {
  if (!cond) { console.error(`FAIL: ${what}`); process.exit(1); }
}
const settle = () => new Promise((r) => setTimeout(r, 300));

vm.runInThisContext(readFileSync(appPath, "utf8"), { filename: "app.js" });
await settle();

check(get("status").textContent.startsWith("updated"), `status: ${get("status").textContent}`);
check(get("overview").children.length === 7, "seven overview cards");
check(get("version").textContent.startsWith("sluice"), "version shown");
check(get("submit-job").children.length >= 2, "examples in the submit form");

// Submit a job through the form.
get("submit-job").value = "stream-sum";
get("submit-args").value = "--rate 5";
get("submit-parallelism").value = "2";
await get("submit").fire("submit");
await settle();
const result = get("submit-result").textContent;
check(result.startsWith("Submitted "), `submit result: ${result}`);
const jid = result.slice("Submitted ".length);
const running = document.querySelector("#running-jobs tbody");
check(running.textContent.includes(jid), "the job is listed as running");
check(running.textContent.includes("RUNNING"), "its state is shown");
check(!get("job-detail").hidden, "its details are shown after submission");
const vertices = document.querySelector("#detail-vertices tbody");
check(vertices.children.length >= 1 && vertices.textContent.includes("SCHEDULED"), "vertices shown");

// Cancel it with its button.
const button = running.find((e) => e.tag === "button");
check(button, "a Cancel button");
await button.fire("click");
await settle();
const finished = document.querySelector("#finished-jobs tbody");
check(finished.textContent.includes(jid) && finished.textContent.includes("CANCELED"), "cancelled job listed as finished");

// A bad submission shows the server's reason.
get("submit-args").value = "--rate x";
await get("submit").fire("submit");
await settle();
check(get("submit-result").textContent.includes("--rate"), `bad submission: ${get("submit-result").textContent}`);
console.log("UI OK");
