// vrambudget in the browser: Pyodide runs vrambudget's own Python core (app-*.zip, unpacked into Pyodide's file
// system); this file only reads the form, calls vrambudget_web.py (JSON in, JSON out) and draws the answer.
import { loadPyodide } from "./pyodide/pyodide.mjs";

const $ = (id) => document.getElementById(id);
const info = JSON.parse($("build-info").textContent || "{}");
const CONFIG = "__config__"; // the model select's entry for a pasted / dropped / fetched config.json
const LOCAL_MODEL = "/tmp/model";
const GIB = 1024 ** 3;
const FIELDS = ["gpu", "model", "vllm_version", "gmu", "max_model_len", "kv_cache_dtype", "max_num_seqs",
  "max_num_batched_tokens", "tensor_parallel_size", "mtp", "language_model_only", "enforce_eager", "checkpoint"];

// What tests and benchmarks read: when Python was ready, how many answers were drawn, the last one.
const state = { ready: false, answers: 0, errors: 0, timings: {}, last: null, error: null };
window.vrambudget = state;

let py = null;
let web = null;
let seq = 0;

const fmt = (n) => Number(n).toLocaleString("en-US");
const gib = (b) => (b / GIB).toFixed(2);

function status(text, cls) {
  const el = $("status");
  el.textContent = text;
  el.className = "status" + (cls ? " " + cls : "");
}

async function boot() {
  const t0 = performance.now();
  state.timings.boot_start_ms = t0; // every timing is ms since navigation start (performance.now())
  if (!info.app_zip) {
    status("This is web/index.html as written, not the built page: run `python web/build.py` and open " +
      "web/dist/index.html through a web server.", "error");
    return;
  }
  const zip = fetch(info.app_zip).then((r) => {
    if (!r.ok) throw new Error(`${info.app_zip}: HTTP ${r.status}`);
    return r.arrayBuffer();
  });
  // the build's memory snapshot (web/snapshot.mjs): Python already booted with vrambudget imported; its files (the
  // bundled profiles) are not in it, so the zip is unpacked either way
  const snapshot = info.snapshot ? fetch(info.snapshot).then((r) => {
    if (!r.ok) throw new Error(`${info.snapshot}: HTTP ${r.status}`);
    return new Response(r.body.pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
  }) : undefined;
  py = await loadPyodide({ indexURL: new URL("pyodide/", location.href).href, _loadSnapshot: snapshot });
  state.timings.pyodide_ms = performance.now();
  state.timings.snapshot = Boolean(snapshot);
  py.unpackArchive(await zip, "zip", { extractDir: "/app" });
  if (!snapshot) py.runPython("import sys; sys.path.insert(0, '/app')");
  state.timings.unpacked_ms = performance.now();
  web = py.pyimport("vrambudget_web");
  state.timings.imported_ms = performance.now();
  const cat = JSON.parse(web.catalog());
  if (cat.error) throw new Error(cat.error);
  fillPickers(cat);
  state.timings.ready_ms = performance.now();
  state.ready = true;
  status(`Ready: vrambudget ${cat.version} on Python in your browser (Pyodide ${info.pyodide}), loaded in ` +
    `${(performance.now() / 1000).toFixed(1)} s.`, "ready");
  for (const id of ["gpu", "model"]) $(id).disabled = false;
  await update();
}

function option(value, label) {
  const o = document.createElement("option");
  o.value = value;
  o.textContent = label;
  return o;
}

function fillPickers(cat) {
  const gpu = $("gpu");
  for (const g of cat.gpus) gpu.append(option(g.key, `${g.name} (${g.gib} GiB)`));
  const model = $("model");
  for (const m of cat.models) {
    model.append(option(m.name, m.name === cat.default_model ? `${m.name} (the default)` : m.name));
    model.lastChild.title = m.description;
  }
  model.append(option(CONFIG, "config.json below (pasted, dropped or fetched)"));
  const ver = $("vllm_version");
  ver.append(option("", `newest modelled (${cat.newest})`));
  for (const v of cat.vllm_versions) ver.append(option(v, v));
  // defaults, then the URL's #gpu=...&mtp=... (links are shareable)
  gpu.value = cat.gpus.some((g) => g.key === "rtx4060ti") ? "rtx4060ti" : cat.gpus[0].key;
  model.value = cat.default_model;
  readHash();
}

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  for (const [k, v] of h) {
    const el = $(k);
    if (!el || !FIELDS.includes(k)) continue;
    if (el.type === "checkbox") el.checked = v === "1" || v === "true";
    else if (el.tagName === "SELECT" && ![...el.options].some((o) => o.value === v)) el.append(option(v, v));
    if (el.type !== "checkbox") el.value = v;
  }
  showConfigBox();
}

