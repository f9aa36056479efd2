/* unbounded-push: checks update documents and update pipelines. */
#include "analyzers/rules/rule_push.h"

#include <stdio.h>
#include <string.h>

#include "analyzers/planner/query_preds.h"
#include "analyzers/rules/rule_api.h"
#include "protocol/text.h"
#include "protocol/wire_iter.h"

/* How deep update expressions are walked. Beyond it (and for an assigned
 * path too long for the buffers below) the walk cannot tell whether the
 * array is appended to, so it says it is: mongod runs pipeline updates
 * nested deeper than this, and passing over them let an unbounded
 * $concatArrays through a rule set to block. */
#define MAX_DEPTH 100

/* ---- guards: what in the statement's filter bounds the array ----
 *
 * Read from the conjunctive part of the filter only (top level and $and,
 * nested): a guard under $or or $nor holds on some branch, so it bounds
 * nothing. Paths point into the filter. More guards than fit are ignored,
 * which can only keep a finding, never hide one. */

#define GUARDS_MAX 16

typedef struct guard_path {
	const char *p;
	size_t len;
} guard_path;

/* A set guard: a path the filter holds away from given values, {f: {$ne:
 * v}} or {f: {$nin: [...]}}. A $push of those values to f (or of
 * documents whose key k holds them, with the guard on "f.k") then adds
 * each at most once: the array is a set, bounded by its domain, as one
 * that $addToSet grows. vals: the $ne or $nin element. */
typedef struct set_guard {
	guard_path path;
	wire_cur vals;
	bool list; /* $nin: vals is an array of values; $ne: vals is the value */
} set_guard;

typedef struct push_guards {
	guard_path counters[GUARDS_MAX]; /* fields held below a bound: $lt, $lte, $not {$gte} */
	size_t ncounters;
	guard_path floors[GUARDS_MAX]; /* fields held above a bound: $gt, $gte, $not {$lte} */
	size_t nfloors;
	guard_path arrays[GUARDS_MAX]; /* arrays held below a length: "a.N" $exists false, $size */
	size_t narrays;
	set_guard sets[GUARDS_MAX];
	size_t nsets;
	/* some counter is also incremented by the update, or some floor
	 * decremented */
	bool counted;
} push_guards;

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

/* A finite number: the only bound a counter can be compared with. */
static bool is_number(const bson_iter_t *it)
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
	if (!ok || !is_number(&c))
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

/* The operators on one field: an upper or a lower bound on a counter, an
 * element-existence guard when the field is "<array>.<N>", or values it
 * is held away from ($ne, $nin: a set guard). */
