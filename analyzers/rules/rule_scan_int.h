/* What collection-scan's check (rule_scan.c) hands its words
 * (rule_scan_words.c): the filter's predicates as the check read them,
 * and why a read was reported. Only those two include this. */
#ifndef MG_ANALYZERS_RULES_RULE_SCAN_INT_H
#define MG_ANALYZERS_RULES_RULE_SCAN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzers/planner/ixselect.h"
#include "analyzers/planner/query_preds.h"
#include "analyzers/rules/rule_api.h"

#define SCAN_FIELDS_MAX 32 /* more and the rule stays silent */
#define SCAN_ORS_MAX    4
#define SCAN_WHY_MAX    6 /* what gave no bounds, named in the detail */
#define SCAN_MAX_DEPTH  8 /* $or / $and nesting read */

typedef struct scan_why {
	const char *field; /* NULL: a top-level operator */
	const char *what;  /* "$ne", "$not of a regex", "$where" */
} scan_why;

typedef struct scan_preds {
	ixselect_field f[SCAN_FIELDS_MAX];
	size_t n;
	struct {
		const uint8_t *data;
		uint32_t len;
	} ors[SCAN_ORS_MAX];
	size_t nors;
	scan_why why[SCAN_WHY_MAX];
	size_t nwhy;
	/* The filter documents whose conjunction selects the documents (the
	 * filter, and an $or branch being judged): what a partial index's
	 * filter must follow from. */
	const bson_t *conj[SCAN_MAX_DEPTH + 2];
	size_t nconj;
	bool in_branch;    /* conj's last is an $or branch, the others around the $or */
	bool unknown;      /* overflow, $text, $near, too deep: say nothing */
	bool refused;      /* ... an operator mongod refuses (in any $or branch too) */
	bool predicates;   /* some predicate at all (not an empty filter) */
	bool or_unbounded; /* an $or clause had a branch no index bounds */
	/* collection-scan's question, not the collation check's: complements
	 * of points on a unique key bound nothing (ixselect_complements) */
	bool complements_scan;
	const bson_t *collation; /* the query's, or the collection's default */
} scan_preds;

typedef enum {
	CAUSE_FILTER,  /* no index bounds the filter */
	CAUSE_EMPTY,   /* an empty filter, nothing else bounding the read */
	CAUSE_NATURAL, /* hint {$natural} */
	CAUSE_HINTED,  /* the hinted index gets no bounds */
	CAUSE_COUNTED, /* a count of everything, hinted: it reads the index, not the metadata */
	CAUSE_LOOKUP, /* a $lookup's foreign field (a $graphLookup's connectToField) has no index */
} scan_cause;

typedef struct scan_facts {
	scan_cause cause;
	const rule_query *q; /* NULL for CAUSE_LOOKUP */
	const scan_preds *p;
	const index_set *set;
	int64_t docs;
	const char *hinted;  /* CAUSE_HINTED, CAUSE_COUNTED: the index's name */
	const char *from;    /* CAUSE_LOOKUP */
	const char *foreign; /* CAUSE_LOOKUP */
	bool graph;          /* CAUSE_LOOKUP: a $graphLookup */
	bool by_sort;        /* CAUSE_NATURAL: a sort {$natural}, not a hint */
	bool in_order;       /* CAUSE_EMPTY: an index provides the sort: read in its order */
	/* CAUSE_FILTER with a limit: the index whose order provides the sort,
	 * read until the limit's matches, or NULL */
	const char *order_index;
	uint32_t min; /* the rule's minDocuments where it was judged */
} scan_facts;

/* Whether the query sorts (a sort of keys; not $natural or {$meta}): with
 * no index providing the sort, a limit does not bound the read, every
 * document matched is read to sort them. */
static inline bool rule_scan_sorts(const rule_query *rq)
{
	sort_spec spec;
	return rq->q.sort && query_sort_parse(rq->q.sort, &spec) == SORT_SPEC_KEYS;
}

/* The words of a finding (rule_checks.words). */
void rule_scan_words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w);

#endif
