"""Analytic test data for the integration tests, in pure Python.

An ellipsoid phantom (axis-aligned ellipsoids whose attenuations add up), its
cone-beam projections computed as exact line integrals with the geometry
formulas of API.md ("Geometry conventions"), and its voxelised volume (each
voxel the mean over a 2x2x2 sub-grid, i.e. partial volume at the edges).
For 2-D jobs: fan rays of a flat or curved detector (fan_ray) and exact
projections of disks (project_fan_disks).
Nothing here comes from the C code: it is the independent reference the
daemon's result is compared with.

self_check() tests this module itself (a harness that computes a metric must
be able to fail): chords through a ball's centre, a ray marched through the
voxelised phantom against the analytic integral, and the error metric on
known inputs.
"""

import array
import math

# (centre mm, semi-axes mm, attenuation 1/mm).  Deliberately asymmetric so
# that a flipped axis or a wrong angle direction shows in the error.
DEFAULT_PHANTOM = [
    ((0.0, 0.0, 0.0), (12.0, 10.0, 11.0), 0.02),
    ((6.0, -4.0, 3.0), (4.0, 3.0, 5.0), 0.02),
    ((-6.0, 5.0, -3.0), (3.0, 3.0, 3.0), -0.015),
]


def chord(src, d, ell):
    """Length of the line src + t*d (|d| = 1, all t) inside ellipsoid ell, times its attenuation."""
    (cx, cy, cz), (ax, ay, az), mu = ell
    q0 = ((src[0] - cx) / ax, (src[1] - cy) / ay, (src[2] - cz) / az)
    q1 = (d[0] / ax, d[1] / ay, d[2] / az)
    a = q1[0] * q1[0] + q1[1] * q1[1] + q1[2] * q1[2]
    b = q0[0] * q1[0] + q0[1] * q1[1] + q0[2] * q1[2]
    c = q0[0] * q0[0] + q0[1] * q0[1] + q0[2] * q0[2] - 1.0
    disc = b * b - a * c
    if disc <= 0:
        return 0.0
    return mu * 2.0 * math.sqrt(disc) / a


def cone_spec(n=32, voxel=1.0, views=90, nu=48, nv=48, du=1.5, dv=1.5, D=200.0, S=400.0,
              algorithm=None, label="analytic"):
    """A job spec (API.md) of the geometry that project_cone() computes."""
    return {
        "label": label,
        "geometry": {
            "type": "cone", "source_isocenter_mm": D, "source_detector_mm": S,
            "angles": {"start_deg": 0.0, "step_deg": 360.0 / views, "count": views},
            "detector": {"nu": nu, "nv": nv, "du_mm": du, "dv_mm": dv,
                         "offset_u_mm": 0.0, "offset_v_mm": 0.0},
        },
        "volume": {"nx": n, "ny": n, "nz": n, "voxel_mm": [voxel, voxel, voxel]},
        "algorithm": algorithm or {"name": "fdk"},
        "execution": {"engine": "cpu", "precision": "fp32"},
        "priority": 5,
    }


def _angles(geom):
    if "angles_deg" in geom:
        return list(geom["angles_deg"])
    a = geom["angles"]
    return [a["start_deg"] + k * a["step_deg"] for k in range(a["count"])]


def project_view(spec, k, phantom=DEFAULT_PHANTOM):
    """View k of spec's cone geometry as float32 bytes, [v][u], u fastest."""
    g = spec["geometry"]
    det = g["detector"]
    D, S = g["source_isocenter_mm"], g["source_detector_mm"]
    nu, nv, du, dv = det["nu"], det["nv"], det["du_mm"], det["dv_mm"]
    ou, ov = det.get("offset_u_mm", 0.0), det.get("offset_v_mm", 0.0)
    th = math.radians(_angles(g)[k])
    ct, st = math.cos(th), math.sin(th)
    src = (D * ct, D * st, 0.0)
    dc = (-(S - D) * ct, -(S - D) * st, 0.0)
    eu = (-st, ct, 0.0)
    out = array.array("f", bytes(4 * nu * nv))
    for j in range(nv):
        pv = (j - (nv - 1) / 2.0) * dv + ov
        for i in range(nu):
            pu = (i - (nu - 1) / 2.0) * du + ou
            px = dc[0] + pu * eu[0]
            py = dc[1] + pu * eu[1]
            pz = dc[2] + pv
            dx, dy, dz = px - src[0], py - src[1], pz - src[2]
            ln = math.sqrt(dx * dx + dy * dy + dz * dz)
            d = (dx / ln, dy / ln, dz / ln)
            out[j * nu + i] = sum(chord(src, d, e) for e in phantom)
    return out.tobytes()


