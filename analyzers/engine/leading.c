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

/* Whether an $expr (e on its value, or on any value inside it) moves
 * past the stages in ch: every field path it names ("$a.b"; a variable's
 * "$$x" is none) passes them under its own name, and it names no whole
 * document ($$ROOT, $$CURRENT) and no field by a bare name ($getField,
 * $setField, $unsetField). mongod splits a $match by the fields its
 * expressions depend on (pushMatchBefore); an $expr read no further here
 * stays where it is, fewer moved, never more. */
static bool expr_passes(const bson_iter_t *e, const stage_paths *ch, bool group_ok, int depth)
{
	bson_iter_t c;
	if (WIRE_ITER_HOLDS_UTF8(e)) {
		const char *v = bson_iter_utf8(e, NULL), *at = NULL;
		if (v[0] != '$')
			return true;
		if (v[1] == '$')
			return strncmp(v, "$$ROOT", 6) != 0 && strncmp(v, "$$CURRENT", 9) != 0;
		return stage_paths_pass(ch, v + 1, group_ok, &at) && at && strcmp(at, v + 1) == 0;
	}
	if (!WIRE_ITER_HOLDS_DOCUMENT(e) && !WIRE_ITER_HOLDS_ARRAY(e))
		return true;
	if (depth == 16 || !wire_iter_recurse(e, &c))
		return false;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "$getField") || key_eq(k, "$setField") || key_eq(k, "$unsetField") ||
		    !expr_passes(&c, ch, group_ok, depth + 1))
			return false;
	}
	return true;
}

/* The stages after the leading run, s on the first of them: the fields
 * of each $match that no stage before it changes join the filter, and
 * so does an $expr member whose fields none changes. */
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
				const char *f = wire_iter_key(&m), *at = f;
				if (f[0] == '$'
				        ? !key_eq(f, "$expr") || !expr_passes(&m, &ch, group_ok, 0)
				        : !stage_paths_pass(&ch, f, group_ok, &at))
					continue;
				own(l);
				bson_append_iter(&l->merged, at, (int)strlen(at), &m);
			}
		}
		if (!stage_paths_add(&ch, k, &c))
			return;
	} while (wire_iter_next(s));
}

/* {$unwind: "$a"} or {$unwind: {path: "$a", ...}}: "a" (NULL: neither);
 * *preserves: its preserveNullAndEmptyArrays is true. */
static const char *unwind_read(const bson_iter_t *c, bool *preserves)
{
	bson_iter_t it;
	const char *path = NULL;
	*preserves = false;
	if (WIRE_ITER_HOLDS_UTF8(c))
		path = bson_iter_utf8(c, NULL);
	else if (WIRE_ITER_HOLDS_DOCUMENT(c) && wire_iter_recurse(c, &it))
		while (wire_iter_next(&it)) {
			const char *k = wire_iter_key(&it);
			if (key_eq(k, "path") && WIRE_ITER_HOLDS_UTF8(&it))
				path = bson_iter_utf8(&it, NULL);
			else if (key_eq(k, "preserveNullAndEmptyArrays"))
				*preserves = WIRE_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
		}
	return path && path[0] == '$' ? path + 1 : NULL;
}

/* Whether every key of the sort (its value on c) is a plain field (no
 * $meta) that the stages in ch leave under its own name and that no as
 * field writes. */
static bool sort_passes(const bson_iter_t *c, const stage_paths *ch, const char *const *as,
                        size_t nas)
{
	bson_iter_t it;
	if (!WIRE_ITER_HOLDS_DOCUMENT(c) || !wire_iter_recurse(c, &it))
		return false;
	while (wire_iter_next(&it)) {
		const char *f = wire_iter_key(&it), *at = NULL;
		if (!WIRE_ITER_HOLDS_NUMBER(&it) || !stage_paths_pass(ch, f, true, &at) || !at ||
		    strcmp(at, f) != 0)
			return false;
		for (size_t i = 0; i < nas; i++)
			if (paths_overlap(f, as[i]))
				return false;
	}
	return true;
}