static void field_guards(push_guards *g, const char *key, const bson_iter_t *v)
{
	bson_iter_t c;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &c))
		return;
	bool counter = false, floor = false, absent = false;
	while (wire_iter_next(&c)) {
		const char *op = wire_iter_key(&c);
		if (key_eq(op, "$ne"))
			add_set_guard(g, key, &c, false);
		else if (key_eq(op, "$nin") && WIRE_ITER_HOLDS_ARRAY(&c))
			add_set_guard(g, key, &c, true);
		else if ((key_eq(op, "$lt") || key_eq(op, "$lte")) && is_number(&c))
			counter = true;
		else if ((key_eq(op, "$gt") || key_eq(op, "$gte")) && is_number(&c))
			floor = true;
		else if (key_eq(op, "$not") && only_bound(&c, true))
			counter = true;
		else if (key_eq(op, "$not") && only_bound(&c, false))
			floor = true;
		else if (key_eq(op, "$exists") && (WIRE_ITER_HOLDS_BOOL(&c) || is_number(&c)) &&
		         !bson_iter_as_bool(&c))
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

/* {$size: "$arr"} or {$size: ["$arr"]}: the array's path, or NULL. */
static const char *size_of_path(const bson_iter_t *v)
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

/* {op: [x, y]}, e on it: the operator's name, with x and y on its two
 * operands; NULL for anything else (more keys or operands: the server
 * refuses it). */
static const char *two_operands(const bson_iter_t *e, bson_iter_t *x, bson_iter_t *y)
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
	if (depth > MAX_DEPTH || !WIRE_ITER_HOLDS_DOCUMENT(e) || !wire_iter_recurse(e, &c) ||
	    !wire_iter_next(&c))
		return;
	if (key_eq(wire_iter_key(&c), "$and")) {
		if (WIRE_ITER_HOLDS_ARRAY(&c) && wire_iter_recurse(&c, &args))
			while (wire_iter_next(&args))
				expr_guards(g, &args, depth + 1);
		return;
	}
	const char *op = two_operands(e, &x, &y);
	bool below = op && (key_eq(op, "$lt") || key_eq(op, "$lte"));
	bool above = op && (key_eq(op, "$gt") || key_eq(op, "$gte"));
	if (!(below || above))
		return;
	const char *path = below ? size_of_path(&x) : size_of_path(&y);
	if (path && is_number(below ? &y : &x)) {
		add_guard(g->arrays, &g->narrays, path, strlen(path));
		return;
	}
	/* a counter: {$lt: ["$n", N]} holds n below N (as {n: {$lt: N}}
	 * does), {$gt: [N, "$n"]} too; {$gt: ["$n", N]} holds it above */
	const char *fx = query_expr_field(&x), *fy = query_expr_field(&y);
	if (fx && is_number(&y))
		add_guard(below ? g->counters : g->floors, below ? &g->ncounters : &g->nfloors, fx,
		          strlen(fx));
	else if (fy && is_number(&x))
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
	if (depth > MAX_DEPTH || !WIRE_ITER_HOLDS_DOCUMENT(filter) ||
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
			if (!is_number(&inc))
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

static bool guarded(const push_guards *g, const char *field)
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

/* Whether every value a $push member (c on it) appends is kept out of its
 * array by a set guard, so the push grows a set: the member's value, or
 * with each the elements of its $each (at least one). */
static bool set_guarded(const push_guards *g, const wire_cur *c, bool each)
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

/* Appends the field, quoted, to the hit's list, cut to fit as snprintf
 * cut it. */
static void add_field(push_hit *hit, const char *field)
{
	size_t cap = sizeof(hit->fields);
	if (strlen(hit->fields) + 1 >= cap)
		return;
	text_cat(hit->fields, cap, hit->fields[0] ? ", \"" : "\"");
	text_cat(hit->fields, cap, field);
	text_cat(hit->fields, cap, "\"");
}

/* The words for a $push member's value that names $each and $slice as
 * given (facts_push_bounded): NULL when it bounds its array. */
static const char *push_form(bool each, bool slice)
{
	if (each && slice)
		return NULL;
	if (each)
		return "has $each but no $slice";
	if (slice)
		return "has $slice without $each (the document itself is pushed)";
	return "has no $each + $slice";
}

/* An operator update's guards (update_guards, below), read at its first
 * member that would grow an array without a bound: a statement whose
 * members all bound theirs, the common one, reads none. */
typedef struct lazy_guards {
	push_guards g;
	bool read;
	const bson_iter_t *u, *filter;
	const filter_facts *ff;
} lazy_guards;

static void update_guards(push_guards *g, const bson_iter_t *u, const bson_iter_t *filter,
                          const filter_facts *ff);

/* Out of line: its walks keep bson_iter_t, whose 128-byte alignment
 * would make every caller realign its stack, on every statement. */
static __attribute__((noinline)) void guards_fill(lazy_guards *lg)
{
	lg->read = true;
	lg->g.ncounters = lg->g.nfloors = lg->g.narrays = lg->g.nsets = 0;
	lg->g.counted = false;
	update_guards(&lg->g, lg->u, lg->filter, lg->ff);
}

static const push_guards *guards_read(lazy_guards *lg)
{
	if (!lg->read)
		guards_fill(lg);
	return &lg->g;
}

/* One member of a $push, c on it, whose value names $each and $slice as
 * given: whether it grows an array without a bound, added to hit when it
 * does. */
static bool check_member(const wire_cur *c, bool each, bool slice, lazy_guards *lg, push_hit *hit)
{
	const char *form = push_form(each, slice);
	if (!form)
		return false;
	const push_guards *g = guards_read(lg);
	if (guarded(g, wire_cur_key(c)) || set_guarded(g, c, each))
		return false;
	if (!hit->form)
		hit->form = form;
	add_field(hit, wire_cur_key(c));
	return true;
}

/* A $push's members, on a cursor: only their keys and values are read. */
static bool check_push(const bson_iter_t *push, lazy_guards *g, push_hit *hit)
{
	wire_cur c;
	if (!WIRE_ITER_HOLDS_DOCUMENT(push) || !wire_cur_recurse_iter(push, &c))
		return false;
	bool found = false;
	while (wire_cur_walk(&c)) {
		bool each, slice;
		(void)facts_push_bounded(&c, &each, &slice);
		found |= check_member(&c, each, slice, g, hit);
	}
	return found;
}

/* The operators whose result holds at most a given number of elements of
 * their input: $slice, and (MongoDB 5.2) the array expressions $firstN and
 * $lastN ({input, n}). An append under one of them is bounded. */
static bool bounds_array(const char *k)
{
	return key_eq(k, "$slice") || key_eq(k, "$firstN") || key_eq(k, "$lastN");
}

/* Does expr reference path (the "$field" string) outside any $slice? */
static bool refs_path_unbounded(const bson_iter_t *it, const char *path, int depth)
{
	bson_iter_t c;
	if (depth > MAX_DEPTH)
		return true; /* see MAX_DEPTH */
	if (WIRE_ITER_HOLDS_UTF8(it))
		return strcmp(bson_iter_utf8(it, NULL), path) == 0;
	if (!(WIRE_ITER_HOLDS_DOCUMENT(it) || WIRE_ITER_HOLDS_ARRAY(it)) ||
	    !wire_iter_recurse(it, &c))
		return false;
	while (wire_iter_next(&c)) {
		if (WIRE_ITER_HOLDS_DOCUMENT(it)) {
			const char *k = wire_iter_key(&c);
			if (bounds_array(k) || key_eq(k, "$literal"))
				continue;
		}
		if (refs_path_unbounded(&c, path, depth + 1))
			return true;
	}
	return false;
}

/* The counters an update pipeline increments: fields a $set / $addFields
 * assigns {$add: ["$n", k]} (or [k, "$n"]) with k a positive number. */
#define PIPE_COUNTERS_MAX 8

typedef struct pipe_counters {
	const char *f[PIPE_COUNTERS_MAX];
	size_t n;
} pipe_counters;

/* The field v increments ({$add: ["$n", k]}, k > 0), or NULL. */
static const char *increment_of(const bson_iter_t *v)
{
	bson_iter_t x, y;
	const char *op = two_operands(v, &x, &y);
	if (!op || !key_eq(op, "$add"))
		return NULL;
	const char *f = query_expr_field(&x);
	const bson_iter_t *k = &y;
	if (!f) {
		f = query_expr_field(&y);
		k = &x;
	}
	return f && is_number(k) && bson_iter_as_double(k) > 0 ? f : NULL;
}

static void pipe_counters_read(pipe_counters *pc, const bson_iter_t *pipeline)
{
	bson_iter_t stage, c, m;
	pc->n = 0;
	if (!wire_iter_recurse(pipeline, &stage))
		return;
	while (wire_iter_next(&stage)) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&stage) || !wire_iter_recurse(&stage, &c) ||
		    !wire_iter_next(&c) ||
		    !(key_eq(wire_iter_key(&c), "$set") ||
		      key_eq(wire_iter_key(&c), "$addFields")) ||
		    !wire_iter_recurse(&c, &m))
			continue;
		while (wire_iter_next(&m)) {
			const char *f = increment_of(&m);
			if (f && strcmp(f, wire_iter_key(&m)) == 0 && pc->n < PIPE_COUNTERS_MAX)
				pc->f[pc->n++] = f;
		}
	}
}

