/* index-mismatched-sort: would mongod sort this query in memory?
 *
 * The model follows the planner (query_planner.cpp, planner_analysis.cpp,
 * query_solution.cpp's computeSortsForScan) rather than the manual's summary,
 * because the planner is what decides. An index can provide a sort three ways:
 *
 *  1. Bounded scan. When the index's leading field has a predicate, the
 *     planner scans it with bounds. Index fields pinned to one value (point
 *     bounds) are dropped from the key pattern and from the requested sort;
 *     what remains of the sort must be a prefix of what remains of the key
 *     pattern, directions all equal or all inverted. So index {a:1,b:1,c:1}
 *     serves find({a:5}).sort({b:1}) and find({a:{$gt:1}, b:5}).sort({a:1, c:1}).
 *  2. Explode for sort. A leading run of point and $in fields (at most 200
 *     point scans in all) is split into one scan per combination and merged,
 *     so the fields after the run can provide the sort.
 *  3. Whole-index scan. With no usable predicate, a non-sparse index whose key
 *     pattern starts with the sort (or its reverse) is scanned whole.
 *
 * An equality on a sort field drops it from the sort only when the field is
 * in the index being scanned: find({c: 5}).sort({c: 1}) with only index
 * {a:1,b:1,c:1,d:1} is a collection scan followed by a blocking sort.
 *
 * The rule must be trusted for its silence and its alarms alike, and where
 * the two pull apart it keeps quiet (SORT_NO_VERDICT) rather than risk a false
 * finding:
 *  - Multikey: listIndexes does not say whether an index is multikey. The
 *    index cache learns it from explain of a query hinted to each index
 *    (mongod's IXSCAN isMultiKey and multiKeyPaths); where it did, a bounded
 *    scan's order ends at a multikey key whose bounds are restricted or that
 *    shares an array prefix with a restricted one (sort_bounds_multikey_cut,
 *    SERVER-31898). Where it did not (a server that does not say), the
 *    index is assumed not multikey: this can miss a finding, never invent one.
 *  - Partial indexes serve only a filter that implies their expression
 *    (index_def_usable_for); sparse ones are never scanned whole unless
 *    hinted, and bounded only when the predicate on their leading key keeps
 *    out documents without it (sort_bounds_missing; unsure: no verdict).
 *  - A wildcard index provides a sort only on a path the filter bounds
 *    (then no verdict: its multikeyness is unknown). $text and $near
 *    queries, an unknown or ambiguous hint, an index spec we could not
 *    read, too many predicates: no verdict.
 *  - $elemMatch bounds the keys it tests, an $expr $eq on a path is a
 *    point (sort_bounds.h), and no collation named means the collection's
 *    default (the _id index's). A sort of at most 200 documents (an
 *    equality or $in on every key of a unique index) is no finding.
 *  - $or: a query whose conjunctive part gets no sort from any index may
 *    still get one by merging sorted index scans of each branch; each branch
 *    is judged with the enclosing predicates added (generous: the planner
 *    only sometimes pushes them down).
 *  - Collation: an index whose collation differs from the query's orders
 *    strings wrongly for it. Such an index provides a sort only on fields
 *    whose bounds keep out strings, objects and arrays, and an equality with
 *    such a value is not a point for it.
 *  - Special keys (text, hashed, 2d, 2dsphere) end the part of the key pattern
 *    that can provide a sort, unless pinned by an equality (hashed), as in
 *    computeSortsForScan. Text and geo indexes are used only when the filter
 *    names their special field, and never scanned whole. */
#include "analyzers/rules/rule_sort.h"

#include <stdio.h>
#include <string.h>

#include "analyzers/planner/esr.h"
#include "analyzers/planner/sort_bounds.h"
#include "analyzers/catalog/index_cache.h"
#include "analyzers/rules/rule_api.h"
#include "protocol/text.h"
#include "protocol/wire_iter.h"

#define KEYS_MAX QUERY_SORT_MAX /* longer key patterns cannot matter to a sort */

enum { PATH_BOUNDED = 1, PATH_EXPLODE = 2, PATH_WHOLE = 4 };

typedef enum {
	EVAL_NO,
	EVAL_MAYBE, /* only an index we do not judge might provide it */
	EVAL_YES,
} eval_result;

typedef struct eval_out {
	const index_def *by;        /* EVAL_YES: the index that provides it */
	const index_def *maybe;     /* EVAL_MAYBE: the index that might */
	const char *maybe_why;      /* ... and why we cannot tell */
	const index_def *collation; /* would provide it if collations matched */
	/* EVAL_YES: the index scans the sort takes, 1 unless only an
	 * exploded one provides it (then the product of its point sets):
	 * under an $or, mongod sums them over the branches */
	uint64_t scans;
} eval_out;

static bool usable_point(const query_pred *q, bool mismatch)
{
	return q != NULL && q->point && (!mismatch || q->point_nc);
}

