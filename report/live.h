/* --indexes-from URI: index lists and $indexStats from a live server
 * instead of the capture's snapshots, for every namespace the capture's
 * requests name. */
#ifndef MG_REPORT_LIVE_H
#define MG_REPORT_LIVE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "report/aggregate.h"

typedef struct live_ctx live_ctx;

live_ctx *live_new(const char *uri, char *err, size_t errlen);
/* Pass 1: remembers the namespace of each request record. */
void live_note_record(live_ctx *l, const bson_t *rec);
/* listIndexes and $indexStats for each namespace remembered. False with
 * err set when the server cannot be reached at all. */
bool live_fetch(live_ctx *l, aggregator *a, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* After aggregation: $indexStats counts into the model's indexes. */
void live_apply(live_ctx *l, model *m);
void live_free(live_ctx *l);

#endif
