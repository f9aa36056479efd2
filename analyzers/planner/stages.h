/* The parts of aggregation stages that name another collection's access,
 * read once the same way for every check that asks: the engine's walk of
 * sub-pipelines (the sort rule's questions at from) and the
 * collection-scan rule's $lookup question. */
#ifndef MG_ANALYZERS_PLANNER_STAGES_H
#define MG_ANALYZERS_PLANNER_STAGES_H

#include <bson/bson.h>
#include <stdbool.h>

/* {$lookup: {from, localField, foreignField, pipeline, ...}}: each string
 * field (NULL when absent or not a string), and the pipeline when it is
 * an array. */
typedef struct lookup_stage {
	const char *from, *local, *foreign;
	bool has_pipeline;
	bson_iter_t pipeline; /* valid when has_pipeline */
} lookup_stage;

/* stage: an iterator on the $lookup's value. False when it is no document. */
bool lookup_stage_read(const bson_iter_t *stage, lookup_stage *out);

#endif
