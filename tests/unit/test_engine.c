/* The rule engine as the proxy sees it: config names and scopes, explain,
 * batches, dedupe and summaries, redaction, the sort rule's wait for index
 * lists, DDL invalidation, and many threads at once. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "analyzers/catalog/index_cache.h"
#include "analyzers/planner/index_set.h"
#include "analyzers/engine/shape.h"
#include "fixtures/analyzer_fixture.h"

#define RE_I          "{'$regularExpression':{'pattern':'SECRET','options':'i'}}"
#define FIND_RE(coll) "{'find':'" coll "','filter':{'name':" RE_I "}}"
#define PUSH_UPD      "{'q':{'_id':1},'u':{'$push':{'h':1}}}"
#define SET_UPD       "{'q':{'_id':1},'u':{'$set':{'a':1}}}"

static void set_scope(rule_scope *s, const char *ns_glob, const char *app_glob, rule_action a)
{
	memset(s, 0, sizeof(*s));
	if (ns_glob) {
		snprintf(s->namespaces[0], RULE_PATTERN_LEN, "%s", ns_glob);
		s->nnamespaces = 1;
	}
	if (app_glob) {
		snprintf(s->apps[0], RULE_PATTERN_LEN, "%s", app_glob);
		s->napps = 1;
	}
	s->action = a;
}

/* ---- rule_config ---- */

static void test_defaults_and_names(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int r = 0; r < RULE_COUNT; r++) {
		assert_int_equal(cfg.rules[r].action, RULE_LOG);
		assert_int_equal(cfg.rules[r].nscopes, 0);
		assert_int_equal(rule_from_name(rule_name((rule_id)r)), r);
	}
	assert_int_equal(cfg.rules[RULE_HOT_PATH_LOOKUP].params[LOOKUP_PARAM_THRESHOLD], 60);
	assert_int_equal(cfg.rules[RULE_HOT_PATH_LOOKUP].params[LOOKUP_PARAM_WINDOW_SECONDS], 60);
	assert_true(cfg.redact_literals);
	assert_int_equal(cfg.index_wait_ms, 1000);
	assert_string_equal(rule_name(RULE_CASE_INSENSITIVE_REGEX), "case-insensitive-regex");
	assert_string_equal(rule_name(RULE_UNBOUNDED_PUSH), "unbounded-push");
	assert_string_equal(rule_name(RULE_HOT_PATH_LOOKUP), "hot-path-lookup");
	assert_string_equal(rule_name(RULE_INDEX_MISMATCHED_SORT), "index-mismatched-sort");
	assert_int_equal(rule_from_name("Unbounded-Push"), -1);
	assert_int_equal(rule_from_name("nope"), -1);
	assert_int_equal(rule_from_name(NULL), -1);
	assert_int_equal(rule_action_from_name("off"), RULE_OFF);
	assert_int_equal(rule_action_from_name("log"), RULE_LOG);
	assert_int_equal(rule_action_from_name("block"), RULE_BLOCK);
	assert_int_equal(rule_action_from_name("dry-run"), RULE_DRY_RUN);
	assert_string_equal(rule_action_name(RULE_DRY_RUN), "dry-run");
	assert_int_equal(rule_action_from_name("warn"), -1);
	assert_string_equal(rule_action_name(RULE_BLOCK), "block");
	assert_string_equal(rule_action_name(RULE_OFF), "off");
}

static void test_scopes(void **state)
{
	rule_config rc = {.action = RULE_LOG};
	/* no scopes: the rule's action */
	assert_int_equal(rule_effective_action(&rc, "shop.orders", "web"), RULE_LOG);
	set_scope(&rc.scopes[0], "shop.*", "checkout*", RULE_BLOCK);
	set_scope(&rc.scopes[1], "shop.*", NULL, RULE_OFF);
	set_scope(&rc.scopes[2], NULL, "admin-?", RULE_BLOCK);
	rc.nscopes = 3;
	/* both globs must match */
	assert_int_equal(rule_effective_action(&rc, "shop.orders", "checkout-api"), RULE_BLOCK);
	/* first match wins: scope 1 before scope 2 */
	assert_int_equal(rule_effective_action(&rc, "shop.orders", "admin-1"), RULE_OFF);
	assert_int_equal(rule_effective_action(&rc, "shop.orders", "web"), RULE_OFF);
	/* app-only scope */
	assert_int_equal(rule_effective_action(&rc, "hr.people", "admin-1"), RULE_BLOCK);
	assert_int_equal(rule_effective_action(&rc, "hr.people", "admin-12"), RULE_LOG);
	/* "*" crosses the dot; globs are anchored */
	assert_int_equal(rule_effective_action(&rc, "shopx.orders", "checkout"), RULE_LOG);
	assert_int_equal(rule_effective_action(&rc, "shop.a.b", "checkout"), RULE_BLOCK);
	/* a missing app name is "" */
	assert_int_equal(rule_effective_action(&rc, "hr.people", NULL), RULE_LOG);
	/* several patterns: any one matches */
	rule_config multi = {.action = RULE_OFF, .nscopes = 1};
	snprintf(multi.scopes[0].namespaces[0], RULE_PATTERN_LEN, "a.x");
	snprintf(multi.scopes[0].namespaces[1], RULE_PATTERN_LEN, "*.orders");
	multi.scopes[0].nnamespaces = 2;
	multi.scopes[0].action = RULE_BLOCK;
	assert_int_equal(rule_effective_action(&multi, "b.orders", ""), RULE_BLOCK);
	assert_int_equal(rule_effective_action(&multi, "a.x", ""), RULE_BLOCK);
	assert_int_equal(rule_effective_action(&multi, "a.y", ""), RULE_OFF);
}

/* engine_may_block: what lets the proxy relay a large request before it is
 * judged. Any block (an action or a scope's) counts; an insert counts only
 * rules that read documents. */
static void test_may_block(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	engine *e = engine_new(&cfg, NULL, NULL, NULL);
	assert_false(engine_may_block(e, NULL));
	assert_false(engine_may_block(e, "insert"));
	engine_free(e);

	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = RULE_DRY_RUN;
	e = engine_new(&cfg, NULL, NULL, NULL);
	assert_false(engine_may_block(e, "find")); /* dry-run forwards */
	engine_free(e);

	set_scope(&cfg.rules[RULE_CASE_INSENSITIVE_REGEX].scopes[0], "shop.*", NULL, RULE_BLOCK);
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].nscopes = 1;
	e = engine_new(&cfg, NULL, NULL, NULL);
	assert_true(engine_may_block(e, "find"));
	assert_true(engine_may_block(e, NULL));     /* not known yet: anything */
	assert_true(engine_may_block(e, "Insert")); /* names are case-sensitive */
	assert_false(engine_may_block(e, "insert"));
	engine_free(e);

	cfg.rules[RULE_LARGE_DOCUMENT].action = RULE_BLOCK;
	e = engine_new(&cfg, NULL, NULL, NULL);
	assert_true(engine_may_block(e, "insert"));
	engine_free(e);
}

