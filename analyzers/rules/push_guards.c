/* push_guards.h */
#include "analyzers/rules/push_guards.h"

#include <string.h>

#include "analyzers/planner/query_preds.h"

static void add_guard(guard_path *list, size_t *n, const char *p, size_t len)
{
	if (*n < GUARDS_MAX) {
		list[*n].p = p;
		list[*n].len = len;
		(*n)++;
	}
}

static bool path_is(const guard_path *g, const char *path)
{
	return strncmp(g->p, path, g->len) == 0 && path[g->len] == '\0';
}

/* push_guards.h */
bool push_is_number(const bson_iter_t *it)
{
	switch (wire_iter_type(it)) {
	case BSON_TYPE_INT32:
	case BSON_TYPE_INT64:
		return true;
	case BSON_TYPE_DOUBLE: {
		double d = bson_iter_double(it);
		return d == d && d - d == 0; /* not NaN, not infinite */
	}
	default:
		return false;
	}
}

/* {$gte: N} (or {$gt: N}) and nothing else, or with `lower` false {$lte:
 * N} (or {$lt: N}): under $not, a bound the other way. */
static bool only_bound(const bson_iter_t *v, bool lower)
{
	bson_iter_t c;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &c) || !wire_iter_next(&c))
		return false;
	const char *k = wire_iter_key(&c);
	bool ok =
	    lower ? key_eq(k, "$gte") || key_eq(k, "$gt") : key_eq(k, "$lte") || key_eq(k, "$lt");
	if (!ok || !push_is_number(&c))
		return false;
	return !wire_iter_next(&c);
}

static void add_set_guard(push_guards *g, const char *key, const bson_iter_t *op, bool list)
{
	if (g->nsets < GUARDS_MAX) {
		set_guard *sg = &g->sets[g->nsets++];
		sg->path.p = key;
		sg->path.len = strlen(key);
		wire_cur_of_iter(&sg->vals, op);
		sg->list = list;
	}
}

/* {$not: {$in: [...]}} or {$not: {$eq: v}}, v on the $not: mongod reads
 * them as $nin and $ne (a missing field matches both), so they are set
 * guards too; inner is set on the $in or $eq, list says which. A $not of
 * more than one operator negates their conjunction: it holds the field
 * away from no one value, and is no guard. */
static bool negated_set(const bson_iter_t *v, bson_iter_t *inner, bool *list)
{
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, inner) || !wire_iter_next(inner))
		return false;
	const char *op = wire_iter_key(inner);
	*list = key_eq(op, "$in");
	if (!(*list && WIRE_ITER_HOLDS_ARRAY(inner)) && !key_eq(op, "$eq"))
		return false;
	bson_iter_t more = *inner;
	return !wire_iter_next(&more);
}

/* The operators on one field: an upper or a lower bound on a counter, an
 * element-existence guard when the field is "<array>.<N>", or values it
 * is held away from ($ne, $nin, and $not of $eq or $in: a set guard). */
static void field_guards(push_guards *g, const char *key, const bson_iter_t *v)
{
	bson_iter_t c;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &c))
		return;
	bool counter = false, floor = false, absent = false, list;
	bson_iter_t inner;
	while (wire_iter_next(&c)) {
		const char *op = wire_iter_key(&c);
		if (key_eq(op, "$ne"))
			add_set_guard(g, key, &c, false);
		else if (key_eq(op, "$nin") && WIRE_ITER_HOLDS_ARRAY(&c))
			add_set_guard(g, key, &c, true);
		else if ((key_eq(op, "$lt") || key_eq(op, "$lte")) && push_is_number(&c))
			counter = true;
		else if ((key_eq(op, "$gt") || key_eq(op, "$gte")) && push_is_number(&c))
			floor = true;
		else if (key_eq(op, "$not") && negated_set(&c, &inner, &list))
			add_set_guard(g, key, &inner, list);
		else if (key_eq(op, "$not") && only_bound(&c, true))
			counter = true;
		else if (key_eq(op, "$not") && only_bound(&c, false))
			floor = true;
		else if (key_eq(op, "$exists") &&
		         (WIRE_ITER_HOLDS_BOOL(&c) || push_is_number(&c)) && !bson_iter_as_bool(&c))
			absent = true;
	}
	if (counter)
		add_guard(g->counters, &g->ncounters, key, strlen(key));
	if (floor)
		add_guard(g->floors, &g->nfloors, key, strlen(key));
	if (!absent)
		return;
	/* "<array>.<N>" with N a plain index (no sign, no leading zero). */
	const char *dot = strrchr(key, '.');
	if (!dot || dot == key || !dot[1] || (dot[1] == '0' && dot[2]))
		return;
	for (const char *d = dot + 1; *d; d++)
		if (*d < '0' || *d > '9')
			return;
	add_guard(g->arrays, &g->narrays, key, (size_t)(dot - key));
}