/* Whether a $cond's if holds the array at path ("$a") below a length
 * ({$lt: [{$size: "$a"}, N]}, $lte, or {$gt: [N, {$size: "$a"}]}, $gte),
 * or a counter the pipeline increments below a number ({$lt: ["$n", N]}):
 * its then-branch appends only while that holds, as a filter guard's
 * update does. */
static bool cond_bounds(const bson_iter_t *cond, const char *path, const pipe_counters *pc)
{
	bson_iter_t x, y;
	const char *op = two_operands(cond, &x, &y);
	bool below = op && (key_eq(op, "$lt") || key_eq(op, "$lte"));
	if (!below && !(op && (key_eq(op, "$gt") || key_eq(op, "$gte"))))
		return false;
	const bson_iter_t *held = below ? &x : &y, *bound = below ? &y : &x;
	if (!is_number(bound))
		return false;
	const char *sized = size_of_path(held), *counter = query_expr_field(held);
	if (sized && strcmp(sized, path + 1) == 0)
		return true;
	for (size_t i = 0; counter && pc && i < pc->n; i++)
		if (strcmp(pc->f[i], counter) == 0)
			return true;
	return false;
}

static bool concat_appends(const bson_iter_t *expr, const char *path, int depth,
                           const pipe_counters *pc);