/* Scopes through the engine: block in one service, log in another. */
static void test_scoped_engine(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	rule_config *rc = &cfg.rules[RULE_CASE_INSENSITIVE_REGEX];
	set_scope(&rc->scopes[0], "test.users", "billing", RULE_BLOCK);
	set_scope(&rc->scopes[1], "test.*", "reports", RULE_OFF);
	rc->nscopes = 2;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	request_ctx billing = {.app_name = "billing", .client = "c:1", .now_ms = 1};
	request_ctx reports = {.app_name = "reports", .client = "c:2", .now_ms = 1};
	request_ctx web = {.app_name = "web", .client = "c:3", .now_ms = 1};
	block_info b = {0};
	assert_int_equal(fx_analyze(e, "test", FIND_RE("users"), NULL, 0, &billing, &b),
	                 VERDICT_BLOCK);
	assert_int_equal(b.rule, RULE_CASE_INSENSITIVE_REGEX);
	assert_int_equal(fx_analyze(e, "test", FIND_RE("items"), NULL, 0, &billing, &b),
	                 VERDICT_FORWARD);
	assert_int_equal(fx_analyze(e, "test", FIND_RE("users"), NULL, 0, &reports, &b),
	                 VERDICT_FORWARD);
	assert_int_equal(fx_analyze(e, "test", FIND_RE("users"), NULL, 0, &web, &b),
	                 VERDICT_FORWARD);
	/* billing/users: block; items: log (another shape); reports: off;
	 * web/users: the same shape as billing's but logged for another
	 * application, so a line of its own (dedupe keys on rule, shape,
	 * action and application). */
	assert_int_equal(sink.n, 3);
	assert_int_equal(sink.f[0].action, RULE_BLOCK);
	assert_string_equal(sink.f[0].app_name, "billing");
	assert_string_equal(sink.f[0].client, "c:1");
	assert_int_equal(sink.f[1].action, RULE_LOG);
	assert_string_equal(sink.f[1].ns, "test.items");
	assert_int_equal(sink.f[2].action, RULE_LOG);
	assert_string_equal(sink.f[2].app_name, "web");
	assert_int_equal(sink.f[2].shape_hash, sink.f[0].shape_hash);
	/* web again: counted, not logged */
	assert_int_equal(fx_analyze(e, "test", FIND_RE("users"), NULL, 0, &web, &b),
	                 VERDICT_FORWARD);
	assert_int_equal(sink.n, 3);
	engine_free(e);
	fx_sink_free(&sink);
}

/* ---- staged enforcement: dry-run, and block for a sample of shapes ---- */

static void test_dry_run(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = RULE_DRY_RUN;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	request_ctx rc = {.app_name = "web", .client = "c:1", .now_ms = 1};
	block_info b = {0};
	assert_int_equal(fx_analyze(e, "test", FIND_RE("users"), NULL, 0, &rc, &b),
	                 VERDICT_FORWARD);
	assert_int_equal(sink.n, 1);
	assert_int_equal(sink.f[0].action, RULE_DRY_RUN);
	assert_false(sink.f[0].sampled_out);
	/* the words a block would have sent, without the literal */
	assert_non_null(strstr(sink.f[0].would_block, "mongoguard blocked this find: rule "
	                                              "case-insensitive-regex"));
	assert_null(strstr(sink.f[0].would_block, "SECRET"));
	/* a scope can still block where the rule dry-runs */
	set_scope(&cfg.rules[RULE_CASE_INSENSITIVE_REGEX].scopes[0], "test.hard", NULL, RULE_BLOCK);
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].nscopes = 1;
	engine *e2 = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	assert_int_equal(fx_analyze(e2, "test", FIND_RE("hard"), NULL, 0, &rc, &b), VERDICT_BLOCK);
	assert_int_equal(fx_analyze(e2, "test", FIND_RE("soft"), NULL, 0, &rc, &b),
	                 VERDICT_FORWARD);
	engine_free(e2);
	engine_free(e);
	fx_sink_free(&sink);
}

/* sample: N blocks the shapes whose hash falls in N% and dry-runs the
 * rest, the same way every time for one shape. */
static void test_block_sample(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = RULE_BLOCK;
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].sample = 50;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	request_ctx rc = {.app_name = "web", .client = "c:1", .now_ms = 1};
	unsigned blocked = 0, dry = 0;
	char json[256];
	for (int i = 0; i < 200; i++) {
		snprintf(json, sizeof(json), "{'find':'c%d','filter':{'name':%s}}", i, RE_I);
		block_info b = {0};
		verdict v = fx_analyze(e, "test", json, NULL, 0, &rc, &b);
		const fx_finding *f = &sink.f[sink.n - 1];
		bool in = rule_sampled_in(f->shape_hash, 50);
		assert_int_equal(v, in ? VERDICT_BLOCK : VERDICT_FORWARD);
		assert_int_equal(f->action, in ? RULE_BLOCK : RULE_DRY_RUN);
		assert_int_equal(f->sampled_out, !in);
		assert_true(in || f->would_block[0]);
		/* the same shape again: the same decision */
		assert_int_equal(fx_analyze(e, "test", json, NULL, 0, &rc, &b), v);
		blocked += in;
		dry += !in;
	}
	/* the hash spreads shapes over the percentages: both halves are used */
	assert_true(blocked > 60 && dry > 60);
	engine_free(e);
	fx_sink_free(&sink);
}

/* ---- explain, batches ---- */

