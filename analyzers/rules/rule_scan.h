/* collection-scan: a filter that no index on the collection can bound, so
 * mongod reads every document (or every key of an index). What mongod's
 * notablescan exists to forbid, and the most common cause of slow queries.
 *
 * Read (docs/rules.md, "collection-scan"): the filter of find, count, distinct,
 * update and delete statements, findAndModify, bulkWrite update and delete
 * ops, an aggregation's leading $match stages (those of a $unionWith's
 * pipeline on its collection; countDocuments' empty $match too); and the foreign side of
 * every $lookup with localField / foreignField (each joined document is
 * looked up in `from`, so a foreignField no index leads with scans `from`
 * once per document).
 *
 * Which index a predicate bounds is planner knowledge (ixselect.h): per
 * operator and per index kind (btree, sparse, hashed, wildcard, 2d,
 * 2dsphere, text, hidden, partial, multikey, collation), as mongod's
 * planner_ixselect decides. Equality, $in, ranges, $type, $all, anchored
 * case-sensitive regexes, $exists (true on a sparse index only), $elemMatch
 * (by what it puts on the key's sub-field) and the negations mongod
 * complements ($ne, $nin, $not of one comparison) bound a btree key;
 * $expr only in the forms mongod 5.0+ pushes down ($eq/$gt/$gte/$lt/$lte of
 * "$f" and a constant, also in $expr's $and), never on a key explain says
 * is multikey. A partial index bounds only a filter that implies its
 * partialFilterExpression (query_implies); an index of another collation
 * than the query's (its own, else the collection's default) no predicate
 * that compares strings. $and and implicit AND: one bounded conjunct is
 * enough. $or: bounded when some $or clause has every branch bounded, each
 * branch judged with the enclosing conjuncts. No bounds: $nor, $mod,
 * $size, $where, other $expr, bit tests, $jsonSchema, unanchored or
 * case-insensitive regexes, negations of a regex, $type, $mod or an array.
 *
 * Empty filter (or only $comment): reported unless a limit below
 * minDocuments bounds what is read (updates without multi, deletes with
 * limit 1 and findAndModify read one document), a sort an index provides
 * makes it an index scan in order, it is a count (metadata), or a distinct
 * whose key an index leads with (a distinct scan; with a filter only when it
 * names only that index's fields). A filter no index bounds
 * with a sort an index provides and a limit below minDocuments is silent
 * too: the scan stops after that many matches in index order.
 *
 * Silent, never a guess: the index list or the collection's estimated
 * document count unknown (not fetched yet: this rule never holds a request),
 * fewer than minDocuments documents, an index whose spec cannot be read or
 * that this model does not judge (2dsphere version 1, an unknown key type),
 * $text or $near (they need their index or fail), a hint naming no single
 * index or a wildcard, geo or text index, more fields or $or clauses than
 * are read.
 * Hidden indexes never bound anything.
 *
 * Suggestion: the ESR index for the filter and sort (esr.h) as a runnable
 * createIndex, or, when no predicate can be bounded at all, how to rewrite
 * the filter. Deliberately not reported: aggregations without a leading
 * $match (whole-collection analytics), $graphLookup, explain (logged, never
 * blocked, like every rule). */
#ifndef MG_ANALYZERS_RULES_RULE_SCAN_H
#define MG_ANALYZERS_RULES_RULE_SCAN_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "analyzers/planner/index_set.h"

enum { SCAN_PARAM_MIN_DOCUMENTS = 0 };

/* Whether a regex with this pattern and these options has a literal
 * prefix an index can bound: mongod bounds a regex anchored with \A, or
 * with ^ and no m option, that has no i, s or x option and no alternation,
 * by the literal characters after the anchor. */
bool rule_scan_regex_bounded(const char *pattern, const char *options);

typedef enum {
	SCAN_BOUNDED, /* some usable index gets bounds */
	SCAN_UNBOUNDED,
	SCAN_UNKNOWN, /* a wildcard or unreadable index, $text, too much to read */
} scan_verdict;

/* The planner question alone, for tests and tools: can an index of set
 * bound filter (NULL: empty), with hint (a key pattern or a name, both
 * NULL: none)? */
scan_verdict rule_scan_filter(const index_set *set, const bson_t *filter, const bson_t *hint_doc,
                              const char *hint_name);
/* The same for a query with a collation (NULL: none given, so the
 * collection's default, the _id index's). */
scan_verdict rule_scan_filter_collated(const index_set *set, const bson_t *filter,
                                       const bson_t *collation, const bson_t *hint_doc,
                                       const char *hint_name);

#endif
