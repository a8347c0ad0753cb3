#!/usr/bin/env python3
"""A PACS-style script: reconstruct every acquisition found in an inbox.

Each acquisition is a directory holding spec.json (the job spec, API.md) and
projections.f32 (raw float32, [view][v][u]).  For each one the script submits
the job, follows its progress, and on success stores the volume as NIfTI next
to the input (volume.nii) and moves the directory to done/; a failed job goes
to failed/ with the error in error.txt.  Run it from cron or a loop:

    RECOND_URL=http://127.0.0.1:8080 RECOND_TOKEN=... python3 example.py /srv/inbox

Exit status: 0 when every acquisition succeeded, 1 otherwise.
"""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from recond_client import Client, RecondError  # noqa: E402


def process(client, acq):
    with open(os.path.join(acq, "spec.json"), "rb") as f:
        spec = json.load(f)
    spec.setdefault("label", os.path.basename(acq.rstrip("/")))
    job = client.submit(spec, os.path.join(acq, "projections.f32"))
    print("%s: job %s %s" % (acq, job["id"], job["state"]), flush=True)
    final = None
    for event, data in client.watch(job["id"], timeout=3600):
        if event == "progress":
            stop = " (stopped: %s)" % data["stopped"] if data.get("stopped") else ""
            print("  %s: iteration %s of %s%s" % (data.get("phase"), data.get("iteration"), data.get("iterations"), stop),
                  flush=True)
        elif event == "end":
            final = data
    if final["state"] != "succeeded":
        err = final.get("error") or {}
        raise RuntimeError("job %s %s: %s" % (job["id"], final["state"], err.get("message", "")))
    n = client.get(job["id"], os.path.join(acq, "volume.nii"), fmt="nifti")
    print("  volume.nii: %d bytes" % n, flush=True)


def main():
    inbox = sys.argv[1] if len(sys.argv) > 1 else "."
    client = Client()
    ok = True
    for name in sorted(os.listdir(inbox)):
        acq = os.path.join(inbox, name)
        if name in ("done", "failed") or not os.path.isfile(os.path.join(acq, "spec.json")):
            continue
        try:
            process(client, acq)
            dest = "done"
        except (RecondError, RuntimeError, OSError, ValueError) as e:
            print("%s: %s" % (acq, e), file=sys.stderr, flush=True)
            ok = False
            dest = "failed"
            with open(os.path.join(acq, "error.txt"), "w") as f:
                f.write(str(e) + "\n")
        os.makedirs(os.path.join(inbox, dest), exist_ok=True)
        shutil.move(acq, os.path.join(inbox, dest, name))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
