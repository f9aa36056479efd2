/* Each command's analyser (the `analyze` of its row in commands.c): it
 * finds the parts of a request (filters, updates, sorts, pipelines, plan
 * questions, inserted documents), in the body or in a kind-1 sequence, and
 * runs the rules' checks on them through run_checks (engine_int.h).
 *
 * Order matters for re-entry. index-mismatched-sort may need an index list
 * the cache does not have yet; then the analyser answers
 * VERDICT_WAIT_INDEXES and the proxy calls again later. So sort checks run
 * first, and nothing is reported before the engine knows it will not wait.
 * An analyser reads only the view and the engine, so a later call on a
 * saved copy of the request gives the same parts.
 *
 * A statement (update's, delete's, a bulkWrite op's) is read and checked
 * in analyze_stmt alone, unless stmt_scan.h passes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/engine/body.h"
#include "analyzers/engine/bulk_nsinfo.h"
#include "analyzers/engine/engine_int.h"
#include "analyzers/engine/keys.h"
#include "analyzers/engine/leading.h"
#include "analyzers/engine/stmt_scan.h"
#include "analyzers/planner/stages.h"
#include "analyzers/planner/sort_bounds.h"
#include "protocol/byte_template.h"
#include "protocol/wire_iter.h"

/* Where a finding is: its namespace, each rule's action there, and which
 * parts some rule that is not off there reads. */
typedef struct target {
	const char *db;
	const char *coll; /* NULL for a collection-less aggregate */
	char ns[256];
	rule_action act[RULE_COUNT];
	uint8_t sample[RULE_COUNT];
	unsigned parts;      /* PART_* */
	unsigned late_kinds; /* a late call: the check kinds owed here */
	/* What a statement here must show (its facts) for some filter, update
	 * or query check to be called (stmt_gate): any check always called, the
	 * STMT_ bits some check is called for, the smallest update a floored
	 * update check is called for. */
	bool gated; /* stmt_gate ran: statements only */
	bool gate_always;
	unsigned gate_when;
	uint32_t gate_floor;
} target;

static bool late_only(rule_ctx *ax, target *t);

static bool target_init(rule_ctx *ax, target *t, const char *db, const char *coll)
{
	t->db = db;
	t->coll = coll;
	t->late_kinds = 0;
	t->gated = false;
	ns_join(t->ns, sizeof(t->ns), db, coll ? coll : "$cmd.aggregate");
	const engine *e = ax->e;
	if (!e->scoped) {
		memcpy(t->act, ax->explain ? e->act_explain : e->act, sizeof(t->act));
		memcpy(t->sample, e->sample, sizeof(t->sample));
		t->parts = ax->explain ? e->parts_explain : e->parts_all;
		return ax->late_call ? late_only(ax, t) : t->parts != 0;
	}
	const char *app = ax->rc && ax->rc->app_name ? ax->rc->app_name : "";
	t->parts = 0;
	for (int r = 0; r < RULE_COUNT; r++) {
		rule_action a = rule_effective(&ax->e->cfg.rules[r], t->ns, app, &t->sample[r]);
		if (ax->explain && a > RULE_LOG)
			a = RULE_LOG; /* explain runs nothing: log, never block */
		t->act[r] = a;
		if (a != RULE_OFF)
			t->parts |= ax->e->parts[r];
	}
	return ax->late_call ? late_only(ax, t) : t->parts != 0;
}

/* A late call: only the rules owed at this namespace run, and none can
 * block any more (the request went on): what would have blocked says so
 * as a dry run does. */
static bool late_only(rule_ctx *ax, target *t)
{
	const engine_late *late = ax->rc->late;
	uint64_t h = engine_ns_hash(t->ns);
	uint32_t owed = 0;
	t->late_kinds = 0;
	for (unsigned i = 0; i < late->n; i++)
		if (late->at[i].ns_hash == h) {
			owed |= late->at[i].rules;
			t->late_kinds |= late->at[i].kinds;
		}
	t->parts = 0;
	for (int r = 0; r < RULE_COUNT; r++) {
		if (!(owed >> r & 1))
			t->act[r] = RULE_OFF;
		else if (t->act[r] == RULE_BLOCK)
			t->act[r] = RULE_DRY_RUN;
		if (t->act[r] != RULE_OFF)
			t->parts |= ax->e->parts[r];
	}
	return t->parts != 0;
}

/* The rules in `rules` are turned off at t for this call and owed at its
 * namespace, all their checks (engine_late): they are judged late, when
 * the index list they need arrives, instead of now without it. */
static void skip_and_owe(rule_ctx *ax, target *t, uint32_t rules)
{
	for (int r = 0; r < RULE_COUNT; r++)
		if (rules >> r & 1)
			t->act[r] = RULE_OFF; /* their checks would find nothing to read */
	(void)engine_owe(ax, t->ns, rules, OWE_EVERY_CHECK);
}

/* The facts the index-aware rules read (the namespace's index list and
 * document count), looked up before any check runs on t for the parts
 * the request has (present: PART_SORT, PART_QUERY), so the request either
 * waits for them whole or is judged without those rules and owes them
 * (engine.h). Waiting is for when one of them could block or dry-run the
 * request and nothing has been reported yet (a request that waits is
 * analysed again from the start). False when the request waits. */
