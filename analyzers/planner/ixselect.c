/* ixselect: which index kinds a predicate bounds (ixselect.h). The rules
 * follow mongod's planner_ixselect and index_bounds_builder:
 * - equality, $in and ranges bound a btree key; a sparse key only when they
 *   cannot match null or a missing field; a hashed key equality and $in
 *   without regexes, and $exists (false: the null point; true: on a sparse
 *   key only, else every key); a wildcard index (sparse, keys for leaf
 *   values only) no null and no comparison to a non-empty object or array;
 * - negations ($ne, $nin, $not of one comparison or $exists) bound a
 *   non-sparse btree key with the complement of their bounds, except of an
 *   array, a regex, $mod, $type or $elemMatch; $ne: null (and $nin with
 *   null) only a key that is not multikey, and then a sparse one or a
 *   wildcard index too; never a hashed key;
 * - geo operators bound only their geo key: 2dsphere takes $geoIntersects
 *   and $geoWithin of a GeoJSON $geometry or $centerSphere, 2d $geoWithin of
 *   $box, $center, $polygon or $centerSphere; a 2dsphere (version 2+) or 2d
 *   index is never used without a geo predicate on it.
 * - any regex bounds a btree key and a wildcard index (an anchored
 *   case-sensitive one by its prefix, another by every string key, the
 *   pattern tested on the keys); never a hashed key;
 * - a predicate that compares strings (or objects, arrays) cannot use an
 *   index of another collation than the query's; a regex neither. */
#include "analyzers/planner/ixselect.h"

#include <stdatomic.h>
#include <string.h>

#include "analyzers/planner/query_preds.h"
#include "protocol/wire_iter.h"

/* An operator name: the first two bytes decide most comparisons. */
static inline bool op_is(const char *k, const char *lit)
{
	return k[0] == lit[0] && k[1] == lit[1] && strcmp(k + 2, lit + 2) == 0;
}

#define BTREE_ALL (IXB_BTREE | IXB_SPARSE)
#define HASH_ALL  (IXB_HASHED | IXB_HASHED_SPARSE)

static bool collatable(bson_type_t t)
{
	return t == BSON_TYPE_UTF8 || t == BSON_TYPE_SYMBOL || t == BSON_TYPE_DOCUMENT ||
	       t == BSON_TYPE_ARRAY;
}

static bool is_null(bson_type_t t)
{
	return t == BSON_TYPE_NULL || t == BSON_TYPE_UNDEFINED;
}

/* A non-empty document or array: a wildcard index holds no key for it. */
static bool nested(const bson_iter_t *v)
{
	bson_iter_t c;
	bson_type_t t = wire_iter_type(v);
	return (t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY) && wire_iter_recurse(v, &c) &&
	       wire_iter_next(&c);
}

static ixselect_pred pred(unsigned kinds, bool collated)
{
	ixselect_pred p = {kinds, collated, false};
	return p;
}

/* The kinds f bounds on an index whose collation is the query's (same),
 * or the simple one (simple). */
static inline unsigned field_kinds(const ixselect_field *f, bool same, bool simple)
{
	return (same ? f->any : f->nc) | (simple ? f->simple : 0u) |
	       (same && simple ? f->both : 0u);
}

static ixselect_pred equality(const bson_iter_t *v)
{
	bson_type_t t = wire_iter_type(v);
	if (is_null(t))
		return pred(IXB_BTREE | IXB_HASHED, false); /* null or missing */
	return pred(BTREE_ALL | HASH_ALL | (nested(v) ? 0u : IXB_WILD), collatable(t));
}

/* Any regex: an anchored case-sensitive one gives its prefix's range, any
 * other every string key (index_bounds_builder), with the pattern tested
 * on the keys, so only the documents whose key matches are read
 * (regex6.js asserts it): an index scan, never a collection scan. */
