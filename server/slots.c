/* GET /slots and POST /slots/{id}?action=save|restore|erase in
 * llama-server's shapes:
 *   GET  /slots -> [{"id", "n_ctx", "speculative", "is_processing",
 *                    "n_prompt_tokens", "n_prompt_tokens_processed",
 *                    "n_prompt_tokens_cache", "next_token": [{"n_decoded"}],
 *                    "n_cached_tokens"}, ...]
 *   POST /slots/ID?action=save    {"filename": NAME} -> {"id_slot", "filename", "n_saved", "n_written",
 *                                                        "timings": {"save_ms"}}
 *   POST /slots/ID?action=restore {"filename": NAME} -> {"id_slot", "filename", "n_restored", "n_read",
 *                                                        "timings": {"restore_ms"}}
 *   POST /slots/ID?action=erase                      -> {"id_slot", "n_erased"}
 * Files live in --slot-save-path (without it the actions are 501, as
 * llama-server refuses them); a NAME is a plain file name (letters, digits,
 * '.', '_', '-'; not starting with '.'): anything else, a '/' or '..'
 * included, is a 400. The work runs in the step loop between steps
 * (srv_sched_slot_action); a slot running a request is a 409. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "http.h"
#include "slots.h"

enum { NAME_MAX_BYTES = 200 };

/* 1 when name is a plain file name under the folder (no path, no
 * parent, no hidden file, nothing a shell or another system reads apart). */