static bool facts_ready(rule_ctx *ax, target *t, unsigned present)
{
	const engine *e = ax->e;
	uint32_t need = 0;
	bool decisive = false;
	if (!e->facts_may_hold || !e->ic || !t->coll)
		return true; /* at log the checks owe what they miss (rule_ctx_indexes) */
	for (int r = 0; r < RULE_COUNT; r++)
		if (t->act[r] != RULE_OFF && (e->needs_facts[r] & present)) {
			need |= 1u << r;
			decisive |= t->act[r] >= RULE_DRY_RUN;
		}
	/* At log the checks owe what they find missing themselves
	 * (rule_ctx_indexes), and a request that needs no index list (an _id
	 * lookup) costs no lookup. */
	const index_set *set;
	if (!decisive || engine_lookup(ax, t->db, t->coll, &set) != INDEXES_PENDING ||
	    (ax->rc && ax->rc->no_wait))
		return true;
	if (!ax->late_call && ax->nreported == 0 && ax->verdict == VERDICT_FORWARD)
		return false;
	skip_and_owe(ax, t, need);
	return true;
}

/* t's gate (target above), from the checks not off there: once per
 * command (per op in a bulkWrite), so that a statement whose facts no
 * check is called for costs no more than its read. */
static void stmt_gate(const rule_ctx *ax, target *t)
{
	static const check_kind kinds[] = {CHECK_FILTER, CHECK_UPDATE, CHECK_QUERY};
	const engine *e = ax->e;
	t->gated = true;
	t->gate_always = ax->late_call; /* a late call runs only what is owed */
	t->gate_when = 0;
	t->gate_floor = UINT32_MAX;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		for (size_t i = 0; i < e->nchecks[kinds[k]]; i++) {
			rule_id r = e->checks[kinds[k]][i];
			unsigned when = e->when[kinds[k]][i];
			if (t->act[r] == RULE_OFF)
				continue;
			if (when)
				t->gate_when |= when;
			else if (kinds[k] == CHECK_UPDATE && e->floor[r] > 0)
				t->gate_floor =
				    e->floor[r] < t->gate_floor ? e->floor[r] : t->gate_floor;
			else
				t->gate_always = true;
		}
}

/* Whether no filter, update or query check would be called on a statement
 * with facts f at t (check_skipped, for every check at once). */
static bool stmt_unchecked(const target *t, const stmt_facts *f)
{
	return !t->gate_always && !(f->have & t->gate_when) &&
	       (!f->has_update || f->update.len < t->gate_floor);
}

static rule_site site_of(const target *t, const shape_spec *spec)
{
	rule_site s = {t->db, t->coll, t->ns,         t->act, t->sample, spec,
	               NULL,  NULL,    t->late_kinds, NULL,   NULL,      NULL};
	return s;
}

static bool nonempty_doc(const bson_t *d)
{
	return d && !bson_empty(d);
}

/* The sort checks, first: they alone may have to wait for an index list,
 * and nothing may be reported before the engine knows it will not wait.
 * They are given only a non-empty sort, and only with an index cache.
 * False when the request waits. */
static __attribute__((warn_unused_result)) bool run_sort(rule_ctx *ax, const rule_site *s,
                                                         const sort_query *q)
{
	if (!ax->e->ic || !nonempty_doc(q->sort))
		return true;
	return run_checks(ax, s, CHECK_SORT, q);
}

/* The collection-scan question of a filter: the filter as a document (a
 * static view, made only when a rule asks), and what bounds the work. */
static void run_body_query(rule_ctx *ax, const rule_site *s, cmd_body *b, rule_query_kind kind)
{
	rule_query rq;
	rq.kind = kind;
	rq.q = b->q;
	rq.q.filter = NULL;
	if (b->has_filter && wire_iter_doc_view(&b->filter, &b->filter_doc))
		rq.q.filter = &b->filter_doc;
	rq.distinct_key = b->key;
	rq.min_max = b->min_max;
	rq.stops_unknown = false; /* read for every kind (rule_scan.c); counts, reads_all,
	                             group and via only for an aggregate */
	rq.skip = 0;
	switch (kind) {
	case RULE_QUERY_UPDATE:
		rq.limit = b->multi ? 0 : 1;
		break;
	case RULE_QUERY_FIND_AND_MODIFY:
		rq.limit = 1;
		break;
	default: /* find reads skip + limit documents (a limit of 0: all) */
		rq.limit = b->limit > 0 && b->skip > 0
		               ? (b->limit > INT64_MAX - b->skip ? INT64_MAX : b->limit + b->skip)
		               : b->limit;
		rq.skip = b->limit > 0 ? b->skip : 0;
		break;
	}
	run_checks(ax, s, CHECK_QUERY, &rq);
}

/* The facts of a filter and an update (facts.h), read once for every
 * check, each only when some rule not off here reads it; from the walk's
 * cursors, so a statement no check is called on has no iterator made. */
static inline __attribute__((always_inline)) void read_facts(rule_ctx *ax, stmt_facts *f,
                                                             const cmd_body *b, const target *t,
                                                             byte_spans *spans,
                                                             arrays_target *learn)
{
	f->has_filter = b->has_filter && (t->parts & (PART_FILTER | PART_QUERY | PART_UPDATE));
	f->has_update = b->has_update && ((t->parts & PART_UPDATE) || learn);
	if (f->has_filter)
		facts_filter(&f->filter, &b->filter_at, spans);
	/* read for the multikey learning alone, the update is no template's
	 * span: a statement differing in it is read */
	if (f->has_update)
		facts_update(&f->update, &b->update_at, (t->parts & PART_UPDATE) ? spans : NULL);
	if (learn && f->has_update && engine_arrays_may_learn(&f->update) &&
	    !engine_arrays_passed_over(learn, &f->update))
		engine_arrays_from_update(ax, learn, t->db, t->coll, &b->update_at, &f->update);
	f->have = facts_have(f, b->q.hint_doc || b->q.hint_name, b->q.collation != NULL);
}

/* The checks of a filter, an update and a query, after the sort checks,
 * with their facts f. The update checks see the statement's filter
 * through the site. b's iterators are made (body_iters). */
