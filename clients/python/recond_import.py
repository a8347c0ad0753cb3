"""recond_import: other tools' geometries as recond job specs (docs/scanner.md, docs/geometry.md).

Needs numpy; rtk_to_recond_matrices reads an itk-rtk geometry object (itk imported there only).

  astra_to_recond(proj_geom, vol_geom, unit_mm)       ASTRA 2-D fanflat(_vec), parallel(_vec) -> fan, parallel
  astra_cone_to_recond(proj_geom, vol_geom, unit_mm)  ASTRA 3-D cone -> cone, cone_vec -> matrices
  astra_vectors(proj_geom), astra_cone_vectors(...)   ASTRA's per-view vectors (as astra.geom_2vec)
  astra_cone_matrices(proj_geom, unit_mm)             recond's 3x4 matrices of an ASTRA 3-D geometry
  rtk_to_recond_matrices(g, origin, spacing)          an RTK geometry object -> recond matrices
  cone_matrices(geometry)                             recond's own 3x4 matrices of a cone geometry

RTK's geometry XML needs no helper: the daemon reads it ("geometry": {"type": "rtk", ...}, docs/api.md).
Each mapping is tested against the tool itself (tests/integration/test_peers_mapping.py,
test_astra_import.py, test_rtk_xml.py).
"""

import math

import numpy as np


def cone_matrices(geom):
    """recond's normalised 3x4 matrices of a cone geometry (docs/geometry.md, "The matrices"):
    world mm (x, y, z, 1) -> (u·w, v·w, w), u and v continuous pixel indices."""
    D, S = geom["source_isocenter_mm"], geom["source_detector_mm"]
    det = geom["detector"]
    cu = (det["nu"] - 1) / 2.0 - det.get("offset_u_mm", 0.0) / det["du_mm"]
    cv = (det["nv"] - 1) / 2.0 - det.get("offset_v_mm", 0.0) / det["dv_mm"]
    out = []
    for a in geom["angles_deg"]:
        th = math.radians(a)
        n = np.array([-math.cos(th), -math.sin(th), 0.0])
        eu, ev, src = np.array([-math.sin(th), math.cos(th), 0.0]), np.array([0.0, 0.0, 1.0]), -D * n
        rows = [S / det["du_mm"] * eu + cu * n, S / det["dv_mm"] * ev + cv * n, n]
        out.append(np.array([list(r) + [-r @ src] for r in rows]))
    return out


def rtk_to_recond_matrices(g, proj_origin, proj_spacing):
    """Any RTK ThreeDCircularProjectionGeometry (source offsets, out-of-plane and in-plane angles
    included) -> recond `matrices`, one 3x4 per view: RTK's matrix M_k maps RTK world (X, Y, Z, 1)
    to the detector's physical coordinates (the projection image's origin + index · spacing), so

        P_k = K · M_k · Π,   K = [[1/du, 0, −o_u/du], [0, 1/dv, −o_v/dv], [0, 0, 1]],
        Π: (x, y, z, 1)_recond -> (X, Y, Z, 1)_RTK = (y, z, x, 1)

    with (o_u, o_v) = proj_origin[:2] and (du, dv) = proj_spacing[:2] of RTK's projection stack,
    whose [view][v][u] array is recond's stack as is.  Returns a list of numpy 3x4 arrays (recond
    rescales each: docs/geometry.md)."""
    import itk
    K = np.array([[1.0 / proj_spacing[0], 0.0, -proj_origin[0] / proj_spacing[0]],
                  [0.0, 1.0 / proj_spacing[1], -proj_origin[1] / proj_spacing[1]], [0.0, 0.0, 1.0]])
    Pi = np.array([[0.0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1]])
    return [K @ np.array(itk.array_from_vnl_matrix(g.GetMatrix(k).GetVnlMatrix().as_matrix())) @ Pi
            for k in range(len(g.GetGantryAngles()))]


def _unit_w(p):
    """A 3x4 projection matrix scaled so that its third row has unit norm and w > 0 at the origin."""
    return p / (np.linalg.norm(p[2, :3]) * np.sign(p[2, 3]))


