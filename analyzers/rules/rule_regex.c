/* case-insensitive-regex: walks filters the way the server parses them.
 * Each walker returns at the first hit; a filter yields one finding. */
#include "analyzers/rules/rule_regex.h"

#include <stdio.h>
#include <string.h>

#include "analyzers/planner/index_set.h"
#include "analyzers/planner/paths.h"
#include "analyzers/planner/query_preds.h"
#include "analyzers/planner/points.h"
#include "analyzers/planner/stages.h"
#include "analyzers/rules/rule_api.h"
#include "analyzers/rules/rule_scan.h"
#include "protocol/text.h"
#include "protocol/wire_iter.h"

/* Query nesting is bounded by mongod (100 levels); deeper input is not
 * walked further. It is reported as a hit, not passed over: FerretDB runs a
 * filter 100 $and levels deep, so a regex under the limit would otherwise
 * reach the server unjudged while the rule says block. mongod refuses such
 * a filter anyway, so nothing it would run is blocked by this. */
#define MAX_DEPTH 100

bool rule_regex_options_insensitive(const char *options)
{
	return options && strchr(options, 'i') != NULL;
}

bool rule_regex_pattern_insensitive(const char *p)
{
	if (!p)
		return false;
	if (p[0] == '^')
		p++;
	if (p[0] != '(' || p[1] != '?')
		return false;
	/* (?flags) or (?flags:...) or (?flags-flags); i after '-' turns it off */
	bool on = false;
	for (p += 2; *p && *p != ')' && *p != ':'; p++) {
		if (*p == '-')
			return on;
		if (*p == 'i')
			on = true;
		else if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
			return false; /* (?<name>...), (?=...), (?#...): not flags */
	}
	return on && *p != '\0';
}

/* The hit at field: its form, the words head, arg and tail. */
static void set_hit(regex_hit *hit, const char *field, const char *head, const char *arg,
                    const char *tail)
{
	hit->field[0] = hit->how[0] = '\0';
	text_cat(hit->field, sizeof(hit->field), field ? field : "");
	text_cat(hit->how, sizeof(hit->how), head);
	text_cat(hit->how, sizeof(hit->how), arg ? arg : "");
	text_cat(hit->how, sizeof(hit->how), tail);
}

/* A BSON regex value standing where a pattern matches ({f: /x/i}, an $in
 * element, $not's operand). */
static bool check_regex_value(const bson_iter_t *it, const char *field, const char *where,
                              regex_hit *hit)
{
	const char *opts = NULL;
	const char *pat = bson_iter_regex(it, &opts);
	if (rule_regex_options_insensitive(opts)) {
		set_hit(hit, field, "a /.../", opts, " regex");
	} else if (rule_regex_pattern_insensitive(pat)) {
		set_hit(hit, field, "a regex with an inline (?i) flag", "", "");
	} else {
		return false;
	}
	if (where) {
		text_cat(hit->how, sizeof(hit->how), " in ");
		text_cat(hit->how, sizeof(hit->how), where);
	}
	return true;
}

/* The hit for input nested beyond MAX_DEPTH (see there). */
static bool too_deep(regex_hit *hit, const char *field)
{
	set_hit(hit, field, "nested more than ", "100", " levels deep");
	hit->too_deep = true;
	return true;
}

static bool walk_filter(const bson_iter_t *doc, const char *prefix, regex_hit *hit, int depth);
static bool walk_expr(const bson_iter_t *it, regex_hit *hit, int depth);

/* Arrays of $in, $nin, $all: their regex elements match as patterns. */
static bool walk_list(const bson_iter_t *arr, const char *field, const char *op, regex_hit *hit,
                      int depth);

static bool is_filter_level(const char *k)
{
	return key_eq(k, "$and") || key_eq(k, "$or") || key_eq(k, "$nor") || key_eq(k, "$expr") ||
	       key_eq(k, "$where") || key_eq(k, "$text") || key_eq(k, "$comment") ||
	       key_eq(k, "$jsonSchema");
}

static bool walk_ops(const bson_iter_t *ops, const char *field, regex_hit *hit, int depth);

/* $elemMatch: {$regex: ...} applies to each element (value form);
 * {sub: /x/i} is a filter on element documents (document form). */
static bool walk_elem_match(const bson_iter_t *v, const char *field, regex_hit *hit, int depth)
{
	bson_iter_t c;
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &c) || !wire_iter_next(&c))
		return false;
	const char *k = wire_iter_key(&c);
	if (k[0] == '$' && !is_filter_level(k))
		return walk_ops(v, field, hit, depth + 1);
	return walk_filter(v, field, hit, depth + 1);
}