function writeHash() {
  const h = new URLSearchParams();
  for (const k of FIELDS) {
    const el = $(k);
    if (el.type === "checkbox") { if (el.checked) h.set(k, "1"); }
    else if (el.value !== "" && !(k === "tensor_parallel_size" && el.value === "1")) h.set(k, el.value);
  }
  history.replaceState(null, "", "#" + h.toString());
}

function showConfigBox() {
  $("config-box").classList.toggle("active", $("model").value === CONFIG);
}

// The form as vrambudget.predict's keyword arguments (DeploymentOptions' names); "" means vLLM's default.
function request() {
  const v = (id) => $(id).value.trim();
  const num = (id, parse) => (v(id) === "" ? null : parse(v(id)));
  const lmo = v("language_model_only");
  return {
    gpu: v("gpu"),
    model: v("model") === CONFIG ? LOCAL_MODEL : v("model"),
    vllm_version: v("vllm_version") || null,
    gmu: num("gmu", Number),
    max_model_len: v("max_model_len") || null,
    kv_cache_dtype: v("kv_cache_dtype") || "auto",
    max_num_seqs: num("max_num_seqs", Number),
    max_num_batched_tokens: num("max_num_batched_tokens", Number),
    tensor_parallel_size: num("tensor_parallel_size", Number) ?? 1,
    mtp: num("mtp", Number),
    language_model_only: lmo === "" ? null : lmo === "true",
    enforce_eager: $("enforce_eager").checked,
    checkpoint: v("checkpoint") || null,
  };
}

function call(fn, req) {
  return JSON.parse(web[fn](JSON.stringify(req)));
}

const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));

async function update() {
  if (!state.ready) return;
  const mine = ++seq;
  writeHash();
  const req = request();
  if (req.model === LOCAL_MODEL) {
    const text = $("config").value;
    if (!text.trim()) return showError("Paste a model's config.json into the box (or drop the file there, or fetch it " +
      "by its Hugging Face id), or pick a bundled model.");
    py.FS.mkdirTree(LOCAL_MODEL);
    for (const name of py.FS.readdir(LOCAL_MODEL)) {
      if (name !== "." && name !== "..") py.FS.unlink(`${LOCAL_MODEL}/${name}`);
    }
    py.FS.writeFile(`${LOCAL_MODEL}/config.json`, text);
  }
  const t = { start: performance.now() };
  const failed = (e) => { // a failure of the page itself (Pyodide), one line
    console.error(e);
    showError(`The page failed: ${String(e.message || e).split("\n").filter(Boolean).pop()}`);
  };
  let pred, rep, cmd;
  try {
    pred = call("predict", req);
  } catch (e) { return failed(e); }
  t.predict = performance.now();
  if (pred.error) return showError(pred.error);
  $("error").hidden = true;
  state.error = null;
  drawAnswer(pred, { answer_lines: [] });
  drawBudget(pred.json);
  state.last = pred;
  state.answers += 1;
  if (state.timings.first_answer_ms === undefined) state.timings.first_answer_ms = performance.now();
  $("answer").dataset.seq = String(state.answers);
  await frame(); // the answer is on screen; the CLI's answer lines, the command and the GMU sweep follow
  if (mine !== seq) return;
  try {
    rep = call("report", req);
    t.report = performance.now();
    cmd = call("serve_command", req);
    t.command = performance.now();
  } catch (e) { return failed(e); }
  if (rep.answer_lines) drawAnswer(pred, rep);
  drawCommand(cmd);
  drawReport(pred, rep);
  $("answer").dataset.complete = String(state.answers);
  await frame();
  if (mine !== seq) return;
  try { drawSweep(call("sweep", req), req); } catch (e) { console.error(e); }
  t.sweep = performance.now();
  state.timings.last_update = Object.fromEntries(Object.entries(t).map(([k, v]) => [k, Math.round(v)]));
  $("sweep").dataset.seq = String(state.answers);
}

