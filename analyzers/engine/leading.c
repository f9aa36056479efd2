/* The query an aggregation's leading stages make (leading.h).
 *
 * Only a sort at the start of the pipeline can use an index, and only the
 * leading $match stages choose the plan. Leading means as mongod's
 * pipeline optimization leaves them (the manual's "Aggregation Pipeline
 * Optimization"):
 *
 *   - the run of $match and $sort stages at the start is one query: a
 *     $match moves before a $sort (one that took in no $limit: a $limit
 *     after it ends the run anyway), adjacent $match stages coalesce, and
 *     of two $sort stages in a row without a $limit the first is dropped.
 *     Every $match of the run is merged into the filter, and the run's
 *     last $sort is the sort;
 *   - after it, a projection stage ($project, $unset, $addFields, $set),
 *     an $unwind or a $lookup followed by a $match: each of the $match's
 *     fields that none of those stages before it changes (its modified
 *     paths: an $unwind's path and includeArrayIndex, a $lookup's `as`)
 *     moves before them all, and so joins the filter (the rest of that
 *     $match stays where it is). Only plain fields are moved here; a member
 *     such as $and, $or or $expr stays (fewer moved, never more), and so
 *     does everything past the first other stage ($group, $limit, ...).
 *
 * A filter of one $match is a view of it; anything merged is a document
 * of its own, the only allocation. */
#include "analyzers/engine/leading.h"

#include <string.h>

#include "analyzers/engine/keys.h"
#include "protocol/wire_iter.h"

/* After the leading $match stages, countDocuments' pipeline (every driver's:
 * [{$match: F}, {$skip}, {$limit}, {$group: {_id: 1, n: {$sum: 1}}}]):
 * a $group with a constant _id reads every document F selects, up to the
 * $skip and $limit before it. s: on the stage after the $match stages. */
static void counting_tail(bson_iter_t *s, leading *l)
{
	bson_iter_t c, g;
	int64_t skip = 0;
	do {
		if (!WIRE_ITER_HOLDS_DOCUMENT(s) || !wire_iter_recurse(s, &c) ||
		    !wire_iter_next(&c))
			return;
		const char *k = wire_iter_key(&c);
		if ((key_eq(k, "$skip") || key_eq(k, "$limit")) && WIRE_ITER_HOLDS_NUMBER(&c)) {
			int64_t n = bson_iter_as_int64(&c);
			if (n < 0 || n > INT32_MAX)
				return;
			if (key_eq(k, "$skip"))
				skip += n;
			else
				l->count_limit = skip + n;
			continue;
		}
		if (!key_eq(k, "$group") || !wire_iter_recurse(&c, &g))
			return;
		bool found = false;
		while (!found && wire_iter_next(&g))
			found = key_eq(wire_iter_key(&g), "_id");
		if (!found)
			return;
		bson_type_t t = wire_iter_type(&g);
		l->counts = t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_ARRAY &&
		            !(t == BSON_TYPE_UTF8 && bson_iter_utf8(&g, NULL)[0] == '$');
		return;
	} while (wire_iter_next(s));
}

/* The filter as a document of its own, to add to (the first $match's
 * members copied once). */
static void own(leading *l)
{
	if (l->owned)
		return;
	bson_init(&l->merged);
	if (l->filter)
		bson_concat(&l->merged, l->filter);
	l->owned = true;
	l->filter = &l->merged;
}

/* A $match of the leading run, c on its value. False: not a document. */
static bool add_match(leading *l, const bson_iter_t *c)
{
	bson_t m;
	if (!l->filter)
		return (l->filter = wire_iter_doc_view(c, &l->first) ? &l->first : NULL) != NULL;
	if (!wire_iter_doc_view(c, &m))
		return false;
	own(l);
	bson_concat(&l->merged, &m);
	return true;
}

/* ---- what the projection stages passed change ---- */

enum { PROJ_PATHS = 16 };

/* The paths the projection stages after the leading run change, as
 * mongod's getModifiedPaths says: the fields $addFields / $set assign,
 * the ones $unset or an exclusion $project removes, the computed fields of
 * an inclusion $project, which also changes every field it does not keep
 * (kept[], per stage: a field must be kept by every such stage). */