/* s on the first stage after the leading run: a $sort after a run of
 * stages that leave its fields as they are. mongod's optimization moves
 * such a $sort before a $lookup or $graphLookup (tryReorderingWithSort;
 * not one that absorbed an $unwind of its as) and before an $unwind
 * (DocumentSourceUnwind::canPushSortBack; with a $limit after the $sort,
 * only when it preserves null and empty arrays, since the $limit moves
 * too), and so it becomes the leading run's sort. It moves none before a
 * $project, $addFields, $set or $unset (a single-document transformation
 * swaps with a $skip only): past one of those the sort is in memory
 * whatever the indexes, and l->behind names it, after such a join too
 * (django-mongodb-backend's select_related() and order_by()). A sort on a
 * field those
 * stages compute, or after any other stage ($group, $limit, $skip, a
 * $match between, ...), is not judged: it sorts what that stage made. */
static void sort_after_run(const bson_iter_t *s, leading *l)
{
	bson_iter_t it = *s, c;
	const char *as[8], *last_as = NULL, *behind = NULL;
	size_t nas = 0;
	bool unwinds_drop = false; /* an $unwind that drops empty arrays */
	bool absorbed = false;     /* an $unwind of a $lookup's as: the join stays first */
	stage_paths ch;
	stage_paths_init(&ch);
	do {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&it) || !wire_iter_recurse(&it, &c) ||
		    !wire_iter_next(&c))
			return;
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "$sort")) {
			if ((behind && l->has_sort) || (absorbed && !behind) ||
			    !sort_passes(&c, &ch, as, nas))
				return;
			bson_iter_t next = it, n1;
			if (!behind && unwinds_drop && wire_iter_next(&next) &&
			    WIRE_ITER_HOLDS_DOCUMENT(&next) && wire_iter_recurse(&next, &n1) &&
			    wire_iter_next(&n1) && key_eq(wire_iter_key(&n1), "$limit"))
				return;
			/* a view is made in place, never copied (its buffer
			 * pointer is into itself) */
			l->has_sort = wire_iter_doc_view(&c, &l->sort);
			l->behind = l->has_sort ? behind : NULL;
			return;
		}
		const char *this_as = NULL;
		bool graph = key_eq(k, "$graphLookup");
		if (graph || key_eq(k, "$lookup")) {
			lookup_stage lk;
			if (nas == 8 || !lookup_stage_read(&c, graph, &lk) || !lk.as)
				return;
			as[nas++] = this_as = lk.as;
		} else if (key_eq(k, "$unwind")) {
			bool preserves;
			const char *path = unwind_read(&c, &preserves);
			if (!path || !stage_paths_add(&ch, k, &c))
				return;
			/* absorbed by the $lookup before it: the join moves no
			 * sort before it, and one right after it sorts the join's
			 * output (not judged); a projection after them keeps it
			 * in memory whatever the indexes, as after the join alone */
			absorbed |= last_as && strcmp(path, last_as) == 0;
			unwinds_drop |= !preserves;
		} else if (key_eq(k, "$project") || key_eq(k, "$addFields") || key_eq(k, "$set") ||
		           key_eq(k, "$unset")) {
			if (!stage_paths_add(&ch, k, &c))
				return;
			if (!behind)
				behind = k;
		} else {
			return;
		}
		last_as = this_as;
	} while (wire_iter_next(&it));
}

/* The stages that pass each document on as it comes ($skip drops the
 * first ones and passes the rest), and those that take their whole input
 * before they give anything (DocumentSource's streaming and blocking
 * stages); any other stage (a $limit, a source such as $collStats or
 * $geoNear, one not known) ends the read unjudged. By the second byte,
 * then the whole name. */
typedef enum { FLOW_OTHER, FLOW_STREAMS, FLOW_TAKES_ALL } stage_flow;

