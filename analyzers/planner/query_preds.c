/* Reads a filter the way the planner builds index bounds, coarsely: enough to
 * know which fields are points, point sets or ranges, never the values; and
 * whether a filter implies a partial index's filter, which compares values. */
#include "analyzers/planner/query_preds.h"

#include <math.h>
#include <string.h>

#include "protocol/wire_iter.h"

void query_preds_init(query_preds *p)
{
	p->n = 0;
	p->overflow = false;
	p->text_or_near = false;
	p->refused = false;
	p->nors = 0;
	p->ors_overflow = false;
	p->nelems = 0;
}

const query_pred *query_preds_find(const query_preds *p, const char *field)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->p[i].field, field) == 0)
			return &p->p[i];
	return NULL;
}

static query_pred *slot(query_preds *p, const char *field)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->p[i].field, field) == 0)
			return &p->p[i];
	if (p->n == QUERY_PREDS_MAX) {
		p->overflow = true;
		return NULL;
	}
	query_pred *q = &p->p[p->n++];
	memset(q, 0, sizeof *q);
	q->field = field;
	return q;
}

/* CollationIndexKey::isCollatableType: the types a collation reorders. */
static bool collatable(bson_type_t t)
{
	return t == BSON_TYPE_UTF8 || t == BSON_TYPE_SYMBOL || t == BSON_TYPE_DOCUMENT ||
	       t == BSON_TYPE_ARRAY;
}

static void note_points(query_pred *q, uint32_t n, bool nc)
{
	if (q->points == 0 || n < q->points) {
		q->points = n;
		q->points_nc = nc;
	} else if (n == q->points) {
		q->points_nc = q->points_nc || nc;
	}
	if (nc)
		q->bounded_nc = true;
}

/* {a: v} or {a: {$eq: v}}. Equality to an array matches the array itself or
 * any element equal to it, so its bounds are two points, not one. */
static void note_equality(query_pred *q, const bson_iter_t *v)
{
	bson_type_t t = wire_iter_type(v);
	q->any = true;
	q->equality = true;
	q->collates |= collatable(t);
	if (t == BSON_TYPE_ARRAY) {
		note_points(q, 2, false);
		return;
	}
	q->point = true;
	if (!collatable(t)) {
		q->point_nc = true;
		q->bounded_nc = true;
	}
}

/* $in bounds an index like a set of equality points (one value: plain
 * equality), but for a sort it is a range (ESR puts it after the sort
 * fields); a regex element makes it ranges of strings. */
static void note_in(query_pred *q, const bson_iter_t *v)
{
	bson_iter_t el;
	uint32_t n = 0;
	bool nc = true;

	q->any = true;
	if (!WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &el))
		return; /* the server rejects it */
	while (wire_iter_next(&el)) {
		bson_type_t t = wire_iter_type(&el);
		if (t == BSON_TYPE_REGEX) {
			/* A regex in $in scans ranges of strings. */
			q->range = true;
			return;
		}
		n += t == BSON_TYPE_ARRAY ? 2 : 1;
		if (collatable(t))
			nc = false;
	}
	q->collates |= !nc;
	if (n <= 1) {
		/* One value (or none, which matches nothing): plain equality. */
		q->equality = true;
		q->point = true;
		if (nc) {
			q->point_nc = true;
			q->bounded_nc = true;
		}
		return;
	}
	/* With a sort, ESR places an $in after the sort fields. */
	q->range = true;
	if (n <= QUERY_IN_EXPLODE_MAX)
		note_points(q, n, nc);
	else if (nc)
		q->bounded_nc = true;
}

/* $all of values: an $and of equalities, one of which bounds an index
 * (index_bounds_builder takes one predicate's bounds: the field is as
 * pinned as by that equality, and the order after it provided; an array
 * value's two points explode for the sort, explode_for_sort_equality_to_
 * array.js). Of $elemMatch clauses, or with a regex: no point. */