static void test_explain_never_blocks(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int r = 0; r < RULE_COUNT; r++)
		cfg.rules[r].action = RULE_BLOCK;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	block_info b = {0};
	const char *explains[] = {
	    "{'explain':{'find':'users','filter':{'name':" RE_I "}}}",
	    "{'explain':{'update':'users','updates':[" PUSH_UPD "]},'verbosity':'executionStats'}",
	    "{'explain':{'findAndModify':'users','query':{'n':" RE_I
	    "},'update':{'$push':{'h':1}}}}",
	    "{'explain':{'aggregate':'users','pipeline':[{'$match':{'n':" RE_I "}}],'cursor':{}}}",
	    "{'explain':{'count':'users','query':{'n':" RE_I "}}}",
	    "{'explain':{'distinct':'users','key':'k','query':{'n':" RE_I "}}}",
	    "{'explain':{'delete':'users','deletes':[{'q':{'n':" RE_I "},'limit':1}]}}",
	    "{'aggregate':'users','pipeline':[{'$match':{'n':" RE_I "}}],'explain':true}",
	};
	for (size_t i = 0; i < sizeof(explains) / sizeof(explains[0]); i++) {
		/* a fresh engine each: the last two are one shape, deduped */
		engine_free(e);
		e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
		fx_sink_clear(&sink);
		assert_int_equal(fx_analyze(e, "test", explains[i], NULL, 0, NULL, &b),
		                 VERDICT_FORWARD);
		assert_true(sink.n >= 1);
		for (size_t j = 0; j < sink.n; j++) {
			assert_int_equal(sink.f[j].action, RULE_LOG);
			assert_string_equal(sink.f[j].command, "explain");
			assert_non_null(strstr(sink.f[j].shape, "{\"explain\":{"));
		}
	}
	/* the same query without explain is blocked */
	assert_int_equal(fx_analyze(e, "test", FIND_RE("users"), NULL, 0, NULL, &b), VERDICT_BLOCK);
	/* an aggregate explains only for a true boolean or number; the server
	 * refuses any other type, so those are judged as the aggregate itself */
	const char *runs[] = {
	    "{'aggregate':'users','pipeline':[{'$match':{'n':" RE_I "}}],'explain':false}",
	    "{'aggregate':'users','pipeline':[{'$match':{'n':" RE_I "}}],'explain':0}",
	    "{'aggregate':'users','pipeline':[{'$match':{'n':" RE_I "}}],'explain':'false'}",
	    "{'aggregate':'users','pipeline':[{'$match':{'n':" RE_I "}}],'explain':{'a':1}}",
	    "{'aggregate':'users','pipeline':[{'$match':{'n':" RE_I "}}],'explain':[1]}",
	};
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		engine_free(e);
		e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
		assert_int_equal(fx_analyze(e, "test", runs[i], NULL, 0, NULL, &b), VERDICT_BLOCK);
	}
	engine_free(e);
	e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	assert_int_equal(fx_analyze(e, "test",
	                            "{'aggregate':'users','pipeline':[{'$match':{'n':" RE_I
	                            "}}],'explain':1.0}",
	                            NULL, 0, NULL, &b),
	                 VERDICT_FORWARD);
	engine_free(e);
	fx_sink_free(&sink);
}

/* {find: UUID}: mongod runs it on the collection with that UUID, which
 * mongoguard cannot name; a rule that blocks anywhere and reads queries
 * blocks it. Other collection types are the server's to refuse. */
static void test_collection_by_uuid(void **state)
{
#define UUID_BIN "{'$binary':{'base64':'y9GbU9sHQx+y+ySor8crog==','subType':'04'}}"
	const char *uuid_queries[] = {
	    "{'find':" UUID_BIN ",'filter':{'name':" RE_I "}}",
	    "{'count':" UUID_BIN ",'query':{}}",
	    "{'distinct':" UUID_BIN ",'key':'k'}",
	    "{'find':{'$binary':{'base64':'y9GbU9sHQx+y+ySor8crog==','subType':'03'}}}",
	};
	engine_config cfg;
	rule_config_defaults(&cfg);
	fx_sink sink;
	fx_sink_init(&sink);
	block_info b = {0};
	/* every rule log: forwarded */
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	for (size_t i = 0; i < sizeof(uuid_queries) / sizeof(uuid_queries[0]); i++)
		assert_int_equal(fx_analyze(e, "shop", uuid_queries[i], NULL, 0, NULL, &b),
		                 VERDICT_FORWARD);
	engine_free(e);
	/* large-document blocks, but reads no query: forwarded */
	cfg.rules[RULE_LARGE_DOCUMENT].action = RULE_BLOCK;
	e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	assert_int_equal(fx_analyze(e, "shop", uuid_queries[0], NULL, 0, NULL, &b),
	                 VERDICT_FORWARD);
	engine_free(e);
	/* the regex rule blocks in one scope only: every UUID query is blocked */
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].scopes[0].action = RULE_BLOCK;
	snprintf(cfg.rules[RULE_CASE_INSENSITIVE_REGEX].scopes[0].namespaces[0], RULE_PATTERN_LEN,
	         "other.users");
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].scopes[0].nnamespaces = 1;
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].nscopes = 1;
	e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	for (size_t i = 0; i < sizeof(uuid_queries) / sizeof(uuid_queries[0]); i++) {
		assert_int_equal(fx_analyze(e, "shop", uuid_queries[i], NULL, 0, NULL, &b),
		                 VERDICT_BLOCK);
		assert_int_equal(b.rule, RULE_CASE_INSENSITIVE_REGEX);
		assert_non_null(strstr(b.errmsg, "named by UUID"));
	}
	/* explain never blocks; a non-UUID binary or a number is the server's to refuse */
	assert_int_equal(
	    fx_analyze(e, "shop", "{'explain':{'find':" UUID_BIN "}}", NULL, 0, NULL, &b),
	    VERDICT_FORWARD);
	assert_int_equal(fx_analyze(e, "shop",
	                            "{'find':{'$binary':{'base64':'AAAA','subType':'00'}}}", NULL,
	                            0, NULL, &b),
	                 VERDICT_FORWARD);
	assert_int_equal(fx_analyze(e, "shop", "{'find':7}", NULL, 0, NULL, &b), VERDICT_FORWARD);
	assert_int_equal(sink.n, 0);
	engine_free(e);
	fx_sink_free(&sink);
#undef UUID_BIN
}

static void test_batch_blocked_whole(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_UNBOUNDED_PUSH].action = RULE_BLOCK;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	block_info b = {0};
	/* one bad op among good ones, in a kind-1 sequence */
	fx_seq seq = {"updates", {SET_UPD, SET_UPD, PUSH_UPD, SET_UPD}};
	assert_int_equal(fx_analyze(e, "test", "{'update':'posts'}", &seq, 1, NULL, &b),
	                 VERDICT_BLOCK);
	assert_non_null(strstr(b.errmsg, "mongoguard blocked this update: rule unbounded-push"));
	assert_int_equal(fx_sink_count(&sink, RULE_UNBOUNDED_PUSH), 1);
	/* all good: forwarded */
	fx_seq good = {"updates", {SET_UPD, SET_UPD}};
	assert_int_equal(fx_analyze(e, "test", "{'update':'posts'}", &good, 1, NULL, &b),
	                 VERDICT_FORWARD);
	/* bulkWrite across namespaces: block scoped to one of them */
	cfg.rules[RULE_UNBOUNDED_PUSH].action = RULE_LOG;
	set_scope(&cfg.rules[RULE_UNBOUNDED_PUSH].scopes[0], "blog.posts", NULL, RULE_BLOCK);
	cfg.rules[RULE_UNBOUNDED_PUSH].nscopes = 1;
	engine *e2 = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	fx_seq ops[2] = {
	    {"ops",
	     {"{'update':0,'filter':{},'updateMods':{'$push':{'a':1}}}",
	      "{'insert':1,'document':{'x':1}}",
	      "{'update':1,'filter':{},'updateMods':{'$push':{'b':1}}}"}},
	    {"nsInfo", {"{'ns':'blog.logs'}", "{'ns':'blog.posts'}"}},
	};
	fx_sink_clear(&sink);
	assert_int_equal(fx_analyze(e2, "admin", "{'bulkWrite':1}", ops, 2, NULL, &b),
	                 VERDICT_BLOCK);
	assert_int_equal(sink.n, 2);
	assert_string_equal(sink.f[0].ns, "blog.logs");
	assert_int_equal(sink.f[0].action, RULE_LOG);
	assert_string_equal(sink.f[1].ns, "blog.posts");
	assert_int_equal(sink.f[1].action, RULE_BLOCK);
	assert_non_null(strstr(b.errmsg, "this bulkWrite"));
	engine_free(e2);
	engine_free(e);
	fx_sink_free(&sink);
}

