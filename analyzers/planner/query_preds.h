/* What a query asks of the index, read from its filter and sort documents:
 * per field, whether a predicate pins it to one value (a point), to a few
 * ($in, a point set), or to a range, and whether those bounds can hold
 * strings (which matters when the index's collation is not the query's).
 *
 * Pure and allocation-free: field names point into the caller's BSON, which
 * must outlive the result. Used by the sort rule and the ESR suggestion. */
#ifndef MG_ANALYZERS_PLANNER_QUERY_PREDS_H
#define MG_ANALYZERS_PLANNER_QUERY_PREDS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QUERY_PREDS_MAX      64  /* distinct fields; more and the rule gives no verdict */
#define QUERY_ORS_MAX        4   /* $or clauses looked into */
#define QUERY_SORT_MAX       32  /* the server's own limit on sort keys */
#define QUERY_IN_EXPLODE_MAX 200 /* point scans the planner merges for a sort */
#define QUERY_ELEMS_MAX      4   /* $elemMatch operands kept */

typedef struct query_pred {
	const char *field;
	bool any;        /* some predicate names the field (relevance only) */
	bool point;      /* a single-value equality: {a: 5}, $eq, $in of one */
	bool point_nc;   /* ... whose value is not collatable (number, date, ...) */
	uint32_t points; /* smallest $in point set of 2..200 values, 0 if none */
	bool points_nc;  /* ... all of whose values are not collatable */
	bool bounded_nc; /* some predicate keeps the bounds off strings/objects/arrays */
	bool equality;   /* ESR equality: a plain value, $eq, or an $in of one value
	                    (an array value is equality here but not one point) */
	bool range;      /* an ESR range operator: $gt.., $ne, $nin, $regex, $exists,
	                    a regex value, or an $in of two or more values */
	uint8_t geo;     /* QUERY_GEO_*: the index kind $geoWithin / $geoIntersects needs */
	/* Some predicate compares collatable values (strings, documents,
	 * arrays: an equality, $in, a range, $ne, $nin, $all): the query's
	 * collation decides it. A regex never does ($regex ignores the
	 * collation), nor $exists, $type, $size or $mod. */
	bool collates;
	/* An anchored regex ({a: /^x/}, $regex) bounds the field on an index
	 * with the simple collation, whatever the query's (planner_ixselect:
	 * a regex's bounds are raw strings); on an index with another
	 * collation it bounds nothing. */
	bool regex_bounded;
	/* $ne, $nin or $exists: true, whose bounds take in documents and
	 * arrays, unless a point or a comparison ($gt, ...) narrows them
	 * (compared): a wildcard index then scans the field's sub-paths too */
	bool spans_objects;
	bool compared;
} query_pred;

/* The geo index a $geoWithin or $geoIntersects can use (only one of its
 * kind can): 2dsphere for a GeoJSON $geometry, $centerSphere and
 * $geoIntersects; 2d for the legacy $box, $center and $polygon. */
enum { QUERY_GEO_NONE, QUERY_GEO_SPHERE, QUERY_GEO_FLAT };

typedef struct query_preds {
	query_pred p[QUERY_PREDS_MAX]; /* in the filter's order of first mention */
	size_t n;
	bool overflow;     /* more fields than QUERY_PREDS_MAX */
	bool text_or_near; /* $text, $near, $nearSphere: the planner goes its own way */
	bool refused;      /* an operator mongod does not know: it refuses the query */
	/* $or clauses (top level or in a top-level $and) with two or more branches:
	 * the array's bytes, inside the caller's filter. */
	struct {
		const uint8_t *data;
		uint32_t len;
	} ors[QUERY_ORS_MAX];
	size_t nors;
	bool ors_overflow;
	/* {f: {$elemMatch: {...}}}: the operand's bytes, inside the caller's
	 * filter, for the ESR suggestion (esr.c), which indexes what the
	 * $elemMatch tests; f itself is neither a point nor a range. */
	struct {
		const char *field;
		const uint8_t *data;
		uint32_t len;
	} elems[QUERY_ELEMS_MAX];
	size_t nelems;
} query_preds;

/* Collects the conjunctive predicates of filter (NULL: none): top-level
 * fields, top-level $and (nested), and a single-branch $or, which the server
 * flattens. Nothing under $or (2+ branches), $nor, $not, $elemMatch or $expr
 * counts. Adds to what p already holds, so a caller can read an $or branch
 * on top of the enclosing predicates. Call query_preds_init first. */
void query_preds_init(query_preds *p);

/* Whether mongod's query parser knows the operator op: one of a filter's
 * top level (top: $and, $or, $expr, ...) or of an operator document on a
 * field ($eq, $gt, $in, ...). It answers an unknown one with BadValue
 * ("unknown operator", "unknown top level operator") and reads nothing:
 * no rule judges such a query. The internal $_internal... operators are
 * taken as known. */
bool query_operator_known(const char *op, bool top);

