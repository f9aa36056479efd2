/* collection-scan (rule_scan.h says what it catches and what not).
 *
 * One pass over the filter collects, per field of its conjunctive part,
 * which kinds of index its predicates bound (IXB_*, ixselect.h), and remembers the
 * $or clauses and what gave no bounds (for the detail). Then each index of
 * the collection is asked whether its leading field is bounded. The common
 * case pays for no index lookup at all: a bounded predicate on _id (whose
 * index every collection with an index list has) answers at once. */
#include "analyzers/rules/rule_scan.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyzers/planner/ixselect.h"
#include "analyzers/planner/query_preds.h"
#include "analyzers/planner/stages.h"
#include "analyzers/rules/rule_api.h"
#include "analyzers/rules/rule_scan_int.h"
#include "analyzers/rules/rule_sort.h"
#include "protocol/wire_iter.h"

/* ---- reading the filter ---- */

/* The counts and flags only: the arrays are written before they are read,
 * and clearing their 700 bytes for every filter would cost more than most
 * filters' reads. */
static void preds_init(scan_preds *p)
{
	p->n = p->nors = p->nwhy = p->nconj = 0;
	p->in_branch = false;
	p->unknown = p->refused = p->predicates = p->or_unbounded = false;
	p->complements_scan = false;
	p->collation = NULL;
}

static void add_why(scan_preds *p, const char *field, const char *what)
{
	p->predicates = true;
	for (size_t i = 0; i < p->nwhy; i++)
		if (p->why[i].what == what &&
		    (p->why[i].field == field ||
		     (p->why[i].field && field && strcmp(p->why[i].field, field) == 0)))
			return;
	if (p->nwhy < SCAN_WHY_MAX) {
		p->why[p->nwhy].field = field;
		p->why[p->nwhy].what = what;
		p->nwhy++;
	}
}

/* The field's entry (NULL when there are too many fields). */
static ixselect_field *add_bounds(scan_preds *p, const char *field, ixselect_pred b)
{
	p->predicates = true;
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->f[i].field, field) == 0) {
			ixselect_field_add(&p->f[i], b);
			return &p->f[i];
		}
	if (p->n == SCAN_FIELDS_MAX) {
		p->unknown = true;
		return NULL;
	}
	ixselect_field *f = &p->f[p->n++];
	memset(f, 0, sizeof(*f));
	f->field = field;
	ixselect_field_add(f, b);
	return f;
}

bool rule_scan_regex_bounded(const char *pattern, const char *options)
{
	return query_regex_bounded(pattern, options);
}

/* {f: {$op: ..., ...}}: every operator is a conjunct; any bounded one
 * bounds the field. */
static const char *options_of(const bson_iter_t *v)
{
	bson_iter_t opt;
	if (wire_iter_recurse(v, &opt) && bson_iter_find(&opt, "$options") &&
	    WIRE_ITER_HOLDS_UTF8(&opt))
		return bson_iter_utf8(&opt, NULL);
	return NULL;
}

/* Why a predicate gave no bounds, for the detail. */
static const char *no_bounds_why(const char *op, const bson_iter_t *v)
{
	if (strcmp(op, "$not") == 0 && WIRE_ITER_HOLDS_REGEX(v))
		return "$not of a regex";
	return op;
}

/* it: on the first operator of v (already read). Every operator is a
 * conjunct: any bounded one bounds the field. */
static void field_operators(scan_preds *p, const char *field, const bson_iter_t *v,
                            bson_iter_t *it_first)
{
	bson_iter_t it = *it_first;
	const char *options = NULL;
	p->predicates = true;
	do {
		const char *op = wire_iter_key(&it);
		if (key_eq(op, "$options") || key_eq(op, "$comment"))
			continue;
		if (key_eq(op, "$near") || key_eq(op, "$nearSphere") || key_eq(op, "$geoNear")) {
			p->unknown = true; /* needs its geo index, or fails */
			continue;
		}
		if (!query_operator_known(op, false)) {
			p->unknown = p->refused = true; /* mongod refuses the query */
			continue;
		}
		if (key_eq(op, "$regex") && !options)
			options = options_of(v);
		ixselect_pred b = ixselect_operator(op, &it, options);
		ixselect_field *f = b.kinds ? add_bounds(p, field, b) : NULL;
		if (f && !f->elem && (b.kinds & IXB_ELEM))
			ixselect_elem_operand(op, &it, &f->elem, &f->elem_len);
		if (!b.kinds)
			add_why(p, field, no_bounds_why(op, &it));
	} while (wire_iter_next(&it));
}