static bool walk_list(const bson_iter_t *arr, const char *field, const char *op, regex_hit *hit,
                      int depth)
{
	bson_iter_t c;
	if (!WIRE_ITER_HOLDS_ARRAY(arr) || !wire_iter_recurse(arr, &c))
		return false;
	while (wire_iter_next(&c)) {
		if (WIRE_ITER_HOLDS_REGEX(&c) && check_regex_value(&c, field, op, hit))
			return true;
		/* {$all: [{$elemMatch: {...}}, ...]} */
		bson_iter_t em;
		if (key_eq(op, "$all") && WIRE_ITER_HOLDS_DOCUMENT(&c) &&
		    wire_iter_recurse(&c, &em) && bson_iter_find(&em, "$elemMatch") &&
		    walk_elem_match(&em, field, hit, depth))
			return true;
	}
	return false;
}

/* A field's operator document: {$regex: ..., $options: ..., $in: [...] ...}. */
static bool walk_ops(const bson_iter_t *ops, const char *field, regex_hit *hit, int depth)
{
	bson_iter_t c, re;
	bool has_regex = false;
	const char *options = NULL;
	if (depth > MAX_DEPTH)
		return too_deep(hit, field);
	if (!wire_iter_recurse(ops, &c))
		return false;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (k[0] != '$')
			continue;
		if (key_eq(k, "$regex")) {
			re = c;
			has_regex = true;
		} else if (key_eq(k, "$options")) {
			/* A repeated $options counts when any occurrence has i:
			 * mongod takes a later one only when the earlier ones are
			 * empty (and refuses the rest), other servers may take
			 * either. */
			if (WIRE_ITER_HOLDS_UTF8(&c) && !rule_regex_options_insensitive(options))
				options = bson_iter_utf8(&c, NULL);
		} else if (key_eq(k, "$in") || key_eq(k, "$nin") || key_eq(k, "$all")) {
			if (walk_list(&c, field, k, hit, depth))
				return true;
		} else if (key_eq(k, "$not")) {
			if (WIRE_ITER_HOLDS_REGEX(&c) && check_regex_value(&c, field, "$not", hit))
				return true;
			if (WIRE_ITER_HOLDS_DOCUMENT(&c) && walk_ops(&c, field, hit, depth + 1)) {
				text_cat(hit->how, sizeof(hit->how), " under $not");
				return true;
			}
		} else if (key_eq(k, "$elemMatch")) {
			if (walk_elem_match(&c, field, hit, depth))
				return true;
		}
	}
	if (!has_regex)
		return false;
	/* The server takes flags from the BSON regex or from $options (not
	 * both non-empty), and PCRE honours an inline group either way. */
	const char *pattern = NULL, *flags = NULL;
	if (WIRE_ITER_HOLDS_REGEX(&re))
		pattern = bson_iter_regex(&re, &flags);
	else if (WIRE_ITER_HOLDS_UTF8(&re))
		pattern = bson_iter_utf8(&re, NULL);
	else
		return false;
	if (rule_regex_options_insensitive(options))
		set_hit(hit, field, "$regex with $options \"", options, "\"");
	else if (rule_regex_options_insensitive(flags))
		set_hit(hit, field, "$regex: /.../", flags, "");
	else if (rule_regex_pattern_insensitive(pattern))
		set_hit(hit, field, "$regex with an inline (?i) flag", "", "");
	else
		return false;
	return true;
}

/* prefix.key, truncated to fit; on the request path, so no snprintf. */
static void join_path(char *out, size_t cap, const char *prefix, const char *key)
{
	size_t n = 0;
	if (prefix && *prefix) {
		size_t a = strlen(prefix);
		if (a > cap - 2)
			a = cap - 2;
		memcpy(out, prefix, a);
		out[a] = '.';
		n = a + 1;
	}
	size_t b = strlen(key);
	if (b > cap - 1 - n)
		b = cap - 1 - n;
	memcpy(out + n, key, b);
	out[n + b] = '\0';
}

static bool walk_member(const bson_iter_t *it, const char *prefix, regex_hit *hit, int depth);

/* A filter document; prefix is the enclosing field for $elemMatch's
 * document form, so the hit names the full path. */
static bool walk_filter(const bson_iter_t *doc, const char *prefix, regex_hit *hit, int depth)
{
	bson_iter_t c;
	if (depth > MAX_DEPTH)
		return too_deep(hit, prefix);
	if (!WIRE_ITER_HOLDS_DOCUMENT(doc) || !wire_iter_recurse(doc, &c))
		return false;
	while (wire_iter_next(&c))
		if (walk_member(&c, prefix, hit, depth))
			return true;
	return false;
}

/* One member of a filter document. Inlined into walk_filter: it runs per
 * member of every filter walked, where a call each would cost about as
 * much as the member's own test. */
