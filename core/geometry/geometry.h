/*
 * geometry: the scan and volume geometry of a job, reduced to one 3x4
 * projection matrix per view (cone, matrices) or one 2x3 in-plane matrix per
 * view shared by every slice (fan, parallel).  Conventions are exactly those of
 * API.md ("Geometry conventions"); docs/geometry.md restates them with the
 * derivation of the matrices.
 *
 * Invariants of a built rc_geom (read-only after rc_geom_new):
 *  - P maps homogeneous world mm (x, y, z, 1) to (u*w, v*w, w), u and v
 *    continuous pixel indices with pixel centres at integers.
 *  - P is normalised so that its third row is (n, w0) with |n| = 1 and w > 0
 *    in front of the source: w is the depth of a point along the principal
 *    ray in mm.  (Any multiple of P is the same projection; fixing the scale
 *    makes the 1/w^2 weight of paper 002 Eq. 1 and the FDK weight comparable
 *    across geometry types.)
 *  - For fan and parallel, A (2x3) maps in-plane (x, y, 1) to (u*w, w), with
 *    w = depth in mm for fan and w = 1 for parallel; slice iz is the plane
 *    z = (iz - (nz-1)/2)*vz + cz and has the same A.
 *  - For a curved fan, A is the matrix of the flat detector tangent to the
 *    arc at its centre with the same du and offset_u: its second row (the
 *    depth w) is right, its first is NOT the curved pixel index.  Use
 *    rc_geom_plane_u for u and rc_geom_line_u for the line of a pixel
 *    coordinate; code that reads A's first row directly must refuse or
 *    convert a curved detector.
 *
 *  - A curved cone keeps the flat P of the same du and offset_u (its depth
 *    row is right); its pixel indices are rc_geom_cyl_project's, its rays
 *    rc_geom_ray's.  Code that reads P for the pixel index must refuse or
 *    convert a curved cone (the CPU engine's cylinder projectors do).
 *
 * Life cycle: rc_geom_new validates a spec against a volume and limits and
 * builds the matrices; rc_geom_free releases it (NULL is fine).
 */
#ifndef RC_GEOMETRY_H
#define RC_GEOMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "util/rc_error.h"

typedef enum rc_geom_type {
	RC_GEOM_CONE = 0,
	RC_GEOM_MATRICES,
	RC_GEOM_FAN,
	RC_GEOM_PARALLEL,
	RC_GEOM_HELIX, /* a cone whose source and detector rise pitch_mm per turn */
} rc_geom_type;

/* Cone-like: a source and a 2-D detector whose view matrix is the cone's
 * (a helix's is the cone's translated along z by the view's source height,
 * so every projector that reads P reads it unchanged). */
static inline int rc_geom_type_is_cone(rc_geom_type t) { return t == RC_GEOM_CONE || t == RC_GEOM_HELIX; }

/* Volume of nx*ny*nz voxels of size (vx, vy, vz) mm centred at (cx, cy, cz):
 * voxel (ix, iy, iz) sits at ((ix - (nx-1)/2)*vx + cx, ...), stored [iz][iy][ix]. */
typedef struct rc_volume_desc {
	int nx, ny, nz;
	double vx, vy, vz;
	double cx, cy, cz;
} rc_volume_desc;

/* geometry.detector.shape (core/algo/names.c has the words).  A curved
 * detector is an arc of radius S about the source (fan), or a cylinder of
 * radius S about the source with its axis along z (cone, RTK's geometry
 * with RadiusCylindricalDetector = S): du is a pixel's arc length,
 * offset_u an arc length, pixel i at fan angle ((i - (nu-1)/2) du +
 * offset_u) / S from the central ray towards e_u; a cone's rows run along
 * z as on the flat detector, row j at height (j - (nv-1)/2) dv + offset_v
 * on the cylinder. */
typedef enum rc_detector_shape {
	RC_DETECTOR_FLAT = 0,
	RC_DETECTOR_CURVED,
} rc_detector_shape;