static void note_all(query_pred *q, const bson_iter_t *v)
{
	bson_iter_t el, c;
	if (!WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &el) || !wire_iter_next(&el) ||
	    WIRE_ITER_HOLDS_REGEX(&el))
		return;
	if (WIRE_ITER_HOLDS_DOCUMENT(&el) && wire_iter_recurse(&el, &c) && wire_iter_next(&c) &&
	    wire_iter_key(&c)[0] == '$')
		return; /* {$elemMatch: ...} (or an operator the server refuses) */
	note_equality(q, &el);
}

static bool same_scalar(const bson_iter_t *a, const bson_iter_t *b)
{
	bson_type_t t = wire_iter_type(a);
	if (t != wire_iter_type(b))
		return false;
	switch (t) {
	case BSON_TYPE_INT32:
		return bson_iter_int32(a) == bson_iter_int32(b);
	case BSON_TYPE_INT64:
		return bson_iter_int64(a) == bson_iter_int64(b);
	case BSON_TYPE_DOUBLE:
		return bson_iter_double(a) == bson_iter_double(b);
	case BSON_TYPE_DATE_TIME:
		return bson_iter_date_time(a) == bson_iter_date_time(b);
	case BSON_TYPE_BOOL:
		return bson_iter_bool(a) == bson_iter_bool(b);
	case BSON_TYPE_OID:
		return bson_oid_equal(bson_iter_oid(a), bson_iter_oid(b));
	default:
		return false;
	}
}

static bool is(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* MatchExpressionParser's operators, by the letter after the '$': on
 * every operator of every filter, so one or two compares each. */
bool query_operator_known(const char *op, bool top)
{
	if (op[0] != '$')
		return false;
	const char *r = op + 2; /* past "$x" */
	if (top) {
		switch (op[1]) {
		case 'a':
			return is(r, "nd") || is(r, "lwaysTrue") || is(r, "lwaysFalse");
		case 'o':
			return is(r, "r");
		case 'n':
			return is(r, "or");
		case 'e':
			return is(r, "xpr");
		case 'w':
			return is(r, "here");
		case 't':
			return is(r, "ext");
		case 'c':
			return is(r, "omment");
		case 'j':
			return is(r, "sonSchema");
		case 's':
			return is(r, "ampleRate");
		case '_':
			return strncmp(r, "internal", 8) == 0;
		default:
			return false;
		}
	}
	switch (op[1]) {
	case 'e':
		return is(r, "q") || is(r, "xists") || is(r, "lemMatch");
	case 'g':
		return is(r, "t") || is(r, "te") || is(r, "eoWithin") || is(r, "eoIntersects") ||
		       is(r, "eoNear");
	case 'l':
		return is(r, "t") || is(r, "te");
	case 'i':
		return is(r, "n");
	case 'n':
		return is(r, "e") || is(r, "in") || is(r, "ot") || is(r, "ear") ||
		       is(r, "earSphere");
	case 'a':
		return is(r, "ll");
	case 'b':
		return is(r, "itsAllClear") || is(r, "itsAllSet") || is(r, "itsAnyClear") ||
		       is(r, "itsAnySet");
	case 'm':
		return is(r, "od") || is(r, "axDistance") || is(r, "inDistance");
	case 'o':
		return is(r, "ptions");
	case 'r':
		return is(r, "egex");
	case 's':
		return is(r, "ize");
	case 't':
		return is(r, "ype");
	case 'w':
		return is(r, "ithin");
	case '_':
		return strncmp(r, "internal", 8) == 0;
	default:
		return false;
	}
}

/* True when the document's first key makes it an operator document; a DBRef
 * ({$ref, $id}) is a value. */
bool query_is_operator_doc(const bson_iter_t *v)
{
	bson_iter_t it;
	if (!wire_iter_recurse(v, &it) || !wire_iter_next(&it))
		return false;
	const char *k = wire_iter_key(&it);
	return k[0] == '$' && strcmp(k, "$ref") != 0 && strcmp(k, "$id") != 0 &&
	       strcmp(k, "$db") != 0;
}

/* {$geoWithin: {<shape>: ...}}, {$geoIntersects: ...}: the geo index kind
 * that can serve it (QUERY_GEO_NONE: an unknown shape). */
static uint8_t geo_kind(const char *op, const bson_iter_t *v)
{
	bson_iter_t it;
	if (strcmp(op, "$geoIntersects") == 0)
		return QUERY_GEO_SPHERE;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it) || !wire_iter_next(&it))
		return QUERY_GEO_NONE;
	const char *k = wire_iter_key(&it);
	if (strcmp(k, "$geometry") == 0 || strcmp(k, "$centerSphere") == 0)
		return QUERY_GEO_SPHERE;
	if (strcmp(k, "$box") == 0 || strcmp(k, "$center") == 0 || strcmp(k, "$polygon") == 0)
		return QUERY_GEO_FLAT;
	return QUERY_GEO_NONE;
}

