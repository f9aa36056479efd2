/* The query an aggregation's leading stages make (leading.c): the filter
 * and the sort mongod's planner receives once its pipeline optimization
 * has moved and merged the stages it moves. */
#ifndef MG_ANALYZERS_ENGINE_LEADING_H
#define MG_ANALYZERS_ENGINE_LEADING_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* bson_t values are never copied by value (a view points into its own
 * struct), hence the two slots. */
typedef struct leading {
	bson_t first;  /* view of the first $match */
	bson_t merged; /* owned when more than one $match (or a part of one) leads */
	bool owned;
	const bson_t *filter; /* NULL, &first or &merged */
	bson_t sort;
	bool has_sort;
	/* With has_sort: the first stage that keeps the $sort after it, by
	 * name ("$project", "$addFields", "$set", "$unset"): mongod moves no
	 * $sort before those, so it sorts in memory whatever the indexes.
	 * NULL: the sort leads, as mongod's optimization leaves it. */
	const char *behind;
	bool counts; /* countDocuments' form: the matches are counted */
	/* The stages after the leading run read every document it selects:
	 * a leading $sort, or one of them takes its whole input ($group,
	 * $sort, $count, $out, ...), or every document reaches the cursor,
	 * before any $limit (leading.c, reads_everything). */
	bool reads_all;
	/* ... unless an index leads with this field: the stage that takes
	 * them all is a $group by it that may be a DISTINCT_SCAN, right after
	 * the query (leading.c, reads_everything); points into the pipeline.
	 * NULL: none. */
	const char *group;
	/* ... at most this many ($skip + $limit), 0: all. With a leading
	 * $sort: what the stages after it read in its order when an index
	 * provides it, unless stops_unknown: a stage after it may stop the
	 * read (one not known here, a $group that may be a DISTINCT_SCAN). */
	int64_t count_limit;
	bool stops_unknown;
} leading;

/* Reads the pipeline (an iterator on the array) into l; leading_done
 * frees what it allocated. */
void leading_stages(const bson_iter_t *pipeline, leading *l);

static inline void leading_done(leading *l)
{
	if (l->owned)
		bson_destroy(&l->merged);
	l->owned = false;
}

#endif
