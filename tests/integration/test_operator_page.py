#!/usr/bin/env python3
"""The operator page (GET /, docs/operator.md) in a real headless browser.

Debian's chromium + chromium-driver + python3-selenium drive the page that
recond serves against a daemon on loopback with a throwaway store:

- the answers of /, /ui/app.js, /ui/app.css: types, the exact
  Content-Security-Policy, nosniff, ETag + no-cache and a 304 on
  If-None-Match; 405 for POST /, 404 for an unknown /ui/ file; no inline
  script, style or event handler in the HTML (the CSP would refuse them);
- the page loads with no console error;
- a job labelled `<b>bold</b><script>x</script>` shows that literal text in
  the queue and the job panel, and no <b> or <script> element appears;
- a succeeded job: its plan (one bar segment per device) and its slices
  once it has succeeded (when the daemon has GET .../preview); /#job=ID
  opens it, selecting a job writes its hash, and the window preset (HU
  through its water_mu_per_mm), the C/W fields and the slice slider show
  the slices the API gives for them;
- a running job's progress bar advances; its slices change while it runs
  (live previews); Cancel on the page cancels it (the API says cancelled);
- the progress words (docs/api.md, "Progress") on the page are the API's: a
  job that stagnates before its iterations ("iteration 2 of 10 · stopped:
  stagnation — the residual stopped falling"), a cancelled one, and one in
  its FDK start ("computing the FDK start", the API's phases pending ->
  preparing -> fdk_start), cancelled there ("iteration 0 of 20");
- a streaming FDK job (`"execution": {"stream": true}`; skipped with a
  message while the daemon refuses the key): its slices change while the
  views arrive one by one;
- priority +/- (PATCH /v1/jobs/{id}; skipped with a message while the
  daemon has no PATCH) changes the job's priority;
- with tokens: no token shows the 401 and what to do; a read-only token
  lists the jobs, and its Cancel is disabled or answers with the API's 403
  (the job stays as it was); the token is kept in sessionStorage;
- a failed job (its worker crashes) shows its error, code and message;
- a succeeded job shows its relative residual and no warning; one sent
  intensities instead of line integrals shows its pre_log warning;
- no JavaScript error and no CSP violation in the console over the whole run
  (and an inline script injected afterwards is refused and reported: the
  check can fail).

Screenshots go to $RECOND_BUILD/test-artifacts/operator-page-*.png.
Without chromium, chromium-driver or python3-selenium the test fails (make
test installs them) unless RECOND_NO_BROWSER=1, which skips it.
"""

import atexit
import hashlib
import json
import os
import re
import shutil
import time
from html.parser import HTMLParser

import phantom
from recond_harness import (sirt_runs, BUILD, Api, Daemon, Validation, check, deadline, fake_worker, finish, log, proj_bytes,
                            require_binaries, require_engine, run_main, skip, small_spec, tempdir)

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
XSS = "<b>bold</b><script>x</script>"
ART = os.path.join(BUILD, "test-artifacts")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
TOKENS = {"reader": ("page-read-0123456789", "read"), "submitter": ("page-submit-0123456789", "submit")}

# The canvas hash of an <img> shown from a blob: URL (null while it has none
# or it is still loading): what the user sees, independent of how it came.
IMG_STATE_JS = """
const img = document.getElementById(arguments[0]);
if (!img || img.hidden || !img.src || !img.src.startsWith('blob:') || !img.complete || !img.naturalWidth)
  return null;
const c = document.createElement('canvas');
c.width = img.naturalWidth; c.height = img.naturalHeight;
const g = c.getContext('2d');
g.drawImage(img, 0, 0);
const d = g.getImageData(0, 0, c.width, c.height).data;
let h = 2166136261;
for (let i = 0; i < d.length; i++) { h ^= d[i]; h = Math.imul(h, 16777619); }
return {src: img.src, gen: img.dataset.generation || '', hash: (h >>> 0).toString(16), w: c.width, h: c.height};
"""


def browser_or_fail():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    try:
        import selenium  # noqa: F401  python3-selenium
    except ImportError:
        missing.append("python3-selenium (import selenium)")
    if not missing:
        return
    if os.environ.get("RECOND_NO_BROWSER") == "1":
        skip("RECOND_NO_BROWSER=1 and no browser: missing %s" % ", ".join(missing))
    check("chromium, chromium-driver and python3-selenium are installed (scripts/install-deps.sh installs them; "
          "RECOND_NO_BROWSER=1 skips this test)", False, "missing " + ", ".join(missing))
    finish()