/* Whether a $nin / $all list holds a collatable value. */
static bool list_collates(const bson_iter_t *arr)
{
	bson_iter_t el;
	if (!wire_iter_recurse(arr, &el))
		return false;
	while (wire_iter_next(&el))
		if (collatable(wire_iter_type(&el)))
			return true;
	return false;
}

/* {$regex: r, $options: o} (re on $regex, ops on the document): whether
 * it is anchored so that an index bounds it. */
static bool regex_operand_bounded(const bson_iter_t *re, const bson_iter_t *ops)
{
	bson_iter_t c;
	const char *options = NULL, *pattern = NULL, *inner = NULL;
	if (WIRE_ITER_HOLDS_REGEX(re))
		pattern = bson_iter_regex(re, &inner);
	else if (WIRE_ITER_HOLDS_UTF8(re))
		pattern = bson_iter_utf8(re, NULL);
	if (!pattern || !wire_iter_recurse(ops, &c))
		return false;
	while (wire_iter_next(&c))
		if (strcmp(wire_iter_key(&c), "$options") == 0 && WIRE_ITER_HOLDS_UTF8(&c))
			options = bson_iter_utf8(&c, NULL);
	return query_regex_bounded(pattern, inner) &&
	       (!options || query_regex_bounded(pattern, options));
}

/* An operator document on one field: each operator says whether it gives
 * an index bounds, as mongod's planner decides. */