/* push_guards.h */
const char *push_size_of_path(const bson_iter_t *v)
{
	bson_iter_t c, a;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &c) || !wire_iter_next(&c) ||
	    !key_eq(wire_iter_key(&c), "$size"))
		return NULL;
	const bson_iter_t *arg = &c;
	if (WIRE_ITER_HOLDS_ARRAY(&c)) {
		if (!wire_iter_recurse(&c, &a) || !wire_iter_next(&a))
			return NULL;
		arg = &a;
	}
	const char *path = query_expr_field(arg); /* "$$var" is a variable, not a path */
	bool one = arg == &c ? !wire_iter_next(&c) : (!wire_iter_next(&a) && !wire_iter_next(&c));
	return one ? path : NULL;
}

/* push_guards.h */
const char *push_two_operands(const bson_iter_t *e, bson_iter_t *x, bson_iter_t *y)
{
	bson_iter_t c, a;
	if (!WIRE_ITER_HOLDS_DOCUMENT(e) || !wire_iter_recurse(e, &c) || !wire_iter_next(&c) ||
	    !WIRE_ITER_HOLDS_ARRAY(&c) || !wire_iter_recurse(&c, &a) || !wire_iter_next(&a))
		return NULL;
	*x = a;
	if (!wire_iter_next(&a))
		return NULL;
	*y = a;
	if (wire_iter_next(&a))
		return NULL;
	const char *op = wire_iter_key(&c);
	return wire_iter_next(&c) ? NULL : op;
}

/* $expr: {$lt: [{$size: "$a"}, N]} / $lte, or {$gt: [N, {$size: "$a"}]} /
 * $gte; a counter compared with a number, as a field's operators are
 * (field_guards); an $and of expressions is a conjunction too. */
static void expr_guards(push_guards *g, const bson_iter_t *e, int depth)
{
	bson_iter_t c, args, x, y;
	if (depth > PUSH_MAX_DEPTH || !WIRE_ITER_HOLDS_DOCUMENT(e) || !wire_iter_recurse(e, &c) ||
	    !wire_iter_next(&c))
		return;
	if (key_eq(wire_iter_key(&c), "$and")) {
		if (WIRE_ITER_HOLDS_ARRAY(&c) && wire_iter_recurse(&c, &args))
			while (wire_iter_next(&args))
				expr_guards(g, &args, depth + 1);
		return;
	}
	const char *op = push_two_operands(e, &x, &y);
	bool below = op && (key_eq(op, "$lt") || key_eq(op, "$lte"));
	bool above = op && (key_eq(op, "$gt") || key_eq(op, "$gte"));
	if (!(below || above))
		return;
	const char *path = below ? push_size_of_path(&x) : push_size_of_path(&y);
	if (path && push_is_number(below ? &y : &x)) {
		add_guard(g->arrays, &g->narrays, path, strlen(path));
		return;
	}
	/* a counter: {$lt: ["$n", N]} holds n below N (as {n: {$lt: N}}
	 * does), {$gt: [N, "$n"]} too; {$gt: ["$n", N]} holds it above */
	const char *fx = query_expr_field(&x), *fy = query_expr_field(&y);
	if (fx && push_is_number(&y))
		add_guard(below ? g->counters : g->floors, below ? &g->ncounters : &g->nfloors, fx,
		          strlen(fx));
	else if (fy && push_is_number(&x))
		add_guard(below ? g->floors : g->counters, below ? &g->nfloors : &g->ncounters, fy,
		          strlen(fy));
}

static void filter_guards(push_guards *g, const bson_iter_t *filter, int depth);

/* One member of a filter document, c on it. */
static void member_guards(push_guards *g, const bson_iter_t *c, int depth)
{
	bson_iter_t el;
	const char *k = wire_iter_key(c);
	if (k[0] != '$') {
		field_guards(g, k, c);
	} else if (key_eq(k, "$and") && WIRE_ITER_HOLDS_ARRAY(c) && wire_iter_recurse(c, &el)) {
		while (wire_iter_next(&el))
			filter_guards(g, &el, depth + 1);
	} else if (key_eq(k, "$expr")) {
		expr_guards(g, c, 0);
	}
	/* $or, $nor, $not-like wrappers: a guard there bounds nothing */
}

static void filter_guards(push_guards *g, const bson_iter_t *filter, int depth)
{
	bson_iter_t c;
	if (depth > PUSH_MAX_DEPTH || !WIRE_ITER_HOLDS_DOCUMENT(filter) ||
	    !wire_iter_recurse(filter, &c))
		return;
	while (wire_iter_next(&c))
		member_guards(g, &c, depth);
}

/* filter_guards of the filter the engine read (facts.h): the same members,
 * without stepping the filter again. */
static void facts_guards(push_guards *g, const filter_facts *f)
{
	bson_iter_t it;
	for (unsigned i = 0; i < f->n; i++) {
		wire_cur_iter(&f->m[i].at, &it);
		member_guards(g, &it, 0);
	}
}

static bool guard_on(const guard_path *list, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (path_is(&list[i], key))
			return true;
	return false;
}

/* Whether the update document moves a guarded counter towards its bound:
 * increments one held below a bound by a positive amount, or decrements
 * one held above a bound by a negative amount (a remaining-capacity
 * counter: {seatsLeft: {$gt: 0}} with {$inc: {seatsLeft: -1}}). Every
 * application then moves the counter towards the bound, and the write
 * stops matching when it is reached, so what it pushes is bounded by the
 * counter's starting value. */