function showError(msg) {
  for (const id of ["answer", "budget", "sweep", "command", "report", "raw"]) $(id).hidden = true;
  const el = $("error");
  el.textContent = msg;
  el.hidden = false;
  state.error = msg;
  state.errors += 1;
  el.dataset.seq = String(state.errors);
}

function drawAnswer(p, rep) {
  const j = p.json;
  const fb = j.max_model_len_ceiling_first_boot ?? j.max_model_len_ceiling;
  const rs = j.max_model_len_ceiling_restart ?? j.max_model_len_ceiling;
  const fix = j.with_fix;
  const refused = (j.start_refusals || []).length > 0;
  const box = $("answer");
  box.className = "answer " + (p.starts ? "yes" : refused && fix ? "fixed" : "no");
  const mml = `max_model_len ${fmt(p.max_model_len)}`;
  $("verdict").textContent = p.starts ? `Starts: ${mml}` : refused
    ? "Does not start with these flags (vLLM refuses them at any max_model_len)"
    : j.starts_restart ? `Starts after a restart, not on the first boot: ${mml}` : `Does not start: ${mml}`;
  if (!p.starts && !refused && j.starts_restart) box.className = "answer fixed";
  const ctx = $("context");
  const longest = (a, b) => (a === b ? `<strong>${fmt(b)}</strong> tokens`
    : `<strong>${fmt(a)}</strong> tokens on the first boot after a change, <strong>${fmt(b)}</strong> after a restart`);
  if (refused && fix) {
    const flag = fix.gpu_memory_utilization !== j.inputs.gpu_memory_utilization
      ? `--gpu-memory-utilization ${fix.gpu_memory_utilization.toFixed(2)}` : `--max-num-seqs ${fix.max_num_seqs}`;
    ctx.innerHTML = `With the fix, <code>${flag}</code>: longest context ` +
      longest(fix.max_model_len_ceiling_first_boot, fix.max_model_len_ceiling_restart) + ".";
  } else if (fb || rs) {
    ctx.innerHTML = "Longest context: " + longest(fb, rs) + ".";
  } else {
    ctx.textContent = "No context starts with these flags.";
  }
  const lines = $("answer-lines");
  lines.replaceChildren(...(rep.answer_lines || []).map((t) => {
    const li = document.createElement("li");
    li.textContent = t;
    return li;
  }));
  $("subject").textContent = `${p.model} on ${p.gpu} (${gib(j.inputs.gpu_total_bytes)} GiB), ${p.vllm}; GMU ` +
    `${j.inputs.gpu_memory_utilization.toFixed(2)}, KV ${j.inputs.kv_cache_dtype}, ` +
    `max_num_seqs ${j.inputs.max_num_seqs}, max_num_batched_tokens ${j.inputs.max_num_batched_tokens}` +
    (j.inputs.enforce_eager ? ", eager" : ", CUDA graphs") +
    (j.inputs.num_speculative_tokens ? `, ${j.inputs.speculative_method} ${j.inputs.num_speculative_tokens}` : "") +
    (j.inputs.tensor_parallel_size > 1 ? `, TP ${j.inputs.tensor_parallel_size} (per GPU)` : "");
  Object.assign(box.dataset, {
    starts: String(p.starts), ceiling: String(p.max_model_len_ceiling), ceilingFirstBoot: String(fb),
    ceilingRestart: String(rs), availableKvBytes: String(p.available_kv_bytes),
    fixFirstBoot: String(fix ? fix.max_model_len_ceiling_first_boot : ""),
    fixRestart: String(fix ? fix.max_model_len_ceiling_restart : ""),
  });
  box.hidden = false;
}

const SEGMENTS = [
  ["weights_bytes", "weights", "#3b6fb6"],
  ["mtp_weights_bytes", "MTP drafter weights", "#6b93cf"],
  ["activation_bytes", "activation peak (profile run)", "#e0913a"],
  ["non_torch_bytes", "non-torch memory", "#9c6ad0"],
  ["runner_buffers_bytes", "kept buffers (model runner)", "#c9a227"],
  ["cudagraph_bytes", "CUDA graphs", "#d2544f"],
];