class Browser:
    """Headless chromium through chromedriver, its console log kept."""

    def __init__(self):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        prof = tempdir("recond-chromium-")
        o = webdriver.ChromeOptions()
        o.binary_location = CHROMIUM
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--user-data-dir=" + prof, "--window-size=1360,1000", "--no-first-run",
                  "--disable-extensions", "--disable-background-networking", "--disable-sync",
                  "--hide-scrollbars", "--force-device-scale-factor=1"):
            o.add_argument(a)
        o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        svc = Service(executable_path=CHROMEDRIVER, log_path=os.path.join(prof, "chromedriver.log"))
        self.d = webdriver.Chrome(service=svc, options=o)
        self.d.set_script_timeout(20)
        self.logs = []
        atexit.register(self.quit)

    def quit(self):
        if self.d:
            try:
                self.d.quit()
            except Exception:  # noqa: BLE001 - already gone
                pass
            self.d = None

    def pull_logs(self):
        new = self.d.get_log("browser")
        self.logs += new
        return new

    def css(self, sel):
        from selenium.webdriver.common.by import By
        return self.d.find_elements(By.CSS_SELECTOR, sel)

    def one(self, sel):
        found = self.css(sel)
        return found[0] if found else None

    def text(self, sel):
        e = self.one(sel)
        return e.get_property("textContent") if e else None

    def js(self, code, *args):
        return self.d.execute_script(code, *args)

    def img(self, axis):
        return self.js(IMG_STATE_JS, "preview-" + axis)

    def shot(self, name):
        path = os.path.join(ART, "operator-page-%s.png" % name)
        self.d.save_screenshot(path)
        log("screenshot %s (%d bytes)" % (path, os.path.getsize(path)))
        return path


def wait_for(fn, seconds, poll=0.1):
    """fn() until it is truthy or the time is up; returns its last value."""
    alive = deadline(seconds)
    v = fn()
    while not v and alive():
        time.sleep(poll)
        v = fn()
    return v


class _Markup(HTMLParser):
    """What the CSP forbids in the HTML: inline scripts, <style>, style= and on*= attributes."""

    def __init__(self):
        super().__init__()
        self.bad = []
        self.in_script = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.in_script = True
            if not a.get("src"):
                self.bad.append("<script> without src")
        if tag == "style":
            self.bad.append("<style>")
        for k in a:
            if k == "style" or k.startswith("on"):
                self.bad.append("%s=%r on <%s>" % (k, a[k], tag))

    def handle_endtag(self, tag):
        if tag == "script":
            self.in_script = False

    def handle_data(self, data):
        if self.in_script and data.strip():
            self.bad.append("inline script text")


def static_checks(api):
    types = {"/": "text/html", "/ui/app.js": "text/javascript", "/ui/app.css": "text/css"}
    for path, want in types.items():
        st, h, body, _ = api.get(path)
        check("GET %s: 200 %s with the CSP, nosniff, an ETag and no-cache" % (path, want),
              st == 200 and h.get("content-type", "").startswith(want) and h.get("content-security-policy") == CSP
              and h.get("x-content-type-options") == "nosniff" and re.match(r'^"[0-9a-f]+"$', h.get("etag", ""))
              and h.get("cache-control") == "no-cache" and len(body) > 100,
              "%d %s" % (st, {k: h.get(k) for k in ("content-type", "content-security-policy",
                                                     "x-content-type-options", "etag", "cache-control")}))
        st2, h2, body2, _ = api.get(path, headers={"If-None-Match": h.get("etag", "")})
        check("GET %s with If-None-Match: its ETag -> 304, no body" % path, st2 == 304 and not body2, str(st2))
        if path == "/":
            p = _Markup()
            p.feed(body.decode("utf-8"))
            check("index.html has no inline script, style or event handler (the CSP refuses them)", not p.bad,
                  "; ".join(p.bad))
    st, h, _, doc = api.request("POST", "/", body=b"")
    check("POST / -> 405, Allow: GET, HEAD", st == 405 and h.get("allow") == "GET, HEAD",
          "%d %s" % (st, h.get("allow")))
    st, _, _, doc = api.get("/ui/nothing-here.js")
    check("an unknown /ui/ file -> 404 not_found", st == 404 and doc and doc["error"]["code"] == "not_found", str(st))


def write_tokens(path, tokens):
    doc = {"tokens": [{"name": n, "role": role, "sha256": hashlib.sha256(tok.encode()).hexdigest()}
                      for n, (tok, role) in tokens.items()]}
    with open(path, "w") as f:
        json.dump(doc, f)


def row_sel(jid):
    return '#jobs tbody tr[data-id="%s"]' % jid


