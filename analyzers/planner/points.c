/* Points that decide a read: whether a filter holds, beside a predicate on
 * one field, a point predicate on another, through which an index reads
 * only the documents it names (points.h). */
#include "analyzers/planner/points.h"

#include <string.h>

#include "analyzers/planner/query_preds.h"
#include "protocol/wire_iter.h"

static bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* An equality, $in or $all of literal values on a field k: an index on k bounds the
 * read to the documents it names (an _id's, always), so a pattern beside it
 * is a residual filter on those documents, not a scan of every key. */
bool query_point_value(const bson_iter_t *it)
{
	if (WIRE_ITER_HOLDS_REGEX(it))
		return false;
	if (!WIRE_ITER_HOLDS_DOCUMENT(it))
		return true; /* a scalar or an array: an equality */
	bson_iter_t op;
	if (!wire_iter_recurse(it, &op) || !wire_iter_next(&op))
		return true; /* {} */
	const char *k = wire_iter_key(&op);
	if (k[0] != '$' || streq(k, "$ref") || streq(k, "$id") || streq(k, "$db"))
		return true; /* an embedded document, or a DBRef */
	do {
		k = wire_iter_key(&op);
		if (streq(k, "$eq") && !WIRE_ITER_HOLDS_REGEX(&op) &&
		    !WIRE_ITER_HOLDS_DOCUMENT(&op))
			return true;
		/* $in: the values' points ([] reads nothing); $all: each value's,
		 * an $and of equalities. A regex or an $elemMatch is not a point. */
		if ((streq(k, "$in") || streq(k, "$all")) && WIRE_ITER_HOLDS_ARRAY(&op)) {
			bson_iter_t e;
			bool any = false, literal = wire_iter_recurse(&op, &e);
			while (literal && wire_iter_next(&e)) {
				any = true;
				literal =
				    !WIRE_ITER_HOLDS_REGEX(&e) && !WIRE_ITER_HOLDS_DOCUMENT(&e);
			}
			if (literal && (any || streq(k, "$in")))
				return true;
		}
	} while (wire_iter_next(&op));
	return false;
}

typedef struct expr_point {
	const char *field;
	bool found;
} expr_point;

static void on_expr_cmp(void *arg, const query_expr_cmp *c)
{
	expr_point *e = arg;
	if (strcmp(c->op, "$eq") == 0 && strcmp(c->field, e->field) != 0 &&
	    (c->variable || !WIRE_ITER_HOLDS_REGEX(c->value)))
		e->found = true;
}

/* Whether the filter's top level reads through an index of its own beside
 * the pattern on field: $text (the text index, bounded by its terms), or
 * an $expr $eq of another field with a constant or a variable (5.0+, an
 * index point, as collection-scan counts it; query_expr_comparisons).
 * $near and $geoNear are not: without a maximum distance they return
 * every document, nearest first. */
/* One top-level member (c on it) of that kind. */
static bool operator_member_point(const bson_iter_t *c, const char *field)
{
	const char *k = wire_iter_key(c);
	if (streq(k, "$text"))
		return true;
	if (!streq(k, "$expr"))
		return false;
	expr_point e = {field, false};
	query_expr_comparisons(c, on_expr_cmp, NULL, &e);
	return e.found;
}

bool query_operator_point(const bson_iter_t *filter, const char *field)
{
	bson_iter_t c;
	if (!WIRE_ITER_HOLDS_DOCUMENT(filter) || !wire_iter_recurse(filter, &c))
		return false;
	while (wire_iter_next(&c))
		if (wire_iter_key(&c)[0] == '$' && operator_member_point(&c, field))
			return true;
	return false;
}

/* Whether the filter's top-level conjunction (its members and those of a
 * top-level $and) holds a point predicate on another field than the
 * pattern's: the read is then what that predicate selects, through an
 * index that leads with the field (the _id index, always), and the pattern
 * is a residual filter on those documents, not a scan of every key
 * (Mongoose's populate adds its match to {_id: {$in: [...]}} or
 * {foreignField: {$in: [...]}}). Where no index leads with the field the
 * cost is that field's missing index, which collection-scan reports with
 * the index to create; a collation index for the pattern would not help,
 * so the pattern is not this rule's finding either way. A range, or an
 * equality only inside an $or, bounds nothing here. */
static bool point_beside(const bson_iter_t *filter, const char *field, int depth)
{
	bson_iter_t c;
	if (depth > 4 || !WIRE_ITER_HOLDS_DOCUMENT(filter) || !wire_iter_recurse(filter, &c))
		return false;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (streq(k, "$and")) {
			bson_iter_t e;
			if (WIRE_ITER_HOLDS_ARRAY(&c) && wire_iter_recurse(&c, &e))
				while (wire_iter_next(&e))
					if (point_beside(&e, field, depth + 1))
						return true;
		} else if (k[0] != '$' ? strcmp(k, field) != 0 && query_point_value(&c)
		                       : operator_member_point(&c, field)) {
			return true;
		}
	}
	return false;
}

bool query_point_beside(const bson_iter_t *filter, const char *field)
{
	return point_beside(filter, field, 0);
}
