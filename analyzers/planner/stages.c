/* Aggregation stages' accesses to other collections (stages.h). */
#include "analyzers/planner/stages.h"

#include <string.h>

#include "protocol/wire_iter.h"

bool lookup_stage_read(const bson_iter_t *stage, lookup_stage *out)
{
	bson_iter_t it;
	out->from = out->local = out->foreign = NULL;
	out->has_pipeline = false;
	if (!WIRE_ITER_HOLDS_DOCUMENT(stage) || !wire_iter_recurse(stage, &it))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (strcmp(k, "pipeline") == 0 && WIRE_ITER_HOLDS_ARRAY(&it)) {
			out->pipeline = it;
			out->has_pipeline = true;
		} else if (WIRE_ITER_HOLDS_UTF8(&it)) {
			if (strcmp(k, "from") == 0)
				out->from = bson_iter_utf8(&it, NULL);
			else if (strcmp(k, "localField") == 0)
				out->local = bson_iter_utf8(&it, NULL);
			else if (strcmp(k, "foreignField") == 0)
				out->foreign = bson_iter_utf8(&it, NULL);
		}
	}
	return true;
}