def select_job(b, jid):
    row = wait_for(lambda: b.one(row_sel(jid)), 15)
    if not row:
        return False
    row.click()
    return bool(wait_for(lambda: b.text("#job-id") == jid, 10))


def progress_value(b, jid):
    e = b.one(row_sel(jid) + " progress")
    try:
        return float(e.get_attribute("value")) if e else None
    except (TypeError, ValueError):
        return None


def preview_endpoint(api, jid):
    """(present, status, content type, message, generation) of GET .../preview for a job that has a volume."""
    st, h, body, doc = api.request("GET", "/v1/jobs/%s/preview?axis=z&format=png" % jid)
    msg = (doc or {}).get("error", {}).get("message", "") if isinstance(doc, dict) else ""
    present = not (st in (404, 405) and "no such endpoint" in msg) and st != 405
    return present, st, h.get("content-type", ""), msg, h.get("x-recond-generation", "")


def check_links_and_controls(b, url, api, jid, other):
    """/#job=ID opens that job; selecting a job writes its hash; the window
    preset, the C/W fields and the slice slider ask the API for what they say."""
    from selenium.webdriver.support.ui import Select
    b.d.get(url + "/#job=" + jid)
    ok = wait_for(lambda: b.text("#job-id") == jid and "selected" in (
        (b.one(row_sel(jid)) and b.one(row_sel(jid)).get_attribute("class")) or ""), 15)
    check("/#job=ID opens the page with that job selected (panel and queue row)", ok,
          "%r %r" % (b.text("#job-id"), b.js("return location.hash")))
    select_job(b, other)
    check("selecting a job writes its /#job= link", b.js("return location.hash") == "#job=" + other,
          b.js("return location.hash"))
    b.js("location.hash = arguments[0]", "#job=" + jid)
    check("changing the hash opens that job", wait_for(lambda: b.text("#job-id") == jid, 10), b.text("#job-id"))
    first = wait_for(lambda: b.img("z"), 10)
    shown = b.js("return document.getElementById('preview-z').dataset.window")
    _, h, _, _ = api.get("/v1/jobs/%s/preview?axis=z" % jid)
    check("by default the page shows the volume's window (X-Recond-Window %s)" % h.get("x-recond-window"),
          bool(first) and shown == h.get("x-recond-window") and shown, repr(shown))

    def window_is(c, w):
        t = b.js("return document.getElementById('preview-z').dataset.window") or ""
        try:
            gc, gw = (float(v) for v in t.split(","))
        except ValueError:
            return False
        return abs(gc - c) <= 1e-6 and abs(gw - w) <= 1e-6 and b.img("z")

    mw = api.job(jid).get("water_mu_per_mm", 0.0192)
    Select(b.one("#window-preset")).select_by_value("bone")
    bone = wait_for(lambda: window_is(mw * 1.4, mw * 1.8), 10)
    check("the bone preset shows HU 400, 1800 through the job's water_mu_per_mm (%g)" % mw, bool(bone),
          b.js("return document.getElementById('preview-z').dataset.window"))
    check("the bone window changes the picture", bone and first and bone["hash"] != first["hash"], "")
    for f, v in (("#window-center", "0.02"), ("#window-width", "0.04")):
        b.one(f).clear()
        b.one(f).send_keys(v)
    b.one("#window-apply").click()
    check("C 0.02, W 0.04 and Apply: the slices come through window=0.02,0.04",
          wait_for(lambda: window_is(0.02, 0.04), 10) and b.one("#window-preset").get_attribute("value") == "custom",
          b.js("return document.getElementById('preview-z').dataset.window"))
    Select(b.one("#slice-axis")).select_by_value("y")
    b.js("const s = document.getElementById('slice-index'); s.value = arguments[0];"
         "s.dispatchEvent(new Event('input'))", 3)
    check("the slider on axis y shows coronal slice 3",
          wait_for(lambda: b.js("return document.getElementById('preview-y').dataset.index") == "3" and
                   b.text("#preview-y-index") == "3", 10),
          repr(b.js("return document.getElementById('preview-y').dataset.index")))
    b.shot("slice-controls")


def start_job(api, spec, data):
    j = api.create(spec)
    api.put("/v1/jobs/%s/projections" % j["id"], data)
    api.post_json("/v1/jobs/%s/start" % j["id"], b"")
    return j


STOP_WHY = {"stagnation": "the residual stopped falling", "tolerance": "the residual fell below the tolerance",
            "discrepancy": "the residual reached the noise level"}


