/* The rule engine: from a command view to findings and a verdict.
 *
 * engine_analyze() names the command first and returns at once for the
 * commands that carry no filter, update, sort, pipeline or inserted document
 * (hello, getMore, ...). For the others it finds each filter / update / sort
 * / pipeline / query / document in the body (or in a kind-1 sequence), and
 * runs the checks of
 * the rules in rule_table (rules.h) whose action for the request's
 * namespace and application is not `off` (rule_api.h says how a check and
 * the engine talk). The engine knows no rule by name.
 *
 * Order matters for re-entry. index-mismatched-sort may need an index list
 * the cache does not have yet; then the engine answers VERDICT_WAIT_INDEXES
 * and the proxy calls again later. So sort checks are evaluated first, and
 * nothing is reported, and no hot-path execution counted, before the engine
 * knows it will not answer WAIT.
 *
 * Cost: the common case (no rule fires, no join) walks static BSON views
 * and allocates nothing. Shapes are rendered into stack buffers only when a
 * rule fires or a join must be counted; locks are taken only then too. */
#include "analyzers/engine.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analyzers/findings.h"
#include "analyzers/index_cache.h"
#include "analyzers/keys.h"
#include "analyzers/rule_api.h"
#include "analyzers/rules.h"
#include "analyzers/shape.h"
#include "protocol/wire_iter.h"

/* A batch with many bad ops reports this many findings, then only decides
 * the verdict: a 100,000-op batch must not render 100,000 shapes. */
#define MAX_REPORTS_PER_REQUEST 32

/* Shape hashes, remembered. Rendering a shape only to hash it was most of
 * what a repeated finding cost, and the same bytes always render the same
 * shape, so the engine remembers, per hash of the raw parts, the shape hash
 * they gave. An entry is three words written without a lock (workers share
 * the engine); a reader trusts an entry only when its check word agrees
 * with the other two, so a torn read of two writers' entries is a miss,
 * never a wrong hash. */
#define SHAPE_MEMO_SLOTS 1024 /* a power of two */

typedef struct shape_memo_slot {
	_Atomic uint64_t key, hash, check;
} shape_memo_slot;

/* The parts of a request a rule's checks read (rule_checks). */
enum {
	PART_SORT = 1u,
	PART_FILTER = 2u,
	PART_UPDATE = 4u,
	PART_PIPELINE = 8u,
	PART_QUERY = 16u,
	PART_DOCUMENT = 32u,
};

static unsigned parts_read(const rule_checks *k)
{
	return (k->sort ? PART_SORT : 0) | (k->filter ? PART_FILTER : 0) |
	       (k->update ? PART_UPDATE : 0) | (k->pipeline ? PART_PIPELINE : 0) |
	       (k->query ? PART_QUERY : 0) | (k->document ? PART_DOCUMENT : 0);
}

struct engine {
	engine_config cfg;
	index_cache *ic;
	engine_sink_fn sink;
	void *sink_arg;
	findings_table *findings;
	void *state[RULE_COUNT];    /* each rule's own, from its state_new */
	unsigned parts[RULE_COUNT]; /* PART_*: what each rule's checks read */
	/* The rules with a check of each part, in table order, so a request
	 * walks only the checks that exist. */
	rule_id sorts[RULE_COUNT], filters[RULE_COUNT], updates[RULE_COUNT], pipelines[RULE_COUNT];
	rule_id queries[RULE_COUNT], documents[RULE_COUNT];
	size_t nsorts, nfilters, nupdates, npipelines, nqueries, ndocuments;
	/* With no scope on any rule, every namespace gets the same actions:
	 * target_init copies them instead of asking each rule. */
	bool scoped;
	rule_action act[RULE_COUNT], act_explain[RULE_COUNT];
	uint8_t sample[RULE_COUNT];
	unsigned parts_all, parts_explain;
	uint32_t doc_floor; /* the smallest document a document check reports */
	/* Could a rule block anything, or an insert (whose only part read is
	 * its documents)? Any scope at block counts. See engine_may_block. */
	bool may_block_any, may_block_insert;
	shape_memo_slot *memo; /* SHAPE_MEMO_SLOTS */
};

typedef enum {
	CMD_NONE,
	CMD_FIND,
	CMD_AGGREGATE,
	CMD_COUNT,
	CMD_DISTINCT,
	CMD_UPDATE,
	CMD_DELETE,
	CMD_FIND_AND_MODIFY,
	CMD_BULK_WRITE,
	CMD_INSERT,
	CMD_EXPLAIN,
	CMD_CREATE,   /* a view: its pipeline runs on every read of the view */
	CMD_COLL_MOD, /* ... or a view's new pipeline */
} cmd_kind;

/* Names as the server looks them up: case-sensitive, findAndModify also
 * under its old all-lowercase alias. */
static cmd_kind classify(const char *name)
{
	if (!name)
		return CMD_NONE;
	switch (name[0]) {
	case 'f':
		if (key_eq(name, "find"))
			return CMD_FIND;
		if (key_eq(name, "findAndModify") || key_eq(name, "findandmodify"))
			return CMD_FIND_AND_MODIFY;
		return CMD_NONE;
	case 'a':
		return key_eq(name, "aggregate") ? CMD_AGGREGATE : CMD_NONE;
	case 'c':
		if (key_eq(name, "count"))
			return CMD_COUNT;
		if (key_eq(name, "create"))
			return CMD_CREATE;
		return key_eq(name, "collMod") ? CMD_COLL_MOD : CMD_NONE;
	case 'd':
		if (key_eq(name, "delete"))
			return CMD_DELETE;
		return key_eq(name, "distinct") ? CMD_DISTINCT : CMD_NONE;
	case 'u':
		return key_eq(name, "update") ? CMD_UPDATE : CMD_NONE;
	case 'b':
		return key_eq(name, "bulkWrite") ? CMD_BULK_WRITE : CMD_NONE;
	case 'e':
		return key_eq(name, "explain") ? CMD_EXPLAIN : CMD_NONE;
	case 'i':
		return key_eq(name, "insert") ? CMD_INSERT : CMD_NONE;
	default:
		return CMD_NONE;
	}
}

bool engine_may_block(const engine *e, const char *command)
{
	return command && classify(command) == CMD_INSERT ? e->may_block_insert : e->may_block_any;
}

