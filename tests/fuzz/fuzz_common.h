/* Shared by the libFuzzer targets: two engines that judge everything the
 * fuzzer decodes, built once per process.
 *
 * Both engines have every rule set to `block` (the most code runs: scopes,
 * block messages), hot-path-lookup firing on the second execution and
 * large-document on arrays of 5 and documents of 4 KiB; the
 * first shows literals in shapes (redaction off), the second redacts. The
 * second one has an index cache (never connected: uri NULL) holding known
 * index lists (and 50,000 documents) for a few namespaces the seeds use, so
 * the sort and collection-scan rules and ESR run too; other namespaces stay "pending", which
 * no_wait turns into no verdict. State carried between inputs (dedupe table, hot-path counts,
 * pending fetches) is bounded by the engine itself, which is part of what is
 * being tested. */
#ifndef MG_TESTS_FUZZ_COMMON_H
#define MG_TESTS_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/engine/engine.h"
#include "analyzers/catalog/index_cache.h"
#include "analyzers/planner/index_set.h"
#include "analyzers/rules/rule_doc.h"
#include "analyzers/rules/rule_lookup.h"
#include "protocol/cmdview.h"
#include "protocol/frame.h"
#include "protocol/opmsg.h"
#include "protocol/opquery.h"
#include "protocol/reply.h"

static engine *fz_plain, *fz_indexed;
static int64_t fz_clock;

/* The one rule a per-rule target (fuzz_rule.h) runs, or -1 for all: the
 * sink checks that no other rule ever reports. */
static int fz_only_rule = -1;

/* Reads every string of a finding so ASan checks they are live and
 * terminated while the sink runs. */
static void fz_sink(void *arg, const finding *f)
{
	size_t *total = arg;
	if (fz_only_rule >= 0 && (int)f->rule != fz_only_rule)
		abort(); /* a rule that is off reported */
	*total += strlen(f->ns) + strlen(f->command) + strlen(f->shape) + strlen(f->suggestion) +
	          strlen(f->detail) + strlen(f->app_name) + strlen(f->client);
}

static size_t fz_sink_total;

static void fz_put(index_cache *ic, const char *db, const char *coll, const char *json)
{
	char err[256];
	index_set *s = index_set_from_json(json, err, sizeof err);
	if (!s) {
		fprintf(stderr, "fuzz setup: bad index JSON: %s\n", err);
		abort();
	}
	index_set_set_doc_count(s, 50000); /* over minDocuments: collection-scan judges */
	index_cache_put(ic, db, coll, s);
	index_set_release(s);
}

static index_cache *fz_ic;

/* Known lists for the namespaces the seeds use. Called again after a DDL
 * command dropped them, so the sort rule keeps running. */
static void fz_fill(index_cache *ic)
{
	const char *idx =
	    "[{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"},"
	    " {\"v\": 2, \"key\": {\"a\": 1, \"b\": -1}, \"name\": \"a_1_b_-1\"},"
	    " {\"v\": 2, \"key\": {\"status\": 1, \"created\": -1}, \"name\": \"s_c\"},"
	    " {\"v\": 2, \"key\": {\"name\": 1}, \"name\": \"name_ci\","
	    "  \"collation\": {\"locale\": \"en\", \"strength\": 2}},"
	    " {\"v\": 2, \"key\": {\"x.y\": 1, \"z\": 1}, \"name\": \"xy_z\", \"sparse\": true},"
	    " {\"v\": 2, \"key\": {\"t\": \"text\"}, \"name\": \"t_text\"},"
	    " {\"v\": 2, \"key\": {\"h\": \"hashed\"}, \"name\": \"h_hashed\"},"
	    " {\"v\": 2, \"key\": {\"$**\": 1}, \"name\": \"wild\", \"hidden\": false},"
	    " {\"v\": 2, \"key\": {\"p\": 1}, \"name\": \"p_partial\","
	    "  \"partialFilterExpression\": {\"p\": {\"$gt\": 5}}}]";
	fz_put(ic, "test", "c", idx);
	fz_put(ic, "shop", "orders", idx);
	fz_put(ic, "db", "coll", "[{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"}]");
	index_set *opaque = index_set_new_opaque("a view");
	index_cache_put(ic, "test", "view", opaque);
	index_set_release(opaque);
}

