/* Findings: what the engine does when a check reports one (rule_api.h's
 * rule_report). The rule's action at the site decides, after a block's
 * sample; a repeat that blocks nothing is only counted; the rule's words
 * are rendered once, and only when the finding blocks first or reaches the
 * sink. The block message and the shape-hash cache live here too.
 *
 * Cost: nothing here runs unless a rule fires; report() is noinline so its
 * 20 KB of stack stays off the path of requests where nothing does. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "analyzers/engine/engine_int.h"
#include "analyzers/engine/facts.h"
#include "analyzers/engine/shape.h"
#include "analyzers/planner/query_preds.h"
#include "analyzers/planner/stages.h"
#include "protocol/wire_iter.h"

/* The error a block sends; a dry-run logs the same words. */
static void block_message(const rule_ctx *ax, rule_id rule, const rule_words *w, char *out,
                          size_t size)
{
	snprintf(out, size, "mongoguard blocked this %s: rule %s: %s. Fix: %s.",
	         command_name(ax->cmd), rule_name(rule), w->detail, w->fix);
}

static void fill_block(rule_ctx *ax, rule_id rule, const rule_words *w)
{
	if (!ax->block)
		return;
	ax->block->rule = rule;
	block_message(ax, rule, w, ax->block->errmsg, sizeof(ax->block->errmsg));
}

/* The shape's hash covers the redacted text, so dedupe and hot-path counts
 * ignore literal values even when the log shows them. */
uint64_t rule_shape_redacted(const rule_ctx *ax, const rule_site *s, char *buf)
{
	shape_render(s->shape, true, buf, SHAPE_BUF_LEN);
	return shape_hash(s->ns, rule_ctx_command(ax), buf);
}

/* Whether a finding of rule here could still change anything: the verdict
 * (a first block) or the sink (under MAX_REPORTS_PER_REQUEST). The
 * per-statement rules ask first, so that in a large batch whose statements
 * all match, the statements after the cap are not walked and worded for
 * nothing. */
bool rule_wanted(const rule_ctx *ax, const rule_site *s, rule_id rule)
{
	rule_action action = s->act[rule];
	if (action == RULE_OFF)
		return false;
	if (action == RULE_BLOCK && ax->verdict != VERDICT_BLOCK)
		return true;
	return ax->nreported < MAX_REPORTS_PER_REQUEST && ax->e->sink;
}

/* ---- the shape-hash cache ---- */

/* Shape hashes, remembered. Rendering a shape costs far more than hashing
 * its raw parts, a repeated finding needs only the hash, and the same bytes
 * always render the same shape, so the engine remembers, per hash of the raw parts, the shape hash
 * they gave. An entry is three words written without a lock (workers share
 * the engine); a reader trusts an entry only when its check word agrees
 * with the other two, so a torn read of two writers' entries is a miss,
 * never a wrong hash. */

#define MIX_MUL    0x9e3779b97f4a7c15ull
#define SLOT_CHECK 0x6a09e667f3bcc909ull

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t w;
	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&w, b, 8);
		h = (h ^ w) * MIX_MUL;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, b, n);
	h = (h ^ w ^ ((uint64_t)n << 56)) * MIX_MUL;
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
	h = mix_str(h, rule_ctx_command(ax));
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
			h = mix_bytes(h, p->value.raw + p->value.at, p->value.next - p->value.at);
	}
	return h;
}

static uint64_t slot_check(uint64_t key, uint64_t hash)
{
	return key ^ (hash * MIX_MUL) ^ SLOT_CHECK;
}

static bool shape_hash_cached(const engine *e, uint64_t key, uint64_t *hash)
{
	shape_hash_slot *m = &e->shape_hashes[key & (SHAPE_HASH_SLOTS - 1)];
	uint64_t k = atomic_load_explicit(&m->key, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&m->hash, memory_order_relaxed);
	uint64_t c = atomic_load_explicit(&m->check, memory_order_relaxed);
	if (k != key || c != slot_check(k, h))
		return false;
	*hash = h;
	return true;
}

static void shape_hash_remember(engine *e, uint64_t key, uint64_t hash)
{
	shape_hash_slot *m = &e->shape_hashes[key & (SHAPE_HASH_SLOTS - 1)];
	atomic_store_explicit(&m->key, key, memory_order_relaxed);
	atomic_store_explicit(&m->hash, hash, memory_order_relaxed);
	atomic_store_explicit(&m->check, slot_check(key, hash), memory_order_relaxed);
}