function drawBudget(j) {
  const total = j.inputs.gpu_total_bytes;
  const rows = [];
  let known = 0;
  for (const [key, label, color] of SEGMENTS) {
    let b = j[key] || 0;
    if (key === "cudagraph_bytes" && j.cudagraph_in_budget === false) b = 0;
    known += b;
    if (b > 0) rows.push({ label, b, color, inside: true });
  }
  const other = j.non_kv_bytes - known;
  if (other > 1 << 20) rows.push({ label: "other non-KV terms", b: other, color: "#8a8f98", inside: true });
  const kv = j.available_kv_bytes;
  if (kv > 0) rows.push({ label: "KV cache available", b: kv, color: "#3a9a5b", inside: true, kv: true });
  const outside = [];
  if (j.cuda_context_bytes > 0) outside.push({ label: "CUDA context (outside the budget)", b: j.cuda_context_bytes, color: "#555b66" });
  if (j.inputs.other_gpu_bytes > 0) outside.push({ label: "other processes", b: j.inputs.other_gpu_bytes, color: "#777" });
  const left = (j.free_at_start_bytes ?? 0) - j.requested_bytes;
  if (left > 0) outside.push({ label: "left outside the budget", b: left, color: "#e6e8ec" });
  const scale = Math.max(total, j.non_kv_bytes + (j.cuda_context_bytes || 0));
  const bar = $("budget-bar");
  bar.replaceChildren(...[...rows, ...outside].map((r) => {
    const d = document.createElement("div");
    d.style.width = `${(100 * r.b) / scale}%`;
    d.style.background = r.color;
    d.title = `${r.label}: ${gib(r.b)} GiB`;
    return d;
  }));
  const table = $("budget-table");
  const tr = (cells, cls) => {
    const row = document.createElement("tr");
    if (cls) row.className = cls;
    row.innerHTML = cells;
    return row;
  };
  const sw = (c) => `<span class="swatch" style="background:${c}"></span>`;
  table.replaceChildren(
    tr(`<td><strong>budget = ceil(GPU total x GMU ${j.inputs.gpu_memory_utilization.toFixed(2)})</strong></td>` +
       `<td class="num"><strong>${gib(j.requested_bytes)} GiB</strong></td>`),
    ...rows.map((r) => tr(`<td>${sw(r.color)} ${r.label}</td><td class="num">${gib(r.b)} GiB</td>`, r.kv ? "kv" : "")),
    ...(kv <= 0 ? [tr(`<td style="color:var(--bad)">KV cache available: the non-KV terms exceed the budget</td>` +
      `<td class="num" style="color:var(--bad)">${gib(kv)} GiB</td>`)] : []),
    ...outside.map((r) => tr(`<td>${sw(r.color)} ${r.label}</td><td class="num">${gib(r.b)} GiB</td>`)),
    tr(`<td>GPU total</td><td class="num">${gib(total)} GiB</td>`),
  );
  $("budget").hidden = false;
}

function drawSweep(sw, req) {
  if (sw.error) { $("sweep").hidden = true; return; }
  const rows = sw.rows;
  const vals = rows.flatMap((r) => [r.first_boot, r.restart, r.fix_first_boot, r.fix_restart]).filter((x) => x > 0);
  const max = Math.max(1, ...vals);
  const chosen = $("answer").dataset && state.last ? state.last.json.inputs.gpu_memory_utilization : null;
  let anyFix = false;
  const chart = $("sweep-chart");
  chart.replaceChildren(...rows.map((r) => {
    const row = document.createElement("div");
    row.className = "sweep-row" + (chosen !== null && Math.abs(r.gmu - chosen) < 1e-9 ? " chosen" : "");
    const bars = document.createElement("div");
    bars.className = "sweep-bars";
    const bar = (v, cls, label) => {
      const d = document.createElement("div");
      d.className = cls;
      d.style.width = `${(62 * v) / max}%`; // room for the label after the longest bar
      d.innerHTML = `<span>${label}</span>`;
      return d;
    };
    if (r.error) {
      bars.innerHTML = `<span class="none">${r.error}</span>`;
    } else if (r.first_boot > 0 || r.restart > 0) {
      if (r.first_boot === r.restart) bars.append(bar(r.restart, "warm", `${fmt(r.restart)} (every boot)`));
      else bars.append(bar(r.first_boot, "cold", `${fmt(r.first_boot)} first boot`),
        bar(r.restart, "warm", `${fmt(r.restart)} after a restart`));
    } else if (r.refused && r.fix_restart) {
      anyFix = true;
      const how = r.fix_gmu && Math.abs(r.fix_gmu - r.gmu) > 1e-9 ? `GMU ${r.fix_gmu.toFixed(2)}` : `--max-num-seqs ${r.fix_max_num_seqs}`;
      bars.append(bar(r.fix_first_boot, "cold fix", `${fmt(r.fix_first_boot)} first boot, with ${how}`),
        bar(r.fix_restart, "warm fix", `${fmt(r.fix_restart)} after a restart, with ${how}`));
    } else {
      bars.innerHTML = `<span class="none">${r.refused ? "vLLM refuses these flags" : "nothing starts"}</span>`;
    }
    row.innerHTML = `<div class="gmu">${r.gmu.toFixed(2)}</div>`;
    row.append(bars);
    return row;
  }));
  $("sweep-note").textContent = "Light: the first boot after a change (torch.compile runs cold); dark: after a " +
    "restart (compile cache warm)." + (anyFix ? " Hatched: vLLM refuses the flags as given at that GMU; the bar is " +
    "the answer with the fix it names." : "") + " One vrambudget.predict per GMU.";
  $("sweep").hidden = false;
}