static inline __attribute__((always_inline)) void run_facts_checks(rule_ctx *ax, rule_site *s,
                                                                   cmd_body *b, const target *t,
                                                                   rule_query_kind kind,
                                                                   stmt_facts *f)
{
	s->facts = f;
	const engine *e = ax->e;
	if (b->has_filter) {
		s->filter = &b->filter; /* the update checks read it too */
		if (checks_may_run(e, CHECK_FILTER, f->have))
			run_checks(ax, s, CHECK_FILTER, &b->filter);
	}
	if (b->has_update && checks_may_run(e, CHECK_UPDATE, f->have))
		run_checks(ax, s, CHECK_UPDATE, &b->update);
	if ((t->parts & PART_QUERY) && checks_may_run(e, CHECK_QUERY, f->have) &&
	    any_check(ax, s, CHECK_QUERY))
		run_body_query(ax, s, b, kind);
	s->facts = NULL; /* f is the caller's */
}

/* read_facts, then run_facts_checks unless t's gate (statements) says no
 * check would be called: true then. */
static bool check_filter_update(rule_ctx *ax, rule_site *s, cmd_body *b, const target *t,
                                rule_query_kind kind, byte_spans *spans, arrays_target *learn)
{
	stmt_facts f;
	read_facts(ax, &f, b, t, spans, learn);
	if (t->gated && stmt_unchecked(t, &f))
		return true; /* no check could find anything in it */
	run_facts_checks(ax, s, b, t, kind, &f);
	return false;
}

/* ---- find, findAndModify, count, distinct ---- */

/* A rule set to block in some scope (or as its action), that reads one of
 * the parts in `parts`. */
static bool blocks_somewhere(const engine *e, int r, unsigned parts)
{
	return (e->parts[r] & parts) && rule_can_block(&e->cfg.rules[r]);
}

/* {find: UUID(...)}: mongod runs find, count and distinct on the collection
 * with that UUID, so a query naming its collection that way would pass
 * every rule unjudged (no namespace for the scopes, no index list). It is
 * blocked when some rule that reads such a query blocks anywhere, and asked
 * to name its collection; drivers never send this form. Any other type of
 * collection name is refused by the server itself. No finding: nothing was
 * analysed, and the block counts in mongoguard_blocked_total. */
static verdict collection_by_uuid(rule_ctx *ax, const cmdview *v)
{
	bson_iter_t it;
	if (ax->explain || !bson_iter_init(&it, &v->body) || !wire_iter_next(&it) ||
	    !WIRE_ITER_HOLDS_BINARY(&it))
		return VERDICT_FORWARD;
	bson_subtype_t st;
	uint32_t len;
	const uint8_t *bin;
	bson_iter_binary(&it, &st, &len, &bin);
	if (st != BSON_SUBTYPE_UUID && st != BSON_SUBTYPE_UUID_DEPRECATED)
		return VERDICT_FORWARD;
	for (int r = 0; r < RULE_COUNT; r++) {
		if (!blocks_somewhere(ax->e, r, PART_FILTER | PART_SORT | PART_QUERY))
			continue;
		engine_block_uuid(ax, (rule_id)r);
		return VERDICT_BLOCK;
	}
	return VERDICT_FORWARD;
}

/* One collection, one filter, and for some a sort and an update: the body
 * keys of the command's row. The sort rule finds no sort in count or
 * distinct and says nothing. */
verdict analyze_query(rule_ctx *ax, const cmdview *v)
{
	target t;
	cmd_body b;
	const char *coll = cmdview_coll(v);
	if (!coll)
		return collection_by_uuid(ax, v);
	if (!target_init(ax, &t, ax->db, coll)) {
		ax->repeatable = true; /* every rule is off here */
		return VERDICT_FORWARD;
	}
	body_init(&b, ax->db, coll);
	if (!body_walk(&b, &v->body, ax->cmd->keys))
		return VERDICT_FORWARD;
	const sort_query *sq = body_sort_query(&b);
	if (!facts_ready(ax, &t,
	                 (nonempty_doc(sq->sort) ? PART_SORT : 0) | PART_QUERY |
	                     (nonempty_doc(sq->collation) ? PART_COLLATED : 0)))
		return VERDICT_WAIT_INDEXES;
	shape_spec spec = {command_name(ax->cmd), coll, ax->explain, b.parts, b.n};
	rule_site site = site_of(&t, &spec);
	site.parsed_filter = b.has_filter ? &b.filter : NULL;
	site.parsed_update = b.has_update ? &b.update : NULL;
	if (!run_sort(ax, &site, sq))
		return VERDICT_WAIT_INDEXES;
	(void)check_filter_update(ax, &site, &b, &t, ax->cmd->query, ax->spans, NULL);
	ax->repeatable = true; /* engine.h, engine_repeat: if no check was called */
	return ax->verdict;
}

/* ---- aggregate, and views ---- */
/* The last stage {$merge: {into, whenMatched: [...]}}: whenMatched is an
 * update pipeline ($set / $addFields, $project / $unset, $replaceRoot /
 * $replaceWith, reading the merged document as $$new) that mongod applies
 * to the matching document of `into` on every run, so it is given to the
 * update checks as an update of that collection, as an update's u: [...]
 * is. into is "coll" (the request's database) or {db, coll}; whenMatched
 * as a word ("merge", "replace", ...) updates nothing an update check
 * reads. */
