/* index-mismatched-sort: can any index provide this sort?
 *
 * Pure: takes the collection's index set and the query's filter, sort,
 * collation and hint, and applies the planner's rules for when an index can
 * provide a sort (docs/rules.md, "index-mismatched-sort"). The verdict and the facts its words need
 * are computed once (sort_evaluate); the one-line detail and, for a blocking sort, the index the
 * ESR rule recommends as a runnable mongosh createIndex command are rendered from those facts only
 * when someone reads them. */
#ifndef MG_ANALYZERS_RULES_RULE_SORT_H
#define MG_ANALYZERS_RULES_RULE_SORT_H

#include <stdbool.h>
#include <stddef.h>

#include "analyzers/planner/index_set.h"
#include "analyzers/planner/query_preds.h"
#include "analyzers/planner/sort_bounds.h"
#include "analyzers/planner/sort_query.h"

typedef enum {
	SORT_PROVIDED,   /* some usable index provides it (or no index question, or a
	                    unique key bounds it to at most 200 documents) */
	SORT_BLOCKING,   /* mongod will sort in memory */
	SORT_NO_VERDICT, /* cannot tell (wildcard index, odd spec, ...) */
} sort_verdict;

/* The verdict, and why, as "sort {..} on db.coll: <what><name><tail>".
 * Pointers are into q, the index set and static strings: valid while the
 * caller holds both. */
typedef struct sort_facts {
	sort_verdict verdict;
	const sort_query *q;
	const index_set *set;
	bool show_sort;        /* sort was parsed and is shown in the detail */
	sort_spec sort;        /* valid when show_sort */
	query_preds preds;     /* the filter's predicates: for the ESR suggestion */
	sort_names names;      /* the paths of the bounds an $elemMatch adds to preds */
	const bson_t *coll;    /* the query's collation, or the collection's default */
	const char *what;      /* never NULL */
	const char *name;      /* an index name, or NULL */
	const char *tail;      /* or NULL */
	const char *maybe_why; /* with name: " <why> and may provide it" follows */
	bool list_indexes;     /* blocking for want of an index: list them ... */
	bool collation_near;   /* ... after "with the query's collation" */
} sort_facts;

void sort_evaluate(const index_set *s, const sort_query *q, sort_facts *f);

/* One line saying why (cut to len - 1 bytes). */
void sort_facts_detail(const sort_facts *f, char *detail, size_t len);
/* For SORT_BLOCKING, e.g.
 *   db.getSiblingDB("shop").getCollection("orders").createIndex({"status": 1, "created": -1})
 * "" for any other verdict or when it does not fit. */
void sort_facts_suggestion(const sort_facts *f, char *suggestion, size_t len);

/* sort_evaluate and both renderings at once (tests and tools); suggestion
 * and detail may be NULL. */
sort_verdict sort_check(const index_set *s, const sort_query *q, char *suggestion,
                        size_t suggestion_len, char *detail, size_t detail_len);

#endif