static uint32_t usable_points(const query_pred *q, bool mismatch)
{
	if (q == NULL || q->points == 0 || (mismatch && !q->points_nc))
		return 0;
	return q->points;
}

/* want must be a prefix of have with every direction equal or every
 * direction inverted (the scan runs backwards). */
static bool prefix_match(const sort_key *want, size_t nwant, const sort_key *have, size_t nhave)
{
	if (nwant == 0)
		return true;
	if (nwant > nhave)
		return false;
	int flip = want[0].direction == have[0].direction ? 1 : -1;
	for (size_t i = 0; i < nwant; i++) {
		if (strcmp(want[i].field, have[i].field) != 0 ||
		    want[i].direction != have[i].direction * flip)
			return false;
	}
	return true;
}

/* Position of field among d's keys, or -1. */
static int key_pos(const index_def *d, const char *field)
{
	for (size_t i = 0; i < d->nkeys; i++)
		if (strcmp(d->keys[i].field, field) == 0)
			return (int)i;
	return -1;
}

/* The sort with the fields this index pins to one value removed. A key
 * in cut (multikey, sort_bounds_multikey_cut) pinned to a point is not
 * dropped: the scan skips it but does not order by it. */
static size_t wanted_sort(const index_def *d, const query_preds *p, const sort_spec *s,
                          bool mismatch, uint32_t cut, sort_key *want)
{
	size_t n = 0;
	for (size_t i = 0; i < s->n; i++) {
		const char *f = s->keys[i].field;
		int k = key_pos(d, f);
		if (k >= 0 && !(k < 32 && (cut & (1u << k))) &&
		    usable_point(query_preds_find(p, f), mismatch))
			continue;
		want[n++] = s->keys[i];
	}
	return n;
}

/* Appends the key pattern from index position `from` on, as the order the
 * scan delivers: point fields skipped, cut at a special key or (collation
 * mismatch) at a field whose bounds may hold strings. */
static size_t scan_order(const index_def *d, size_t from, const query_preds *p, bool mismatch,
                         uint32_t cut, sort_key *have)
{
	size_t n = 0;
	for (size_t i = from; i < d->nkeys && n < KEYS_MAX; i++) {
		const query_pred *q = query_preds_find(p, d->keys[i].field);
		if (usable_point(q, mismatch))
			continue;
		if (d->keys[i].direction == 0 || (i < 32 && (cut & (1u << i))))
			break;
		if (mismatch && (q == NULL || !q->bounded_nc))
			break;
		have[n].field = d->keys[i].field;
		have[n].direction = d->keys[i].direction;
		n++;
	}
	return n;
}

/* Whether d's leading run of points and point sets, scanned once per
 * combination and merged, delivers want (*explode_scans: how many scans). */
static bool explodes(const index_def *d, const query_preds *p, bool mismatch, uint32_t cut,
                     const sort_key *want, size_t nwant, uint64_t *explode_scans)
{
	sort_key have[KEYS_MAX];
	size_t run = 0;
	uint64_t scans = 1;
	bool multi = false;
	for (; run < d->nkeys; run++) {
		const query_pred *q = query_preds_find(p, d->keys[run].field);
		if (usable_point(q, mismatch))
			continue;
		uint32_t n = usable_points(q, mismatch);
		if (n == 0)
			break;
		scans *= n;
		multi = true;
	}
	if (!multi || run >= d->nkeys || scans > QUERY_IN_EXPLODE_MAX)
		return false;
	/* the merged scans' order ends at a multikey key after the points
	 * (explodeForSort; SERVER-56865): one document sits at each of its
	 * elements in every scan */
	bool known;
	uint32_t after = run < 32 ? ~((1u << run) - 1u) : 0u;
	size_t nhave =
	    scan_order(d, run, p, mismatch, cut | (index_def_multikey(d, &known) & after), have);
	if (!prefix_match(want, nwant, have, nhave))
		return false;
	if (explode_scans)
		*explode_scans = scans;
	return true;
}

