"""recond's geometry conventions mapped to RTK's and ASTRA's, and the test data of `make bench-peers`.

Used by scripts/bench-peers.py and tests/integration/test_peers_mapping.py; needs numpy, and
itk-rtk / astra-toolbox for the functions that name them (build/peers-venv, docs/peers.md).

recond (docs/api.md, "Geometry conventions"): world mm, z the rotation axis; view k at angle θ has
the source at D(cos θ, sin θ, 0), the detector centre at −(S − D)(cos θ, sin θ, 0), e_u =
(−sin θ, cos θ, 0), e_v = (0, 0, 1); pixel (i, j) at d + ((i − (nu−1)/2)du + offset_u) e_u +
((j − (nv−1)/2)dv + offset_v) e_v; projections [view][v][u]; voxel (ix, iy, iz) at
((ix − (nx−1)/2)vx + cx, ...), stored [z][y][x].  Fan: the same in each plane z = z(iz), [slice][view][u].

The mappings are two functions, each tested (check_rtk_mapping, check_astra_mapping) by projecting
an off-centre, asymmetric object with the peer's own forward projector and comparing with the
analytic projections computed here from recond's formulas; the same checks run with a deliberately
wrong mapping (angle sign flipped, u axis mirrored, x and y swapped) and must fail.
"""

import math
import os
import sys

import numpy as np

# The user-facing mappings live in the Python client (clients/python/recond_import.py); they are
# imported here so that bench-peers and the tests keep one name for each.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "clients", "python"))
import recond_import  # noqa: E402
from recond_import import (_same, _unit_w, astra_cone_matrices, astra_cone_to_recond, astra_cone_vectors,  # noqa: E402,F401
                           astra_to_recond, astra_vectors, rtk_to_recond_matrices)

# --- phantom ---------------------------------------------------------------------------------

# core/geometry/phantom.c's 3-D modified Shepp-Logan (Kak & Slaney's ellipsoids, Toft's densities),
# in units of the half field of view: centre x, y, z, semi-axes a, b, c, rotation about z (degrees),
# density in units of 0.1/mm (RC_PHANTOM_MU_UNIT).  bench-algo uses it with fov = 0.94 * n * vx.
SHEPP_LOGAN = [
    (0, 0, 0, 0.6900, 0.920, 0.810, 0, 1.0),
    (0, -0.0184, 0, 0.6624, 0.874, 0.780, 0, -0.8),
    (0.22, 0, 0, 0.1100, 0.310, 0.220, -18, -0.2),
    (-0.22, 0, 0, 0.1600, 0.410, 0.280, 18, -0.2),
    (0, 0.35, -0.15, 0.2100, 0.250, 0.410, 0, 0.1),
    (0, 0.1, 0.25, 0.0460, 0.046, 0.050, 0, 0.1),
    (0, -0.1, 0.25, 0.0460, 0.046, 0.050, 0, 0.1),
    (-0.08, -0.605, 0, 0.0460, 0.023, 0.050, 0, 0.1),
    (0, -0.606, 0, 0.0230, 0.023, 0.020, 0, 0.1),
    (0.06, -0.605, 0, 0.0230, 0.046, 0.020, 0, 0.1),
]
MU_UNIT = 0.1


def shepp_logan(fov_mm):
    """Ellipsoids ((cx, cy, cz), (a, b, c), phi_deg, mu) of the Shepp-Logan `fov_mm` wide."""
    s = fov_mm / 2.0
    return [((r[0] * s, r[1] * s, r[2] * s), (r[3] * s, r[4] * s, r[5] * s), r[6], r[7] * MU_UNIT)
            for r in SHEPP_LOGAN]


def test_object():
    """An off-centre, asymmetric object for the mapping checks: a flip of any axis or of the
    angle's sign moves it on the detector."""
    return [((9.0, -5.0, 4.0), (6.0, 3.0, 4.5), 30.0, 0.02),
            ((-4.0, 6.0, -6.0), (2.5, 2.5, 2.5), 0.0, 0.03)]


def _to_unit(ell, p, is_dir):
    (cx, cy, cz), (a, b, c), phi, _mu = ell
    cs, sn = math.cos(math.radians(phi)), math.sin(math.radians(phi))
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    if not is_dir:
        x, y, z = x - cx, y - cy, z - cz
    return np.stack([(cs * x + sn * y) / a, (-sn * x + cs * y) / b, z / c], axis=-1)


def segment_integrals(ells, src, ends):
    """Line integrals of the phantom along the segments src -> ends (ends [..., 3]; src one point
    [3] or one per segment, broadcast against ends), exact."""
    src = np.asarray(src, dtype=float)
    d = ends - src
    dn = np.linalg.norm(d, axis=-1)
    out = np.zeros(ends.shape[:-1])
    for e in ells:
        qd = _to_unit(e, d, True)
        A = np.einsum("...i,...i->...", qd, qd)
        if src.ndim == 1:
            q0 = _to_unit(e, src[None, :], False)[0]
            tm = -(qd @ q0) / A
        else:
            q0 = _to_unit(e, np.broadcast_to(src, ends.shape), False)
            tm = -np.einsum("...i,...i->...", qd, q0) / A
        m = q0 + tm[..., None] * qd
        r2 = np.einsum("...i,...i->...", m, m)
        h = np.sqrt(np.clip(1.0 - r2, 0.0, None) / A)
        t0 = np.clip(tm - h, 0.0, 1.0)
        t1 = np.clip(tm + h, 0.0, 1.0)
        out += e[3] * np.where(r2 < 1.0, t1 - t0, 0.0) * dn
    return out