/* A batch of many distinct bad ops reports a bounded number of findings
 * but still decides the verdict. */
static void test_batch_report_cap(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	bson_string_t *s = bson_string_new("{'update':'posts','updates':[");
	for (int i = 0; i < 100; i++)
		bson_string_append_printf(s, "%s{'q':{'_id':1},'u':{'$push':{'f%d':1}}}",
		                          i ? "," : "", i);
	bson_string_append(s, "]}");
	assert_int_equal(fx_analyze(e, "test", s->str, NULL, 0, NULL, NULL), VERDICT_FORWARD);
	assert_true(sink.n >= 16 && sink.n <= 64);
	engine_free(e);
	bson_string_free(s, true);
	fx_sink_free(&sink);
}

/* ---- commands that must cost nothing ---- */

static void test_uninteresting_commands(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int r = 0; r < RULE_COUNT; r++)
		cfg.rules[r].action = RULE_BLOCK;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	const char *cmds[] = {
	    "{'insert':'c','documents':[{'a':" RE_I "}]}",
	    "{'hello':1}",
	    "{'isMaster':1}",
	    "{'getMore':{'$numberLong':'5'},'collection':'c'}",
	    "{'killCursors':'c','cursors':[]}",
	    "{'ping':1}",
	    "{'createIndexes':'c','indexes':[{'key':{'a':1},'name':'a_1'}]}",
	    "{'find':5,'filter':{'a':" RE_I "}}",
	    "{'update':'c'}",
	    "{'explain':'find'}",
	    "{'explain':{'explain':{'find':'c','filter':{'a':" RE_I "}}}}",
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		assert_int_equal(fx_analyze(e, "test", cmds[i], NULL, 0, NULL, NULL),
		                 VERDICT_FORWARD);
	assert_int_equal(sink.n, 0);
	engine_free(e);
	fx_sink_free(&sink);
}

/* ---- dedupe and summaries ---- */

static void test_dedupe_and_summaries(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	request_ctx rc = {.app_name = "web", .client = "1.2.3.4:5", .now_ms = 1};
	/* five runs, different literals, one shape */
	for (int i = 0; i < 5; i++) {
		char json[256];
		snprintf(json, sizeof(json),
		         "{'find':'users','filter':{'name':{'%%regex':'v%d','%%options':'i'},"
		         "'age':{'$gt':%d}}}",
		         i, i * 10);
		fx_analyze(e, "test", json, NULL, 0, &rc, NULL);
	}
	/* another rule with its own key, and another shape */
	fx_analyze(e, "test", "{'update':'users','updates':[" PUSH_UPD "]}", NULL, 0, &rc, NULL);
	fx_analyze(e, "test", FIND_RE("users"), NULL, 0, &rc, NULL);
	assert_int_equal(sink.n, 3);
	assert_int_equal(sink.f[0].repeats, 0);
	assert_int_equal(sink.f[0].rule, RULE_CASE_INSENSITIVE_REGEX);
	uint64_t h = sink.f[0].shape_hash;
	assert_true(sink.f[2].shape_hash != h);

	fx_sink_clear(&sink);
	engine_flush_summaries(e);
	assert_int_equal(sink.n, 1);
	assert_int_equal(sink.f[0].repeats, 4);
	assert_int_equal(sink.f[0].shape_hash, h);
	assert_int_equal(sink.f[0].rule, RULE_CASE_INSENSITIVE_REGEX);
	assert_string_equal(sink.f[0].ns, "test.users");
	assert_string_equal(sink.f[0].command, "find");
	assert_non_null(strstr(sink.f[0].suggestion, "strength: 2"));

	/* counts were zeroed: nothing to report */
	fx_sink_clear(&sink);
	engine_flush_summaries(e);
	assert_int_equal(sink.n, 0);

	/* a known key stays known: repeats only counted */
	fx_analyze(e, "test", "{'update':'users','updates':[" PUSH_UPD "," PUSH_UPD "]}", NULL, 0,
	           &rc, NULL);
	assert_int_equal(sink.n, 0);
	engine_flush_summaries(e);
	assert_int_equal(sink.n, 1);
	assert_int_equal(sink.f[0].rule, RULE_UNBOUNDED_PUSH);
	assert_int_equal(sink.f[0].repeats, 2);
	engine_free(e);
	fx_sink_free(&sink);
}

/* ---- shapes through the engine ---- */

static void test_shape_in_findings(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	fx_analyze(e, "shop",
	           "{'find':'users','filter':{'name':" RE_I
	           ",'id':{'$nin':[1,2,3]}},'sort':{'t':-1},"
	           "'limit':5,'projection':{'pw':0}}",
	           NULL, 0, NULL, NULL);
	fx_analyze(e, "shop",
	           "{'find':'users','filter':{'name':" RE_I ",'id':{'$nin':[9]}},'sort':{'t':-1}}",
	           NULL, 0, NULL, NULL);
	assert_int_equal(sink.n, 1); /* the second is the same shape */
	assert_string_equal(
	    sink.f[0].shape,
	    "{\"find\":\"users\",\"filter\":{\"name\":\"?regex/i\",\"id\":{\"$nin\":"
	    "\"?array<?number>\"}},\"sort\":{\"t\":-1}}");
	char hex[17];
	shape_hash_hex(sink.f[0].shape_hash, hex);
	assert_int_equal(sink.f[0].shape_hash, shape_hash("shop.users", "find", sink.f[0].shape));
	engine_flush_summaries(e);
	assert_int_equal(sink.f[1].repeats, 1);

	/* updates: {"update":coll,"q":...,"u":...} */
	fx_sink_clear(&sink);
	fx_analyze(e, "shop",
	           "{'update':'posts','updates':[{'q':{'_id':{'$oid':'0123456789abcdef01234567'}},"
	           "'u':{'$push':{'c':{'by':'x'}}},'upsert':true}]}",
	           NULL, 0, NULL, NULL);
	assert_string_equal(sink.f[0].shape,
	                    "{\"update\":\"posts\",\"q\":{\"_id\":\"?objectId\"},\"u\":{\"$push\":{"
	                    "\"c\":\"?object\"}},\"upsert\":true}");
	engine_free(e);
	fx_sink_free(&sink);
}