def astra_vectors(proj_geom):
    """An ASTRA 2-D projection geometry's per-view vectors, [views][6]: fanflat_vec and
    parallel_vec as they are; fanflat and parallel (angles a_k in radians, bin width w, and for
    fanflat the distances so = DistanceOriginSource, od = DistanceOriginDetector) by ASTRA's own
    rules (its geom_2vec):

        fanflat:  src = so (sin a, −cos a),  d = od (−sin a, cos a),  u = w (cos a, sin a)
        parallel: ray = (sin a, −cos a),     d = (0, 0),              u = w (cos a, sin a)
    """
    t = proj_geom["type"]
    if t in ("fanflat_vec", "parallel_vec"):
        return np.asarray(proj_geom["Vectors"], dtype=float)
    a = np.asarray(proj_geom["ProjectionAngles"], dtype=float)
    w = float(proj_geom["DetectorWidth"])
    sa, ca = np.sin(a), np.cos(a)
    if t == "fanflat":
        so, od = float(proj_geom["DistanceOriginSource"]), float(proj_geom["DistanceOriginDetector"])
        return np.stack([so * sa, -so * ca, -od * sa, od * ca, w * ca, w * sa], axis=1)
    if t == "parallel":
        z = np.zeros_like(a)
        return np.stack([sa, -ca, z, z, w * ca, w * sa], axis=1)
    raise ValueError("ASTRA geometry type %r: recond imports fanflat, fanflat_vec, parallel and parallel_vec" % t)


def _same(values, what, rel=1e-6):
    """The one value a recond geometry takes for every view; ValueError when the views differ."""
    v = np.asarray(values, dtype=float)
    scale = max(1.0, float(np.max(np.abs(v))))
    if float(np.max(v) - np.min(v)) > rel * scale:
        raise ValueError("%s differs between views (%.9g .. %.9g): recond's %s geometry has one"
                         % (what, float(np.min(v)), float(np.max(v)), what.split()[0]))
    return float(np.mean(v))


def astra_to_recond(proj_geom, vol_geom, unit_mm=1.0, slice_mm=None, angle_sign=1.0, mirror_u=False):
    """ASTRA 2-D geometry -> recond job spec parts (the reverse of astra_fan_mapping and
    astra_parallel_mapping).  proj_geom is an ASTRA `fanflat`, `fanflat_vec`, `parallel` or
    `parallel_vec` projection geometry (the dicts of astra.create_proj_geom), vol_geom an
    astra.create_vol_geom dict; unit_mm is the length of ASTRA's unit in mm (ASTRA works in the
    units of its volume window: with astra.create_vol_geom(rows, cols) one pixel), slice_mm the z
    spacing (default: the pixel width).  Per view, with the vectors of astra_vectors:

      fanflat(_vec):  θ = atan2(srcY, srcX),  n = (cos θ, sin θ),  e_u = (−sin θ, cos θ)
                      D = |src|,  S = D − d·n,  du = |u|,  offset_u = d·e_u     (× unit_mm)
                      u must be parallel to e_u (a detector square to the central ray); when
                      u = −du·e_u (ASTRA's bins run the other way) every sinogram row is reversed
      parallel(_vec): e_u = u/|u|,  θ = atan2(−e_ux, e_uy),  du = |u|,  offset_u = d·e_u
                      the ray must be square to u (its sign does not matter)

    For the plain fanflat and parallel geometries this is θ = a − 90° (degrees), D =
    source_origin, S = source_origin + origin_det, offset 0.  D, S, du and offset_u must be the
    same for every view (ValueError otherwise: recond's geometry has one of each); the angles may
    be any list.  The volume: GridColCount = nx, GridRowCount = ny, voxel (window width / nx,
    window height / ny) · unit_mm, centre the window's centre · unit_mm; ASTRA's image row 0 is
    +y, so a recond slice [y][x] is the ASTRA image flipped in y.

    Values: an ASTRA sinogram is the line integral in its units, the same number in mm × 1/mm,
    so it is uploaded unchanged and recond's volume (1/mm) is ASTRA's image / unit_mm.

    Returns a dict: geometry and volume (recond spec parts, one slice: add "slices" > 1 and nz for
    a stack of equal slices), to_recond(sino) (an ASTRA sinogram [view][u], or a list of them one
    per slice, as recond's float32 [slice][view][u] stack), from_recond(vol) (recond's [z][y][x]
    volume as ASTRA images [slice][row][col] in ASTRA's units).  angle_sign and mirror_u make
    deliberately wrong mappings for the negative checks.
    """
    t = proj_geom["type"]
    V = astra_vectors(proj_geom)
    nu = int(proj_geom["DetectorCount"])
    flip = False
    if t.startswith("fanflat"):
        th = np.arctan2(V[:, 1], V[:, 0])
        n = np.stack([np.cos(th), np.sin(th)], axis=1)
        e = np.stack([-np.sin(th), np.cos(th)], axis=1)
        du = np.hypot(V[:, 4], V[:, 5])
        along = np.einsum("ij,ij->i", V[:, 4:6], e) / du
        if np.any(np.abs(np.abs(along) - 1.0) > 1e-6):
            raise ValueError("fanflat_vec: a detector not square to the central ray (u · e_u / |u| = %.6g): "
                             "recond's fan detector is" % float(along[np.argmax(np.abs(np.abs(along) - 1))]))
        if np.any(along > 0) and np.any(along < 0):
            raise ValueError("fanflat_vec: the bins run one way in some views and the other way in others")
        flip = bool(along[0] < 0)
        D = _same(np.hypot(V[:, 0], V[:, 1]), "fan source distance")
        S = D + _same(-np.einsum("ij,ij->i", V[:, 2:4], n), "fan detector distance")
        geometry = {"type": "fan", "source_isocenter_mm": D * unit_mm, "source_detector_mm": S * unit_mm}
    elif t.startswith("parallel"):
        du = np.hypot(V[:, 4], V[:, 5])
        e = V[:, 4:6] / du[:, None]
        th = np.arctan2(-e[:, 0], e[:, 1])
        ray = V[:, 0:2] / np.hypot(V[:, 0], V[:, 1])[:, None]
        if np.any(np.abs(np.einsum("ij,ij->i", ray, e)) > 1e-6):
            raise ValueError("parallel_vec: rays not square to the detector: recond's parallel rays are")
        geometry = {"type": "parallel"}
    else:
        raise ValueError("ASTRA geometry type %r: recond imports fanflat, fanflat_vec, parallel and parallel_vec" % t)
    offset = _same(np.einsum("ij,ij->i", V[:, 2:4], e), "detector offset")
    geometry.update(slices=1, angles_deg=[float(angle_sign * math.degrees(x)) for x in th],
                    detector={"nu": nu, "du_mm": _same(du, "detector bin width") * unit_mm,
                              "offset_u_mm": offset * unit_mm})
    o = vol_geom["option"]
    nx, ny = int(vol_geom["GridColCount"]), int(vol_geom["GridRowCount"])
    vx = (o["WindowMaxX"] - o["WindowMinX"]) / nx * unit_mm
    vy = (o["WindowMaxY"] - o["WindowMinY"]) / ny * unit_mm
    volume = {"nx": nx, "ny": ny, "nz": 1, "voxel_mm": [vx, vy, slice_mm or vx],
              "center_mm": [(o["WindowMaxX"] + o["WindowMinX"]) / 2 * unit_mm,
                            (o["WindowMaxY"] + o["WindowMinY"]) / 2 * unit_mm, 0.0]}
    reverse = flip != mirror_u

    def to_recond(sino):
        st = np.asarray(sino, dtype=np.float32)
        st = st[None] if st.ndim == 2 else st
        return np.ascontiguousarray(st[:, :, ::-1] if reverse else st)

    def from_recond(vol):
        return np.ascontiguousarray(np.asarray(vol)[:, ::-1, :] * unit_mm)

    return {"geometry": geometry, "volume": volume, "to_recond": to_recond, "from_recond": from_recond}


