/* Implication: whether every document a filter matches is also matched by
 * an expression, a partial index's partialFilterExpression (query_preds.h,
 * query_implies). */
#include "analyzers/planner/query_preds.h"

#include <math.h>
#include <string.h>

#include "protocol/wire_iter.h"

/* ---- implication: is every document a filter matches also matched by an
 * expression? (a partial index's partialFilterExpression) ----
 *
 * mongod uses a partial index only when the query's filter implies the
 * index's filter (expression::isSubsetOf): an equality or range inside the
 * expression's, field by field. Here each constraint of the expression must
 * follow from one constraint the filter puts on the same field, among the
 * filter's conjuncts (top level and $and); anything this does not compare is
 * "not implied", so a partial index is taken as usable only when it certainly
 * is. One constraint at a time is sound for array fields too: each of the
 * filter's constraints is met by some element, which then meets the
 * expression's constraint it implies. */

/* IMP_TYPE: $type. IMP_PRESENT: a filter's predicate that matches only
 * where the field exists (a regex, $mod, $size, $elemMatch, $ne: null):
 * it implies $exists: true and nothing more (expression_algo.cpp,
 * _isSubsetOf of an ExistsMatchExpression). */
typedef enum {
	IMP_NONE,
	IMP_EQ,
	IMP_GT,
	IMP_GTE,
	IMP_LT,
	IMP_LTE,
	IMP_EXISTS,
	IMP_IN,
	IMP_TYPE,
	IMP_PRESENT,
} imp_op;

#define IMPLY_MAX_DEPTH 8

/* The values this test orders. Comparisons bracket by type ({$gt: 5}
 * matches numbers only), so two values compare only within one class.
 * Strings compare only for equality: their order depends on a collation. */
enum { CLS_NONE, CLS_NUMBER, CLS_STRING, CLS_DATE, CLS_OID, CLS_BOOL };

static int value_class(const bson_iter_t *v)
{
	switch (wire_iter_type(v)) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		return CLS_NUMBER;
	case BSON_TYPE_DOUBLE:
		return isnan(bson_iter_double(v)) ? CLS_NONE : CLS_NUMBER;
	case BSON_TYPE_UTF8:
		return CLS_STRING;
	case BSON_TYPE_DATE_TIME:
		return CLS_DATE;
	case BSON_TYPE_OID:
		return CLS_OID;
	case BSON_TYPE_BOOL:
		return CLS_BOOL;
	default:
		return CLS_NONE;
	}
}

static int sign3(double d)
{
	return d < 0 ? -1 : d > 0;
}

/* -1, 0 or 1 as a is below, equal to or above b; *ok false when they are not
 * of one class (or are strings that differ: no order without a collation). */
static int compare_values(const bson_iter_t *a, const bson_iter_t *b, bool *ok)
{
	int cls = value_class(a);
	*ok = cls != CLS_NONE && cls == value_class(b);
	if (!*ok)
		return 0;
	switch (cls) {
	case CLS_NUMBER:
		if (wire_iter_type(a) != BSON_TYPE_DOUBLE &&
		    wire_iter_type(b) != BSON_TYPE_DOUBLE) {
			int64_t x = bson_iter_as_int64(a), y = bson_iter_as_int64(b);
			return x < y ? -1 : x > y;
		}
		return sign3(bson_iter_as_double(a) - bson_iter_as_double(b));
	case CLS_STRING: {
		uint32_t la, lb;
		const char *sa = bson_iter_utf8(a, &la), *sb = bson_iter_utf8(b, &lb);
		*ok = la == lb && memcmp(sa, sb, la) == 0;
		return 0;
	}
	case CLS_DATE: {
		int64_t x = bson_iter_date_time(a), y = bson_iter_date_time(b);
		return x < y ? -1 : x > y;
	}
	case CLS_OID:
		return sign3(bson_oid_compare(bson_iter_oid(a), bson_iter_oid(b)));
	default:
		return (int)bson_iter_bool(a) - (int)bson_iter_bool(b);
	}
}