def progress_words(p):
    """What the page must show for the API's progress p (docs/api.md, "Progress")."""
    if p.get("phase") == "fdk_start":
        text = "computing the FDK start"
    else:
        text = "iteration %d of %d" % (p["iteration"], p["iterations"])
    if p.get("stopped"):
        text += " · stopped: " + p["stopped"]
        if p["stopped"] in STOP_WHY:
            text += " — " + STOP_WHY[p["stopped"]]
    return text


def page_words_match(b, jid, want):
    """The queue row's progress text is want and the job panel's starts with it (then ETA, residual)."""
    row = b.text(row_sel(jid) + " .ptext")
    panel = b.text("#job-progress-text") or ""
    return row == want and (panel == want or panel.startswith(want + " · ")) and (row, panel)


def progress_checks(b, api, sdata, previews):
    """The page's progress words against the API's: stopped early, cancelled in the FDK start."""
    # from FDK's volume with a strict stagnation rule (a residual that falls by under 20 % of
    # itself over an iteration ends the run): it stops well before its 10 iterations
    gspec = small_spec(n=32, views=48, nu=40, nv=40, label="sirt stagnates",
                       algorithm={"name": "sirt", "iterations": 10, "initial": "fdk", "stop": {"stagnation": 0.2}})
    gjob = start_job(api, gspec, sdata)
    select_job(b, gjob["id"])
    fin = api.wait_state(gjob["id"], ("succeeded", "failed", "cancelled"), timeout=120)
    p = fin["progress"]
    check("a SIRT job of 10 iterations that stagnates: the API says where and why it stopped "
          "(iteration %s of %s, stopped %s, phase %s)" % (p.get("iteration"), p.get("iterations"), p.get("stopped"),
                                                           p.get("phase")),
          fin["state"] == "succeeded" and p.get("stopped") == "stagnation" and 0 < p["iteration"] < 10 and
          p["iterations"] == 10 and p["of"] == 10 and p.get("phase") == "done", json.dumps(p))
    want = progress_words(p)
    got = wait_for(lambda: page_words_match(b, gjob["id"], want), 10)
    check("the page shows %r for it (not 10/10)" % want, bool(got),
          "%r %r" % (b.text(row_sel(gjob["id"]) + " .ptext"), b.text("#job-progress-text")))
    bar = b.one(row_sel(gjob["id"]) + " progress")
    check("its progress bar stands at the iterations that ran", bar and
          progress_value(b, gjob["id"]) == p["iteration"] and float(bar.get_attribute("max")) == 10,
          "%s of %s" % (progress_value(b, gjob["id"]), bar and bar.get_attribute("max")))
    b.shot("stagnation")

    # an FDK start long enough to watch: 160^3 from 360 views of 160^2 (zeros: only its length matters)
    fspec = phantom.cone_spec(n=160, voxel=0.5, views=360, nu=160, nv=160, label="sirt from fdk (start)",
                              algorithm={"name": "sirt", "iterations": 20, "initial": "fdk"})
    fjob = api.create(fspec)
    select_job(b, fjob["id"])
    phases = [api.job(fjob["id"])["progress"].get("phase")]
    api.put("/v1/jobs/%s/projections" % fjob["id"], b"\0" * proj_bytes(fspec))
    api.post_json("/v1/jobs/%s/start" % fjob["id"], b"")
    end = time.time() + 60
    while time.time() < end:
        j = api.job(fjob["id"])
        ph = j["progress"].get("phase")
        if ph != phases[-1]:
            phases.append(ph)
        if ph == "fdk_start" or j["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.03)
    check("the API's phases of an iterative job until its FDK start: pending -> preparing -> fdk_start "
          "(iteration 0 of 20)", phases[0] == "pending" and phases[-1] == "fdk_start" and
          set(phases) <= {"pending", "preparing", "fdk_start"} and j["progress"]["iteration"] == 0 and
          j["progress"]["iterations"] == 20, "%s %s" % (phases, json.dumps(j["progress"])))
    got = wait_for(lambda: page_words_match(b, fjob["id"], "computing the FDK start"), 10)
    check("during the FDK start the page shows 'computing the FDK start' (not 0/20)", bool(got),
          "%r %r (API: %s)" % (b.text(row_sel(fjob["id"]) + " .ptext"), b.text("#job-progress-text"),
                               json.dumps(api.job(fjob["id"])["progress"])))
    if previews:
        note = wait_for(lambda: b.text("#preview-note") == "No slices yet: computing the FDK start.", 10)
        check("and its slices say why there are none yet (the FDK start)", note, repr(b.text("#preview-note")))
    b.shot("fdk-start")
    api.post_json("/v1/jobs/%s/cancel" % fjob["id"], b"")
    fin = api.wait_state(fjob["id"], ("succeeded", "failed", "cancelled"), timeout=60)
    p = fin["progress"]
    check("cancelled in its FDK start: iteration 0 of 20, stopped cancelled (not 0/1)",
          fin["state"] == "cancelled" and p["iteration"] == 0 and p["iterations"] == 20 and
          p.get("stopped") == "cancelled" and p.get("phase") == "done", json.dumps(p))
    want = progress_words(p)
    got = wait_for(lambda: page_words_match(b, fjob["id"], want), 10)
    check("the page shows %r for it" % want, bool(got),
          "%r %r" % (b.text(row_sel(fjob["id"]) + " .ptext"), b.text("#job-progress-text")))


def console_problems(entries):
    """JavaScript errors and CSP violations (network errors of expected 4xx answers are not problems)."""
    out = []
    for e in entries:
        msg = e.get("message", "")
        if e.get("level") == "SEVERE" and e.get("source") != "network":
            out.append(msg)
        elif "Content Security Policy" in msg or "Refused to" in msg:
            out.append(msg)
    return out


def main():
    require_binaries()
    browser_or_fail()
    os.makedirs(ART, exist_ok=True)
    d = Daemon().start()
    api = d.api()
    require_engine(api)
    static_checks(api)

    b = Browser()
    b.d.get(d.url + "/")
    ready = wait_for(lambda: b.js("return document.body.dataset.ready === '1' && "
                                  "document.querySelector('#devices tbody tr') !== null"), 15)
    check("the page loads and reads the queue and the devices", ready)
    severe = [e for e in b.pull_logs() if e.get("level") == "SEVERE"]
    check("the page loads with no console error", not severe, "; ".join(e.get("message", "") for e in severe[:3]))
    check("the page's title is recond", b.d.title == "recond", b.d.title)
    st, _, _, devs = api.get("/v1/devices")
    ndev = len(devs["devices"]) if st == 200 else -1
    check("the devices table has one row per device of /v1/devices (%d)" % ndev,
          len(b.css("#devices tbody tr")) == ndev, str(len(b.css("#devices tbody tr"))))
    names = [e.get_property("textContent") for e in b.css("#devices tbody td.name")]
    check("device names shown as in the API", names == [x["name"] for x in devs["devices"]], str(names))

    # -- a label that is markup ------------------------------------------------
    xspec = small_spec(n=8, views=8, nu=8, nv=8, label=XSS)
    xjob = api.create(xspec)
    row = wait_for(lambda: b.one(row_sel(xjob["id"])), 10)
    check("a job created through the API appears in the queue", row is not None)
    shown = b.text(row_sel(xjob["id"]) + " .label")
    check("its label shows as the literal text %s" % XSS, shown == XSS, repr(shown))
    check("its state shows (created)", b.text(row_sel(xjob["id"]) + " .state") == "created",
          repr(b.text(row_sel(xjob["id"]) + " .state")))
    select_job(b, xjob["id"])
    check("the job panel shows the label as text too", b.text("#job-label") == XSS, repr(b.text("#job-label")))
    counts = b.js("return [document.querySelectorAll('b').length, document.querySelectorAll('script').length]")
    check("no <b> element and no script but app.js in the document", counts == [0, 1], str(counts))
    check("cancel is enabled for a created job", b.one("#cancel").is_enabled())

    # -- priority (PATCH /v1/jobs/{id}) -----------------------------------------
    # probes: not validated against the contract (a daemon without PATCH or previews answers what the
    # contract of the day may not list yet)
    probe = Api(d.url, validate=False)
    st, _, _, doc = probe.request("PATCH", "/v1/jobs/%s" % xjob["id"], body=json.dumps({"priority": 5}).encode(),
                                  headers={"Content-Type": "application/json"})
    if st in (404, 405):
        log("skip - priority buttons: the daemon has no PATCH /v1/jobs/{id} yet (%d); the page says so" % st)
        b.one("#prio-up").click()
        msg = wait_for(lambda: (b.text("#message") or "") if b.one("#message").is_displayed() else "", 5)
        check("priority +: the page shows that the server cannot change priorities", "priorit" in msg, repr(msg))
    else:
        check("PATCH priority answers 200", st == 200, "%d %s" % (st, doc.get("priority") if doc else None))
        up = b.one("#prio-up")
        check("priority + is enabled for a created job", up.is_enabled())
        up.click()
        got = wait_for(lambda: api.job(xjob["id"])["priority"] == 6, 5)
        check("priority + on the page: the API shows priority 6", got, str(api.job(xjob["id"])["priority"]))
        shown = wait_for(lambda: b.text("#priority") == "6", 5)
        check("the page shows priority 6", shown, repr(b.text("#priority")))
        b.one("#prio-down").click()
        got = wait_for(lambda: api.job(xjob["id"])["priority"] == 5, 5)
        check("priority - on the page: back to 5", got, str(api.job(xjob["id"])["priority"]))

    # -- a job that succeeds: plan and final slices -------------------------------
    sspec = small_spec(n=32, views=48, nu=40, nv=40, label="sirt 32^3 (done)",
                       algorithm=sirt_runs(12))
    sdata = phantom.project_cone(sspec)
    sjob = start_job(api, sspec, sdata)
    select_job(b, sjob["id"])
    fin = api.wait_state(sjob["id"], ("succeeded", "failed", "cancelled"), timeout=120)
    check("the short job succeeded", fin["state"] == "succeeded", str(fin.get("error")))
    ok = wait_for(lambda: b.text("#job-state") == "succeeded", 10)
    check("the page shows it succeeded", ok, repr(b.text("#job-state")))
    ok = wait_for(lambda: (b.one(row_sel(sjob["id"]) + " progress") or None) and
                  progress_value(b, sjob["id"]) == float(b.one(row_sel(sjob["id"]) + " progress")
                                                         .get_attribute("max")), 5)
    check("its progress bar is full", ok)
    plan = fin.get("plan") or []
    nseg = wait_for(lambda: len(b.css('#plan .plan-row[data-task="forward"] .plan-seg')) == len(plan) and
                    len(b.css("#plan .plan-device")) == len(plan), 5)
    check("the plan shows one bar segment and one legend row per plan device (%d)" % len(plan),
          nseg and len(plan) > 0, str(len(b.css("#plan .plan-device"))))
    # -- warnings (docs/api.md, "Warnings"): none for the clean job, the
    # residual shown; a job sent intensities shows its pre_log warning
    rr = (fin.get("result") or {}).get("relative_residual")
    shown = wait_for(lambda: rr is not None and b.text("#job-residual").startswith("%.3g" % rr), 5)
    check("the page shows the relative residual (%s)" % rr, shown, repr(b.text("#job-residual")))
    check("a clean job shows no warning", fin.get("warnings") == [] and not b.one("#job-warnings").is_displayed(),
          str(fin.get("warnings")))
    import array
    import math
    a = array.array("f")
    a.frombytes(sdata)
    wjob = start_job(api, dict(sspec, label="intensities"), array.array("f", (1e4 * math.exp(-x) for x in a)).tobytes())
    select_job(b, wjob["id"])
    wfin = api.wait_state(wjob["id"], ("succeeded", "failed", "cancelled"), timeout=120)
    codes = wait_for(lambda: b.js("return Array.from(document.querySelectorAll('#job-warnings li'))"
                                  ".map(e => e.dataset.code)") or None, 10)
    check("a job sent intensities shows its pre_log warning on the page",
          codes and "pre_log" in codes and b.one("#job-warnings").is_displayed() and
          "pre_log" in [w["code"] for w in wfin.get("warnings") or []], str(codes))
    check("no push to confirm without output.push", not b.one("#confirm-push").is_displayed())
    select_job(b, sjob["id"])

    present, pst, ptype, pmsg, pgen = preview_endpoint(probe, sjob["id"])
    previews = present and pst == 200
    if not present:
        log("skip - slices: the daemon has no GET /v1/jobs/{id}/preview yet (%d %s); the page says so" % (pst, pmsg))
        note = wait_for(lambda: b.one("#preview-note").get_attribute("data-status") == "404", 5)
        check("no preview endpoint: the page says so (no broken images)",
              note and not b.one("#preview-z").is_displayed(),
              repr(b.text("#preview-note")))
    else:
        check("GET .../preview of a succeeded job: 200 image/png", previews and ptype.startswith("image/png"),
              "%d %s %s" % (pst, ptype, pmsg))
        imgs = wait_for(lambda: (lambda got: all(g and g["gen"] == pgen for g in got) and got)(
            [b.img(a) for a in "zyx"]), 10)
        check("a succeeded job shows its three slices (z, y, x) from blob: URLs, of the final volume "
              "(X-Recond-Generation %r): fetched once more after it succeeded" % pgen, bool(imgs),
              str([b.img(a) for a in "zyx"]))
        check_links_and_controls(b, d.url, api, sjob["id"], xjob["id"])
    b.shot("succeeded")

    # -- a running job: progress, live slices, cancel from the page ------------------
    lspec = small_spec(n=32, views=60, nu=40, nv=40, label="sirt 32^3 (long)",
                       algorithm=sirt_runs(2000))
    ljob = start_job(api, lspec, phantom.project_cone(lspec))
    j = api.wait_state(ljob["id"], ("running",), timeout=60, poll=0.05)
    check("the long job runs", j["state"] == "running", j["state"])
    select_job(b, ljob["id"])
    check("the page shows it running", wait_for(lambda: b.text("#job-state") == "running", 10),
          repr(b.text("#job-state")))
    p1 = wait_for(lambda: (progress_value(b, ljob["id"]) or 0) > 0 and progress_value(b, ljob["id"]), 15)
    p2 = wait_for(lambda: (progress_value(b, ljob["id"]) or 0) > (p1 or 0) and progress_value(b, ljob["id"]), 15)
    check("a running job's progress bar advances", p1 and p2 and p2 > p1, "%s -> %s" % (p1, p2))
    eta = b.text(row_sel(ljob["id"]) + " .eta")
    res = b.text(row_sel(ljob["id"]) + " .residual")
    check("its ETA and residual are shown", bool(eta) and bool(res), "%r %r" % (eta, res))
    if previews:
        first = wait_for(lambda: b.img("z"), 20)
        check("a running job shows a live slice", bool(first), repr(b.text("#preview-note")))
        later = wait_for(lambda: (lambda s: s and first and s["hash"] != first["hash"] and s)(b.img("z")), 20)
        check("the running job's slice changes while it iterates (preview events)", bool(later),
              "%s -> %s" % (first, later))
        if first and later:
            old = b.d.execute_async_script(
                "const done = arguments[arguments.length - 1], im = new Image();"
                "im.onload = () => done('loads'); im.onerror = () => done('revoked'); im.src = arguments[0];",
                first["src"])
            check("the replaced slice's blob: URL was revoked", old == "revoked", str(old))
    b.shot("running")
    check("cancel is enabled for a running job", b.one("#cancel").is_enabled())
    b.one("#cancel").click()
    j = api.wait_state(ljob["id"], ("cancelled", "failed", "succeeded"), timeout=30, poll=0.1)
    check("Cancel on the page: the API shows the job cancelled", j["state"] == "cancelled", j["state"])
    ok = wait_for(lambda: b.text(row_sel(ljob["id"]) + " .state") == "cancelled", 10)
    check("the queue shows it cancelled", ok, repr(b.text(row_sel(ljob["id"]) + " .state")))
    check("cancel is disabled once it is cancelled", wait_for(lambda: not b.one("#cancel").is_enabled(), 5))
    p = j["progress"]
    check("the cancelled job's progress: iteration %s of 2000, stopped cancelled" % p.get("iteration"),
          p.get("iterations") == 2000 and p.get("stopped") == "cancelled" and p["iteration"] > 0, json.dumps(p))
    want = progress_words(p)
    got = wait_for(lambda: page_words_match(b, ljob["id"], want), 10)
    check("the page shows %r for it" % want, bool(got),
          "%r %r" % (b.text(row_sel(ljob["id"]) + " .ptext"), b.text("#job-progress-text")))
    progress_checks(b, api, sdata, previews)

    # -- a streaming FDK job: slices while the views arrive -----------------------------
    fspec = phantom.cone_spec(n=32, voxel=1.0, views=90, nu=48, nv=48, algorithm={"name": "fdk"},
                              label="fdk streaming")
    fspec["execution"]["stream"] = True
    fspec["autostart"] = True
    st, _, body, fjob = api.post_json("/v1/jobs", fspec)
    if st != 201:
        log("skip - streaming FDK slices: the daemon does not accept execution.stream yet (%d: %s)"
            % (st, body[:200].decode("utf-8", "replace")))
    elif not previews:
        log("skip - streaming FDK slices: the daemon has no preview endpoint yet")
    else:
        b.d.get(d.url + "/")  # a fresh load with jobs in the queue (and no message left from the cancel)
        select_job(b, fjob["id"])
        seen = set()
        nviews = fspec["geometry"]["angles"]["count"]
        for k in range(nviews):
            st, _, body, _ = api.put("/v1/jobs/%s/projections/%d" % (fjob["id"], k), phantom.project_view(fspec, k))
            if st != 200:
                check("PUT view %d of the streaming job" % k, False, body[:200])
                break
            time.sleep(0.08)
            s = b.img("z")
            if s and k < nviews - 1:
                seen.add(s["hash"])
            if k == nviews // 2:
                b.shot("streaming")
        check("a streaming FDK job's slice changed while its views arrived (%d different images before the "
              "last view)" % len(seen), len(seen) >= 2, str(sorted(seen)[:5]))
        fin = api.wait_state(fjob["id"], ("succeeded", "failed", "cancelled"), timeout=60)
        check("the streaming job succeeded", fin["state"] == "succeeded", str(fin.get("error")))

    b.pull_logs()
    problems = console_problems(b.logs)
    check("no JavaScript error and no CSP violation in the console", not problems, "; ".join(problems[:3]))
    # The check above can fail, and the CSP is in force: an inline script injected now does not run,
    # and the console shows the violation.
    b.js("window.inlineRan = false; const s = document.createElement('script');"
         "s.textContent = 'window.inlineRan = true'; document.body.appendChild(s);")
    time.sleep(0.3)
    ran = b.js("return window.inlineRan")
    b.pull_logs()
    seen = console_problems(b.logs)
    check("the browser enforces the CSP: an injected inline script does not run and the console check reports it",
          ran is False and any("Content Security Policy" in m for m in seen), "ran=%s %s" % (ran, seen[:1]))
    b.logs = []
    Validation.report()
    d.stop()

    # -- tokens: a read-only token -------------------------------------------------
    tokfile = os.path.join(tempdir("recond-page-tok-"), "tokens.json")
    write_tokens(tokfile, TOKENS)
    # its worker crashes (recond_harness.fake_worker): a failed job with an error to show
    d2 = Daemon(extra=["--token-file", tokfile], worker=fake_worker("crash")).start()
    R, S = TOKENS["reader"][0], TOKENS["submitter"][0]
    api2 = d2.api(token=S)
    tjob = api2.create(small_spec(label="waiting for views"))
    cspec = small_spec(label="crashes")
    cjob = start_job(api2, cspec, b"\0" * proj_bytes(cspec))
    cfin = api2.wait_state(cjob["id"], ("failed", "succeeded", "cancelled"), timeout=30)
    b.d.get(d2.url + "/")
    msg = wait_for(lambda: b.one("#message").is_displayed() and b.text("#message"), 10)
    check("no token on a server with tokens: the page shows the 401 and asks for a token",
          msg and "401" in msg and "token" in msg, repr(msg))
    b.one("#token").send_keys("not-a-known-token-0123")
    b.one("#token-save").click()
    msg = wait_for(lambda: "does not know this token" in (b.text("#message") or "") and b.text("#message"), 10)
    check("a wrong token: the page says the server does not know it", bool(msg), repr(b.text("#message")))
    b.one("#token").clear()
    b.one("#token").send_keys(R)
    b.one("#token-save").click()
    row = wait_for(lambda: b.one(row_sel(tjob["id"])), 10)
    check("with a read token the queue is listed", row is not None)
    check("the message is gone once the token works", wait_for(lambda: not b.one("#message").is_displayed(), 5))
    check("the token is kept in sessionStorage",
          b.js("return sessionStorage.getItem('recond.token')") == R)
    select_job(b, tjob["id"])
    cancel = b.one("#cancel")
    if cancel.is_enabled():
        cancel.click()
        msg = wait_for(lambda: "403" in (b.text("#message") or "") and b.text("#message"), 10)
        check("Cancel with a read-only token: the page shows the API's 403", bool(msg), repr(b.text("#message")))
        check("and then disables Cancel", wait_for(lambda: not b.one("#cancel").is_enabled(), 5))
    else:
        check("a read-only token shows no enabled Cancel", True)
    check("the job was not cancelled", api2.job(tjob["id"])["state"] == "created", api2.job(tjob["id"])["state"])
    check("a job whose worker crashed failed", cfin["state"] == "failed" and cfin.get("error"), str(cfin.get("error")))
    select_job(b, cjob["id"])
    want = "%s: %s" % (cfin["error"]["code"], cfin["error"]["message"]) if cfin.get("error") else "?"
    shown = wait_for(lambda: b.one("#job-error").is_displayed() and b.text("#job-error"), 10)
    check("a failed job shows its error (code: message)", shown == want, "%r, want %r" % (shown, want))
    check("cancel is disabled for a failed job", not b.one("#cancel").is_enabled())
    b.shot("read-only-token")
    b.pull_logs()
    problems = console_problems(b.logs)
    check("no JavaScript error and no CSP violation in the console (tokens)", not problems, "; ".join(problems[:3]))
    b.quit()
    d2.stop()


if __name__ == "__main__":
    run_main(main)
