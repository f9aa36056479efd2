/* The reader's side of the report: records in, the model filled
 * (aggregate.c says how). */
#ifndef MG_REPORT_AGGREGATE_H
#define MG_REPORT_AGGREGATE_H

#include <bson/bson.h>

#include "report/model.h"

typedef struct aggregator aggregator;
typedef struct index_cache index_cache;

aggregator *aggregator_new(model *m);
/* The cache the engine reads: filled from snapshots, or by live.c. */
index_cache *aggregator_index_cache(aggregator *a);
/* pass 1: index snapshots only; pass 2: everything. Records of one file
 * come after its header. */
void aggregator_record(aggregator *a, int pass, const bson_t *rec);
/* After the last record: summaries flushed, percentiles, index use. */
void aggregator_finish(aggregator *a);
/* --indexes-from: a collection's live index list, and an index's
 * $indexStats operation count. */
void aggregator_put_indexes(aggregator *a, const char *ns, const bson_t *const *specs, size_t n);
void aggregator_index_ops(aggregator *a, const char *ns, const char *name, int64_t ops);
void aggregator_free(aggregator *a);

void model_free(model *m);

#endif