def cone_geometry(D, S, angles_deg, nu, nv, du, dv, offset_u=0.0, offset_v=0.0, shape="flat"):
    """A cone geometry; shape "curved" is the cylindrical detector (radius S about the source,
    axis z, du an arc length: docs/geometry.md, "Cylindrical cone detectors")."""
    g = {"type": "cone", "source_isocenter_mm": D, "source_detector_mm": S,
         "angles_deg": [float(a) for a in angles_deg],
         "detector": {"nu": nu, "nv": nv, "du_mm": du, "dv_mm": dv,
                      "offset_u_mm": offset_u, "offset_v_mm": offset_v}}
    if shape != "flat":
        g["detector"]["shape"] = shape
    return g


def fan_geometry(D, S, angles_deg, nu, du, slices, offset_u=0.0):
    return {"type": "fan", "source_isocenter_mm": D, "source_detector_mm": S, "slices": slices,
            "angles_deg": [float(a) for a in angles_deg],
            "detector": {"nu": nu, "du_mm": du, "offset_u_mm": offset_u}}


def parallel_geometry(angles_deg, nu, du, slices, offset_u=0.0):
    return {"type": "parallel", "slices": slices, "angles_deg": [float(a) for a in angles_deg],
            "detector": {"nu": nu, "du_mm": du, "offset_u_mm": offset_u}}


def voxel_axes(vol):
    """Voxel centre coordinates along x, y, z of a recond volume spec (docs/api.md)."""
    v = vol["voxel_mm"] if isinstance(vol["voxel_mm"], list) else [vol["voxel_mm"]] * 3
    c = vol.get("center_mm", [0.0, 0.0, 0.0])
    return [(np.arange(n) - (n - 1) / 2.0) * v[a] + c[a] for a, n in enumerate((vol["nx"], vol["ny"], vol["nz"]))]


def project_cone(ells, geom, views=None):
    """recond's cone projections [view][v][u] (float32) of the phantom, from docs/api.md's formulas."""
    D, S = geom["source_isocenter_mm"], geom["source_detector_mm"]
    det = geom["detector"]
    nu, nv, du, dv = det["nu"], det["nv"], det["du_mm"], det["dv_mm"]
    ou, ov = det.get("offset_u_mm", 0.0), det.get("offset_v_mm", 0.0)
    ang = geom["angles_deg"]
    views = range(len(ang)) if views is None else views
    pu = (np.arange(nu) - (nu - 1) / 2.0) * du + ou
    pv = (np.arange(nv) - (nv - 1) / 2.0) * dv + ov
    out = np.empty((len(views), nv, nu), np.float32)
    curved = det.get("shape", "flat") == "curved"
    for n, k in enumerate(views):
        th = math.radians(ang[k])
        c, s = math.cos(th), math.sin(th)
        src = np.array([D * c, D * s, 0.0])
        ends = np.empty((nv, nu, 3))
        if curved:  # on the cylinder: s + S cos(g) n + S sin(g) e_u + v e_z, g = u / S
            g = pu / S
            a, b = S * np.cos(g), S * np.sin(g)
            ends[..., 0] = D * c - a[None, :] * c - b[None, :] * s
            ends[..., 1] = D * s - a[None, :] * s + b[None, :] * c
        else:
            ends[..., 0] = -(S - D) * c - pu[None, :] * s
            ends[..., 1] = -(S - D) * s + pu[None, :] * c
        ends[..., 2] = pv[:, None]
        out[n] = segment_integrals(ells, src, ends)
    return out


def curved_to_flat(proj, geom, nu_flat=None):
    """A cylindrical cone stack resampled (bilinearly, zero outside) onto the flat detector at the
    same distance S that the same rays cross: flat pixel (u, v) mm is the cylinder's point at arc
    S atan(u / S) and height v S / sqrt(S^2 + u^2).  Returns (flat geometry, flat stack); the flat
    detector has the cylinder's pitch at its centre and covers its fan (nu_flat pixels)."""
    S = geom["source_detector_mm"]
    det = geom["detector"]
    nu, nv, du, dv = det["nu"], det["nv"], det["du_mm"], det["dv_mm"]
    ou, ov = det.get("offset_u_mm", 0.0), det.get("offset_v_mm", 0.0)
    if nu_flat is None:
        half = max(abs(-(nu - 1) / 2.0 * du + ou), abs((nu - 1) / 2.0 * du + ou)) / S
        nu_flat = int(math.ceil(2 * S * math.tan(half) / du)) + 1
    flat = cone_geometry(geom["source_isocenter_mm"], S, geom["angles_deg"], nu_flat, nv, du, dv, 0.0, ov)
    uf = (np.arange(nu_flat) - (nu_flat - 1) / 2.0) * du
    vf = (np.arange(nv) - (nv - 1) / 2.0) * dv + ov
    arc = S * np.arctan(uf / S)
    height = vf[:, None] * S / np.sqrt(S * S + uf[None, :] ** 2)
    iu = np.broadcast_to((arc - ou) / du + (nu - 1) / 2.0, (nv, nu_flat))
    iv = (height - ov) / dv + (nv - 1) / 2.0
    i0, j0 = np.floor(iu).astype(int), np.floor(iv).astype(int)
    fu, fv = iu - i0, iv - j0
    out = np.zeros((proj.shape[0], nv, nu_flat), np.float32)
    for di, wu in ((0, 1 - fu), (1, fu)):
        for dj, wv in ((0, 1 - fv), (1, fv)):
            i, j = i0 + di, j0 + dj
            ok = (i >= 0) & (i < nu) & (j >= 0) & (j < nv)
            w = np.where(ok, wu * wv, 0.0)
            out += (w[None] * proj[:, np.clip(j, 0, nv - 1), np.clip(i, 0, nu - 1)]).astype(np.float32)
    return flat, out