def project_cone(spec, phantom=DEFAULT_PHANTOM):
    """The whole stack [view][v][u] as float32 bytes."""
    n = spec["geometry"]["angles"]["count"] if "angles" in spec["geometry"] else len(spec["geometry"]["angles_deg"])
    return b"".join(project_view(spec, k, phantom) for k in range(n))


def fan_ray(geom, k, i):
    """Source (x, y) and unit direction of pixel i of view k of a fan geometry, flat or curved (API.md):
    flat, towards s + S n + u e_u with u = (i - (nu-1)/2) du + offset_u; curved
    (geometry.detector.shape), at fan angle g = u / S from n towards e_u, the pixel at
    s + S (cos g n + sin g e_u) on the arc of radius S about the source."""
    det = geom["detector"]
    D, S = geom["source_isocenter_mm"], geom["source_detector_mm"]
    nu, du, ou = det["nu"], det["du_mm"], det.get("offset_u_mm", 0.0)
    th = math.radians(_angles(geom)[k])
    ct, st = math.cos(th), math.sin(th)
    src, n, eu = (D * ct, D * st), (-ct, -st), (-st, ct)
    u = (i - (nu - 1) / 2.0) * du + ou
    if det.get("shape", "flat") == "curved":
        g = u / S
        return src, (math.cos(g) * n[0] + math.sin(g) * eu[0], math.cos(g) * n[1] + math.sin(g) * eu[1])
    px, py = S * n[0] + u * eu[0], S * n[1] + u * eu[1]
    ln = math.hypot(px, py)
    return src, (px / ln, py / ln)


def disk_chord(p, d, disk):
    """Length inside disk (cx, cy, r, ...) of the line through p with unit direction d."""
    cx, cy, r = disk[0], disk[1], disk[2]
    dist = abs((cx - p[0]) * d[1] - (cy - p[1]) * d[0])
    return 2 * math.sqrt(r * r - dist * dist) if dist < r else 0.0


def project_fan_disks(geom, disks, slices):
    """Fan projections [slice][view][u] (a list of floats) of disks (cx, cy, r, [density per slice]),
    each slice its own densities; flat or curved detector (fan_ray).  The detector lies beyond the
    volume, so the segment to the pixel and the whole line give the same integral."""
    nu, views = geom["detector"]["nu"], len(_angles(geom))
    rays = [[fan_ray(geom, k, i) for i in range(nu)] for k in range(views)]
    out = []
    for z in range(slices):
        for k in range(views):
            for p, d in rays[k]:
                out.append(sum(disk[3][z] * disk_chord(p, d, disk) for disk in disks))
    return out


def pixelize_disks(n, disks, slices, sub=4):
    """The disks (cx, cy, r, [density per slice]) on an n x n image of 1 mm pixels centred at the
    origin, per slice ([z][y][x], a list of floats): each pixel's area fraction from sub x sub
    samples."""
    ref = []
    for z in range(slices):
        for iy in range(n):
            for ix in range(n):
                acc = 0.0
                for sy in range(sub):
                    for sx in range(sub):
                        x = ix - (n - 1) / 2.0 + (sx + 0.5) / sub - 0.5
                        y = iy - (n - 1) / 2.0 + (sy + 0.5) / sub - 0.5
                        for cx, cy, r, rho in disks:
                            if (x - cx) ** 2 + (y - cy) ** 2 <= r * r:
                                acc += rho[z]
                ref.append(acc / (sub * sub))
    return ref


def _inside(p, phantom):
    v = 0.0
    for (cx, cy, cz), (ax, ay, az), mu in phantom:
        x, y, z = (p[0] - cx) / ax, (p[1] - cy) / ay, (p[2] - cz) / az
        if x * x + y * y + z * z <= 1.0:
            v += mu
    return v


