/* collection-scan's words (rule_scan.h): the detail, the suggestion and
 * the fix of a finding its check (rule_scan.c) reported, from the facts it
 * gathered (rule_scan_int.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyzers/planner/esr.h"
#include "analyzers/planner/sort_bounds.h"
#include "analyzers/rules/rule_scan.h"
#include "analyzers/rules/rule_scan_int.h"

static void index_names(text_buf *t, const index_set *set)
{
	for (size_t i = 0; i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		if (t->len + strlen(d->name) + 16 > 900) {
			text_str(t, ", ...");
			return;
		}
		text_str(t, i ? ", " : "");
		text_str(t, d->name);
		if (d->hidden)
			text_str(t, " (hidden)");
	}
}

/* Whether a visible index of set is unique on field alone (or is on _id,
 * whose values are unique whatever listIndexes says). */
static bool unique_on(const index_set *set, const char *field)
{
	for (size_t i = 0; set && i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		if (!d->hidden && d->nkeys == 1 && strcmp(d->keys[0].field, field) == 0 &&
		    (d->unique || strcmp(field, "_id") == 0))
			return true;
	}
	return false;
}

/* "status: $ne; name: an unanchored ... regex; qty: no index leads with it" */
static void reasons(text_buf *t, const scan_preds *p, const index_set *set)
{
	bool first = true;
	for (size_t i = 0; i < p->nwhy; i++) {
		text_str(t, first ? "" : "; ");
		first = false;
		if (p->why[i].field)
			text_printf(t, "%s: %s", p->why[i].field, p->why[i].what);
		else
			text_str(t, p->why[i].what);
	}
	for (size_t i = 0; i < p->n && i < 4; i++) {
		text_str(t, first ? "" : "; ");
		first = false;
		if (p->f[i].any == IXB_BTREE_CO && unique_on(set, p->f[i].field))
			text_printf(t,
			            "%s: $ne or $nin of a few values of a unique key, which reads "
			            "every other key",
			            p->f[i].field);
		else
			text_printf(t, "%s: no usable index leads with it", p->f[i].field);
	}
	if (p->or_unbounded) {
		text_str(t, first ? "" : "; ");
		first = false;
		text_str(t, "$or: a branch no index bounds");
	}
	if (first)
		text_str(t, "no predicate an index can use");
}

static const char *const REWRITE =
    "no index can bound $nor, $mod, $size, $where, most $expr, $exists: true (but a sparse "
    "index) or a negated regex: add an equality, $in, "
    "range or ^-anchored case-sensitive regex on an indexed field (or index a field you can "
    "match exactly)";

/* Whether an index of set already leads with field as a plain btree the
 * query can use (visible, not partial, sparse, hashed, wildcard or of
 * another collation): the filter was judged unbounded with it there, so
 * an index led by the same field would not bound it either, and an ESR
 * suggestion of one ({_id: 1} for {_id: {$exists: true}}) helps nothing. */
static bool plain_lead(const index_set *set, const char *field, const bson_t *collation)
{
	const index_def *id = index_set_id_index(set);
	const bson_t *qc = collation ? collation : id ? id->collation : NULL;
	for (size_t i = 0; i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		if (d->nkeys > 0 && !d->hidden && !d->partial && !d->sparse && !d->plugin &&
		    !d->wildcard && !d->odd && d->keys[0].type == INDEX_KEY_BTREE &&
		    strcmp(d->keys[0].field, field) == 0 && index_collation_same(d->collation, qc))
			return true;
	}
	return false;
}

static void esr(text_buf *t, const rule_site *s, const scan_facts *f, bool *ok)
{
	query_preds qp;
	sort_spec sort;
	char buf[1024];
	const sort_query *q = &f->q->q;
	query_preds_init(&qp);
	query_preds_collect(&qp, q->filter);
	sort_bounds_expr(&qp, q->filter); /* $expr equalities: points, as mongod rewrites them */
	if (query_sort_parse(q->sort, &sort) != SORT_SPEC_KEYS)
		sort.n = 0;
	/* Only worth suggesting when some field can give bounds. */
	*ok = false;
	if (f->p->n == 0 && sort.n == 0)
		return;
	if (qp.overflow ||
	    !esr_suggest_parsed(s->db, s->coll, &qp, &sort, q->collation, buf, sizeof buf))
		return;
	esr_key k;
	esr_key_build(&qp, &sort, &k);
	if (k.n > 0 && f->set && plain_lead(f->set, k.field[0], q->collation))
		return; /* the index it would suggest is there already */
	text_str(t, buf);
	*ok = true;
}

