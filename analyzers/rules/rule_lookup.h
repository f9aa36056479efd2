/* hot-path-lookup: an aggregation that joins ($lookup or $graphLookup, at
 * any depth: the pipeline, $lookup / $unionWith sub-pipelines, $facet
 * branches) and whose shape runs often. A join per request on a hot path is
 * a sign the data wants to be embedded, or referenced with the fields the
 * reader needs (extended reference).
 *
 * "Often" is exact: the tracker keeps, per shape, a ring of the times of its
 * last `threshold` executions. An execution is hot when the ring is full and
 * its oldest entry lies within the window: now - oldest < window. So the
 * threshold-th execution within the window is the first finding, and every
 * later one is too while the rate holds. Shapes are bounded (least recently
 * executed evicted), so a flood of distinct shapes costs bounded memory. */
#ifndef MG_ANALYZERS_RULES_RULE_LOOKUP_H
#define MG_ANALYZERS_RULES_RULE_LOOKUP_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOOKUP_MAX_SHAPES 10000

/* The rule's parameters, as slots of rule_config.params. */
enum {
	LOOKUP_PARAM_THRESHOLD,      /* executions ... */
	LOOKUP_PARAM_WINDOW_SECONDS, /* ... within this window */
};

/* pipeline: an iterator positioned on an array of stages. On a hit, stage
 * gets "$lookup" or "$graphLookup" and from (may be NULL) the joined
 * collection ("" when it is not a plain name). */
bool rule_lookup_find(const bson_iter_t *pipeline, const char **stage, char *from, size_t from_len);

typedef struct lookup_tracker lookup_tracker;

/* threshold 0 is taken as 1. NULL when out of memory. */
lookup_tracker *lookup_tracker_new(uint32_t threshold, uint32_t window_seconds, size_t max_shapes);
void lookup_tracker_free(lookup_tracker *t);

/* Records one execution of shape at now_ms. True when it is hot (*runs is
 * then the threshold; otherwise the executions remembered, at most
 * threshold). Thread-safe. */
bool lookup_tracker_record(lookup_tracker *t, uint64_t shape, int64_t now_ms, uint32_t *runs);

/* Shapes currently tracked (tests). */
size_t lookup_tracker_size(lookup_tracker *t);

#endif