static ixselect_pred regex(const char *pattern)
{
	ixselect_pred p = pred(pattern ? BTREE_ALL | IXB_WILD : 0u, false);
	p.simple_only = true;
	return p;
}

static ixselect_pred regex_value(const bson_iter_t *v)
{
	const char *options = NULL;
	return regex(bson_iter_regex(v, &options));
}

ixselect_pred ixselect_value(const bson_iter_t *v)
{
	if (WIRE_ITER_HOLDS_REGEX(v))
		return regex_value(v);
	return equality(v);
}

static ixselect_pred range(const char *op, const bson_iter_t *v)
{
	bson_type_t t = wire_iter_type(v);
	/* $gte / $lte null take the null point, which a sparse index lacks */
	if (is_null(t) && (op_is(op, "$gte") || op_is(op, "$lte")))
		return pred(IXB_BTREE, false);
	return pred(BTREE_ALL | (nested(v) ? 0u : IXB_WILD), collatable(t));
}

/* $in (negated: $nin). */
static ixselect_pred in_list(const bson_iter_t *v, bool negated)
{
	bson_iter_t el;
	bool re = false, null = false, obj = false, arr = false, coll = false, any = false;
	if (!WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &el))
		return pred(negated ? 0u : BTREE_ALL | HASH_ALL, false); /* refused */
	while (wire_iter_next(&el)) {
		bson_type_t t = wire_iter_type(&el);
		any = true;
		if (t == BSON_TYPE_REGEX) {
			re = true;
			continue;
		}
		null |= is_null(t);
		obj |= nested(&el);
		arr |= t == BSON_TYPE_ARRAY;
		coll |= collatable(t);
	}
	if (negated) {
		/* $nin: [] excludes nothing: mongod's optimizer drops it ($in: []
		 * is always false, its negation always true), and its complemented
		 * bounds would be every key; held-out MongoEngine traffic, whose
		 * delete rules send {ref: {$in: ...}, _id: {$nin: []}} */
		if (re || arr || !any)
			return pred(0, coll);
		return pred(null ? IXB_BTREE_NM : IXB_BTREE_CO, coll);
	}
	unsigned k = BTREE_ALL | IXB_WILD | (re ? 0u : HASH_ALL);
	if (null)
		k &= ~(unsigned)(IXB_SPARSE | IXB_HASHED_SPARSE | IXB_WILD);
	if (obj)
		k &= ~(unsigned)IXB_WILD;
	ixselect_pred p = pred(k, coll);
	p.simple_only = re; /* its regexes' bounds are raw strings */
	return p;
}

static ixselect_pred exists(bool want)
{
	return pred(want ? IXB_SPARSE | IXB_HASHED_SPARSE | IXB_WILD | IXB_ALL_KEYS
	                 : IXB_BTREE | IXB_HASHED,
	            false);
}

static bool is_comparison(const char *op)
{
	return op_is(op, "$gt") || op_is(op, "$gte") || op_is(op, "$lt") || op_is(op, "$lte");
}

/* $ne v: the complement of the point v. */
static ixselect_pred not_equal(const bson_iter_t *v)
{
	bson_type_t t = wire_iter_type(v);
	if (is_null(t))
		return pred(IXB_BTREE_NM | IXB_SPARSE_NM | IXB_WILD, false);
	if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX)
		return pred(0, false);
	return pred(IXB_BTREE_CO, collatable(t));
}