typedef struct changed {
	const char *path[PROJ_PATHS];
	unsigned n;
	struct {
		const char *path[PROJ_PATHS];
		unsigned n;
		bool id; /* _id kept (unless {_id: 0}) */
	} keeps[4];
	unsigned nkeeps;
} changed;

/* f is m, or under it, or m is under f: a change to m changes f. */
static bool overlaps(const char *f, const char *m)
{
	size_t lf = strlen(f), lm = strlen(m);
	size_t n = lf < lm ? lf : lm;
	return strncmp(f, m, n) == 0 && (lf == lm || (lf > lm ? f[n] : m[n]) == '.');
}

static bool add_path(changed *ch, const char *p)
{
	if (ch->n == PROJ_PATHS)
		return false;
	ch->path[ch->n++] = p;
	return true;
}

/* A $project value that keeps or drops a field: a number or a boolean. */
static bool flag_value(const bson_iter_t *v, bool *on)
{
	bson_type_t t = wire_iter_type(v);
	if (t == BSON_TYPE_BOOL)
		*on = bson_iter_bool(v);
	else if (WIRE_ITER_HOLDS_NUMBER(v))
		*on = bson_iter_as_int64(v) != 0 || bson_iter_as_double(v) != 0.0;
	else
		return false;
	return true;
}

/* {$project: {...}}: an exclusion (every value but _id's a 0 or false)
 * removes its fields; an inclusion keeps its 1/true fields (and _id
 * unless it says 0) and computes the others. A nested specification
 * ({a: {b: 1}}) is taken as computing its field. False: too many. */
static bool read_project(changed *ch, const bson_iter_t *spec)
{
	bson_iter_t it;
	bool exclusion = true, any = false, on;
	if (!wire_iter_recurse(spec, &it))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (key_eq(k, "_id"))
			continue;
		any = true;
		if (!flag_value(&it, &on) || on)
			exclusion = false;
	}
	if (!any) /* {_id: 0} alone, or {}: an exclusion of _id at most */
		exclusion = true;
	if (!exclusion && ch->nkeeps == 4)
		return false;
	unsigned kp = ch->nkeeps;
	if (!exclusion) {
		ch->keeps[kp].n = 0;
		ch->keeps[kp].id = true;
		ch->nkeeps++;
	}
	if (!wire_iter_recurse(spec, &it))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		bool flag = flag_value(&it, &on);
		if (key_eq(k, "_id") && flag) {
			if (exclusion && !on && !add_path(ch, k))
				return false;
			if (!exclusion)
				ch->keeps[kp].id = on;
		} else if (exclusion) {
			if (!add_path(ch, k))
				return false;
		} else if (flag && on) {
			if (ch->keeps[kp].n == PROJ_PATHS)
				return false;
			ch->keeps[kp].path[ch->keeps[kp].n++] = k;
		} else if (!add_path(ch, k)) { /* computed (or 0 beside 1s: refused) */
			return false;
		}
	}
	return true;
}

/* The paths $unwind changes: the one it unwinds and its includeArrayIndex
 * ({$unwind: "$a"} or {$unwind: {path: "$a", includeArrayIndex: "i"}}). */
static bool read_unwind(changed *ch, const bson_iter_t *v)
{
	bson_iter_t it;
	if (WIRE_ITER_HOLDS_UTF8(v)) {
		const char *p = bson_iter_utf8(v, NULL);
		return p[0] == '$' && add_path(ch, p + 1);
	}
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it))
		return false;
	bool path = false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (!WIRE_ITER_HOLDS_UTF8(&it))
			continue;
		const char *p = bson_iter_utf8(&it, NULL);
		if (key_eq(k, "path") && p[0] == '$') {
			if (!add_path(ch, p + 1))
				return false;
			path = true;
		} else if (key_eq(k, "includeArrayIndex") && !add_path(ch, p)) {
			return false;
		}
	}
	return path;
}