/* A curved fan must lie within +-RC_CURVED_MAX_DEG of its central ray
 * (pixel edges, offset included): at 90 degrees a ray runs parallel to the
 * flat tangent detector that the view matrix A describes. */
#define RC_CURVED_MAX_DEG 80.0

/* Detector: nu x nv pixels of du x dv mm, centre shifted by (offset_u,
 * offset_v) mm along (e_u, e_v); flat unless shape says curved (fan, cone).
 * Fan/parallel use nv = 1.  Zero-initialised means flat. */
typedef struct rc_detector_desc {
	int nu, nv;
	double du, dv;
	double offset_u, offset_v;
	rc_detector_shape shape;
} rc_detector_desc;

/* What a client says.  Pointers are borrowed for the duration of rc_geom_new. */
typedef struct rc_geom_spec {
	rc_geom_type type;
	int nviews;
	rc_detector_desc det;
	double source_isocenter_mm; /* cone, fan: D */
	double source_detector_mm;  /* cone, fan: S */
	const double *angles_deg;   /* cone, fan, parallel: nviews angles */
	const double *matrices;     /* matrices: nviews * 12, row-major 3x4 */
	double pitch_mm;            /* helix: z advance per 360 degrees of angle */
	double z_start_mm;          /* helix: source height of view 0 */
} rc_geom_spec;

typedef struct rc_limits {
	uint64_t max_bytes; /* cap on projections + volume bytes; 0 = no cap */
	int part;           /* the volume is part of one that passed the view checks (a rank's
			     * z-slab, docs/cluster.md): views that see none of it are fine */
} rc_limits;

/* Per-view data, precomputed once; what every projector reads. */
typedef struct rc_view {
	double P[12];    /* normalised 3x4 (cone, matrices) */
	double A[6];     /* normalised 2x3 (fan, parallel) */
	double Minv[9];  /* inverse of P's left 3x3: the ray through pixel (u, v)
	                    has direction Minv * (u, v, 1) (cone, matrices) */
	double src[3];   /* source position in mm (cone, matrices, fan) */
	double dir[3];   /* parallel: unit ray direction -(cos t, sin t, 0) */
	double angle_rad;/* gantry angle; for matrices atan2(src.y, src.x) */
} rc_view;

typedef struct rc_geom rc_geom;

/* Validates spec and vol against lim and builds the geometry.  On failure the
 * message names the bad field, e.g. "geometry.source_isocenter_mm must be a
 * positive finite number (got -5)".  Checked: type, counts and sizes > 0,
 * finite and positive distances and spacings, finite angles, offsets and
 * matrices, source outside the volume, detector beyond the volume (cone,
 * fan), every view's detector seeing some of the volume, invertible matrices,
 * buffer sizes that overflow or exceed lim->max_bytes (lim may be NULL). */
int rc_geom_new(const rc_geom_spec *spec, const rc_volume_desc *vol,
		const rc_limits *lim, rc_geom **ret, rc_err *err);
void rc_geom_free(rc_geom *g);

rc_geom_type rc_geom_type_of(const rc_geom *g);
int rc_geom_nviews(const rc_geom *g);
const rc_view *rc_geom_view(const rc_geom *g, int k);
const rc_detector_desc *rc_geom_detector(const rc_geom *g);
const rc_volume_desc *rc_geom_volume(const rc_geom *g);
/* Helix: view k's source height is z_start + pitch (theta_k - theta_0) /
 * 360 degrees, theta in the client's degrees.  rc_geom_pitch is pitch_mm
 * (0 for every other type); rc_geom_lead is the z advance per turn along
 * the scan's direction of rotation (pitch times the sign of the angle
 * step), the quantity the Tam-Danielsson window scales with. */
double rc_geom_pitch(const rc_geom *g);
double rc_geom_lead(const rc_geom *g);