/* {$not: v}: a regex, or one operator the planner can complement. */
static ixselect_pred negation(const bson_iter_t *v)
{
	bson_iter_t it;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it) || !wire_iter_next(&it))
		return pred(0, false);
	bson_iter_t op = it;
	if (wire_iter_next(&it))
		return pred(0, false); /* NOT of an AND: no bounds */
	const char *k = wire_iter_key(&op);
	bson_type_t t = wire_iter_type(&op);
	if (op_is(k, "$eq"))
		return not_equal(&op);
	if (op_is(k, "$in"))
		return in_list(&op, true);
	/* {$not: {$exists: true}}: the null point; {$not: {$exists: false}}
	 * is not read as $exists: true: a negation of a negation, which no
	 * sparse index takes (nodeIsSupportedBySparseIndex: of negations only
	 * $ne: null) and which is not counted as bounding a btree key here */
	if (op_is(k, "$exists"))
		return bson_iter_as_bool(&op) ? exists(false) : pred(0, false);
	if (is_comparison(k) && t != BSON_TYPE_ARRAY)
		return pred(IXB_BTREE, collatable(t));
	return pred(0, false); /* $regex, $mod, $type, $elemMatch, geo, $size, ... */
}

/* $geoWithin's shape: a GeoJSON $geometry or $centerSphere for 2dsphere,
 * the legacy shapes (and $centerSphere) for 2d. */
static ixselect_pred geo_within(const bson_iter_t *v)
{
	bson_iter_t it;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it) || !wire_iter_next(&it))
		return pred(0, false);
	const char *k = wire_iter_key(&it);
	if (op_is(k, "$geometry"))
		return pred(IXB_SPHERE, false);
	if (op_is(k, "$centerSphere"))
		return pred(IXB_SPHERE | IXB_FLAT, false);
	if (op_is(k, "$box") || op_is(k, "$center") || op_is(k, "$polygon"))
		return pred(IXB_FLAT, false);
	return pred(0, false);
}

/* The operators an $elemMatch on values may hold for its field to be
 * bounded: each must be one the planner indexes on its own field. */
static ixselect_pred elem_values(const bson_iter_t *first)
{
	bson_iter_t it = *first;
	bool coll = false, re = false, negated = false, sparse = true;
	do {
		const char *k = wire_iter_key(&it);
		ixselect_pred p = ixselect_operator(k, &it, NULL);
		/* a negation below it ($ne, $nin, $not) bounds with its
		 * complement, multikey or not (NegationBelowElemMatchValue,
		 * notEqualsNullCanUseIndex) */
		bool own =
		    op_is(k, "$eq") || is_comparison(k) || op_is(k, "$in") || op_is(k, "$regex") ||
		    op_is(k, "$options") || op_is(k, "$type") || op_is(k, "$exists") ||
		    op_is(k, "$mod") ||
		    ((op_is(k, "$not") || op_is(k, "$ne") || op_is(k, "$nin")) && p.kinds != 0);
		if (!own)
			return pred(0, false);
		coll |= p.collated;
		re |= p.simple_only;
		bool negation = op_is(k, "$not") || op_is(k, "$ne") || op_is(k, "$nin");
		negated |= negation;
		/* a sparse key takes no negation but $ne: null, and no $exists:
		 * false (a negation too) */
		if ((negation && !(op_is(k, "$ne") && is_null(wire_iter_type(&it)))) ||
		    (op_is(k, "$exists") && !bson_iter_as_bool(&it)))
			sparse = false;
	} while (wire_iter_next(&it));
	/* null inside $elemMatch is a literal null: a sparse key holds it; a
	 * wildcard index takes no negation there either
	 * (WildcardDoesNotSupportNegationPredicateInsideElemMatch) */
	ixselect_pred out =
	    pred(IXB_BTREE | (sparse ? IXB_SPARSE : 0u) | (negated ? 0u : IXB_WILD), coll);
	out.simple_only = re;
	return out;
}

static ixselect_pred elem_match(const bson_iter_t *v)
{
	bson_iter_t it;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it) || !wire_iter_next(&it))
		return pred(0, false);
	const char *k = wire_iter_key(&it);
	if (k[0] == '$' && !op_is(k, "$and") && !op_is(k, "$or") && !op_is(k, "$nor") &&
	    !op_is(k, "$where") && !op_is(k, "$expr"))
		return elem_values(&it);
	return pred(IXB_ELEM, false); /* documents: keys under the field */
}