/* {$cond: [if, then, else]} or {$cond: {if, then, else}}, c on it: an
 * append in then is bounded when if bounds it (cond_bounds). */
static bool cond_appends(const bson_iter_t *c, const char *path, int depth, const pipe_counters *pc)
{
	bson_iter_t m, cond, then, other;
	bool has[3] = {false, false, false};
	if (!wire_iter_recurse(c, &m))
		return false;
	for (int i = 0; wire_iter_next(&m); i++) {
		const char *k = wire_iter_key(&m);
		int at = WIRE_ITER_HOLDS_ARRAY(c) ? i
		         : key_eq(k, "if")        ? 0
		         : key_eq(k, "then")      ? 1
		         : key_eq(k, "else")      ? 2
		                                  : 3;
		if (at == 0)
			cond = m, has[0] = true;
		else if (at == 1)
			then = m, has[1] = true;
		else if (at == 2)
			other = m, has[2] = true;
		else
			return concat_appends(c, path, depth + 1, pc); /* not read: walk it whole */
	}
	if (!has[0] || !has[1] || !has[2])
		return concat_appends(c, path, depth + 1, pc);
	bool bounded = cond_bounds(&cond, path, pc);
	return concat_appends(&cond, path, depth + 1, pc) ||
	       (!bounded && concat_appends(&then, path, depth + 1, pc)) ||
	       concat_appends(&other, path, depth + 1, pc);
}

/* Is there a $concatArrays, not under $slice, with an operand that reads
 * the assigned field unbounded? pc: the pipeline's counters (NULL: none). */
static bool concat_appends(const bson_iter_t *expr, const char *path, int depth,
                           const pipe_counters *pc)
{
	bson_iter_t c;
	if (depth > MAX_DEPTH)
		return true; /* see MAX_DEPTH */
	if (!(WIRE_ITER_HOLDS_DOCUMENT(expr) || WIRE_ITER_HOLDS_ARRAY(expr)) ||
	    !wire_iter_recurse(expr, &c))
		return false;
	bool doc = WIRE_ITER_HOLDS_DOCUMENT(expr);
	while (wire_iter_next(&c)) {
		const char *k = doc ? wire_iter_key(&c) : NULL; /* NULL: array element */
		if (k && (bounds_array(k) || key_eq(k, "$literal")))
			continue; /* bounded, or not an expression */
		if (k && key_eq(k, "$concatArrays") && WIRE_ITER_HOLDS_ARRAY(&c)) {
			bson_iter_t op;
			if (wire_iter_recurse(&c, &op))
				while (wire_iter_next(&op))
					if (refs_path_unbounded(&op, path, depth + 1))
						return true;
			/* Every $concatArrays nested in these operands (outside
			 * $slice and $literal, which refs_path_unbounded skips
			 * too) reads only what was just walked, so descending
			 * would find nothing new, and re-walking each nested
			 * operand would make the cost depth times size, both of
			 * which a client chooses. */
			continue;
		}
		if (k && key_eq(k, "$cond") &&
		    (WIRE_ITER_HOLDS_ARRAY(&c) || WIRE_ITER_HOLDS_DOCUMENT(&c))) {
			if (cond_appends(&c, path, depth + 1, pc))
				return true;
			continue;
		}
		if (concat_appends(&c, path, depth + 1, pc))
			return true;
	}
	return false;
}

/* ---- update pipelines: what the stages do to each path, in order ----
 *
 * A stage reads the document the stages before it made, so a path's fate
 * is decided by the last stage that assigns it: [{$set: {a:
 * {$concatArrays: ["$a", [x]]}}}, {$set: {a: {$slice: ["$a", -10]}}}]
 * keeps ten elements, and a $slice before the append ({$slice: ["$a",
 * -9]} then the $concatArrays) bounds it as well. Paths start as stored
 * (whatever the document holds, which grows from one run to the next);
 * each assignment makes its path grown (appended to while unbounded),
 * bounded (a value of bounded length, or one not read from the path), or
 * leaves it as it was (the path read whole, e.g. $reverseArray). Paths
 * are compared whole: a stage assigning a.b leaves a.b.c as it was. A path
 * the table has no room for, when it grows, is reported at once, which
 * can only keep a finding. */

