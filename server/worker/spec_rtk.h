/*
 * spec_rtk: RTK's geometry file (the XML that
 * rtk::ThreeDCircularProjectionGeometryXMLFileWriter writes) to recond's
 * geometry, and any cone or matrices geometry back to that XML.
 *
 * RTK's frame is recond's with (X, Y, Z)_RTK = (y, z, x) and its gantry
 * angle is recond's θ (docs/geometry.md).  RTK's matrix maps world mm to
 * the detector's physical coordinates (mm in the projection stack's frame);
 * pixel (i, j) of the stack sits at origin + (i du, j dv), so recond's view
 * matrix is K M T with T the axis permutation and K mm -> pixel index.
 *
 * Reading follows RTK's reader: elements at the top and inside each
 * <Projection> set values that carry over to the projections after them;
 * each </Projection> adds a view; its <Matrix>, when given, must agree with
 * the parameters within 0.001 per element, as RTK checks.  A scan whose
 * views all have zero out-of-plane and in-plane angles and source offsets,
 * and one SID, SDD and projection offset, becomes a recond `cone` geometry
 * (FDK runs on it); any other becomes `matrices`.
 *
 * Safety: the XML is parsed by libxml2 from memory with network access off,
 * entities not substituted, no DTD loaded and at most SPEC_RTK_XML_MAX
 * bytes; a DOCTYPE with an internal subset, any entity declaration or
 * external identifier is refused before anything is built (RTK's own
 * `<!DOCTYPE RTKGEOMETRY>` has none and is accepted).
 */
#ifndef RC_SPEC_RTK_H
#define RC_SPEC_RTK_H

#include <stddef.h>

#include "geometry/geometry.h"
#include "util/rc_error.h"

#define SPEC_RTK_XML_MAX (16u << 20) /* bytes: the daemon's default JSON body cap */
#define SPEC_RTK_MAX_VIEWS 100000    /* spec.h SPEC_MAX_VIEWS (spec.c asserts they agree) */

/* The projection stack that goes with the XML (geometry.detector of a
 * `rtk` geometry): size, spacing (mm) and RTK's Origin, the centre of
 * pixel (0, 0) in mm. */
typedef struct spec_rtk_det {
	int nu, nv;
	double du, dv;
	double origin_u, origin_v;
} spec_rtk_det;

/* Parses len bytes of RTK XML into gs (type cone or matrices, nviews,
 * det with offsets and flat shape, distances) with *angles or *matrices
 * malloc'd for the caller (gs points into them).  Errors name
 * "geometry.xml": RC_EINVAL for malformed XML, a DOCTYPE with declarations,
 * an unknown element, a version other than 2 or 3, no projection, a value
 * that is no finite number, a matrix that disagrees with its parameters,
 * a parallel (SDD 0) geometry, a cylinder other than one about the source
 * (RadiusCylindricalDetector = SDD, circular, offsets in the origin: shape
 * curved); RC_ETOOBIG over the cap;
 * RC_ENOMEM. */
int spec_rtk_parse(const char *xml, size_t len, const spec_rtk_det *det, rc_geom_spec *gs, double **angles,
		   double **matrices, rc_err *err);

/* RTK XML (malloc'd, NUL-terminated, *len bytes) of a built cone or
 * matrices geometry g, for a projection stack with the spacing and origin
 * of det (det->nu, nv are g's).  A cone view is written as its parameters;
 * a matrix is decomposed into RTK's (source = the matrix's null space,
 * detector orientation and offsets from its left 3x3) and refused
 * (RC_EUNSUPPORTED, field "format") when that does not give the matrix
 * back: non-square pixels at that spacing or a skewed detector.  A curved
 * cone is written with RadiusCylindricalDetector = SDD and its offsets in
 * the origin (det's origin is then replaced by that one).  Fan and parallel
 * (RTK is 3-D) are RC_EUNSUPPORTED too. */
int spec_rtk_write(const rc_geom *g, const spec_rtk_det *det, char **ret, size_t *len, rc_err *err);

#endif