/* $all: an AND of equalities (any one bounds) or of $elemMatch. */
static ixselect_pred all(const bson_iter_t *v)
{
	bson_iter_t el, em;
	ixselect_pred out = {0, false, false};
	bool any = false;
	if (!WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &el))
		return out;
	while (wire_iter_next(&el)) {
		any = true;
		ixselect_pred p;
		if (WIRE_ITER_HOLDS_DOCUMENT(&el) && wire_iter_recurse(&el, &em) &&
		    wire_iter_next(&em) && op_is(wire_iter_key(&em), "$elemMatch"))
			p = elem_match(&em);
		else
			p = ixselect_value(&el);
		out.kinds |= p.kinds;
		out.collated |= p.collated;
		out.simple_only |= p.simple_only;
	}
	if (!any) /* $all: [] matches nothing: no scan at all */
		out.kinds = BTREE_ALL | HASH_ALL | IXB_WILD;
	return out;
}

/* A $type operand naming the array type ("array" or 4), alone or in a
 * list: its bounds are every key, as mongod builds them. */
static bool type_names_array(const bson_iter_t *v)
{
	bson_iter_t el;
	if (WIRE_ITER_HOLDS_UTF8(v))
		return strcmp(bson_iter_utf8(v, NULL), "array") == 0;
	if (WIRE_ITER_HOLDS_NUMBER(v))
		return bson_iter_as_double(v) == 4;
	if (!WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &el))
		return false;
	while (wire_iter_next(&el))
		if (type_names_array(&el))
			return true;
	return false;
}

ixselect_pred ixselect_operator(const char *op, const bson_iter_t *v, const char *options)
{
	if (op_is(op, "$eq"))
		return equality(v);
	if (op_is(op, "$in"))
		return in_list(v, false);
	if (is_comparison(op))
		return range(op, v);
	if (op_is(op, "$type")) /* "array": every key (index_bounds_builder's allValues) */
		return pred(type_names_array(v) ? 0u : BTREE_ALL | IXB_WILD, false);
	if (op_is(op, "$exists"))
		return exists(bson_iter_as_bool(v));
	if (op_is(op, "$regex")) {
		if (WIRE_ITER_HOLDS_REGEX(v))
			return regex_value(v);
		if (WIRE_ITER_HOLDS_UTF8(v))
			return regex(bson_iter_utf8(v, NULL));
		return pred(0, true);
	}
	if (op_is(op, "$ne"))
		return not_equal(v);
	if (op_is(op, "$nin"))
		return in_list(v, true);
	if (op_is(op, "$not"))
		return WIRE_ITER_HOLDS_REGEX(v) ? pred(0, true) : negation(v);
	if (op_is(op, "$all"))
		return all(v);
	if (op_is(op, "$elemMatch"))
		return elem_match(v);
	if (op_is(op, "$geoWithin") || op_is(op, "$within"))
		return geo_within(v);
	if (op_is(op, "$geoIntersects"))
		return pred(IXB_SPHERE, false);
	return pred(0, false); /* $size, $mod, bit tests, $options, ... */
}

/* An $elemMatch operand on documents: its first key is a field name (or a
 * logical operator over them). */
static bool object_operand(const bson_iter_t *v, const uint8_t **data, uint32_t *len)
{
	bson_iter_t it;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it) || !wire_iter_next(&it))
		return false;
	const char *k = wire_iter_key(&it);
	if (k[0] == '$' && !op_is(k, "$and") && !op_is(k, "$or") && !op_is(k, "$nor") &&
	    !op_is(k, "$where") && !op_is(k, "$expr"))
		return false;
	bson_iter_document(v, len, data);
	return true;
}

