/* The rule engine's core: from a command view to a verdict.
 *
 * engine_analyze() looks the command up in the command table (commands.c)
 * and returns at once for the commands that carry no filter, update, sort,
 * pipeline or inserted document (hello, getMore, ...). For the others it
 * runs the row's analyser (analysers.c), which finds each part of the
 * request and runs the checks of the rules in rule_table (rules.h) whose
 * action for the request's namespace and application is not `off`
 * (rule_api.h says how a check and the engine talk); what a finding does
 * is verdict.c's. The engine knows no rule by name.
 *
 * Cost: the common case (no rule fires, no join) walks static BSON views
 * and allocates nothing. Shapes are rendered into stack buffers only when a
 * rule fires or a join must be counted; locks are taken only then too. */
#include "analyzers/engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/engine/body.h"
#include "analyzers/engine/engine_int.h"
#include "analyzers/engine/shape.h"
#include "protocol/byte_template.h"

static unsigned parts_read(const rule_checks *k)
{
	unsigned parts = 0;
	for (int c = 0; c < CHECK_KINDS; c++)
		if (check_present(k, (check_kind)c))
			parts |= 1u << c;
	return parts;
}

engine *engine_new(const engine_config *cfg, index_cache *ic, engine_sink_fn sink, void *sink_arg)
{
	engine *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	if (cfg)
		e->cfg = *cfg;
	else
		rule_config_defaults(&e->cfg);
	e->ic = ic;
	e->sink = sink;
	e->sink_arg = sink_arg;
	e->findings = findings_table_new(FINDINGS_MAX_KEYS);
	e->doc_floor = UINT32_MAX;
	e->shape_hashes = calloc(SHAPE_HASH_SLOTS, sizeof(*e->shape_hashes));
	static atomic_uint_fast64_t engines;
	e->gen = atomic_fetch_add(&engines, 1) + 1;
	bool ok = e->findings != NULL && e->shape_hashes != NULL;
	for (int r = 0; r < RULE_COUNT && ok; r++) {
		const rule_checks *k = rule_table[r]->checks;
		e->parts[r] = parts_read(k);
		e->needs_facts[r] =
		    rule_table[r]->needs_indexes ? e->parts[r] & (PART_SORT | PART_QUERY) : 0;
		if (rule_table[r]->needs_indexes_collated && (e->parts[r] & PART_QUERY))
			e->needs_facts[r] |= PART_COLLATED;
		const rule_config *rc = &e->cfg.rules[r];
		bool holds = rc->action >= RULE_DRY_RUN;
		for (size_t i = 0; i < rc->nscopes && i < RULE_MAX_SCOPES; i++)
			holds |= rc->scopes[i].action >= RULE_DRY_RUN;
		if (holds && e->needs_facts[r])
			e->facts_may_hold |= 1u << r;
		bool on = rc->action != RULE_OFF;
		for (size_t i = 0; i < rc->nscopes && i < RULE_MAX_SCOPES; i++)
			on |= rc->scopes[i].action != RULE_OFF;
		if (on && e->needs_facts[r])
			e->learn_arrays = true;
		for (int c = 0; c < CHECK_KINDS; c++)
			if (e->parts[r] & (1u << c)) {
				e->when[c][e->nchecks[c]] = c == CHECK_FILTER   ? k->filter_when
				                            : c == CHECK_UPDATE ? k->update_when
				                            : c == CHECK_QUERY  ? k->query_when
				                                                : 0;
				e->when_any[c] |= e->when[c][e->nchecks[c]];
				e->when_always[c] |= e->when[c][e->nchecks[c]] == 0;
				e->checks[c][e->nchecks[c]++] = (rule_id)r;
			}
		e->floor[r] = k->document_floor ? k->document_floor(&e->cfg.rules[r]) : 0;
		if (k->document && e->floor[r] < e->doc_floor)
			e->doc_floor = e->floor[r];
		if (k->state_new)
			ok = (e->state[r] = k->state_new(&e->cfg.rules[r])) != NULL;
		rule_action a = e->cfg.rules[r].action;
		e->scoped |= e->cfg.rules[r].nscopes > 0;
		/* A rule that reads no part (one that follows a connection's
		 * reads) never blocks: at block it reports a dry run. */
		if (rule_can_block(&e->cfg.rules[r]) && e->parts[r]) {
			e->may_block_any = true;
			e->may_block_documents |= (e->parts[r] & PART_DOCUMENT) != 0;
		}
		e->act[r] = a;
		e->act_explain[r] = a > RULE_LOG ? RULE_LOG : a;
		e->sample[r] = e->cfg.rules[r].sample;
		if (a != RULE_OFF)
			e->parts_all |= e->parts[r];
		if (e->act_explain[r] != RULE_OFF)
			e->parts_explain |= e->parts[r];
	}
	conn_track_layout(e);
	if (!ok) {
		engine_free(e);
		return NULL;
	}
	return e;
}

