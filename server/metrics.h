/* GET /metrics: the scheduler's counters in Prometheus' text format. */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include "scheduler.h"

/* malloc'd text (NULL: out of memory, clinfer_last_error says so). */
char *srv_metrics_text(const srv_stats *st, const char *model);

#endif