bool ixselect_elem_operand(const char *op, const bson_iter_t *v, const uint8_t **data,
                           uint32_t *len)
{
	bson_iter_t el, em;
	if (op_is(op, "$elemMatch"))
		return object_operand(v, data, len);
	if (!op_is(op, "$all") || !WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &el))
		return false;
	while (wire_iter_next(&el))
		if (WIRE_ITER_HOLDS_DOCUMENT(&el) && wire_iter_recurse(&el, &em) &&
		    wire_iter_next(&em) && op_is(wire_iter_key(&em), "$elemMatch") &&
		    object_operand(&em, data, len))
			return true;
	return false;
}

static bool strictly_under(const char *path, const char *field);

#define ELEM_MAX_DEPTH 4

/* What the operand puts on sub (top level and under $and), added to acc
 * (as a field's predicates are). */
static void elem_kinds(const bson_t *operand, const char *sub, ixselect_field *acc, int depth)
{
	bson_iter_t it, el, op;
	bson_t doc;
	if (depth > ELEM_MAX_DEPTH || !bson_iter_init(&it, operand))
		return;
	while (wire_iter_next(&it)) {
		const char *key = wire_iter_key(&it);
		if (op_is(key, "$and") && wire_iter_recurse(&it, &el)) {
			while (wire_iter_next(&el))
				if (wire_iter_doc_view(&el, &doc))
					elem_kinds(&doc, sub, acc, depth + 1);
			continue;
		}
		/* $nor bounds nothing (ElemMatchIndexedNestedNor: a collection
		 * scan) */
		if (op_is(key, "$nor"))
			continue;
		/* $or and the like inside it, or {b: {$elemMatch: {c: ..}}} for
		 * a key on b.c: not read, so no claim that the key gets no
		 * bounds */
		if ((key[0] == '$' && !op_is(key, "$and")) ||
		    (strcmp(key, sub) != 0 && strictly_under(sub, key) &&
		     WIRE_ITER_HOLDS_DOCUMENT(&it))) {
			acc->any = acc->nc = ~0u;
			return;
		}
		if (strcmp(key, sub) != 0)
			continue;
		if (WIRE_ITER_HOLDS_DOCUMENT(&it) && wire_iter_recurse(&it, &op) &&
		    wire_iter_next(&op) && wire_iter_key(&op)[0] == '$') {
			do
				ixselect_field_add(
				    acc, ixselect_operator(wire_iter_key(&op), &op, NULL));
			while (wire_iter_next(&op));
			continue;
		}
		ixselect_field_add(acc, ixselect_value(&it));
	}
}

/* ---- asking one index ---- */

static unsigned kinds_of(const ixselect_field *fields, size_t n, const char *field, bool same,
                         bool simple)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(fields[i].field, field) == 0)
			return field_kinds(&fields[i], same, simple);
	return 0;
}

/* path lies strictly under field ("a.b" under "a"). */
static bool strictly_under(const char *path, const char *field)
{
	size_t len = strlen(field);
	return strncmp(path, field, len) == 0 && path[len] == '.';
}

/* A compound wildcard index (7.0) led by a regular key, {r: 1, "w.$**":
 * 1}: mongod expands it for a predicate on r into {r: 1, $_path: 1}
 * scanned over every path (planner_wildcard_helpers.cpp,
 * expandWildcardIndexEntry), and only then; a predicate on a wildcard
 * path alone does not use it (jstests compound_wildcard_index_prefix.js).
 * The expanded entry is sparse, as every wildcard index (a document with
 * neither r nor a wildcard path has no key), and r is never multikey (an
 * array there is refused at insert, error 7246301). */
static ixselect_verdict compound_wildcard(const index_def *d, const ixselect_field *fields,
                                          size_t n, bool same)
{
	const index_key *lead = &d->keys[0];
	if (lead->type != INDEX_KEY_BTREE)
		return IXSELECT_UNKNOWN;
	if (kinds_of(fields, n, lead->field, same, !d->collation) & (IXB_SPARSE | IXB_SPARSE_NM))
		return IXSELECT_YES;
	/* an $elemMatch above r: r holds no arrays, so the model's $elemMatch
	 * reading of a key under it does not apply; no verdict */
	for (size_t i = 0; i < n; i++)
		if ((fields[i].nc & IXB_ELEM) && strictly_under(lead->field, fields[i].field))
			return IXSELECT_UNKNOWN;
	return IXSELECT_NO;
}