static void merge_when_matched(rule_ctx *ax, const bson_iter_t *pipeline, const shape_spec *spec)
{
	bson_iter_t st, last, c, m, into, wm;
	bool any = false, has_wm = false;
	const char *db = ax->db, *coll = NULL;
	uint32_t len;
	const uint8_t *data;
	bson_iter_array(pipeline, &len, &data);
	/* most pipelines merge nothing: no walk to their last stage */
	if (!data || !key_maybe_in(data, len, "whenMatched") || !wire_iter_recurse(pipeline, &st))
		return;
	while (wire_iter_next(&st)) {
		last = st;
		any = true;
	}
	if (!any || !WIRE_ITER_HOLDS_DOCUMENT(&last) || !wire_iter_recurse(&last, &c) ||
	    !wire_iter_next(&c) || !key_eq(wire_iter_key(&c), "$merge") ||
	    !WIRE_ITER_HOLDS_DOCUMENT(&c) || !wire_iter_recurse(&c, &m))
		return;
	while (wire_iter_next(&m)) {
		const char *k = wire_iter_key(&m);
		if (key_eq(k, "into") && WIRE_ITER_HOLDS_UTF8(&m)) {
			coll = bson_iter_utf8(&m, NULL);
		} else if (key_eq(k, "into") && WIRE_ITER_HOLDS_DOCUMENT(&m) &&
		           wire_iter_recurse(&m, &into)) {
			while (wire_iter_next(&into))
				if (WIRE_ITER_HOLDS_UTF8(&into) &&
				    key_eq(wire_iter_key(&into), "db"))
					db = bson_iter_utf8(&into, NULL);
				else if (WIRE_ITER_HOLDS_UTF8(&into) &&
				         key_eq(wire_iter_key(&into), "coll"))
					coll = bson_iter_utf8(&into, NULL);
		} else if (key_eq(k, "whenMatched") && WIRE_ITER_HOLDS_ARRAY(&m)) {
			wm = m;
			has_wm = true;
		}
	}
	target t;
	if (!has_wm || !coll || !coll[0] || !db[0] || !target_init(ax, &t, db, coll) ||
	    !(t.parts & PART_UPDATE))
		return;
	rule_site site = site_of(&t, spec);
	site.parsed_pipeline = pipeline; /* whenMatched is read with it */
	run_checks(ax, &site, CHECK_UPDATE, &wm);
}

/* The sub-pipelines of an aggregation, as pipeline_walk (stages.h) finds
 * them, each judged where it runs: a $unionWith's and a $lookup's leading
 * $match and $sort reach the planner at their collection, as a top-level
 * aggregate's do; a $facet branch's sorts are in memory whatever the
 * indexes. */
typedef struct sub_walk {
	rule_ctx *ax;
	const rule_site *top; /* the aggregate's: its shape, and the request's collection */
	cmd_body *b;
	const bson_t *leading;   /* the aggregate's leading filter (leading.h), or NULL */
	const bson_t *collation; /* the sub-pipelines' (sub_collation), or NULL */
} sub_walk;

/* {locale: "simple"}: a collation named, so the rules take no default */
static const uint8_t SIMPLE_COLLATION[] = {24, 0, 0, 0, 2,   'l', 'o', 'c', 'a', 'l', 'e', 0,
                                           7,  0, 0, 0, 's', 'i', 'm', 'p', 'l', 'e', 0,   0};

/* The collation the sub-pipelines run with: the aggregate's, else the
 * default of the collection it runs on, which mongod gives its $lookup and
 * $unionWith pipelines whatever `from`'s default is (jstests
 * collation_lookup, union_with; held-out set 6, uc08). Copied into own (the
 * set goes when the walk looks up `from`; *owned says to destroy it).
 * NULL when that collection's list is not known: the rules then take
 * `from`'s default, as they did for every sub-pipeline until stop 42. */
static const bson_t *sub_collation(rule_ctx *ax, const cmd_body *b, const char *coll, bson_t *own,
                                   bool *owned)
{
	const index_set *set;
	*owned = false;
	if (b->q.collation)
		return b->q.collation;
	if (engine_lookup(ax, ax->db, coll, &set) != INDEXES_KNOWN)
		return NULL;
	const bson_t *def = index_set_default_collation(set);
	if (def == NULL)
		return bson_init_static(own, SIMPLE_COLLATION, sizeof SIMPLE_COLLATION) ? own
		                                                                        : NULL;
	bson_copy_to(def, own);
	*owned = true;
	return own;
}

/* {$unionWith: {coll, pipeline}} and {$lookup: {from, pipeline, ...}}:
 * the sub-pipeline runs against coll (for a $lookup, once per outer
 * document, with the variables bound: sort_bounds_expr reads its $expr
 * equalities, sort_bounds_lookup adds foreignField's); judged at coll's
 * namespace (its scopes, its indexes). The concise $lookup without a
 * pipeline sorts nothing. */