def project_fan(ells, geom, vol):
    """recond's fan projections [slice][view][u] (float32): the cone formulas in each plane z = z(iz)."""
    D, S = geom["source_isocenter_mm"], geom["source_detector_mm"]
    det = geom["detector"]
    nu, du, ou = det["nu"], det["du_mm"], det.get("offset_u_mm", 0.0)
    ang = geom["angles_deg"]
    zs = voxel_axes(vol)[2]
    pu = (np.arange(nu) - (nu - 1) / 2.0) * du + ou
    out = np.empty((len(zs), len(ang), nu), np.float32)
    for iz, z in enumerate(zs):
        for k, a in enumerate(ang):
            th = math.radians(a)
            c, s = math.cos(th), math.sin(th)
            src = np.array([D * c, D * s, z])
            ends = np.empty((nu, 3))
            ends[:, 0] = -(S - D) * c - pu * s
            ends[:, 1] = -(S - D) * s + pu * c
            ends[:, 2] = z
            out[iz, k] = segment_integrals(ells, src, ends)
    return out


def project_parallel(ells, geom, vol, reach=1.0e4):
    """recond's parallel projections [slice][view][u] (float32): in each plane z = z(iz), bin i is
    the line through ((i − (nu−1)/2)·du + offset_u)·e_u along (cos θ, sin θ) (the whole line)."""
    det = geom["detector"]
    nu, du, ou = det["nu"], det["du_mm"], det.get("offset_u_mm", 0.0)
    zs = voxel_axes(vol)[2]
    pu = (np.arange(nu) - (nu - 1) / 2.0) * du + ou
    out = np.empty((len(zs), len(geom["angles_deg"]), nu), np.float32)
    for iz, z in enumerate(zs):
        for k, a in enumerate(geom["angles_deg"]):
            th = math.radians(a)
            c, s = math.cos(th), math.sin(th)
            p = np.stack([-pu * s, pu * c, np.full(nu, z)], axis=1)
            n = np.array([c, s, 0.0])
            out[iz, k] = segment_integrals(ells, p + reach * n, p - reach * n)
    return out


def voxelise(ells, vol, sub=2, planar=False):
    """The phantom on the volume grid [z][y][x] (float32), each voxel the mean of sub^3 samples
    (sub^2 in the slice plane when planar: a fan slice is the plane z = z(iz))."""
    xs, ys, zs = voxel_axes(vol)
    v = vol["voxel_mm"] if isinstance(vol["voxel_mm"], list) else [vol["voxel_mm"]] * 3
    off = (np.arange(sub) + 0.5) / sub - 0.5
    offz = np.zeros(1) if planar else off
    out = np.zeros((len(zs), len(ys), len(xs)), np.float32)
    X = (xs[None, :, None] + off[None, None, :] * v[0]).reshape(1, -1)  # [1][x*sub]
    Y = (ys[:, None] + off[None, :] * v[1]).reshape(-1, 1)              # [y*sub][1]
    for (c, a, phi, mu) in ells:
        cs, sn = math.cos(math.radians(phi)), math.sin(math.radians(phi))
        ext = math.hypot(a[0], a[1]) + max(v)
        xsel = np.abs(X[0] - c[0]) <= ext
        ysel = np.abs(Y[:, 0] - c[1]) <= ext
        if not xsel.any() or not ysel.any():
            continue
        Xs, Ys = X[:, xsel] - c[0], Y[ysel, :] - c[1]
        u = (cs * Xs + sn * Ys) / a[0]
        w = (-sn * Xs + cs * Ys) / a[1]
        r2xy = u * u + w * w
        for iz, z in enumerate(zs):
            dz = (z + offz * v[2] - c[2]) / a[2]
            if np.min(np.abs(dz)) > 1.0:
                continue
            inside = sum((r2xy + dzz * dzz <= 1.0).astype(np.float32) for dzz in dz)
            full = np.zeros((len(ys) * sub, len(xs) * sub), np.float32)
            full[np.ix_(ysel, xsel)] = inside
            out[iz] += mu * full.reshape(len(ys), sub, len(xs), sub).sum(axis=(1, 3)) / (sub * sub * len(offz))
    return out


def cylinder_mask(vol, r, half_height):
    """recond's rc_mask_cylinder: voxels within r of the z axis through the centre and |dz| <= h."""
    xs, ys, zs = voxel_axes(vol)
    c = vol.get("center_mm", [0.0, 0.0, 0.0])
    rr = (xs[None, None, :] - c[0]) ** 2 + (ys[None, :, None] - c[1]) ** 2
    return (rr <= r * r) & (np.abs(zs[:, None, None] - c[2]) <= half_height)


def rel_error(x, ref, mask):
    """‖x − ref‖ / ‖ref‖ over the mask, in double (recond's rc_metric_rel_error)."""
    a = x[mask].astype(np.float64)
    b = ref[mask].astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