void engine_free(engine *e)
{
	if (!e)
		return;
	findings_table_free(e->findings);
	free(e->shape_hashes);
	for (int r = 0; r < RULE_COUNT; r++)
		if (e->state[r])
			rule_table[r]->checks->state_free(e->state[r]);
	free(e);
}

/* A command read only by document checks (insert) can be blocked only by
 * a rule that reads documents; anything else, or a name not known yet, by
 * any rule. */
bool engine_may_block(const engine *e, const char *command)
{
	const command_def *c = command ? commands_find(command) : NULL;
	return c && c->parts == PART_DOCUMENT ? e->may_block_documents : e->may_block_any;
}

/* ---- the entry points ---- */

/* The parts engine_shape() shows, found as the row says (cmd_shape). */
static bool shape_parts(const command_def *c, const cmdview *v, cmd_body *b)
{
	cmdview_docs d;
	bson_t stmt;
	switch (c ? c->shape : CMD_SHAPE_NAME) {
	case CMD_SHAPE_BODY:
		return body_walk(b, &v->body, c->keys);
	case CMD_SHAPE_FIRST_STMT: /* as findings on it: the first statement's parts */
		cmdview_docs_init(&d, v, command_stmts(c));
		return !cmdview_docs_next(&d, &stmt) || body_walk(b, &stmt, c->stmt_keys);
	default: /* insert, bulkWrite and the rest: the command alone */
		return true;
	}
}

bool engine_shape(const cmdview *v, char *ns, size_t nscap, char *command, size_t cmdcap,
                  char *shape, uint64_t *hash)
{
	bool values;
	return engine_shape_values(v, ns, nscap, command, cmdcap, shape, hash, &values);
}

bool engine_shape_values(const cmdview *v, char *ns, size_t nscap, char *command, size_t cmdcap,
                         char *shape, uint64_t *hash, bool *values)
{
	cmdview inner;
	bool explain = false;
	const command_def *c = commands_find(v->name);
	if (c && c->shape == CMD_SHAPE_INNER) {
		if (!body_explained(v, &inner))
			return false;
		v = &inner;
		c = commands_find(v->name);
		explain = true;
	}
	/* A row no rule reads, or explain inside explain: as an unknown one. */
	if (c && (!c->analyze || c->shape == CMD_SHAPE_INNER))
		c = NULL;
	const char *coll = cmdview_coll(v);
	cmd_body b;
	body_init(&b, v->db, coll);
	const char *name = c ? command_name(c) : v->name ? v->name : "";
	if (!shape_parts(c, v, &b))
		return false;
	explain |= b.explain; /* {aggregate, explain: true} */
	ns_join(ns, nscap, v->db ? v->db : "",
	        coll              ? coll
	        : c && c->db_wide ? "$cmd.aggregate"
	                          : "$cmd");
	snprintf(command, cmdcap, "%s", explain ? "explain" : name);
	shape_spec spec = {name, coll, explain, b.parts, b.n};
	shape_render_values(&spec, true, shape, SHAPE_BUF_LEN, values);
	*values |= b.explain_valued;
	*hash = shape_hash(ns, command, shape);
	return true;
}

/* ---- the connection's repeat (engine.h) ---- */

/* The words of tp a request that matched the decoder's template
 * decoded_gen must still be compared in: those holding a byte of its spans
 * that tp does not let differ (request_ctx.decoded_gen). A byte of a body
 * may lie in two words (the tail overlaps the last), and is compared in
 * whichever the template compares it in. */
enum { REPEAT_NARROW = 6 };

struct engine_repeat {
	uint64_t gen; /* of the engine that made it: unique in the process */
	const char *app;
	uint64_t hits;
	uint64_t sets;    /* templates made in it (engine_repeat_sets) */
	byte_template tp; /* byte_template_set_words: its bytes are not kept */
	/* the decoder's template the words below were worked out for (0:
	 * none yet); whole: too many of them, requests are compared whole */
	uint64_t decoded_gen;
	bool whole;
	uint32_t nnarrow;
	struct {
		uint32_t at;
		uint64_t mask, want;
	} narrow[REPEAT_NARROW];
};

void engine_repeat_free(engine_repeat *r)
{
	free(r);
}

uint64_t engine_repeat_hits(const engine_repeat *r)
{
	return r ? r->hits : 0;
}