/* The finding's redacted shape hash, from the cache when it knows the raw
 * bytes; *shape gets the text when it had to be rendered. */
static uint64_t finding_hash(rule_ctx *ax, const rule_site *s, char *redacted, const char **shape)
{
	uint64_t key = raw_key(ax, s), hash;
	if (!shape_hash_cached(ax->e, key, &hash)) {
		hash = rule_shape_redacted(ax, s, redacted);
		*shape = redacted;
		shape_hash_remember(ax->e, key, hash);
	}
	return hash;
}

/* Whether the engine's facts of the statement's filter (facts.h) show it
 * names only operators mongod knows: every member read, none a top-level
 * operator, and no operator document naming another operator than those
 * the facts tell apart, nor a $not or $elemMatch, whose insides they do
 * not read. The common case, answered without a walk. */
static bool filter_known(const rule_site *s)
{
	const filter_facts *ff = s->facts && s->facts->has_filter ? &s->facts->filter : NULL;
	return ff && ff->complete && !ff->tops &&
	       !(ff->ops & (FOP_OTHER | FOP_NOT | FOP_ELEM_MATCH));
}

/* Whether mongod refuses the statement a finding is on, for an operator it
 * does not know in its filter, its update or its pipeline: it runs none of
 * it, and answers with its own error, so there is nothing to find or
 * block. The one place every rule's findings meet this question, asked
 * only of a finding about to be reported: most requests report none. */
static bool site_refused(const rule_site *s)
{
	bson_t f;
	return (s->parsed_filter && !filter_known(s) && wire_iter_doc_view(s->parsed_filter, &f) &&
	        query_filter_refused(&f)) ||
	       (s->parsed_update && facts_update_refused(s->parsed_update)) ||
	       (s->parsed_pipeline && pipeline_refused(s->parsed_pipeline));
}

/* A late call (engine_late.waited): a check's finding is new only when
 * the check read a list that was not known on time, or when its rule was
 * owed whole at the site (its checks did not run on time). Anything else
 * (a $sort in a $facet, which needs no list; the side whose list was
 * known) was found on time already. */
static bool late_and_found_before(const rule_ctx *ax, rule_id rule)
{
	if (!ax->late_call || !ax->cur_site || ax->waited_call == ax->ncalled)
		return false;
	const engine_late *l = ax->rc->late;
	uint64_t h = engine_ns_hash(ax->cur_site->ns); /* where it was owed: a join
	                                                  reports at `from` */
	for (unsigned i = 0; i < l->n; i++)
		if (l->at[i].ns_hash == h && l->at[i].kinds == OWE_EVERY_CHECK &&
		    (l->at[i].rules >> rule & 1))
			return false;
	return true;
}

/* Applies the action and reports. The rule's words are rendered here, once,
 * and only when the finding blocks first or reaches the sink. shape/hash
 * may come precomputed (the hot-path rule needs them to count); otherwise
 * they are rendered here. noinline: the words and two shape buffers (20 KB
 * of stack) stay off the path of requests where nothing fires. */
static __attribute__((noinline)) void report(rule_ctx *ax, const rule_site *s, rule_id rule,
                                             const void *facts, const char *pre_shape,
                                             uint64_t pre_hash)
{
	rule_action action = s->act[rule];
	if (action == RULE_OFF || ax->wait || site_refused(s) || late_and_found_before(ax, rule))
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
	if (to_sink && ax->e->tally)
		ax->e->tally(ax->e->tally_arg, rule, action);
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
	if (!shape) { /* the cache gave the hash; a first occurrence needs the text */
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
	    .command = rule_ctx_command(ax),
	    .shape_hash = hash,
	    .request_hash = ax->own_hash ? ax->own_hash : hash,
	    .shape = shape,
	    .suggestion = w.suggestion,
	    .detail = w.detail,
	    .app_name = app,
	    .client = ax->rc && ax->rc->client ? ax->rc->client : "",
	    .conn = ax->rc ? ax->rc->conn : 0,
	    .would_block = action == RULE_DRY_RUN ? would : NULL,
	    .sampled_out = sampled_out,
	    .late = ax->late_call,
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

void engine_block_uuid(rule_ctx *ax, rule_id r)
{
	if (!ax->block)
		return;
	ax->block->rule = r;
	snprintf(ax->block->errmsg, sizeof(ax->block->errmsg),
	         "mongoguard blocked this %s: rule %s: the collection is named by UUID, "
	         "so mongoguard cannot tell which collection's rules and indexes "
	         "apply. Fix: name the collection.",
	         command_name(ax->cmd), rule_name(r));
}