static inline __attribute__((always_inline)) bool
walk_member(const bson_iter_t *it, const char *prefix, regex_hit *hit, int depth)
{
	const char *k = wire_iter_key(it);
	if (k[0] == '$') {
		if (key_eq(k, "$and") || key_eq(k, "$or") || key_eq(k, "$nor")) {
			bson_iter_t e;
			if (WIRE_ITER_HOLDS_ARRAY(it) && wire_iter_recurse(it, &e))
				while (wire_iter_next(&e))
					if (walk_filter(&e, prefix, hit, depth + 1))
						return true;
		} else if (key_eq(k, "$expr")) {
			if (walk_expr(it, hit, depth + 1))
				return true;
		}
		/* $text, $where, $comment, $jsonSchema, unknown: no regex match
		 * the server would run through an index. */
		return false;
	}
	/* Scalars other than regexes match nothing by pattern. */
	if (!WIRE_ITER_HOLDS_REGEX(it) && !WIRE_ITER_HOLDS_DOCUMENT(it))
		return false;
	char path[sizeof(hit->field)];
	join_path(path, sizeof(path), prefix, k);
	if (WIRE_ITER_HOLDS_REGEX(it))
		return check_regex_value(it, path, NULL, hit);
	/* {f: {$op: ...}} is an operator document; {f: {a: 1}} is an equality
	 * on an embedded document and matches nothing by pattern, whatever its
	 * fields are called ("$options" or "i" included). */
	bson_iter_t first;
	return wire_iter_recurse(it, &first) && wire_iter_next(&first) &&
	       wire_iter_key(&first)[0] == '$' && walk_ops(it, path, hit, depth + 1);
}

/* {$regexMatch: {input, regex, options}} */
static bool check_regex_expr(const bson_iter_t *args, const char *op, regex_hit *hit)
{
	bson_iter_t c;
	const char *field = "", *options = NULL, *pattern = NULL, *flags = NULL;
	if (!WIRE_ITER_HOLDS_DOCUMENT(args) || !wire_iter_recurse(args, &c))
		return false;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "input") && WIRE_ITER_HOLDS_UTF8(&c)) {
			const char *in = bson_iter_utf8(&c, NULL);
			if (in[0] == '$' && in[1] != '$')
				field = in + 1;
		} else if (key_eq(k, "regex")) {
			if (WIRE_ITER_HOLDS_REGEX(&c))
				pattern = bson_iter_regex(&c, &flags);
			else if (WIRE_ITER_HOLDS_UTF8(&c))
				pattern = bson_iter_utf8(&c, NULL);
		} else if (key_eq(k, "options") && WIRE_ITER_HOLDS_UTF8(&c)) {
			options = bson_iter_utf8(&c, NULL);
		}
	}
	char how[sizeof(hit->how)];
	if (rule_regex_options_insensitive(options))
		snprintf(how, sizeof(how), "%s with options \"%s\" in $expr", op, options);
	else if (rule_regex_options_insensitive(flags))
		snprintf(how, sizeof(how), "%s with a /.../%s regex in $expr", op, flags);
	else if (rule_regex_pattern_insensitive(pattern))
		snprintf(how, sizeof(how), "%s with an inline (?i) flag in $expr", op);
	else
		return false;
	set_hit(hit, field, how, "", "");
	return true;
}

/* An aggregation expression: any operator may nest a regex expression. */
static bool walk_expr(const bson_iter_t *it, regex_hit *hit, int depth)
{
	bson_iter_t c;
	if (depth > MAX_DEPTH)
		return too_deep(hit, NULL);
	if (WIRE_ITER_HOLDS_ARRAY(it)) {
		if (wire_iter_recurse(it, &c))
			while (wire_iter_next(&c))
				if (walk_expr(&c, hit, depth + 1))
					return true;
		return false;
	}
	if (!WIRE_ITER_HOLDS_DOCUMENT(it) || !wire_iter_recurse(it, &c))
		return false;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "$literal"))
			continue;
		if (key_eq(k, "$regexMatch") || key_eq(k, "$regexFind") ||
		    key_eq(k, "$regexFindAll")) {
			if (check_regex_expr(&c, k, hit))
				return true;
		}
		if ((WIRE_ITER_HOLDS_DOCUMENT(&c) || WIRE_ITER_HOLDS_ARRAY(&c)) &&
		    walk_expr(&c, hit, depth + 1))
			return true;
	}
	return false;
}

bool rule_regex_filter(const bson_iter_t *filter, regex_hit *hit)
{
	hit->coll[0] = '\0';
	hit->too_deep = false;
	return walk_filter(filter, NULL, hit, 0) &&
	       (hit->too_deep || !query_point_beside(filter, hit->field));
}

/* The same question of a filter the engine has read (facts.h): only the
 * members that can hide a pattern are walked, in the filter's order. */
static bool regex_in_facts(const filter_facts *f, regex_hit *hit)
{
	hit->coll[0] = '\0';
	hit->too_deep = false;
	for (unsigned i = 0; i < f->n; i++) {
		const fact_member *m = &f->m[i];
		if ((m->kind == FM_OPS && (m->ops & FOP_PATTERN)) || m->kind == FM_REGEX ||
		    m->kind == FM_TOP) {
			bson_iter_t it;
			wire_cur_iter(&m->at, &it);
			if (walk_member(&it, NULL, hit, 0))
				return true;
		}
	}
	return false;
}