/* Which ways (PATH_*) index d can deliver the sort for predicates p. */
static int provides(const index_def *d, const query_preds *p, const sort_spec *s,
                    const bson_t *qcoll, bool ignore_collation, uint64_t *explode_scans)
{
	sort_key want[KEYS_MAX], have[KEYS_MAX];
	size_t nwant, nhave;
	int paths = 0;
	bool mismatch = !ignore_collation && !query_collation_equal(d->collation, qcoll);

	if (d->nkeys == 0)
		return 0;
	const query_pred *lead = query_preds_find(p, d->keys[0].field);

	/* A geo or text index is chosen only for a predicate on its special
	 * field ($text and $near never get this far), and then even without one
	 * on its leading field. */
	bool special_pred = false;
	if (d->plugin) {
		for (size_t i = 0; i < d->nkeys; i++)
			if (d->keys[i].direction == 0 &&
			    query_preds_find(p, d->keys[i].field) != NULL)
				special_pred = true;
		if (!special_pred)
			return 0;
	}

	/* 1. bounded scan: the leading field must carry a predicate. A
	 * multikey key whose bounds are restricted, or that shares an array
	 * prefix with a restricted multikey key, gives no order to sort by
	 * (each document sits at each of its elements): the order ends there
	 * (sort_bounds_multikey_cut), and only the whole-index scan below,
	 * with unrestricted bounds, may still provide it. */
	if ((lead != NULL && lead->any) || special_pred) {
		uint32_t cut = sort_bounds_multikey_cut(d, p);
		nwant = wanted_sort(d, p, s, mismatch, cut, want);
		nhave = scan_order(d, 0, p, mismatch, cut, have);
		if (prefix_match(want, nwant, have, nhave))
			paths |= PATH_BOUNDED;

		/* 2. explode: a leading run of points and point sets. */
		if (explodes(d, p, mismatch, cut, want, nwant, explode_scans))
			paths |= PATH_EXPLODE;
	}

	/* 3. whole-index scan, in key pattern order, of a btree or hashed index;
	 * strings would come out in the index's collation order, so the
	 * collations must match. */
	if (!mismatch && !d->plugin && !d->wildcard) {
		nhave = 0;
		for (size_t i = 0; i < d->nkeys && nhave < KEYS_MAX; i++) {
			if (d->keys[i].direction == 0)
				break;
			have[nhave].field = d->keys[i].field;
			have[nhave].direction = d->keys[i].direction;
			nhave++;
		}
		if (prefix_match(s->keys, s->n, have, nhave))
			paths |= PATH_WHOLE;
	}
	return paths;
}

/* The filters a query's plan must satisfy (a conjunction): the query's
 * filter, and an $or branch's when one is judged alone. */
typedef struct filter_list {
	const bson_t *f[2];
	size_t n;
} filter_list;

/* What a wildcard index can do for a sort (wildcard_expanded). */
typedef enum {
	WILDCARD_NONE,  /* no expansion provides it */
	WILDCARD_MAYBE, /* one would if its path holds no arrays, which is unknown */
	WILDCARD_SORTS, /* one does even if its path holds arrays */
} wildcard_verdict;

/* A wildcard index is expanded per path the query predicates that its
 * wildcard key holds ({$_path: 1, f: 1}; a compound one with f in the
 * wildcard key's place: expandWildcardIndexEntry), and provides a sort
 * only as such an expansion (computeSortsForScan; the manual: only on a
 * field the query predicates); it is never scanned whole for a sort.
 * Each expansion is judged as a sparse btree index whose regular keys
 * are never multikey, first with its path holding arrays, then without:
 * listIndexes and explain do not say which paths do. *view is the
 * expansion that sorts (keys: KEYS_MAX of the caller's). */
static wildcard_verdict wildcard_expanded(const index_def *d, const query_preds *p,
                                          const sort_spec *s, const bson_t *qcoll, index_def *view,
                                          index_key *keys)
{
	size_t w = index_def_wildcard_key(d);
	wildcard_verdict v = WILDCARD_NONE;
	if (w >= d->nkeys || w >= 32 || d->nkeys > KEYS_MAX || p->overflow)
		return WILDCARD_MAYBE;
	for (size_t i = 0; i < p->n; i++) {
		const char *f = p->p[i].field;
		size_t len = strlen(f);
		if (!p->p[i].any || len >= INDEX_FIELD_LEN || !index_def_wildcard_covers(d, f))
			continue;
		/* bounds that take in documents and arrays make mongod scan f's
		 * sub-paths too ("f." to "f/"): no order by f, holding arrays or
		 * not (WildcardIndexMustUseBlockingSortWithExistsQueries) */
		const query_pred *q = &p->p[i];
		if (q->spans_objects && !q->point && !q->points && !q->compared)
			continue;
		memcpy(keys, d->keys, d->nkeys * sizeof(*keys));
		memcpy(keys[w].field, f, len + 1);
		keys[w].type = INDEX_KEY_BTREE;
		keys[w].direction = d->keys[w].direction < 0 ? -1 : 1;
		memset(view, 0, sizeof(*view));
		memcpy(view->name, d->name, sizeof(view->name));
		view->keys = keys;
		view->nkeys = d->nkeys;
		view->collation = d->collation;
		view->partial = d->partial;
		view->partial_filter = d->partial_filter;
		view->sparse = true;
		view->multikey_known = true;
		view->multikey_keys = 1u << w;
		if ((provides(view, p, s, qcoll, false, NULL) & ~PATH_WHOLE) != 0)
			return WILDCARD_SORTS;
		view->multikey_keys = 0;
		if ((provides(view, p, s, qcoll, false, NULL) & ~PATH_WHOLE) != 0)
			v = WILDCARD_MAYBE;
	}
	return v;
}

