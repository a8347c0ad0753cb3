#!/usr/bin/env python3
"""Log lines cannot be forged from outside: a job label (which may name a
patient) never reaches the daemon's log, and every quoted value of the log
is balanced (rlog_q escapes quotes and control bytes of text from outside;
test_log checks rlog_q itself)."""

from recond_harness import Daemon, Validation, check, proj_bytes, require_binaries, run_main, small_spec

FORGED = 'x" token=admin\n<2>event=forged id=1 name="Doe^Jane'


def main():
    require_binaries()
    d = Daemon().start()
    api = d.api()
    spec = small_spec(label=FORGED)
    job = api.create(spec)
    st, _, _, _ = api.put("/v1/jobs/%s/projections" % job["id"], b"\0" * proj_bytes(spec))
    api.post_json("/v1/jobs/%s/start" % job["id"], b"")
    done = api.wait_state(job["id"], ("succeeded", "failed"), timeout=60)
    check("the job with a hostile label finished", done["state"] in ("succeeded", "failed"), done["state"])
    check("the label comes back unchanged through the API", done.get("label") == FORGED, repr(done.get("label")))

    log = d.read_log()
    lines = log.splitlines()
    check("no line of the log starts with a forged event", not [l for l in lines if l.startswith("<2>")],
          "\n".join(l for l in lines if l.startswith("<2>")))
    check("no forged token=admin field in the log", "token=admin" not in log.replace('token=admin\\"', ""),
          [l for l in lines if "token=admin" in l])
    check("the label is not in the log", "Doe^Jane" not in log, [l for l in lines if "Doe^Jane" in l])
    created = [l for l in lines if "event=job_created" in l]
    check("job_created is logged without the label", created and all("label=" not in l for l in created),
          created)
    for l in lines:
        if '="' in l:
            # Every quoted value closes on an unescaped quote: count the
            # unescaped quotes of each line; they come in pairs.
            n = sum(1 for i, ch in enumerate(l) if ch == '"' and (i == 0 or l[i - 1] != "\\"))
            if n % 2:
                check("quoted values are balanced: %s" % l[:120], False)
    Validation.report()
    d.stop()


if __name__ == "__main__":
    run_main(main)