#define PIPE_PATHS_MAX 16
#define PIPE_PATH_LEN  200

typedef enum { PATH_GROWN, PATH_BOUNDED } path_state;

typedef struct pipe_paths {
	struct {
		char path[PIPE_PATH_LEN];
		uint8_t state; /* path_state */
	} at[PIPE_PATHS_MAX];
	size_t n;
	const pipe_counters *counters; /* the counters the pipeline increments */
} pipe_paths;

static uint8_t *path_state_of(pipe_paths *pp, const char *field)
{
	for (size_t i = 0; i < pp->n; i++)
		if (strcmp(pp->at[i].path, field) == 0)
			return &pp->at[i].state;
	return NULL;
}

/* One assignment field = expr (path is "$field"). */
static void assign(pipe_paths *pp, const char *field, const char *path, const bson_iter_t *expr,
                   push_hit *hit, bool *found, int depth)
{
	uint8_t *st = path_state_of(pp, field);
	bool appends = concat_appends(expr, path, depth, pp->counters);
	if (!appends && refs_path_unbounded(expr, path, depth))
		return; /* read whole ({$reverseArray: "$a"}): as it was */
	path_state to = appends && !(st && *st == PATH_BOUNDED) ? PATH_GROWN : PATH_BOUNDED;
	if (st) {
		*st = (uint8_t)to;
	} else if (pp->n < PIPE_PATHS_MAX) {
		snprintf(pp->at[pp->n].path, PIPE_PATH_LEN, "%s", field);
		pp->at[pp->n++].state = (uint8_t)to;
	} else if (to == PATH_GROWN) {
		add_field(hit, field); /* no room to follow it: reported now */
		*found = true;
	}
}

/* $set / $addFields: {field: expr}; an object literal {a: {b: expr}}
 * assigns a.b, so the walk extends the path through it. */
static bool check_assignments(const bson_iter_t *fields, const char *prefix, const push_guards *g,
                              pipe_paths *pp, push_hit *hit, int depth)
{
	bson_iter_t c;
	bool found = false;
	if (depth > MAX_DEPTH) { /* see MAX_DEPTH */
		add_field(hit, prefix);
		hit->unjudged = true;
		return true;
	}
	if (!WIRE_ITER_HOLDS_DOCUMENT(fields) || !wire_iter_recurse(fields, &c))
		return false;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		char field[PIPE_PATH_LEN], path[PIPE_PATH_LEN + 8];
		int n = prefix[0] ? snprintf(field, sizeof(field), "%s.%s", prefix, k)
		                  : snprintf(field, sizeof(field), "%s", k);
		if (n < 0 || (size_t)n >= sizeof(field)) { /* see MAX_DEPTH */
			add_field(hit, field);
			hit->unjudged = true;
			found = true;
			continue;
		}
		bson_iter_t first;
		if (WIRE_ITER_HOLDS_DOCUMENT(&c) && wire_iter_recurse(&c, &first) &&
		    wire_iter_next(&first) && wire_iter_key(&first)[0] != '$') {
			if (check_assignments(&c, field, g, pp, hit, depth + 1))
				found = true;
			continue;
		}
		snprintf(path, sizeof(path), "$%s", field);
		if (!guarded(g, field))
			assign(pp, field, path, &c, hit, &found, depth + 1);
	}
	return found;
}

static bool check_pipeline(const bson_iter_t *pipeline, const push_guards *g, push_hit *hit)
{
	bson_iter_t stage, c;
	bool found = false;
	pipe_paths pp; /* 3 KB, for pipeline updates only; the paths are read up to n */
	pipe_counters pc;
	pp.n = 0;
	pp.counters = &pc;
	pipe_counters_read(&pc, pipeline);
	if (!wire_iter_recurse(pipeline, &stage))
		return false;
	while (wire_iter_next(&stage)) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&stage) || !wire_iter_recurse(&stage, &c))
			continue;
		while (wire_iter_next(&c)) {
			const char *k = wire_iter_key(&c);
			if ((key_eq(k, "$set") || key_eq(k, "$addFields")) &&
			    check_assignments(&c, "", g, &pp, hit, 0))
				found = true;
		}
	}
	for (size_t i = 0; i < pp.n; i++)
		if (pp.at[i].state == PATH_GROWN) {
			add_field(hit, pp.at[i].path);
			found = true;
		}
	if (found) {
		hit->pipeline = true;
		hit->form = hit->unjudged ? "is assigned at a path too deep or too long to judge"
		                          : "is appended to with $concatArrays and no $slice";
	}
	return found;
}