/* A compound wildcard index (7.0) led by a regular key, {a: 1, b: 1,
 * "w.$**": 1, c: 1}, for a query and sort that name no path its wildcard
 * key holds: mongod then has only its generic expansion, {a: 1, b: 1,
 * $_path: 1, ...} over every path (planner_wildcard_helpers.cpp), which
 * orders by its regular prefix and nothing after it (jstests
 * compound_wildcard_index_prefix.js: sorts {a}, {a, b} non-blocking; {a,
 * c}, {c} blocking), and is sparse like every wildcard entry; its
 * regular keys are never multikey (an array there is refused). So it
 * sorts as a sparse btree index of that prefix, which *view becomes.
 * False (judged as any wildcard index) for any other index, or when a
 * predicate or a sort key is on a path the wildcard key holds: a tight
 * expansion may then order by that path too. */
static bool compound_wildcard_prefix(const index_def *d, const query_preds *p, const sort_spec *s,
                                     index_def *view)
{
	size_t w = index_def_wildcard_key(d);
	if (w == 0 || w >= d->nkeys || p->overflow)
		return false;
	for (size_t i = 0; i < p->n; i++)
		if (index_def_wildcard_covers(d, p->p[i].field))
			return false;
	for (size_t i = 0; i < s->n; i++)
		if (index_def_wildcard_covers(d, s->keys[i].field))
			return false;
	for (size_t i = 0; i < w; i++)
		if (d->keys[i].type != INDEX_KEY_BTREE)
			return false;
	memset(view, 0, sizeof(*view));
	memcpy(view->name, d->name, sizeof(view->name));
	view->keys = d->keys;
	view->nkeys = w;
	view->collation = d->collation;
	view->partial = d->partial;
	view->partial_filter = d->partial_filter;
	view->sparse = true;
	view->multikey_known = true; /* regular keys: never multikey */
	return true;
}

/* Which ways a sparse or partial index d may serve, not hinted: a
 * partial index only when the filter implies its partialFilterExpression
 * (index_def_usable_for); a sparse one is never scanned whole, and is
 * bounded only when the predicate on its leading field matches no
 * document without it (else -1: cannot tell). */
static int restricted_paths(const index_def *d, int paths, const filter_list *fl)
{
	/* an $or branch (fl's second) alone, or the filter around it alone,
	 * must imply a partial index's filter: mongod does not combine them
	 * (PartialIndexAndContainingOrContainingAndSatisfyingPredOutside) */
	if (d->partial && !(fl->n == 2 ? index_def_usable_for(d, fl->f, 1) ||
	                                     index_def_usable_for(d, fl->f + 1, 1)
	                               : index_def_usable_for(d, fl->f, fl->n)))
		return 0;
	if (!d->sparse)
		return paths;
	paths &= ~PATH_WHOLE;
	if (paths == 0)
		return 0;
	switch (sort_bounds_missing(fl->f, fl->n, d->keys[0].field)) {
	case MISSING_EXCLUDED:
		return paths;
	case MISSING_MATCHES:
		return 0;
	default:
		return -1;
	}
}

static void maybe(eval_result *r, eval_out *out, const index_def *d, const char *why)
{
	if (*r != EVAL_NO)
		return;
	*r = EVAL_MAYBE;
	out->maybe = d;
	out->maybe_why = why;
}

/* Judges the indexes (only `hinted` when non-NULL) for one set of predicates. */
static eval_result eval_indexes(const index_set *set, const index_def *hinted, const query_preds *p,
                                const sort_spec *s, const bson_t *qcoll, const filter_list *fl,
                                eval_out *out)
{
	eval_result r = EVAL_NO;
	size_t n = hinted != NULL ? 1 : index_set_count(set);

	for (size_t i = 0; i < n; i++) {
		const index_def *d = hinted != NULL ? hinted : index_set_get(set, i);
		if (d->hidden)
			continue;
		if (d->odd) {
			maybe(&r, out, d, "has a key pattern this rule cannot read");
			continue;
		}
		/* e: the index as it is judged (a compound wildcard index as its
		 * regular prefix, compound_wildcard_prefix); d names it */
		index_def prefix;
		index_key keys[KEYS_MAX];
		const index_def *e = d;
		if (d->wildcard) {
			wildcard_verdict w = WILDCARD_SORTS;
			if (!compound_wildcard_prefix(d, p, s, &prefix) &&
			    (w = wildcard_expanded(d, p, s, qcoll, &prefix, keys)) !=
			        WILDCARD_SORTS) {
				if (w == WILDCARD_MAYBE)
					maybe(&r, out, d,
					      "is a wildcard index on a predicated path that may "
					      "hold arrays");
				continue;
			}
			e = &prefix;
		}
		uint64_t scans = 1;
		int paths = provides(e, p, s, qcoll, false, &scans);
		if (hinted == NULL && (e->sparse || e->partial)) {
			paths = restricted_paths(e, paths, fl);
			if (paths < 0) {
				maybe(&r, out, d, "is sparse");
				continue;
			}
		}
		if (paths & (PATH_BOUNDED | PATH_WHOLE)) {
			out->by = d;
			out->scans = 1;
			return EVAL_YES;
		}
		if (paths != 0) { /* exploded only: the fewest scans of them */
			if (r != EVAL_YES || scans < out->scans) {
				out->by = d;
				out->scans = scans;
			}
			r = EVAL_YES;
			continue;
		}
		if (out->collation == NULL && provides(e, p, s, qcoll, true, NULL) != 0)
			out->collation = d;
	}
	return r;
}