/* Helix: the Tam-Danielsson window (n = 1), or the n-PI window (n odd),
 * at fan angle gamma (radians, towards e_u) of every view, as detector row
 * coordinates in mm from the row at the source's height (the v_mm of
 * rc_geom_pixel_pos before offset_v): *lo..*hi, the projections of the
 * helix (n+1)/2 turns before and after the source.  A point is seen
 * through the window exactly over its n-PI interval (n half turns plus
 * twice its fan angle), so every line through it in the plane of
 * rotation is measured n times (docs/fdk.md).  With lead h (rc_geom_lead),
 * sigma the direction of rotation and a cylindrical detector: after =
 * S h (n pi - 2 sigma gamma) / (4 pi D cos gamma), before = -S h (n pi +
 * 2 sigma gamma) / (4 pi D cos gamma); a flat detector's rows are these
 * over cos gamma.  lo = hi = 0 for pitch 0. */
void rc_geom_helix_window(const rc_geom *g, int n, double gamma, double *lo, double *hi);

/* Half the z range about a voxel's height that the sources of its PI
 * interval span at most, plus the window's one-row edge (helix.c): the
 * covered range is the sources' z range less this at each end. */
double rc_geom_helix_margin(const rc_geom *g);
/* Largest fan angle (radians) of the volume's box seen from the axis. */
double rc_geom_helix_gamma_max(const rc_geom *g);
/* rc_geom_new's helix checks (helix.c).  spec: pitch_mm and z_start_mm
 * finite and, for a nonzero pitch, angles strictly monotone (one scan).
 * built: complete data (the Tam-Danielsson window within the detector's
 * rows less one at each edge: geometry.pitch_mm) and the volume inside the
 * covered z range (volume); nothing for pitch 0. */
int rc_geom_helix_check_spec(const rc_geom_spec *sp, rc_err *err);
int rc_geom_helix_check(const rc_geom *g, rc_err *err);

/* The g with views first..last-1 only, vol for its volume and the
 * detector's rows row0..row0+nrows-1 only (no checks: a helical FDK's slab
 * of the volume, the views that see it and the rows of their window).
 * The matrices are g's with v shifted by row0 (the same, bit for bit, for
 * row0 0 and all rows), offset_v moved to the rows' centre.  cone, helix,
 * matrices (an out-of-core FDK's chunk of views of a slab, plan/ooc.c). */
int rc_geom_slab(const rc_geom *g, int first, int last, const rc_volume_desc *vol, int row0, int nrows,
		 rc_geom **ret, rc_err *err);

/* D and S for cone and fan; for matrices the mean source-to-axis distance
 * and 0 for S (no physical detector distance is known). */
double rc_geom_sid(const rc_geom *g);
double rc_geom_sdd(const rc_geom *g);
/* True for fan and parallel: a stack of independent 2-D slices. */
int rc_geom_is_2d(const rc_geom *g);

/* Element counts of the projection stack and of the volume.  view_count is
 * the number of values of one view: nu * nv (cone, matrices), nu * nz
 * (fan, parallel: one detector row per slice). */
size_t rc_geom_proj_count(const rc_geom *g);
size_t rc_geom_view_count(const rc_geom *g);
size_t rc_volume_count(const rc_volume_desc *vol);

/* Layout of the projection stack (API.md), u always fastest:
 *   cone, matrices:  [view k][row j][u]    row j = detector row v
 *   fan, parallel:   [slice j][view k][u]  row j = slice iz (one sinogram
 *                                          per slice, contiguous)
 * The row (k, j) starts at k * view_stride + j * row_stride elements, so
 * cone has view_stride = nu*nv, row_stride = nu and fan/parallel have
 * view_stride = nu, row_stride = nviews*nu.  A view of a 2-D geometry is
 * therefore not contiguous; projectors must index through these strides. */
size_t rc_geom_view_stride(const rc_geom *g);
size_t rc_geom_row_stride(const rc_geom *g);
size_t rc_geom_row_offset(const rc_geom *g, int k, int j);

/* World position (mm) of voxel (ix, iy, iz). */
void rc_volume_voxel_pos(const rc_volume_desc *vol, double ix, double iy,
			 double iz, double pos[3]);