# --- RTK ---------------------------------------------------------------------------------------

def rtk_mapping(geom, vol, angle_sign=1.0, mirror_u=False, swap_xy=False):
    """recond cone geometry and volume -> RTK (ThreeDCircularProjectionGeometry + image layouts).

    RTK (rtk::ThreeDCircularProjectionGeometry, IEC 61217): the rotation axis is RTK's y; at
    gantry angle 0 the source is on +z and the detector's u and v run along +x and +y; the gantry
    angle φ turns the source from +z towards +x, source = SID (sin φ, 0, cos φ).  recond's frame at
    θ = 0 (source on +x, e_u = +y, e_v = +z) is RTK's at φ = 0 under the world relabelling

        (X, Y, Z)_RTK = (y, z, x)_recond          (a cyclic permutation: a rotation, no mirror)

    and recond's θ (turning x towards y about z) is then RTK's φ turning Z towards X about Y, so

        φ = θ,  SID = D,  SDD = S,  projection offsets 0

    with the detector offsets and centring in the projection stack's origin:
    origin = (−(nu−1)/2·du + offset_u, −(nv−1)/2·dv + offset_v, 0), spacing (du, dv, 1); the
    stack itself is recond's [view][v][u] array unchanged (ITK index (u, v, view)).
    The volume: RTK's numpy array is [Z][Y][X] = [x][z][y], i.e. recond's [z][y][x] array
    transposed (2, 0, 1); origin (y0, z0, x0), spacing (vy, vz, vx), with x0 = −(nx−1)/2·vx + cx.

    angle_sign, mirror_u and swap_xy make deliberately wrong mappings for the negative checks.
    Returns a dict: sid, sdd, angles (RTK gantry degrees), proj_origin, proj_spacing, vol_size,
    vol_origin, vol_spacing (ITK order), to_rtk(vol_zyx), from_rtk(arr).
    """
    det = geom["detector"]
    nu, nv, du, dv = det["nu"], det["nv"], det["du_mm"], det["dv_mm"]
    ou, ov = det.get("offset_u_mm", 0.0), det.get("offset_v_mm", 0.0)
    v = vol["voxel_mm"] if isinstance(vol["voxel_mm"], list) else [vol["voxel_mm"]] * 3
    xs, ys, zs = voxel_axes(vol)
    m = {"sid": geom["source_isocenter_mm"], "sdd": geom["source_detector_mm"],
         "angles": [angle_sign * a for a in geom["angles_deg"]],
         "proj_origin": [-(nu - 1) / 2.0 * du + ou, -(nv - 1) / 2.0 * dv + ov, 0.0],
         "proj_spacing": [du, dv, 1.0]}
    if mirror_u:
        m["proj_origin"][0] = (nu - 1) / 2.0 * du - ou
        m["proj_spacing"][0] = du  # the data are mirrored in to_rtk_proj instead
    m["mirror_u"] = mirror_u
    # a cylindrical detector is RTK's with RadiusCylindricalDetector = SDD (u an arc length)
    m["radius"] = m["sdd"] if det.get("shape", "flat") == "curved" else 0.0
    if not swap_xy:
        m["vol_size"] = [vol["ny"], vol["nz"], vol["nx"]]
        m["vol_origin"] = [ys[0], zs[0], xs[0]]
        m["vol_spacing"] = [v[1], v[2], v[0]]
        m["to_rtk"] = lambda a: np.ascontiguousarray(a.transpose(2, 0, 1))
        m["from_rtk"] = lambda a: np.ascontiguousarray(a.transpose(1, 2, 0))
    else:  # wrong on purpose: recond's x and y exchanged
        m["vol_size"] = [vol["nx"], vol["nz"], vol["ny"]]
        m["vol_origin"] = [xs[0], zs[0], ys[0]]
        m["vol_spacing"] = [v[0], v[2], v[1]]
        m["to_rtk"] = lambda a: np.ascontiguousarray(a.transpose(1, 0, 2))
        m["from_rtk"] = lambda a: np.ascontiguousarray(a.transpose(1, 0, 2))
    return m


def rtk_objects(m):
    """The RTK geometry object of a mapping."""
    from itk import RTK as rtk
    g = rtk.ThreeDCircularProjectionGeometry.New()
    for a in m["angles"]:
        g.AddProjection(m["sid"], m["sdd"], a, 0.0, 0.0)
    if m.get("radius"):
        g.SetRadiusCylindricalDetector(m["radius"])
    return g


def rtk_write_xml(g):
    """RTK's own writer's XML text of the RTK geometry object g (held by the caller for the
    call: the writer keeps a bare pointer to it)."""
    import tempfile
    from itk import RTK as rtk
    with tempfile.NamedTemporaryFile(suffix=".xml", delete=False) as f:
        path = f.name
    try:
        w = rtk.ThreeDCircularProjectionGeometryXMLFileWriter.New()
        w.SetFilename(path)
        w.SetObject(g)
        w.WriteFile()
        with open(path) as f:
            return f.read()
    finally:
        os.unlink(path)