static const char *canonical_name(cmd_kind k)
{
	switch (k) {
	case CMD_FIND:
		return "find";
	case CMD_AGGREGATE:
		return "aggregate";
	case CMD_COUNT:
		return "count";
	case CMD_DISTINCT:
		return "distinct";
	case CMD_UPDATE:
		return "update";
	case CMD_DELETE:
		return "delete";
	case CMD_FIND_AND_MODIFY:
		return "findAndModify";
	case CMD_BULK_WRITE:
		return "bulkWrite";
	case CMD_INSERT:
		return "insert";
	case CMD_EXPLAIN:
		return "explain";
	case CMD_CREATE:
		return "create";
	case CMD_COLL_MOD:
		return "collMod";
	default:
		return "";
	}
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
	e->memo = calloc(SHAPE_MEMO_SLOTS, sizeof(*e->memo));
	bool ok = e->findings != NULL && e->memo != NULL;
	for (int r = 0; r < RULE_COUNT && ok; r++) {
		const rule_checks *k = rule_table[r]->checks;
		e->parts[r] = parts_read(k);
		if (k->sort)
			e->sorts[e->nsorts++] = (rule_id)r;
		if (k->filter)
			e->filters[e->nfilters++] = (rule_id)r;
		if (k->update)
			e->updates[e->nupdates++] = (rule_id)r;
		if (k->pipeline)
			e->pipelines[e->npipelines++] = (rule_id)r;
		if (k->query)
			e->queries[e->nqueries++] = (rule_id)r;
		if (k->document) {
			e->documents[e->ndocuments++] = (rule_id)r;
			uint32_t f = k->document_floor ? k->document_floor(&e->cfg.rules[r]) : 0;
			if (f < e->doc_floor)
				e->doc_floor = f;
		}
		if (k->state_new)
			ok = (e->state[r] = k->state_new(&e->cfg.rules[r])) != NULL;
		rule_action a = e->cfg.rules[r].action;
		e->scoped |= e->cfg.rules[r].nscopes > 0;
		if (rule_can_block(&e->cfg.rules[r])) {
			e->may_block_any = true;
			e->may_block_insert |= (e->parts[r] & PART_DOCUMENT) != 0;
		}
		e->act[r] = a;
		e->act_explain[r] = a > RULE_LOG ? RULE_LOG : a;
		e->sample[r] = e->cfg.rules[r].sample;
		if (a != RULE_OFF)
			e->parts_all |= e->parts[r];
		if (e->act_explain[r] != RULE_OFF)
			e->parts_explain |= e->parts[r];
	}
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
	free(e->memo);
	for (int r = 0; r < RULE_COUNT; r++)
		if (e->state[r])
			rule_table[r]->checks->state_free(e->state[r]);
	free(e);
}

/* ---- per-request state ---- */

#define MEMO_NS_LEN 512 /* the index cache's own limit on "db.coll" */

struct rule_ctx {
	engine *e;
	const request_ctx *rc;
	block_info *block;
	const char *db;
	cmd_kind kind;      /* the analysed command (inside explain, the inner one) */
	bool explain;       /* never blocked, never counted as an execution */
	verdict verdict;    /* FORWARD or BLOCK */
	unsigned nreported; /* findings sent this request */
	/* rule_ctx_indexes: the last namespace looked up, and its answer; the
	 * set is released when the request is done. */
	bool memo_used;
	index_lookup memo_r;
	index_set *memo_set;
	char memo_ns[MEMO_NS_LEN];
};
typedef rule_ctx actx;

/* Where a finding is: its namespace, each rule's action there, and which
 * parts some rule that is not off there reads. */
typedef struct target {
	const char *db;
	const char *coll; /* NULL for a collection-less aggregate */
	char ns[256];
	rule_action act[RULE_COUNT];
	uint8_t sample[RULE_COUNT];
	unsigned parts; /* PART_* */
} target;

/* "db.coll", truncated to fit; on every request, so no snprintf. */
static void ns_join(char *out, size_t cap, const char *db, const char *coll)
{
	size_t a = strlen(db), b = strlen(coll);
	if (a > cap - 2)
		a = cap - 2;
	if (b > cap - 2 - a)
		b = cap - 2 - a;
	memcpy(out, db, a);
	out[a] = '.';
	memcpy(out + a + 1, coll, b);
	out[a + 1 + b] = '\0';
}

static bool target_init(actx *ax, target *t, const char *db, const char *coll)
{
	t->db = db;
	t->coll = coll;
	ns_join(t->ns, sizeof(t->ns), db, coll ? coll : "$cmd.aggregate");
	const engine *e = ax->e;
	if (!e->scoped) {
		memcpy(t->act, ax->explain ? e->act_explain : e->act, sizeof(t->act));
		memcpy(t->sample, e->sample, sizeof(t->sample));
		t->parts = ax->explain ? e->parts_explain : e->parts_all;
		return t->parts != 0;
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
	return t->parts != 0;
}

static rule_site site_of(const target *t, const shape_spec *spec)
{
	rule_site s = {t->db, t->coll, t->ns, t->act, t->sample, spec, NULL};
	return s;
}

/* The error a block sends; a dry-run logs the same words. */
static void block_message(const actx *ax, rule_id rule, const rule_words *w, char *out, size_t size)
{
	snprintf(out, size, "mongoguard blocked this %s: rule %s: %s. Fix: %s.",
	         canonical_name(ax->kind), rule_name(rule), w->detail, w->fix);
}

static void fill_block(actx *ax, rule_id rule, const rule_words *w)
{
	if (!ax->block)
		return;
	ax->block->rule = rule;
	block_message(ax, rule, w, ax->block->errmsg, sizeof(ax->block->errmsg));
}

/* ---- what rules may ask (rule_api.h) ---- */

/* The shape's hash covers the redacted text, so dedupe and hot-path counts
 * ignore literal values even when the log shows them. */
uint64_t rule_shape_redacted(const rule_ctx *ax, const rule_site *s, char *buf)
{
	shape_render(s->shape, true, buf, SHAPE_BUF_LEN);
	return shape_hash(s->ns, ax->explain ? "explain" : canonical_name(ax->kind), buf);
}

/* Whether a finding of rule here could still change anything: the verdict
 * (a first block) or the sink (under MAX_REPORTS_PER_REQUEST). The
 * per-statement rules ask first, so that in a batch of 900,000 statements
 * that all match, the statements after the cap are not walked and worded
 * for nothing (that tripled the time of a 40 MB update). */
bool rule_wanted(const rule_ctx *ax, const rule_site *s, rule_id rule)
{
	rule_action action = s->act[rule];
	if (action == RULE_OFF)
		return false;
	if (action == RULE_BLOCK && ax->verdict != VERDICT_BLOCK)
		return true;
	return ax->nreported < MAX_REPORTS_PER_REQUEST && ax->e->sink;
}

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

index_lookup rule_ctx_indexes(rule_ctx *ax, const char *db, const char *coll, const index_set **out)
{
	*out = NULL;
	if (!ax->e->ic || !db || !coll)
		return INDEXES_UNAVAILABLE;
	size_t a = strlen(db), b = strlen(coll);
	if (a + b + 2 > MEMO_NS_LEN)
		return INDEXES_UNAVAILABLE; /* the cache refuses it too */
	if (!ax->memo_used || strncmp(ax->memo_ns, db, a) != 0 || ax->memo_ns[a] != '.' ||
	    strcmp(ax->memo_ns + a + 1, coll) != 0) {
		index_set_release(ax->memo_set);
		ax->memo_set = NULL;
		ax->memo_r = index_cache_get(ax->e->ic, db, coll, &ax->memo_set);
		memcpy(ax->memo_ns, db, a);
		ax->memo_ns[a] = '.';
		memcpy(ax->memo_ns + a + 1, coll, b + 1);
		ax->memo_used = true;
	}
	*out = ax->memo_set;
	return ax->memo_r;
}

/* ---- the shape memo ---- */

#define MEMO_MUL   0x9e3779b97f4a7c15ull
#define MEMO_CHECK 0x6a09e667f3bcc909ull

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t w;
	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&w, b, 8);
		h = (h ^ w) * MEMO_MUL;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, b, n);
	h = (h ^ w ^ ((uint64_t)n << 56)) * MEMO_MUL;
	return h ^ (h >> 29);
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	return s ? mix_bytes(h, s, strlen(s) + 1) : mix_bytes(h, "", 0);
}