/* The guards of the statement's filter: from the facts when the engine read
 * it (ff), else from the filter itself (NULL: none). */
static void guards_of(push_guards *g, const bson_iter_t *filter, const filter_facts *ff)
{
	if (ff)
		facts_guards(g, ff);
	else if (filter)
		filter_guards(g, filter, 0);
}

/* The guards of an operator update's statement: its filter's, and whether
 * the update moves a guarded counter towards its bound. */
static void update_guards(push_guards *g, const bson_iter_t *u, const bson_iter_t *filter,
                          const filter_facts *ff)
{
	if (filter || ff) {
		guards_of(g, filter, ff);
		g->counted = increments_counter(u, g);
	}
}

/* push_update's walk of an update the engine read no facts of (its
 * members, every $push of it). Out of line: as guards_fill. */
static __attribute__((noinline)) bool push_update_walk(const bson_iter_t *u, lazy_guards *lg,
                                                       push_hit *hit)
{
	bson_iter_t c, push;
	if (!WIRE_ITER_HOLDS_DOCUMENT(u) || !wire_iter_recurse(u, &c))
		return false;
	/* Only a top-level $push is an operator; a replacement document's
	 * fields are data, whatever they are called. */
	if (!wire_iter_next(&c) || wire_iter_key(&c)[0] != '$')
		return false;
	bool has_push = false;
	do {
		if (key_eq(wire_iter_key(&c), "$push")) {
			push = c;
			has_push = true;
			break;
		}
	} while (wire_iter_next(&c));
	if (!has_push)
		return false;
	/* Every $push of the document, not only the first: mongod applies
	 * each occurrence of a repeated operator ({$push: {a: ...}, $push:
	 * {b: ...}} pushes to both), so checking the first alone let a bounded
	 * push hide an unbounded one after it. */
	bool found = check_push(&push, lg, hit);
	while (wire_iter_next(&push))
		if (key_eq(wire_iter_key(&push), "$push") && check_push(&push, lg, hit))
			found = true;
	return found;
}

/* A pipeline update: out of line, as guards_fill. */
static __attribute__((noinline)) bool push_update_pipeline(const bson_iter_t *u,
                                                           const bson_iter_t *filter,
                                                           const filter_facts *ff, push_hit *hit)
{
	push_guards g;
	g.ncounters = g.nfloors = g.narrays = g.nsets = 0;
	g.counted = false;
	guards_of(&g, filter, ff);
	return check_pipeline(u, &g, hit);
}

/* Whether an update grows an array without a bound: guards in the
 * statement's filter (a counter held below a limit, an array held below a
 * length) count as bounds, read for an operator update once a member
 * without a bound of its own is found (lazy_guards). Inline into
 * check_update, the request path's caller: a call less a statement. */
static inline __attribute__((always_inline)) bool push_update(const bson_iter_t *u,
                                                              const bson_iter_t *filter,
                                                              const filter_facts *ff,
                                                              const update_facts *uf, push_hit *hit)
{
	/* Counts and flags only: on every update statement, zeroing the
	 * guard lists and the field text (720 bytes) cost more than the walk
	 * of a $set; nothing reads past a count or the text's NUL. */
	hit->fields[0] = '\0';
	hit->pipeline = hit->unjudged = false;
	hit->form = NULL;
	if (WIRE_ITER_HOLDS_ARRAY(u))
		return push_update_pipeline(u, filter, ff, hit);
	lazy_guards lg; /* its guards set only once read (guards_read) */
	lg.read = false;
	lg.u = u;
	lg.filter = filter;
	lg.ff = ff;
	if (uf) {
		/* the update's $push members, as the engine read them (facts.h) */
		if (uf->form != FU_OPERATORS || !(uf->ops & UOP_PUSH))
			return false;
		bool found = false;
		for (unsigned i = 0; i < uf->nwrites; i++)
			if (uf->writes[i].op == FW_PUSH)
				found |= check_member(&uf->writes[i].at, uf->writes[i].each,
				                      uf->writes[i].slice, &lg, hit);
		return found;
	}
	return push_update_walk(u, &lg, hit);
}

