/* unbounded-push: checks update documents and update pipelines. */
#include "analyzers/rules/rule_push.h"

#include <stdio.h>
#include <string.h>

#include "analyzers/planner/query_preds.h"
#include "analyzers/rules/push_guards.h"
#include "analyzers/rules/rule_api.h"
#include "protocol/text.h"
#include "protocol/wire_iter.h"

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

/* Out of line: its walks keep bson_iter_t, whose 128-byte alignment
 * would make every caller realign its stack, on every statement. */
static __attribute__((noinline)) void guards_fill(lazy_guards *lg)
{
	lg->read = true;
	lg->g.ncounters = lg->g.nfloors = lg->g.narrays = lg->g.nsets = 0;
	lg->g.counted = false;
	push_update_guards(&lg->g, lg->u, lg->filter, lg->ff);
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
	if (push_guarded(g, wire_cur_key(c)) || push_set_guarded(g, c, each))
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
	if (depth > PUSH_MAX_DEPTH)
		return true; /* see PUSH_MAX_DEPTH */
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
	const char *op = push_two_operands(v, &x, &y);
	if (!op || !key_eq(op, "$add"))
		return NULL;
	const char *f = query_expr_field(&x);
	const bson_iter_t *k = &y;
	if (!f) {
		f = query_expr_field(&y);
		k = &x;
	}
	return f && push_is_number(k) && bson_iter_as_double(k) > 0 ? f : NULL;
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
	const char *op = push_two_operands(cond, &x, &y);
	bool below = op && (key_eq(op, "$lt") || key_eq(op, "$lte"));
	if (!below && !(op && (key_eq(op, "$gt") || key_eq(op, "$gte"))))
		return false;
	const bson_iter_t *held = below ? &x : &y, *bound = below ? &y : &x;
	if (!push_is_number(bound))
		return false;
	const char *sized = push_size_of_path(held), *counter = query_expr_field(held);
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
	if (depth > PUSH_MAX_DEPTH)
		return true; /* see PUSH_MAX_DEPTH */
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
	if (depth > PUSH_MAX_DEPTH) { /* see PUSH_MAX_DEPTH */
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
		if (n < 0 || (size_t)n >= sizeof(field)) { /* see PUSH_MAX_DEPTH */
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
		if (!push_guarded(g, field))
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
	push_guards_of(&g, filter, ff);
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
