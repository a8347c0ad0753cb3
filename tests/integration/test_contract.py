#!/usr/bin/env python3
"""Contract test: schemathesis against a live daemon, every check on.

api/openapi.yaml is the contract.  Schemathesis (PyPI, pinned below, in a venv
at $RECOND_BUILD/test-venv made on first use) generates requests from it,
schema-valid and schema-violating, for every operation (its examples,
coverage and fuzzing phases), then follows the OpenAPI links from createJob
(stateful phase) so that generated sequences create, fill, start, watch,
download, cancel and delete jobs.  Every answer goes through every check:
no server error, status codes and content types the operation documents,
bodies and headers that match their schemas (each event of the event stream
too: contract_hooks.event_data_conformance), schema-valid requests accepted,
schema-violating ones refused, a deleted job gone, a created job there.
The rules no schema can state are applied to the positive cases by
tests/integration/contract_hooks.py (docs/api.md "Contract tests" lists them
and why); tests/integration/contract.toml holds the per-operation settings.

Fixed seed and examples per operation (RECOND_CONTRACT_SEED,
RECOND_CONTRACT_EXAMPLES; `make contract-long` runs about 20 000 cases).
The sequences the stateful phase generates follow from the seed and the
schema: when one leaves an operation of REACHED without its success, the
phase runs again with the next seed, at most five times (so a schema change
cannot make the test fail by seed luck, and a daemon that never answers
a volume still fails).
Prints the cases per operation and status and the failures per check; any
failure or error fails the test.  PyPI unreachable: fails with the reason,
unless RECOND_OFFLINE=1 (then exit 77 when the venv is not there yet).
"""

import glob
import json
import os
import subprocess
import time

from recond_harness import (BUILD, HERE, OPENAPI, Daemon, check, log, pip_venv, require_binaries, run_main,
                            tempdir)

SCHEMATHESIS = "schemathesis==4.32.5"
SEED = int(os.environ.get("RECOND_CONTRACT_SEED", "20261126"))
# Examples per operation of the examples, coverage and fuzzing phases, and
# scenarios of the stateful phase (a second run: schemathesis has one count
# for every phase).  The defaults: 2 581 cases in 88 s on the shared 2-core
# VM (1 462 + 1 119); `make contract-long` asks for about 20 000 (mk/contract.mk).
EXAMPLES = int(os.environ.get("RECOND_CONTRACT_EXAMPLES", "20"))
SCENARIOS = int(os.environ.get("RECOND_CONTRACT_SCENARIOS", "150"))
# Generated jobs stay small: the hooks fit every positive spec under this cap.
MAX_JOB_BYTES = 4 << 20

# What `--checks all` runs (max_response_time needs a limit: not run), and our own.
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance", "negative_data_rejection",
          "positive_data_acceptance", "missing_required_header", "unsupported_method", "allow_header_conformance",
          "use_after_free", "ensure_resource_availability", "ignored_auth", "object_level_authorization",
          "event_data_conformance")
# Failure codes of schemathesis 4 (`st explain CODE`) -> the check that raises them.
CHECK_OF = {
    "ST101": "not_a_server_error", "ST102": "not_a_server_error", "ST103": "status_code_conformance",
    "ST104": "content_type_conformance", "ST105": "content_type_conformance", "ST106": "content_type_conformance",
    "ST107": "response_headers_conformance", "ST108": "response_schema_conformance",
    "ST109": "response_schema_conformance", "ST110": "response_schema_conformance",
    "ST111": "response_schema_conformance", "ST112": "max_response_time",
    "ST201": "negative_data_rejection", "ST202": "positive_data_acceptance", "ST203": "missing_required_header",
    "ST204": "unsupported_method", "ST205": "allow_header_conformance", "ST301": "use_after_free",
    "ST302": "ensure_resource_availability", "ST401": "ignored_auth", "ST402": "object_level_authorization",
    "ST901": "event_data_conformance",  # CustomFailure: the one custom check of contract_hooks.py
}


def venv_python():
    """The test venv's python with SCHEMATHESIS installed (recond_harness.pip_venv)."""
    want = SCHEMATHESIS.split("==")[1]
    probe = "import sys, importlib.metadata as m; sys.exit(m.version('schemathesis') != %r)" % want
    return pip_venv(os.path.join(BUILD, "test-venv"), [SCHEMATHESIS], probe)


# What the stateful phase must reach at least once (the OpenAPI links' promise), and how often it
# may run again with the next seed when a schema change moved its sequences away from one of them.
REACHED = (("PUT /v1/jobs/{id}/projections", ("200",)), ("PUT /v1/jobs/{id}/projections/{k}", ("200",)),
           ("POST /v1/jobs/{id}/start", ("202",)), ("POST /v1/jobs/{id}/cancel", ("200", "202")),
           ("GET /v1/jobs/{id}/events", ("200",)), ("GET /v1/jobs/{id}/volume", ("200", "206")),
           ("DELETE /v1/jobs/{id}", ("204",)), ("PATCH /v1/jobs/{id}", ("200",)),
           ("GET /v1/jobs/{id}/preview", ("200",)))
STATEFUL_RETRIES = 5


def read_counts(path):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def unreached(per_op):
    return [op for op, want in REACHED if not sum(per_op.get(op, {}).get(c, 0) for c in want)]