static imp_op imp_op_of(const char *op, const bson_iter_t *v)
{
	if (strcmp(op, "$eq") == 0)
		return IMP_EQ;
	if (strcmp(op, "$gt") == 0)
		return IMP_GT;
	if (strcmp(op, "$gte") == 0)
		return IMP_GTE;
	if (strcmp(op, "$lt") == 0)
		return IMP_LT;
	if (strcmp(op, "$lte") == 0)
		return IMP_LTE;
	if (strcmp(op, "$in") == 0)
		return WIRE_ITER_HOLDS_ARRAY(v) ? IMP_IN : IMP_NONE;
	if (strcmp(op, "$exists") == 0)
		return bson_iter_as_bool(v) ? IMP_EXISTS : IMP_NONE;
	if (strcmp(op, "$type") == 0)
		return IMP_TYPE;
	if (strcmp(op, "$regex") == 0 || strcmp(op, "$mod") == 0 || strcmp(op, "$size") == 0 ||
	    strcmp(op, "$elemMatch") == 0 ||
	    (strcmp(op, "$ne") == 0 && wire_iter_type(v) == BSON_TYPE_NULL))
		return IMP_PRESENT;
	return IMP_NONE;
}

/* A $type operand's one type code (its alias resolved; "number" is 0);
 * -2 for a list or anything else. */
static int type_code(const bson_iter_t *v)
{
	static const char *const alias[] = {
	    "number",    "double",     "string",    "object",
	    "array",     "binData",    "undefined", "objectId",
	    "bool",      "date",       "null",      "regex",
	    "dbPointer", "javascript", "symbol",    "javascriptWithScope",
	    "int",       "timestamp",  "long",      "decimal"};
	if (WIRE_ITER_HOLDS_UTF8(v)) {
		const char *s = bson_iter_utf8(v, NULL);
		for (int i = 0; i < (int)(sizeof(alias) / sizeof(alias[0])); i++)
			if (strcmp(s, alias[i]) == 0)
				return i;
		if (strcmp(s, "minKey") == 0)
			return -1;
		return strcmp(s, "maxKey") == 0 ? 127 : -2;
	}
	if (WIRE_ITER_HOLDS_NUMBER(v)) {
		double d = bson_iter_as_double(v);
		int c = (int)d;
		return (double)c == d && ((c >= 1 && c <= 19) || c == -1 || c == 127) ? c : -2;
	}
	return -2;
}

static bool constraint_implies(imp_op qop, const bson_iter_t *v, imp_op pop, const bson_iter_t *c);

/* Whether the value v (matched by equality) meets the constraint (pop, c). */
static bool value_meets(const bson_iter_t *v, imp_op pop, const bson_iter_t *c)
{
	bson_iter_t el;
	bool ok;
	if (pop == IMP_EXISTS)
		return value_class(v) != CLS_NONE; /* not null, missing, or an array */
	if (pop == IMP_IN) {
		if (!wire_iter_recurse(c, &el))
			return false;
		while (wire_iter_next(&el))
			if (constraint_implies(IMP_EQ, v, IMP_EQ, &el))
				return true;
		return false;
	}
	int r = compare_values(v, c, &ok);
	if (!ok || (value_class(v) == CLS_STRING && pop != IMP_EQ))
		return false;
	switch (pop) {
	case IMP_EQ:
		return r == 0;
	case IMP_GT:
		return r > 0;
	case IMP_GTE:
		return r >= 0;
	case IMP_LT:
		return r < 0;
	case IMP_LTE:
		return r <= 0;
	default:
		return false;
	}
}

/* A range of the filter (qop: $gt.. $lte, bound v) inside (pop, c). */
static bool range_implies(imp_op qop, const bson_iter_t *v, imp_op pop, const bson_iter_t *c)
{
	bool ok;
	if (pop == IMP_EXISTS)
		return value_class(v) != CLS_NONE;
	if (value_class(v) == CLS_STRING)
		return false;
	int r = compare_values(v, c, &ok);
	if (!ok)
		return false;
	bool q_lower = qop == IMP_GT || qop == IMP_GTE;
	bool p_lower = pop == IMP_GT || pop == IMP_GTE;
	if ((pop != IMP_GT && pop != IMP_GTE && pop != IMP_LT && pop != IMP_LTE) ||
	    q_lower != p_lower)
		return false;
	/* Strict in the expression and inclusive in the filter: the bound
	 * itself must be beyond c. */
	bool strict = (pop == IMP_GT || pop == IMP_LT) && (qop == IMP_GTE || qop == IMP_LTE);
	if (q_lower)
		return strict ? r > 0 : r >= 0;
	return strict ? r < 0 : r <= 0;
}