def voxelise(spec, phantom=DEFAULT_PHANTOM, sub=2):
    """The phantom on spec's volume grid, [z][y][x], each voxel the mean of sub^3 samples."""
    vol = spec["volume"]
    nx, ny, nz = vol["nx"], vol["ny"], vol["nz"]
    vx, vy, vz = vol["voxel_mm"] if isinstance(vol["voxel_mm"], list) else [vol["voxel_mm"]] * 3
    cx, cy, cz = vol.get("center_mm", [0.0, 0.0, 0.0])
    offs = [((s + 0.5) / sub - 0.5) for s in range(sub)]
    out = array.array("f", bytes(4 * nx * ny * nz))
    for iz in range(nz):
        z0 = (iz - (nz - 1) / 2.0) * vz + cz
        for iy in range(ny):
            y0 = (iy - (ny - 1) / 2.0) * vy + cy
            for ix in range(nx):
                x0 = (ix - (nx - 1) / 2.0) * vx + cx
                acc = 0.0
                for oz in offs:
                    for oy in offs:
                        for ox in offs:
                            acc += _inside((x0 + ox * vx, y0 + oy * vy, z0 + oz * vz), phantom)
                out[(iz * ny + iy) * nx + ix] = acc / sub ** 3
    return out


def rel_error(rec, ref, mask=None):
    """||rec - ref|| / ||ref|| over the voxels where mask (a list of bools) is true."""
    num = den = 0.0
    for i, (a, b) in enumerate(zip(rec, ref)):
        if mask is not None and not mask[i]:
            continue
        num += (a - b) * (a - b)
        den += b * b
    return math.sqrt(num / den) if den > 0 else float("inf")


def mean_in_ball(vol, spec, centre, radius):
    """Mean of the voxels whose centres lie within radius of centre."""
    v = spec["volume"]
    nx, ny, nz = v["nx"], v["ny"], v["nz"]
    vx, vy, vz = v["voxel_mm"]
    acc, n = 0.0, 0
    for iz in range(nz):
        z = (iz - (nz - 1) / 2.0) * vz
        for iy in range(ny):
            y = (iy - (ny - 1) / 2.0) * vy
            for ix in range(nx):
                x = (ix - (nx - 1) / 2.0) * vx
                if (x - centre[0]) ** 2 + (y - centre[1]) ** 2 + (z - centre[2]) ** 2 <= radius ** 2:
                    acc += vol[(iz * ny + iy) * nx + ix]
                    n += 1
    return acc / n if n else float("nan")