def astra_cone_vectors(proj_geom):
    """An ASTRA 3-D cone geometry's per-view vectors, [views][12] (src, d, u, v): `cone_vec` as it
    is; `cone` (angles a_k in radians, pixel spacings wx = DetectorSpacingX (columns), wy =
    DetectorSpacingY (rows), so = DistanceOriginSource, od = DistanceOriginDetector) by ASTRA's own
    rule (its geom_2vec):

        src = so (sin a, −cos a, 0),   d = od (−sin a, cos a, 0),
        u = wx (cos a, sin a, 0),      v = (0, 0, wy)

    In every `cone_vec` the pixel of row r and column c is centred at
    d + (c − (ncols−1)/2)·u + (r − (nrows−1)/2)·v (u: from pixel (0, 0) to (0, 1), v: to (1, 0))."""
    t = proj_geom["type"]
    if t == "cone_vec":
        return np.asarray(proj_geom["Vectors"], dtype=float)
    if t != "cone":
        raise ValueError("ASTRA geometry type %r: recond imports cone and cone_vec (3-D)" % t)
    a = np.asarray(proj_geom["ProjectionAngles"], dtype=float)
    so, od = float(proj_geom["DistanceOriginSource"]), float(proj_geom["DistanceOriginDetector"])
    wx, wy = float(proj_geom["DetectorSpacingX"]), float(proj_geom["DetectorSpacingY"])
    sa, ca, z = np.sin(a), np.cos(a), np.zeros_like(a)
    return np.stack([so * sa, -so * ca, z, -od * sa, od * ca, z, wx * ca, wx * sa, z, z, z, z + wy], axis=1)