/* An operator document: its first key is an operator (a DBRef, {$ref,
 * $id}, is a value). *it is left on that first key. */
static bool is_operator_doc(const bson_iter_t *v, bson_iter_t *it)
{
	if (!WIRE_ITER_HOLDS_DOCUMENT(v) || !wire_iter_recurse(v, it) || !wire_iter_next(it))
		return false;
	const char *k = wire_iter_key(it);
	return k[0] == '$' && !key_eq(k, "$ref") && !key_eq(k, "$id") && !key_eq(k, "$db");
}

/* The $expr forms mongod (5.0+) rewrites into an index-usable match
 * (query_expr_comparisons): a btree key not multikey; $eq a hashed key
 * too; a sparse one only when hinted, for a non-null constant (mongod
 * keeps them off a sparse index it chooses: IXB_SPARSE_HINTED; until stop
 * 42 a sparse index counted as bounding them, and the collection scan
 * sparse_index_internal_expr.js asserts went unreported). A user
 * variable's value is not known: taken as neither null nor a string (a
 * finding can be missed there, none invented). Anything else in the $expr
 * bounds nothing. */
static void expr_cmp_bounds(void *arg, const query_expr_cmp *c)
{
	scan_preds *p = arg;
	bool null = wire_iter_type(c->value) == BSON_TYPE_NULL;
	ixselect_pred b = {
	    IXB_BTREE_NM,
	    !c->variable && (WIRE_ITER_HOLDS_UTF8(c->value) || WIRE_ITER_HOLDS_DOCUMENT(c->value)),
	    false};
	if (!null)
		b.kinds |= IXB_SPARSE_HINTED;
	if (key_eq(c->op, "$eq"))
		b.kinds |= IXB_HASHED | (null ? 0u : IXB_HASHED_SPARSE_HINTED);
	add_bounds(p, c->field, b);
}

static void expr_other(void *arg)
{
	add_why(arg, NULL, "$expr");
}

static void expr_bounds(scan_preds *p, const bson_iter_t *e)
{
	query_expr_comparisons(e, expr_cmp_bounds, expr_other, p);
}

static void collect(scan_preds *p, const bson_t *filter, int depth);

typedef struct scan_level {
	scan_preds *p;
	int depth;
} scan_level;

static void collect_sub(void *arg, const bson_t *sub)
{
	const scan_level *l = arg;
	collect(l->p, sub, l->depth + 1);
}

static void collect_array(scan_preds *p, const bson_iter_t *arr, bool is_or, int depth)
{
	scan_level l = {p, depth};
	const uint8_t *data;
	uint32_t len;
	if (!query_preds_branches(arr, is_or, &data, &len, collect_sub, &l))
		return;
	p->predicates = true;
	if (p->nors == SCAN_ORS_MAX) {
		p->unknown = true;
		return;
	}
	p->ors[p->nors].data = data;
	p->ors[p->nors].len = len;
	p->nors++;
}

/* One member of a filter document, it on it. */
static void collect_member(scan_preds *p, const bson_iter_t *it, int depth)
{
	bson_iter_t first;
	const char *k = wire_iter_key(it);
	if (k[0] == '$') {
		if (key_eq(k, "$and"))
			collect_array(p, it, false, depth);
		else if (key_eq(k, "$or"))
			collect_array(p, it, true, depth);
		else if (key_eq(k, "$expr"))
			expr_bounds(p, it);
		else if (key_eq(k, "$text"))
			p->unknown = true; /* its index, or an error */
		else if (!query_operator_known(k, true))
			p->unknown = p->refused = true; /* mongod refuses the query */
		else if (!key_eq(k, "$comment"))
			add_why(p, NULL, k); /* $where, $nor, $jsonSchema, ... */
		return;
	}
	if (is_operator_doc(it, &first)) {
		field_operators(p, k, it, &first);
		return;
	}
	ixselect_pred b = ixselect_value(it);
	if (b.kinds)
		add_bounds(p, k, b);
	else
		add_why(p, k, "a regex it cannot read");
}