static ixselect_verdict wildcard(const index_def *d, const ixselect_field *fields, size_t n,
                                 bool same)
{
	size_t w = index_def_wildcard_key(d);
	if (w == d->nkeys)
		return IXSELECT_UNKNOWN;
	if (w > 0)
		return compound_wildcard(d, fields, n, same);
	/* the wildcard key first (alone, or before regular keys): expanded for
	 * a predicate on a path it holds, as a single-field wildcard index */
	const char *k = d->keys[0].field;
	for (size_t i = 0; i < n; i++) {
		unsigned kinds = field_kinds(&fields[i], same, !d->collation);
		const char *f = fields[i].field;
		if ((kinds & IXB_WILD) && index_def_wildcard_covers(d, f))
			return IXSELECT_YES;
		/* {a: {$elemMatch: {b: ..}}}: a.b, if the index holds it */
		if ((kinds & IXB_ELEM) &&
		    (strcmp(k, "$**") == 0
		         ? index_def_wildcard_covers(d, f)
		         : index_def_wildcard_covers(d, f) || strictly_under(k, f)))
			return IXSELECT_YES;
	}
	return IXSELECT_NO;
}

static ixselect_verdict geo(const index_def *d, const ixselect_field *fields, size_t n)
{
	if (d->sphere_v1)
		return IXSELECT_UNKNOWN; /* not sparse: other keys may be used alone */
	for (size_t i = 0; i < d->nkeys; i++) {
		const index_key *key = &d->keys[i];
		unsigned kinds = kinds_of(fields, n, key->field, false, false);
		if ((key->type == INDEX_KEY_2DSPHERE && (kinds & IXB_SPHERE)) ||
		    (key->type == INDEX_KEY_2D && (kinds & IXB_FLAT)))
			return IXSELECT_YES;
		if (key->type == INDEX_KEY_OTHER)
			return IXSELECT_UNKNOWN;
	}
	return IXSELECT_NO; /* text: only $text, which the caller judges */
}

/* Whether d's key k takes one of kinds: btree or hashed, as every key of
 * an index that is not a plugin one (index_set.c) is. */
static bool key_k_takes(const index_def *d, size_t k, unsigned kinds)
{
	if (d->keys[k].type == INDEX_KEY_HASHED)
		return kinds & (d->sparse ? IXB_HASHED_SPARSE : IXB_HASHED);
	/* Multikey unknown (a server that does not say) counts as not. */
	bool known; /* from explain, or a write the proxy saw put an array there */
	bool multikey = k < 32 && (index_def_multikey(d, &known) >> k & 1u);
	unsigned want = d->sparse ? IXB_SPARSE : IXB_BTREE | IXB_BTREE_CO;
	if (!multikey)
		want |= d->sparse ? IXB_SPARSE_NM : IXB_BTREE_NM;
	return kinds & want;
}

/* A leading key that takes every key (IXB_ALL_KEYS: {a: {$exists: true}}
 * on {a: 1, b: 1}, a not sparse) is scanned whole but for the bounds a
 * later key gets ({b: 12}), and only their matches are fetched
 * (hashed_index_queries_with_logical_operators.js asserts an IXSCAN of
 * {a: "hashed", b: 1} there): bounded when a later key is. */
static bool later_key_takes(const index_def *d, const ixselect_field *fields, size_t n, bool same,
                            unsigned lead_kinds)
{
	if (!(lead_kinds & IXB_ALL_KEYS) || d->sparse)
		return false;
	for (size_t k = 1; k < d->nkeys; k++)
		if (key_k_takes(d, k, kinds_of(fields, n, d->keys[k].field, same, !d->collation)))
			return true;
	return false;
}

