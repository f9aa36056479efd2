/* The workload as the admin endpoint shows it: the workers' tables (copies
 * made on their threads) merged, filtered, sorted and written as JSON for
 * GET /workload, and the per-collection counters as Prometheus text. And
 * which rules fired on which shape, told by the findings sink. */
#ifndef MG_PROXY_STATS_WORKLOAD_JSON_H
#define MG_PROXY_STATS_WORKLOAD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/text.h"
#include "proxy/stats/workload.h"

typedef enum {
	WL_SORT_TOTAL, /* total time (the default) */
	WL_SORT_COUNT,
	WL_SORT_P99,
	WL_SORT_ERRORS,
	WL_SORT_DOCS,
	WL_SORT_BYTES,
} wl_sort;

/* GET /workload's query: ns and app are globs (fnmatch), as /findings'. */
typedef struct wl_query {
	const char *ns, *app;
	wl_sort sort;
	unsigned limit; /* 0: 100 */
} wl_query;

/* Parses "ns=...&app=...&sort=...&limit=..." into q, whose strings point
 * into store (cap bytes). False with err set for an unknown parameter or a
 * bad value. */
bool workload_query_parse(const char *query, wl_query *q, char *store, size_t cap, char *err,
                          size_t errlen) __attribute__((warn_unused_result));

/* The JSON of the n tables (one per worker) q asks for. now_ns: monotonic. */
void workload_json(const workload *const *tabs, size_t n, const wl_query *q, int64_t now_ns,
                   text_buf *out);

/* mongoguard_collection_reads_total / _writes_total {ns="db.coll"}: the
 * first `labels` collections seen keep their own label for the process's
 * life (a counter never moves between labels); the rest are summed under
 * ns="other". Called from the admin thread only. */
void workload_prometheus(const workload *const *tabs, size_t n, unsigned labels, text_buf *out);

/* The findings sink tells which rule fired on which shape (the engine's
 * shape hash); any thread. Bounded: 4,096 shapes, then no more are kept. */
void workload_rules_note(uint64_t shape_hash, unsigned rule);
uint32_t workload_rules_of(uint64_t shape_hash);

#endif
