#!/usr/bin/env python3
"""systemd/recond.example.json shows every config key the daemon accepts and
nothing else, and recond loads it: its top-level keys are the allowed-keys
list of server/base/config.c (read from the source), its "dicom" keys are
among load_dicom's, and `recond --config EXAMPLE --help` (the file is loaded
before --help answers) exits 0 once @PREFIX@ is substituted as `make install`
does."""

import json
import os
import re
import subprocess

from recond_harness import RECOND, ROOT, check, require_binaries, run_main, tempdir

EXAMPLE = os.path.join(ROOT, "systemd", "recond.example.json")
CONFIG_C = os.path.join(ROOT, "server", "base", "config.c")


def c_keys(src, first):
    """The NULL-ended `keys[]` array of config.c whose first entry is `first`."""
    m = re.search(r'keys\[\]\s*=\s*\{\s*"%s"(.*?)NULL\s*\}' % re.escape(first), src, re.S)
    return [first] + re.findall(r'"([a-z_]+)"', m.group(1)) if m else []


def main():
    with open(CONFIG_C) as f:
        src = f.read()
    with open(EXAMPLE) as f:
        text = f.read()
    ex = json.loads(text)
    allowed = c_keys(src, "listen")
    check("config.c's allowed keys were found", len(allowed) > 20, str(allowed))
    missing = sorted(set(allowed) - set(ex))
    extra = sorted(set(ex) - set(allowed))
    check("the example has every key the loader accepts", not missing, "missing %s" % missing)
    check("the example has no key the loader refuses", not extra, "extra %s" % extra)
    dicom = c_keys(src, "uid_root")
    check("the example's dicom keys are load_dicom's", dicom and set(ex.get("dicom", {})) <= set(dicom),
          "%s vs %s" % (sorted(ex.get("dicom", {})), dicom))

    require_binaries(RECOND)
    tmp = tempdir()
    path = os.path.join(tmp, "recond.json")
    with open(path, "w") as f:
        f.write(text.replace("@PREFIX@", "/usr/local"))
    p = subprocess.run([RECOND, "--config", path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    check("recond --config EXAMPLE --help: the example loads (exit 0)", p.returncode == 0 and b"usage" in p.stdout,
          "rc %d %s" % (p.returncode, p.stderr.decode()[:300]))
    # The check above is a real one: a key the loader refuses fails it.
    with open(path, "w") as f:
        json.dump(dict(ex, no_such_key=1), f)
    p = subprocess.run([RECOND, "--config", path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    check("an unknown key fails the same load", p.returncode != 0 and b"no_such_key" in p.stderr,
          "rc %d %s" % (p.returncode, p.stderr.decode()[:300]))


if __name__ == "__main__":
    run_main(main)