/* $ne: null (a key "not multikey" takes, IXB_*_NM) under an $elemMatch on
 * elem, on d's leading key: it may use a multikey index when no component
 * of the key strictly under elem holds arrays (notEqualsNullCanUseIndex),
 * as explain's multiKeyPaths say; a key multikey by a write the proxy saw
 * (which component, not known) never does. */
static bool ne_null_below(const index_def *d, const char *elem, unsigned kinds)
{
	if (!(kinds & (d->sparse ? IXB_SPARSE_NM : IXB_BTREE_NM)) || !d->multikey_known)
		return false;
	uint32_t w = atomic_load_explicit(&d->written_arrays, memory_order_relaxed);
	if (w & 1u)
		return false;
	unsigned depth = 1; /* elem's components: "a.b" is 2, its last is 1 */
	for (const char *c = elem; *c; c++)
		depth += *c == '.';
	return depth >= 32 || (d->keys[0].multikey_parts >> depth) == 0;
}

ixselect_verdict ixselect_index(const index_def *d, const ixselect_field *fields, size_t n,
                                bool same)
{
	if (d->nkeys == 0 || d->odd)
		return IXSELECT_UNKNOWN;
	if (d->wildcard)
		return wildcard(d, fields, n, same);
	if (d->plugin)
		return geo(d, fields, n);
	const index_key *lead = &d->keys[0];
	unsigned lead_kinds = kinds_of(fields, n, lead->field, same, !d->collation);
	if (key_k_takes(d, 0, lead_kinds) || later_key_takes(d, fields, n, same, lead_kinds))
		return IXSELECT_YES;
	/* {a: {$elemMatch: {b: ...}}} and $all of them: a key on a.b, by
	 * what the $elemMatch puts on b (an operand not read: any key). */
	for (size_t i = 0; i < n; i++) {
		if (!(fields[i].nc & IXB_ELEM) || !strictly_under(lead->field, fields[i].field))
			continue;
		bson_t operand;
		if (!fields[i].elem ||
		    !bson_init_static(&operand, fields[i].elem, fields[i].elem_len))
			return IXSELECT_YES;
		ixselect_field acc = {0};
		const char *sub = lead->field + strlen(fields[i].field) + 1;
		elem_kinds(&operand, sub, &acc, 0);
		unsigned kinds = field_kinds(&acc, same, !d->collation);
		if (key_k_takes(d, 0, kinds) || ne_null_below(d, fields[i].field, kinds))
			return IXSELECT_YES;
	}
	return IXSELECT_NO;
}

bool ixselect_complements(const index_def *d, const ixselect_field *fields, size_t n, bool same)
{
	/* _id's values are unique in a collection whatever its index says
	 * (listIndexes does not say unique for the _id index) */
	if (d->nkeys != 1 || d->sparse || d->plugin || d->wildcard ||
	    d->keys[0].type != INDEX_KEY_BTREE ||
	    (!d->unique && strcmp(d->keys[0].field, "_id") != 0))
		return false;
	unsigned kinds = kinds_of(fields, n, d->keys[0].field, same, !d->collation);
	return (kinds & IXB_BTREE_CO) && !key_k_takes(d, 0, kinds & ~(unsigned)IXB_BTREE_CO);
}

static unsigned hinted_kinds(unsigned k)
{
	if (k & IXB_SPARSE_HINTED)
		k |= IXB_SPARSE_NM;
	if (k & IXB_HASHED_SPARSE_HINTED)
		k |= IXB_HASHED_SPARSE;
	return k;
}

void ixselect_fields_hinted(ixselect_field *fields, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ixselect_field *f = &fields[i];
		f->any = hinted_kinds(f->any);
		f->nc = hinted_kinds(f->nc);
		f->simple = hinted_kinds(f->simple);
		f->both = hinted_kinds(f->both);
	}
}