/* Everything the redacted shape and its hash are made from: namespace,
 * command names, target, explain, and each part's key, mode and bytes. */
static uint64_t raw_key(const rule_ctx *ax, const rule_site *s)
{
	const shape_spec *sp = s->shape;
	uint64_t h = mix_str(0, s->ns);
	h = mix_str(h, ax->explain ? "explain" : canonical_name(ax->kind));
	h = mix_str(h, sp->command);
	h = mix_str(h, sp->target);
	h = mix_bytes(h, &sp->explain, 1);
	for (size_t i = 0; i < sp->nparts; i++) {
		const shape_part *p = &sp->parts[i];
		unsigned mode = (unsigned)p->mode;
		h = mix_str(h, p->key);
		h = mix_bytes(h, &mode, sizeof mode);
		if (p->str)
			h = mix_str(h, p->str);
		else /* the whole element: type, key and value */
			h = mix_bytes(h, p->value.raw + p->value.off,
			              p->value.next_off - p->value.off);
	}
	return h;
}

static uint64_t memo_check(uint64_t key, uint64_t hash)
{
	return key ^ (hash * MEMO_MUL) ^ MEMO_CHECK;
}

static bool memo_get(const engine *e, uint64_t key, uint64_t *hash)
{
	shape_memo_slot *m = &e->memo[key & (SHAPE_MEMO_SLOTS - 1)];
	uint64_t k = atomic_load_explicit(&m->key, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&m->hash, memory_order_relaxed);
	uint64_t c = atomic_load_explicit(&m->check, memory_order_relaxed);
	if (k != key || c != memo_check(k, h))
		return false;
	*hash = h;
	return true;
}

static void memo_put(engine *e, uint64_t key, uint64_t hash)
{
	shape_memo_slot *m = &e->memo[key & (SHAPE_MEMO_SLOTS - 1)];
	atomic_store_explicit(&m->key, key, memory_order_relaxed);
	atomic_store_explicit(&m->hash, hash, memory_order_relaxed);
	atomic_store_explicit(&m->check, memo_check(key, hash), memory_order_relaxed);
}

/* The finding's redacted shape hash, from the memo when it knows the raw
 * bytes; *shape gets the text when it had to be rendered. */
static uint64_t finding_hash(actx *ax, const rule_site *s, char *redacted, const char **shape)
{
	uint64_t key = raw_key(ax, s), hash;
	if (!memo_get(ax->e, key, &hash)) {
		hash = rule_shape_redacted(ax, s, redacted);
		*shape = redacted;
		memo_put(ax->e, key, hash);
	}
	return hash;
}

/* Applies the action and reports. The rule's words are rendered here, once,
 * and only when the finding blocks first or reaches the sink. shape/hash
 * may come precomputed (the hot-path rule needs them to count); otherwise
 * they are rendered here. noinline: the words and two shape buffers (20 KB
 * of stack) stay off the path of requests where nothing fires. */
static __attribute__((noinline)) void report(actx *ax, const rule_site *s, rule_id rule,
                                             const void *facts, const char *pre_shape,
                                             uint64_t pre_hash)
{
	rule_action action = s->act[rule];
	if (action == RULE_OFF)
		return;
	const char *app = ax->rc && ax->rc->app_name ? ax->rc->app_name : "";
	char redacted[SHAPE_BUF_LEN];
	const char *shape = pre_shape;
	uint64_t hash = pre_hash;
	bool hashed = pre_shape != NULL;
	/* A block rolled out to a sample of shapes: the others are dry-run. */
	uint8_t sample = s->sample ? s->sample[rule] : 0;
	bool sampled_out = false;
	if (action == RULE_BLOCK && sample && sample < RULE_SAMPLE_ALL) {
		hash = finding_hash(ax, s, redacted, &shape);
		hashed = true;
		if (!rule_sampled_in(hash, sample)) {
			action = RULE_DRY_RUN;
			sampled_out = true;
		}
	}
	bool first_block = action == RULE_BLOCK && ax->verdict != VERDICT_BLOCK;
	bool to_sink = ax->nreported < MAX_REPORTS_PER_REQUEST && ax->e->sink;
	if (!first_block && !to_sink)
		return;
	if (to_sink && !hashed)
		hash = finding_hash(ax, s, redacted, &shape);
	/* A repeat that blocks nothing is only counted: its words would be
	 * rendered for no reader (the common case of a known finding). */
	if (to_sink && !first_block) {
		finding key = {.rule = rule, .action = action, .shape_hash = hash, .app_name = app};
		if (findings_table_count_repeat(ax->e->findings, &key)) {
			ax->nreported++;
			return;
		}
	}
	rule_words w;
	rule_table[rule]->checks->words(ax, s, facts, &w);
	if (first_block) {
		ax->verdict = VERDICT_BLOCK;
		fill_block(ax, rule, &w);
	}
	if (!to_sink)
		return;
	ax->nreported++;
	if (!shape) { /* the memo gave the hash; a first occurrence needs the text */
		hash = rule_shape_redacted(ax, s, redacted);
		shape = redacted;
	}

	char shown[SHAPE_BUF_LEN];
	if (!ax->e->cfg.redact_literals) {
		shape_render(s->shape, false, shown, sizeof(shown));
		shape = shown;
	}
	char would[sizeof(ax->block->errmsg)];
	if (action == RULE_DRY_RUN)
		block_message(ax, rule, &w, would, sizeof(would));
	finding f = {
	    .rule = rule,
	    .action = action,
	    .ns = s->ns,
	    .command = ax->explain ? "explain" : canonical_name(ax->kind),
	    .shape_hash = hash,
	    .shape = shape,
	    .suggestion = w.suggestion,
	    .detail = w.detail,
	    .app_name = app,
	    .client = ax->rc && ax->rc->client ? ax->rc->client : "",
	    .repeats = 0,
	    .would_block = action == RULE_DRY_RUN ? would : NULL,
	    .sampled_out = sampled_out,
	};
	findings_table_report(ax->e->findings, &f, ax->e->sink, ax->e->sink_arg);
}

void rule_report(rule_ctx *ax, const rule_site *s, rule_id r, const void *facts)
{
	report(ax, s, r, facts, NULL, 0);
}

void rule_report_shaped(rule_ctx *ax, const rule_site *s, rule_id r, const void *facts,
                        const char *shape, uint64_t hash)
{
	report(ax, s, r, facts, shape, hash);
}

/* ---- running the rules' checks on the parts of a request ---- */

static bool nonempty_doc(const bson_t *d)
{
	return d && !bson_empty(d);
}

/* The sort checks, first: they alone may have to wait for an index list,
 * and nothing may be reported before the engine knows it will not wait.
 * False when the request waits. */
static __attribute__((warn_unused_result)) bool run_sort(actx *ax, const rule_site *s,
                                                         const sort_query *q)
{
	if (!ax->e->ic || !nonempty_doc(q->sort))
		return true;
	const engine *e = ax->e;
	for (size_t i = 0; i < e->nsorts; i++) {
		rule_id r = e->sorts[i];
		if (s->act[r] != RULE_OFF && rule_table[r]->checks->sort(ax, s, q) == RULE_WAIT)
			return false;
	}
	return true;
}

