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

#include "analyzers/engine.h"
#include "analyzers/index_cache.h"
#include "analyzers/index_set.h"
#include "analyzers/rule_doc.h"
#include "analyzers/rule_lookup.h"
#include "protocol/cmdview.h"

static engine *fz_plain, *fz_indexed;
static int64_t fz_clock;

/* Reads every string of a finding so ASan checks they are live and
 * terminated while the sink runs. */
static void fz_sink(void *arg, const finding *f)
{
	size_t *total = arg;
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

static void fz_setup(void)
{
	if (fz_plain)
		return;
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int i = 0; i < RULE_COUNT; i++)
		cfg.rules[i].action = RULE_BLOCK;
	cfg.rules[RULE_HOT_PATH_LOOKUP].params[LOOKUP_PARAM_THRESHOLD] = 2;
	/* limits small inputs reach, so large-document's walk and words run */
	cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_BYTES] = 4096;
	cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_ARRAY_LENGTH] = 4;
	/* one scope so rule_effective_action's glob matching runs as well */
	rule_scope *sc = &cfg.rules[RULE_CASE_INSENSITIVE_REGEX].scopes[0];
	snprintf(sc->namespaces[0], RULE_PATTERN_LEN, "%s", "shop.*");
	sc->nnamespaces = 1;
	snprintf(sc->apps[0], RULE_PATTERN_LEN, "%s", "fuzz*");
	sc->napps = 1;
	sc->action = RULE_BLOCK;
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].nscopes = 1;
	cfg.redact_literals = false; /* so literal rendering runs too */
	fz_plain = engine_new(&cfg, NULL, fz_sink, &fz_sink_total);
	cfg.redact_literals = true;

	fz_ic = index_cache_new(NULL, 0, NULL, NULL, NULL, 0);
	fz_fill(fz_ic);
	fz_indexed = engine_new(&cfg, fz_ic, fz_sink, &fz_sink_total);
}

/* Runs a decoded command through both engines, as the proxy would. */
static void fz_analyze(const cmdview *v)
{
	fz_setup();
	fz_clock += 7;
	request_ctx rc = {
	    .app_name = (fz_clock & 8) ? "fuzzapp" : "",
	    .client = "127.0.0.1:1",
	    .now_ms = fz_clock,
	    .no_wait = true,
	};
	block_info b;
	engine *es[2] = {fz_plain, fz_indexed};
	for (int i = 0; i < 2; i++) {
		verdict r = engine_analyze(es[i], v, &rc, &b);
		if (r == VERDICT_BLOCK && strnlen(b.errmsg, sizeof b.errmsg) == sizeof b.errmsg)
			abort(); /* block message must be terminated */
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
	if (engine_is_ddl(v) || fz_clock % (7 * 4096) == 0)
		fz_fill(fz_ic);
}

#endif