static void collect(scan_preds *p, const bson_t *filter, int depth)
{
	bson_iter_t it;
	if (depth > SCAN_MAX_DEPTH) {
		p->unknown = true;
		return;
	}
	if (filter == NULL || !bson_iter_init(&it, filter))
		return;
	while (wire_iter_next(&it))
		collect_member(p, &it, depth);
}

/* The same, from the members the engine read (facts.h). */
static void collect_facts(scan_preds *p, const filter_facts *f)
{
	bson_iter_t it;
	for (unsigned i = 0; i < f->n; i++) {
		wire_cur_iter(&f->m[i].at, &it);
		collect_member(p, &it, 0);
	}
}

/* ---- asking the indexes ---- */

/* hinted: the one index the plan may use, or NULL for any. */
/* A partial index serves a filter that implies its partialFilterExpression
 * (expression::isSubsetOf). In an $or branch (the last of p's conjuncts,
 * the others the predicates around the $or), the branch alone or those
 * around it alone must imply it: mongod does not combine the two
 * (query_planner_partialidx_test.cpp,
 * PartialIndexAndContainingOrContainingAndSatisfyingPredOutside). */
static bool partial_usable(const index_def *d, const scan_preds *p)
{
	if (!p->in_branch || p->nconj < 2)
		return index_def_usable_for(d, p->conj, p->nconj);
	return index_def_usable_for(d, p->conj, p->nconj - 1) ||
	       index_def_usable_for(d, p->conj + p->nconj - 1, 1);
}

static scan_verdict conj_verdict(const index_set *set, const index_def *hinted, const scan_preds *p)
{
	bool odd = false;
	size_t n = hinted ? 1 : index_set_count(set);
	for (size_t i = 0; i < n; i++) {
		const index_def *d = hinted ? hinted : index_set_get(set, i);
		if (d->hidden)
			continue;
		/* A partial index serves only a filter that implies its own.
		 * A hint to one that it does not is honoured: the planner strips
		 * the predicates' assignments to it and scans it whole, every
		 * key (and returns only the documents it holds: SERVER-26413,
		 * open; jstests/core/query/partial_filter_expression hints so). */
		bool usable = !d->partial || partial_usable(d, p);
		if (hinted && !usable)
			return SCAN_UNBOUNDED;
		if (!usable)
			continue;
		bool same = (!d->collation && !p->collation) ||
		            index_collation_same(d->collation, p->collation);
		ixselect_field f[SCAN_FIELDS_MAX];
		const ixselect_field *fs = p->f;
		if (hinted) {
			memcpy(f, p->f, p->n * sizeof(f[0]));
			ixselect_fields_hinted(f, p->n);
			fs = f;
		}
		ixselect_verdict v = ixselect_index(d, fs, p->n, same);
		/* $ne / $nin on _id (or a unique key) alone: every key but the
		 * excluded ones, for collection-scan's question (not for the
		 * collation check's, which asks whether an index serves it) */
		if (v == IXSELECT_YES && p->complements_scan &&
		    ixselect_complements(d, fs, p->n, same))
			continue;
		if (v == IXSELECT_YES)
			return SCAN_BOUNDED;
		odd |= v == IXSELECT_UNKNOWN;
	}
	return odd ? SCAN_UNKNOWN : SCAN_UNBOUNDED;
}

static scan_verdict preds_verdict(const index_set *set, const index_def *hinted, scan_preds *p,
                                  int depth);

/* An $or clause is bounded when each of its branches is. A branch mongod
 * refuses refuses the query, wherever it is: every branch is read for
 * that, though one no index bounds decides the rest. */