def rtk_project_ellipsoids(m, ells, nviews, nu, nv):
    """RTK's own analytic projections (RayEllipsoidIntersectionImageFilter, one per ellipsoid,
    summed) of the phantom on the mapping's geometry (flat or cylindrical), as recond's
    [view][v][u] stack.  recond's ellipsoid at (x, y, z) with semi-axes (a, b, c) along x, y, z is
    RTK's at (y, z, x) with axes (b, c, a); only axis-aligned ellipsoids (phi 0) are mapped."""
    import itk
    from itk import RTK as rtk
    T = itk.Image[itk.F, 3]
    g = rtk_objects(m)
    acc = rtk_proj_image(m, np.zeros((nviews, nv, nu), np.float32))
    for (cx, cy, cz), (a, b, c), phi, mu in ells:
        if phi != 0:
            raise ValueError("rtk_project_ellipsoids maps axis-aligned ellipsoids only (phi %g)" % phi)
        f = rtk.RayEllipsoidIntersectionImageFilter[T, T].New()
        f.SetInput(acc)
        f.SetGeometry(g)
        f.SetDensity(float(mu))
        f.SetCenter([float(cy), float(cz), float(cx)])
        f.SetAxis([float(b), float(c), float(a)])
        f.Update()
        acc = f.GetOutput()
        acc.DisconnectPipeline()
    out = itk.array_from_image(acc).copy()
    return out[:, :, ::-1] if m.get("mirror_u") else out


def rtk_fdk(m, proj, vol, displaced=True):
    """RTK's FDK (ram-lak, no truncation correction) of recond's stack on the mapping's flat
    geometry, after RTK's DisplacedDetectorImageFilter (Wang's weights; it leaves a centred
    detector alone), as rtkfdk chains them.  Returns (volume [z][y][x], Update() seconds)."""
    import time
    import itk
    from itk import RTK as rtk
    T = itk.Image[itk.F, 3]
    g = rtk_objects(m)
    p = rtk_proj_image(m, proj)
    v0 = rtk_vol_image(m, np.zeros((vol["nz"], vol["ny"], vol["nx"]), np.float32))
    t0 = time.monotonic()
    src = p
    if displaced:
        dd = rtk.DisplacedDetectorImageFilter[T].New()
        dd.SetInput(p)
        dd.SetGeometry(g)
        src = dd.GetOutput()
    f = rtk.FDKConeBeamReconstructionFilter[T].New()
    f.SetInput(0, v0)
    f.SetInput(1, src)
    f.SetGeometry(g)
    f.GetRampFilter().SetTruncationCorrection(0.0)
    f.GetRampFilter().SetHannCutFrequency(0.0)
    f.Update()
    dt = time.monotonic() - t0
    return m["from_rtk"](itk.array_from_image(f.GetOutput())), dt


def cone_matrices(geom):
    """recond's normalised 3x4 matrices of a cone geometry (docs/geometry.md, "The matrices"):
    world mm (x, y, z, 1) -> (u·w, v·w, w), u and v continuous pixel indices."""
    return recond_import.cone_matrices(geom)  # the one implementation, in the Python client


def check_rtk_matrices():
    """rtk_to_recond_matrices of rtk_mapping's geometry (offsets in the stack's origin, and again
    as RTK's ProjectionOffsetX/Y with the origin centred) equals recond's own cone matrices up to
    scale: the axis order, angle and offset rules in one comparison."""
    geom = cone_geometry(300.0, 500.0, [0, 33, 90, 137, 180, 222, 270, 318], 64, 56, 0.7, 0.7,
                         offset_u=2.1, offset_v=-1.4)
    vol = {"nx": 8, "ny": 8, "nz": 8, "voxel_mm": 1.0}
    m = rtk_mapping(geom, vol)
    ours = cone_matrices(geom)
    from itk import RTK as rtk
    g2 = rtk.ThreeDCircularProjectionGeometry.New()
    for a in m["angles"]:  # offset_u = origin_u + ProjectionOffsetX + (nu−1)/2·du
        g2.AddProjection(m["sid"], m["sdd"], a, 2.1, -1.4)
    centred = [-(64 - 1) / 2.0 * 0.7, -(56 - 1) / 2.0 * 0.7]
    res = []
    for what, mats in (("offsets in the origin", rtk_to_recond_matrices(rtk_objects(m), m["proj_origin"], m["proj_spacing"])),
                       ("offsets as ProjectionOffsetX/Y", rtk_to_recond_matrices(g2, centred, m["proj_spacing"]))):
        worst = max(float(np.max(np.abs(_unit_w(p) - _unit_w(q))) / np.max(np.abs(_unit_w(q))))
                    for p, q in zip(mats, ours))
        res.append(("rtk matrices (%s) equal recond's cone matrices (max rel. diff %.1e)" % (what, worst), worst < 1e-6, ""))
    wrong = rtk_mapping(geom, vol, angle_sign=-1.0)
    worst = max(float(np.max(np.abs(_unit_w(p) - _unit_w(q))) / np.max(np.abs(_unit_w(q))))
                for p, q in zip(rtk_to_recond_matrices(rtk_objects(wrong), wrong["proj_origin"], wrong["proj_spacing"]), ours))
    res.append(("rtk matrices with the angle sign flipped differ (max rel. diff %.2f > 0.1)" % worst, worst > 0.1, ""))
    return res


def rtk_image(arr, origin, spacing):
    import itk
    img = itk.image_from_array(np.ascontiguousarray(arr, dtype=np.float32))
    img.SetOrigin([float(x) for x in origin])
    img.SetSpacing([float(x) for x in spacing])
    return img


def rtk_proj_image(m, proj):
    """recond's [view][v][u] stack as RTK's projection image."""
    p = proj[:, :, ::-1] if m.get("mirror_u") else proj
    return rtk_image(p, m["proj_origin"], m["proj_spacing"])