/* One stage after the leading run that a $match may move past, as its
 * modified paths allow: a projection, $unwind, or $lookup (its `as`),
 * read into ch (true); any other stage, or one not understood (false). */
static bool read_projection(changed *ch, const char *k, const bson_iter_t *v)
{
	bson_iter_t it;
	if (key_eq(k, "$unwind"))
		return read_unwind(ch, v);
	if (key_eq(k, "$lookup")) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it) ||
		    !bson_iter_find(&it, "as") || !WIRE_ITER_HOLDS_UTF8(&it))
			return false;
		return add_path(ch, bson_iter_utf8(&it, NULL));
	}
	if (key_eq(k, "$addFields") || key_eq(k, "$set")) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, &it))
			return false;
		while (wire_iter_next(&it))
			if (!add_path(ch, wire_iter_key(&it)))
				return false;
		return true;
	}
	if (key_eq(k, "$unset")) {
		if (WIRE_ITER_HOLDS_UTF8(v))
			return add_path(ch, bson_iter_utf8(v, NULL));
		if (!WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &it))
			return false;
		while (wire_iter_next(&it))
			if (!WIRE_ITER_HOLDS_UTF8(&it) || !add_path(ch, bson_iter_utf8(&it, NULL)))
				return false;
		return true;
	}
	return key_eq(k, "$project") && WIRE_ITER_HOLDS_DOCUMENT(v) && read_project(ch, v);
}

/* Whether a $match on field f after the stages of ch moves before them. */
static bool unchanged(const changed *ch, const char *f)
{
	for (unsigned i = 0; i < ch->n; i++)
		if (overlaps(f, ch->path[i]))
			return false;
	for (unsigned s = 0; s < ch->nkeeps; s++) {
		bool kept = ch->keeps[s].id && (key_eq(f, "_id") || strncmp(f, "_id.", 4) == 0);
		for (unsigned i = 0; !kept && i < ch->keeps[s].n; i++) {
			const char *k = ch->keeps[s].path[i];
			size_t lk = strlen(k);
			kept = strncmp(f, k, lk) == 0 && (f[lk] == '\0' || f[lk] == '.');
		}
		if (!kept)
			return false;
	}
	return true;
}

/* The stages after the leading run, s on the first of them: the fields
 * of each $match that no projection before it changes join the filter. */
static void moved_matches(bson_iter_t *s, leading *l)
{
	changed ch;
	ch.n = ch.nkeeps = 0;
	bson_iter_t c, m;
	do {
		if (!WIRE_ITER_HOLDS_DOCUMENT(s) || !wire_iter_recurse(s, &c) ||
		    !wire_iter_next(&c))
			return;
		const char *k = wire_iter_key(&c);
		if (!key_eq(k, "$match")) {
			if (!read_projection(&ch, k, &c))
				return;
			continue;
		}
		if (!WIRE_ITER_HOLDS_DOCUMENT(&c) || !wire_iter_recurse(&c, &m))
			return;
		while (wire_iter_next(&m)) {
			const char *f = wire_iter_key(&m);
			if (f[0] == '$' || !unchanged(&ch, f))
				continue;
			own(l);
			bson_append_iter(&l->merged, NULL, 0, &m);
		}
	} while (wire_iter_next(s));
}

void leading_stages(const bson_iter_t *pipeline, leading *l)
{
	bson_iter_t s, c;
	l->owned = l->has_sort = l->counts = false;
	l->count_limit = 0;
	l->filter = NULL;
	if (!wire_iter_recurse(pipeline, &s))
		return;
	while (wire_iter_next(&s)) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&s) || !wire_iter_recurse(&s, &c) ||
		    !wire_iter_next(&c))
			return;
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "$sort")) {
			if (!(l->has_sort = wire_iter_doc_view(&c, &l->sort)))
				return;
			continue; /* a $match after it moves before it */
		}
		if (key_eq(k, "$match")) {
			if (!add_match(l, &c))
				return;
			continue;
		}
		if (!l->has_sort && l->filter &&
		    bson_empty(l->filter)) /* the count alone makes it a read */
			counting_tail(&s, l);
		else
			moved_matches(&s, l);
		return;
	}
}