static void test_redaction_off(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	fx_sink sink;
	fx_sink_init(&sink);
	engine *on = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	cfg.redact_literals = false;
	engine *off = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	const char *q = "{'find':'users','filter':{'name':" RE_I ",'age':{'$gt':42}}}";
	fx_analyze(on, "test", q, NULL, 0, NULL, NULL);
	fx_analyze(off, "test", q, NULL, 0, NULL, NULL);
	assert_int_equal(sink.n, 2);
	assert_null(strstr(sink.f[0].shape, "SECRET"));
	assert_null(strstr(sink.f[0].shape, "42"));
	assert_string_equal(sink.f[1].shape,
	                    "{\"find\":\"users\",\"filter\":{\"name\":{\"$regex\":\"SECRET\","
	                    "\"$options\":\"i\"},\"age\":{\"$gt\":42}}}");
	/* the hash ignores literals either way, so dedupe still groups by shape */
	assert_int_equal(sink.f[0].shape_hash, sink.f[1].shape_hash);
	fx_analyze(off, "test", "{'find':'users','filter':{'name':" RE_I ",'age':{'$gt':7}}}", NULL,
	           0, NULL, NULL);
	assert_int_equal(sink.n, 2);
	engine_free(on);
	engine_free(off);
	fx_sink_free(&sink);
}

/* ---- index-mismatched-sort: the engine's side ---- */

static const char *const ab_specs[] = {
    "{'v':2,'key':{'_id':1},'name':'_id_'}",
    "{'v':2,'key':{'a':1,'b':1},'name':'a_1_b_1'}",
};

static void test_sort_waits_then_decides(void **state)
{
	index_cache *ic = index_cache_new(NULL, 60, NULL, NULL, NULL, 0);
	assert_non_null(ic);
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_INDEX_MISMATCHED_SORT].action = RULE_BLOCK;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	request_ctx rc = {.app_name = "", .client = "c", .now_ms = 1};
	request_ctx rc_nowait = {.app_name = "", .client = "c", .now_ms = 1, .no_wait = true};
	block_info b = {0};
	/* a pattern beside the point on c: never reported, waiting or not */
	const char *q = "{'find':'orders','filter':{'c':5,'n':" RE_I "},'sort':{'d':1}}";

	/* one request, re-analysed as the proxy does */
	fx_req r;
	assert_true(fx_req_build(&r, "shop", q, NULL, 0));
	assert_int_equal(engine_analyze(e, &r.v, &rc, &b), VERDICT_WAIT_INDEXES);
	assert_int_equal(sink.n, 0);
	assert_int_equal(engine_analyze(e, &r.v, &rc, &b), VERDICT_WAIT_INDEXES);
	assert_int_equal(sink.n, 0);
	/* the wait ends without an answer: no sort verdict, counted; the
	 * pattern beside the point on c is no finding of its own (c's index,
	 * or its absence, decides the read) */
	assert_int_equal(engine_analyze(e, &r.v, &rc_nowait, &b), VERDICT_FORWARD);
	assert_int_equal(sink.n, 0);
	assert_true(b.skipped >> RULE_INDEX_MISMATCHED_SORT & 1);
	assert_false(b.skipped >> RULE_CASE_INSENSITIVE_REGEX & 1);

	/* the list arrives: {a:1,b:1} cannot give sort {d:1} for filter {c:5} */
	index_set *set = fx_index_set(ab_specs, 2);
	index_cache_put(ic, "shop", "orders", set);
	index_set_release(set);
	fx_sink_clear(&sink);
	memset(&b, 0, sizeof(b));
	assert_int_equal(engine_analyze(e, &r.v, &rc, &b), VERDICT_BLOCK);
	assert_int_equal(b.rule, RULE_INDEX_MISMATCHED_SORT);
	assert_non_null(strstr(b.errmsg, "rule index-mismatched-sort"));
	assert_non_null(strstr(b.errmsg, "createIndex"));
	const fx_finding *f = fx_sink_first(&sink, RULE_INDEX_MISMATCHED_SORT);
	assert_non_null(f);
	assert_int_equal(f->action, RULE_BLOCK);
	assert_string_equal(f->ns, "shop.orders");
	if (getenv("FX_VERBOSE"))
		printf("%s\n%s\n%s\n", f->detail, f->suggestion, b.errmsg);
	assert_non_null(strstr(f->suggestion, "db.getSiblingDB(\"shop\").getCollection(\"orders\")"
	                                      ".createIndex({\"c\": 1, \"d\": 1, \"n\": 1})"));
	assert_non_null(strstr(f->detail, "so mongod sorts in memory"));
	assert_string_equal(f->shape, "{\"find\":\"orders\",\"filter\":{\"c\":\"?number\",\"n\":"
	                              "\"?regex/i\"},\"sort\":{\"d\":1}}");
	fx_req_free(&r);

	/* a sort the index gives: no finding */
	fx_sink_clear(&sink);
	assert_int_equal(fx_analyze(e, "shop", "{'find':'orders','filter':{'a':5},'sort':{'b':-1}}",
	                            NULL, 0, &rc, &b),
	                 VERDICT_FORWARD);
	assert_int_equal(sink.n, 0);
	/* findAndModify and aggregate ($match then $sort) take the same path */
	assert_int_equal(fx_analyze(e, "shop",
	                            "{'findAndModify':'orders','query':{'c':1},'sort':{'d':1},"
	                            "'update':{'$set':{'x':1}}}",
	                            NULL, 0, &rc, &b),
	                 VERDICT_BLOCK);
	assert_int_equal(
	    fx_analyze(e, "shop",
	               "{'aggregate':'orders','pipeline':[{'$match':{'c':1}},{'$match':{"
	               "'e':2}},{'$sort':{'d':1}}],'cursor':{}}",
	               NULL, 0, &rc, &b),
	    VERDICT_BLOCK);
	assert_int_equal(
	    fx_analyze(e, "shop",
	               "{'aggregate':'orders','pipeline':[{'$match':{'a':1}},{'$sort':{"
	               "'b':1}}],'cursor':{}}",
	               NULL, 0, &rc, &b),
	    VERDICT_FORWARD);
	/* a $sort after $group is not an index question: never waits */
	assert_int_equal(
	    fx_analyze(e, "shop",
	               "{'aggregate':'unknown','pipeline':[{'$group':{'_id':'$a'}},{'$sort':"
	               "{'_id':1}}],'cursor':{}}",
	               NULL, 0, &rc, &b),
	    VERDICT_FORWARD);
	/* explain waits like the rest but is never blocked */
	assert_int_equal(fx_analyze(e, "shop",
	                            "{'explain':{'find':'orders','filter':{'c':5},'sort':{'d':1}}}",
	                            NULL, 0, &rc, &b),
	                 VERDICT_FORWARD);
	/* rule off: no lookup in the cache, so no wait for an unknown list */
	engine_free(e);
	cfg.rules[RULE_INDEX_MISMATCHED_SORT].action = RULE_OFF;
	e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	assert_int_equal(fx_analyze(e, "shop", "{'find':'other','filter':{'c':5},'sort':{'d':1}}",
	                            NULL, 0, &rc, &b),
	                 VERDICT_FORWARD);
	engine_free(e);
	index_cache_free(ic);
	fx_sink_free(&sink);
}