/* World position (mm) of the centre of pixel (i, j) of view k for cone
 * geometries (the end of the segment whose line integral is the projection
 * value).  Returns RC_EUNSUPPORTED for other types. */
int rc_geom_pixel_pos(const rc_geom *g, int k, double i, double j, double pos[3]);

/* The ray of pixel (i, j) of view k (slice iz for fan/parallel): origin
 * (source, or a point far behind the volume for parallel) and unit direction.
 * For cone/fan the segment whose integral is measured ends at the pixel
 * centre; it lies beyond the volume for every valid geometry, so integrating
 * to infinity gives the same value.  A curved fan's ray leaves the source at
 * the pixel's fan angle gamma: direction cos(gamma) n + sin(gamma) e_u,
 * pixel centre at distance S. */
void rc_geom_ray(const rc_geom *g, int k, double i, double j, int iz,
		 double origin[3], double dir[3]);

/* Continuous pixel index along u of in-plane point (x, y) in view k of a
 * fan or parallel geometry (either shape), and *w = its depth along the
 * central ray in mm (fan) or 1 (parallel).  Flat: A's rows.  Curved:
 * u = atan2(e_u.(X-s), n.(X-s)) S/du - offset_u/du + (nu-1)/2, the pixel
 * index of the arc; monotone along any line that misses the source. */
double rc_geom_plane_u(const rc_geom *g, int k, double x, double y, double *w);

/* For fan and parallel: the coordinate of A's first row on the line of
 * pixel coordinate e (continuous index), i.e. the line
 * (A0 - f A3) x + (A1 - f A4) y + (A2 - f A5) = 0 with f the returned value
 * is the ray through detector coordinate e.  Flat: e itself.  Curved fan:
 * the index on the tangent flat detector hit by the ray at angle gamma(e),
 * (S tan gamma - offset_u)/du + (nu-1)/2 (|gamma| < 90 degrees, which
 * rc_geom_new ensures for every pixel edge). */
double rc_geom_line_u(const rc_geom *g, double e);

/* Fan angle (radians, towards e_u) of pixel coordinate e of a curved fan:
 * ((e - (nu-1)/2) du + offset_u) / S. */
double rc_geom_fan_angle(const rc_geom *g, double e);

/* Fan angle (radians, towards e_u) of continuous column index i of a cone
 * or fan geometry of either shape: on the arc for a curved detector
 * (rc_geom_fan_angle), else the flat detector's atan(u / S). */
double rc_geom_column_gamma(const rc_geom *g, double i);

/* A curved cone's projection (its P is the tangent flat detector's, like
 * a curved fan's A): the continuous pixel indices (u, v) of world point x
 * in view k, u = (atan2(side, depth) S - offset_u)/du + (nu-1)/2 and
 * v = (S z / L - offset_v)/dv + (nv-1)/2 (z from the source's height), and
 * *L = hypot(depth, side), the point's distance from the source in the
 * plane of rotation (the FDK back projection's 1/L^2). */
void rc_geom_cyl_project(const rc_geom *g, int k, const double x[3], double *u, double *v, double *L);

/* g with its detector's nu and offset_u replaced (cone and fan; the rest,
 * views and volume alike), e.g. a displaced detector widened for FDK's
 * filtered views (algo_fdk.c).  rc_geom_new's checks and refusals. */
int rc_geom_widen(const rc_geom *g, int nu, double offset_u, rc_geom **ret, rc_err *err);

/* Apply the view matrix: (u, v, w) of world point x (cone, matrices). */
static inline void rc_view_project(const rc_view *vw, const double x[3],
				   double *u, double *v, double *w)
{
	const double *P = vw->P;
	double ww = P[8] * x[0] + P[9] * x[1] + P[10] * x[2] + P[11];
	*u = (P[0] * x[0] + P[1] * x[1] + P[2] * x[2] + P[3]) / ww;
	*v = (P[4] * x[0] + P[5] * x[1] + P[6] * x[2] + P[7]) / ww;
	*w = ww;
}

#endif