bool rule_push_update(const bson_iter_t *u, const bson_iter_t *filter, push_hit *hit)
{
	return push_update(u, filter, NULL, NULL, hit);
}

/* ---- the rule: check and words ---- */

static void check_update(rule_ctx *c, const rule_site *s, const bson_iter_t *u)
{
	push_hit hit;
	const stmt_facts *f = s->facts;
	const filter_facts *ff =
	    f && f->has_filter && f->filter.complete && s->filter ? &f->filter : NULL;
	const update_facts *uf =
	    f && f->has_update && f->update.writes_complete ? &f->update : NULL;
	if (rule_wanted(c, s, RULE_UNBOUNDED_PUSH) && push_update(u, s->filter, ff, uf, &hit))
		rule_report(c, s, RULE_UNBOUNDED_PUSH, &hit);
}

static void words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w)
{
	const push_hit *hit = facts;
	text_buf t;
	text_init(&t, w->buf, sizeof(w->buf));
	size_t start = text_mark(&t);
	if (hit->pipeline && hit->unjudged) {
		text_printf(&t, "%s %s, so mongoguard cannot tell whether the array is bounded",
		            hit->fields, hit->form);
		w->detail = rule_words_piece(&t, start);
		start = text_mark(&t);
		text_str(&t,
		         "flatten the $set / $addFields of the update pipeline (fewer than 100 "
		         "nested levels, shorter field paths), and bound any $concatArrays with "
		         "{$slice: [..., -N]}");
		w->fix = "flatten the update pipeline and bound $concatArrays with $slice";
	} else if (hit->pipeline) {
		text_printf(&t, "%s %s, so the array grows without bound", hit->fields, hit->form);
		w->detail = rule_words_piece(&t, start);
		start = text_mark(&t);
		text_printf(&t,
		            "bound the result: {$slice: [{$concatArrays: [...]}, -N]} keeps the "
		            "newest N; or bucket the items into documents of bounded size, or move "
		            "them to a child collection that references this document (%s)",
		            hit->fields);
		w->fix =
		    "wrap the $concatArrays in {$slice: [..., -N]} (subset pattern), bucket the "
		    "array, or move the items to a child collection";
	} else {
		text_printf(&t, "$push to %s %s, so the array grows without bound", hit->fields,
		            hit->form);
		w->detail = rule_words_piece(&t, start);
		start = text_mark(&t);
		text_printf(
		    &t,
		    "push with {$each: [<items>], $slice: -N} to keep the newest N (subset "
		    "pattern) for %s; or bucket the items into documents of bounded size, or "
		    "move them to a child collection that references this document",
		    hit->fields);
		w->fix = "push with {$each: [...], $slice: -N} (subset pattern), bucket the array, "
		         "or move the items to a child collection";
	}
	w->suggestion = rule_words_piece(&t, start);
}

static const rule_checks checks = {
    .update = check_update,
    .words = words,
    /* push_update finds nothing in an update that is not a pipeline and
     * has no $push */
    .update_when = STMT_PUSH,
};

/* The report's design change is titled by the patterns its words (the
 * suggestion) offer, in their order, so title and text agree: every form
 * leads with a cap that keeps the newest N (the subset pattern), which is
 * the whole fix for a list seen only small (bounded by the business); for
 * one that grows, the words go on to bucket documents. A pipeline
 * mongoguard could not judge asks for a change to the update instead. */
static const char *push_design_pattern(const rule_report_finding *f)
{
	if (!strncmp(f->suggestion, "flatten ", 8))
		return NULL;
	return f->arrays_seen_small ? "subset pattern" : "subset or bucket pattern";
}

const rule_def rule_push_def = {
    .id = RULE_UNBOUNDED_PUSH,
    .name = "unbounded-push",
    .summary = "an update appends to an array with nothing bounding its length",
    .fix_kind = "$each + $slice",
    .grows_arrays = true,
    .design_pattern = push_design_pattern,
    .checks = &checks,
};