static scan_verdict or_verdict(const index_set *set, const index_def *hinted,
                               const scan_preds *outer, const uint8_t *data, uint32_t len,
                               int depth)
{
	bson_t arr;
	bson_iter_t it;
	scan_verdict v = SCAN_BOUNDED;
	bool unbounded = false;
	if (!bson_init_static(&arr, data, len) || !bson_iter_init(&it, &arr))
		return SCAN_UNKNOWN;
	while (wire_iter_next(&it)) {
		const uint8_t *d;
		uint32_t l;
		bson_t branch;
		if (!WIRE_ITER_HOLDS_DOCUMENT(&it))
			return SCAN_UNKNOWN;
		bson_iter_document(&it, &l, &d);
		if (!bson_init_static(&branch, d, l))
			return SCAN_UNKNOWN;
		scan_preds bp;
		preds_init(&bp);
		bp.collation = outer->collation;
		bp.complements_scan = outer->complements_scan;
		collect(&bp, &branch, depth + 1);
		if (bp.refused)
			return SCAN_UNKNOWN;
		if (unbounded)
			continue;
		bp.nconj = 0;
		for (size_t i = 0; i < outer->nconj && bp.nconj < SCAN_MAX_DEPTH + 1; i++)
			bp.conj[bp.nconj++] = outer->conj[i];
		bp.conj[bp.nconj++] = &branch;
		bp.in_branch = true;
		scan_verdict b = preds_verdict(set, hinted, &bp, depth + 1);
		if (b == SCAN_UNBOUNDED)
			unbounded = true;
		if (b == SCAN_UNKNOWN)
			v = SCAN_UNKNOWN;
	}
	return unbounded ? SCAN_UNBOUNDED : v;
}

static scan_verdict preds_verdict(const index_set *set, const index_def *hinted, scan_preds *p,
                                  int depth)
{
	if (p->unknown || depth > SCAN_MAX_DEPTH)
		return SCAN_UNKNOWN;
	scan_verdict v = conj_verdict(set, hinted, p);
	if (v != SCAN_UNBOUNDED)
		return v;
	for (size_t i = 0; i < p->nors; i++) {
		scan_verdict o = or_verdict(set, hinted, p, p->ors[i].data, p->ors[i].len, depth);
		if (o == SCAN_BOUNDED)
			return SCAN_BOUNDED;
		if (o == SCAN_UNKNOWN)
			v = SCAN_UNKNOWN;
		else
			p->or_unbounded = true;
	}
	return v;
}

/* The collation the query runs with: its own, else the collection's
 * default, which is the _id index's. */
static const bson_t *query_collation(const index_set *set, const bson_t *given)
{
	return given ? given : index_set_default_collation(set);
}

typedef enum { HINT_NONE, HINT_INDEX, HINT_NATURAL, HINT_UNUSABLE } hint_kind;

static hint_kind resolve_hint(const index_set *set, const bson_t *doc, const char *name,
                              const index_def **out)
{
	bson_iter_t it;
	*out = NULL;
	if (!doc && !name)
		return HINT_NONE;
	if (doc) {
		if (!bson_iter_init(&it, doc) || !wire_iter_next(&it))
			return HINT_NONE;
		if (key_eq(wire_iter_key(&it), "$natural"))
			return HINT_NATURAL;
	}
	size_t matches = index_set_find_hint(set, name, doc, out);
	if (matches != 1 || (*out)->hidden)
		return HINT_UNUSABLE; /* the server refuses it */
	/* a wildcard, geo or text index (or one not understood) hinted: its
	 * own rules for a whole scan, or an error; not judged */
	const index_def *d = *out;
	return d->wildcard || d->plugin || d->odd ? HINT_UNUSABLE : HINT_INDEX;
}

scan_verdict rule_scan_filter(const index_set *set, const bson_t *filter, const bson_t *hint_doc,
                              const char *hint_name)
{
	return rule_scan_filter_collated(set, filter, NULL, hint_doc, hint_name);
}

scan_verdict rule_scan_filter_collated(const index_set *set, const bson_t *filter,
                                       const bson_t *collation, const bson_t *hint_doc,
                                       const char *hint_name)
{
	scan_preds p;
	const index_def *hinted = NULL;
	if (set == NULL || index_set_is_opaque(set, NULL))
		return SCAN_UNKNOWN;
	switch (resolve_hint(set, hint_doc, hint_name, &hinted)) {
	case HINT_NATURAL:
		return SCAN_UNBOUNDED;
	case HINT_UNUSABLE:
		return SCAN_UNKNOWN;
	default:
		break;
	}
	preds_init(&p);
	collect(&p, filter, 0);
	p.conj[p.nconj++] = filter;
	p.collation = query_collation(set, collation);
	if (p.unknown)
		return SCAN_UNKNOWN; /* $text, $near: their index, or an error */
	if (!p.predicates)
		return SCAN_UNBOUNDED;
	return preds_verdict(set, hinted, &p, 0);
}

/* ---- the rule ---- */

