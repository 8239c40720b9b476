/* GET /slots and POST /slots/{id}?action=save|restore|erase (slots.c). */
#ifndef SRV_SLOTS_H
#define SRV_SLOTS_H

#include <microhttpd.h>
#include <stddef.h>

#include "http.h"

enum MHD_Result srv_slots_get(srv_app *app, struct MHD_Connection *c);
/* id: the path's part after "/slots/". */
enum MHD_Result srv_slots_post(srv_app *app, struct MHD_Connection *c, const char *id, const char *body, size_t len);

#endif