uint64_t engine_repeat_sets(const engine_repeat *r)
{
	return r ? r->sets : 0;
}

/* The slot a request may be matched against and make a template in. */
static engine_repeat **repeat_slot(const engine *e, const cmdview *v, const request_ctx *rc)
{
	if (!rc || !rc->repeat || rc->late || e->cfg.no_templates ||
	    v->origin != CMDVIEW_FROM_OPMSG || v->nseqs || !byte_template_by_words(v->body.len))
		return NULL;
	return rc->repeat;
}

/* After a request that matched both r's template and the decoder's
 * template rc names: the words of r's template holding a byte of that
 * template's spans, so that the next request that matches it is compared
 * there only (its other bytes are this request's, and so r's template's).
 * Worked out once a pair of templates: with too many (whole), requests
 * are compared whole until either template changes. */
static void repeat_narrow(engine_repeat *r, const request_ctx *rc)
{
	const byte_template *tp = &r->tp;
	const byte_spans *sp = rc->decoded_spans;
	r->decoded_gen = rc->decoded_gen;
	r->whole = true;
	r->nnarrow = 0;
	if (!tp->valid || !tp->words || !sp)
		return;
	for (uint32_t w = 0; w <= tp->words; w++) {
		uint32_t at = w < tp->words ? 8 * w : tp->len - 8;
		uint64_t in_spans = 0;
		for (uint32_t i = 0; i < sp->n; i++)
			for (uint32_t b = 0; b < 8; b++)
				if (at + b >= sp->s[i].at && at + b < sp->s[i].at + sp->s[i].len)
					in_spans |= (uint64_t)0xff << (8 * b);
		uint64_t mask = in_spans & tp->mask[w];
		if (!mask)
			continue;
		if (r->nnarrow == REPEAT_NARROW)
			return; /* whole */
		r->narrow[r->nnarrow].at = at;
		r->narrow[r->nnarrow].mask = mask;
		r->narrow[r->nnarrow].want = tp->bytes[w] & mask;
		r->nnarrow++;
	}
	r->whole = false;
}

/* Does body (len bytes) match r's template? Compared in the narrowed
 * words when the request matched the decoder's template r was narrowed
 * for (known), else whole. Changes nothing. */
static inline __attribute__((always_inline)) bool
repeat_same(const engine_repeat *r, const uint8_t *body, uint32_t len, bool known)
{
	if (!known || r->whole)
		return byte_template_matches(&r->tp, body, len);
	uint64_t diff = 0;
	for (uint32_t i = 0; i < r->nnarrow; i++)
		diff |= (byte_template_load64(body + r->narrow[i].at) & r->narrow[i].mask) ^
		        r->narrow[i].want;
	return diff == 0;
}

static bool repeat_matches(engine_repeat *r, const engine *e, const cmdview *v,
                           const request_ctx *rc)
{
	if (r->gen != e->gen || r->app != rc->app_name)
		return false;
	bool known = rc->decoded_gen && rc->decoded_gen == r->decoded_gen;
	if (!repeat_same(r, bson_get_data(&v->body), v->body.len, known))
		return false;
	if (rc->decoded_gen && !known)
		repeat_narrow(r, rc);
	r->hits++;
	return true;
}

bool engine_repeat_again(engine *e, const request_ctx *rc, const uint8_t *body, uint32_t len,
                         bool noted)
{
	engine_repeat *r = rc->repeat ? *rc->repeat : NULL;
	if (!r || rc->late || e->cfg.no_templates || !byte_template_by_words(len) ||
	    r->gen != e->gen || r->app != rc->app_name || !rc->decoded_gen ||
	    rc->decoded_gen != r->decoded_gen || !repeat_same(r, body, len, true))
		return false;
	if (!noted && !conn_track_point_again(e, rc))
		return false;
	r->hits++;
	return true;
}

static void repeat_set(engine_repeat **slot, const engine *e, const cmdview *v,
                       const request_ctx *rc, const byte_spans *spans)
{
	engine_repeat *r = *slot;
	if (!r && (r = *slot = malloc(sizeof(*r))))
		r->hits = r->sets = 0;
	if (!r)
		return; /* no template: every request is read */
	r->gen = e->gen;
	r->app = rc->app_name;
	r->sets++;
	(void)byte_template_set_words(&r->tp, bson_get_data(&v->body), v->body.len, spans);
	r->decoded_gen = 0; /* until a request matches it and a decoder's template */
	r->whole = true;
	r->nnarrow = 0;
}

/* A late call's record starts from the request's: when it went on. */
static void late_carry(engine_late *to, const engine_late *from)
{
	to->changed = 0;
	to->since = from->since;
	to->since_change = from->since_change;
}