/* A sort {$natural: ±1} with no hint: mongod plans a collection scan
 * whatever indexes could bound the filter (query_planner.cpp: a $natural
 * sort without a hint forces a table scan). */
static bool natural_sort(const rule_query *rq)
{
	/* the first key, at its place in the document's bytes: no iterator */
	const bson_t *s = rq->q.sort;
	if (!s || rq->q.hint_doc || rq->q.hint_name || s->len < 5 + sizeof("$natural"))
		return false;
	const uint8_t *d = bson_get_data(s);
	return d[5] == '$' && memcmp(d + 5, "$natural", sizeof("$natural")) == 0;
}

static bool sort_served(const index_set *set, const rule_query *rq)
{
	sort_spec spec;
	if (!rq->q.sort || query_sort_parse(rq->q.sort, &spec) != SORT_SPEC_KEYS)
		return false; /* none, or {$natural: 1}: the collection's own order */
	sort_facts f;
	sort_evaluate(set, &rq->q, &f);
	return f.verdict != SORT_BLOCKING; /* no verdict: say nothing either */
}

/* The one index whose order provides the query's sort, or NULL (none, a
 * sort of no keys, or one provided otherwise: merged $or scans, a unique
 * key's few documents). */
static const char *sort_index(const index_set *set, const rule_query *rq)
{
	sort_spec spec;
	if (!rq->q.sort || query_sort_parse(rq->q.sort, &spec) != SORT_SPEC_KEYS)
		return NULL;
	sort_facts f;
	sort_evaluate(set, &rq->q, &f);
	static const char by[] = "provided by index ";
	return f.verdict == SORT_PROVIDED && f.name && strncmp(f.what, by, sizeof by - 1) == 0
	           ? f.name
	           : NULL;
}

/* distinct's key leads a usable index and the filter names only that
 * index's fields: a DISTINCT_SCAN reads each value once, and can apply a
 * filter only on the keys it reads, so a filter on another field makes it
 * an ordinary query of that filter (query_planner: the distinct scan needs
 * a plan the index alone answers). The index (getDistinctNodeIndex): not
 * partial, its leading key a number (not hashed; no geo or text key after
 * it either), its collation the query's. */
static bool distinct_index(const index_set *set, const char *key, const bson_t *filter,
                           const bson_t *collation, bool group)
{
	for (size_t i = 0; key && i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		bool known;
		if (!d->hidden && !d->plugin && !d->wildcard && !d->partial && d->nkeys > 0 &&
		    d->keys[0].type == INDEX_KEY_BTREE && strcmp(d->keys[0].field, key) == 0 &&
		    ((!d->collation && !collation) ||
		     index_collation_same(d->collation, collation)) &&
		    index_def_keys_cover(d, filter) &&
		    !(group && (index_def_multikey(d, &known) & 1)))
			return true;
	}
	return false;
}

static bool distinct_served(const index_set *set, const char *key, const bson_t *filter,
                            const bson_t *collation)
{
	return distinct_index(set, key, filter, collation, false);
}

/* The same for an aggregate's $group by key that may be a DISTINCT_SCAN
 * (rule_query.group): and not on a key known to hold arrays, which mongod
 * groups whole, where its index keys hold each element. */
static bool group_served(const index_set *set, const char *key, const bson_t *collation)
{
	return distinct_index(set, key, NULL, collation, true);
}

static bool has_id_bound(const scan_preds *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->f[i].field, "_id") == 0)
			return (p->collation ? p->f[i].nc : p->f[i].any) & IXB_BTREE;
	return false;
}

/* Why the read of rq, on set, is reported into f (cause, hinted): false
 * when what bounds it lets it pass. hinted: the index a hint names, or
 * NULL; limited: a limit below minDocuments; counted: a count with no
 * filter (a hinted one, a $natural hint is answered before). */
