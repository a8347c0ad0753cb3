/*
 * helix: the checks of a helix geometry (geometry.c calls them; the window
 * and the accessors are geometry.h's).
 */
#ifndef RC_HELIX_H
#define RC_HELIX_H

#include "geometry/geometry.h"

/* The spec's own fields: pitch_mm and z_start_mm finite, and, for a
 * nonzero pitch, angles strictly monotone (a helix is one scan). */
int rc_helix_spec_check(const rc_geom_spec *sp, rc_err *err);

/* A built helix of nonzero pitch: complete data (the Tam-Danielsson window
 * within the detector's rows less one at each edge: geometry.pitch_mm) and
 * a volume inside the covered z range (every voxel seen over its whole PI
 * interval and the window's one-row edge: volume).  docs/geometry.md. */
int rc_helix_check(const rc_geom *g, rc_err *err);

/* Half the z range around a voxel's height that the sources of its PI
 * interval span at most, plus the window's edge: the covered range is the
 * sources' z range less this at each end. */
double rc_helix_margin(const rc_geom *g);

/* Largest fan angle (radians) of the volume's box about the axis. */
double rc_helix_gamma_max(const rc_geom *g);

#endif
