/*
 * device_json: the `models` array of a Device in GET /v1/devices
 * (api/openapi.yaml, DeviceModel), from the model store of core/models.h.
 * Shared by the daemon (which reads STORE/models on each request, so a
 * refit by the last job shows at once) and `recond-worker --devices
 * --state-dir STORE`.
 */
#ifndef RECOND_DEVICE_JSON_H
#define RECOND_DEVICE_JSON_H

#include <jansson.h>

/* One entry per stored shape and task of device_id: shape, task, a (ms per
 * view), b (ms), samples, updated.  model_dir NULL or unreadable: []. */
json_t *device_models_json(const char *model_dir, const char *device_id);

#endif