static void sub_query(const sub_walk *w, const rule_site *site, const target *t,
                      const pipe_access *a)
{
	rule_ctx *ax = w->ax;
	leading l;
	leading_stages(a->it, &l);
	bson_t bounds, merged;
	bool lookup = a->join != NULL;
	bson_init(&merged); /* a $lookup's: its filter with the join's bound */
	if (lookup && l.filter)
		bson_concat(&merged, l.filter);
	if (lookup) {
		bson_init(&bounds);
		sort_bounds_lookup(&bounds, a->join->local ? a->join->foreign : NULL);
		bson_concat(&merged, &bounds);
		bson_destroy(&bounds);
	}
	sort_query q = {.db = ax->db,
	                .coll = a->coll,
	                .filter = lookup ? (bson_empty(&merged) ? NULL : &merged) : l.filter,
	                .sort = l.has_sort ? &l.sort : NULL,
	                .collation = w->collation,
	                .behind = l.behind};
	if (l.has_sort && (t->parts & PART_SORT) && !run_sort(ax, site, &q))
		ax->wait = true;
	q.sort = l.behind ? NULL : q.sort; /* the query's own sort: a leading one */
	q.behind = NULL;
	/* The query: a $unionWith's, and a $lookup's pipeline-only form (with
	 * let, its $expr comparisons with variables are bounds once bound:
	 * run per outer document, an unbounded one scans `from` each time).
	 * With localField/foreignField the join's own question is
	 * collection-scan's (PIPE_JOIN), on foreignField. */
	if ((!lookup || !a->join->local) && (l.filter || l.reads_all) && (t->parts & PART_QUERY)) {
		rule_query rq = {.kind = RULE_QUERY_AGGREGATE,
		                 .q = q,
		                 .limit = l.count_limit,
		                 .counts = l.counts,
		                 .reads_all = l.reads_all,
		                 .stops_unknown = l.stops_unknown,
		                 .group = l.group,
		                 .via = a->stage};
		rq.q.filter = l.filter;
		run_checks(ax, site, CHECK_QUERY, &rq);
	}
	bson_destroy(&merged);
	leading_done(&l);
}

/* Whether the stages [0, end) of pipeline are all $match and $sort: what
 * the stage at end reads is then what the leading filter selects. */
static bool only_leading(const bson_iter_t *pipeline, unsigned end)
{
	bson_iter_t st, c;
	if (!pipeline || !wire_iter_recurse(pipeline, &st))
		return false;
	for (unsigned i = 0; i < end; i++)
		if (!wire_iter_next(&st) || !WIRE_ITER_HOLDS_DOCUMENT(&st) ||
		    !wire_iter_recurse(&st, &c) || !wire_iter_next(&c) ||
		    !(key_eq(wire_iter_key(&c), "$match") || key_eq(wire_iter_key(&c), "$sort")))
			return false;
	return true;
}

/* Every $sort of a $facet branch: sorted in memory whatever the indexes
 * (sort_query.in_facet). input: the filter that selects the branch's
 * documents when the $facet follows only the leading $match and $sort
 * stages (NULL: not known), for a sort of the few documents _id points
 * select. */
static void facet_sorts(rule_ctx *ax, const rule_site *s, const bson_iter_t *branch,
                        const bson_t *input)
{
	bson_iter_t stage, c;
	bson_t sort;
	if (!wire_iter_recurse(branch, &stage))
		return;
	while (wire_iter_next(&stage))
		if (WIRE_ITER_HOLDS_DOCUMENT(&stage) && wire_iter_recurse(&stage, &c) &&
		    wire_iter_next(&c) && key_eq(wire_iter_key(&c), "$sort") &&
		    wire_iter_doc_view(&c, &sort)) {
			sort_query q = {.db = s->db,
			                .coll = s->coll,
			                .filter = input,
			                .sort = &sort,
			                .in_facet = true};
			if (!run_sort(ax, s, &q))
				ax->wait = true;
		}
}

static bool on_sub(void *arg, const pipe_access *a)
{
	const sub_walk *w = arg;
	target t;
	if (a->kind != PIPE_SUB)
		return true;
	if (!a->coll) { /* a $facet branch of the request's own collection */
		if (a->facet)
			facet_sorts(w->ax, w->top, a->it,
			            a->depth == 1 && only_leading(a->pipeline, a->index)
			                ? w->leading
			                : NULL);
		return true;
	}
	if (!a->coll[0] || !target_init(w->ax, &t, w->ax->db, a->coll))
		return true;
	rule_site site = site_of(&t, w->top->shape); /* the shape of the whole aggregate */
	site.parsed_pipeline = w->top->parsed_pipeline;
	if (a->facet)
		facet_sorts(w->ax, &site, a->it, NULL);
	else
		sub_query(w, &site, &t, a);
	return true;
}

/* An aggregation: the leading $match and $sort as a query (sort checks
 * first, as everywhere), then the whole pipeline for the pipeline checks.
 * {aggregate, explain: true} is judged as an explain. */
verdict analyze_aggregate(rule_ctx *ax, const cmdview *v)
{
	target t;
	cmd_body b;
	const char *coll = cmdview_coll(v); /* NULL for {aggregate: 1} */
	body_init(&b, ax->db, coll);
	if (!body_walk(&b, &v->body, ax->cmd->keys))
		return VERDICT_FORWARD;
	if (b.explain)
		ax->explain = true; /* {aggregate, explain: true} runs nothing */
	/* A late call may owe verdicts at a $unionWith's namespace only. */
	if (!b.has_pipeline || (!target_init(ax, &t, ax->db, coll) && !ax->late_call))
		return VERDICT_FORWARD;
	shape_spec spec = {command_name(ax->cmd), coll, ax->explain, b.parts, b.n};
	rule_site site = site_of(&t, &spec);
	site.parsed_pipeline = &b.pipeline;

	bool ready = true;
	leading l = {.owned = false, .filter = NULL, .has_sort = false};
	if (coll && (t.parts & (PART_SORT | PART_QUERY)) && ax->e->ic) {
		leading_stages(&b.pipeline, &l);
		if (!facts_ready(
		        ax, &t,
		        (l.has_sort && !l.behind ? PART_SORT : 0) |
		            (l.filter || l.reads_all ? PART_QUERY : 0) |
		            (l.filter && nonempty_doc(b.q.collation) ? PART_COLLATED : 0))) {
			leading_done(&l);
			return VERDICT_WAIT_INDEXES;
		}
		if (l.has_sort && (t.parts & PART_SORT)) {
			b.q.filter = l.filter;
			b.q.sort = &l.sort;
			b.q.behind = l.behind;
			ready = run_sort(ax, &site, &b.q);
			b.q.behind = NULL;
		}
	}
	if (ready && coll && ax->e->ic && (ax->late_call || (t.parts & (PART_SORT | PART_QUERY))) &&
	    pipeline_maybe_nested(&b.pipeline)) {
		bson_t own;
		bool owned;
		sub_walk w = {ax, &site, &b, l.filter, sub_collation(ax, &b, coll, &own, &owned)};
		pipeline_walk(&b.pipeline, on_sub, &w);
		if (owned)
			bson_destroy(&own);
	}
	if (ready) {
		/* The pipeline's checks first: a self-join ($graphLookup of the
		 * collection itself) whose every step scans it and a whole read
		 * of the same request are one finding (rule, namespace, shape),
		 * which shows the words of the first, and the join's index is
		 * the fix that matters there. */
		run_checks(ax, &site, CHECK_PIPELINE, &b.pipeline);
		if ((l.filter || l.reads_all) && (t.parts & PART_QUERY)) {
			rule_query rq = {.kind = ax->cmd->query,
			                 .q = b.q,
			                 .limit = l.count_limit,
			                 .counts = l.counts,
			                 .reads_all = l.reads_all,
			                 .stops_unknown = l.stops_unknown,
			                 .group = l.group};
			rq.q.filter = l.filter;
			rq.q.sort = l.has_sort && !l.behind ? &l.sort : NULL;
			run_checks(ax, &site, CHECK_QUERY, &rq);
		}
		merge_when_matched(ax, &b.pipeline, &spec);
	}
	leading_done(&l);
	return ready ? ax->verdict : VERDICT_WAIT_INDEXES;
}

