#!/usr/bin/env python3
"""docs/quickstart.md stays pasteable: its ```sh blocks run, in order, as one
bash script (set -eu -o pipefail) against a daemon on a free port (RECOND)
with the demo files in a temporary directory (DEMO), from the top of the
repository; every job it makes must have succeeded."""

import os
import re
import subprocess

from recond_harness import (BIN, ROOT, Daemon, check, require_engine, log, require_binaries, run_main,
                            tempdir)


def main():
    require_binaries()
    with open(os.path.join(ROOT, "docs", "quickstart.md")) as f:
        md = f.read()
    blocks = re.findall(r"```sh\n(.*?)```", md, re.S)
    check("quickstart has shell blocks", len(blocks) >= 5, str(len(blocks)))
    d = Daemon().start()
    require_engine(d.api())
    demo = tempdir()
    script = "set -eu -o pipefail\n" + "\n".join(blocks)
    # build/bin/reconctl in the text means the build the tests run against.
    script = script.replace("build/bin/", BIN + "/")
    env = dict(os.environ, RECOND=d.url, DEMO=demo)
    p = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=300)
    out = p.stdout.decode("utf-8", "replace")
    for ln in out.splitlines()[-40:]:
        log("  | " + ln)
    check("quickstart blocks run without error", p.returncode == 0, "exit %d" % p.returncode)
    nii = os.path.join(demo, "volume.nii")
    check("quickstart wrote volume.nii", os.path.exists(nii) and os.path.getsize(nii) > 348 + 4 * 32 ** 3 - 1)
    check("quickstart: view-by-view job was queued by autostart", '"views_missing": []' in out, "")
    check("quickstart: DELETE answered for each job", out.count("204") + out.count("200") >= 3)
    d.stop()


if __name__ == "__main__":
    run_main(main)