/* Whether mongod refuses filter for an operator it does not know, at any
 * depth: the filter's top level, each field's operator document, inside
 * $and / $or / $nor branches, $not and $elemMatch. mongod parses the whole
 * filter before it runs any of it, so one unknown operator anywhere fails
 * the whole statement: the engine reports no finding on it (verdict.c). */
bool query_filter_refused(const bson_t *filter);
void query_preds_collect(query_preds *p, const bson_t *filter);

/* An $and or $or array as the planner reads it, for any predicate
 * collector: an $or of two or more branches is a disjunction, returned
 * whole (true, its bytes in *or_data and *or_len, pointing into the
 * caller's filter); anything else (an $and, or an $or of one branch, which
 * the server flattens) is a conjunction: each(arg, sub) is called for
 * every document element, and false comes back. */
bool query_preds_branches(const bson_iter_t *arr, bool is_or, const uint8_t **or_data,
                          uint32_t *or_len, void (*each)(void *arg, const bson_t *sub), void *arg);
const query_pred *query_preds_find(const query_preds *p, const char *field);

/* ---- $expr: the comparisons mongod rewrites for an index ---- */

/* One comparison of a $expr that mongod (5.0+, RewriteExpr) rewrites into
 * an index-usable match ($_internalExprEq, ...Gt, ...Gte, ...Lt, ...Lte):
 * {$op: ["$f", v]} in either order, v a constant (not an array, a
 * document or undefined) or a variable known before the query is planned:
 * a user one ("$$name": a name starts with a lower-case letter; bound by
 * find's `let` or, per outer document, a $lookup's), or "$$NOW" or
 * "$$CLUSTER_TIME", folded into a date or a timestamp first. */
typedef struct query_expr_cmp {
	const char *field;        /* f: the path's bytes after '$', inside the filter */
	const char *op;           /* "$eq", "$gt", "$gte", "$lt" or "$lte" */
	const bson_iter_t *value; /* v */
	bool variable;            /* v is a variable: its value is not known here
	                             (never null, a string or an array for
	                             $$NOW and $$CLUSTER_TIME) */
} query_expr_cmp;

/* An aggregation expression operand "$a.b" (not "$$var", not "$"): the
 * path after '$', or NULL. */
const char *query_expr_field(const bson_iter_t *v);

/* Calls each(arg, c) for every such comparison of the $expr expr (an
 * iterator on its value), alone or in an $and (nested up to 8 deep), and
 * other(arg) for every member that is not one (a comparison of two paths,
 * another operator, ...; other may be NULL). The one reading of $expr
 * every rule and model shares: collection-scan's bounds, the sort rule's
 * points, the collation form's string comparisons. */
typedef void (*query_expr_each)(void *arg, const query_expr_cmp *c);
void query_expr_comparisons(const bson_iter_t *expr, query_expr_each each, void (*other)(void *arg),
                            void *arg);

typedef struct sort_key {
	const char *field;
	int direction; /* 1 or -1 */
} sort_key;

typedef enum {
	SORT_SPEC_KEYS,    /* keys[] holds an ordinary sort */
	SORT_SPEC_NONE,    /* empty sort, $natural, or a {$meta: ...} key: no index question */
	SORT_SPEC_INVALID, /* something the server would reject, or too long */
} sort_spec_kind;

typedef struct sort_spec {
	sort_key keys[QUERY_SORT_MAX];
	size_t n;
} sort_spec;

sort_spec_kind query_sort_parse(const bson_t *sort, sort_spec *out);

/* Whether a regex with this pattern and these options has a literal
 * prefix an index can bound: mongod bounds a regex anchored with \A, or
 * with ^ and no m option, that has no i, s or x option and no alternation,
 * by the literal characters after the anchor. */
bool query_regex_bounded(const char *pattern, const char *options);

/* Whether the document v is on holds operators ({$gt: 1}): its first key
 * starts with '$' and is not a DBRef's ($ref, $id, $db). */
bool query_is_operator_doc(const bson_iter_t *v);

/* Whether every document matched by all of filters (n documents, a
 * conjunction; NULL entries are skipped) is certainly matched by expr, a
 * partialFilterExpression: each of expr's constraints (equality, $eq, $in,
 * $gt/$gte/$lt/$lte, $exists: true, under $and, or one $or branch) follows
 * from one the filters put on the same field (equality, $eq, $in, a range,
 * $exists: true, at the top level or under $and). Numbers, dates, ObjectIds
 * and booleans are ordered; strings only compare equal byte for byte. False
 * whenever it cannot tell: mongod uses a partial index only when the
 * implication holds (expression::isSubsetOf). In implies.c. */
bool query_implies(const bson_t *const *filters, size_t n, const bson_t *expr);

/* Collation helpers. NULL, {} and {locale: "simple"} are the simple
 * collation; two collations are the same when locale and strength are
 * (strength defaults to 3). */
bool query_collation_is_simple(const bson_t *c);
bool query_collation_equal(const bson_t *a, const bson_t *b);

#endif