static void note_operators(query_preds *p, query_pred *q, const bson_iter_t *v)
{
	bson_iter_t it, gte, lte;
	bool has_gte = false, has_lte = false, only_gte_lte = true;

	if (!wire_iter_recurse(v, &it))
		return;
	q->any = true;
	while (wire_iter_next(&it)) {
		const char *op = wire_iter_key(&it);
		bson_type_t t = wire_iter_type(&it);
		if (!query_operator_known(op, false))
			p->refused = true;
		if (strcmp(op, "$eq") == 0) {
			note_equality(q, &it);
		} else if (strcmp(op, "$in") == 0) {
			note_in(q, &it);
		} else if (strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 ||
		           strcmp(op, "$lt") == 0 || strcmp(op, "$lte") == 0) {
			q->range = q->compared = true;
			if (!collatable(t))
				q->bounded_nc = true;
			else
				q->collates = true;
			if (strcmp(op, "$gte") == 0) {
				gte = it;
				has_gte = true;
			} else if (strcmp(op, "$lte") == 0) {
				lte = it;
				has_lte = true;
			} else {
				only_gte_lte = false;
			}
			continue;
		} else if (strcmp(op, "$exists") == 0 && !bson_iter_as_bool(&it)) {
			/* the null point, as {f: null} (index_bounds_builder;
			 * SortWhenHashedFieldIsPrefix: an index provides the sort
			 * after it) */
			q->point = q->point_nc = q->equality = true;
			q->bounded_nc = true;
		} else if (strcmp(op, "$ne") == 0 || strcmp(op, "$nin") == 0 ||
		           strcmp(op, "$exists") == 0 || strcmp(op, "$regex") == 0) {
			q->range = true;
			q->spans_objects |= op[1] != 'r';
			if (strcmp(op, "$regex") == 0)
				q->regex_bounded |= regex_operand_bounded(&it, v);
			else if (op[1] == 'n')
				q->collates |=
				    collatable(t) || (t == BSON_TYPE_ARRAY && list_collates(&it));
		} else if (strcmp(op, "$all") == 0) {
			q->collates |= t == BSON_TYPE_ARRAY && list_collates(&it);
			note_all(q, &it);
		} else if (strcmp(op, "$elemMatch") == 0 && t == BSON_TYPE_DOCUMENT &&
		           p->nelems < QUERY_ELEMS_MAX) {
			bson_iter_document(&it, &p->elems[p->nelems].len,
			                   &p->elems[p->nelems].data);
			p->elems[p->nelems++].field = q->field;
		} else if (strcmp(op, "$near") == 0 || strcmp(op, "$nearSphere") == 0 ||
		           strcmp(op, "$geoNear") == 0) {
			p->text_or_near = true;
		} else if (strcmp(op, "$geoWithin") == 0 || strcmp(op, "$within") == 0 ||
		           strcmp(op, "$geoIntersects") == 0) {
			q->geo = geo_kind(op, &it);
		}
		/* $options, $not, $type, $all, $size, $elemMatch, $mod, geo and
		 * bit tests: a predicate, but neither a point nor an ESR range. */
		only_gte_lte = only_gte_lte && strcmp(op, "$options") == 0;
	}
	/* {$gte: x, $lte: x} is a point interval, as the planner sees it. */
	if (has_gte && has_lte && only_gte_lte && same_scalar(&gte, &lte)) {
		q->point = true;
		q->point_nc = true;
	}
}

bool query_preds_branches(const bson_iter_t *arr, bool is_or, const uint8_t **or_data,
                          uint32_t *or_len, void (*each)(void *arg, const bson_t *sub), void *arg)
{
	bson_iter_t it;
	uint32_t count = 0;
	if (!WIRE_ITER_HOLDS_ARRAY(arr) || !wire_iter_recurse(arr, &it))
		return false;
	while (wire_iter_next(&it))
		count++;
	if (is_or && count >= 2) {
		bson_iter_array(arr, or_len, or_data);
		return true;
	}
	wire_iter_recurse(arr, &it);
	while (wire_iter_next(&it)) {
		const uint8_t *data;
		uint32_t len;
		bson_t sub;
		if (!WIRE_ITER_HOLDS_DOCUMENT(&it))
			continue;
		bson_iter_document(&it, &len, &data);
		if (bson_init_static(&sub, data, len))
			each(arg, &sub);
	}
	return false;
}

static void collect_sub(void *arg, const bson_t *sub)
{
	query_preds_collect(arg, sub);
}

static bool refuses_members(bson_iter_t *it, int depth);

/* Whether a branch of the list arr ($and, $or, $nor) names an operator
 * mongod refuses, at any depth (past 20: taken as not). */
static bool refuses_list(const bson_iter_t *arr, int depth)
{
	bson_iter_t c, b;
	if (depth > 20 || !wire_iter_recurse(arr, &c))
		return false;
	while (wire_iter_next(&c))
		if (WIRE_ITER_HOLDS_DOCUMENT(&c) && wire_iter_recurse(&c, &b) &&
		    refuses_members(&b, depth + 1))
			return true;
	return false;
}

/* The same for an operator document's operators (ops on the document),
 * and inside a $not's operator document and an $elemMatch's. Inside an
 * $elemMatch, an operator of either level is taken as known ($or holds
 * branches there, $gt a bound): an unknown one is refused either way. */