/* The same for a filter held as a document (a query's, rule_query). */
static bool filter_doc_has_regex(const bson_t *filter, regex_hit *hit)
{
	bson_iter_t c;
	hit->coll[0] = '\0';
	hit->too_deep = false;
	if (!bson_iter_init(&c, filter))
		return false;
	while (wire_iter_next(&c))
		if (walk_member(&c, NULL, hit, 0))
			return true;
	return false;
}

/* The pattern whose $match's other members are read: on a plain member
 * (pipe_match_members names the others by where they land, renamed), or
 * inside an operator (then a member on its field is no other). */
typedef struct merged_of {
	const regex_hit *hit;
	bool plain;
} merged_of;

/* A member that lands in the pattern's $match (pipe_match_members) is a
 * point on another field. */
static bool merged_point(void *arg, const char *field, const bson_iter_t *member)
{
	const merged_of *m = arg;
	return (m->plain || strcmp(field, m->hit->field) != 0) && query_point_value(member);
}

/* field, when the pattern is a plain member of the filter's top-level
 * conjunction (or of a top-level $and in it), as query_point_beside reads it;
 * NULL when it sits inside an operator ($or, $elemMatch, ...). */
static const char *plain_member(const bson_iter_t *filter, const char *field, int depth)
{
	bson_iter_t c, e;
	if (depth > 4 || !WIRE_ITER_HOLDS_DOCUMENT(filter) || !wire_iter_recurse(filter, &c))
		return NULL;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (strcmp(k, field) == 0)
			return field;
		if (key_eq(k, "$and") && WIRE_ITER_HOLDS_ARRAY(&c) && wire_iter_recurse(&c, &e))
			while (wire_iter_next(&e))
				if (plain_member(&e, field, depth + 1))
					return field;
	}
	return NULL;
}

/* Whether the stages [0, end) of pipeline bound what the stage at end
 * reads, for a pattern on field: a $limit or $sample among them (it reads
 * that many), a head $match with a point (query_point_beside; on any field: the
 * stages after it may have renamed the pattern's),
 * a $documents source (no collection is read), or a $lookup with
 * localField / foreignField whose as holds field (mongod moves such a
 * $match into the join's query, beside foreignField's equality). */
static bool prefix_bounded(const bson_iter_t *pipeline, unsigned end, const char *field)
{
	bson_iter_t st, c;
	if (!pipeline || !wire_iter_recurse(pipeline, &st))
		return false;
	for (unsigned i = 0; i < end && wire_iter_next(&st); i++) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&st) || !wire_iter_recurse(&st, &c) ||
		    !wire_iter_next(&c))
			continue;
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "$limit") || key_eq(k, "$sample") ||
		    (i == 0 && key_eq(k, "$documents")))
			return true;
		if (i == 0 && key_eq(k, "$match") && query_point_beside(&c, ""))
			return true; /* the read is what the point selects */
		lookup_stage lk;
		if (key_eq(k, "$lookup") && lookup_stage_read(&c, false, &lk) && lk.local &&
		    lk.foreign && lk.as && path_at_or_under(field, lk.as, strlen(lk.as)))
			return true;
	}
	return false;
}

/* The pipeline walk's state: the hit, and for each depth whether the
 * input of the sub-pipeline there is bounded (a $facet branch's by the
 * stages before the $facet, a localField / foreignField $lookup's by
 * foreignField's equality). */
typedef struct regex_walk {
	regex_hit *hit;
	bool input_bounded[PIPELINE_MAX_DEPTH + 2];
} regex_walk;

/* Whether the pattern's read is bounded, or decided elsewhere:
 * - a $graphLookup's restrictSearchWithMatch runs beside connectToField's
 *   $in of the values reached (makeMatchStageFromFrontier), as populate's
 *   match beside {foreignField: {$in: [...]}};
 * - a $match the query layer reads (at its pipeline's head, where
 *   mongod's optimization moves it): a point beside the pattern there
 *   (pipe_match_members), or, in a localField / foreignField $lookup's
 *   pipeline, foreignField's equality;
 * - a $match that stays behind a stage (pipe_match_slot > 0), or one in
 *   a $facet branch, filters in memory what the stages before it read: it
 *   is bounded when they are (prefix_bounded; a branch's input, the
 *   stages before its $facet), and else the pattern is all that selects
 *   what an unbounded read returns: reported. */