/* Each check of a part, for the rules not off here, in table order. */
static void run_filter(actx *ax, const rule_site *s, const bson_iter_t *filter)
{
	const engine *e = ax->e;
	for (size_t i = 0; i < e->nfilters; i++) {
		rule_id r = e->filters[i];
		if (s->act[r] != RULE_OFF)
			rule_table[r]->checks->filter(ax, s, filter);
	}
}

static void run_update(actx *ax, const rule_site *s, const bson_iter_t *update)
{
	const engine *e = ax->e;
	for (size_t i = 0; i < e->nupdates; i++) {
		rule_id r = e->updates[i];
		if (s->act[r] != RULE_OFF)
			rule_table[r]->checks->update(ax, s, update);
	}
}

static void run_pipeline(actx *ax, const rule_site *s, const bson_iter_t *pipeline)
{
	const engine *e = ax->e;
	for (size_t i = 0; i < e->npipelines; i++) {
		rule_id r = e->pipelines[i];
		if (s->act[r] != RULE_OFF)
			rule_table[r]->checks->pipeline(ax, s, pipeline);
	}
}

static void run_query(actx *ax, const rule_site *s, const rule_query *q)
{
	const engine *e = ax->e;
	for (size_t i = 0; i < e->nqueries; i++) {
		rule_id r = e->queries[i];
		if (s->act[r] != RULE_OFF)
			rule_table[r]->checks->query(ax, s, q);
	}
}

static void run_document(actx *ax, const rule_site *s, const bson_t *doc)
{
	const engine *e = ax->e;
	for (size_t i = 0; i < e->ndocuments; i++) {
		rule_id r = e->documents[i];
		if (s->act[r] != RULE_OFF)
			rule_table[r]->checks->document(ax, s, doc);
	}
}

/* ---- reading a command body ---- */

static const char *coll_of(const bson_t *body)
{
	bson_iter_t it;
	if (bson_iter_init(&it, body) && wire_iter_next(&it) && WIRE_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return NULL;
}

/* A static view of the document under it (false when it is not one). */
static bool doc_view(const bson_iter_t *it, bson_t *out)
{
	uint32_t len;
	const uint8_t *data;
	if (!WIRE_ITER_HOLDS_DOCUMENT(it))
		return false;
	bson_iter_document(it, &len, &data);
	return bson_init_static(out, data, len);
}

/* hint: a key pattern document or an index name. */
static void take_hint(const bson_iter_t *it, bson_t *doc, sort_query *q)
{
	if (WIRE_ITER_HOLDS_UTF8(it))
		q->hint_name = bson_iter_utf8(it, NULL);
	else if (doc_view(it, doc))
		q->hint_doc = doc;
}

static void add_part(shape_part *parts, size_t *n, const char *key, shape_mode mode,
                     const bson_iter_t *it)
{
	parts[*n].key = key;
	parts[*n].mode = mode;
	parts[*n].str = NULL;
	parts[*n].value = *it;
	(*n)++;
}

/* The keys of a command body, or of one update / delete statement, that the
 * rules read. Each name means the same wherever it appears, so one switch
 * names a key once and each command says, as a set, which keys it reads. */
typedef enum {
	BK_NONE,
	BK_FILTER,      /* find, bulkWrite ops */
	BK_QUERY,       /* findAndModify, count, distinct */
	BK_Q,           /* update and delete statements */
	BK_UPDATE,      /* findAndModify */
	BK_U,           /* update statements */
	BK_UPDATE_MODS, /* bulkWrite update ops */
	BK_PIPELINE,
	BK_SORT,
	BK_COLLATION,
	BK_HINT,
	BK_UPSERT,
	BK_KEY, /* distinct */
	BK_ARRAY_FILTERS,
	BK_EXPLAIN, /* {aggregate, explain: true} */
	BK_LIMIT,   /* find, delete statements */
	BK_MULTI,   /* update statements, bulkWrite ops */
	BK_MIN_MAX, /* find's min and max */
} body_key;

#define BK(k) (1u << BK_##k)

static body_key key_of(const char *k)
{
	switch (k[0]) {
	case 'a':
		return key_eq(k, "arrayFilters") ? BK_ARRAY_FILTERS : BK_NONE;
	case 'c':
		return key_eq(k, "collation") ? BK_COLLATION : BK_NONE;
	case 'e':
		return key_eq(k, "explain") ? BK_EXPLAIN : BK_NONE;
	case 'f':
		return key_eq(k, "filter") ? BK_FILTER : BK_NONE;
	case 'h':
		return key_eq(k, "hint") ? BK_HINT : BK_NONE;
	case 'k':
		return key_eq(k, "key") ? BK_KEY : BK_NONE;
	case 'l':
		return key_eq(k, "limit") ? BK_LIMIT : BK_NONE;
	case 'm':
		if (key_eq(k, "multi"))
			return BK_MULTI;
		return key_eq(k, "min") || key_eq(k, "max") ? BK_MIN_MAX : BK_NONE;
	case 'p':
		return key_eq(k, "pipeline") ? BK_PIPELINE : BK_NONE;
	case 'q':
		return key_eq(k, "q") ? BK_Q : key_eq(k, "query") ? BK_QUERY : BK_NONE;
	case 's':
		return key_eq(k, "sort") ? BK_SORT : BK_NONE;
	case 'u':
		if (key_eq(k, "u"))
			return BK_U;
		if (key_eq(k, "update"))
			return BK_UPDATE;
		if (key_eq(k, "updateMods"))
			return BK_UPDATE_MODS;
		return key_eq(k, "upsert") ? BK_UPSERT : BK_NONE;
	default:
		return BK_NONE;
	}
}

/* The most parts a command shows (findAndModify). More means repeated keys,
 * which the server refuses; the rules still see every key, the shape shows
 * the first ones. */
#define BODY_MAX_PARTS 8

/* What the walk found. Views point into the body; the bson_t slots live
 * here because a view is never copied by value. */
typedef struct body {
	bson_iter_t filter, update, pipeline; /* each valid when its has_ is set */
	bool has_filter, has_update, has_pipeline;
	bool explain;
	bool multi;      /* an update statement's multi */
	bool min_max;    /* find's min or max */
	int64_t limit;   /* find's limit (its absolute value), a delete's limit */
	const char *key; /* distinct's key */
	sort_query q;    /* sort, collation and hint point into the slots; the
	                  * filter too once body_sort_query has run */
	bson_t filter_doc, sort, collation, hint;
	shape_part parts[BODY_MAX_PARTS]; /* the shape, in the body's order */
	size_t n;
} body;

/* Leaves the bson_t slots alone: on the request path, and only written
 * when their key is met. */
static void body_init(body *b, const char *db, const char *coll)
{
	b->has_filter = b->has_update = b->has_pipeline = b->explain = b->multi = false;
	b->min_max = false;
	b->limit = 0;
	b->key = NULL;
	memset(&b->q, 0, sizeof(b->q));
	b->q.db = db;
	b->q.coll = coll;
	b->n = 0;
}

/* One pass over doc, taking the keys in the set `wanted` (BK bits); one
 * switch case per key, hence its length. A
 * filter, pipeline, sort or collation of the wrong type is passed over; a
 * repeated key counts as its last occurrence. False when doc cannot be
 * read. */
static bool body_walk(body *b, const bson_t *doc, unsigned wanted)
{
	bson_iter_t it;
	if (!bson_iter_init(&it, doc))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it); /* shown as is; lives as the body */
		body_key key = key_of(k);
		if (!(wanted & (1u << key)))
			continue; /* BK_NONE is never wanted */
		bool taken = true;
		shape_mode mode = SHAPE_VERBATIM;
		switch (key) {
		case BK_FILTER:
		case BK_QUERY:
		case BK_Q:
			if ((taken = WIRE_ITER_HOLDS_DOCUMENT(&it))) {
				b->filter = it;
				b->has_filter = true;
				mode = SHAPE_FILTER;
			}
			break;
		case BK_UPDATE:
		case BK_U:
		case BK_UPDATE_MODS:
			b->update = it;
			b->has_update = true;
			mode = SHAPE_UPDATE;
			break;
		case BK_PIPELINE:
			if ((taken = WIRE_ITER_HOLDS_ARRAY(&it))) {
				b->pipeline = it;
				b->has_pipeline = true;
				mode = SHAPE_PIPELINE;
			}
			break;
		case BK_SORT:
			if ((taken = doc_view(&it, &b->sort)))
				b->q.sort = &b->sort;
			break;
		case BK_COLLATION:
			if ((taken = doc_view(&it, &b->collation)))
				b->q.collation = &b->collation;
			break;
		case BK_HINT:
			take_hint(&it, &b->hint, &b->q);
			break;
		case BK_ARRAY_FILTERS:
			mode = SHAPE_FILTER_LIST;
			break;
		case BK_EXPLAIN:
			/* Only a boolean or a number makes the server explain
			 * instead of run; it refuses any other type, so reading
			 * {explain: "false"} as explain (libbson calls every
			 * string true) would only have let it go unblocked. */
			b->explain |= (WIRE_ITER_HOLDS_BOOL(&it) || WIRE_ITER_HOLDS_NUMBER(&it)) &&
			              bson_iter_as_bool(&it);
			taken = false; /* not part of the shape */
			break;
		case BK_LIMIT:
			if (WIRE_ITER_HOLDS_NUMBER(&it)) {
				int64_t n = bson_iter_as_int64(&it);
				b->limit = n < 0 ? (n == INT64_MIN ? INT64_MAX : -n) : n;
			}
			taken = false; /* as before: limits do not change the shape */
			break;
		case BK_MULTI:
			b->multi = bson_iter_as_bool(&it);
			taken = false;
			break;
		case BK_MIN_MAX:
			b->min_max = true;
			break;
		case BK_KEY:
			if (WIRE_ITER_HOLDS_UTF8(&it))
				b->key = bson_iter_utf8(&it, NULL);
			break;
		case BK_UPSERT:
		case BK_NONE:
			break;
		}
		if (taken && b->n < BODY_MAX_PARTS)
			add_part(b->parts, &b->n, k, mode, &it);
	}
	return true;
}