/* The fuzz engines' configuration: every rule (or only `only`, the others
 * off) at block. */
static void fz_config(engine_config *cfg, int only)
{
	rule_config_defaults(cfg);
	for (int i = 0; i < RULE_COUNT; i++)
		cfg->rules[i].action = only < 0 || i == only ? RULE_BLOCK : RULE_OFF;
	cfg->rules[RULE_HOT_PATH_LOOKUP].params[LOOKUP_PARAM_THRESHOLD] = 2;
	/* limits small inputs reach, so large-document's walk and words run */
	cfg->rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_BYTES] = 4096;
	cfg->rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_ARRAY_LENGTH] = 4;
	/* one scope so rule_effective_action's glob matching runs as well */
	if (only < 0 || only == RULE_CASE_INSENSITIVE_REGEX) {
		rule_scope *sc = &cfg->rules[RULE_CASE_INSENSITIVE_REGEX].scopes[0];
		snprintf(sc->namespaces[0], RULE_PATTERN_LEN, "%s", "shop.*");
		sc->nnamespaces = 1;
		snprintf(sc->apps[0], RULE_PATTERN_LEN, "%s", "fuzz*");
		sc->napps = 1;
		sc->action = RULE_BLOCK;
		cfg->rules[RULE_CASE_INSENSITIVE_REGEX].nscopes = 1;
	}
	cfg->redact_literals = false; /* so literal rendering runs too */
}

static void fz_setup_cache(void)
{
	if (fz_ic)
		return;
	fz_ic = index_cache_new(NULL, 0, NULL, NULL, NULL, 0);
	fz_fill(fz_ic);
}

static inline void fz_setup(void)
{
	if (fz_plain)
		return;
	engine_config cfg;
	fz_config(&cfg, -1);
	fz_plain = engine_new(&cfg, NULL, fz_sink, &fz_sink_total);
	cfg.redact_literals = true;
	fz_setup_cache();
	fz_indexed = engine_new(&cfg, fz_ic, fz_sink, &fz_sink_total);
}

/* The error reply a block sends, as the session builds it: it must parse
 * as the form asked for, and its body be valid BSON with valid UTF-8 (a
 * driver that cannot decode it never shows the block message). */
static void fz_check_block_reply(const block_info *b, reply_form form)
{
	size_t len = 0;
	uint8_t *msg = reply_error(form, 5, 3, 13, "Unauthorized", b->errmsg, NULL, &len);
	if (!msg)
		abort();
	wire_error err = {0};
	const uint8_t *body = NULL;
	size_t body_len = 0;
	if (len < WIRE_HEADER_LEN || wire_read_i32(msg) != (int32_t)len)
		abort();
	if (form == REPLY_FORM_OPMSG) {
		opmsg m;
		if (!opmsg_parse(msg, len, &m, &err))
			abort();
		body = m.body;
		body_len = m.body_len;
	} else {
		opreply r;
		if (!opreply_parse(msg, len, &r, &err))
			abort();
		body = r.docs;
		body_len = r.docs_len;
	}
	bson_t doc;
	if (!bson_init_static(&doc, body, body_len) ||
	    !bson_validate(&doc, BSON_VALIDATE_UTF8, NULL))
		abort();
	free(msg);
}