static int plain_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > NAME_MAX_BYTES || name[0] == '.' || strstr(name, "..")) return 0;
    for (size_t i = 0; i < n; i++) {
        const char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

enum MHD_Result srv_slots_get(srv_app *app, struct MHD_Connection *c) {
    srv_slot_view *v = calloc((size_t)app->n_slots, sizeof *v);
    json_t *a = json_array();
    if (!v || !a) {
        free(v);
        json_decref(a);
        clinfer_fail(CLINFER_ERR_MEMORY, "out of host memory");
        return srv_http_send(c, MHD_HTTP_OK, "application/json", NULL);
    }
    srv_sched_slots(app->sched, v);
    for (int i = 0; i < app->n_slots && a; i++) {
        json_t *o = srv_api_pack("{s:i, s:i, s:b, s:b, s:i, s:i, s:i, s:[{s:i}], s:i}", "id", v[i].id, "n_ctx",
                                 v[i].n_ctx, "speculative", v[i].speculative, "is_processing", v[i].is_processing,
                                 "n_prompt_tokens", v[i].is_processing ? v[i].n_prompt : v[i].n_cached,
                                 "n_prompt_tokens_processed", v[i].n_prompt_processed, "n_prompt_tokens_cache",
                                 v[i].n_prompt_cache, "next_token", "n_decoded", v[i].n_decoded, "n_cached_tokens",
                                 v[i].n_cached);
        if (!o || json_array_append_new(a, o)) json_decref(a), a = NULL;
    }
    free(v);
    return srv_http_send(c, MHD_HTTP_OK, "application/json", a ? srv_api_dump(a) : NULL);
}

/* The slot's id from the path's last part: digits only; -1 otherwise. */
static int slot_of(const char *id) {
    if (!*id || strlen(id) > 6) return -1;
    int v = 0;
    for (const char *p = id; *p; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

enum MHD_Result srv_slots_post(srv_app *app, struct MHD_Connection *c, const char *id, const char *body, size_t len) {
    srv_api_error e;
    const char *action = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "action");
    if (!app->slot_save_path) {
        srv_api_error_set(&e, 501, "not_supported_error", "not_supported", NULL,
                          "this server does not save or restore slots: start it with --slot-save-path DIR");
        return srv_http_send_error(c, &e);
    }
    const int slot = slot_of(id);
    srv_slot_op op;
    if (!action || (strcmp(action, "save") && strcmp(action, "restore") && strcmp(action, "erase"))) {
        srv_api_bad(&e, "action", "action: save, restore or erase (?action=...), not '%.40s'", action ? action : "");
        return srv_http_send_error(c, &e);
    }
    op = !strcmp(action, "save") ? SRV_SLOT_SAVE : !strcmp(action, "restore") ? SRV_SLOT_RESTORE : SRV_SLOT_ERASE;
    if (slot < 0 || slot >= app->n_slots) {
        srv_api_error_set(&e, MHD_HTTP_BAD_REQUEST, "invalid_request_error", "invalid_slot", NULL,
                          "no slot '%.20s': the server has %d (0 to %d)", id, app->n_slots, app->n_slots - 1);
        return srv_http_send_error(c, &e);
    }
    char path[4096], name[NAME_MAX_BYTES + 1] = "";
    if (op != SRV_SLOT_ERASE) {
        json_t *root = srv_api_load(body, len, &e);
        if (!root) return srv_http_send_error(c, &e);
        json_t *f = srv_api_field(root, "filename");
        const char *s = NULL;
        int bad = !f ? (srv_api_bad(&e, "filename", "filename: required"), 1)
                     : srv_api_unpack(f, "filename", &e, "s", &s) != 0;
        if (!bad && !plain_name(s)) {
            srv_api_bad(&e, "filename", "filename: a plain file name in the slot folder (letters, digits, '.', '_', "
                        "'-'; not starting with '.', no '..' or '/', at most %d bytes)", NAME_MAX_BYTES);
            bad = 1;
        }
        if (!bad) snprintf(name, sizeof name, "%s", s);
        json_decref(root);
        if (bad) return srv_http_send_error(c, &e);
        if (snprintf(path, sizeof path, "%s/%s", app->slot_save_path, name) >= (int)sizeof path) {
            /* cut short, it would name another file */
            srv_api_error_set(&e, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "slot_failed", NULL,
                              "the slot folder's path and '%s' are longer than %zu bytes", name, sizeof path - 1);
            return srv_http_send_error(c, &e);
        }
        struct stat sb;
        if (op == SRV_SLOT_RESTORE && stat(path, &sb) != 0) {
            srv_api_error_set(&e, MHD_HTTP_NOT_FOUND, "invalid_request_error", "not_found", "filename",
                              "no slot file '%s' in the slot folder", name);
            return srv_http_send_error(c, &e);
        }
    }
    srv_slot_result r;
    srv_sched_slot_action(app->sched, op, slot, path, &r);
    if (r.why != SRV_SLOT_OK) {
        /* refused files (another model, geometry, damaged) and a context too
         * small are the request's; the rest the server's */
        const int mine = r.why == SRV_SLOT_FAILED && r.st != CLINFER_ERR_FORMAT && r.st != CLINFER_ERR_ARG &&
                         r.st != CLINFER_ERR_CONTEXT;
        srv_api_error_set(&e, r.why == SRV_SLOT_BUSY ? MHD_HTTP_CONFLICT : mine ? MHD_HTTP_INTERNAL_SERVER_ERROR
                                                                                 : MHD_HTTP_BAD_REQUEST,
                          mine ? "server_error" : "invalid_request_error",
                          r.why == SRV_SLOT_BUSY ? "slot_busy" : mine ? "slot_failed" : "invalid_slot_file", NULL,
                          "%s slot %d: %s", op == SRV_SLOT_SAVE ? "saving" : op == SRV_SLOT_RESTORE ? "restoring"
                                                                                                     : "erasing",
                          slot, r.error);
        return srv_http_send_error(c, &e);
    }
    json_t *o = op == SRV_SLOT_ERASE
                    ? srv_api_pack("{s:i, s:i}", "id_slot", slot, "n_erased", r.n_tokens)
                    : srv_api_pack("{s:i, s:s, s:i, s:I, s:{s:f}}", "id_slot", slot, "filename", name,
                                   op == SRV_SLOT_SAVE ? "n_saved" : "n_restored", r.n_tokens,
                                   op == SRV_SLOT_SAVE ? "n_written" : "n_read", (json_int_t)r.bytes, "timings",
                                   op == SRV_SLOT_SAVE ? "save_ms" : "restore_ms", r.ms);
    return srv_http_send(c, MHD_HTTP_OK, "application/json", o ? srv_api_dump(o) : NULL);
}