def main():
    require_binaries()
    py = venv_python()
    cli = os.path.join(os.path.dirname(py), "schemathesis")
    work = tempdir("recond-contract-")
    d = Daemon(extra=["--max-job-bytes", str(MAX_JOB_BYTES), "--worker-threads", "1"]).start()
    counts = os.path.join(work, "counts.json")
    env = dict(os.environ, PYTHONPATH=HERE, SCHEMATHESIS_HOOKS="contract_hooks", RECOND_CONTRACT_URL=d.url,
               RECOND_CONTRACT_OPENAPI=OPENAPI, RECOND_CONTRACT_COUNTS=counts,
               RECOND_CONTRACT_MAX_JOB_BYTES=str(MAX_JOB_BYTES), NO_COLOR="1")
    runs = [("examples,coverage,fuzzing", EXAMPLES, SEED), ("stateful", SCENARIOS, SEED)]
    log("schemathesis: seed %d; %d examples per operation (examples, coverage, fuzzing), then %d stateful "
        "scenarios; daemon %s" % (SEED, EXAMPLES, SCENARIOS, d.url))
    t0 = time.monotonic()
    reps, codes = [], []
    i = 0
    while i < len(runs):
        phases, n, seed = runs[i]
        i += 1
        rdir = os.path.join(work, "%s-%d" % (phases.split(",")[0], seed))
        cmd = [cli, "--config-file", os.path.join(HERE, "contract.toml"), "run", OPENAPI, "--url", d.url,
               "--phases", phases, "--checks", "all", "--max-examples", str(n), "--seed", str(seed),
               "--workers", "1", "--request-timeout", "10", "--generation-database", "none", "--no-color",
               "--report", "json", "--report-dir", rdir]
        # schemathesis' own report as it runs: each phase, the failures in full, its summary
        with subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as p:
            for ln in p.stdout:
                log("  | " + ln.rstrip("\n"))
        found = glob.glob(os.path.join(rdir, "json-*.json"))
        rep = {}
        if found:
            with open(found[0]) as f:
                rep = json.load(f)
        reps.append(rep)
        codes.append(p.returncode)
        # Which sequences the stateful phase generates follows from the seed and the schema, so
        # a schema change can leave an operation's success unreached: then the stateful phase runs
        # again with the next seeds, at most STATEFUL_RETRIES times (still deterministic).
        missing = unreached(read_counts(counts))
        if phases == "stateful" and i == len(runs) and missing and len(runs) < 2 + STATEFUL_RETRIES:
            log("stateful phase (seed %d) left unreached: %s; again with seed %d" % (seed, ", ".join(missing), seed + 1))
            runs.append(("stateful", SCENARIOS, seed + 1))
    secs = time.monotonic() - t0
    per_op = read_counts(counts)

    cases = sum((r.get("test_cases") or {}).get("generated", 0) for r in reps)
    log("")
    log("contract: %d cases in %.0f s (seed %d; %d examples per operation, %d stateful scenarios)"
        % (cases, secs, SEED, EXAMPLES, SCENARIOS))
    log("requests per operation, by status:")
    for op in sorted(per_op, key=lambda o: (o.split()[1], o.split()[0])):
        st = per_op[op]
        log("  %-38s %5d  %s" % (op, sum(st.values()), "  ".join("%s:%d" % kv for kv in sorted(st.items()))))
    fails = {}
    for f in [f for r in reps for f in r.get("failures", [])]:
        name = CHECK_OF.get(f.get("code"), f.get("code"))
        fails.setdefault(name, []).append(f)
    names = list(CHECKS) + sorted(set(fails) - set(CHECKS))
    log("failures per check:")
    for name in names:
        fl = fails.get(name, [])
        what = "".join("  [%s %s: %s]" % (f.get("code"), f.get("title"), ", ".join(f.get("operations", [])))
                       for f in fl)
        log("  %-34s %d%s" % (name, sum(f.get("count", 1) for f in fl), what))
    errors = [e for r in reps for e in r.get("errors", [])]
    for e in errors:
        log("error: %s (%d)" % (e.get("title"), e.get("count", 1)))

    for (phases, _, seed), rep, code in zip(runs, reps, codes):
        check("schemathesis (%s, seed %d) ran to the end: exit %d, stop reason %s"
              % (phases, seed, code, rep.get("stop_reason")),
              code == 0 and rep.get("complete") is True and rep.get("stop_reason") == "completed")
        # The examples phase has nothing to run: api/openapi.yaml has no examples.
        ran = {k: v.get("status") for k, v in (rep.get("phases") or {}).items() if k in phases}
        check("schemathesis (%s): every phase ran" % phases,
              all(st == "success" or (k == "examples" and st == "skip") for k, st in ran.items()), str(ran))
    for name in names:
        n = sum(f.get("count", 1) for f in fails.get(name, []))
        check("check %s: no failures" % name, n == 0, "%d failures" % n)
    check("no errors", not errors, "; ".join(e.get("title", "?") for e in errors))
    # The stateful phase reached what the links promise: jobs filled, run and downloaded (and previewed,
    # their priority changed), then deleted.
    for op, want in REACHED:
        n = sum(per_op.get(op, {}).get(c, 0) for c in want)
        check("%s answered %s at least once" % (op, "/".join(want)), n > 0, str(per_op.get(op)))
    check("the daemon is still up", d.proc.poll() is None, "exit %s" % d.proc.poll())
    log("contract test took %.0f s" % secs)
    d.stop()


if __name__ == "__main__":
    run_main(main)