static bool refuses_ops(const bson_iter_t *ops, int depth, bool elem)
{
	bson_iter_t c, sub;
	if (depth > 20 || !wire_iter_recurse(ops, &c))
		return false;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (!query_operator_known(k, false) && !(elem && query_operator_known(k, true)))
			return true;
		if (elem && WIRE_ITER_HOLDS_ARRAY(&c) &&
		    (is(k, "$and") || is(k, "$or") || is(k, "$nor")) && refuses_list(&c, depth + 1))
			return true; /* an $and, $or or $nor of the element's fields */
		if (!WIRE_ITER_HOLDS_DOCUMENT(&c))
			continue;
		if (strcmp(k, "$not") == 0) {
			if (query_is_operator_doc(&c) && refuses_ops(&c, depth + 1, false))
				return true;
		} else if (strcmp(k, "$elemMatch") == 0) {
			if (query_is_operator_doc(&c)
			        ? refuses_ops(&c, depth + 1, true)
			        : wire_iter_recurse(&c, &sub) && refuses_members(&sub, depth + 1))
				return true;
		}
	}
	return false;
}

/* The same for a filter's members (it before the first). */
static bool refuses_members(bson_iter_t *it, int depth)
{
	while (wire_iter_next(it)) {
		const char *k = wire_iter_key(it);
		if (k[0] == '$') {
			if (!query_operator_known(k, true) ||
			    (WIRE_ITER_HOLDS_ARRAY(it) && refuses_list(it, depth)))
				return true;
		} else if (WIRE_ITER_HOLDS_DOCUMENT(it) && query_is_operator_doc(it) &&
		           refuses_ops(it, depth, false)) {
			return true;
		}
	}
	return false;
}

bool query_filter_refused(const bson_t *filter)
{
	bson_iter_t it;
	return filter && bson_iter_init(&it, filter) && refuses_members(&it, 0);
}

static void collect_array(query_preds *p, const bson_iter_t *arr, bool is_or)
{
	const uint8_t *data;
	uint32_t len;
	if (!query_preds_branches(arr, is_or, &data, &len, collect_sub, p))
		return;
	/* an $or kept for its branches: one mongod refuses refuses the query */
	if (refuses_list(arr, 0))
		p->refused = true;
	if (p->nors == QUERY_ORS_MAX) {
		p->ors_overflow = true;
		return;
	}
	p->ors[p->nors].data = data;
	p->ors[p->nors].len = len;
	p->nors++;
}

void query_preds_collect(query_preds *p, const bson_t *filter)
{
	bson_iter_t it;

	if (filter == NULL || !bson_iter_init(&it, filter))
		return;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (k[0] == '$') {
			if (strcmp(k, "$and") == 0)
				collect_array(p, &it, false);
			else if (strcmp(k, "$or") == 0)
				collect_array(p, &it, true);
			else if (strcmp(k, "$text") == 0)
				p->text_or_near = true;
			else if (!query_operator_known(k, true))
				p->refused = true;
			/* $nor, $expr, $where, $jsonSchema, $comment, ...: no bounds */
			continue;
		}
		query_pred *q = slot(p, k);
		if (q == NULL)
			continue;
		switch (wire_iter_type(&it)) {
		case BSON_TYPE_REGEX: {
			const char *options = NULL;
			const char *pattern = bson_iter_regex(&it, &options);
			q->any = true;
			q->range = true;
			q->regex_bounded |= pattern && query_regex_bounded(pattern, options);
			break;
		}
		case BSON_TYPE_DOCUMENT:
			if (query_is_operator_doc(&it))
				note_operators(p, q, &it);
			else
				note_equality(q, &it);
			break;
		default:
			note_equality(q, &it);
			break;
		}
	}
}