/* create / collMod of a view: {create: "v", viewOn: "c", pipeline: [...]}.
 * The pipeline runs on every read of the view, so a pattern a rule blocks
 * in an aggregation is blocked where the view is defined; a view hid it
 * from every later find. Only the pipeline checks run: there is no query
 * to plan yet. A create without a pipeline (a collection) costs a lookup. */
verdict analyze_view(rule_ctx *ax, const cmdview *v)
{
	target t;
	cmd_body b;
	const char *coll = cmdview_coll(v);
	bson_iter_t it;
	if (!coll || !bson_iter_init_find(&it, &v->body, "pipeline"))
		return VERDICT_FORWARD;
	body_init(&b, ax->db, coll);
	if (!body_walk(&b, &v->body, ax->cmd->keys) || !b.has_pipeline ||
	    !target_init(ax, &t, ax->db, coll) || !(t.parts & ax->cmd->parts))
		return VERDICT_FORWARD;
	shape_spec spec = {command_name(ax->cmd), coll, ax->explain, b.parts, b.n};
	rule_site site = site_of(&t, &spec);
	site.parsed_pipeline = &b.pipeline;
	run_checks(ax, &site, CHECK_PIPELINE, &b.pipeline);
	return ax->verdict;
}

/* ---- statements: update, delete, bulkWrite's ops ---- */

/* The site of a statement some check is called on: its shape (spec, which
 * must live as long as the site) and the iterators the checks read. */
static inline __attribute__((always_inline)) void stmt_site(rule_site *site, shape_spec *spec,
                                                            const target *t, cmd_body *b,
                                                            const char *command,
                                                            const char *shape_target, bool explain)
{
	*spec = (shape_spec){command, shape_target, explain, b->parts, b->n};
	body_iters(b);
	*site = site_of(t, spec);
	site->parsed_filter = b->has_filter ? &b->filter : NULL;
	site->parsed_update = b->has_update ? &b->update : NULL;
}

/* What the scan of a statement at t needs (stmt_scan.h): the statement's
 * keys, and what read_facts and stmt_gate would read and ask there. */
static const stmt_scan_in *scan_in(stmt_scan_in *in, const target *t, unsigned keys,
                                   const arrays_target *learn)
{
	*in = (stmt_scan_in){keys,
	                     t->parts & (PART_FILTER | PART_QUERY | PART_UPDATE),
	                     (t->parts & PART_UPDATE) || learn,
	                     t->parts & PART_UPDATE,
	                     t->gate_always,
	                     t->gate_when,
	                     t->gate_floor,
	                     learn};
	return in;
}

/* The scan of a statement (stmt_scan.h): true when it shows that no check
 * would be called on the statement and nothing learnt from it, which is
 * then judged (its upsert noted, the template made of it when sp). */
static inline __attribute__((always_inline)) bool stmt_scanned(rule_ctx *ax, const stmt_scan_in *in,
                                                               const wire_cur *doc,
                                                               byte_template *tp, byte_spans *sp)
{
	bool upsert;
	if (!stmt_scan_run(in, doc, sp, &upsert)) {
		if (sp) { /* for the full read, as if never scanned */
			sp->n = 0;
			sp->full = false;
		}
		return false;
	}
	if (upsert && ax->block)
		ax->block->upsert = true;
	if (sp)
		(void)byte_template_set(tp, doc->raw, doc->len, sp);
	return true;
}

/* One statement, in the shape of `command` on `shape_target`. op:
 * bulkWrite's "update" / "delete", shown first in the shape, or NULL.
 * Every statement is read in full here, once, unless its scan passes it.
 * tp (NULL: none): the batch's template, matched first, dropped when a
 * check is called for this statement, and made of it (when make) when
 * none is. in (NULL: read it in full): the statement is scanned first,
 * and read in full only when a check is called on it: most statements
 * of a batch show nothing any check is called for (stmt_gate), and the
 * site, the shape, the rules' iterators and the facts' members are made
 * only for the others. True when no check was called on it. */
