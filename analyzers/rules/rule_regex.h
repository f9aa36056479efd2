/* case-insensitive-regex: a regular expression with the i flag used to match
 * documents. Such a regex has no fixed prefix, so an index cannot bound the
 * scan: mongod reads every key of the index, or every document.
 *
 * Caught, at any depth of a filter: {f: /x/i}; {f: {$regex: /x/i}};
 * {f: {$regex: "x", $options: "i"}} (options may hold other letters);
 * {f: {$regex: /x/, $options: "i"}}; a pattern opening with an inline flag
 * group that turns on i ("(?i)", "(?im)", "(?i:...)", also after a leading
 * "^"); regexes in $in, $nin and $all; under $not; under $elemMatch in both
 * its forms; under $and, $or and $nor; and $regexMatch / $regexFind /
 * $regexFindAll with i (in options, or a /x/i regex) inside $expr. Pipelines:
 * $match stages, $graphLookup.restrictSearchWithMatch and $geoNear.query, in
 * the pipeline and every nested one ($lookup, $unionWith, $facet).
 *
 * Deliberately not caught: {f: {$eq: /x/i}} and regexes inside array or
 * document literals (they compare as values, not patterns); strings that
 * merely look like a regex ("/x/i"); $text with $caseSensitive: false (a
 * text index serves it); regexes in $project and other non-filter stages,
 * and in update pipelines (they compute values, not select documents);
 * arrayFilters (they pick array elements of documents already selected by q,
 * so they never decide an index scan); an inline (?i) that is not at the
 * start of the pattern (it makes only part of it insensitive).
 *
 * Also a query run with a collation of strength 1 or 2 without caseLevel
 * (caseLevel: true compares case at those strengths) (find, count,
 * distinct, update / delete statements, findAndModify, bulkWrite ops, an
 * aggregation's leading $match) whose collated predicates (bounds that may
 * hold strings: {f: "x"}, $in, $gt ... on strings) no index with that
 * same collation can serve (rule_regex.c says what serves), judged against
 * the collection's index list: the planner uses no index of another
 * collation for them, so the query scans. Silent without an explicit
 * collation (the collection's default applies), when the collation is the
 * collection's default (the _id index's collation in listIndexes), when
 * the list is not known yet, when every predicate is on non-strings
 * ({age: 5}), with a hint, and when the filter has a case-insensitive
 * regex (that finding covers it). Collations compare by locale, strength
 * and caseLevel (index_collation_same). Not judged: $exists, $type and
 * $regex predicates count as collated too (query_preds does not tell them
 * apart); sort-only queries are index-mismatched-sort's. */
#ifndef MG_ANALYZERS_RULES_RULE_REGEX_H
#define MG_ANALYZERS_RULES_RULE_REGEX_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* What matched, for the finding's detail and the suggestion. */
typedef struct regex_hit {
	char field[128]; /* dotted field path; "" when the input is computed */
	char how[96];    /* the form: "$regex with $options \"i\"", ... */
	char coll[128];  /* the joined collection when the match is inside a
	                    $lookup / $unionWith / $graphLookup; "" otherwise */
	bool too_deep;   /* not a regex seen: nesting beyond what is walked */
} regex_hit;

#define COLLATION_FIELDS_MAX 4

/* A collated query that no index of its collation serves. */
typedef struct collation_hit {
	const char *fields[COLLATION_FIELDS_MAX]; /* collated fields, into the filter */
	size_t nfields;
	bool more;          /* more than COLLATION_FIELDS_MAX */
	const char *locale; /* the query's collation, into the request */
	int64_t strength;   /* 1 or 2 (and no caseLevel) */
} collation_hit;

/* filter: an iterator positioned on a filter document. True when a
 * case-insensitive pattern selects documents and no point predicate on
 * another field (an equality, $in or $all of literals in the top-level
 * conjunction) decides the read: the pattern is then a residual filter on
 * what that selects, and an unindexed point is collection-scan's finding. */
bool rule_regex_filter(const bson_iter_t *filter, regex_hit *hit);

/* pipeline: an iterator positioned on an array of stages. */
bool rule_regex_pipeline(const bson_iter_t *pipeline, regex_hit *hit);

/* True when the option letters contain i. */
bool rule_regex_options_insensitive(const char *options);

/* True when the pattern opens (after an optional "^") with an inline flag
 * group that turns i on: "(?i)", "(?mi)", "(?i:...)", but not "(?-i)". */
bool rule_regex_pattern_insensitive(const char *pattern);

#endif