sort_spec_kind query_sort_parse(const bson_t *sort, sort_spec *out)
{
	bson_iter_t it;
	bool invalid = false;

	out->n = 0;
	if (sort == NULL || !bson_iter_init(&it, sort))
		return SORT_SPEC_NONE;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		double d;
		if (strcmp(k, "$natural") == 0)
			return SORT_SPEC_NONE;
		switch (wire_iter_type(&it)) {
		case BSON_TYPE_DOCUMENT: {
			bson_iter_t meta;
			if (wire_iter_recurse(&it, &meta) && bson_iter_find(&meta, "$meta"))
				return SORT_SPEC_NONE;
			invalid = true;
			continue;
		}
		case BSON_TYPE_INT32:
		case BSON_TYPE_INT64:
		case BSON_TYPE_DOUBLE:
			d = bson_iter_as_double(&it);
			break;
		default:
			invalid = true;
			continue;
		}
		if (isnan(d) || d == 0 || out->n == QUERY_SORT_MAX) {
			invalid = true;
			continue;
		}
		out->keys[out->n].field = k;
		out->keys[out->n].direction = d > 0 ? 1 : -1;
		out->n++;
	}
	if (invalid)
		return SORT_SPEC_INVALID;
	return out->n == 0 ? SORT_SPEC_NONE : SORT_SPEC_KEYS;
}