/* The sort rule's question. The filter's view is made only here: only
 * the sort rule reads it as a document, and only when there is a sort. */
static const sort_query *body_sort_query(body *b)
{
	if (b->has_filter && b->q.sort && doc_view(&b->filter, &b->filter_doc))
		b->q.filter = &b->filter_doc;
	return &b->q;
}

/* The collection-scan question of a filter: the filter as a document (a
 * static view, made only when a rule asks), and what bounds the work. */
static void run_body_query(actx *ax, const rule_site *s, body *b, rule_query_kind kind)
{
	rule_query rq;
	rq.kind = kind;
	rq.q = b->q;
	rq.q.filter = NULL;
	if (b->has_filter && doc_view(&b->filter, &b->filter_doc))
		rq.q.filter = &b->filter_doc;
	rq.distinct_key = b->key;
	rq.min_max = b->min_max;
	switch (kind) {
	case RULE_QUERY_UPDATE:
		rq.limit = b->multi ? 0 : 1;
		break;
	case RULE_QUERY_FIND_AND_MODIFY:
		rq.limit = 1;
		break;
	default:
		rq.limit = b->limit;
		break;
	}
	run_query(ax, s, &rq);
}

/* The checks of a filter, an update and a query, after the sort checks.
 * The update checks see the statement's filter through the site. */
static void check_filter_update(actx *ax, rule_site *s, body *b, const target *t,
                                rule_query_kind kind)
{
	if (b->has_filter) {
		s->filter = &b->filter;
		run_filter(ax, s, &b->filter);
	}
	if (b->has_update)
		run_update(ax, s, &b->update);
	if (t->parts & PART_QUERY)
		run_body_query(ax, s, b, kind);
}

/* ---- commands ---- */

static rule_query_kind query_kind_of(cmd_kind k)
{
	switch (k) {
	case CMD_COUNT:
		return RULE_QUERY_COUNT;
	case CMD_DISTINCT:
		return RULE_QUERY_DISTINCT;
	case CMD_FIND_AND_MODIFY:
		return RULE_QUERY_FIND_AND_MODIFY;
	case CMD_UPDATE:
		return RULE_QUERY_UPDATE;
	case CMD_DELETE:
		return RULE_QUERY_DELETE;
	default:
		return RULE_QUERY_FIND;
	}
}

/* A rule set to block in some scope (or as its action), that reads one of
 * the parts in `parts`. */
static bool blocks_somewhere(const engine *e, int r, unsigned parts)
{
	const rule_config *rc = &e->cfg.rules[r];
	if (!(e->parts[r] & parts))
		return false;
	if (rc->action == RULE_BLOCK)
		return true;
	for (size_t i = 0; i < rc->nscopes && i < RULE_MAX_SCOPES; i++)
		if (rc->scopes[i].action == RULE_BLOCK)
			return true;
	return false;
}

/* {find: UUID(...)}: mongod runs find, count and distinct on the collection
 * with that UUID, so a query naming its collection that way would pass
 * every rule unjudged (no namespace for the scopes, no index list). It is
 * blocked when some rule that reads such a query blocks anywhere, and asked
 * to name its collection; drivers never send this form. Any other type of
 * collection name is refused by the server itself. No finding: nothing was
 * analysed, and the block counts in mongoguard_blocked_total. */
static verdict collection_by_uuid(actx *ax, const cmdview *v)
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
		if (ax->block) {
			ax->block->rule = (rule_id)r;
			snprintf(
			    ax->block->errmsg, sizeof(ax->block->errmsg),
			    "mongoguard blocked this %s: rule %s: the collection is named by UUID, "
			    "so mongoguard cannot tell which collection's rules and indexes "
			    "apply. Fix: name the collection.",
			    canonical_name(ax->kind), rule_name((rule_id)r));
		}
		return VERDICT_BLOCK;
	}
	return VERDICT_FORWARD;
}

/* find, findAndModify, count and distinct: one collection, one filter, and
 * for some a sort and an update. The sort rule finds no sort in count or
 * distinct and says nothing. */
