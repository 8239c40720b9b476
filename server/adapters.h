/* LoRA adapters in the server, as llama-server has them: the adapters
 * loaded with --lora / --lora-scaled, listed by GET /lora-adapters (their
 * index is their "id"), their global scales set by POST /lora-adapters
 * ([{"id": 0, "scale": 0.5}, ...]: those not listed 0), and a request's own
 * "lora" field in the same form (those not listed 0; absent: the global
 * scales). A request's scales go with its jobs (srv_job_params.lora) to
 * the slot's sequence (srv_engine_slot_lora), and a slot's cache is reused
 * only by a request with the same scales. */
#ifndef SRV_ADAPTERS_H
#define SRV_ADAPTERS_H

#include <stddef.h>

#include "api_openai.h"

/* The body's "lora" field, when present, into r (lora_id, lora_scale,
 * has_lora); -1 with a 400 when malformed. */
int srv_lora_parse(json_t *root, srv_api_req *r, srv_api_error *e);
/* The scales q's jobs use, one per adapter of m, into q->lora (n_lora):
 * the request's, else the global ones; -1 with a 400 for an id m has not,
 * or more adapters at a nonzero scale than a sequence takes. */
int srv_lora_resolve(const clinfer_model *m, srv_api_req *q, srv_api_error *e);
/* GET /lora-adapters: [{"id", "path", "scale"}, ...] (malloc'd, NULL: out of memory). */
char *srv_lora_list_json(const clinfer_model *m);
/* POST /lora-adapters: the global scales; -1 with a 400 for a bad body. */
int srv_lora_post(const clinfer_model *m, const char *body, size_t len, srv_api_error *e);
/* The adapters m has loaded, in bytes, for the server's memory check
 * (memory.h): their files' sizes. An F16 or F32 adapter, as llama.cpp
 * converts them, takes as many on the device; a quantized one more (its A
 * and B are made F32 there), which the library does not report. */
double srv_lora_bytes(const clinfer_model *m);

#endif