/* Nothing owed, nothing skipped, nothing read, whatever the command. */
static void block_start(block_info *block, const request_ctx *rc)
{
	block->late.n = 0;
	block->late.lost = 0;
	block->late.nwaited = 0;
	block->late.waited_any = false;
	if (rc && rc->late) /* since is set by the first owe otherwise */
		late_carry(&block->late, rc->late);
	block->skipped = 0;
	block->upsert = false;
	block->judged_at = 0;
	block->counts.n = 0;
	block->by_template = false;
	block->started_ns = 0;
}

/* Where the cache stood at the request's lookups, for the capture (the
 * counts its verdict read are in block->counts already: ax.counts); a late
 * call's request is written already. */
static void block_judged(block_info *block, const rule_ctx *ax)
{
	if (!block || ax->late_call)
		return;
	block->judged_at = ax->lookup_at.changes;
}

verdict engine_analyze(engine *e, const cmdview *v, const request_ctx *rc, block_info *block)
{
	if (block)
		block_start(block, rc);
	/* The connection's reads first, templates or not (conn_track.c); a
	 * read that completes a finding is analysed whole, to be reported. */
	engine_conn_track *tr = conn_track_of(e, rc);
	engine_repeat **rp = repeat_slot(e, v, rc);
	bool rep = rp && *rp && repeat_matches(*rp, e, v, rc);
	cmd_id id = CMD_NONE;
	uint32_t joined = 0;
	if (tr && !(rep && conn_track_repeat_point(e, tr, rc->now_ms))) {
		id = cmd_find(v->name);
		joined = conn_track_read(e, tr, v, id, rc);
	}
	if (rep && !joined) {
		if (block)
			block->by_template = true;
		return VERDICT_FORWARD; /* judged as its template was */
	}
	if (block && rc && rc->clock_ns)
		block->started_ns = rc->clock_ns(); /* read, and timed from here */
	const command_def *c = commands_of(id != CMD_NONE ? id : cmd_find(v->name));
	if (!c || !c->analyze || !v->db)
		return VERDICT_FORWARD; /* hello, getMore, ...: nothing to check */
	/* Field by field: lookup_ns is written before it is read (lookup_done),
	 * so the 512 bytes of it are not zeroed on every request. */
	rule_ctx ax;
	ax.e = e;
	ax.rc = rc;
	ax.block = block;
	ax.db = v->db;
	ax.cmd = c;
	ax.explain = false;
	ax.verdict = VERDICT_FORWARD;
	ax.nreported = 0;
	ax.late_call = rc && rc->late;
	ax.waited_call = 0;
	ax.cur_site = NULL;
	ax.wait = false;
	ax.lookup_done = false;
	ax.lookup_r = INDEXES_UNAVAILABLE;
	ax.lookup_set = NULL;
	ax.lookup_until = UINT64_MAX;
	ax.lookup_at.changes = ax.lookup_at.schema_seq = 0;
	engine_counts own; /* a late call's counts go nowhere, and so do those with no block */
	ax.counts = block && !ax.late_call ? &block->counts : &own;
	ax.counts->n = 0;
	byte_spans spans;
	spans.base = bson_get_data(&v->body);
	spans.n = 0;
	spans.full = false;
	ax.spans = rp ? &spans : NULL;
	ax.ncalled = 0;
	ax.repeatable = false;
	ax.own_hash = 0;
	ax.narrays = 0;
	verdict vd = c->analyze(&ax, v);
	if (ax.wait) {
		vd = VERDICT_WAIT_INDEXES;
		if (block)
			block->late.n = block->late.lost = 0; /* judged again whole */
	}
	if (ax.narrays)
		engine_arrays_apply(&ax, vd == VERDICT_FORWARD);
	block_judged(block, &ax);
	index_set_release(ax.lookup_set);
	if (rp && vd == VERDICT_FORWARD && ax.repeatable && !ax.explain && !ax.wait &&
	    ax.nreported == 0 && ax.ncalled == 0 &&
	    (!block || (!block->late.n && !block->late.lost && !block->skipped))) {
		repeat_set(rp, e, v, rc, &spans);
		if (tr)
			conn_track_template_set(tr);
	}
	if (joined && !ax.wait)
		conn_track_report(&ax, tr, v, joined);
	return vd;
}

void engine_set_tally(engine *e, engine_tally_fn fn, void *arg)
{
	e->tally = fn;
	e->tally_arg = arg;
}

void engine_flush_summaries(engine *e)
{
	if (e->sink)
		findings_table_flush(e->findings, e->sink, e->sink_arg);
}
