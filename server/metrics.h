/* GET /metrics: the scheduler's counters in Prometheus' text format. */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include "grammar_cache.h"
#include "scheduler.h"

/* malloc'd text (NULL: out of memory, clinfer_last_error says so); g may be NULL. */
char *srv_metrics_text(const srv_stats *st, const srv_gcache_stats *g, const char *model);

#endif