static bool pattern_bounded(const regex_walk *w, const pipe_access *a, const regex_hit *hit)
{
	bool inherited = a->depth <= PIPELINE_MAX_DEPTH + 1 && w->input_bounded[a->depth];
	if (a->stage[1] == 'g' && a->stage[2] == 'r') /* $graphLookup */
		return true;
	if (!a->pipeline)
		return query_point_beside(a->it, hit->field);
	const char *f = plain_member(a->it, hit->field, 0);
	unsigned slot = pipe_match_slot(a, f);
	if (slot > 0 || a->facet)
		return inherited || prefix_bounded(a->pipeline, slot, hit->field);
	if (inherited)
		return true;
	if (a->index >= PIPE_MERGE_STAGES)
		return query_point_beside(a->it, hit->field);
	merged_of m = {hit, f != NULL};
	return pipe_match_members(a, f, merged_point, &m) ||
	       query_operator_point(a->it, hit->field);
}

/* The walk of the pipeline's accesses (stages.h): every filter a stage
 * applies, and the collection it reads named when it is another (the
 * innermost join, where the index belongs). */
static bool on_access(void *arg, const pipe_access *a)
{
	regex_walk *w = arg;
	regex_hit *hit = w->hit;
	if (a->kind == PIPE_TOO_DEEP) { /* refused by mongod; unread here: fail closed */
		set_hit(hit, NULL, "nested more than ", "20", " sub-pipelines deep");
		hit->too_deep = true;
		return false;
	}
	if (a->kind == PIPE_SUB && a->depth <= PIPELINE_MAX_DEPTH + 1) {
		bool parent = a->depth > 0 && w->input_bounded[a->depth - 1];
		w->input_bounded[a->depth] =
		    a->facet ? parent || prefix_bounded(a->pipeline, a->index, "")
		             : a->join && a->join->local && a->join->foreign;
		return true;
	}
	if (a->kind != PIPE_MATCH || !walk_filter(a->it, NULL, hit, 0))
		return true;
	if (!hit->too_deep && pattern_bounded(w, a, hit))
		return true;
	if (a->coll)
		snprintf(hit->coll, sizeof(hit->coll), "%s", a->coll);
	return false;
}

bool rule_regex_pipeline(const bson_iter_t *pipeline, regex_hit *hit)
{
	regex_walk w = {.hit = hit};
	hit->coll[0] = '\0';
	hit->too_deep = false;
	return !pipeline_walk(pipeline, on_access, &w);
}

/* ---- a case-insensitive collation that no index of it serves ----
 *
 * {find, filter: {name: "bob"}, collation: {locale: "en", strength: 2}}
 * compares strings without case, but only an index with that same
 * collation can bound such comparisons: the planner will not use an index
 * of another collation (the simple one included) for them, so without one
 * the query scans. What serves a query, read as collection-scan reads it
 * (query_preds): an index whose leading field is a filter field (or a
 * sort field) and whose collation is the query's; or an index of any
 * collation whose leading field has a bound that holds no strings
 * ({age: 5}); for an $or, each branch served. A filter served that way
 * must also be bounded in collection-scan's planner model
 * (rule_scan_filter_collated: a hashed index takes no range, a sparse one
 * no null, ...), unless an index with the collation leads with a sort
 * field. Unknown indexes (odd, wildcard), a hint, $text / $near, more
 * fields than are read: no verdict. */

/* A query's collation that ignores case: strength 1 or 2 without
 * caseLevel (its locale and strength). The manual's "Collation":
 * caseLevel true includes case comparison at strength 1 (base characters
 * and case) and 2 (base characters, diacritics and case), so such a query
 * matches case-sensitively and is no business of this rule. */
static bool insensitive_collation(const bson_t *c, collation_hit *h)
{
	bson_iter_t it;
	if (query_collation_is_simple(c) || !bson_iter_init_find(&it, c, "strength") ||
	    !WIRE_ITER_HOLDS_NUMBER(&it))
		return false;
	h->strength = bson_iter_as_int64(&it);
	if (h->strength != 1 && h->strength != 2)
		return false;
	if (bson_iter_init_find(&it, c, "caseLevel") && bson_iter_as_bool(&it))
		return false;
	h->locale = bson_iter_init_find(&it, c, "locale") && WIRE_ITER_HOLDS_UTF8(&it)
	                ? bson_iter_utf8(&it, NULL)
	                : "";
	return true;
}

/* A predicate whose bounds may hold strings (or documents or arrays): the
 * comparisons the collation decides (not a regex, $exists or $type). */
static bool collated_pred(const query_pred *q)
{
	return q->collates && !q->bounded_nc;
}

/* The collated fields of p from its from-th on, for the words. */
static void note_fields(collation_hit *h, const query_preds *p, size_t from)
{
	for (size_t i = from; i < p->n; i++) {
		if (!collated_pred(&p->p[i]))
			continue;
		bool known = false;
		for (size_t j = 0; j < h->nfields && !known; j++)
			known = strcmp(h->fields[j], p->p[i].field) == 0;
		if (known)
			continue;
		if (h->nfields == COLLATION_FIELDS_MAX) {
			h->more = true;
			return;
		}
		h->fields[h->nfields++] = p->p[i].field;
	}
}

