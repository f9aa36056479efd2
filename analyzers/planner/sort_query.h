/* The question index-mismatched-sort and the ESR suggestion answer: a
 * query's namespace, filter, sort, collation and hint, as views into the
 * request. Types only. */
#ifndef MG_ANALYZERS_PLANNER_SORT_QUERY_H
#define MG_ANALYZERS_PLANNER_SORT_QUERY_H

#include <bson/bson.h>

typedef struct sort_query {
	const char *db;
	const char *coll;
	const bson_t *filter;    /* NULL: no predicate */
	const bson_t *sort;      /* the sort specification */
	const bson_t *collation; /* NULL: simple collation */
	const bson_t *hint_doc;  /* hint as a key pattern, or NULL */
	const char *hint_name;   /* hint as an index name, or NULL */
	/* A $sort in a $facet sub-pipeline: it sorts what the stage before
	 * $facet hands over, which no index can order (only a pipeline's
	 * leading stages reach the query planner), so it sorts in memory. */
	bool in_facet;
	/* A $sort after the stage named here ($project, $addFields, $set,
	 * $unset), on fields it leaves as they are: mongod moves no $sort
	 * before such a stage, so this one sorts in memory too (leading.h). */
	const char *behind;
} sort_query;

#endif