static const char *utf8_field(const bson_t *doc, const char *key)
{
	bson_iter_t it;
	if (doc != NULL && bson_iter_init_find(&it, doc, key) && WIRE_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return NULL;
}

bool query_collation_is_simple(const bson_t *c)
{
	if (c == NULL || bson_count_keys(c) == 0)
		return true;
	const char *loc = utf8_field(c, "locale");
	return loc != NULL && strcmp(loc, "simple") == 0;
}

static int64_t strength(const bson_t *c)
{
	bson_iter_t it;
	if (bson_iter_init_find(&it, c, "strength") && WIRE_ITER_HOLDS_NUMBER(&it))
		return bson_iter_as_int64(&it);
	return 3;
}

bool query_collation_equal(const bson_t *a, const bson_t *b)
{
	bool sa = query_collation_is_simple(a), sb = query_collation_is_simple(b);
	if (sa || sb)
		return sa == sb;
	const char *la = utf8_field(a, "locale"), *lb = utf8_field(b, "locale");
	if (la == NULL || lb == NULL || strcmp(la, lb) != 0)
		return false;
	return strength(a) == strength(b);
}

static bool is_special(char c)
{
	return strchr("\\^$.[]|()*+?{}", c) != NULL;
}

bool query_regex_bounded(const char *pattern, const char *options)
{
	bool a_anchor = strncmp(pattern, "\\A", 2) == 0;
	if (!a_anchor && pattern[0] != '^')
		return false;
	for (const char *o = options ? options : ""; *o; o++)
		if (*o == 'i' || *o == 's' || *o == 'x' || (*o == 'm' && !a_anchor))
			return false;
	/* An unescaped | anywhere: an alternative need not share the prefix. */
	for (const char *c = pattern; *c; c++) {
		if (*c == '\\' && c[1])
			c++;
		else if (*c == '|')
			return false;
	}
	const char *c = pattern + (a_anchor ? 2 : 1);
	size_t literals = 0;
	while (*c) {
		if (*c == '\\') {
			if (c[1] == 'Q')
				return c[2] != '\0' && !(c[2] == '\\' && c[3] == 'E');
			if (!c[1] || (c[1] >= '0' && c[1] <= '9') || (c[1] >= 'a' && c[1] <= 'z') ||
			    (c[1] >= 'A' && c[1] <= 'Z'))
				break; /* \d, \w, a back-reference...: no longer literal */
			literals++;
			c += 2;
			continue;
		}
		if (is_special(*c))
			break;
		literals++;
		c++;
	}
	/* "^ab*": the b is optional, the prefix is "a". */
	if (literals > 0 && (*c == '*' || *c == '?' || *c == '{'))
		literals--;
	return literals > 0;
}

/* ---- $expr ---- */

/* A variable mongod knows before planning: a user one (its name starts
 * with a lower-case letter), or $$NOW or $$CLUSTER_TIME, which the
 * optimizer folds into a constant (a date, a timestamp) before $expr is
 * rewritten (ExpressionFieldPath::optimize; not under the SBE plan cache's
 * feature flag, which no release enables). $$ROOT, $$CURRENT, $$REMOVE,
 * $$USER_ROLES (an array) and the rest are not such constants. */
static bool expr_variable(const bson_iter_t *v)
{
	if (!WIRE_ITER_HOLDS_UTF8(v))
		return false;
	const char *s = bson_iter_utf8(v, NULL);
	if (s[0] != '$' || s[1] != '$')
		return false;
	return (s[2] >= 'a' && s[2] <= 'z') || strcmp(s + 2, "NOW") == 0 ||
	       strcmp(s + 2, "CLUSTER_TIME") == 0;
}

const char *query_expr_field(const bson_iter_t *v)
{
	if (!WIRE_ITER_HOLDS_UTF8(v))
		return NULL;
	const char *s = bson_iter_utf8(v, NULL);
	return s[0] == '$' && s[1] != '$' && s[1] != '\0' ? s + 1 : NULL;
}

static bool expr_constant(const bson_iter_t *v)
{
	if (WIRE_ITER_HOLDS_UTF8(v))
		return bson_iter_utf8(v, NULL)[0] != '$' || expr_variable(v);
	bson_type_t t = wire_iter_type(v);
	return t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_ARRAY && t != BSON_TYPE_UNDEFINED;
}

static bool expr_cmp_op(const char *op)
{
	return strcmp(op, "$eq") == 0 || strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 ||
	       strcmp(op, "$lt") == 0 || strcmp(op, "$lte") == 0;
}

/* {$op: [a, b]}: the comparison, when it is one (c->value points at
 * *slot, the caller's). */
static bool expr_cmp_read(const char *op, bson_iter_t *args, bson_iter_t *slot, query_expr_cmp *c)
{
	bson_iter_t x, y;
	if (!expr_cmp_op(op) || !wire_iter_next(args))
		return false;
	x = *args;
	if (!wire_iter_next(args))
		return false;
	y = *args;
	if (wire_iter_next(args))
		return false; /* more than two operands: mongod refuses it */
	if (!query_expr_field(&x)) {
		bson_iter_t t = x;
		x = y;
		y = t;
	}
	if (!query_expr_field(&x) || !expr_constant(&y))
		return false;
	*slot = y;
	c->field = query_expr_field(&x);
	c->op = op;
	c->value = slot;
	c->variable = expr_variable(slot);
	return true;
}

static void expr_walk(const bson_iter_t *e, query_expr_each each, void (*other)(void *), void *arg,
                      int depth)
{
	bson_iter_t c, args, slot;
	query_expr_cmp cmp;
	if (depth > 8 || !WIRE_ITER_HOLDS_DOCUMENT(e) || !wire_iter_recurse(e, &c) ||
	    !wire_iter_next(&c) || !WIRE_ITER_HOLDS_ARRAY(&c) || !wire_iter_recurse(&c, &args)) {
		if (other)
			other(arg);
		return;
	}
	const char *op = wire_iter_key(&c);
	if (strcmp(op, "$and") == 0) {
		while (wire_iter_next(&args))
			expr_walk(&args, each, other, arg, depth + 1);
		return;
	}
	if (expr_cmp_read(op, &args, &slot, &cmp))
		each(arg, &cmp);
	else if (other)
		other(arg);
}

void query_expr_comparisons(const bson_iter_t *expr, query_expr_each each, void (*other)(void *arg),
                            void *arg)
{
	expr_walk(expr, each, other, arg, 0);
}