static stage_flow flow_of(const char *k)
{
	static const char *const streams[] = {
	    "$project", "$addFields",   "$set",         "$unset",       "$unwind",
	    "$lookup",  "$graphLookup", "$replaceRoot", "$replaceWith", "$redact",
	    "$match",   "$unionWith",   "$skip"};
	static const char *const takes_all[] = {
	    "$group", "$bucket", "$bucketAuto", "$sortByCount",     "$count",
	    "$facet", "$out",    "$merge",      "$setWindowFields", "$sort"};
	if (k[0] != '$')
		return FLOW_OTHER;
	for (size_t i = 0; i < sizeof(streams) / sizeof(streams[0]); i++)
		if (streams[i][1] == k[1] && key_eq(k, streams[i]))
			return FLOW_STREAMS;
	for (size_t i = 0; i < sizeof(takes_all) / sizeof(takes_all[0]); i++)
		if (takes_all[i][1] == k[1] && key_eq(k, takes_all[i]))
			return FLOW_TAKES_ALL;
	return FLOW_OTHER;
}

/* A $group mongod may answer with a DISTINCT_SCAN (one index key per
 * group, not every document): its _id a field path or a document of
 * them, and every accumulator one that keeps a single document of the
 * group ($first, $last, $top, $bottom). g: on the $group's value. */
static bool maybe_distinct_scan(const bson_iter_t *g)
{
	bson_iter_t c, a;
	if (!WIRE_ITER_HOLDS_DOCUMENT(g) || !wire_iter_recurse(g, &c))
		return true;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "_id")) {
			if (WIRE_ITER_HOLDS_UTF8(&c) && bson_iter_utf8(&c, NULL)[0] == '$')
				continue;
			if (!WIRE_ITER_HOLDS_DOCUMENT(&c) || !wire_iter_recurse(&c, &a))
				return false;
			while (wire_iter_next(&a))
				if (!WIRE_ITER_HOLDS_UTF8(&a) || bson_iter_utf8(&a, NULL)[0] != '$')
					return false;
			continue;
		}
		if (!WIRE_ITER_HOLDS_DOCUMENT(&c) || !wire_iter_recurse(&c, &a) ||
		    !wire_iter_next(&a))
			return false;
		const char *op = wire_iter_key(&a);
		if (!key_eq(op, "$first") && !key_eq(op, "$last") && !key_eq(op, "$top") &&
		    !key_eq(op, "$bottom"))
			return false;
	}
	return true;
}

/* The field a $group (g: on its value) groups by, when it groups by one:
 * its _id "$f", or a document _id of that one member; NULL for anything
 * else (mongod's DISTINCT_SCAN rewrite takes a single _id expression:
 * getRewriteGroupRequirements). */
static const char *group_field(const bson_iter_t *g)
{
	bson_iter_t c, a;
	if (!WIRE_ITER_HOLDS_DOCUMENT(g) || !wire_iter_recurse(g, &c))
		return NULL;
	while (wire_iter_next(&c)) {
		if (!key_eq(wire_iter_key(&c), "_id"))
			continue;
		if (WIRE_ITER_HOLDS_DOCUMENT(&c)) {
			if (!wire_iter_recurse(&c, &a) || !wire_iter_next(&a))
				return NULL;
			c = a;
			if (wire_iter_next(&a))
				return NULL; /* two fields or more */
		}
		const char *f = WIRE_ITER_HOLDS_UTF8(&c) ? bson_iter_utf8(&c, NULL) : NULL;
		return f && f[0] == '$' && f[1] != '$' && f[1] ? f + 1 : NULL;
	}
	return NULL;
}

/* s on the first stage after the leading run (leading.h's reads_all):
 * streaming stages pass every document on; the first stage that takes
 * its whole input, or the cursor at the end, reads them all; a $limit
 * before them stops the read. A $group that may be a DISTINCT_SCAN, first
 * after the leading run (mongod rewrites one that begins the pipeline or
 * follows only $match and $sort), reads less where an index leads with
 * the one field it groups by: *group names that field (the rule asks the
 * indexes). A $group after any other stage, or whose _id is no single
 * field path (two fields, $$ROOT, {}), is no DISTINCT_SCAN: it reads
 * everything. */
static bool reads_everything(const bson_iter_t *s, const char **group)
{
	bson_iter_t it = *s, c;
	bool first = true;
	*group = NULL;
	do {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&it) || !wire_iter_recurse(&it, &c) ||
		    !wire_iter_next(&c))
			return false;
		const char *k = wire_iter_key(&c);
		switch (flow_of(k)) {
		case FLOW_STREAMS:
			first = false;
			continue;
		case FLOW_TAKES_ALL:
			if (first && key_eq(k, "$group") && maybe_distinct_scan(&c))
				*group = group_field(&c);
			return true;
		case FLOW_OTHER:
			return false;
		}
	} while (wire_iter_next(&it));
	return true;
}

