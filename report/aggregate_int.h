/* Inside the report's aggregator (aggregate.c): its state and the small
 * tables it keeps, shared with the files it is split into (hash_map.c: the
 * key map; schema_facts.c: the schema view's raw facts; failures.c: the
 * per-shape failures). Only report/ includes this. */
#ifndef MG_REPORT_AGGREGATE_INT_H
#define MG_REPORT_AGGREGATE_INT_H

#include <bson/bson.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/engine/engine.h"
#include "protocol/cmdview.h"
#include "report/aggregate.h"

/* ---- small growable tables ---- */

#define GROW(arr, n, cap)                                                                          \
	do {                                                                                       \
		if ((n) == (cap)) {                                                                \
			size_t nc = (cap) ? (cap)*2 : 16;                                          \
			void *np = realloc((arr), nc * sizeof(*(arr)));                            \
			if (!np)                                                                   \
				abort(); /* the report has nothing sensible to do */               \
			(arr) = np;                                                                \
			(cap) = nc;                                                                \
		}                                                                                  \
	} while (0)

static inline uint64_t fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 1099511628211ull;
	return h;
}
#define FNV0 1469598103934665603ull

/* Open addressing from a 64-bit key to an index + 1 (0 = empty). */
typedef struct imap {
	uint64_t *keys;
	size_t *vals;
	size_t cap, n;
} imap;

static inline size_t imap_get(const imap *m, uint64_t k)
{
	if (!m->cap)
		return 0;
	for (size_t i = k & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->vals[i])
			return 0;
		if (m->keys[i] == k)
			return m->vals[i];
	}
}
void imap_put(imap *m, uint64_t k, size_t v);
void imap_free(imap *m);

/* ---- the reader's state ---- */

typedef struct pending {
	uint64_t key;
	size_t shape, ns; /* + 1; 0 = none */
	int64_t t_us;
	struct pending *next;
} pending;

#define PENDING_BUCKETS 65536

struct aggregator {
	model *m;
	engine *e;
	index_cache *ic;
	imap shapes, findings, nss, apps, dbs;
	pending *pend[PENDING_BUCKETS];
	uint64_t instance; /* of the file being read */
	bool rules_set;
	engine_config cfg;
	const cmdview *cur; /* the request engine_analyze is judging, or NULL */
	int64_t cur_t;      /* its time */
};

static inline uint64_t str_key(const char *s)
{
	return fnv(s, strlen(s), FNV0);
}

/* The namespace's row (made on first use: may move a->m->nss). */
model_ns *agg_ns_get(aggregator *a, const char *ns);
size_t agg_ns_index(aggregator *a, const model_ns *n); /* its index + 1 */
/* path seen once more in arr (len: an array's length, -1 for none). */
void agg_field_note(model_field **arr, size_t *n, const char *path, int64_t len);
/* The schema view's raw facts from one (redacted) request of n. */
void agg_note_schema(aggregator *a, model_ns *n, const cmdview *v, const char *canon);

/* Array evidence (arrays.c): a sampled reply's longest array under path,
 * at time t; a new unbounded-push finding's target paths, from its shape;
 * after the last record, each push finding's evidence. */
void agg_array_sample(model_ns *n, const char *path, int64_t len, int64_t t);
void agg_finding_push_paths(model_finding *mf);
void report_arrays_finish(model *m);

/* Time charts (timeline.c): a finding of rule at time t (the engine's
 * tally); after the last record, before latencies are sorted, the
 * buckets. */
void agg_tally(void *arg, rule_id rule, rule_action action);
void report_timeline_build(model *m);

/* A failed reply of s with its code; after the last record, the codes
 * ranked and the shape marked when most of its replies failed. */
void agg_note_failure(model_shape *s, int32_t code);
void agg_finish_failures(model_shape *s);

#endif