/* The string comparisons of a top-level $expr (and of $expr in a
 * top-level $and) that mongod 5.0+ rewrites into index-usable matches
 * (query_expr_comparisons): a field path compared with a string constant,
 * decided by the query's collation like any other string bound. Each path
 * is added to p as a collated predicate (its name points into the
 * filter). A variable's value is not known: not counted (a finding can be
 * missed, none invented). */
static void expr_cmp_string(void *arg, const query_expr_cmp *c)
{
	query_preds *p = arg;
	if (c->variable || !WIRE_ITER_HOLDS_UTF8(c->value) || query_preds_find(p, c->field) ||
	    p->n == QUERY_PREDS_MAX)
		return;
	query_pred *q = &p->p[p->n++];
	memset(q, 0, sizeof(*q));
	q->field = c->field;
	q->any = q->collates = true;
}

static void expr_collated(query_preds *p, const bson_t *filter, int depth)
{
	bson_iter_t it, e;
	if (depth > 4 || !bson_iter_init(&it, filter))
		return;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (key_eq(k, "$expr")) {
			query_expr_comparisons(&it, expr_cmp_string, NULL, p);
		} else if (key_eq(k, "$and") && WIRE_ITER_HOLDS_ARRAY(&it) &&
		           wire_iter_recurse(&it, &e)) {
			while (wire_iter_next(&e)) {
				uint32_t len;
				const uint8_t *data;
				bson_t sub;
				if (!WIRE_ITER_HOLDS_DOCUMENT(&e))
					continue;
				bson_iter_document(&e, &len, &data);
				if (bson_init_static(&sub, data, len))
					expr_collated(p, &sub, depth + 1);
			}
		}
	}
}

typedef enum { CI_SERVED, CI_UNSERVED, CI_UNKNOWN } ci_verdict;

static bool sorts_on(const sort_spec *sort, const char *field)
{
	for (size_t i = 0; i < sort->n; i++)
		if (strcmp(sort->keys[i].field, field) == 0)
			return true;
	return false;
}

/* One conjunction: some index serves it (see above). */
static ci_verdict conj_served(const index_set *set, const bson_t *qc, const query_preds *p,
                              const sort_spec *sort)
{
	bool unknown = false;
	for (size_t i = 0; i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		if (d->hidden || d->plugin || d->nkeys == 0)
			continue;
		if (d->odd || d->wildcard) {
			unknown = true;
			continue;
		}
		const char *lead = d->keys[0].field;
		bool same = index_collation_same(d->collation, qc);
		const query_pred *q = query_preds_find(p, lead);
		if ((q && q->any && (same || q->bounded_nc || !q->collates)) ||
		    (q && q->regex_bounded && !d->collation) || (same && sorts_on(sort, lead)))
			return CI_SERVED;
	}
	return unknown ? CI_UNKNOWN : CI_UNSERVED;
}

/* An $or clause (its array's bytes): served when every branch is, each
 * read on top of the predicates around it. */
static ci_verdict or_served(const index_set *set, const bson_t *qc, const query_preds *base,
                            const uint8_t *data, uint32_t len, const sort_spec *sort,
                            collation_hit *h)
{
	bson_t arr, branch;
	bson_iter_t it;
	ci_verdict v = CI_SERVED;
	if (!bson_init_static(&arr, data, len) || !bson_iter_init(&it, &arr))
		return CI_UNKNOWN;
	while (wire_iter_next(&it)) {
		uint32_t blen;
		const uint8_t *bdata;
		if (!WIRE_ITER_HOLDS_DOCUMENT(&it))
			return CI_UNKNOWN;
		bson_iter_document(&it, &blen, &bdata);
		if (!bson_init_static(&branch, bdata, blen))
			return CI_UNKNOWN;
		query_preds bp = *base; /* 2.6 KB, only for a collated query with an $or */
		size_t from = bp.n;
		query_preds_collect(&bp, &branch);
		if (bp.overflow || bp.text_or_near || bp.refused)
			return CI_UNKNOWN;
		ci_verdict b = conj_served(set, qc, &bp, sort);
		if (b == CI_UNSERVED) {
			note_fields(h, &bp, from); /* the words name what is not served */
			v = CI_UNSERVED;
		} else if (b == CI_UNKNOWN && v == CI_SERVED) {
			v = CI_UNKNOWN;
		}
	}
	return v;
}

static ci_verdict query_served(const index_set *set, const bson_t *qc, const query_preds *p,
                               const sort_spec *sort, collation_hit *h)
{
	note_fields(h, p, 0);
	ci_verdict v = conj_served(set, qc, p, sort);
	for (size_t i = 0; v != CI_SERVED && i < p->nors; i++) {
		ci_verdict o = or_served(set, qc, p, p->ors[i].data, p->ors[i].len, sort, h);
		if (o == CI_SERVED)
			return CI_SERVED;
		if (o == CI_UNKNOWN)
			v = CI_UNKNOWN;
	}
	return v;
}

