/* index-mismatched-sort: can any index provide this sort?
 *
 * Pure: takes the collection's index set and the query's filter, sort,
 * collation and hint, and applies the planner's rules (PROTOCOL.md, "When an
 * index can provide a sort"). When the answer is no, writes the index the
 * ESR rule recommends as a runnable mongosh createIndex command. */
#ifndef MG_ANALYZERS_RULE_SORT_H
#define MG_ANALYZERS_RULE_SORT_H

#include <bson/bson.h>
#include <stddef.h>

#include "analyzers/index_set.h"

typedef struct sort_query {
	const char *db;
	const char *coll;
	const bson_t *filter;    /* NULL: no predicate */
	const bson_t *sort;      /* the sort specification */
	const bson_t *collation; /* NULL: simple collation */
	const bson_t *hint_doc;  /* hint as a key pattern, or NULL */
	const char *hint_name;   /* hint as an index name, or NULL */
} sort_query;

typedef enum {
	SORT_PROVIDED,   /* some usable index provides it (or no index question) */
	SORT_BLOCKING,   /* mongod will sort in memory */
	SORT_NO_VERDICT, /* cannot tell (wildcard index, odd spec, ...) */
} sort_verdict;

/* suggestion (may be NULL) receives e.g.
 *   db.getSiblingDB("shop").getCollection("orders").createIndex({"status": 1, "created": -1})
 * when the verdict is SORT_BLOCKING. detail (may be NULL) says why in one line. */
sort_verdict sort_check(const index_set *s, const sort_query *q, char *suggestion,
                        size_t suggestion_len, char *detail, size_t detail_len);

#endif
