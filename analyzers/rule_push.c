/* unbounded-push: checks update documents and update pipelines. */
#include "analyzers/rule_push.h"

#include <stdio.h>
#include <string.h>

#include "analyzers/keys.h"
#include "analyzers/rule_api.h"

#define MAX_DEPTH 100

static void add_field(push_hit *hit, const char *field)
{
	size_t len = strlen(hit->fields);
	if (len + 1 >= sizeof(hit->fields))
		return;
	snprintf(hit->fields + len, sizeof(hit->fields) - len, "%s\"%s\"", len ? ", " : "", field);
}

/* One member of $push: {field: value}. NULL when bounded. */
static const char *push_value_form(const bson_iter_t *v)
{
	bson_iter_t c;
	bool each = false, slice = false;
	if (!BSON_ITER_HOLDS_DOCUMENT(v) || !bson_iter_recurse(v, &c))
		return "has no $each + $slice";
	while (bson_iter_next(&c)) {
		const char *k = bson_iter_key(&c);
		if (key_eq(k, "$each"))
			each = true;
		else if (key_eq(k, "$slice"))
			slice = true;
	}
	if (each && slice)
		return NULL;
	if (each)
		return "has $each but no $slice";
	if (slice)
		return "has $slice without $each (the document itself is pushed)";
	return "has no $each + $slice";
}

static bool check_push(const bson_iter_t *push, push_hit *hit)
{
	bson_iter_t c;
	if (!BSON_ITER_HOLDS_DOCUMENT(push) || !bson_iter_recurse(push, &c))
		return false;
	bool found = false;
	while (bson_iter_next(&c)) {
		const char *form = push_value_form(&c);
		if (!form)
			continue;
		if (!found)
			hit->form = form;
		add_field(hit, bson_iter_key(&c));
		found = true;
	}
	return found;
}

/* Does expr reference path (the "$field" string) outside any $slice? */
static bool refs_path_unbounded(const bson_iter_t *it, const char *path, int depth)
{
	bson_iter_t c;
	if (depth > MAX_DEPTH)
		return false;
	if (BSON_ITER_HOLDS_UTF8(it))
		return strcmp(bson_iter_utf8(it, NULL), path) == 0;
	if (!(BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) ||
	    !bson_iter_recurse(it, &c))
		return false;
	while (bson_iter_next(&c)) {
		if (BSON_ITER_HOLDS_DOCUMENT(it)) {
			const char *k = bson_iter_key(&c);
			if (key_eq(k, "$slice") || key_eq(k, "$literal"))
				continue;
		}
		if (refs_path_unbounded(&c, path, depth + 1))
			return true;
	}
	return false;
}

/* Is there a $concatArrays, not under $slice, with an operand that reads
 * the assigned field unbounded? */
static bool concat_appends(const bson_iter_t *expr, const char *path, int depth)
{
	bson_iter_t c;
	if (depth > MAX_DEPTH || !(BSON_ITER_HOLDS_DOCUMENT(expr) || BSON_ITER_HOLDS_ARRAY(expr)) ||
	    !bson_iter_recurse(expr, &c))
		return false;
	bool doc = BSON_ITER_HOLDS_DOCUMENT(expr);
	while (bson_iter_next(&c)) {
		const char *k = doc ? bson_iter_key(&c) : NULL; /* NULL: array element */
		if (k && (key_eq(k, "$slice") || key_eq(k, "$literal")))
			continue; /* bounded, or not an expression */
		if (k && key_eq(k, "$concatArrays") && BSON_ITER_HOLDS_ARRAY(&c)) {
			bson_iter_t op;
			if (bson_iter_recurse(&c, &op))
				while (bson_iter_next(&op))
					if (refs_path_unbounded(&op, path, depth + 1))
						return true;
			/* Every $concatArrays nested in these operands (outside
			 * $slice and $literal, which refs_path_unbounded skips
			 * too) reads only what was just walked, so descending
			 * would find nothing new, and re-walking each nested
			 * operand made the cost depth x size: 30 nested levels
			 * over a 38 MB array held a worker for seconds. */
			continue;
		}
		if (concat_appends(&c, path, depth + 1))
			return true;
	}
	return false;
}

/* $set / $addFields: {field: expr}; an object literal {a: {b: expr}}
 * assigns a.b, so the walk extends the path through it. */
static bool check_assignments(const bson_iter_t *fields, const char *prefix, push_hit *hit,
                              int depth)
{
	bson_iter_t c;
	bool found = false;
	if (depth > MAX_DEPTH || !BSON_ITER_HOLDS_DOCUMENT(fields) ||
	    !bson_iter_recurse(fields, &c))
		return false;
	while (bson_iter_next(&c)) {
		const char *k = bson_iter_key(&c);
		char field[200], path[208];
		if (prefix[0])
			snprintf(field, sizeof(field), "%s.%s", prefix, k);
		else
			snprintf(field, sizeof(field), "%s", k);
		bson_iter_t first;
		if (BSON_ITER_HOLDS_DOCUMENT(&c) && bson_iter_recurse(&c, &first) &&
		    bson_iter_next(&first) && bson_iter_key(&first)[0] != '$') {
			if (check_assignments(&c, field, hit, depth + 1))
				found = true;
			continue;
		}
		snprintf(path, sizeof(path), "$%s", field);
		if (concat_appends(&c, path, depth + 1)) {
			add_field(hit, field);
			found = true;
		}
	}
	return found;
}

static bool check_pipeline(const bson_iter_t *pipeline, push_hit *hit)
{
	bson_iter_t stage, c;
	bool found = false;
	if (!bson_iter_recurse(pipeline, &stage))
		return false;
	while (bson_iter_next(&stage)) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&stage) || !bson_iter_recurse(&stage, &c))
			continue;
		while (bson_iter_next(&c)) {
			const char *k = bson_iter_key(&c);
			if ((key_eq(k, "$set") || key_eq(k, "$addFields")) &&
			    check_assignments(&c, "", hit, 0))
				found = true;
		}
	}
	if (found) {
		hit->pipeline = true;
		hit->form = "is appended to with $concatArrays and no $slice";
	}
	return found;
}

bool rule_push_update(const bson_iter_t *u, push_hit *hit)
{
	bson_iter_t c;
	memset(hit, 0, sizeof(*hit));
	if (BSON_ITER_HOLDS_ARRAY(u))
		return check_pipeline(u, hit);
	if (!BSON_ITER_HOLDS_DOCUMENT(u) || !bson_iter_recurse(u, &c))
		return false;
	/* Only a top-level $push is an operator; a replacement document's
	 * fields are data, whatever they are called. */
	if (!bson_iter_next(&c) || bson_iter_key(&c)[0] != '$')
		return false;
	do {
		if (key_eq(bson_iter_key(&c), "$push"))
			return check_push(&c, hit);
	} while (bson_iter_next(&c));
	return false;
}

/* ---- the rule: check and words ---- */

static void check_update(rule_ctx *c, const rule_site *s, const bson_iter_t *u)
{
	push_hit hit;
	if (rule_wanted(c, s, RULE_UNBOUNDED_PUSH) && rule_push_update(u, &hit))
		rule_report(c, s, RULE_UNBOUNDED_PUSH, &hit);
}

static void words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w)
{
	const push_hit *hit = facts;
	text_buf t;
	text_init(&t, w->buf, sizeof(w->buf));
	size_t start = text_mark(&t);
	if (hit->pipeline) {
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
};

const rule_def rule_push_def = {
    .id = RULE_UNBOUNDED_PUSH,
    .name = "unbounded-push",
    .summary = "an update appends to an array with nothing bounding its length",
    .checks = &checks,
};
