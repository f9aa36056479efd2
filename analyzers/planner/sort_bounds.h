/* What a filter bounds, beyond query_preds, for the question "can an index
 * provide this sort": the index keys an $elemMatch bounds, whether a
 * filter keeps out the documents a sparse index leaves out, and whether
 * an index's multikey paths spoil the order a bounded scan delivers.
 * Pure and allocation-free except for one small temporary document per
 * value-form $elemMatch. mongod's planner is the reference
 * (index_bounds_builder, planner_ixselect, query_solution's
 * computeSortsForScan). */
#ifndef MG_ANALYZERS_PLANNER_SORT_BOUNDS_H
#define MG_ANALYZERS_PLANNER_SORT_BOUNDS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "analyzers/planner/index_set.h"
#include "analyzers/planner/query_preds.h"

/* The paths sort_bounds_elems composes ("arr.f"): query_pred.field points
 * here, so this must live as long as the preds. */
typedef struct sort_names {
	char buf[512];
	size_t len;
} sort_names;

/* Adds to p the bounds each $elemMatch of p->elems[from..] puts on index
 * keys, as mongod builds them: the document form {arr: {$elemMatch: {f:
 * 5, g: {$gt: 1}}}} bounds arr.f to a point and arr.g to a range; the
 * value form {arr: {$elemMatch: {$eq: 5}}} bounds arr itself (a point for
 * $eq, a range for the others). An $elemMatch nested in one, $or or $not
 * inside it: not read (no bound added: the rule then sees no predicate,
 * which can only make it quieter where a bound would have served). */
void sort_bounds_elems(query_preds *p, size_t from, sort_names *names);

typedef enum {
	MISSING_EXCLUDED, /* some predicate on the field matches no document without it */
	MISSING_MATCHES,  /* the predicates on it match documents without it ({f: null},
	                     {$exists: false}, $in with null) */
	MISSING_UNSURE,   /* neither is certain ($ne, $nin, $not, none at all) */
} missing_kind;

/* Whether the filters (a conjunction, NULL entries skipped) keep out every
 * document without field: what makes a sparse index eligible for a
 * bounded scan (planner_ixselect: a sparse index is not used for a
 * predicate that a missing field satisfies). Top level and $and only. */
missing_kind sort_bounds_missing(const bson_t *const *filters, size_t n, const char *field);

/* The keys of d whose order a bounded scan with predicates p cannot
 * deliver because of arrays (bit i: keys[i]), as computeSortsForScan
 * decides from multikeyPaths: a multikey key whose own bounds are not
 * [MinKey, MaxKey], or that shares its first path component with another
 * multikey key whose bounds are not (SERVER-31898). Such a key pinned to
 * a point is skipped without being dropped from the sort; any other ends
 * the order the scan gives. 0 when d is not known to be multikey. */
uint32_t sort_bounds_multikey_cut(const index_def *d, const query_preds *p);

/* Adds to p the points the top-level $expr of filter gives: each {$eq:
 * ["$f", v]} (alone or in an $and; v a constant or a user variable, either
 * order: query_expr_comparisons), which mongod rewrites to an index point
 * on f ($_internalExprEq; in a $lookup sub-pipeline once the variables are
 * bound, 5.0). A variable is taken as not a string (no finding invented
 * under another collation). Two paths compared, or an array or document
 * value, give nothing. mongod does not
 * use such a point on a multikey path: counted anyway, which can miss a
 * finding there, never invent one. */
bool sort_bounds_expr(query_preds *p, const bson_t *filter); /* true: added some */

/* The equality a $lookup with localField/foreignField and a pipeline puts
 * before its pipeline, {foreignField: <the local value>}, appended to out
 * with the value unknown (the string "?", a point that may collate). */
void sort_bounds_lookup(bson_t *out, const char *foreign_field);

#endif
