/* The per-request context as rules and analysers use it: what a rule's
 * check may ask the engine (rule_api.h), the index list of a namespace
 * looked up once per request, and the verdicts a request owes when a list
 * is not known yet (engine_late, engine.h).
 *
 * Below engine.c and analysers.c, which both call it: it calls neither. */
#include <string.h>

#include "analyzers/engine/engine_int.h"

const rule_config *rule_ctx_config(const rule_ctx *ax, rule_id r)
{
	return &ax->e->cfg.rules[r];
}

void *rule_ctx_state(const rule_ctx *ax, rule_id r)
{
	return ax->e->state[r];
}

bool rule_ctx_explain(const rule_ctx *ax)
{
	return ax->explain;
}

int64_t rule_ctx_now_ms(const rule_ctx *ax)
{
	return ax->rc ? ax->rc->now_ms : 0;
}

bool rule_ctx_no_wait(const rule_ctx *ax)
{
	return ax->rc && ax->rc->no_wait;
}

index_cache *rule_ctx_index_cache(const rule_ctx *ax)
{
	return ax->e->ic;
}

/* One lookup per namespace per request: a request names one collection
 * (a $lookup two), and each check would otherwise take the cache's lock
 * and a reference on the set again. The set is released when the request
 * is done (engine_analyze). */
index_lookup engine_lookup(rule_ctx *ax, const char *db, const char *coll, const index_set **out)
{
	*out = NULL;
	if (!ax->e->ic || !db || !coll)
		return INDEXES_UNAVAILABLE;
	size_t a = strlen(db), b = strlen(coll);
	if (a + b + 2 > LOOKUP_NS_LEN)
		return INDEXES_UNAVAILABLE; /* the cache refuses it too */
	if (!ax->lookup_done || strncmp(ax->lookup_ns, db, a) != 0 || ax->lookup_ns[a] != '.' ||
	    strcmp(ax->lookup_ns + a + 1, coll) != 0) {
		index_set_release(ax->lookup_set);
		ax->lookup_set = NULL;
		ax->lookup_until = UINT64_MAX;
		index_set *landed = NULL;
		/* a late call: the list that landed first after the request went
		 * on, as the report's replay judges it at that list's snapshot,
		 * whatever the cache holds by the time this worker woke */
		if (ax->late_call && ax->block &&
		    index_cache_landed_after(ax->e->ic, db, coll, ax->block->late.since_change,
		                             &landed, &ax->lookup_until)) {
			ax->lookup_set = landed;
			ax->lookup_r = INDEXES_KNOWN;
		}
		memcpy(ax->lookup_ns, db, a);
		ax->lookup_ns[a] = '.';
		memcpy(ax->lookup_ns + a + 1, coll, b + 1);
		if (!landed) /* joined once, here: index_cache_get_ns */
			ax->lookup_r = a && b
			                   ? index_cache_get_ns(ax->e->ic, ax->lookup_ns, a + b + 1,
			                                        &ax->lookup_set, &ax->lookup_at)
			                   : INDEXES_UNAVAILABLE;
		ax->lookup_done = true;
	}
	*out = ax->lookup_set;
	return ax->lookup_r;
}

static const int64_t *counts_find(const engine_counts *t, const char *ns)
{
	for (unsigned i = 0; t && i < t->n && i < ENGINE_COUNTS_MAX; i++)
		if (strcmp(t->at[i].ns, ns) == 0)
			return &t->at[i].docs;
	return NULL;
}

int64_t rule_ctx_doc_count(rule_ctx *ax, const char *db, const char *coll, const index_set *set)
{
	/* A late call judges as the report's replay does at the landed list's
	 * snapshot: with the count it landed with, not with the writes relayed
	 * while the request waited in the late queue. */
	if (ax->late_call)
		return index_set_read_count(set);
	/* "db.coll", joined without snprintf: on every read collection-scan
	 * weighs, where snprintf cost more than the rest of the check */
	char ns[ENGINE_COUNTS_NS_LEN];
	size_t a = strlen(db), b = strlen(coll), len = a + b + 1;
	if (len >= sizeof ns)
		return index_set_doc_count(set); /* no such namespace on a server */
	memcpy(ns, db, a);
	ns[a] = '.';
	memcpy(ns + a + 1, coll, b + 1);
	const int64_t *seen = counts_find(ax->counts, ns);
	if (seen)
		return *seen; /* the request's first read of it: its checks agree */
	const int64_t *kept = ax->rc ? counts_find(ax->rc->counts, ns) : NULL;
	int64_t docs = kept ? *kept : index_set_doc_count(set);
	engine_counts *t = ax->counts;
	if (t->n < ENGINE_COUNTS_MAX) {
		memcpy(t->at[t->n].ns, ns, len + 1);
		t->at[t->n++].docs = docs;
	}
	return docs;
}