static verdict analyze_query(actx *ax, const cmdview *v, unsigned keys)
{
	target t;
	body b;
	const char *coll = coll_of(&v->body);
	if (!coll)
		return collection_by_uuid(ax, v);
	if (!target_init(ax, &t, ax->db, coll))
		return VERDICT_FORWARD;
	body_init(&b, ax->db, coll);
	if (!body_walk(&b, &v->body, keys))
		return VERDICT_FORWARD;
	shape_spec spec = {canonical_name(ax->kind), coll, ax->explain, b.parts, b.n};
	rule_site site = site_of(&t, &spec);
	if (!run_sort(ax, &site, body_sort_query(&b)))
		return VERDICT_WAIT_INDEXES;
	check_filter_update(ax, &site, &b, &t, query_kind_of(ax->kind));
	return ax->verdict;
}

/* The filter of an aggregation's leading $match stages, and the $sort right
 * after them: only a sort at the start of the pipeline can use an index,
 * and only the leading $match stages choose the plan. Several leading
 * $match stages are merged (the server coalesces them); only then is
 * anything allocated. bson_t values are never copied by value (a view
 * points into its own struct), hence the two slots. */
typedef struct leading {
	bson_t first;  /* view of the first $match */
	bson_t merged; /* owned when several $match stages lead */
	bool owned;
	const bson_t *filter; /* NULL, &first or &merged */
	bson_t sort;
	bool has_sort;
} leading;

static void leading_stages(const bson_iter_t *pipeline, leading *l)
{
	bson_iter_t s, c;
	l->owned = l->has_sort = false;
	l->filter = NULL;
	if (!wire_iter_recurse(pipeline, &s))
		return;
	while (wire_iter_next(&s)) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&s) || !wire_iter_recurse(&s, &c) ||
		    !wire_iter_next(&c))
			return;
		const char *k = wire_iter_key(&c);
		if (key_eq(k, "$sort")) {
			l->has_sort = doc_view(&c, &l->sort);
			return;
		}
		if (!key_eq(k, "$match"))
			return;
		if (!l->filter) {
			if (!doc_view(&c, &l->first))
				return;
			l->filter = &l->first;
			continue;
		}
		bson_t m;
		if (!doc_view(&c, &m))
			return;
		if (!l->owned) {
			bson_init(&l->merged);
			bson_concat(&l->merged, &l->first);
			l->owned = true;
			l->filter = &l->merged;
		}
		bson_concat(&l->merged, &m);
	}
}

#define AGGREGATE_KEYS (BK(PIPELINE) | BK(COLLATION) | BK(HINT) | BK(EXPLAIN))

static verdict analyze_aggregate(actx *ax, const cmdview *v)
{
	target t;
	body b;
	const char *coll = coll_of(&v->body); /* NULL for {aggregate: 1} */
	body_init(&b, ax->db, coll);
	if (!body_walk(&b, &v->body, AGGREGATE_KEYS))
		return VERDICT_FORWARD;
	if (b.explain)
		ax->explain = true; /* {aggregate, explain: true} runs nothing */
	if (!b.has_pipeline || !target_init(ax, &t, ax->db, coll))
		return VERDICT_FORWARD;
	shape_spec spec = {"aggregate", coll, ax->explain, b.parts, b.n};
	rule_site site = site_of(&t, &spec);

	bool ready = true;
	leading l = {.owned = false, .filter = NULL, .has_sort = false};
	if (coll && (t.parts & (PART_SORT | PART_QUERY)) && ax->e->ic) {
		leading_stages(&b.pipeline, &l);
		if (l.has_sort && (t.parts & PART_SORT)) {
			b.q.filter = l.filter;
			b.q.sort = &l.sort;
			ready = run_sort(ax, &site, &b.q);
		}
	}
	if (ready) {
		if (l.filter && (t.parts & PART_QUERY)) {
			rule_query rq = {.kind = RULE_QUERY_AGGREGATE, .q = b.q, .min_max = false};
			rq.q.filter = l.filter;
			rq.q.sort = l.has_sort ? &l.sort : NULL;
			run_query(ax, &site, &rq);
		}
		run_pipeline(ax, &site, &b.pipeline);
	}
	if (l.owned)
		bson_destroy(&l.merged);
	return ready ? ax->verdict : VERDICT_WAIT_INDEXES;
}

/* create / collMod of a view: {create: "v", viewOn: "c", pipeline: [...]}.
 * The pipeline runs on every read of the view, so a pattern a rule blocks
 * in an aggregation is blocked where the view is defined; a view hid it
 * from every later find. Only the pipeline checks run: there is no query
 * to plan yet. A create without a pipeline (a collection) costs a lookup. */
static verdict analyze_view(actx *ax, const cmdview *v)
{
	target t;
	body b;
	const char *coll = coll_of(&v->body);
	bson_iter_t it;
	if (!coll || !bson_iter_init_find(&it, &v->body, "pipeline"))
		return VERDICT_FORWARD;
	body_init(&b, ax->db, coll);
	if (!body_walk(&b, &v->body, BK(PIPELINE) | BK(COLLATION)) || !b.has_pipeline ||
	    !target_init(ax, &t, ax->db, coll) || !(t.parts & PART_PIPELINE))
		return VERDICT_FORWARD;
	shape_spec spec = {canonical_name(ax->kind), coll, ax->explain, b.parts, b.n};
	rule_site site = site_of(&t, &spec);
	run_pipeline(ax, &site, &b.pipeline);
	return ax->verdict;
}

/* The statements of update / delete / bulkWrite. arrayFilters are shown in
 * the shape but never checked for regexes: they pick elements inside
 * documents the filter already selected, so they never decide an index
 * scan. */
#define UPDATE_STMT_KEYS                                                                           \
	(BK(Q) | BK(U) | BK(UPSERT) | BK(ARRAY_FILTERS) | BK(MULTI) | BK(HINT) | BK(COLLATION))
#define BULK_UPDATE_KEYS                                                                           \
	(BK(FILTER) | BK(UPDATE_MODS) | BK(UPSERT) | BK(ARRAY_FILTERS) | BK(MULTI) | BK(HINT) |    \
	 BK(COLLATION))
#define DELETE_STMT_KEYS (BK(Q) | BK(LIMIT) | BK(HINT) | BK(COLLATION))
#define BULK_DELETE_KEYS (BK(FILTER) | BK(MULTI) | BK(HINT) | BK(COLLATION))

/* op: bulkWrite's "update" / "delete", shown first in the shape, or NULL. */
static void analyze_stmt(actx *ax, const target *t, const bson_t *doc, unsigned keys,
                         rule_query_kind kind, const char *command, const char *shape_target,
                         const char *op)
{
	body b;
	body_init(&b, NULL, NULL);
	if (op) {
		b.parts[0].key = "op";
		b.parts[0].str = op;
		b.parts[0].mode = SHAPE_VERBATIM;
		b.n = 1;
	}
	if (!body_walk(&b, doc, keys))
		return;
	if (kind == RULE_QUERY_DELETE && op) /* a bulkWrite delete: multi, not limit */
		b.limit = b.multi ? 0 : 1;
	b.q.db = t->db;
	b.q.coll = t->coll;
	shape_spec spec = {command, shape_target, ax->explain, b.parts, b.n};
	rule_site site = site_of(t, &spec);
	check_filter_update(ax, &site, &b, t, kind);
}