/* Runs a decoded command through the engines es[0..n), as the proxy would. */
static void fz_run(engine *const *es, int n, const cmdview *v)
{
	fz_clock += 7;
	request_ctx rc = {
	    .app_name = (fz_clock & 8) ? "fuzzapp" : "",
	    .client = "127.0.0.1:1",
	    .now_ms = fz_clock,
	    .no_wait = true,
	};
	block_info b;
	for (int i = 0; i < n; i++) {
		verdict r = engine_analyze(es[i], v, &rc, &b);
		if (r == VERDICT_BLOCK && strnlen(b.errmsg, sizeof b.errmsg) == sizeof b.errmsg)
			abort(); /* block message must be terminated */
		if (r == VERDICT_BLOCK && fz_only_rule >= 0 && (int)b.rule != fz_only_rule)
			abort(); /* blocked by a rule that is off */
		if (r == VERDICT_BLOCK)
			fz_check_block_reply(&b, (fz_clock & 16) ? REPLY_FORM_OPREPLY
			                                         : REPLY_FORM_OPMSG);
		if (r == VERDICT_WAIT_INDEXES)
			abort(); /* no_wait must never wait */
		engine_note_ddl(es[i], v);
		engine_flush_summaries(es[i]);
	}
	/* Play the metadata thread: every namespace the request made the cache
	 * wait for is answered (as a collection that does not exist), so the
	 * cache's queue and LRU run as in the proxy instead of filling up. */
	char ns[512];
	uint64_t gen;
	while (index_cache_fetch_begin(fz_ic, ns, sizeof ns, &gen))
		(void)index_cache_fetch_end(fz_ic, ns, gen, index_set_new_opaque("fuzz"));
	/* After a DDL command, or every so often in case the LRU dropped them,
	 * the known index lists go back in. */
	if (engine_is_ddl(v, cmd_find(v->name)) || fz_clock % (7 * 4096) == 0)
		fz_fill(fz_ic);
}

/* Both all-rule engines. */
static inline void fz_analyze(const cmdview *v)
{
	fz_setup();
	engine *es[2] = {fz_plain, fz_indexed};
	fz_run(es, 2, v);
}

/* The iterator the rules use on kind-1 sequences and body arrays. */
static inline void fz_walk_docs(const cmdview *v)
{
	static const char *const fields[] = {"documents", "updates", "deletes", "ops", "nsInfo"};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		cmdview_docs d;
		bson_t doc;
		cmdview_docs_init(&d, v, fields[i]);
		while (cmdview_docs_next(&d, &doc))
			(void)bson_count_keys(&doc);
	}
}

/* The input of the command-body targets: a BSON command body, optionally
 * followed by raw OP_MSG sections (kind-1 sequences). The body gets
 * "$db": "test" appended unless it has a $db and is wrapped into an OP_MSG
 * by opmsg_build; the sections follow it. Returns the malloc'd message
 * (the view points into it and into *m, the caller's) or NULL when the
 * input is no command. */
static inline uint8_t *fz_body_view(const uint8_t *data, size_t size, opmsg *m, cmdview *v)
{
	if (size < 5)
		return NULL;
	uint32_t doc_len = wire_read_u32(data);
	if (doc_len < 5 || doc_len > size || doc_len > WIRE_MAX_BSON_LEN)
		return NULL;
	bson_t in;
	if (!bson_init_static(&in, data, doc_len))
		return NULL;
	bson_t *body = bson_copy(&in);
	if (!body)
		return NULL;
	if (!bson_has_field(body, "$db"))
		BSON_APPEND_UTF8(body, "$db", "test");
	size_t len = 0;
	uint8_t *msg = opmsg_build(1, 0, 0, bson_get_data(body), body->len, &len);
	bson_destroy(body);
	if (!msg)
		return NULL;
	size_t rest = size - doc_len;
	if (rest) {
		uint8_t *grown = realloc(msg, len + rest);
		if (!grown) {
			free(msg);
			return NULL;
		}
		msg = grown;
		memcpy(msg + len, data + doc_len, rest);
		len += rest;
		wire_write_i32(msg, (int32_t)len);
	}
	wire_error err = {0};
	if (opmsg_parse(msg, len, m, &err) && cmdview_from_opmsg(m, v, &err))
		return msg;
	free(msg);
	return NULL;
}

#endif