def astra_cone_matrices(proj_geom, unit_mm=1.0):
    """recond's 3x4 view matrices (world mm -> pixel indices (column, row)) of any ASTRA cone or
    cone_vec geometry: with B = [u | v | d − s − cu·u − cv·v] (columns; cu, cv the centre pixel
    indices) a point X lies on the ray through pixel (c, r) when X − s = t·B·(c, r, 1), so
    P = [B⁻¹ | −B⁻¹ s] (lengths × unit_mm)."""
    V = astra_cone_vectors(proj_geom) * unit_mm
    cu, cv = (proj_geom["DetectorColCount"] - 1) / 2.0, (proj_geom["DetectorRowCount"] - 1) / 2.0
    out = []
    for w in V:
        s, d, u, v = w[0:3], w[3:6], w[6:9], w[9:12]
        Bi = np.linalg.inv(np.stack([u, v, d - s - cu * u - cv * v], axis=1))
        out.append(np.concatenate([Bi, (-Bi @ s)[:, None]], axis=1))
    return out


def astra_cone_to_recond(proj_geom, vol_geom, unit_mm=1.0, angle_sign=1.0):
    """ASTRA 3-D geometry -> recond job spec parts.  `cone` becomes a recond `cone` geometry,
    `cone_vec` a `matrices` one (astra_cone_matrices; any source and detector placement):

      cone:  θ = a − 90° (degrees; a turns x towards y as θ does),  D = so,  S = so + od,
             du = DetectorSpacingX,  dv = DetectorSpacingY,  offsets 0        (lengths × unit_mm)

    (the same geometry as its geom_2vec: src = D (cos θ, sin θ, 0), u = du e_u, v = dv e_z, which
    check_astra_cone_mapping checks).  Rows: ASTRA's v of `cone` is +z, so detector row r is
    recond's row j = r (the lowest z first); a cone_vec's v may point anywhere, its matrices say
    where.  The projection data ASTRA's data3d holds are [row][angle][column]: to_recond(proj)
    makes recond's [view][row][column] stack of them (values unchanged: line integrals).

    The volume: ASTRA's 3-D vol_geom (GridColCount = nx, GridRowCount = ny, GridSliceCount = nz;
    its window in units) with data [slice][row][column] = [z][y][x], column along x, row along y,
    slice along z, each increasing with its index (ASTRA's 3-D volume, unlike its 2-D image, is
    not flipped in y): voxel = window size / count × unit_mm, centre = window centre × unit_mm,
    and from_recond(vol) is recond's volume × unit_mm in ASTRA's units.  That orientation is
    ASTRA's documented one; it is not checked here against an ASTRA projector (ASTRA's 3-D
    projectors need CUDA).  angle_sign makes a deliberately wrong mapping for the negative check.
    """
    t = proj_geom["type"]
    nu, nv = int(proj_geom["DetectorColCount"]), int(proj_geom["DetectorRowCount"])
    if t == "cone":
        a = np.asarray(proj_geom["ProjectionAngles"], dtype=float)
        so, od = float(proj_geom["DistanceOriginSource"]), float(proj_geom["DistanceOriginDetector"])
        geometry = {"type": "cone", "source_isocenter_mm": so * unit_mm, "source_detector_mm": (so + od) * unit_mm,
                    "angles_deg": [float(angle_sign * (math.degrees(x) - 90.0)) for x in a],
                    "detector": {"nu": nu, "nv": nv, "du_mm": float(proj_geom["DetectorSpacingX"]) * unit_mm,
                                 "dv_mm": float(proj_geom["DetectorSpacingY"]) * unit_mm}}
    elif t == "cone_vec":
        mats = astra_cone_matrices(proj_geom, unit_mm)
        if angle_sign < 0:  # wrong on purpose: the world mirrored in y
            mats = [m @ np.diag([1.0, -1.0, 1.0, 1.0]) for m in mats]
        geometry = {"type": "matrices", "matrices": [[float(x) for x in m.ravel()] for m in mats],
                    "detector": {"nu": nu, "nv": nv}}
    else:
        raise ValueError("ASTRA geometry type %r: recond imports cone and cone_vec (3-D)" % t)
    o = vol_geom["option"]
    n = (int(vol_geom["GridColCount"]), int(vol_geom["GridRowCount"]), int(vol_geom["GridSliceCount"]))
    lo = (o["WindowMinX"], o["WindowMinY"], o["WindowMinZ"])
    hi = (o["WindowMaxX"], o["WindowMaxY"], o["WindowMaxZ"])
    volume = {"nx": n[0], "ny": n[1], "nz": n[2],
              "voxel_mm": [(hi[i] - lo[i]) / n[i] * unit_mm for i in range(3)],
              "center_mm": [(hi[i] + lo[i]) / 2 * unit_mm for i in range(3)]}
    return {"geometry": geometry, "volume": volume,
            "to_recond": lambda proj: np.ascontiguousarray(np.asarray(proj, dtype=np.float32).transpose(1, 0, 2)),
            "from_recond": lambda vol: np.ascontiguousarray(np.asarray(vol) * unit_mm)}