/* Whether rq, run with a case-insensitive collation, has collated
 * predicates that no index of its collection with that collation serves;
 * the fields and the collation in h. A case-insensitive regex in the
 * filter is the filter check's finding already. */
static bool collation_unserved(rule_ctx *c, const rule_site *s, const rule_query *rq,
                               collation_hit *h)
{
	const bson_t *qc = rq->q.collation;
	query_preds p;
	sort_spec sort;
	regex_hit re;
	const index_set *set;
	h->nfields = 0;
	h->more = false;
	if (!rq->q.filter || !insensitive_collation(qc, h) || rq->q.hint_doc || rq->q.hint_name)
		return false;
	query_preds_init(&p);
	query_preds_collect(&p, rq->q.filter);
	expr_collated(&p, rq->q.filter, 0);
	if (p.overflow || p.text_or_near || p.refused || p.ors_overflow ||
	    filter_doc_has_regex(rq->q.filter, &re))
		return false;
	if (query_sort_parse(rq->q.sort, &sort) != SORT_SPEC_KEYS)
		sort.n = 0;
	if (rule_ctx_indexes(c, s->db, s->coll, &set) != INDEXES_KNOWN ||
	    index_set_is_opaque(set, NULL))
		return false; /* no verdict without the list */
	const index_def *id = index_set_id_index(set);
	if (id && index_collation_same(id->collation, qc))
		return false; /* the collection's default: its indexes have it */
	ci_verdict v = query_served(set, qc, &p, &sort, h);
	if (v == CI_SERVED) {
		/* An index with the collation leads with a field the filter
		 * names: served only if the planner model (collection-scan's:
		 * per operator and index kind) agrees it bounds the filter, or
		 * such an index leads with a sort field. */
		query_preds none;
		query_preds_init(&none);
		if (rule_scan_filter_collated(set, rq->q.filter, qc, NULL, NULL) !=
		        SCAN_UNBOUNDED ||
		    (sort.n > 0 && conj_served(set, qc, &none, &sort) != CI_UNSERVED))
			return false;
		v = CI_UNSERVED;
	}
	return v == CI_UNSERVED && h->nfields > 0;
}

/* ---- the rule: check and words ---- */

/* A finding's facts: one of the two. */
typedef struct ci_facts {
	const regex_hit *regex;
	const collation_hit *collation;
} ci_facts;

static void check_filter(rule_ctx *c, const rule_site *s, const bson_iter_t *filter)
{
	regex_hit hit;
	ci_facts f = {&hit, NULL};
	/* Called with facts only for a filter that may match by pattern
	 * (filter_when): the members that can are walked. */
	const filter_facts *ff = s->facts && s->facts->has_filter && s->facts->filter.complete
	                             ? &s->facts->filter
	                             : NULL;
	if (!rule_wanted(c, s, RULE_CASE_INSENSITIVE_REGEX) ||
	    !(ff ? regex_in_facts(ff, &hit) &&
	               (hit.too_deep || !query_point_beside(filter, hit.field))
	         : rule_regex_filter(filter, &hit)))
		return;
	rule_report(c, s, RULE_CASE_INSENSITIVE_REGEX, &f);
}

static void check_pipeline(rule_ctx *c, const rule_site *s, const bson_iter_t *pipeline)
{
	regex_hit hit;
	ci_facts f = {&hit, NULL};
	if (rule_wanted(c, s, RULE_CASE_INSENSITIVE_REGEX) && rule_regex_pipeline(pipeline, &hit))
		rule_report(c, s, RULE_CASE_INSENSITIVE_REGEX, &f);
}

/* Most queries carry no collation: one comparison. */
static void check_query(rule_ctx *c, const rule_site *s, const rule_query *rq)
{
	collation_hit hit;
	ci_facts f = {NULL, &hit};
	if (rq->q.collation && s->coll && rule_wanted(c, s, RULE_CASE_INSENSITIVE_REGEX) &&
	    collation_unserved(c, s, rq, &hit))
		rule_report(c, s, RULE_CASE_INSENSITIVE_REGEX, &f);
}

/* The inside of a JavaScript / JSON string literal. */
static void js(text_buf *t, const char *s)
{
	text_json_str(t, s, strlen(s), 0);
}

/* {locale: "en", strength: 2}, as the query gave it. */
static void collation_text(text_buf *t, const collation_hit *h)
{
	text_str(t, "{locale: \"");
	js(t, h->locale);
	text_printf(t, "\", strength: %d}", (int)h->strength);
}

