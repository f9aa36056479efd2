/* The reader's side of the report: records in, the model filled
 * (aggregate.c says how). */
#ifndef MG_REPORT_AGGREGATE_H
#define MG_REPORT_AGGREGATE_H

#include <bson/bson.h>

#include "report/model.h"

typedef struct aggregator aggregator;

aggregator *aggregator_new(model *m);
/* pass 1: index snapshots only; pass 2: everything. Records of one file
 * come after its header. */
void aggregator_record(aggregator *a, int pass, const bson_t *rec);
/* The records that follow are of m->inputs[input] (a finding names the
 * file it was first seen in). */
void aggregator_set_input(aggregator *a, size_t input);
/* After the last record: summaries flushed, percentiles, index use. */
void aggregator_finish(aggregator *a);
/* --indexes-from: a collection's live index list (live.c; its
 * $indexStats counts reach the model through live_apply). */
void aggregator_put_indexes(aggregator *a, const char *ns, const bson_t *const *specs, size_t n);
void aggregator_free(aggregator *a);

#endif