static bool read_cause(const index_set *set, const rule_query *rq, scan_preds *p,
                       const index_def *hinted, bool limited, bool counted, scan_facts *f)
{
	if (!p->predicates) {
		/* a sort an index provides: an index scan in its order, which a
		 * limit stops; one the planner chose for the sort is not judged
		 * (paging and streaming in order read so), one a hint forces with
		 * no limit reads every key of the hinted index, as for a filter it
		 * does not bound */
		f->in_order = sort_served(set, rq);
		if (((limited || !hinted || rq->stops_unknown) && f->in_order) ||
		    (rq->kind == RULE_QUERY_DISTINCT &&
		     distinct_served(set, rq->distinct_key, NULL, p->collation)) ||
		    (rq->kind == RULE_QUERY_AGGREGATE && rq->reads_all && rq->group &&
		     group_served(set, rq->group, p->collation)))
			return false;
		f->cause = counted ? CAUSE_COUNTED : CAUSE_EMPTY;
		f->hinted = hinted ? hinted->name : NULL;
	} else {
		if (preds_verdict(set, hinted, p, 0) != SCAN_UNBOUNDED)
			return false;
		if (limited && sort_served(set, rq))
			return false; /* stops after `limit` matches, in index order */
		/* at or past minDocuments: reported, and worded as the plan reads */
		f->order_index = rq->limit > 0 ? sort_index(set, rq) : NULL;
		if (rq->kind == RULE_QUERY_DISTINCT &&
		    distinct_served(set, rq->distinct_key, rq->q.filter, p->collation))
			return false; /* a distinct scan can filter on its keys */
		f->cause = hinted ? CAUSE_HINTED : CAUSE_FILTER;
		f->hinted = hinted ? hinted->name : NULL;
	}
	return true;
}

/* The query's filter against the collection's indexes; a collection
 * under minDocuments is never reported, however its filter reads. */
static void check_query(rule_ctx *c, const rule_site *s, const rule_query *rq)
{
	if (!s->coll || !rule_wanted(c, s, RULE_COLLECTION_SCAN))
		return;
	/* The facts describe rq's filter where the site has them (rule_api.h);
	 * a filter whose view could not be made (rq->q.filter NULL) is read
	 * as none, with or without them. */
	const filter_facts *ff =
	    rq->q.filter && s->facts && s->facts->has_filter && s->facts->filter.complete
	        ? &s->facts->filter
	        : NULL;
	uint32_t min = rule_ctx_config(c, RULE_COLLECTION_SCAN)->params[SCAN_PARAM_MIN_DOCUMENTS];
	scan_preds p;
	preds_init(&p);
	p.complements_scan = true;
	if (ff)
		collect_facts(&p, ff);
	else
		collect(&p, rq->q.filter, 0);
	p.conj[p.nconj++] = rq->q.filter;
	p.collation = rq->q.collation; /* the _id index's is the default */
	bool limited = rq->limit > 0 && rq->limit < (int64_t)min;
	bool counted = !p.predicates && rq->kind == RULE_QUERY_COUNT;
	if (!p.predicates &&
	    ((limited && !rule_scan_sorts(rq)) || (counted && !rq->q.hint_doc && !rq->q.hint_name)))
		return; /* reads `limit` documents, or the collection's metadata (a count
		           with a hint reads the hint: get_executor_count); with a sort,
		           only if an index provides it (below) */
	if (!p.predicates && rq->kind == RULE_QUERY_AGGREGATE && !rq->counts && !rq->reads_all)
		return; /* a $limit, a $skip or a source stage bounds what is read */
	if (p.unknown || rq->min_max || (has_id_bound(&p) && !rq->q.hint_doc && !rq->q.hint_name))
		return; /* every collection has the _id index; min/max bound the hinted index */

	const index_set *set;
	if (rule_ctx_indexes(c, s->db, s->coll, &set) != INDEXES_KNOWN ||
	    index_set_is_opaque(set, NULL))
		return;
	int64_t docs = rule_ctx_doc_count(c, s->db, s->coll, set);
	if (docs < 0 || docs < (int64_t)min)
		return;
	p.collation = query_collation(set, rq->q.collation);

	scan_facts f = {.q = rq, .p = &p, .set = set, .docs = docs, .min = min};
	const index_def *hinted = NULL;
	if (p.predicates && natural_sort(rq)) {
		f.cause = CAUSE_NATURAL;
		f.by_sort = true;
		rule_report(c, s, RULE_COLLECTION_SCAN, &f);
		return;
	}
	switch (resolve_hint(set, rq->q.hint_doc, rq->q.hint_name, &hinted)) {
	case HINT_NATURAL:
		f.cause = CAUSE_NATURAL;
		rule_report(c, s, RULE_COLLECTION_SCAN, &f);
		return;
	case HINT_UNUSABLE:
		return; /* the server refuses it, or we cannot tell which */
	default:
		break;
	}
	if (!read_cause(set, rq, &p, hinted, limited, counted, &f))
		return;
	rule_report(c, s, RULE_COLLECTION_SCAN, &f);
}

