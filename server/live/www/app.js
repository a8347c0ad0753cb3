/*
 * recond operator page (docs/operator.md).  Plain DOM, no framework; the
 * page talks to the same API as curl (api/openapi.yaml):
 *
 *   GET /v1/jobs every 1.5 s         -> the queue table
 *   GET /v1/devices every 10 s       -> the devices table
 *   GET /v1/jobs/{id}/events         -> the selected job, live (SSE read with
 *                                       fetch(): EventSource cannot send the
 *                                       Authorization header)
 *   GET /v1/jobs/{id}/preview        -> its three slices as PNG blobs (the
 *                                       middle ones, or the slider's; the
 *                                       volume's window, a preset or C/W)
 * The address /#job=ID opens a job; selecting one writes its hash.
 *   POST .../cancel, PATCH {priority} -> the buttons
 *
 * Everything a client or the server supplies (labels, messages, device
 * names) goes into the DOM as textContent, never as markup.  The token lives
 * in sessionStorage (this tab only) and is sent as "Authorization: Bearer".
 */
"use strict";

(function () {
  const TOKEN_KEY = "recond.token";
  const JOBS_MS = 1500;
  const DEVICES_MS = 10000;
  const SSE_RETRY_MS = 2000;
  const PREVIEW_GAP_MS = 250;
  const ACTION_MESSAGE_MS = 15000;
  const FINAL = new Set(["succeeded", "failed", "cancelled"]);
  const CANCELLABLE = new Set(["created", "receiving", "queued", "running"]);
  const REPRIORITISABLE = new Set(["created", "receiving", "queued"]);
  const PREVIEWABLE = new Set(["running", "succeeded"]);
  const AXES = ["z", "y", "x"];
  const PRIO_MIN = 0, PRIO_MAX = 9;
  // HU windows (center, width); the volume's are HU = 1000 (mu - mu_w) / mu_w
  // with the job's water_mu_per_mm, as its DICOM series (docs/pacs.md)
  const HU_PRESETS = { soft: [40, 400], lung: [-600, 1500], bone: [400, 1800] };
  const WATER_MU_DEFAULT = 0.0192;

  const $ = (id) => document.getElementById(id);

  const ui = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    jobs: new Map(),        // id -> last job JSON of the list
    selected: null,         // id of the selected job
    job: null,              // its JSON (list, GET or the event stream)
    sse: null,              // AbortController of its event stream
    previewUrls: {},        // axis -> blob: URL shown
    previewBusy: false,
    previewAgain: false,
    previewTried: false,    // slices asked for since the job was selected
    index: {},              // axis -> slice index chosen (absent: the middle)
    window: null,           // [center, width] in the volume's units; null: the volume's window
    forbidden: false,       // an action answered 403 with this token
    jobsBusy: false,
    messageFrom: "",
    messageTimer: 0,
  };

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function authHeaders(extra) {
    const h = Object.assign({}, extra || {});
    if (ui.token) h.Authorization = "Bearer " + ui.token;
    return h;
  }

  async function errorOf(resp) {
    let code = "", msg = resp.statusText || "HTTP " + resp.status;
    try {
      const j = await resp.json();
      if (j && j.error) {
        code = String(j.error.code || "");
        msg = String(j.error.message || msg);
      }
    } catch (e) { /* not JSON */ }
    return new ApiError(resp.status, code, msg);
  }

  async function api(method, path, body) {
    const init = { method: method, headers: authHeaders(), cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    if (!resp.ok) throw await errorOf(resp);
    if (resp.status === 204) return null;
    return resp.json();
  }

  /* A 403 for acting on another token's job (server/http_owner.c): the
   * token's role is enough for other jobs, so the buttons stay usable. */
  function ownerRefusal(err) {
    return err.status === 403 && / belongs to /.test(err.message || "");
  }

  /* One sentence for an error, saying what to do for 401 and 403. */
  function explain(err, what) {
    if (!(err instanceof ApiError)) return what + ": the server cannot be reached (" + err.message + ")";
    if (err.status === 401) {
      return what + ": 401 unauthorized: " + (ui.token
        ? "the server does not know this token; enter another one above"
        : "this server needs a bearer token; enter it above") + " (" + err.message + ")";
    }
    if (err.status === 403) {
      return what + ": 403 forbidden: " + (ownerRefusal(err)
        ? "the job belongs to another token" : "your token's role does not allow this") + " (" + err.message + ")";
    }
    return what + ": " + err.status + (err.code ? " " + err.code : "") + ": " + err.message;
  }

  function showMessage(text, kind, from) {
    const m = $("message");
    m.textContent = text;
    m.className = "message" + (kind === "error" ? " error" : "");
    m.dataset.kind = kind || "info";
    m.hidden = false;
    ui.messageFrom = from || "";
    clearTimeout(ui.messageTimer);
    // the answer to a click fades after a while; a failing poll stays until it works
    if (from === "action") ui.messageTimer = setTimeout(() => clearMessage("action"), ACTION_MESSAGE_MS);
  }

  function clearMessage(from) {
    if (from && ui.messageFrom !== from) return;
    const m = $("message");
    m.hidden = true;
    m.textContent = "";
    ui.messageFrom = "";
  }

  /* -- formatting ---------------------------------------------------------- */

  function fmtSeconds(s) {
    if (s === null || s === undefined || !isFinite(s)) return "";
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + " s";
    const m = Math.floor(s / 60), r = s % 60;
    if (m < 60) return m + " min " + String(r).padStart(2, "0") + " s";
    return Math.floor(m / 60) + " h " + String(m % 60).padStart(2, "0") + " min";
  }

  function fmtResidual(r) {
    return typeof r === "number" && isFinite(r) ? r.toExponential(3) : "";
  }

  function fmtBytes(n) {
    if (typeof n !== "number" || !isFinite(n)) return "";
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + u[i];
  }

  /* Why a run ended before its iterations (docs/api.md, "Progress"). */
  const STOP_WHY = {
    stagnation: "the residual stopped falling",
    tolerance: "the residual fell below the tolerance",
    discrepancy: "the residual reached the noise level",
  };

  /* The job's progress in the API's words: "iteration 6 of 10 · stopped:
   * stagnation — the residual stopped falling"; "computing the FDK start"
   * while an iterative job computes its start; "N/M views" while a
   * streaming job receives them. */
  function progressWords(job) {
    const p = job.progress || {};
    if (typeof p.views_expected === "number" && p.views_expected > 0 && job.state !== "succeeded")
      return (p.views_done || 0) + "/" + p.views_expected + " views";
    const asked = typeof p.iterations === "number" ? p.iterations : (p.of || 0);
    const done = p.iteration || 0;
    let text;
    if (p.phase === "fdk_start") text = "computing the FDK start";
    else if (p.phase === "building_matrix")
      text = "building the system matrix" + (typeof p.phase_fraction === "number" ? " (" + Math.round(100 * p.phase_fraction) + "%)" : "");
    else if (p.phase === "loading_matrix") text = "loading the system matrix";
    else if (p.phase === "fdk") text = "computing FDK";
    else if (p.phase === "preparing") text = "reading the projections";
    else if (asked > 0) text = "iteration " + done + " of " + asked;
    else text = "";
    if (p.phase === "writing") text += " · writing the volume";
    if (p.stopped) {
      text += " · stopped: " + p.stopped;
      if (STOP_WHY[p.stopped]) text += " — " + STOP_WHY[p.stopped];
    }
    return text;
  }

  /* [done, of, text] of a job's progress: views while a streaming job
   * receives them, else iterations (the ones that ran: a job that stopped
   * early shows where it stopped). */
  function progressOf(job) {
    const p = job.progress || {};
    let done, of;
    if (typeof p.views_expected === "number" && p.views_expected > 0) {
      done = p.views_done || 0; of = p.views_expected;
    } else {
      done = p.iteration || 0; of = typeof p.iterations === "number" ? p.iterations : (p.of || 0);
    }
    if (of <= 0) { of = 1; done = job.state === "succeeded" ? 1 : 0; }
    done = Math.min(done, of);
    return [done, of, progressWords(job)];
  }

  /* fdk is one pass: no residual to show. */
  function hasResidual(job) {
    return !(job.summary && job.summary.algorithm === "fdk");
  }

  function setState(el, state) {
    el.textContent = state;
    el.className = "state" + (/^[a-z_]+$/.test(state) ? " state-" + state : "");
  }

  /* -- the queue ----------------------------------------------------------- */

  function cell(tr, cls) {
    const td = document.createElement("td");
    td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function newRow(id) {
    const tr = document.createElement("tr");
    tr.dataset.id = id;
    tr.tabIndex = 0;
    cell(tr, "label");
    cell(tr, "state-cell").appendChild(document.createElement("span")).className = "state";
    const pc = cell(tr, "progress");
    pc.appendChild(document.createElement("progress"));
    pc.appendChild(document.createElement("span")).className = "ptext";
    cell(tr, "eta num");
    cell(tr, "residual num");
    cell(tr, "priority num");
    tr.addEventListener("click", () => select(id));
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") select(id); });
    return tr;
  }

  function fillRow(tr, job) {
    const lab = tr.querySelector(".label");
    lab.textContent = job.label || "";
    lab.title = job.label || "";
    setState(tr.querySelector(".state"), job.state);
    const [done, of, text] = progressOf(job);
    const bar = tr.querySelector("progress");
    bar.max = of;
    bar.value = done;
    tr.querySelector(".ptext").textContent = text;
    tr.querySelector(".ptext").title = text;
    const p = job.progress || {};
    tr.querySelector(".eta").textContent = job.state === "running" ? fmtSeconds(p.eta_s) : "";
    tr.querySelector(".residual").textContent = hasResidual(job) ? fmtResidual(p.residual) : "";
    tr.querySelector(".priority").textContent = String(job.priority);
    tr.classList.toggle("selected", job.id === ui.selected);
    tr.setAttribute("aria-selected", job.id === ui.selected ? "true" : "false");
  }

  function renderJobs(list) {
    const tbody = $("jobs").tBodies[0];
    const rows = new Map();
    for (const tr of Array.from(tbody.rows)) rows.set(tr.dataset.id, tr);
    ui.jobs = new Map();
    let prev = null;
    for (const job of list) {
      ui.jobs.set(job.id, job);
      // the selected job's live copy (event stream) is newer than the list's
      const shown = job.id === ui.selected && ui.job && ui.job.id === job.id ? mergeNewer(job, ui.job) : job;
      let tr = rows.get(job.id);
      if (!tr) tr = newRow(job.id);
      rows.delete(job.id);
      fillRow(tr, shown);
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== tr) tbody.insertBefore(tr, want);
      prev = tr;
    }
    for (const tr of rows.values()) tr.remove();
    $("jobs-empty").hidden = list.length > 0;
  }

  /* The list's job with the stream's progress when the stream's is further. */
  function mergeNewer(listed, live) {
    if (listed.state !== live.state) return listed.updated >= live.updated ? listed : live;
    const a = listed.progress || {}, b = live.progress || {};
    return (b.iteration || 0) > (a.iteration || 0) || (b.views_done || 0) > (a.views_done || 0)
      ? Object.assign({}, listed, { progress: b }) : listed;
  }

  async function refreshJobs() {
    if (ui.jobsBusy) return;
    ui.jobsBusy = true;
    try {
      const doc = await api("GET", "/v1/jobs?limit=100");
      renderJobs(doc.jobs || []);
      clearMessage("jobs");
      setConn(true, "updated " + new Date().toLocaleTimeString());
      if (ui.selected && !ui.jobs.has(ui.selected)) {
        // not on the first page: ask for it directly (404: it was deleted)
        loadJob(ui.selected);
      }
    } catch (err) {
      setConn(false, err instanceof ApiError ? "HTTP " + err.status : "offline");
      showMessage(explain(err, "Reading the queue"), "error", "jobs");
    } finally {
      ui.jobsBusy = false;
      document.body.dataset.ready = "1";
    }
  }

  function setConn(ok, text) {
    const c = $("conn");
    c.textContent = text;
    c.classList.toggle("down", !ok);
  }

  /* -- devices -------------------------------------------------------------- */

  async function refreshDevices() {
    try {
      const doc = await api("GET", "/v1/devices");
      const tbody = $("devices").tBodies[0];
      tbody.textContent = "";
      for (const d of doc.devices || []) {
        const tr = document.createElement("tr");
        tr.dataset.deviceId = d.device_id || "";
        cell(tr, "name").textContent = d.name || "";
        cell(tr, "engine").textContent = d.engine || "";
        cell(tr, "type").textContent = d.type || "";
        setState(cell(tr, "state-cell").appendChild(document.createElement("span")), d.state || "");
        cell(tr, "memory num").textContent = fmtBytes(d.memory_bytes);
        cell(tr, "models num").textContent = String((d.models || []).length);
        tbody.appendChild(tr);
      }
      clearMessage("devices");
    } catch (err) {
      showMessage(explain(err, "Reading the devices"), "error", "devices");
    }
  }

  /* -- the selected job ------------------------------------------------------ */

  function select(id) {
    if (ui.selected === id) return;
    stopStream();
    clearPreviews();
    ui.index = {};
    if ($("window-preset").value === "custom") setWindowMode("volume");
    ui.selected = id;
    if (location.hash !== "#job=" + id) history.replaceState(null, "", "#job=" + id);
    $("job-link").href = "#job=" + id;
    ui.job = ui.jobs.get(id) || null;
    for (const tr of $("jobs").tBodies[0].rows) {
      tr.classList.toggle("selected", tr.dataset.id === id);
      tr.setAttribute("aria-selected", tr.dataset.id === id ? "true" : "false");
    }
    $("job").hidden = false;
    $("job").dataset.id = id;
    $("preview-note").textContent = "";
    if (ui.job) renderJob(ui.job);
    loadJob(id);
    follow(id);
  }

  async function loadJob(id) {
    try {
      const j = await api("GET", "/v1/jobs/" + id);
      if (ui.selected !== id) return;
      const before = ui.job;
      ui.job = j;
      renderJob(j);
      previewOnState(before, j);
    } catch (err) {
      if (ui.selected !== id) return;
      if (err instanceof ApiError && err.status === 404) {
        jobGone(id);
        return;
      }
      showMessage(explain(err, "Reading the job"), "error", "job");
    }
  }

  function jobGone(id) {
    showMessage("The job " + id + " was deleted.", "info", "job");
    stopStream();
    clearPreviews();
    if (location.hash === "#job=" + id) history.replaceState(null, "", location.pathname + location.search);
    ui.selected = null;
    ui.job = null;
    $("job").hidden = true;
  }

  function renderJob(j) {
    $("job-label").textContent = j.label || "";
    $("job-id").textContent = j.id;
    setState($("job-state"), j.state);
    $("job-cancel-requested").hidden = !j.cancel_requested || FINAL.has(j.state);
    const s = j.summary || {};
    const vol = Array.isArray(s.volume) ? s.volume.join(" × ") : "";
    const parts = [s.algorithm, s.iterations > 1 ? s.iterations + " iterations" : "", s.geometry,
      vol ? vol + " voxels" : ""].filter(Boolean);
    $("job-summary").textContent = parts.join(", ");
    const st = j.stream && typeof j.stream === "object" ? j.stream : null;
    let how = "";
    if (st && st.active) how = " · reconstructing as they arrive";
    else if (st && st.mode && st.mode !== "off") how = " · stream " + st.mode;
    $("job-views").textContent = j.views_present + " of " + j.views_expected + " present" + how;
    renderProgress(j);
    $("job-engine").textContent = [j.engine, j.projector].filter(Boolean).join(", ") || "–";
    $("job-created").textContent = j.created ? new Date(j.created).toLocaleString() : "";
    const err = $("job-error");
    if (j.error && (j.state === "failed" || j.state === "cancelled")) {
      err.textContent = (j.error.code ? j.error.code + ": " : "") + (j.error.message || "");
      err.hidden = false;
    } else {
      err.textContent = "";
      err.hidden = true;
    }
    renderWarnings(j);
    renderButtons(j);
    renderPlan(j.plan || []);
    renderSliceControls();
    if ($("window-preset").value in HU_PRESETS) setWindowMode($("window-preset").value);
    if (!PREVIEWABLE.has(j.state) && !ui.previewUrls.z) {
      $("preview-note").textContent = "Slices show while the job runs and once it has succeeded.";
    }
    const tr = $("jobs").querySelector('tbody tr[data-id="' + CSS.escape(j.id) + '"]');
    if (tr) fillRow(tr, j);
  }

  /* Slices when the job gets to a state that has them (running, succeeded:
   * once more after it succeeds), and once when it is selected. */
  function previewOnState(before, j) {
    if (!PREVIEWABLE.has(j.state)) return;
    if (!ui.previewTried || !before || before.state !== j.state) refreshPreviews();
  }

  /* Why a running job has no slice yet: its FDK start (the iterations'
   * volume comes after it) or nothing so far. */
  function noSlices(j) {
    const ph = j && j.progress ? j.progress.phase : "";
    return ph === "fdk_start" ? "No slices yet: computing the FDK start."
      : "No slices yet: the job has no volume so far.";
  }

  function renderProgress(j) {
    const note = $("preview-note");
    if (note.dataset.status === "409") note.textContent = noSlices(j);
    const [done, of, text] = progressOf(j);
    const bar = $("job-progress");
    bar.max = of;
    bar.value = done;
    const p = j.progress || {};
    const more = [];
    if (j.state === "running" && typeof p.eta_s === "number") more.push("ETA " + fmtSeconds(p.eta_s));
    if (hasResidual(j) && typeof p.residual === "number") more.push("residual " + fmtResidual(p.residual));
    $("job-progress-text").textContent = text + (more.length ? " · " + more.join(" · ") : "");
  }

  /* What the worker's checks found (docs/api.md, "Warnings") and the
   * relative residual: a job that succeeded may still be wrong. */
  function renderWarnings(j) {
    const r = j.result && typeof j.result === "object" ? j.result : {};
    const rr = typeof r.relative_residual === "number" ? r.relative_residual.toPrecision(3) : "–";
    const nr = typeof r.noise_relative === "number" ? " (noise " + r.noise_relative.toPrecision(3) + ")" : "";
    $("job-residual").textContent = rr + (rr === "–" ? "" : nr);
    const box = $("job-warnings");
    box.textContent = "";
    const ws = Array.isArray(j.warnings) ? j.warnings : [];
    for (const w of ws) {
      const li = document.createElement("li");
      li.dataset.code = String(w.code || "");
      const c = document.createElement("code");
      c.textContent = String(w.code || "?");
      li.appendChild(c);
      li.appendChild(document.createTextNode(": " + String(w.message || "")));
      box.appendChild(li);
    }
    box.hidden = !ws.length;
  }

  function renderButtons(j) {
    const why = ui.forbidden ? "your token's role does not allow this" : "";
    const c = $("cancel");
    c.disabled = ui.forbidden || !CANCELLABLE.has(j.state) || !!j.cancel_requested;
    c.title = why || (c.disabled ? "only a job that has not finished can be cancelled" : "");
    const cp = $("confirm-push");
    cp.hidden = j.delivery !== "awaiting_confirmation";
    cp.disabled = ui.forbidden;
    if (why) cp.title = why;
    const prio = typeof j.priority === "number" ? j.priority : 5;
    $("priority").textContent = String(prio);
    const can = !ui.forbidden && REPRIORITISABLE.has(j.state);
    $("prio-up").disabled = !can || prio >= PRIO_MAX;
    $("prio-down").disabled = !can || prio <= PRIO_MIN;
    for (const b of [$("prio-up"), $("prio-down")]) {
      b.title = why || (can ? "" : "only a job that waits can be reprioritised");
    }
  }

  function renderPlan(plan) {
    const box = $("plan");
    box.textContent = "";
    if (!plan.length) {
      const p = document.createElement("p");
      p.className = "muted";
      p.textContent = "No plan yet: the split across devices is reported once the job has run.";
      box.appendChild(p);
      return;
    }
    for (const task of ["forward", "back"]) {
      const total = plan.reduce((n, d) => n + ((d.views && d.views[task]) || 0), 0);
      const row = document.createElement("div");
      row.className = "plan-row";
      row.dataset.task = task;
      const name = document.createElement("span");
      name.textContent = task + " views";
      row.appendChild(name);
      const bar = document.createElement("div");
      bar.className = "plan-bar";
      plan.forEach((d, i) => {
        const v = (d.views && d.views[task]) || 0;
        const seg = document.createElement("div");
        seg.className = "plan-seg dev-" + (i % 6);
        seg.style.width = (total > 0 ? (100 * v) / total : 0).toFixed(2) + "%"; // CSSOM: allowed by the CSP
        seg.title = (d.name || "") + ": " + v + " of " + total + " views";
        bar.appendChild(seg);
      });
      row.appendChild(bar);
      box.appendChild(row);
    }
    const t = document.createElement("table");
    t.className = "plan-legend";
    const head = t.createTHead().insertRow();
    for (const h of ["Device", "Views (fwd / back)", "Predicted ms", "Measured ms"]) {
      const th = document.createElement("th");
      th.textContent = h;
      head.appendChild(th);
    }
    const body = t.createTBody();
    const ms = (o) => o ? [o.forward, o.back].map((x) => typeof x === "number" ? x.toFixed(1) : "–").join(" / ") : "";
    plan.forEach((d, i) => {
      const tr = body.insertRow();
      tr.className = "plan-device";
      const n = tr.insertCell();
      const sw = document.createElement("span");
      sw.className = "swatch dev-" + (i % 6);
      n.appendChild(sw);
      n.appendChild(document.createTextNode(d.name || d.device_id || "?"));
      tr.insertCell().textContent = d.views ? d.views.forward + " / " + d.views.back : "";
      tr.insertCell().textContent = ms(d.predicted_ms);
      tr.insertCell().textContent = ms(d.measured_ms);
    });
    box.appendChild(t);
  }

  /* -- the event stream ------------------------------------------------------ */

  function stopStream() {
    if (ui.sse) ui.sse.abort();
    ui.sse = null;
  }

  async function follow(id) {
    const ctrl = new AbortController();
    ui.sse = ctrl;
    while (!ctrl.signal.aborted && ui.selected === id) {
      let ended = false;
      try {
        await readStream(id, ctrl.signal);
        ended = true;
      } catch (err) {
        if (ctrl.signal.aborted) return;
        if (err instanceof ApiError) {
          if (err.status === 404) { jobGone(id); return; }
          showMessage(explain(err, "Watching the job"), "error", "job");
          if (err.status === 401 || err.status === 403) return; // until the token changes
        }
      }
      if (ctrl.signal.aborted || ui.selected !== id) return;
      if (ended && ui.job && FINAL.has(ui.job.state)) return; // the stream ends with the job
      await new Promise((r) => setTimeout(r, SSE_RETRY_MS));
    }
  }

  /* Reads text/event-stream: "event:" and "data:" lines, a blank line ends
   * an event, ":" lines are comments (keep-alives). */
  async function readStream(id, signal) {
    const resp = await fetch("/v1/jobs/" + id + "/events", {
      headers: authHeaders({ Accept: "text/event-stream" }), cache: "no-store", signal: signal,
    });
    if (!resp.ok) throw await errorOf(resp);
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = "", ev = "", data = [];
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (line === "") {
          if (data.length) onEvent(id, ev || "message", data.join("\n"));
          ev = "";
          data = [];
          continue;
        }
        if (line[0] === ":") continue;
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        let val = c < 0 ? "" : line.slice(c + 1);
        if (val[0] === " ") val = val.slice(1);
        if (field === "event") ev = val;
        else if (field === "data") data.push(val);
      }
    }
  }

  function onEvent(id, ev, text) {
    if (ui.selected !== id) return;
    let d;
    try { d = JSON.parse(text); } catch (e) { return; }
    if (ev === "state") {
      const before = ui.job;
      ui.job = d;
      clearMessage("job");
      renderJob(d);
      previewOnState(before, d);
    } else if (ev === "progress") {
      if (!ui.job) return;
      ui.job = Object.assign({}, ui.job, { progress: Object.assign({}, ui.job.progress || {}, d) });
      renderProgress(ui.job);
      const tr = $("jobs").querySelector('tbody tr[data-id="' + CSS.escape(id) + '"]');
      if (tr) fillRow(tr, ui.job);
    } else if (ev === "preview") {
      $("job").dataset.generation = String(d.generation);
      if (ui.job && typeof d.views_expected === "number") {
        // a streaming job: its view counts travel with the preview too
        ui.job = Object.assign({}, ui.job, { progress: Object.assign({}, ui.job.progress || {},
          { views_done: d.views_done, views_expected: d.views_expected }) });
        renderProgress(ui.job);
      }
      refreshPreviews();
    } else if (ev === "deleted") {
      jobGone(id);
    }
  }

  /* -- previews -------------------------------------------------------------- */

  function clearPreviews() {
    for (const a of AXES) {
      const img = $("preview-" + a);
      img.hidden = true;
      img.removeAttribute("src");
      delete img.dataset.generation;
      if (ui.previewUrls[a]) URL.revokeObjectURL(ui.previewUrls[a]);
    }
    ui.previewUrls = {};
    ui.previewTried = false;
    const note = $("preview-note");
    note.textContent = "";
    delete note.dataset.status;
  }

  /* The three slices, one refresh at a time: events that arrive meanwhile
   * ask for one more refresh afterwards, not one each. */
  async function refreshPreviews() {
    ui.previewTried = true;
    if (ui.previewBusy) { ui.previewAgain = true; return; }
    ui.previewBusy = true;
    try {
      do {
        ui.previewAgain = false;
        const id = ui.selected;
        if (!id) break;
        await loadPreviews(id);
        // at most a few refreshes a second however fast the job iterates
        if (ui.previewAgain) await new Promise((r) => setTimeout(r, PREVIEW_GAP_MS));
      } while (ui.previewAgain);
    } finally {
      ui.previewBusy = false;
    }
  }

  async function loadPreviews(id) {
    const got = {};
    const note = $("preview-note");
    try {
      for (const a of AXES) {
        /* no index: the API's default, the middle slice; no window: the volume's */
        let q = "axis=" + a + "&format=png";
        if (ui.index[a] !== undefined) q += "&index=" + ui.index[a];
        if (ui.window) q += "&window=" + fmtWin(ui.window[0], false) + "," + fmtWin(ui.window[1], true);
        const resp = await fetch("/v1/jobs/" + id + "/preview?" + q, { headers: authHeaders(), cache: "no-store" });
        if (!resp.ok) throw await errorOf(resp);
        got[a] = { blob: await resp.blob(), gen: resp.headers.get("X-Recond-Generation") || "",
          win: resp.headers.get("X-Recond-Window") || "", index: ui.index[a] };
      }
    } catch (err) {
      if (ui.selected !== id) return;
      note.dataset.status = err instanceof ApiError ? String(err.status) : "error";
      if (err instanceof ApiError && err.status === 409) {
        note.textContent = noSlices(ui.job);
      } else if (err instanceof ApiError && err.status === 404 && ui.job) {
        note.textContent = "This server has no slice previews (" + err.message + ").";
      } else {
        note.textContent = explain(err, "Slices");
      }
      return;
    }
    if (ui.selected !== id) return;
    for (const a of AXES) {
      const img = $("preview-" + a);
      const old = ui.previewUrls[a];
      const url = URL.createObjectURL(got[a].blob);
      ui.previewUrls[a] = url;
      img.src = url;
      img.dataset.generation = got[a].gen;
      img.dataset.window = got[a].win;
      img.dataset.index = String(got[a].index !== undefined ? got[a].index : middleOf(a));
      $("preview-" + a + "-index").textContent = img.dataset.index;
      img.hidden = false;
      if (old) URL.revokeObjectURL(old);
    }
    note.dataset.status = "200";
    // the volume's window as the server chose it: where custom values start from
    if (!ui.window && got.z.win) {
      const [c, w] = got.z.win.split(",");
      $("window-center").value = Number(c).toPrecision(4);
      $("window-width").value = Number(w).toPrecision(4);
    }
    const gen = got.z.gen;
    note.textContent = gen === "final" ? "the final volume" : gen ? "live volume, snapshot " + gen : "";
  }

  /* -- window and slice controls ------------------------------------------------ */

  /* A number as the preview's window= grammar takes it: a plain decimal of at
   * most 6 places (a width at least 0.000001). */
  function fmtWin(v, width) {
    let t = (width ? Math.max(v, 1e-6) : v).toFixed(6).replace(/0+$/, "").replace(/\.$/, "");
    if (t === "-0") t = "0";
    return t;
  }

  function volumeSize() {
    const v = ui.job && ui.job.summary && ui.job.summary.volume;
    return Array.isArray(v) && v.length === 3 ? { x: v[0], y: v[1], z: v[2] } : null;
  }

  function middleOf(a) {
    const n = volumeSize();
    return n ? Math.floor(n[a] / 2) : 0;
  }

  /* The slider follows the chosen axis: its range, and the index shown. */
  function renderSliceControls() {
    const n = volumeSize();
    const a = $("slice-axis").value;
    const s = $("slice-index");
    s.max = String(n ? n[a] - 1 : 0);
    s.value = String(ui.index[a] !== undefined ? ui.index[a] : middleOf(a));
    $("slice-index-text").textContent = n ? s.value + " / " + (n[a] - 1) : "";
  }

  /* volume: the server's window; a preset: HU through the job's
   * water_mu_per_mm; custom: the C and W fields. */
  function setWindowMode(mode) {
    $("window-preset").value = mode;
    if (mode === "volume") {
      ui.window = null;
    } else if (mode in HU_PRESETS) {
      const mw = ui.job && typeof ui.job.water_mu_per_mm === "number" ? ui.job.water_mu_per_mm : WATER_MU_DEFAULT;
      const [c, w] = HU_PRESETS[mode];
      ui.window = [mw * (1 + c / 1000), mw * w / 1000];
      $("window-center").value = ui.window[0].toPrecision(4);
      $("window-width").value = ui.window[1].toPrecision(4);
    } else {
      const c = Number($("window-center").value), w = Number($("window-width").value);
      if (!isFinite(c) || !isFinite(w) || !(w > 0) || Math.abs(c) >= 1e9 || w >= 1e9) {
        showMessage("Window: C must be a number and W a number above 0 (both below 10^9).", "error", "action");
        return false;
      }
      ui.window = [c, w];
    }
    return true;
  }

  function initSliceControls() {
    $("window-preset").addEventListener("change", () => {
      if (setWindowMode($("window-preset").value)) refreshPreviews();
    });
    const apply = () => { if (setWindowMode("custom")) refreshPreviews(); };
    $("window-apply").addEventListener("click", apply);
    for (const f of ["window-center", "window-width"])
      $(f).addEventListener("keydown", (e) => { if (e.key === "Enter") apply(); });
    $("slice-axis").addEventListener("change", renderSliceControls);
    $("slice-index").addEventListener("input", () => {
      ui.index[$("slice-axis").value] = Number($("slice-index").value);
      renderSliceControls();
      if (ui.selected && ui.job && PREVIEWABLE.has(ui.job.state)) refreshPreviews();
    });
  }

  /* /#job=ID: open that job (on load, and when the address changes). */
  function selectFromHash() {
    const m = /^#job=([0-9a-f-]{36})$/.exec(location.hash);
    if (m && ui.selected !== m[1]) select(m[1]);
  }

  /* -- actions --------------------------------------------------------------- */

  async function action(what, method, path, body) {
    const id = ui.selected;
    try {
      const j = await api(method, path, body);
      if (j && j.id === id && ui.selected === id) {
        const before = ui.job;
        ui.job = j;
        renderJob(j);
        previewOnState(before, j);
      }
      return j;
    } catch (err) {
      if (err instanceof ApiError && err.status === 403 && !ownerRefusal(err)) {
        ui.forbidden = true;
        if (ui.job) renderButtons(ui.job);
      }
      let text = explain(err, what);
      if (err instanceof ApiError && (err.status === 404 || err.status === 405) && method === "PATCH")
        text = what + ": this server cannot change priorities (" + err.status + ": " + err.message + ")";
      showMessage(text, "error", "action");
      return null;
    }
  }

  async function cancelJob() {
    if (!ui.selected) return;
    $("cancel").disabled = true;
    const j = await action("Cancelling", "POST", "/v1/jobs/" + ui.selected + "/cancel");
    if (j) {
      showMessage(j.state === "cancelled" ? "Cancelled." : "Cancel requested: the job stops within an iteration.",
        "info", "action");
    }
    refreshJobs();
  }

  /* POST push: the operator's confirmation of a job held for its warnings. */
  async function confirmPush() {
    if (!ui.selected) return;
    $("confirm-push").disabled = true;
    const j = await action("Confirming the push", "POST", "/v1/jobs/" + ui.selected + "/push");
    if (j) showMessage("Confirmed: the series is being sent.", "info", "action");
  }

  async function bumpPriority(delta) {
    if (!ui.job) return;
    const p = Math.min(PRIO_MAX, Math.max(PRIO_MIN, (ui.job.priority || 0) + delta));
    const j = await action("Changing the priority", "PATCH", "/v1/jobs/" + ui.selected, { priority: p });
    if (j) showMessage("Priority " + j.priority + ".", "info", "action");
    refreshJobs();
  }

  function useToken(tok) {
    ui.token = tok;
    if (tok) sessionStorage.setItem(TOKEN_KEY, tok);
    else sessionStorage.removeItem(TOKEN_KEY);
    ui.forbidden = false;
    clearMessage();
    const id = ui.selected;
    if (id) {
      ui.selected = null;
      select(id);
    }
    refreshJobs();
    refreshDevices();
  }

  function init() {
    $("token").value = ui.token;
    $("token-save").addEventListener("click", () => useToken($("token").value.trim()));
    $("token").addEventListener("keydown", (e) => { if (e.key === "Enter") useToken($("token").value.trim()); });
    $("token-clear").addEventListener("click", () => { $("token").value = ""; useToken(""); });
    $("cancel").addEventListener("click", cancelJob);
    $("confirm-push").addEventListener("click", confirmPush);
    $("prio-up").addEventListener("click", () => bumpPriority(1));
    $("prio-down").addEventListener("click", () => bumpPriority(-1));
    initSliceControls();
    window.addEventListener("hashchange", selectFromHash);
    selectFromHash();
    refreshJobs();
    refreshDevices();
    setInterval(refreshJobs, JOBS_MS);
    setInterval(refreshDevices, DEVICES_MS);
  }

  init();
})();