static verdict analyze_update_delete(actx *ax, const cmdview *v)
{
	target t;
	const char *coll = coll_of(&v->body);
	if (!coll || !target_init(ax, &t, ax->db, coll))
		return VERDICT_FORWARD;
	bool update = ax->kind == CMD_UPDATE;
	if (!update && !(t.parts & (PART_FILTER | PART_QUERY)))
		return VERDICT_FORWARD; /* a delete has only filters */
	cmdview_docs d;
	bson_t doc;
	cmdview_docs_init(&d, v, update ? "updates" : "deletes");
	while (cmdview_docs_next(&d, &doc))
		analyze_stmt(ax, &t, &doc, update ? UPDATE_STMT_KEYS : DELETE_STMT_KEYS,
		             update ? RULE_QUERY_UPDATE : RULE_QUERY_DELETE,
		             canonical_name(ax->kind), coll, NULL);
	return ax->verdict;
}

/* insert: each document, for the rules that read inserted documents. The
 * shape is the command and the collection only: a document is data, and
 * every large document of one collection is one finding, counted. */
static verdict analyze_insert(actx *ax, const cmdview *v)
{
	target t;
	/* Every document is smaller than the request: most inserts end here. */
	uint64_t bytes = v->body.len;
	for (size_t i = 0; i < v->nseqs; i++)
		bytes += v->seqs[i].docs_len;
	if (bytes < ax->e->doc_floor)
		return VERDICT_FORWARD;
	const char *coll = coll_of(&v->body);
	if (!coll || !target_init(ax, &t, ax->db, coll) || !(t.parts & PART_DOCUMENT))
		return VERDICT_FORWARD;
	shape_spec spec = {"insert", coll, ax->explain, NULL, 0};
	rule_site site = site_of(&t, &spec);
	cmdview_docs d;
	bson_t doc;
	cmdview_docs_init(&d, v, "documents");
	while (cmdview_docs_next(&d, &doc))
		run_document(ax, &site, &doc);
	return ax->verdict;
}

/* A bulkWrite insert op: {insert: i, document: {...}}. */
static void analyze_insert_op(actx *ax, const target *t, const bson_t *op)
{
	bson_iter_t it;
	bson_t doc;
	if (!(t->parts & PART_DOCUMENT) || !bson_iter_init_find(&it, op, "document") ||
	    !doc_view(&it, &doc))
		return;
	shape_part part = {.key = "op", .mode = SHAPE_VERBATIM, .str = "insert"};
	shape_spec spec = {"bulkWrite", t->ns, ax->explain, &part, 1};
	rule_site site = site_of(t, &spec);
	run_document(ax, &site, &doc);
}

/* "db.coll" into db (cap bytes) and the collection after the first dot.
 * False when there is no dot or the database name does not fit. */
static bool split_ns(const char *ns, char *db, size_t cap, const char **coll)
{
	const char *dot = strchr(ns, '.');
	if (!dot || (size_t)(dot - ns) >= cap)
		return false;
	memcpy(db, ns, (size_t)(dot - ns));
	db[dot - ns] = '\0';
	*coll = dot + 1;
	return true;
}

/* bulkWrite (admin): ops name their namespace by index into nsInfo.
 * nsInfo is read once per request into a table of its "ns" strings
 * (pointers into the message; NULL for an entry without one). Scanning
 * nsInfo again for every op was quadratic: 20,000 ops naming the last of
 * 20,000 entries (a 1.7 MB message, 300 bytes as zstd OP_COMPRESSED) held
 * a worker for 50 s under ASan. The table lives on the stack for the
 * namespaces a real bulkWrite names; only a larger nsInfo allocates. */
#define BULK_NS_INLINE 64

typedef struct bulk_nsinfo {
	const char *inline_ns[BULK_NS_INLINE];
	const char **ns; /* inline_ns, or malloc'd when nsInfo is larger */
	size_t n;
} bulk_nsinfo;

/* False only when memory runs out; the ops then go unanalyzed. */
static bool bulk_nsinfo_init(bulk_nsinfo *b, const cmdview *v)
{
	cmdview_docs d;
	bson_t doc;
	size_t count = 0;
	cmdview_docs_init(&d, v, "nsInfo");
	while (cmdview_docs_next(&d, &doc))
		count++;
	b->n = 0;
	b->ns = count <= BULK_NS_INLINE ? b->inline_ns : malloc(count * sizeof(*b->ns));
	if (!b->ns)
		return false;
	cmdview_docs_init(&d, v, "nsInfo");
	while (b->n < count && cmdview_docs_next(&d, &doc)) {
		bson_iter_t it;
		b->ns[b->n++] = bson_iter_init_find(&it, &doc, "ns") && WIRE_ITER_HOLDS_UTF8(&it)
		                    ? bson_iter_utf8(&it, NULL)
		                    : NULL;
	}
	return true;
}

static void bulk_nsinfo_free(bulk_nsinfo *b)
{
	if (b->ns != b->inline_ns)
		free(b->ns);
}

static bool bulk_ns(const bulk_nsinfo *b, int64_t idx, char *ns, size_t cap)
{
	if (idx < 0 || (uint64_t)idx >= b->n || !b->ns[idx])
		return false;
	snprintf(ns, cap, "%s", b->ns[idx]);
	return true;
}

static verdict analyze_bulk_write(actx *ax, const cmdview *v)
{
	cmdview_docs d;
	bson_t op;
	bulk_nsinfo nsinfo;
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
		if (is_insert)
			analyze_insert_op(ax, &t, &op);
		else
			analyze_stmt(ax, &t, &op, is_update ? BULK_UPDATE_KEYS : BULK_DELETE_KEYS,
			             is_update ? RULE_QUERY_UPDATE : RULE_QUERY_DELETE, "bulkWrite",
			             t.ns, kind);
	}
	bulk_nsinfo_free(&nsinfo);
	return ax->verdict;
}

/* The body keys each query-like command's rules read (and its shape shows). */
static unsigned query_keys(cmd_kind k)
{
	switch (k) {
	case CMD_FIND:
		return BK(FILTER) | BK(SORT) | BK(COLLATION) | BK(HINT) | BK(LIMIT) | BK(MIN_MAX);
	case CMD_FIND_AND_MODIFY:
		return BK(QUERY) | BK(SORT) | BK(UPDATE) | BK(UPSERT) | BK(COLLATION) | BK(HINT);
	case CMD_COUNT:
		return BK(QUERY) | BK(HINT) | BK(COLLATION);
	case CMD_DISTINCT:
		return BK(KEY) | BK(QUERY) | BK(HINT) | BK(COLLATION);
	default:
		return 0;
	}
}

static verdict dispatch(actx *ax, const cmdview *v)
{
	switch (ax->kind) {
	case CMD_FIND:
	case CMD_FIND_AND_MODIFY:
	case CMD_COUNT:
	case CMD_DISTINCT:
		return analyze_query(ax, v, query_keys(ax->kind));
	case CMD_INSERT:
		return analyze_insert(ax, v);
	case CMD_AGGREGATE:
		return analyze_aggregate(ax, v);
	case CMD_UPDATE:
	case CMD_DELETE:
		return analyze_update_delete(ax, v);
	case CMD_BULK_WRITE:
		return analyze_bulk_write(ax, v);
	case CMD_CREATE:
	case CMD_COLL_MOD:
		return analyze_view(ax, v);
	default:
		return VERDICT_FORWARD;
	}
}

/* {explain: {find: ...}}: the inner command, in a view of its own (a
 * cmdview is never copied). False when there is none. */