static bool constraint_implies(imp_op qop, const bson_iter_t *v, imp_op pop, const bson_iter_t *c)
{
	bson_iter_t el;
	bool any = false;
	switch (qop) {
	case IMP_EQ:
		return value_meets(v, pop, c);
	case IMP_EXISTS:
		return pop == IMP_EXISTS;
	case IMP_IN: /* every value of the $in meets it */
		if (!wire_iter_recurse(v, &el))
			return false;
		while (wire_iter_next(&el)) {
			if (WIRE_ITER_HOLDS_REGEX(&el) || !value_meets(&el, pop, c))
				return false;
			any = true;
		}
		return any;
	case IMP_TYPE: /* an equivalent $type; and the field exists */
		return pop == IMP_EXISTS ||
		       (pop == IMP_TYPE && type_code(v) != -2 && type_code(v) == type_code(c));
	case IMP_PRESENT:
		return pop == IMP_EXISTS;
	case IMP_NONE:
		return false;
	default:
		return range_implies(qop, v, pop, c);
	}
}

/* The predicate on one field of the filter (v: its value) implies (pop, c). */
static bool predicate_implies(const bson_iter_t *v, imp_op pop, const bson_iter_t *c)
{
	bson_iter_t op;
	if (WIRE_ITER_HOLDS_REGEX(v))
		return constraint_implies(IMP_PRESENT, v, pop, c);
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !query_is_operator_doc(v))
		return constraint_implies(IMP_EQ, v, pop, c);
	if (!wire_iter_recurse(v, &op))
		return false;
	while (wire_iter_next(&op))
		if (constraint_implies(imp_op_of(wire_iter_key(&op), &op), &op, pop, c))
			return true;
	return false;
}

/* Some conjunct of doc (top level or in $and) on field implies (pop, c). */
static bool doc_implies(const bson_t *doc, const char *field, imp_op pop, const bson_iter_t *c,
                        int depth)
{
	bson_iter_t it, el;
	bson_t sub;
	if (depth > IMPLY_MAX_DEPTH || !bson_iter_init(&it, doc))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (strcmp(k, "$and") == 0) {
			if (WIRE_ITER_HOLDS_ARRAY(&it) && wire_iter_recurse(&it, &el))
				while (wire_iter_next(&el))
					if (wire_iter_doc_view(&el, &sub) &&
					    doc_implies(&sub, field, pop, c, depth + 1))
						return true;
		} else if (strcmp(k, field) == 0 && predicate_implies(&it, pop, c)) {
			return true;
		}
	}
	return false;
}

static bool filters_imply(const bson_t *const *filters, size_t n, const char *field, imp_op pop,
                          const bson_iter_t *c)
{
	for (size_t i = 0; i < n; i++)
		if (filters[i] && doc_implies(filters[i], field, pop, c, 0))
			return true;
	return false;
}

/* Every constraint the expression puts on field (v: its value) follows. */
static bool field_implied(const bson_t *const *filters, size_t n, const char *field,
                          const bson_iter_t *v)
{
	bson_iter_t op;
	if (WIRE_ITER_HOLDS_REGEX(v))
		return false;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !query_is_operator_doc(v))
		return filters_imply(filters, n, field, IMP_EQ, v);
	if (!wire_iter_recurse(v, &op))
		return false;
	while (wire_iter_next(&op)) {
		imp_op pop = imp_op_of(wire_iter_key(&op), &op);
		if (pop == IMP_NONE || pop == IMP_PRESENT ||
		    !filters_imply(filters, n, field, pop, &op))
			return false; /* $exists: false, $mod, ...: not compared here */
	}
	return true;
}

static bool expr_implied(const bson_t *const *filters, size_t n, const bson_t *expr, int depth)
{
	bson_iter_t it, el;
	bson_t sub;
	if (depth > IMPLY_MAX_DEPTH || !bson_iter_init(&it, expr))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		bool is_and = strcmp(k, "$and") == 0, is_or = strcmp(k, "$or") == 0;
		if (k[0] != '$') {
			if (!field_implied(filters, n, k, &it))
				return false;
			continue;
		}
		if ((!is_and && !is_or) || !WIRE_ITER_HOLDS_ARRAY(&it) ||
		    !wire_iter_recurse(&it, &el))
			return false;
		bool some = false; /* $or: one branch implied is enough */
		while (wire_iter_next(&el)) {
			bool b = wire_iter_doc_view(&el, &sub) &&
			         expr_implied(filters, n, &sub, depth + 1);
			if (is_and && !b)
				return false;
			some |= b;
		}
		if (is_or && !some)
			return false;
	}
	return true;
}

bool query_implies(const bson_t *const *filters, size_t n, const bson_t *expr)
{
	return expr != NULL && expr_implied(filters, n, expr, 0);
}