static bool increments_counter(const bson_iter_t *update, const push_guards *g)
{
	bson_iter_t c, inc;
	if ((g->ncounters == 0 && g->nfloors == 0) || !wire_iter_recurse(update, &c))
		return false;
	while (wire_iter_next(&c)) {
		if (!key_eq(wire_iter_key(&c), "$inc") || !wire_iter_recurse(&c, &inc))
			continue;
		while (wire_iter_next(&inc)) {
			if (!push_is_number(&inc))
				continue;
			double d = bson_iter_as_double(&inc);
			if (d > 0 && guard_on(g->counters, g->ncounters, wire_iter_key(&inc)))
				return true;
			if (d < 0 && guard_on(g->floors, g->nfloors, wire_iter_key(&inc)))
				return true;
		}
	}
	return false;
}

/* push_guards.h */
bool push_guarded(const push_guards *g, const char *field)
{
	if (g->counted)
		return true;
	for (size_t i = 0; i < g->narrays; i++)
		if (path_is(&g->arrays[i], field))
			return true;
	return false;
}

/* The same value, as mongod's equality takes it where the bytes say so:
 * the same type and the same value bytes. (Equal numbers of other types,
 * or strings a collation equates, are not matched: the push stays
 * reported, never hidden.) */
static bool same_value(const wire_cur *a, const wire_cur *b)
{
	uint32_t n = a->next - a->val;
	return wire_cur_type(a) == wire_cur_type(b) && n == b->next - b->val &&
	       memcmp(a->raw + a->val, b->raw + b->val, n) == 0;
}

/* Whether the set guard holds its path away from the value x. A null or
 * undefined x is not matched (a missing field equals null, so {f: {$ne:
 * null}} refuses documents without f rather than keeping f a set), nor a
 * regular expression (in $nin it matches strings by pattern). */
static bool holds_away(const set_guard *sg, const wire_cur *x)
{
	bson_type_t t = wire_cur_type(x);
	if (t == BSON_TYPE_NULL || t == BSON_TYPE_UNDEFINED || t == BSON_TYPE_REGEX)
		return false;
	if (!sg->list)
		return same_value(&sg->vals, x);
	wire_cur e;
	if (!wire_cur_recurse(&sg->vals, &e))
		return false;
	while (wire_cur_walk(&e))
		if (same_value(&e, x))
			return true;
	return false;
}

/* The member k of the document x, as a cursor: false when x is not a
 * document or has no k. */
static bool member_of(const wire_cur *x, const char *k, size_t klen, wire_cur *out)
{
	if (wire_cur_type(x) != BSON_TYPE_DOCUMENT || !wire_cur_recurse(x, out))
		return false;
	while (wire_cur_walk(out))
		if (wire_cur_key_len(out) == klen && memcmp(wire_cur_key(out), k, klen) == 0)
			return true;
	return false;
}

/* Whether a set guard keeps x out of the array at field: one on field
 * holding it away from x, or one on "field.k" holding it away from x's k. */
static bool value_kept_out(const push_guards *g, const char *field, const wire_cur *x)
{
	size_t flen = strlen(field);
	for (size_t i = 0; i < g->nsets; i++) {
		const set_guard *sg = &g->sets[i];
		const char *p = sg->path.p;
		if (path_is(&sg->path, field)) {
			if (holds_away(sg, x))
				return true;
			continue;
		}
		/* "field.k", k one key (no dot): the pushed document's k */
		wire_cur m;
		if (sg->path.len > flen + 1 && strncmp(p, field, flen) == 0 && p[flen] == '.' &&
		    !memchr(p + flen + 1, '.', sg->path.len - flen - 1) &&
		    member_of(x, p + flen + 1, sg->path.len - flen - 1, &m) && holds_away(sg, &m))
			return true;
	}
	return false;
}

/* push_guards.h */
bool push_set_guarded(const push_guards *g, const wire_cur *c, bool each)
{
	if (g->nsets == 0)
		return false;
	const char *field = wire_cur_key(c);
	if (!each)
		return value_kept_out(g, field, c);
	wire_cur m, x;
	if (!member_of(c, "$each", 5, &m) || wire_cur_type(&m) != BSON_TYPE_ARRAY ||
	    !wire_cur_recurse(&m, &x))
		return false;
	unsigned n = 0;
	while (wire_cur_walk(&x)) {
		if (!value_kept_out(g, field, &x))
			return false;
		n++;
	}
	return n > 0;
}

/* push_guards.h */
void push_guards_of(push_guards *g, const bson_iter_t *filter, const filter_facts *ff)
{
	if (ff)
		facts_guards(g, ff);
	else if (filter)
		filter_guards(g, filter, 0);
}

/* push_guards.h */
void push_update_guards(push_guards *g, const bson_iter_t *u, const bson_iter_t *filter,
                        const filter_facts *ff)
{
	if (filter || ff) {
		push_guards_of(g, filter, ff);
		g->counted = increments_counter(u, g);
	}
}