static inline __attribute__((always_inline)) bool
analyze_stmt(rule_ctx *ax, const target *t, const wire_cur *doc, unsigned keys,
             const stmt_scan_in *in, rule_query_kind kind, const char *command,
             const char *shape_target, const char *op, byte_template *tp, bool make,
             arrays_target *learn)
{
	byte_spans spans; /* its 16 spans are written as they are added: not zeroed */
	byte_spans *sp = NULL;
	if (tp && make) {
		spans.base = doc->raw;
		spans.n = 0;
		spans.full = false;
		sp = &spans;
	}
	if (in && t->gated && !t->gate_always && stmt_scanned(ax, in, doc, tp, sp))
		return true;
	cmd_body b; /* read in full, from the start, as if never scanned */
	body_init(&b, NULL, NULL);
	if (op) {
		b.parts[0].key = "op";
		b.parts[0].str = op;
		b.parts[0].mode = SHAPE_VERBATIM;
		b.n = 1;
	}
	if (!body_walk_cur(&b, doc, keys))
		return true;
	if (b.upsert && ax->block)
		ax->block->upsert = true;
	if (kind == RULE_QUERY_DELETE && op) /* a bulkWrite delete: multi, not limit */
		b.limit = b.multi ? 0 : 1;
	b.q.db = t->db;
	b.q.coll = t->coll;
	shape_spec spec;
	rule_site site;
	if (nonempty_doc(b.q.sort) && (t->parts & PART_SORT)) {
		/* updateOne's sort (8.0) orders the documents q selects to pick
		 * one, as findAndModify's does: a sort question of its own, and
		 * a statement the template cannot stand for. */
		stmt_site(&site, &spec, t, &b, command, shape_target, ax->explain);
		if (!run_sort(ax, &site, body_sort_query(&b)))
			return false;
		if (tp)
			tp->valid = false;
		return check_filter_update(ax, &site, &b, t, kind, NULL, learn);
	}
	stmt_facts f;
	read_facts(ax, &f, &b, t, sp, learn);
	bool unchecked = t->gated && stmt_unchecked(t, &f);
	if (!unchecked) {
		stmt_site(&site, &spec, t, &b, command, shape_target, ax->explain);
		run_facts_checks(ax, &site, &b, t, kind, &f);
	}
	if (!tp)
		return unchecked;
	if (!unchecked)
		tp->valid = false;
	else if (make)
		(void)byte_template_set(tp, doc->raw, doc->len, &spans);
	return unchecked;
}

#define TEMPLATE_BACKOFF_MAX 64

/* update and delete: each statement of the row's sequence. */
verdict analyze_statements(rule_ctx *ax, const cmdview *v)
{
	target t;
	const command_def *c = ax->cmd;
	const char *coll = cmdview_coll(v);
	if (!coll || !target_init(ax, &t, ax->db, coll))
		return VERDICT_FORWARD;
	if (!(t.parts & c->parts))
		return VERDICT_FORWARD; /* e.g. a delete has only filters */
	if (!facts_ready(ax, &t, PART_QUERY))
		return VERDICT_WAIT_INDEXES;
	stmt_gate(ax, &t);
	cmdview_docs d;
	wire_cur doc;
	byte_template tp;
	tp.valid = false;
	byte_template *tpp = ax->e->cfg.no_templates ? NULL : &tp;
	arrays_target learn = {.looked = false, .set = NULL};
	arrays_target *lp = ax->e->learn_arrays ? &learn : NULL;
	/* A template made of a statement and missed by the next one (a batch
	 * of mixed shapes, each read) makes the next few make none: skip of
	 * them, doubling to TEMPLATE_BACKOFF_MAX while the misses go on. It is
	 * kept meanwhile, and may match a later statement of its shape; only
	 * a match of the one just made (two alike in a row) ends the backoff,
	 * so a batch of one shape still matches from its second statement. */
	unsigned skip = 0, backoff = 0;
	bool fresh = false; /* tp was made of the statement read last */
	/* Scanned first when the statement read before had no check called on
	 * it; the first, or one after a checked one, is read in full at once. */
	bool scan = false, in_made = false;
	stmt_scan_in in;
	cmdview_docs_init(&d, v, command_stmts(c));
	while (cmdview_docs_next_cur(&d, &doc)) {
		if (tpp && byte_template_matches(tpp, doc.raw, doc.len)) {
			backoff = fresh ? 0 : backoff;
			fresh = false;
			continue;
		}
		if (fresh) {
			backoff = backoff == 0                     ? 1
			          : backoff < TEMPLATE_BACKOFF_MAX ? 2 * backoff
			                                           : TEMPLATE_BACKOFF_MAX;
			skip = backoff;
		}
		/* none of a sequence's last statement: nothing follows to match it */
		bool make = skip == 0 && !(d.in_seq && d.p >= d.end);
		if (skip)
			skip--;
		if (scan && !in_made) { /* made only for a batch that scans */
			(void)scan_in(&in, &t, c->stmt_keys, lp);
			in_made = true;
		}
		scan = analyze_stmt(ax, &t, &doc, c->stmt_keys, scan ? &in : NULL, c->query,
		                    command_name(c), coll, NULL, tpp, make, lp);
		fresh = make && tpp && tp.valid;
	}
	engine_arrays_target_done(&learn);
	return ax->verdict;
}

/* insert: each document, for the rules that read inserted documents. The
 * shape is the command and the collection only: a document is data, and
 * every large document of one collection is one finding, counted. */