static bool explained(const cmdview *v, cmdview *inner)
{
	bson_iter_t it;
	if (!bson_iter_init(&it, &v->body) || !wire_iter_next(&it))
		return false;
	memset(inner, 0, sizeof(*inner));
	inner->origin = v->origin;
	inner->db = v->db;
	if (!doc_view(&it, &inner->body) || !bson_iter_init(&it, &inner->body) ||
	    !wire_iter_next(&it))
		return false;
	inner->name = wire_iter_key(&it);
	return true;
}

bool engine_shape(const cmdview *v, char *ns, size_t nscap, char *command, size_t cmdcap,
                  char *shape, uint64_t *hash)
{
	cmdview inner;
	bool explain = false;
	cmd_kind kind = classify(v->name);
	if (kind == CMD_EXPLAIN) {
		if (!explained(v, &inner))
			return false;
		v = &inner;
		kind = classify(v->name);
		explain = true;
	}
	const char *coll = coll_of(&v->body);
	body b;
	body_init(&b, v->db, coll);
	const char *name = kind == CMD_NONE || kind == CMD_EXPLAIN ? (v->name ? v->name : "")
	                                                           : canonical_name(kind);
	bson_t stmt;
	cmdview_docs d;
	bool ok = true;
	switch (kind) {
	case CMD_FIND:
	case CMD_FIND_AND_MODIFY:
	case CMD_COUNT:
	case CMD_DISTINCT:
		ok = body_walk(&b, &v->body, query_keys(kind));
		break;
	case CMD_AGGREGATE:
		ok = body_walk(&b, &v->body, AGGREGATE_KEYS);
		explain |= b.explain;
		break;
	case CMD_UPDATE:
	case CMD_DELETE: /* as findings on it: the first statement's parts */
		cmdview_docs_init(&d, v, kind == CMD_UPDATE ? "updates" : "deletes");
		if (cmdview_docs_next(&d, &stmt))
			ok = body_walk(&b, &stmt,
			               kind == CMD_UPDATE ? UPDATE_STMT_KEYS : DELETE_STMT_KEYS);
		break;
	default: /* insert, bulkWrite and the rest: the command alone */
		break;
	}
	if (!ok)
		return false;
	ns_join(ns, nscap, v->db ? v->db : "",
	        coll                    ? coll
	        : kind == CMD_AGGREGATE ? "$cmd.aggregate"
	                                : "$cmd");
	snprintf(command, cmdcap, "%s", explain ? "explain" : name);
	shape_spec spec = {name, coll, explain, b.parts, b.n};
	shape_render(&spec, true, shape, SHAPE_BUF_LEN);
	*hash = shape_hash(ns, command, shape);
	return true;
}

verdict engine_analyze(engine *e, const cmdview *v, const request_ctx *rc, block_info *block)
{
	cmd_kind kind = classify(v->name);
	if (kind == CMD_NONE || !v->db)
		return VERDICT_FORWARD; /* hello, getMore, ...: nothing to check */
	/* Field by field: memo_ns is written before it is read (memo_used),
	 * and zeroing it on every request showed in the benchmark. */
	actx ax;
	ax.e = e;
	ax.rc = rc;
	ax.block = block;
	ax.db = v->db;
	ax.kind = kind;
	ax.explain = false;
	ax.verdict = VERDICT_FORWARD;
	ax.nreported = 0;
	ax.memo_used = false;
	ax.memo_r = INDEXES_UNAVAILABLE;
	ax.memo_set = NULL;
	if (kind != CMD_EXPLAIN) {
		verdict vd = dispatch(&ax, v);
		index_set_release(ax.memo_set);
		return vd;
	}

	/* {explain: {find: ...}, verbosity: ...}: analyse the inner command. */
	cmdview inner;
	if (!explained(v, &inner))
		return VERDICT_FORWARD;
	ax.kind = classify(inner.name);
	ax.explain = true;
	if (ax.kind == CMD_NONE || ax.kind == CMD_EXPLAIN || ax.kind == CMD_INSERT ||
	    ax.kind == CMD_CREATE || ax.kind == CMD_COLL_MOD)
		return VERDICT_FORWARD; /* insert, create and collMod cannot be explained */
	verdict vd = dispatch(&ax, &inner);
	index_set_release(ax.memo_set);
	return vd == VERDICT_BLOCK ? VERDICT_FORWARD : vd; /* belt and braces */
}

/* ---- DDL ---- */

static void invalidate_dotted(index_cache *ic, const char *dotted)
{
	char db[128];
	const char *coll;
	if (split_ns(dotted, db, sizeof(db), &coll))
		index_cache_invalidate(ic, db, coll);
}

typedef enum { DDL_NONE, DDL_COLL, DDL_DATABASE, DDL_RENAME, DDL_CLONE } ddl_kind;

/* Spellings compared without case: invalidating too often costs a
 * listIndexes; missing one leaves a wrong index list in the cache. */
static ddl_kind ddl_of(const cmdview *v)
{
	static const char *const per_coll[] = {
	    "createIndexes", "dropIndexes", "deleteIndexes",   "drop",
	    "collMod",       "create",      "convertToCapped", NULL,
	};
	/* on every request: every name above starts with c, d or r */
	char first = v->name ? (char)(v->name[0] | 0x20) : 0;
	if (first != 'c' && first != 'd' && first != 'r')
		return DDL_NONE;
	for (const char *const *n = per_coll; *n; n++)
		if (strcasecmp(v->name, *n) == 0)
			return DDL_COLL;
	if (strcasecmp(v->name, "dropDatabase") == 0)
		return DDL_DATABASE;
	if (strcasecmp(v->name, "renameCollection") == 0)
		return DDL_RENAME;
	if (strcasecmp(v->name, "cloneCollectionAsCapped") == 0)
		return DDL_CLONE;
	return DDL_NONE;
}

bool engine_is_ddl(const cmdview *v)
{
	return ddl_of(v) != DDL_NONE;
}

void engine_note_ddl(engine *e, const cmdview *v)
{
	ddl_kind kind = ddl_of(v);
	if (!e->ic || !v->db || kind == DDL_NONE)
		return;
	bson_iter_t it;
	if (!bson_iter_init(&it, &v->body) || !wire_iter_next(&it))
		return;
	const char *arg = WIRE_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : NULL;
	switch (kind) {
	case DDL_COLL:
		if (arg)
			index_cache_invalidate(e->ic, v->db, arg);
		break;
	case DDL_DATABASE:
		index_cache_invalidate(e->ic, v->db, NULL);
		break;
	case DDL_RENAME: /* on admin: "db.coll" to "db.coll" */
		if (arg)
			invalidate_dotted(e->ic, arg);
		if (bson_iter_init_find(&it, &v->body, "to") && WIRE_ITER_HOLDS_UTF8(&it))
			invalidate_dotted(e->ic, bson_iter_utf8(&it, NULL));
		break;
	case DDL_CLONE:
		if (bson_iter_init_find(&it, &v->body, "toCollection") && WIRE_ITER_HOLDS_UTF8(&it))
			index_cache_invalidate(e->ic, v->db, bson_iter_utf8(&it, NULL));
		break;
	default:
		break;
	}
}

void engine_flush_summaries(engine *e)
{
	if (e->sink)
		findings_table_flush(e->findings, e->sink, e->sink_arg);
}
