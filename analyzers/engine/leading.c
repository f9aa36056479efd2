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
 *   - after it, each plain field of a later $match that none of the
 *     stages before it changes moves before them all, and so joins the
 *     filter under the name it has there (the rest of that $match stays
 *     where it is): the stages a $match moves past, what each changes and
 *     which fields each renames are analyzers/planner/stage_paths.h's
 *     (projections, $unwind, $lookup, $group, $sort); a member such as
 *     $and, $or or $expr stays (fewer moved, never more), and so does
 *     everything past a stage that blocks ($limit, $skip, $facet, ...).
 *
 * A filter of one $match is a view of it; anything merged is a document
 * of its own, the only allocation. */
#include "analyzers/engine/leading.h"

#include <string.h>

#include "analyzers/engine/keys.h"
#include "analyzers/planner/paths.h"
#include "analyzers/planner/stage_paths.h"
#include "analyzers/planner/stages.h"
#include "protocol/wire_iter.h"

/* A $group that counts: a constant _id (one group for every document),
 * and each accumulator a count ({$sum: 1}, any constant number, or the
 * 5.0 {$count: {}}). Any other accumulator ({$avg: "$x"}, {$sum: "$x"})
 * computes over the whole input: analytics, not a count. g: on the
 * $group's value. */
static bool counting_group(const bson_iter_t *g)
{
	bson_iter_t c, a;
	bool constant_id = false;
	if (!wire_iter_recurse(g, &c))
		return false;
	while (wire_iter_next(&c)) {
		bson_type_t t = wire_iter_type(&c);
		if (key_eq(wire_iter_key(&c), "_id")) {
			constant_id = t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_ARRAY &&
			              !(t == BSON_TYPE_UTF8 && bson_iter_utf8(&c, NULL)[0] == '$');
			continue;
		}
		if (t != BSON_TYPE_DOCUMENT || !wire_iter_recurse(&c, &a) || !wire_iter_next(&a))
			return false;
		const char *op = wire_iter_key(&a);
		bool counts = (key_eq(op, "$sum") && WIRE_ITER_HOLDS_NUMBER(&a)) ||
		              (key_eq(op, "$count") && WIRE_ITER_HOLDS_DOCUMENT(&a));
		if (!counts || wire_iter_next(&a))
			return false;
	}
	return constant_id;
}

/* After the leading $match stages, countDocuments' pipeline (every driver's:
 * [{$match: F}, {$skip}, {$limit}, {$group: {_id: 1, n: {$sum: 1}}}]), or
 * a $count stage in the $group's place: the count reads every document F
 * selects, up to the $skip and $limit before it. s: on the stage after
 * the $match stages. */
static void counting_tail(bson_iter_t *s, leading *l)
{
	bson_iter_t c;
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
		l->counts = (key_eq(k, "$group") && counting_group(&c)) ||
		            (key_eq(k, "$count") && WIRE_ITER_HOLDS_UTF8(&c));
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

/* The stages after the leading run, s on the first of them: the fields
 * of each $match that no stage before it changes join the filter. */
static void moved_matches(bson_iter_t *s, leading *l)
{
	stage_paths ch;
	bson_iter_t c, m;
	if (!pipeline_match_after(s))
		return; /* the common [$match, $group, $sort, $limit]: nothing moves */
	stage_paths_init(&ch);
	do {
		if (!WIRE_ITER_HOLDS_DOCUMENT(s) || !wire_iter_recurse(s, &c) ||
		    !wire_iter_next(&c))
			return;
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "$match")) {
			if (!WIRE_ITER_HOLDS_DOCUMENT(&c) || !wire_iter_recurse(&c, &m))
				return;
			bool group_ok = stage_paths_group_ok(&ch, &c);
			while (wire_iter_next(&m)) {
				const char *f = wire_iter_key(&m), *at;
				if (f[0] == '$' || !stage_paths_pass(&ch, f, group_ok, &at))
					continue;
				own(l);
				bson_append_iter(&l->merged, at, (int)strlen(at), &m);
			}
		}
		if (!stage_paths_add(&ch, k, &c))
			return;
	} while (wire_iter_next(s));
}

/* Whether the sort names a path at, above or under as. */
static bool sort_touches(const bson_t *sort, const char *as)
{
	bson_iter_t it;
	if (!bson_iter_init(&it, sort))
		return true;
	while (wire_iter_next(&it)) {
		const char *f = wire_iter_key(&it);
		if (paths_overlap(f, as))
			return true;
	}
	return false;
}

/* s on a $lookup or $graphLookup after the leading run: a $sort right
 * after a run of them moves before them all when it names no path their
 * as fields write (tryReorderingWithSort, in each one's doOptimizeAt; a
 * $lookup followed by an $unwind of its as absorbs that instead, and
 * moves nothing), and so becomes the leading run's sort. */
static void sort_past_joins(const bson_iter_t *s, leading *l)
{
	bson_iter_t it = *s, c;
	const char *as[8];
	size_t n = 0;
	do {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&it) || !wire_iter_recurse(&it, &c) ||
		    !wire_iter_next(&c))
			return;
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "$sort")) {
			bson_t sort;
			if (n == 0 || !wire_iter_doc_view(&c, &sort))
				return;
			for (size_t i = 0; i < n; i++)
				if (sort_touches(&sort, as[i]))
					return;
			/* a view is made in place, never copied (its buffer
			 * pointer is into itself) */
			l->has_sort = wire_iter_doc_view(&c, &l->sort);
			return;
		}
		bool graph = key_eq(k, "$graphLookup");
		lookup_stage lk;
		if ((!graph && !key_eq(k, "$lookup")) || n == 8 ||
		    !lookup_stage_read(&c, graph, &lk) || !lk.as)
			return;
		as[n++] = lk.as;
	} while (wire_iter_next(&it));
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
		bson_iter_t at = s; /* the stages below move s on */
		if (!l->has_sort && l->filter &&
		    bson_empty(l->filter)) /* the count alone makes it a read */
			counting_tail(&s, l);
		else
			moved_matches(&s, l);
		if (key_eq(k, "$lookup") || key_eq(k, "$graphLookup"))
			sort_past_joins(&at, l);
		return;
	}
}