/* A request answered WAIT counts as one hot-path execution, on the call
 * that decides. */
static void test_wait_does_not_count_joins(void **state)
{
	index_cache *ic = index_cache_new(NULL, 60, NULL, NULL, NULL, 0);
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_HOT_PATH_LOOKUP].params[LOOKUP_PARAM_THRESHOLD] = 2;
	cfg.rules[RULE_HOT_PATH_LOOKUP].action = RULE_BLOCK;
	/* dry-run waits for the index list as block does (at log the request
	 * would go on at once and owe the sort verdict: test_rule_scan) */
	cfg.rules[RULE_INDEX_MISMATCHED_SORT].action = RULE_DRY_RUN;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	request_ctx rc = {.app_name = "", .client = "c", .now_ms = 1000};
	const char *q = "{'aggregate':'orders','pipeline':[{'$match':{'c':1}},{'$sort':{'d':1}},{"
	                "'$lookup':{'from':'u','localField':'a','foreignField':'b','as':'j'}}],"
	                "'cursor':{}}";
	fx_req r;
	assert_true(fx_req_build(&r, "shop", q, NULL, 0));
	for (int i = 0; i < 5; i++)
		assert_int_equal(engine_analyze(e, &r.v, &rc, NULL), VERDICT_WAIT_INDEXES);
	index_set *set = fx_index_set(ab_specs, 1);
	index_cache_put(ic, "shop", "orders", set);
	index_set_release(set);
	/* first real execution: not hot (threshold 2) */
	assert_int_equal(fx_sink_count(&sink, RULE_HOT_PATH_LOOKUP), 0);
	verdict v = engine_analyze(e, &r.v, &rc, NULL);
	assert_int_equal(fx_sink_count(&sink, RULE_HOT_PATH_LOOKUP), 0);
	assert_int_equal(fx_sink_count(&sink, RULE_INDEX_MISMATCHED_SORT), 1);
	assert_int_equal(v, VERDICT_FORWARD); /* the sort rule is at dry-run */
	/* second: hot */
	assert_int_equal(engine_analyze(e, &r.v, &rc, NULL), VERDICT_BLOCK);
	assert_int_equal(fx_sink_count(&sink, RULE_HOT_PATH_LOOKUP), 1);
	fx_req_free(&r);
	engine_free(e);
	index_cache_free(ic);
	fx_sink_free(&sink);
}

static void test_unavailable_and_no_cache(void **state)
{
	index_cache *ic = index_cache_new(NULL, 60, NULL, NULL, NULL, 0);
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_INDEX_MISMATCHED_SORT].action = RULE_BLOCK;
	engine *e = engine_new(&cfg, ic, NULL, NULL);
	const char *q = "{'find':'orders','filter':{'c':5},'sort':{'d':1}}";
	assert_int_equal(fx_analyze(e, "shop", q, NULL, 0, NULL, NULL), VERDICT_WAIT_INDEXES);
	/* the fetch fails: no verdict, the request goes on */
	char ns[256];
	uint64_t gen;
	assert_true(index_cache_fetch_begin(ic, ns, sizeof(ns), &gen));
	assert_string_equal(ns, "shop.orders");
	index_cache_fetch_end(ic, ns, gen, NULL);
	assert_int_equal(fx_analyze(e, "shop", q, NULL, 0, NULL, NULL), VERDICT_FORWARD);
	engine_free(e);
	/* no cache at all: never waits */
	e = engine_new(&cfg, NULL, NULL, NULL);
	assert_int_equal(fx_analyze(e, "shop", q, NULL, 0, NULL, NULL), VERDICT_FORWARD);
	engine_free(e);
	index_cache_free(ic);
}

/* ---- DDL ---- */

static index_lookup lookup(index_cache *ic, const char *db, const char *coll)
{
	index_set *s = NULL;
	index_lookup r = index_cache_get(ic, db, coll, &s);
	if (s)
		index_set_release(s);
	return r;
}

static void put_all(index_cache *ic)
{
	index_set *set = fx_index_set(ab_specs, 2);
	const char *colls[][2] = {{"shop", "orders"}, {"shop", "users"}, {"shop", "old"},
	                          {"shop", "new"},    {"hr", "people"},  {"hr", "teams"}};
	for (size_t i = 0; i < 6; i++)
		index_cache_put(ic, colls[i][0], colls[i][1], set);
	index_set_release(set);
}

static void note(engine *e, const char *db, const char *json)
{
	fx_req r;
	assert_true(fx_req_build(&r, db, json, NULL, 0));
	engine_note_ddl(e, &r.v);
	fx_req_free(&r);
}