function drawCommand(cmd) {
  const notes = $("command-notes");
  if (cmd.error) {
    $("command-text").textContent = "(no command: " + cmd.error + ")";
    notes.replaceChildren();
  } else {
    $("command-text").textContent = cmd.command;
    notes.replaceChildren(...[...cmd.notes.map((n) => "note: " + n), ...cmd.warnings.map((w) => "warning: " + w)]
      .map((t) => { const li = document.createElement("li"); li.textContent = t; return li; }));
  }
  $("command").hidden = false;
}

function drawReport(p, rep) {
  $("report-text").textContent = rep.text || rep.error || "";
  $("report").hidden = !rep.text;
  $("json-text").textContent = JSON.stringify(p.json, null, 2);
  $("raw").hidden = false;
}

// --- events ---
let timer = null;
function soon(ms = 150) {
  clearTimeout(timer);
  timer = setTimeout(update, ms);
}

function useConfig(text) {
  $("config").value = text;
  $("model").value = CONFIG;
  showConfigBox();
  soon(0);
}

$("form").addEventListener("change", (e) => {
  if (e.target.id === "config-file" || e.target.id === "hub-id") return;
  if (e.target.id === "model") showConfigBox();
  soon(0);
});
$("form").addEventListener("input", (e) => {
  if (e.target.id === "config") { $("model").value = CONFIG; showConfigBox(); soon(400); }
  else if (e.target.type === "text" || e.target.type === "number") soon(400);
});
$("config-file").addEventListener("change", async (e) => {
  const f = e.target.files[0];
  if (f) useConfig(await f.text());
});
const box = $("config-box");
box.addEventListener("dragover", (e) => { e.preventDefault(); box.classList.add("dragging"); });
box.addEventListener("dragleave", () => box.classList.remove("dragging"));
box.addEventListener("drop", async (e) => {
  e.preventDefault();
  box.classList.remove("dragging");
  const f = e.dataTransfer.files[0];
  if (f) useConfig(await f.text());
  else if (e.dataTransfer.getData("text")) useConfig(e.dataTransfer.getData("text"));
});
$("hub-fetch").addEventListener("click", async () => {
  const id = $("hub-id").value.trim();
  if (!/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(id)) return showError(`${id || "(empty)"}: give a Hugging Face id, owner/name`);
  const url = `https://huggingface.co/${id}/resolve/main/config.json`;
  let r;
  try { r = await fetch(url); } catch (e) {
    return showError(`Could not reach the Hugging Face Hub for ${id} (${e.message}); paste its config.json instead.`);
  }
  if (!r.ok) return showError(`The Hub answered HTTP ${r.status} for ${id}'s config.json` +
    (r.status === 401 || r.status === 403 ? " (a gated or private model: paste its config.json instead)." : "."));
  if (!$("checkpoint").value.trim()) $("checkpoint").value = id;
  useConfig(await r.text());
});
$("copy").addEventListener("click", () => navigator.clipboard?.writeText($("command-text").textContent));
window.addEventListener("hashchange", () => { if (state.ready) { readHash(); soon(0); } });

boot().catch((e) => {
  console.error(e);
  status(`Could not load Python in this browser: ${String(e.message || e).split("\n")[0]}`, "error");
  state.loadError = String(e.message || e);
});