/* One $or branch, judged with the enclosing predicates added (generous:
 * the planner only sometimes pushes them down): EVAL_YES, EVAL_NO, or
 * EVAL_MAYBE when it cannot be judged (nested $or, $text, ...). */
static eval_result eval_branch(const index_set *set, const index_def *hinted, const query_preds *p,
                               const sort_spec *s, const bson_t *qcoll, const bson_t *filter,
                               const bson_t *branch, uint64_t *scans)
{
	query_preds bp = *p;
	sort_names names = {.len = 0};
	eval_out bo = {0};
	filter_list fl = {{filter, branch}, 2};
	size_t from = p->nelems;

	bp.nors = 0;
	bp.ors_overflow = false;
	query_preds_collect(&bp, branch);
	if (bp.nelems > from)
		sort_bounds_elems(&bp, from, &names);
	if (bp.overflow || bp.text_or_near || bp.refused)
		return EVAL_MAYBE;
	eval_result r = eval_indexes(set, hinted, &bp, s, qcoll, &fl, &bo);
	if (r == EVAL_NO && (bp.nors > 0 || bp.ors_overflow))
		return EVAL_MAYBE; /* a nested $or might merge */
	*scans = r == EVAL_YES ? bo.scans : 1;
	return r;
}

/* The conjunctive predicates gave no sort: try merging sorted scans of each
 * branch of an $or. */
static eval_result eval_ors(const index_set *set, const index_def *hinted, const query_preds *p,
                            const sort_spec *s, const bson_t *qcoll, const bson_t *filter,
                            eval_out *out)
{
	eval_result best = p->ors_overflow ? EVAL_MAYBE : EVAL_NO;

	for (size_t o = 0; o < p->nors; o++) {
		bson_t arr;
		bson_iter_t it;
		bool all = true, unsure = false, exploded = false;
		uint64_t total = 0; /* scans over every branch (explodeForSort's sum) */

		if (!bson_init_static(&arr, p->ors[o].data, p->ors[o].len) ||
		    !bson_iter_init(&it, &arr))
			continue;
		while (all && wire_iter_next(&it)) {
			bson_t branch;
			uint64_t scans = 1;
			if (!wire_iter_doc_view(&it, &branch)) {
				all = false;
				break;
			}
			eval_result r =
			    eval_branch(set, hinted, p, s, qcoll, filter, &branch, &scans);
			unsure |= r == EVAL_MAYBE;
			all = r != EVAL_NO;
			exploded |= scans > 1;
			total += scans;
		}
		if (all && exploded && total > QUERY_IN_EXPLODE_MAX)
			all = false; /* too many scans to merge: sorted in memory */
		if (all && !unsure) {
			out->by = NULL;
			return EVAL_YES;
		}
		if (all && unsure)
			best = EVAL_MAYBE;
	}
	if (best == EVAL_MAYBE && out->maybe_why == NULL)
		out->maybe_why = "an $or branch cannot be judged";
	return best;
}

typedef enum { HINT_NONE, HINT_INDEX, HINT_NATURAL, HINT_UNUSABLE } hint_kind;

/* A hint decides the plan: mongod uses the hinted index (or a collection
 * scan for $natural) whatever else could serve the sort, so the verdict
 * is about that index alone. */
static hint_kind resolve_hint(const index_set *set, const sort_query *q, const index_def **out,
                              const char **why)
{
	bson_iter_t it;

	*out = NULL;
	if (q->hint_name == NULL && q->hint_doc == NULL)
		return HINT_NONE;
	if (q->hint_name == NULL) {
		if (!bson_iter_init(&it, q->hint_doc) || !wire_iter_next(&it))
			return HINT_NONE;
		if (strcmp(wire_iter_key(&it), "$natural") == 0)
			return HINT_NATURAL;
	}
	size_t matches = index_set_find_hint(set, q->hint_name, q->hint_doc, out);
	if (matches != 1) {
		*why =
		    matches == 0 ? "the hint names no index" : "the hint matches several indexes";
		return HINT_UNUSABLE;
	}
	if ((*out)->hidden) {
		*why = "the hint names a hidden index (the server rejects it)";
		return HINT_UNUSABLE;
	}
	if ((*out)->wildcard || (*out)->odd) {
		*why = "the hinted index is a wildcard or unreadable index";
		return HINT_UNUSABLE;
	}
	return HINT_INDEX;
}

/* ---- the verdict, as facts ---- */

/* Records why; the words are rendered later, from these. */
static void say(sort_facts *f, sort_verdict v, const sort_spec *shown, const char *what,
                const char *name, const char *tail)
{
	f->verdict = v;
	f->show_sort = shown != NULL;
	f->what = what;
	f->name = name;
	f->tail = tail;
}