static void test_ddl_invalidates(void **state)
{
	index_cache *ic = index_cache_new(NULL, 60, NULL, NULL, NULL, 0);
	engine_config cfg;
	rule_config_defaults(&cfg);
	engine *e = engine_new(&cfg, ic, NULL, NULL);
	const char *per_coll[] = {
	    "{'createIndexes':'orders','indexes':[{'key':{'x':1},'name':'x_1'}]}",
	    "{'dropIndexes':'orders','index':'*'}",
	    "{'deleteIndexes':'orders','index':'x_1'}",
	    "{'drop':'orders'}",
	    "{'collMod':'orders','index':{'name':'x_1','hidden':true}}",
	    "{'createindexes':'orders','indexes':[]}",
	};
	for (size_t i = 0; i < sizeof(per_coll) / sizeof(per_coll[0]); i++) {
		put_all(ic);
		note(e, "shop", per_coll[i]);
		assert_int_equal(lookup(ic, "shop", "orders"), INDEXES_PENDING);
		assert_int_equal(lookup(ic, "shop", "users"), INDEXES_KNOWN);
		assert_int_equal(lookup(ic, "hr", "people"), INDEXES_KNOWN);
	}
	put_all(ic);
	note(e, "shop", "{'dropDatabase':1}");
	assert_int_equal(lookup(ic, "shop", "orders"), INDEXES_PENDING);
	assert_int_equal(lookup(ic, "shop", "users"), INDEXES_PENDING);
	assert_int_equal(lookup(ic, "hr", "people"), INDEXES_KNOWN);

	put_all(ic);
	note(e, "admin", "{'renameCollection':'shop.old','to':'hr.teams','dropTarget':true}");
	assert_int_equal(lookup(ic, "shop", "old"), INDEXES_PENDING);
	assert_int_equal(lookup(ic, "hr", "teams"), INDEXES_PENDING);
	assert_int_equal(lookup(ic, "shop", "new"), INDEXES_KNOWN);

	/* the proxy asks which replies to report */
	fx_req r;
	assert_true(fx_req_build(&r, "shop", "{'deleteIndexes':'orders','index':'x_1'}", NULL, 0));
	assert_true(engine_is_ddl(&r.v, cmd_find(r.v.name)));
	fx_req_free(&r);
	assert_true(fx_req_build(&r, "shop", "{'find':'orders'}", NULL, 0));
	assert_false(engine_is_ddl(&r.v, cmd_find(r.v.name)));
	fx_req_free(&r);
	assert_true(fx_req_build(&r, "admin", "{'renameCollection':'a.b','to':'a.c'}", NULL, 0));
	assert_true(engine_is_ddl(&r.v, cmd_find(r.v.name)));
	fx_req_free(&r);
	/* a name the table does not know: a DDL in another case is one still */
	assert_true(fx_req_build(&r, "shop", "{'DropIndexes':'orders','index':'x_1'}", NULL, 0));
	assert_int_equal(cmd_find(r.v.name), CMD_NONE);
	assert_true(engine_is_ddl(&r.v, CMD_NONE));
	fx_req_free(&r);

	/* cloneCollectionAsCapped: the new collection */
	put_all(ic);
	note(e, "shop", "{'cloneCollectionAsCapped':'orders','toCollection':'new','size':1000}");
	assert_int_equal(lookup(ic, "shop", "new"), INDEXES_PENDING);
	assert_int_equal(lookup(ic, "shop", "orders"), INDEXES_KNOWN);

	/* commands that change no index leave the cache alone */
	put_all(ic);
	note(e, "shop", "{'find':'orders','filter':{}}");
	note(e, "shop", "{'insert':'orders','documents':[{'a':1}]}");
	note(e, "shop", "{'dropIndexes':5}");
	assert_int_equal(lookup(ic, "shop", "orders"), INDEXES_KNOWN);
	engine_free(e);
	index_cache_free(ic);
}

/* ---- threads ---- */

typedef struct worker_arg {
	engine *e;
	int id;
	int iterations;
} worker_arg;

static void *worker(void *p)
{
	worker_arg *w = p;
	const char *mix[] = {
	    "{'find':'users','filter':{'_id':1}}",
	    FIND_RE("users"),
	    "{'update':'posts','updates':[" PUSH_UPD "]}",
	    "{'insert':'posts','documents':[{'a':1}]}",
	    ("{'aggregate':'o','pipeline':[{'$lookup':{'from':'u','localField':'a','foreignField':"
	     "'b','as':'j'}}],'cursor':{}}"), /* one string, split for width */
	};
	for (int i = 0; i < w->iterations; i++) {
		request_ctx rc = {.app_name = "t", .client = "c", .now_ms = 1000 + i};
		fx_analyze(w->e, "test", mix[(i + w->id) % 5], NULL, 0, &rc, NULL);
		if (i % 97 == 0)
			engine_flush_summaries(w->e);
	}
	return NULL;
}

/* A body may repeat a key (BSON allows it; mongod rejects the command, but
 * mongoguard sees it first). Every repeat is still read by the rules, and
 * the shape, which keeps a bounded number of parts, must not overflow. */
/* A statement mongod refuses for an operator it does not know (in the
 * filter at any depth, in the update, in any stage's filter of the
 * pipeline) runs nothing: no rule reports it, and none blocks it (mongod
 * answers with its own error). Each refused form beside the same form
 * with a known operator, which is reported and blocked. */