/* A $lookup's detail, suggestion and fix: an index on the joined
 * collection's foreignField, which the other causes' words never name. */
static void lookup_words(text_buf *t, const rule_site *s, const scan_facts *f, rule_words *w)
{
	size_t start = text_mark(t);
	text_printf(t,
	            "%s from %s.%s on %s \"%s\": no index on %s leads with it, so each %s "
	            "scans the collection (about %" PRId64 " documents; indexes: ",
	            f->graph ? "$graphLookup" : "$lookup", s->db, f->from,
	            f->graph ? "connectToField" : "foreignField", f->foreign, f->from,
	            f->graph ? "step of the traversal" : "joined document", f->docs);
	index_names(t, f->set);
	text_str(t, ")");
	w->detail = rule_words_piece(t, start);
	start = text_mark(t);
	text_str(t, "db.getSiblingDB(");
	text_json(t, s->db);
	text_str(t, ").getCollection(");
	text_json(t, f->from);
	text_str(t, ").createIndex({");
	text_json(t, f->foreign);
	text_str(t, ": 1})");
	w->suggestion = rule_words_piece(t, start);
	start = text_mark(t);
	text_printf(t, "create the index %s", w->suggestion);
	w->fix = rule_words_piece(t, start);
}

/* An aggregation read whole: no leading $match filters it, and its stages
 * neither count (countDocuments' words are a find's) nor stop early. */
static bool whole_aggregation(const rule_query *q)
{
	return q->kind == RULE_QUERY_AGGREGATE && q->reads_all && !q->counts;
}

/* An empty filter's read: a limit L reads L documents of the scan, at
 * least minDocuments; a hinted index providing the sort, every key of it. */
static void empty_detail(text_buf *t, const rule_site *s, const scan_facts *f)
{
	if (whole_aggregation(f->q)) {
		if (f->q->via)
			text_printf(t, "the %s pipeline on ", f->q->via);
		else
			text_str(t, "an aggregation on ");
		text_printf(t, "%s with no leading $match that filters reads ", s->ns);
		if (f->in_order && f->q->limit > 0 && f->q->limit < f->docs)
			text_printf(t, "%" PRId64 " documents (of about %" PRId64 ")", f->q->limit,
			            f->docs);
		else
			text_printf(t, "every document (about %" PRId64 ")", f->docs);
		text_str(t, !rule_scan_sorts(f->q) ? ""
		            : f->in_order          ? " in the order of the hinted index"
		                                   : " to sort them");
		return;
	}
	text_printf(t, "an empty filter on %s with ", s->ns);
	if (f->q->limit > 0 && f->q->skip > 0)
		text_printf(t, "a skip of %" PRId64 " and a limit of %" PRId64, f->q->skip,
		            f->q->limit - f->q->skip);
	else if (f->q->limit > 0)
		text_printf(t, "a limit of %" PRId64, f->q->limit);
	else
		text_str(t, "no limit");
	if (f->in_order && f->q->limit > 0 && f->q->limit < f->docs) { /* a limit's worth */
		text_printf(t,
		            " reads the first %" PRId64 " keys of the hinted index %s in its order "
		            "(of about %" PRId64 " documents)",
		            f->q->limit, f->hinted ? f->hinted : "", f->docs);
		return;
	}
	if (f->in_order) { /* the hinted index, whole, in its order */
		text_printf(t,
		            " reads every key of the hinted index %s in its order (about %" PRId64
		            " documents)",
		            f->hinted ? f->hinted : "", f->docs);
		return;
	}
	text_str(t, " and no sort an index provides reads ");
	if (rule_scan_sorts(f->q)) /* a sort no index provides: every document, sorted */
		text_printf(t, "every document (about %" PRId64 ") to sort them", f->docs);
	else if (f->q->limit == 1 && f->docs > 1)
		text_printf(t,
		            "the first document in the collection's order (of about %" PRId64 ")",
		            f->docs);
	else if (f->q->limit > 0 && f->q->limit < f->docs)
		text_printf(
		    t, "%" PRId64 " documents in the collection's order (of about %" PRId64 ")",
		    f->q->limit, f->docs);
	else
		text_printf(t, "every document (about %" PRId64 ")", f->docs);
}

/* What scans, for the causes of a query's own filter: one switch, so each
 * cause's sentence reads whole. */