verdict analyze_insert(rule_ctx *ax, const cmdview *v)
{
	target t;
	cmdview_docs d;
	bson_t doc;
	const char *coll = cmdview_coll(v);
	if (coll && ax->e->learn_arrays) {
		cmdview_docs_init(&d, v, command_stmts(ax->cmd));
		while (cmdview_docs_next(&d, &doc))
			engine_arrays_from_doc(ax, ax->db, coll, &doc);
	}
	/* Every document is smaller than the request: most inserts end here. */
	uint64_t bytes = v->body.len;
	for (size_t i = 0; i < v->nseqs; i++)
		bytes += v->seqs[i].docs_len;
	if (bytes < ax->e->doc_floor)
		return VERDICT_FORWARD;
	if (!coll || !target_init(ax, &t, ax->db, coll) || !(t.parts & PART_DOCUMENT))
		return VERDICT_FORWARD;
	shape_spec spec = {command_name(ax->cmd), coll, ax->explain, NULL, 0};
	rule_site site = site_of(&t, &spec);
	cmdview_docs_init(&d, v, command_stmts(ax->cmd));
	while (cmdview_docs_next(&d, &doc))
		run_checks(ax, &site, CHECK_DOCUMENT, &doc);
	return ax->verdict;
}

/* ---- bulkWrite ---- */

/* bulkWrite's update and delete ops (the statements of its "ops"). */
#define BULK_UPDATE_KEYS                                                                           \
	(BK(FILTER) | BK(UPDATE_MODS) | BK(UPSERT) | BK(ARRAY_FILTERS) | BK(MULTI) | BK(HINT) |    \
	 BK(COLLATION) | BK(SORT))
#define BULK_DELETE_KEYS (BK(FILTER) | BK(MULTI) | BK(HINT) | BK(COLLATION))

/* A bulkWrite insert op: {insert: i, document: {...}}. */
static void analyze_insert_op(rule_ctx *ax, const target *t, const bson_t *op)
{
	bson_iter_t it;
	bson_t doc;
	if (!bson_iter_init_find(&it, op, "document") || !wire_iter_doc_view(&it, &doc))
		return;
	if (ax->e->learn_arrays)
		engine_arrays_from_doc(ax, t->db, t->coll, &doc);
	if (!(t->parts & PART_DOCUMENT))
		return;
	shape_part part = {.key = "op", .mode = SHAPE_VERBATIM, .str = "insert"};
	shape_spec spec = {command_name(ax->cmd), t->ns, ax->explain, &part, 1};
	rule_site site = site_of(t, &spec);
	run_checks(ax, &site, CHECK_DOCUMENT, &doc);
}

/* Each op at its own namespace (bulkWrite spans several), so scopes and
 * index lists apply per op; a namespace whose index list must be waited
 * for makes the whole request wait, as any other command does. */
verdict analyze_bulk_write(rule_ctx *ax, const cmdview *v)
{
	cmdview_docs d;
	bson_t op;
	bulk_nsinfo nsinfo;
	bool scan = false; /* as analyze_statements' */
	if (!bulk_nsinfo_init(&nsinfo, v))
		return ax->verdict;
	cmdview_docs_init(&d, v, "ops");
	while (cmdview_docs_next(&d, &op)) {
		bson_iter_t it;
		if (!bson_iter_init(&it, &op) || !wire_iter_next(&it))
			continue;
		const char *kind = wire_iter_key(&it);
		bool is_update = key_eq(kind, "update");
		bool is_insert = !is_update && key_eq(kind, "insert");
		if (!is_update && !is_insert && !key_eq(kind, "delete"))
			continue;
		if (!WIRE_ITER_HOLDS_INT(&it))
			continue;
		/* The shape names the namespace: bulkWrite spans several. */
		char ns[256], db[128];
		const char *coll;
		if (!bulk_ns(&nsinfo, bson_iter_as_int64(&it), ns, sizeof(ns)) ||
		    !split_ns(ns, db, sizeof(db), &coll))
			continue;
		target t;
		if (!target_init(ax, &t, db, coll))
			continue;
		if (!is_insert && !facts_ready(ax, &t, PART_QUERY)) {
			bulk_nsinfo_free(&nsinfo);
			return VERDICT_WAIT_INDEXES;
		}
		stmt_gate(ax, &t);
		bson_iter_t stmt;
		wire_cur sc;
		arrays_target learn = {.looked = false, .set = NULL};
		if (is_insert)
			analyze_insert_op(ax, &t, &op);
		else if (bson_iter_init(&stmt, &op)) {
			unsigned keys = is_update ? BULK_UPDATE_KEYS : BULK_DELETE_KEYS;
			arrays_target *lp = ax->e->learn_arrays ? &learn : NULL;
			stmt_scan_in in;
			wire_cur_of_iter(&sc, &stmt);
			scan = analyze_stmt(ax, &t, &sc, keys,
			                    scan ? scan_in(&in, &t, keys, lp) : NULL,
			                    is_update ? RULE_QUERY_UPDATE : RULE_QUERY_DELETE,
			                    command_name(ax->cmd), t.ns, kind, NULL, false, lp);
		}
		engine_arrays_target_done(&learn);
	}
	bulk_nsinfo_free(&nsinfo);
	return ax->verdict;
}

/* ---- explain ---- */

/* {explain: {find: ...}, verbosity: ...}: the inner command's analyser, on
 * a view of the inner command, with every action at most log. Insert,
 * create and collMod cannot be explained (their rows say so). */
verdict analyze_explain(rule_ctx *ax, const cmdview *v)
{
	cmdview inner;
	if (!body_explained(v, &inner))
		return VERDICT_FORWARD;
	const command_def *c = commands_find(inner.name);
	if (!c || !c->explainable)
		return VERDICT_FORWARD;
	ax->cmd = c;
	ax->explain = true;
	verdict vd = c->analyze(ax, &inner);
	return vd == VERDICT_BLOCK ? VERDICT_FORWARD : vd; /* belt and braces */
}