/* Whether an equality (or an $in) on every key of a unique index bounds
 * what the query can return to at most QUERY_IN_EXPLODE_MAX documents:
 * Mongoose's populate ({_id: {$in: [...]}} with a sort) and a lookup by a
 * unique key. mongod still sorts them in memory, but a sort of at most
 * that many documents is no finding. The index must serve the query: not
 * hidden, its filter implied when partial, its points not strings when
 * its collation is not the query's, and when sparse the predicate on its
 * leading key must keep out documents without it (those can repeat). */
static bool few_documents(const index_set *s, sort_facts *f, const index_def *id)
{
	const bson_t *filters[1] = {f->q->filter};
	for (size_t i = 0; i < index_set_count(s); i++) {
		const index_def *d = index_set_get(s, i);
		if ((!d->unique && d != id) || d->hidden || d->odd || d->nkeys == 0)
			continue;
		const query_pred *lead = query_preds_find(&f->preds, d->keys[0].field);
		if (lead == NULL || (!lead->point && lead->points == 0) ||
		    !index_def_usable_for(d, filters, 1) ||
		    (d->sparse &&
		     sort_bounds_missing(filters, 1, d->keys[0].field) != MISSING_EXCLUDED))
			continue;
		bool mismatch = !query_collation_equal(d->collation, f->coll);
		uint64_t docs = 1;
		for (size_t k = 0; k < d->nkeys && docs <= QUERY_IN_EXPLODE_MAX; k++) {
			const query_pred *q = query_preds_find(&f->preds, d->keys[k].field);
			uint32_t n = usable_point(q, mismatch) ? 1 : usable_points(q, mismatch);
			docs = n == 0 ? QUERY_IN_EXPLODE_MAX + 1 : docs * n;
		}
		if (docs <= QUERY_IN_EXPLODE_MAX) {
			f->maybe_why = NULL; /* what the blocking verdict set */
			f->list_indexes = f->collation_near = false;
			say(f, SORT_PROVIDED, &f->sort,
			    "at most a few documents to sort: unique index ", d->name,
			    " bounds them");
			return true;
		}
	}
	return false;
}

/* When no index provides the sort: which one it is that blocks. */
static void blocking(sort_facts *f, const char *why, const index_def *hinted,
                     const index_def *coll_near)
{
	if (why != NULL) {
		say(f, SORT_BLOCKING, &f->sort, why, NULL, NULL);
	} else if (hinted != NULL) {
		say(f, SORT_BLOCKING, &f->sort, "hinted index ", hinted->name,
		    " cannot provide it");
	} else {
		say(f, SORT_BLOCKING, &f->sort, "no index provides it", NULL, NULL);
		f->list_indexes = true;
		f->collation_near = coll_near != NULL;
	}
}

/* A $sort in a $facet branch (sort_query.in_facet), or behind a stage
 * mongod moves no $sort before (sort_query.behind). */
static void in_memory_verdict(const sort_query *q, sort_facts *f)
{
	/* A $facet's sub-pipelines get their documents from the stage
	 * before $facet, never from an index scan: only a pipeline's
	 * leading stages are pushed down to the query planner, so every
	 * $sort in them sorts in memory (the server's own aggregation
	 * tests that assert an index-provided sort refuse to run
	 * wrapped in $facet). A $sort after a $project is not leading
	 * either (the leading filter is still the input). */
	query_preds_init(&f->preds);
	if (q->filter) {
		/* its input is what the leading filter selects: _id
		 * points (not strings, whose collation is the
		 * collection's) bound it to a few documents */
		query_preds_collect(&f->preds, q->filter);
		const query_pred *id = query_preds_find(&f->preds, "_id");
		if (id && ((id->point && id->point_nc) || (id->points && id->points_nc))) {
			say(f, SORT_PROVIDED, &f->sort,
			    q->behind ? "at most a few documents to sort: _id points bound them"
			              : "at most a few documents to sort: _id points bound the "
			                "$facet's input",
			    NULL, NULL);
			return;
		}
	}
	if (q->behind)
		say(f, SORT_BLOCKING, &f->sort, "after ", q->behind,
		    ", which mongod moves no $sort ahead of, so no index can provide it");
	else
		say(f, SORT_BLOCKING, &f->sort, "inside $facet, where no index can provide it",
		    NULL, NULL);
}

/* The index list gave no plain answer: a hint, a wildcard index, or the
 * indexes themselves (sort_evaluate's last step). */