def rtk_vol_image(m, vol_zyx):
    return rtk_image(m["to_rtk"](vol_zyx), m["vol_origin"], m["vol_spacing"])


def rtk_forward(m, vol_zyx, nviews, nu, nv):
    """RTK's Joseph forward projection of a recond volume, as recond's [view][v][u] array."""
    import itk
    from itk import RTK as rtk
    T = itk.Image[itk.F, 3]
    zero = rtk_proj_image(m, np.zeros((nviews, nv, nu), np.float32))
    fp = rtk.JosephForwardProjectionImageFilter[T, T].New()
    fp.SetInput(0, zero)
    fp.SetInput(1, rtk_vol_image(m, vol_zyx))
    fp.SetGeometry(rtk_objects(m))
    fp.Update()
    out = itk.array_from_image(fp.GetOutput()).copy()
    return out[:, :, ::-1] if m.get("mirror_u") else out


def _profile_error(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _centroid_shift(a, b):
    """Largest distance in pixels between the centroids of a and b over the views (u, and v for
    a cone stack): where the object lands, independent of how sharply each projector draws it."""
    worst = 0.0
    for k in range(a.shape[0]):
        for axis in range(a[k].ndim):
            w = np.arange(a[k].shape[axis])
            sa = a[k].sum(axis=tuple(i for i in range(a[k].ndim) if i != axis))
            sb = b[k].sum(axis=tuple(i for i in range(b[k].ndim) if i != axis))
            worst = max(worst, abs((sa * w).sum() / sa.sum() - (sb * w).sum() / sb.sum()))
    return worst


def check_rtk_mapping(tol=0.1, px=0.25):
    """Off-centre object, 8 views over the circle, detector offsets: RTK's Joseph projection of the
    voxelised object through rtk_mapping() against recond's analytic projections.  Returns
    [(name, ok, detail)]; the wrong mappings must differ by more than 5x the tolerance.
    (The rel. L2 left by the right mapping is the voxelisation: sharp edges drawn by 0.5 mm voxels.)"""
    vol = {"nx": 80, "ny": 72, "nz": 64, "voxel_mm": [0.5, 0.5, 0.5]}
    geom = cone_geometry(300.0, 500.0, [0, 33, 90, 137, 180, 222, 270, 318], 64, 56, 0.7, 0.7,
                         offset_u=2.1, offset_v=-1.4)
    ells = test_object()
    ref = project_cone(ells, geom)
    x = voxelise(ells, vol, sub=4)
    res = []
    fp = rtk_forward(rtk_mapping(geom, vol), x, 8, 64, 56)
    e, c = _profile_error(fp, ref), _centroid_shift(fp, ref)
    res.append(("rtk mapping: Joseph projections of the mapped volume match recond's analytic ones "
                "(rel. L2 %.4f < %.2f, centroids within %.3f < %.2f px)" % (e, tol, c, px), bool(e < tol and c < px), ""))
    for what, kw in (("angle sign flipped", {"angle_sign": -1.0}), ("u mirrored", {"mirror_u": True}),
                     ("x and y swapped", {"swap_xy": True})):
        ew = _profile_error(rtk_forward(rtk_mapping(geom, vol, **kw), x, 8, 64, 56), ref)
        res.append(("rtk mapping: with the %s the projections differ (rel. L2 %.3f > %.2f)" % (what, ew, 5 * tol),
                    ew > 5 * tol, ""))
    return res


# --- ASTRA -------------------------------------------------------------------------------------

def _astra_slice(vol, m, swap_xy=False):
    """The vol_geom part of an ASTRA mapping: ASTRA's image rows run from +y (row 0) down to −y and
    its columns from −x to +x, so recond's slice [y][x] goes in flipped in y."""
    v = vol["voxel_mm"] if isinstance(vol["voxel_mm"], list) else [vol["voxel_mm"]] * 3
    xs, ys, _zs = voxel_axes(vol)
    m.update(window=(xs[0] - v[0] / 2, xs[-1] + v[0] / 2, ys[0] - v[1] / 2, ys[-1] + v[1] / 2),
             rows=vol["ny"], cols=vol["nx"])
    if swap_xy:  # wrong on purpose: recond's x and y exchanged
        m["to_astra"] = lambda sl: np.ascontiguousarray(sl.T[::-1, :])
        m["from_astra"] = lambda a: np.ascontiguousarray(a[::-1, :].T)
    else:
        m["to_astra"] = lambda sl: np.ascontiguousarray(sl[::-1, :])
        m["from_astra"] = lambda a: np.ascontiguousarray(a[::-1, :])
    return m


def astra_fan_mapping(geom, vol, angle_sign=1.0, mirror_u=False, swap_xy=False):
    """recond fan geometry and one slice -> ASTRA 2-D (fanflat_vec and a vol_geom).

    ASTRA's fanflat_vec gives per view the source (srcX, srcY), the detector centre (dX, dY) and
    the vector between neighbouring bins (uX, uY); pixel i is at d + (i − (nu−1)/2)·u.  ASTRA's 2-D
    world is recond's slice plane with the same x and y, so

        src = D (cos θ, sin θ),   d = −(S − D)(cos θ, sin θ) + offset_u (−sin θ, cos θ),
        u = du (−sin θ, cos θ)

    (the plain `fanflat` with angle a = θ + 90°, source_origin D, origin_det S − D, bin width du
    is the same geometry when offset_u = 0).  ASTRA's image rows run from +y (row 0) to −y, so
    recond's slice [y][x] is flipped in y: astra = slice[::-1, :]; the vol_geom has
    ny rows, nx columns and the window x ∈ [x0 − vx/2, x1 + vx/2], y likewise (mm units, so
    projections are in the same units as recond's).  Sinograms are [view][u] in both.
    """
    D, S = geom["source_isocenter_mm"], geom["source_detector_mm"]
    det = geom["detector"]
    du, ou = det["du_mm"], det.get("offset_u_mm", 0.0)
    vecs = []
    for a in geom["angles_deg"]:
        th = math.radians(angle_sign * a)
        c, s = math.cos(th), math.sin(th)
        uu = -du if mirror_u else du
        vecs.append([D * c, D * s, -(S - D) * c - ou * s, -(S - D) * s + ou * c, -s * uu, c * uu])
    return _astra_slice(vol, {"type": "fanflat_vec", "vectors": np.array(vecs), "nu": det["nu"]}, swap_xy)


def astra_parallel_mapping(geom, vol, angle_sign=1.0, mirror_u=False, swap_xy=False):
    """recond parallel geometry and one slice -> ASTRA 2-D (parallel_vec and a vol_geom).

    ASTRA's parallel_vec gives per view the ray direction (rayX, rayY), the detector centre (dX, dY)
    and the vector between neighbouring bins (uX, uY); bin i is the line through
    d + (i − (nu−1)/2)·u along the ray.  recond's parallel view θ: rays along −(cos θ, sin θ),
    bin i at ((i − (nu−1)/2)·du + offset_u)·e_u with e_u = (−sin θ, cos θ), so

        ray = −(cos θ, sin θ),   d = offset_u (−sin θ, cos θ),   u = du (−sin θ, cos θ)

    (the plain `parallel` with angle a = θ + 90° and bin width du is the same set of lines when
    offset_u = 0: its ray (sin a, −cos a) = (cos θ, sin θ) runs the other way, which no line integral
    sees).  The image and the sinogram are laid out as in astra_fan_mapping.
    """
    det = geom["detector"]
    du, ou = det["du_mm"], det.get("offset_u_mm", 0.0)
    vecs = []
    for a in geom["angles_deg"]:
        th = math.radians(angle_sign * a)
        c, s = math.cos(th), math.sin(th)
        uu = -du if mirror_u else du
        vecs.append([-c, -s, -ou * s, ou * c, -s * uu, c * uu])
    return _astra_slice(vol, {"type": "parallel_vec", "vectors": np.array(vecs), "nu": det["nu"]}, swap_xy)


def check_astra_cone_mapping():
    """ASTRA's 3-D `cone` and `cone_vec` against recond: astra_cone_vectors equals astra.geom_2vec
    (ASTRA's own rule); the `cone` ASTRA describes (through astra_cone_to_recond) has recond's cone
    matrices equal to the matrices of its geom_2vec `cone_vec`, and to those of the same geometry
    shifted by astra.geom_postalignment when recond's offsets carry the shift; the mapping with the
    angle sign flipped differs.  Geometry only: ASTRA's 3-D projectors need CUDA."""
    import astra
    angles = np.radians([0.0, 33.0, 90.0, 137.0, 180.0, 222.0, 270.0, 318.0])
    pg = astra.create_proj_geom("cone", 0.7, 0.8, 56, 64, angles, 300.0, 200.0)
    vg = astra.create_vol_geom(40, 48, 32)
    res = []
    ours, theirs = astra_cone_vectors(pg), np.asarray(astra.geom_2vec(pg)["Vectors"])
    e = float(np.max(np.abs(ours - theirs)))
    res.append(("astra cone: astra_cone_vectors equals astra.geom_2vec (max diff %.1e)" % e, e < 1e-9, ""))
    cone = astra_cone_to_recond(pg, vg, unit_mm=0.5)["geometry"]
    ref = cone_matrices(cone)

    def worst(mats, want):
        return max(float(np.max(np.abs(_unit_w(p) - _unit_w(q))) / np.max(np.abs(_unit_w(q)))) for p, q in zip(mats, want))

    w = worst([np.array(m).reshape(3, 4) for m in
               astra_cone_to_recond(astra.geom_2vec(pg), vg, unit_mm=0.5)["geometry"]["matrices"]], ref)
    res.append(("astra cone: recond's cone of `cone` has the matrices of its cone_vec (max rel. diff %.1e)" % w,
                w < 1e-9, ""))
    shifted = astra.geom_postalignment(pg, (2.5, -1.5))
    cone_off = dict(cone, detector=dict(cone["detector"], offset_u_mm=2.5 * 0.7 * 0.5, offset_v_mm=-1.5 * 0.8 * 0.5))
    w = worst([np.array(m).reshape(3, 4) for m in astra_cone_to_recond(shifted, vg, unit_mm=0.5)["geometry"]["matrices"]],
              cone_matrices(cone_off))
    res.append(("astra cone: a detector shifted by geom_postalignment (2.5, -1.5) pixels is recond's offsets "
                "(max rel. diff %.1e)" % w, w < 1e-9, ""))
    wrong = cone_matrices(astra_cone_to_recond(pg, vg, unit_mm=0.5, angle_sign=-1.0)["geometry"])
    w = worst(wrong, ref)
    res.append(("astra cone: with the angle sign flipped the matrices differ (max rel. diff %.2f > 0.1)" % w, w > 0.1, ""))
    v = astra_cone_to_recond(pg, vg, unit_mm=0.5)["volume"]
    ok = v["nx"] == 48 and v["ny"] == 40 and v["nz"] == 32 and v["voxel_mm"] == [0.5, 0.5, 0.5]
    res.append(("astra cone: vol_geom(40 rows, 48 columns, 32 slices) is nx 48, ny 40, nz 32 of 0.5 mm (%s)" % v, ok, ""))
    return res


def astra_geoms(m):
    import astra
    vg = astra.create_vol_geom(m["rows"], m["cols"], *m["window"])
    pg = astra.create_proj_geom(m.get("type", "fanflat_vec"), m["nu"], m["vectors"])
    return vg, pg


def astra_forward(m, slice_yx):
    """ASTRA's FP_CPU (line_fanflat, or line for parallel) of one recond slice, as a [view][u] sinogram."""
    import astra
    vg, pg = astra_geoms(m)
    pid = astra.create_projector("line_fanflat" if m.get("type", "fanflat_vec") == "fanflat_vec" else "line", pg, vg)
    try:
        _sid, sino = astra.create_sino(m["to_astra"](slice_yx).astype(np.float32), pid)
    finally:
        astra.projector.delete(pid)
        astra.data2d.clear()
    return sino


def check_astra_mapping(tol=0.1, px=0.25):
    """The ASTRA counterpart of check_rtk_mapping: one fan slice through the off-centre object."""
    vol = {"nx": 64, "ny": 64, "nz": 1, "voxel_mm": [0.5, 0.5, 0.5], "center_mm": [0.0, 0.0, 4.0]}
    geom = fan_geometry(300.0, 500.0, [0, 33, 90, 137, 180, 222, 270, 318], 96, 0.7, 1, offset_u=2.1)
    ells = test_object()
    ref = project_fan(ells, geom, vol)[0]
    x = voxelise(ells, vol, sub=4, planar=True)[0]
    res = []
    fp = astra_forward(astra_fan_mapping(geom, vol), x)
    e, c = _profile_error(fp, ref), _centroid_shift(fp, ref)
    res.append(("astra mapping: FP_CPU of the mapped slice matches recond's analytic fan projections "
                "(rel. L2 %.4f < %.2f, centroids within %.3f < %.2f px)" % (e, tol, c, px), bool(e < tol and c < px), ""))
    for what, kw in (("angle sign flipped", {"angle_sign": -1.0}), ("u mirrored", {"mirror_u": True}),
                     ("x and y swapped", {"swap_xy": True})):
        ew = _profile_error(astra_forward(astra_fan_mapping(geom, vol, **kw), x), ref)
        res.append(("astra mapping: with the %s the projections differ (rel. L2 %.3f > %.2f)" % (what, ew, 5 * tol),
                    ew > 5 * tol, ""))
    return res


def check_astra_parallel_mapping(tol=0.1, px=0.25):
    """check_astra_mapping for the parallel geometry (parallel_vec, FP_CPU `line`)."""
    vol = {"nx": 64, "ny": 64, "nz": 1, "voxel_mm": [0.5, 0.5, 0.5], "center_mm": [0.0, 0.0, 4.0]}
    geom = parallel_geometry([0, 33, 90, 137, 180, 222, 270, 318], 96, 0.7, 1, offset_u=2.1)
    ells = test_object()
    ref = project_parallel(ells, geom, vol)[0]
    x = voxelise(ells, vol, sub=4, planar=True)[0]
    res = []
    fp = astra_forward(astra_parallel_mapping(geom, vol), x)
    e, c = _profile_error(fp, ref), _centroid_shift(fp, ref)
    res.append(("astra parallel mapping: FP_CPU of the mapped slice matches recond's analytic parallel "
                "projections (rel. L2 %.4f < %.2f, centroids within %.3f < %.2f px)" % (e, tol, c, px),
                bool(e < tol and c < px), ""))
    for what, kw in (("angle sign flipped", {"angle_sign": -1.0}), ("u mirrored", {"mirror_u": True}),
                     ("x and y swapped", {"swap_xy": True})):
        ew = _profile_error(astra_forward(astra_parallel_mapping(geom, vol, **kw), x), ref)
        res.append(("astra parallel mapping: with the %s the projections differ (rel. L2 %.3f > %.2f)"
                    % (what, ew, 5 * tol), ew > 5 * tol, ""))
    return res


def check_phantom_module():
    """This module's analytic projector against tests/integration/phantom.py (pure Python, the
    integration tests' reference) on its default phantom: the same formulas, two implementations."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "tests", "integration"))
    import phantom
    spec = phantom.cone_spec(n=16, views=6, nu=20, nv=18, du=2.0, dv=2.0)
    g = spec["geometry"]
    geom = cone_geometry(g["source_isocenter_mm"], g["source_detector_mm"],
                         [60.0 * k for k in range(6)], 20, 18, 2.0, 2.0)
    ells = [(c, a, 0.0, mu) for c, a, mu in phantom.DEFAULT_PHANTOM]
    ours = project_cone(ells, geom, views=[1, 4])
    theirs = np.concatenate([np.frombuffer(phantom.project_view(spec, k), np.float32).reshape(1, 18, 20)
                             for k in (1, 4)])
    e = float(np.max(np.abs(ours - theirs)))
    return [("phantom: numpy projector equals tests/integration/phantom.py (max diff %.2g)" % e, e < 1e-5, "")]