def self_check():
    """Returns a list of (name, ok, detail) about this module's own correctness."""
    res = []
    ball = [((1.0, 2.0, 3.0), (5.0, 5.0, 5.0), 0.1)]
    c = chord((1.0 - 100.0, 2.0, 3.0), (1.0, 0.0, 0.0), ball[0])
    res.append(("phantom: chord through a ball's centre is 2r*mu", abs(c - 1.0) < 1e-12, "got %g" % c))
    c = chord((1.0 - 100.0, 2.0 + 3.0, 3.0), (1.0, 0.0, 0.0), ball[0])
    res.append(("phantom: off-centre chord is 2*sqrt(r^2-h^2)*mu", abs(c - 0.8) < 1e-12, "got %g" % c))
    # A ray marched through the voxelised default phantom agrees with the analytic integral.
    spec = cone_spec(n=32)
    vol = voxelise(spec)
    src, d = (-100.0, 1.3, 0.7), (1.0, 0.0, 0.0)
    analytic = sum(chord(src, d, e) for e in DEFAULT_PHANTOM)
    step, acc, t = 0.05, 0.0, 80.0
    while t < 120.0:
        x, y, z = src[0] + t * d[0], src[1] + t * d[1], src[2] + t * d[2]
        ix, iy, iz = round(x + 15.5), round(y + 15.5), round(z + 15.5)
        if 0 <= ix < 32 and 0 <= iy < 32 and 0 <= iz < 32:
            acc += vol[(iz * 32 + iy) * 32 + ix] * step
        t += step
    res.append(("phantom: marched voxel integral matches analytic within 5%",
                abs(acc - analytic) < 0.05 * analytic, "march %g analytic %g" % (acc, analytic)))
    # Curved fan rays: pixel i of a curved detector sits at fan angle ((i - (nu-1)/2) du + offset) / S;
    # the flat pixel with the same u sits at atan(u / S), and the two agree at the centre only.
    g = {"type": "fan", "source_isocenter_mm": 50.0, "source_detector_mm": 80.0, "angles_deg": [30.0],
         "detector": {"nu": 41, "du_mm": 2.0, "offset_u_mm": 1.0, "shape": "curved"}}
    src, d = fan_ray(g, 0, 35)
    th, gam = math.radians(30.0), (15 * 2.0 + 1.0) / 80.0
    n, eu = (-math.cos(th), -math.sin(th)), (-math.sin(th), math.cos(th))
    ang = math.atan2(d[0] * eu[0] + d[1] * eu[1], d[0] * n[0] + d[1] * n[1])
    res.append(("phantom: a curved pixel's ray is at its fan angle", abs(ang - gam) < 1e-12,
                "%g vs %g" % (ang, gam)))
    g["detector"]["shape"] = "flat"
    _, d = fan_ray(g, 0, 35)
    ang = math.atan2(d[0] * eu[0] + d[1] * eu[1], d[0] * n[0] + d[1] * n[1])
    res.append(("phantom: the flat pixel's ray is at atan(u / S)", abs(ang - math.atan(31.0 / 80.0)) < 1e-12,
                "%g" % ang))
    ref = list(vol)
    res.append(("metric: error of the reference against itself is 0", rel_error(ref, ref) == 0.0, ""))
    res.append(("metric: error of a zero volume is 1", abs(rel_error([0.0] * len(ref), ref) - 1.0) < 1e-12, ""))
    flipped = [vol[(iz * 32 + iy) * 32 + (31 - ix)] for iz in range(32) for iy in range(32) for ix in range(32)]
    e = rel_error(flipped, ref)
    res.append(("metric: an x-flipped phantom is far off (> 0.25)", e > 0.25, "got %.3f" % e))
    return res


def main(argv=None):
    """Writes a demo job (job.json) and its analytic projections (projections.f32) to a directory."""
    import argparse
    import json
    import os
    import time
    ap = argparse.ArgumentParser(description="analytic cone-beam test data for recond (pure Python)")
    ap.add_argument("--out", required=True, help="directory to write job.json and projections.f32 into")
    ap.add_argument("--n", type=int, default=32, help="volume n^3 (default 32)")
    ap.add_argument("--views", type=int, default=90)
    ap.add_argument("--algorithm", default="sart", choices=["sart", "sirt", "cgls", "fdk", "mlem"])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--subsets", type=int, default=10, help="SART ordered subsets (default 10)")
    ap.add_argument("--autostart", action="store_true", help="queue the job when its last view arrives")
    a = ap.parse_args(argv)
    voxel = 32.0 / a.n  # the phantom spans about 30 mm whatever the grid
    det = max(32, int(a.n * 1.5))
    algo = {"name": a.algorithm}
    if a.algorithm != "fdk":
        algo["iterations"] = a.iterations
    if a.algorithm == "sart":
        algo["relaxation"] = 0.5
        algo["subsets"] = a.subsets
    spec = cone_spec(n=a.n, voxel=voxel, views=a.views, nu=det, nv=det, du=72.0 / det, dv=72.0 / det,
                     algorithm=algo, label="phantom-%d" % a.n)
    spec["execution"]["engine"] = "auto"
    spec["autostart"] = a.autostart
    os.makedirs(a.out, exist_ok=True)
    t0 = time.monotonic()
    with open(os.path.join(a.out, "projections.f32"), "wb") as f:
        for k in range(a.views):
            f.write(project_view(spec, k))
    with open(os.path.join(a.out, "job.json"), "w") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
    g = spec["geometry"]["detector"]
    print("wrote %s/job.json and projections.f32 (%d views of %dx%d, %.1f MB) in %.1f s"
          % (a.out, a.views, g["nu"], g["nv"], a.views * g["nu"] * g["nv"] * 4 / 1e6, time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