static void judge_indexes(const index_set *s, sort_facts *f, const index_def *hinted)
{
	eval_out out = {0};
	const sort_query *q = f->q;
	filter_list fl = {{q->filter, NULL}, 1};
	eval_result r = eval_indexes(s, hinted, &f->preds, &f->sort, f->coll, &fl, &out);
	if (r == EVAL_YES) {
		say(f, SORT_PROVIDED, &f->sort, "provided by index ", out.by->name, NULL);
		return;
	}
	if (f->preds.nors > 0 || f->preds.ors_overflow) {
		eval_out oo = {0};
		eval_result orr = eval_ors(s, hinted, &f->preds, &f->sort, f->coll, q->filter, &oo);
		if (orr == EVAL_YES) {
			say(f, SORT_PROVIDED, &f->sort,
			    "provided by merging sorted index scans of each $or branch", NULL,
			    NULL);
			return;
		}
		if (orr == EVAL_MAYBE && r == EVAL_NO) {
			r = EVAL_MAYBE;
			out.maybe = NULL;
			out.maybe_why = oo.maybe_why;
		}
	}
	if (r == EVAL_MAYBE) {
		if (out.maybe != NULL) {
			say(f, SORT_NO_VERDICT, &f->sort, "no verdict: index ", out.maybe->name,
			    NULL);
			f->maybe_why = out.maybe_why;
		} else {
			say(f, SORT_NO_VERDICT, &f->sort, "no verdict: ", out.maybe_why, NULL);
		}
		return;
	}
	blocking(f, NULL, hinted, out.collation);
}

static void judge_planned(const index_set *s, sort_facts *f);

void sort_evaluate(const index_set *s, const sort_query *q, sort_facts *f)
{
	const char *why = NULL;

	f->q = q;
	f->set = s;
	f->maybe_why = NULL;
	f->list_indexes = f->collation_near = false;
	f->preds.n = 0;
	switch (query_sort_parse(q->sort, &f->sort)) {
	case SORT_SPEC_NONE:
		say(f, SORT_PROVIDED, NULL, "not an index question (empty, $natural or $meta)",
		    NULL, NULL);
		return;
	case SORT_SPEC_INVALID:
		say(f, SORT_NO_VERDICT, NULL, "no verdict: a sort the server rejects", NULL, NULL);
		return;
	case SORT_SPEC_KEYS:
		break;
	}
	if (q->in_facet || q->behind) {
		in_memory_verdict(q, f);
		return;
	}
	if (s == NULL || index_set_is_opaque(s, &why)) {
		say(f, SORT_NO_VERDICT, &f->sort,
		    "no verdict: ", why != NULL ? why : "index list unknown", NULL);
		return;
	}

	query_preds_init(&f->preds);
	query_preds_collect(&f->preds, q->filter);
	if (f->preds.overflow || f->preds.text_or_near || f->preds.refused) {
		say(f, SORT_NO_VERDICT, &f->sort, "no verdict: ",
		    f->preds.overflow  ? "too many predicates"
		    : f->preds.refused ? "an operator mongod refuses"
		                       : "$text or $near chooses the plan",
		    NULL);
		return;
	}
	f->names.len = 0;
	if (f->preds.nelems > 0)
		sort_bounds_elems(&f->preds, 0, &f->names);
	/* No collation named: the query has the collection's default, which
	 * the _id index carries (every index created without one inherits
	 * it). The _id index is listed first by every server; else looked for. */
	const index_def *id = index_set_count(s) > 0 ? index_set_get(s, 0) : NULL;
	if (id == NULL || strcmp(id->name, "_id_") != 0)
		id = index_set_id_index(s);
	f->coll = q->collation != NULL ? q->collation : id != NULL ? id->collation : NULL;
	judge_planned(s, f);
	/* $expr points can only add order (mongod does not use them on a
	 * multikey path, where they would cut it): read only when needed. */
	if (f->verdict != SORT_PROVIDED && sort_bounds_expr(&f->preds, q->filter)) {
		f->maybe_why = NULL;
		f->list_indexes = f->collation_near = false;
		judge_planned(s, f);
	}
	if (f->verdict == SORT_BLOCKING)
		(void)few_documents(s, f, id);
}

/* The hint, then the indexes (sort_evaluate's last step). */
static void judge_planned(const index_set *s, sort_facts *f)
{
	const index_def *hinted = NULL;
	const char *why = NULL;
	switch (resolve_hint(s, f->q, &hinted, &why)) {
	case HINT_NATURAL:
		blocking(f, "hint {$natural} forces a collection scan", NULL, NULL);
		return;
	case HINT_UNUSABLE:
		say(f, SORT_NO_VERDICT, &f->sort, "no verdict: ", why, NULL);
		return;
	case HINT_NONE:
	case HINT_INDEX:
		break;
	}
	judge_indexes(s, f, hinted);
}

/* ---- the words, from the facts ---- */

static void index_names(text_buf *b, const index_set *set)
{
	for (size_t i = 0; i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		if (i > 0)
			text_str(b, ", ");
		if (b->len + strlen(d->name) + 16 > b->cap) {
			text_str(b, "...");
			return;
		}
		text_str(b, d->name);
		if (d->hidden)
			text_str(b, " (hidden)");
	}
}