static void collation_words(const rule_site *s, const collation_hit *h, rule_words *w)
{
	text_buf t;
	text_init(&t, w->buf, sizeof(w->buf));
	size_t start = text_mark(&t);
	for (size_t i = 0; i < h->nfields; i++) {
		text_str(&t, i ? ", \"" : "\"");
		js(&t, h->fields[i]);
		text_char(&t, '"');
	}
	text_str(&t, h->more ? " and more are" : h->nfields > 1 ? " are" : " is");
	text_str(&t, " compared case-insensitively with collation ");
	collation_text(&t, h);
	text_str(&t, ", but no index of ");
	js(&t, s->ns);
	text_str(&t, " with that collation serves the query, and an index of another collation "
	             "cannot bound string comparisons: the query scans the collection");
	w->detail = rule_words_piece(&t, start);
	start = text_mark(&t);
	text_str(&t, "db.getSiblingDB(\"");
	js(&t, s->db);
	text_str(&t, "\").getCollection(\"");
	js(&t, s->coll);
	text_str(&t, "\").createIndex({\"");
	js(&t, h->fields[0]);
	text_str(&t, "\": 1}, {collation: ");
	collation_text(&t, h);
	text_str(&t, "}): an index with the query's collation whose leading field is one it "
	             "compares (or run the query without a collation against a stored "
	             "lower-cased copy of the field)");
	w->suggestion = rule_words_piece(&t, start);
	w->fix = "create an index with the query's collation on a field it compares, e.g. "
	         "createIndex({field: 1}, {collation: {locale: \"en\", strength: 2}})";
}

static void words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w)
{
	const ci_facts *f = facts;
	if (f->collation) {
		collation_words(s, f->collation, w);
		return;
	}
	const regex_hit *hit = f->regex;
	/* Inside a join the field belongs to the joined collection. */
	const char *where = hit->coll[0] ? hit->coll : s->coll;
	text_buf t;
	text_init(&t, w->buf, sizeof(w->buf));

	size_t start = text_mark(&t);
	if (hit->too_deep) {
		/* Blocked unjudged (see MAX_DEPTH): say so, not that a regex was seen. */
		text_str(&t, "the filter is nested more than 100 levels deep (mongod refuses it), "
		             "too deep for mongoguard to tell whether a case-insensitive regex "
		             "selects documents");
		w->detail = rule_words_piece(&t, start);
		start = text_mark(&t);
		text_str(&t, "flatten the filter: merge the nested $and / $or / $elemMatch levels");
		w->suggestion = rule_words_piece(&t, start);
		w->fix = "flatten the filter to fewer than 100 levels";
		return;
	}
	if (hit->field[0]) {
		text_char(&t, '"');
		js(&t, hit->field);
		text_char(&t, '"');
		if (hit->coll[0]) {
			text_str(&t, " (in joined collection \"");
			js(&t, hit->coll);
			text_str(&t, "\")");
		}
		text_printf(&t,
		            " is matched with a case-insensitive regex (%s), which no index can "
		            "bound, so mongod reads every key of an index on it, or every document "
		            "without one",
		            hit->how);
	} else {
		text_printf(&t,
		            "a case-insensitive regex (%s) matches documents; no index can bound "
		            "it, so mongod reads every key of an index on it, or every document "
		            "without one",
		            hit->how);
	}
	w->detail = rule_words_piece(&t, start);

	start = text_mark(&t);
	if (hit->field[0] && where) {
		text_str(&t, "db.getSiblingDB(\"");
		js(&t, s->db);
		text_str(&t, "\").getCollection(\"");
		js(&t, where);
		text_str(&t, "\").createIndex({\"");
		js(&t, hit->field);
		text_str(&t, "\": 1}, {collation: {locale: \"en\", strength: 2}}) and query by "
		             "equality with the same collation: .find({\"");
		js(&t, hit->field);
		text_str(&t, "\": <value>}).collation({locale: \"en\", strength: 2}); or store a "
		             "lower-cased copy of \"");
		js(&t, hit->field);
		text_str(&t, "\", index it and match it by equality");
	} else {
		text_str(&t,
		         "create an index with {collation: {locale: \"en\", strength: 2}} on the "
		         "field and query it by equality with the same collation, or store a "
		         "lower-cased copy of the field, index it and match it by equality");
	}
	w->suggestion = rule_words_piece(&t, start);
	w->fix = "query by equality with a case-insensitive collation ({locale: \"en\", "
	         "strength: 2}) backed by an index with that collation, or match a stored "
	         "lower-cased field";
}

static const rule_checks checks = {
    .filter = check_filter,
    .pipeline = check_pipeline,
    .query = check_query,
    .words = words,
    /* walk_filter finds nothing in a filter without a regex, a pattern
     * operator or a top-level operator; check_query needs a collation */
    .filter_when = STMT_PATTERN,
    .query_when = STMT_COLLATED,
};

const rule_def rule_regex_def = {
    .id = RULE_CASE_INSENSITIVE_REGEX,
    .needs_indexes_collated = true,
    .name = "case-insensitive-regex",
    .summary = "a regex with the i flag selects documents, or a case-insensitive collation "
               "that no index with that collation serves: the query scans",
    .fix_kind = "collation index",
    .profile_row = "Case-insensitive regex",
    .profile_key = "caseInsensitiveRegex",
    .checks = &checks,
};
