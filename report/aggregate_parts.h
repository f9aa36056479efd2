/* The files the aggregation (aggregate.c) is split into, as it calls
 * them: each fills its part of the model from what the reader hands it
 * and knows nothing of the reader. schema_facts.c: a request's schema
 * facts; arrays.c: array evidence; timeline.c: the time charts;
 * failures.c: the per-shape failures. Only report/ includes this. */
#ifndef MG_REPORT_AGGREGATE_PARTS_H
#define MG_REPORT_AGGREGATE_PARTS_H

#include <stdint.h>

#include "analyzers/engine/rule_config.h"
#include "protocol/cmdview.h"
#include "report/model.h"
#include "report/namespaces.h"

/* The schema view's raw facts from one (redacted) request of n; may add
 * rows to t (a joined collection), so n is stale after. */
void agg_note_schema(ns_table *t, model_ns *n, const cmdview *v, const char *canon);

/* Array evidence (arrays.c): a sampled reply's longest array under path,
 * at time t; the target paths of a new finding of a rule that grows
 * arrays (rules.h, grows_arrays), from its shape; after the last record,
 * each such finding's evidence. */
void agg_array_sample(model_ns *n, const char *path, int64_t len, int64_t t);
void agg_finding_push_paths(model_finding *mf);
void report_arrays_finish(model *m);
/* The evidence of one array of replies (f: a model_ns arrays row with
 * samples): largest, p95, each half's largest, growth. */
void report_array_evidence(const model *m, const model_field *f, model_array_evidence *e);

/* Time charts (timeline.c): a finding of rule at time t_us (the engine's
 * tally); after the last record, before latencies are sorted, the
 * buckets. */
void agg_tally_at(model *m, int64_t t_us, rule_id rule);
/* A reply's latency (µs) to the request at t_us, kept with that time. */
void agg_note_latency(model_shape *s, int64_t t_us, int64_t lat_us);
void report_timeline_build(model *m);

/* A failed reply of s with its code; after the last record, the codes
 * ranked and the shape marked when most of its replies failed. */
void agg_note_failure(model_shape *s, int32_t code);
void agg_finish_failures(model_shape *s);

/* The engines' configurations from a capture's header (rules_header.c):
 * cfg the report's rules, quiet and *quiet_max the quiet engine's
 * (aggregate.c). */
void agg_rules_from_header(model *m, const bson_t *h, engine_config *cfg, engine_config *quiet,
                           uint32_t *quiet_max);

#endif