void sort_facts_detail(const sort_facts *f, char *detail, size_t len)
{
	char line[639], tail[512];
	text_buf b;

	if (detail == NULL || len == 0)
		return;
	const char *t = f->tail;
	if (f->list_indexes) {
		text_init(&b, tail, sizeof tail);
		text_str(&b, f->collation_near ? " with the query's collation (indexes: "
		                               : " (indexes: ");
		index_names(&b, f->set);
		text_str(&b, ")");
		t = text_finish(&b);
	} else if (f->maybe_why != NULL) {
		snprintf(tail, sizeof tail, " %s and may provide it", f->maybe_why);
		t = tail;
	}
	text_init(&b, line, sizeof line);
	text_str(&b, "sort ");
	if (f->show_sort && f->sort.n > 0) {
		esr_put_sort(&b, f->sort.keys, f->sort.n);
		text_str(&b, " ");
	}
	text_str(&b, "on ");
	text_str(&b, f->q->db != NULL ? f->q->db : "");
	text_str(&b, ".");
	text_str(&b, f->q->coll != NULL ? f->q->coll : "");
	text_str(&b, ": ");
	text_str(&b, f->what);
	if (f->name != NULL)
		text_str(&b, f->name);
	if (t != NULL)
		text_str(&b, t);
	snprintf(detail, len, "%s", text_finish(&b));
}

void sort_facts_suggestion(const sort_facts *f, char *suggestion, size_t len)
{
	if (suggestion == NULL || len == 0)
		return;
	suggestion[0] = '\0';
	if (f->verdict == SORT_BLOCKING && !f->q->in_facet &&
	    !f->q->behind) /* no index helps there */
		esr_suggest_parsed(f->q->db, f->q->coll, &f->preds, &f->sort, f->q->collation,
		                   suggestion, len);
}

sort_verdict sort_check(const index_set *s, const sort_query *q, char *suggestion,
                        size_t suggestion_len, char *detail, size_t detail_len)
{
	sort_facts f;
	sort_evaluate(s, q, &f);
	sort_facts_suggestion(&f, suggestion, suggestion_len);
	sort_facts_detail(&f, detail, detail_len);
	return f.verdict;
}

/* ---- the rule: check and words ---- */

static rule_readiness check_sort(rule_ctx *c, const rule_site *s, const sort_query *q)
{
	const index_set *set = NULL;
	if (!s->coll)
		return RULE_READY;
	switch (q->in_facet || q->behind ? INDEXES_KNOWN
	                                 : rule_ctx_indexes(c, s->db, s->coll, &set)) {
	case INDEXES_KNOWN:
		break;
	case INDEXES_PENDING: /* the engine owes the verdict, or the wait ended */
		return RULE_READY;
	default: /* INDEXES_UNAVAILABLE: no verdict possible */
		return RULE_READY;
	}
	sort_facts f;
	sort_evaluate(set, q, &f);
	if (f.verdict == SORT_BLOCKING)
		rule_report(c, s, RULE_INDEX_MISMATCHED_SORT, &f);
	return RULE_READY;
}

/* The detail and suggestion keep the sizes they have always had in the log
 * (255 and 511 bytes); the fix wraps the suggestion. */
static void words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w)
{
	const sort_facts *f = facts;
	char why[256], index[512];
	text_buf t;
	sort_facts_detail(f, why, sizeof why);
	sort_facts_suggestion(f, index, sizeof index);
	text_init(&t, w->buf, sizeof(w->buf));

	size_t start = text_mark(&t);
	if (why[0])
		text_printf(&t, "%s, so mongod sorts in memory", why);
	else
		text_str(&t, "no index provides this sort, so mongod sorts in memory");
	w->detail = rule_words_piece(&t, start);
	start = text_mark(&t);
	if (f->q->in_facet)
		text_str(&t, "move the $sort (and a $limit after it) before $facet, where an index "
		             "can provide it, or sort fewer documents inside the facet");
	else if (f->q->behind)
		text_printf(&t,
		            "move the $sort (and a $limit after it) before %s, right after the "
		            "leading $match, where an index can provide it: %s leaves the sorted "
		            "fields as they are",
		            f->q->behind, f->q->behind);
	else if (index[0])
		text_printf(&t, "create the index %s", index);
	else
		text_str(&t, "create an index with the equality fields first, then the sort fields "
		             "in the sort's directions, then the range fields (ESR)");
	w->fix = rule_words_piece(&t, start);
	if (index[0]) {
		start = text_mark(&t);
		text_str(&t, index);
		w->suggestion = rule_words_piece(&t, start);
	} else {
		w->suggestion = w->fix;
	}
}

static const rule_checks checks = {
    .sort = check_sort,
    .words = words,
};

const rule_def rule_sort_def = {
    .id = RULE_INDEX_MISMATCHED_SORT,
    .needs_indexes = true,
    .name = "index-mismatched-sort",
    .summary = "no index provides the sort: mongod sorts in memory (suggests an ESR index)",
    .fix_kind = "ESR createIndex",
    .fix_esr_index = true,
    .checks = &checks,
};