static void test_refused_statements(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = RULE_BLOCK;
	cfg.rules[RULE_UNBOUNDED_PUSH].action = RULE_BLOCK;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	block_info b = {0};
	static const struct {
		const char *accepted, *refused;
	} cases[] = {
	    /* an unknown operator on a field, at the top level, under $not,
	     * inside $elemMatch (both forms), in an $or branch, in $and */
	    {"{'find':'u','filter':{'name':" RE_I ",'a':{'$gt':1}}}",
	     "{'find':'u','filter':{'name':" RE_I ",'a':{'$foo':1}}}"},
	    {"{'find':'u','filter':{'name':" RE_I ",'$comment':'x'}}",
	     "{'find':'u','filter':{'name':" RE_I ",'$foo':1}}"},
	    {"{'find':'u','filter':{'name':" RE_I ",'a':{'$not':{'$gt':1}}}}",
	     "{'find':'u','filter':{'name':" RE_I ",'a':{'$not':{'$foo':1}}}}"},
	    {"{'find':'u','filter':{'name':" RE_I ",'a':{'$elemMatch':{'$gt':1}}}}",
	     "{'find':'u','filter':{'name':" RE_I ",'a':{'$elemMatch':{'$foo':1}}}}"},
	    {"{'find':'u','filter':{'name':" RE_I
	     ",'a':{'$elemMatch':{'$or':[{'b':1},{'c':{'$gt':2}}]}}}}",
	     "{'find':'u','filter':{'name':" RE_I
	     ",'a':{'$elemMatch':{'$or':[{'b':1},{'c':{'$foo':2}}]}}}}"},
	    {"{'find':'u','filter':{'name':" RE_I
	     ",'a':{'$all':[{'$elemMatch':{'b':1}}]},'c':{'$elemMatch':{'$in':[{'d':1}]}}}}",
	     "{'find':'u','filter':{'name':" RE_I ",'a':{'$all':[{'$elemMatch':{'b':1}}]},"
	     "'c':{'$elemMatch':{'$in':[1],'$foo':1}}}}"},
	    {"{'find':'u','filter':{'name':" RE_I ",'$or':[{'a':1},{'b':{'$in':[1]}}]}}",
	     "{'find':'u','filter':{'name':" RE_I ",'$or':[{'a':1},{'b':{'$foo':1}}]}}"},
	    {"{'count':'u','query':{'$and':[{'name':" RE_I "},{'b':{'$exists':true}}]}}",
	     "{'count':'u','query':{'$and':[{'name':" RE_I "},{'b':{'$foo':true}}]}}"},
	    /* a refused filter in a $lookup's pipeline fails the aggregate */
	    {"{'aggregate':'u','pipeline':[{'$match':{'name':" RE_I "}},"
	     "{'$lookup':{'from':'o','pipeline':[{'$match':{'k':1}}],'as':'j'}}],'cursor':{}}",
	     "{'aggregate':'u','pipeline':[{'$match':{'name':" RE_I "}},"
	     "{'$lookup':{'from':'o','pipeline':[{'$match':{'k':{'$foo':1}}}],'as':'j'}}],"
	     "'cursor':{}}"},
	    /* an unknown modifier, an update pipeline's unknown stage, a
	     * refused q: the update applies nothing */
	    {"{'update':'u','updates':[{'q':{'_id':1},'u':{'$push':{'h':1},'$inc':{'n':1}}}]}",
	     "{'update':'u','updates':[{'q':{'_id':1},'u':{'$push':{'h':1},'$foo':{'n':1}}}]}"},
	    {"{'update':'u','updates':[{'q':{'_id':1},'u':[{'$set':{'h':{'$concatArrays':['$h',"
	     "['x']]}}},{'$unset':'t'}]}]}",
	     "{'update':'u','updates':[{'q':{'_id':1},'u':[{'$set':{'h':{'$concatArrays':['$h',"
	     "['x']]}}},{'$group':{'_id':1}}]}]}"},
	    {"{'update':'u','updates':[{'q':{'_id':{'$in':[1]}},'u':{'$push':{'h':1}}}]}",
	     "{'update':'u','updates':[{'q':{'_id':{'$foo':1}},'u':{'$push':{'h':1}}}]}"},
	    {"{'findAndModify':'u','query':{'a':1},'update':{'$push':{'h':1}}}",
	     "{'findAndModify':'u','query':{'a':1},'update':{'$push':{'h':1},'$foo':{'x':1}}}"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fx_sink_clear(&sink);
		if (fx_analyze(e, "test", cases[i].accepted, NULL, 0, NULL, &b) != VERDICT_BLOCK ||
		    sink.n != 1)
			fail_msg("case %zu accepted: not blocked (%zu findings)", i, sink.n);
		fx_sink_clear(&sink);
		if (fx_analyze(e, "test", cases[i].refused, NULL, 0, NULL, &b) != VERDICT_FORWARD ||
		    sink.n != 0)
			fail_msg("case %zu refused: blocked or reported (%zu findings)", i, sink.n);
	}
	engine_free(e);
	fx_sink_free(&sink);
}

static void test_repeated_keys(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = RULE_BLOCK;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	block_info b = {0};
	const char *find = "{'find':'c','filter':{'a':1},'filter':{'a':2},'sort':{'a':1},"
	                   "'filter':{'a':3},'sort':{'b':1},'filter':{'a':4},'hint':'x',"
	                   "'filter':{'a':5},'collation':{'locale':'en'},'filter':{'a':6},"
	                   "'hint':'y','filter':{'a':7},'filter':{'name':" RE_I "}}";
	assert_int_equal(fx_analyze(e, "test", find, NULL, 0, NULL, &b), VERDICT_BLOCK);
	const char *agg = "{'aggregate':'c','pipeline':[],'pipeline':[],'collation':{},"
	                  "'pipeline':[],'hint':'x','pipeline':[],'hint':'y','pipeline':[],"
	                  "'pipeline':[],'pipeline':[{'%match':{'name':" RE_I "}}],'cursor':{}}";
	assert_int_equal(fx_analyze(e, "test", agg, NULL, 0, NULL, &b), VERDICT_BLOCK);
	assert_int_equal(fx_sink_count(&sink, RULE_CASE_INSENSITIVE_REGEX), 2);
	engine_free(e);
	fx_sink_free(&sink);
}

static void test_threads(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_HOT_PATH_LOOKUP].params[LOOKUP_PARAM_THRESHOLD] = 1;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	enum { NTHREADS = 4, ITER = 1000 };
	pthread_t th[NTHREADS];
	worker_arg args[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		args[i] = (worker_arg){e, i, ITER};
		pthread_create(&th[i], NULL, worker, &args[i]);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	engine_flush_summaries(e);
	/* every bad request is accounted for exactly once: as a first
	 * occurrence or inside a summary's count */
	uint64_t per_rule[RULE_COUNT] = {0};
	size_t firsts[RULE_COUNT] = {0};
	for (size_t i = 0; i < sink.n; i++) {
		per_rule[sink.f[i].rule] += sink.f[i].repeats ? sink.f[i].repeats : 1;
		firsts[sink.f[i].rule] += sink.f[i].repeats == 0;
	}
	assert_int_equal(per_rule[RULE_CASE_INSENSITIVE_REGEX], NTHREADS * ITER / 5);
	assert_int_equal(per_rule[RULE_UNBOUNDED_PUSH], NTHREADS * ITER / 5);
	assert_int_equal(per_rule[RULE_HOT_PATH_LOOKUP], NTHREADS * ITER / 5);
	assert_int_equal(firsts[RULE_CASE_INSENSITIVE_REGEX], 1);
	assert_int_equal(firsts[RULE_UNBOUNDED_PUSH], 1);
	engine_free(e);
	fx_sink_free(&sink);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults_and_names),
	    cmocka_unit_test(test_scopes),
	    cmocka_unit_test(test_may_block),
	    cmocka_unit_test(test_scoped_engine),
	    cmocka_unit_test(test_dry_run),
	    cmocka_unit_test(test_block_sample),
	    cmocka_unit_test(test_explain_never_blocks),
	    cmocka_unit_test(test_collection_by_uuid),
	    cmocka_unit_test(test_batch_blocked_whole),
	    cmocka_unit_test(test_batch_report_cap),
	    cmocka_unit_test(test_uninteresting_commands),
	    cmocka_unit_test(test_dedupe_and_summaries),
	    cmocka_unit_test(test_shape_in_findings),
	    cmocka_unit_test(test_redaction_off),
	    cmocka_unit_test(test_sort_waits_then_decides),
	    cmocka_unit_test(test_wait_does_not_count_joins),
	    cmocka_unit_test(test_unavailable_and_no_cache),
	    cmocka_unit_test(test_ddl_invalidates),
	    cmocka_unit_test(test_refused_statements),
	    cmocka_unit_test(test_repeated_keys),
	    cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