/* Merges into the namespace's entry when there is one, so a request that
 * owes several rules at one namespace takes one slot; past ENGINE_LATE_MAX
 * namespaces the rules are counted as lost, never judged wrongly. Returns
 * engine_ns_hash(ns) (0 without a block). */
uint64_t engine_owe(rule_ctx *ax, const char *ns, uint32_t rules, unsigned kinds)
{
	block_info *b = ax->block;
	if (!b)
		return 0;
	uint64_t h = engine_ns_hash(ns);
	for (unsigned i = 0; i < b->late.n; i++)
		if (b->late.at[i].ns_hash == h) {
			b->late.at[i].rules |= rules;
			b->late.at[i].kinds |= kinds;
			return h;
		}
	if (b->late.n == ENGINE_LATE_MAX) {
		b->late.lost |= rules;
		return h;
	}
	/* where the cache stood at the lookup that found the list missing
	 * (read under its lock, so a change it counts passed after it), or
	 * now when none was made */
	if (!ax->late_call && ax->lookup_done) {
		b->late.since = ax->lookup_at.schema_seq;
		b->late.since_change = ax->lookup_at.changes;
	} else if (!ax->late_call) {
		b->late.since = index_cache_schema_seq(ax->e->ic);
		b->late.since_change = index_cache_changes(ax->e->ic);
	}
	b->late.at[b->late.n].ns_hash = h;
	b->late.at[b->late.n].rules = rules;
	b->late.at[b->late.n++].kinds = kinds;
	return h;
}

/* The list of a namespace (h: its engine_ns_hash) was not known: a late
 * call reports what a check reading it finds (engine_late.waited). */
static void note_waited(block_info *b, uint64_t h)
{
	if (!b)
		return;
	for (unsigned i = 0; i < b->late.nwaited; i++)
		if (b->late.waited[i] == h)
			return;
	if (b->late.nwaited < ENGINE_LATE_MAX)
		b->late.waited[b->late.nwaited++] = h;
	else
		b->late.waited_any = true;
}

static bool waited_for(const engine_late *l, const char *ns)
{
	if (l->waited_any)
		return true;
	uint64_t h = engine_ns_hash(ns);
	for (unsigned i = 0; i < l->nwaited; i++)
		if (l->waited[i] == h)
			return true;
	return false;
}

/* A check asked for an index list the cache does not have yet: its rule,
 * if it reads one (rule_def.needs_indexes...), owes the verdict for that
 * kind of check at the site, given late; when the wait for it has already
 * ended (no_wait), none is given, and that is counted. */
index_lookup rule_ctx_indexes(rule_ctx *ax, const char *db, const char *coll, const index_set **out)
{
	const rule_site *s = ax->cur_site;
	index_lookup r = engine_lookup(ax, db, coll, out);
	if (ax->late_call && ax->block &&
	    index_cache_schema_changed(ax->e->ic, db, coll, ax->block->late.since,
	                               ax->lookup_until)) {
		*out = NULL;
		ax->block->late.changed |= 1u << ax->cur_rule;
		return INDEXES_UNAVAILABLE;
	}
	if (ax->late_call && r == INDEXES_KNOWN && waited_for(ax->rc->late, ax->lookup_ns))
		ax->waited_call = ax->ncalled;
	if (r != INDEXES_PENDING || !s || !ax->e->needs_facts[ax->cur_rule])
		return r;
	if (ax->rc && ax->rc->no_wait) {
		if (ax->block)
			ax->block->skipped |= 1u << ax->cur_rule;
	} else if (s->act[ax->cur_rule] >= RULE_DRY_RUN && !ax->late_call && ax->nreported == 0 &&
	           ax->verdict == VERDICT_FORWARD) {
		ax->wait = true; /* a list facts_ready could not see: $lookup's other side */
	} else {
		uint64_t h = engine_owe(ax, s->ns, 1u << ax->cur_rule, ax->cur_kind);
		/* mostly the site's own list; a $lookup's other side's else */
		note_waited(ax->block,
		            strcmp(ax->lookup_ns, s->ns) == 0 ? h : engine_ns_hash(ax->lookup_ns));
	}
	return r;
}

/* The owed list keys namespaces by hash: engine_late is a fixed array
 * copied with the held request, so it keeps no strings. */
uint64_t engine_ns_hash(const char *ns)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *ns; ns++)
		h = (h ^ (uint8_t)*ns) * 1099511628211ull;
	return h;
}
