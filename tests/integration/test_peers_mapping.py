#!/usr/bin/env python3
"""The geometry mappings of `make bench-peers` (scripts/peers_map.py): recond's cone convention to
RTK's ThreeDCircularProjectionGeometry, recond's fan to ASTRA's fanflat_vec and recond's parallel
to ASTRA's parallel_vec.

An off-centre, asymmetric object (two ellipsoids, one rotated) is projected analytically with
recond's formulas (docs/api.md) and with the peer's forward projector (RTK Joseph, ASTRA FP_CPU
line_fanflat and line) through the mapping; the projections must agree (relative L2 below 0.1, the
voxelisation's share, and centroids within 0.25 pixel per view).  Three wrong mappings (angle sign
flipped, u mirrored, x and y swapped) must disagree by more than 0.5, so the check can fail.  The
numpy projector itself is checked against tests/integration/phantom.py, and RTK's projection
matrices brought to recond's `matrices` form (peers_map.rtk_to_recond_matrices; detector offsets
given in the stack's origin or as RTK's ProjectionOffsetX/Y) must equal recond's own cone matrices.

Needs the virtual environment that `make bench-peers` creates (build/peers-venv with itk-rtk and
astra-toolbox from PyPI); without it the test is skipped (exit 77): `make test` does not download.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV_PY = os.path.join(os.environ.get("RECOND_BUILD") or os.path.join(ROOT, "build"), "peers-venv", "bin", "python")

if __name__ == "__main__" and os.environ.get("RECOND_PEERS_CHILD") != "1":
    sys.path.insert(0, HERE)
    from recond_harness import skip
    if not os.access(VENV_PY, os.X_OK):
        skip("no %s: `make bench-peers` creates it (itk-rtk, astra-toolbox from PyPI)" % VENV_PY)
    probe = subprocess.run([VENV_PY, "-c", "import numpy, itk, astra; from itk import RTK"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        skip("%s lacks numpy/itk-rtk/astra-toolbox: %s" % (VENV_PY, probe.stderr.strip().splitlines()[-1:]))
    env = dict(os.environ, RECOND_PEERS_CHILD="1")
    sys.exit(subprocess.call([VENV_PY, os.path.abspath(__file__)], env=env))

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from recond_harness import check, run_main  # noqa: E402
import peers_map  # noqa: E402


def main():
    for name, ok, detail in (peers_map.check_phantom_module() + peers_map.check_rtk_mapping()
                             + peers_map.check_rtk_matrices() + peers_map.check_astra_mapping()
                             + peers_map.check_astra_parallel_mapping() + peers_map.check_astra_cone_mapping()):
        check(name, ok, detail)


if __name__ == "__main__":
    run_main(main)