/* ---- $lookup: the foreign side ---- */

static bool foreign_indexed(const index_set *set, const char *field)
{
	for (size_t i = 0; i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		if (!d->hidden && !d->plugin && d->nkeys > 0 &&
		    strcmp(d->keys[0].field, field) == 0)
			return true;
	}
	return false;
}

/* A $lookup with localField / foreignField looks each joined document up
 * in `from` by foreignField, and a $graphLookup each step of its traversal
 * by connectToField ($in of the values reached): without an index leading
 * with that field, every lookup scans `from`. */
static void check_lookup(rule_ctx *c, const rule_site *s, const lookup_stage *lk)
{
	if (!lk->from || !lk->foreign || !lk->local || !lk->from[0] || !lk->foreign[0])
		return;
	const char *from = lk->from, *foreign = lk->foreign;
	const index_set *set;
	if (rule_ctx_indexes(c, s->db, from, &set) != INDEXES_KNOWN ||
	    index_set_is_opaque(set, NULL))
		return;
	uint32_t min = rule_ctx_config(c, RULE_COLLECTION_SCAN)->params[SCAN_PARAM_MIN_DOCUMENTS];
	int64_t docs = rule_ctx_doc_count(c, s->db, from, set);
	if (docs < 0 || docs < (int64_t)min)
		return;
	for (size_t i = 0; i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		if ((d->wildcard || d->odd) && !d->hidden)
			return;
	}
	if (foreign_indexed(set, foreign))
		return;
	scan_facts f = {.cause = CAUSE_LOOKUP,
	                .set = set,
	                .docs = docs,
	                .from = from,
	                .foreign = foreign,
	                .graph = lk->graph};
	/* Logged at `from`, the collection every join scans (as a $lookup
	 * pipeline's query is): a finding of its own beside one of the same
	 * request at its own collection (a whole read, an unbounded filter),
	 * whose words it would otherwise only have counted. The action is the
	 * request's, from its collection's scopes. */
	char ns[512];
	rule_site at = *s;
	snprintf(ns, sizeof ns, "%s.%s", s->db, from);
	at.coll = from;
	at.ns = ns;
	rule_report(c, &at, RULE_COLLECTION_SCAN, &f);
}

/* Every join of the pipeline's accesses (stages.h), nested ones too. */
typedef struct join_walk {
	rule_ctx *c;
	const rule_site *s;
} join_walk;

static bool on_access(void *arg, const pipe_access *a)
{
	const join_walk *w = arg;
	if (!rule_wanted(w->c, w->s, RULE_COLLECTION_SCAN))
		return false;
	if (a->kind == PIPE_JOIN)
		check_lookup(w->c, w->s, a->join);
	return true;
}

static void check_pipeline(rule_ctx *c, const rule_site *s, const bson_iter_t *pipeline)
{
	uint32_t len;
	const uint8_t *data;
	if (!rule_ctx_index_cache(c) || !WIRE_ITER_HOLDS_ARRAY(pipeline))
		return;
	bson_iter_array(pipeline, &len, &data);
	/* most pipelines join nothing */
	if (join_maybe_in(data, len)) {
		join_walk w = {c, s};
		pipeline_walk(pipeline, on_access, &w);
	}
}

static const rule_param params[] = {
    {"minDocuments", RULE_PARAM_U32, 10000, 0, 4000000000u, SCAN_PARAM_MIN_DOCUMENTS,
     "collections with fewer documents (estimated) are not reported"},
};

static const rule_checks checks = {
    .query = check_query,
    .pipeline = check_pipeline,
    .words = rule_scan_words,
    /* an equality on _id without a hint returns at has_id_bound */
    .query_when = STMT_PLAN,
};

const rule_def rule_scan_def = {
    .id = RULE_COLLECTION_SCAN,
    .needs_indexes = true,
    .name = "collection-scan",
    .summary = "no index can bound the filter: mongod reads every document (suggests an ESR index)",
    .fix_kind = "an index on the filter's fields (ESR createIndex)",
    .fix_esr_index = true,
    .quiet_below = "minDocuments",
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .checks = &checks,
};