static void query_detail(text_buf *t, const rule_site *s, const scan_facts *f)
{
	switch (f->cause) {
	case CAUSE_LOOKUP: /* lookup_words */
		break;
	case CAUSE_NATURAL:
		text_printf(
		    t, "%s {$natural} forces a collection scan of %s (about %" PRId64 " documents)",
		    f->by_sort ? "sort" : "hint", s->ns, f->docs);
		break;
	case CAUSE_EMPTY:
		empty_detail(t, s, f);
		break;
	case CAUSE_HINTED:
		text_printf(t, "the hinted index %s gets no bounds from the filter on %s (",
		            f->hinted, s->ns);
		reasons(t, f->p, f->set);
		text_printf(t, "), so mongod reads every key of it (about %" PRId64 " documents)",
		            f->docs);
		break;
	case CAUSE_COUNTED: /* hinted: a $natural hint is CAUSE_NATURAL */
		text_printf(t,
		            "a count of every document of %s with a hint reads every key of the "
		            "hinted index %s (about %" PRId64 " documents), where without the hint "
		            "it reads the collection's metadata",
		            s->ns, f->hinted ? f->hinted : "", f->docs);
		break;
	case CAUSE_FILTER:
		text_printf(t, "no index on %s bounds the filter (", s->ns);
		reasons(t, f->p, f->set);
		if (f->q->limit > 0 && f->q->limit < f->docs &&
		    (!rule_scan_sorts(f->q) || f->order_index))
			/* a limit with no sort to gather first, or a sort an index's
			 * order provides: the scan stops at the limit's matches */
			text_printf(t,
			            "), so mongod reads documents%s%s until %" PRId64
			            " match%s (every one, about %" PRId64
			            ", when fewer do; indexes: ",
			            f->order_index ? " in the order of index " : "",
			            f->order_index ? f->order_index : "", f->q->limit,
			            f->q->limit == 1 ? "es" : "", f->docs);
		else
			text_printf(
			    t, "), so mongod reads every document (about %" PRId64 "; indexes: ",
			    f->docs);
		index_names(t, f->set);
		text_str(t, ")");
		break;
	}
}

/* The way out: drop a $natural hint, narrow an empty filter, or create
 * the ESR index when one would bound the filter; else the rewrite advice. */
static void query_fix(text_buf *t, const rule_site *s, const scan_facts *f, uint32_t min,
                      rule_words *w)
{
	size_t start = text_mark(t);
	bool ok = false;
	if (f->cause == CAUSE_NATURAL || f->cause == CAUSE_COUNTED) {
		if (f->cause == CAUSE_COUNTED)
			text_str(t, "remove the hint: a count of everything reads the metadata");
		else
			text_printf(t, "remove the %s {$natural: 1}: it forbids every index",
			            f->by_sort ? "sort" : "hint");
		w->suggestion = w->fix = rule_words_piece(t, start);
		return;
	}
	if (f->cause == CAUSE_EMPTY && whole_aggregation(f->q)) {
		text_str(t,
		         "add a leading $match on an indexed field, or, where it runs often, keep "
		         "its result up to date as the documents change (the computed pattern)");
		w->suggestion = w->fix = rule_words_piece(t, start);
		return;
	}
	if (f->cause == CAUSE_EMPTY) {
		if (min > 0)
			text_printf(t,
			            "add a filter on an indexed field, or a limit below %" PRIu32
			            " (with a sort, one an index provides)",
			            min);
		else /* minDocuments 0: every read is reported, however limited */
			text_str(t, "add a filter on an indexed field");
		w->suggestion = w->fix = rule_words_piece(t, start);
		return;
	}
	esr(t, s, f, &ok);
	if (!ok) {
		text_str(t, REWRITE);
		w->suggestion = w->fix = rule_words_piece(t, start);
		return;
	}
	w->suggestion = rule_words_piece(t, start);
	start = text_mark(t);
	text_printf(t, "create the index %s", w->suggestion);
	w->fix = rule_words_piece(t, start);
}

void rule_scan_words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w)
{
	const scan_facts *f = facts;
	text_buf t;
	text_init(&t, w->buf, sizeof(w->buf));
	if (f->cause == CAUSE_LOOKUP) {
		lookup_words(&t, s, f, w);
		return;
	}
	size_t start = text_mark(&t);
	query_detail(&t, s, f);
	w->detail = rule_words_piece(&t, start);
	query_fix(&t, s, f, f->min, w);
}