/* Whether the $group (g: on its value) groups by key first: its _id
 * "$key", or a document whose first member is. A DISTINCT_SCAN after a
 * $sort reads the index of the sort's first key, so only such a group
 * can be one there. */
static bool groups_by(const bson_iter_t *g, const char *key)
{
	bson_iter_t c, a;
	if (!key || !WIRE_ITER_HOLDS_DOCUMENT(g) || !wire_iter_recurse(g, &c))
		return false;
	while (wire_iter_next(&c)) {
		if (!key_eq(wire_iter_key(&c), "_id"))
			continue;
		if (WIRE_ITER_HOLDS_DOCUMENT(&c) && wire_iter_recurse(&c, &a) && wire_iter_next(&a))
			c = a;
		return WIRE_ITER_HOLDS_UTF8(&c) && bson_iter_utf8(&c, NULL)[0] == '$' &&
		       key_eq(bson_iter_utf8(&c, NULL) + 1, key);
	}
	return false;
}

/* s on the first stage after a leading $sort and an empty filter: how
 * many documents the stages after it read in the sort's order, when an
 * index provides it: the $skip and $limit of the first $limit before any
 * stage that takes its whole input, 0 when none comes first (every
 * document), -1 at a stage this does not know or a $group that may be a
 * DISTINCT_SCAN of the sort's first key (either may stop the read:
 * leading.h's stops_unknown). */
static int64_t limit_in_order(const bson_iter_t *s, const char *sort_key)
{
	bson_iter_t it = *s, c;
	int64_t skip = 0;
	do {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&it) || !wire_iter_recurse(&it, &c) ||
		    !wire_iter_next(&c))
			return -1;
		const char *k = wire_iter_key(&c);
		bool number = WIRE_ITER_HOLDS_NUMBER(&c);
		int64_t n = number ? bson_iter_as_int64(&c) : -1;
		if (key_eq(k, "$limit"))
			return number && n > 0 && n <= INT32_MAX ? skip + n : -1;
		if (key_eq(k, "$skip") && number && n >= 0 && n <= INT32_MAX)
			skip += n;
		else if (flow_of(k) == FLOW_TAKES_ALL) /* a DISTINCT_SCAN reads one key a group */
			return key_eq(k, "$group") && maybe_distinct_scan(&c) &&
			               groups_by(&c, sort_key)
			           ? -1
			           : 0;
		else if (flow_of(k) != FLOW_STREAMS)
			return -1;
	} while (wire_iter_next(&it));
	return 0;
}

void leading_stages(const bson_iter_t *pipeline, leading *l)
{
	bson_iter_t s, c;
	l->owned = l->has_sort = l->counts = false;
	l->behind = NULL;
	l->reads_all = l->stops_unknown = false;
	l->count_limit = 0;
	l->filter = NULL;
	l->group = NULL;
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
		/* asked only where no filter bounds the read (the rest judge it);
		 * a leading $sort takes every document whatever follows, unless
		 * an index provides it (the rule asks) */
		l->reads_all = (!l->filter || bson_empty(l->filter)) &&
		               (l->has_sort || reads_everything(&at, &l->group));
		bson_iter_t first;
		if (l->reads_all && l->has_sort) {
			int64_t n = limit_in_order(&at, bson_iter_init(&first, &l->sort) &&
			                                        bson_iter_next(&first)
			                                    ? bson_iter_key(&first)
			                                    : NULL);
			l->stops_unknown = n < 0;
			l->count_limit = n < 0 ? 0 : n;
		}
		if (!l->has_sort && l->filter &&
		    bson_empty(l->filter)) /* the count alone makes it a read */
			counting_tail(&s, l);
		else
			moved_matches(&s, l);
		sort_after_run(&at, l);
		return;
	}
	l->reads_all = true; /* only $match and $sort: every document reaches the cursor */
}
