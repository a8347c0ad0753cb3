/*
 * push_send: one attempt at sending a job's DICOM series to one destination
 * (destinations.h): STOW-RS over libcurl, one instance per request on one
 * kept connection, or C-STORE over one DIMSE association (dicom_dcmtk.h).
 * progress(ud, k) is called after each instance the peer accepted, and
 * progress(ud, -1) while a STOW-RS transfer runs; a nonzero return stops the
 * attempt (the daemon is stopping).
 */
#ifndef RC_PUSH_SEND_H
#define RC_PUSH_SEND_H

#include "base/destinations.h"
#include "store/store.h"

typedef int (*push_progress)(void *ud, int sent);

/* 0 when every instance was accepted; RC_EIO with the peer's answer (HTTP
 * status and the start of its body, or the DIMSE status); RC_ECANCELLED when
 * progress asked to stop. */
int push_send(store *st, const char *id, int instances, const destination *d, push_progress progress, void *ud,
	      rc_err *err);

#endif
