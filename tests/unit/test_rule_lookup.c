/* hot-path-lookup: aggregations with joins that run often enough, and
 * near-misses (too few runs, too spread out, no join, explain, other
 * shapes). The rule runs in block mode here so that every hot execution is
 * visible in the verdict, not only the first (the sink sees repeats as
 * counts); one test checks log mode and the finding itself. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "analyzers/rules/rule_lookup.h"
#include "fixtures/analyzer_fixture.h"

#define THRESHOLD 3
#define WINDOW_S  60

#define LOOKUP      "{'$lookup':{'from':'users','localField':'uid','foreignField':'_id','as':'u'}}"
#define AGG(stages) "{'aggregate':'orders','pipeline':[" stages "],'cursor':{}}"

typedef struct lcase {
	const char *name;
	const char *json[2]; /* runs alternate between them when the second is set */
	int runs;
	int64_t step_ms;        /* between runs */
	int hot;                /* executions expected blocked */
	rule_action scoped_off; /* RULE_OFF: a scope turns the rule off for test.orders */
} lcase;

static const lcase cases[] = {
    /* ---- hits ---- */
    {"$lookup localField/foreignField", {AGG(LOOKUP)}, 3, 1000, 1, RULE_LOG},
    {"$lookup with pipeline",
     {AGG("{'$lookup':{'from':'users','let':{'u':'$uid'},'pipeline':[{'$match':{'$expr':{'$eq':"
          "['$_id','$$u']}}}],'as':'u'}}")},
     3,
     1000,
     1,
     RULE_LOG},
    {"$graphLookup",
     {AGG("{'$graphLookup':{'from':'emp','startWith':'$boss','connectFromField':'boss',"
          "'connectToField':'name','as':'chain'}}")},
     3,
     1000,
     1,
     RULE_LOG},
    {"$lookup inside $facet",
     {AGG("{'$facet':{'a':[{'$count':'n'}],'b':[" LOOKUP "]}}")},
     3,
     10,
     1,
     RULE_LOG},
    {"$lookup inside $unionWith",
     {AGG("{'$unionWith':{'coll':'archive','pipeline':[" LOOKUP "]}}")},
     3,
     10,
     1,
     RULE_LOG},
    {"$graphLookup in $facet in $unionWith",
     {AGG("{'$unionWith':{'coll':'x','pipeline':[{'$facet':{'g':[{'$graphLookup':{'from':'e',"
          "'startWith':'$a','connectFromField':'a','connectToField':'b','as':'c'}}]}}]}}")},
     3,
     10,
     1,
     RULE_LOG},
    {"five runs: third, fourth and fifth are hot", {AGG(LOOKUP)}, 5, 1000, 3, RULE_LOG},
    {"different literals, same shape",
     {AGG("{'$match':{'status':'A','n':{'$in':[1,2]}}}," LOOKUP),
      AGG("{'$match':{'status':'SECRET','n':{'$in':[4,5,6,7]}}}," LOOKUP)},
     4,
     1000,
     2,
     RULE_LOG},
    {"within the window at its edge", {AGG(LOOKUP)}, 3, 29999, 1, RULE_LOG},
    {"$lookup after $match and $sort",
     {AGG("{'$match':{'a':1}},{'$sort':{'t':-1}}," LOOKUP ",{'$limit':10}")},
     3,
     1000,
     1,
     RULE_LOG},
    {"collection-less aggregate",
     {"{'aggregate':1,'pipeline':[{'$documents':[{'uid':1}]}," LOOKUP "],'cursor':{}}"},
     3,
     10,
     1,
     RULE_LOG},
    {"slow burst then fast", {AGG(LOOKUP)}, 6, 20000, 4, RULE_LOG},
    {"twenty runs in a second", {AGG(LOOKUP)}, 20, 50, 18, RULE_LOG},
    {"nested $lookup in a $lookup pipeline",
     {AGG("{'$lookup':{'from':'a','as':'x','pipeline':[{'$lookup':{'from':'b','as':'y',"
          "'localField':'k','foreignField':'k'}}]}}")},
     3,
     10,
     1,
     RULE_LOG},
    {"$lookup in $facet in $facet",
     {AGG("{'$facet':{'a':[{'$facet':{'b':[" LOOKUP "]}}]}}")},
     3,
     10,
     1,
     RULE_LOG},
    {"$graphLookup with restrictSearchWithMatch literals",
     {AGG("{'$graphLookup':{'from':'e','startWith':'$a','connectFromField':'a',"
          "'connectToField':'b','as':'c','restrictSearchWithMatch':{'d':'x'}}}"),
      AGG("{'$graphLookup':{'from':'e','startWith':'$a','connectFromField':'a',"
          "'connectToField':'b','as':'c','restrictSearchWithMatch':{'d':'SECRET'}}}")},
     3,
     10,
     1,
     RULE_LOG},
    {"$limit values differ",
     {AGG(LOOKUP ",{'$limit':5}"), AGG(LOOKUP ",{'$limit':50}")},
     3,
     10,
     1,
     RULE_LOG},
    {"same shape over many seconds, stays hot", {AGG(LOOKUP)}, 10, 15000, 8, RULE_LOG},
    {"$lookup from another stage position",
     {AGG("{'$project':{'uid':1}},{'$skip':1}," LOOKUP)},
     3,
     10,
     1,
     RULE_LOG},
    {"$lookup with pipeline literals differ",
     {AGG("{'$lookup':{'from':'u','as':'j','pipeline':[{'$match':{'x':1}}]}}"),
      AGG("{'$lookup':{'from':'u','as':'j','pipeline':[{'$match':{'x':99}}]}}")},
     3,
     10,
     1,
     RULE_LOG},

    /* ---- near-misses ---- */
    {"two runs only", {AGG(LOOKUP)}, 2, 1000, 0, RULE_LOG},
    {"three runs spanning the whole window", {AGG(LOOKUP)}, 3, 30000, 0, RULE_LOG},
    {"three runs too far apart", {AGG(LOOKUP)}, 3, 40000, 0, RULE_LOG},
    {"many runs, always too slow", {AGG(LOOKUP)}, 10, 31000, 0, RULE_LOG},
    {"no join: $match + $group",
     {AGG("{'$match':{'a':1}},{'$group':{'_id':'$b','n':{'$sum':1}}}")},
     5,
     10,
     0,
     RULE_LOG},
    {"$unionWith without a join", {AGG("{'$unionWith':'archive'}")}, 5, 10, 0, RULE_LOG},
    {"explain of a join",
     {"{'explain':{'aggregate':'orders','pipeline':[" LOOKUP "],'cursor':{}},'verbosity':"
      "'queryPlanner'}"},
     5,
     10,
     0,
     RULE_LOG},
    {"aggregate with explain: true",
     {"{'aggregate':'orders','pipeline':[" LOOKUP "],'explain':true}"},
     5,
     10,
     0,
     RULE_LOG},
    {"find is not an aggregation",
     {"{'find':'orders','filter':{'$lookup':1}}"},
     5,
     10,
     0,
     RULE_LOG},
    {"a field named lookup",
     {AGG("{'$addFields':{'lookup':'$x','from':'users'}}")},
     5,
     10,
     0,
     RULE_LOG},
    {"the string $lookup as a value", {AGG("{'$match':{'stage':'$lookup'}}")}, 5, 10, 0, RULE_LOG},
    {"$lookup inside $literal",
     {AGG("{'$project':{'x':{'$literal':{'$lookup':{'from':'u','as':'j'}}}}}")},
     5,
     10,
     0,
     RULE_LOG},
    {"alternating shapes (different joined collections)",
     {AGG("{'$lookup':{'from':'users','localField':'a','foreignField':'b','as':'c'}}"),
      AGG("{'$lookup':{'from':'items','localField':'a','foreignField':'b','as':'c'}}")},
     4,
     10,
     0,
     RULE_LOG},
    {"alternating shapes (different match fields)",
     {AGG("{'$match':{'a':1}}," LOOKUP), AGG("{'$match':{'b':1}}," LOOKUP)},
     4,
     10,
     0,
     RULE_LOG},
    {"scoped off for the namespace", {AGG(LOOKUP)}, 5, 10, 0, RULE_OFF},
    /* no from: the pipeline starts with $documents, and no collection is
     * joined (nothing to embed) */
    {"$lookup of $documents",
     {AGG("{'$lookup':{'pipeline':[{'$documents':[{'x':1}]}],'as':'d'}}")},
     5,
     10,
     0,
     RULE_LOG},
    {"insert", {"{'insert':'orders','documents':[{'$lookup':1}]}"}, 5, 10, 0, RULE_LOG},
    {"update pipeline is not an aggregation",
     {"{'update':'orders','updates':[{'q':{},'u':[{'$set':{'a':1}}]}]}"},
     5,
     10,
     0,
     RULE_LOG},
    {"$lookup as a $group accumulator name",
     {AGG("{'$group':{'_id':null,'$lookup':{'$sum':1}}}")},
     5,
     10,
     0,
     RULE_LOG},
    {"alternating $lookup and $graphLookup",
     {AGG(LOOKUP), AGG("{'$graphLookup':{'from':'users','startWith':'$uid','connectFromField':'a',"
                       "'connectToField':'b','as':'u'}}")},
     4,
     10,
     0,
     RULE_LOG},
    {"alternating namespaces",
     {AGG(LOOKUP), "{'aggregate':'invoices','pipeline':[" LOOKUP "],'cursor':{}}"},
     4,
     10,
     0,
     RULE_LOG},
    {"count command", {"{'count':'orders','query':{'a':1}}"}, 5, 10, 0, RULE_LOG},
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static engine_config config(rule_action action, bool scoped_off)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	rule_config *rc = &cfg.rules[RULE_HOT_PATH_LOOKUP];
	rc->action = action;
	rc->params[LOOKUP_PARAM_THRESHOLD] = THRESHOLD;
	rc->params[LOOKUP_PARAM_WINDOW_SECONDS] = WINDOW_S;
	if (scoped_off) {
		snprintf(rc->scopes[0].namespaces[0], RULE_PATTERN_LEN, "test.ord*");
		rc->scopes[0].nnamespaces = 1;
		rc->scopes[0].action = RULE_OFF;
		rc->nscopes = 1;
	}
	return cfg;
}

static void run_case(const lcase *c)
{
	engine_config cfg = config(RULE_BLOCK, c->scoped_off == RULE_OFF);
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	assert_non_null(e);
	int blocked = 0;
	for (int i = 0; i < c->runs; i++) {
		const char *json = c->json[1] && (i & 1) ? c->json[1] : c->json[0];
		request_ctx rc = {
		    .app_name = "", .client = "c", .now_ms = 5000000 + i * c->step_ms};
		block_info block = {0};
		verdict v = fx_analyze(e, "test", json, NULL, 0, &rc, &block);
		if (v == VERDICT_BLOCK) {
			blocked++;
			if (block.rule != RULE_HOT_PATH_LOOKUP ||
			    !strstr(block.errmsg, "rule hot-path-lookup") ||
			    !strstr(block.errmsg, "Fix:") || strstr(block.errmsg, "SECRET"))
				fail_msg("case \"%s\": errmsg %s", c->name, block.errmsg);
		}
	}
	if (blocked != c->hot)
		fail_msg("case \"%s\": %d hot executions, expected %d", c->name, blocked, c->hot);
	/* Dedupe: one first-occurrence line whatever the count. */
	if (fx_sink_count(&sink, RULE_HOT_PATH_LOOKUP) != (c->hot ? 1u : 0u))
		fail_msg("case \"%s\": %zu findings", c->name,
		         fx_sink_count(&sink, RULE_HOT_PATH_LOOKUP));
	for (size_t i = 0; i < sink.n; i++)
		if (strstr(sink.f[i].shape, "SECRET"))
			fail_msg("case \"%s\": literal in shape %s", c->name, sink.f[i].shape);
	engine_free(e);
	fx_sink_free(&sink);
}

static void test_table(void **state)
{
	for (size_t i = 0; i < NCASES; i++)
		run_case(&cases[i]);
}

static void test_table_is_balanced(void **state)
{
	size_t hits = 0, misses = 0;
	for (size_t i = 0; i < NCASES; i++)
		hits += cases[i].hot > 0, misses += cases[i].hot == 0;
	assert_true(hits >= 20);
	assert_true(misses >= hits);
}

/* Log mode with the defaults (60 in 60 s): the 60th run is the finding,
 * with its fields; the summary counts the later ones. */
static void test_log_defaults(void **state)
{
	fx_sink sink;
	fx_sink_init(&sink);
	engine_config cfg;
	rule_config_defaults(&cfg);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	for (int i = 1; i <= 70; i++) {
		request_ctx rc = {
		    .app_name = "billing", .client = "10.0.0.1:1234", .now_ms = i * 500};
		assert_int_equal(fx_analyze(e, "shop", AGG(LOOKUP), NULL, 0, &rc, NULL),
		                 VERDICT_FORWARD);
		assert_int_equal(fx_sink_count(&sink, RULE_HOT_PATH_LOOKUP), i < 60 ? 0 : 1);
	}
	const fx_finding *f = fx_sink_first(&sink, RULE_HOT_PATH_LOOKUP);
	assert_int_equal(f->action, RULE_LOG);
	assert_string_equal(f->ns, "shop.orders");
	assert_string_equal(f->command, "aggregate");
	assert_string_equal(f->app_name, "billing");
	assert_string_equal(f->client, "10.0.0.1:1234");
	assert_int_equal(f->repeats, 0);
	assert_string_equal(
	    f->shape, "{\"aggregate\":\"orders\",\"pipeline\":[{\"$lookup\":{\"from\":\"users\","
	              "\"localField\":\"uid\",\"foreignField\":\"_id\",\"as\":\"u\"}}]}");
	assert_non_null(strstr(f->detail, "$lookup from \"users\""));
	assert_non_null(strstr(f->detail, "60 times within 60 s"));
	assert_non_null(strstr(f->suggestion, "embed"));
	assert_non_null(strstr(f->suggestion, "extended reference"));
	engine_flush_summaries(e);
	assert_int_equal(sink.n, 2);
	assert_int_equal(sink.f[1].repeats, 10);
	assert_int_equal(sink.f[1].shape_hash, f->shape_hash);
	engine_free(e);
	fx_sink_free(&sink);
}

/* The window is exact: hot iff the oldest of the last `threshold` runs is
 * less than the window old. */
static void test_tracker_exact_window(void **state)
{
	lookup_tracker *t = lookup_tracker_new(3, 10, 100);
	uint32_t runs;
	assert_false(lookup_tracker_record(t, 42, 0, &runs));
	assert_false(lookup_tracker_record(t, 42, 5000, &runs));
	assert_true(lookup_tracker_record(t, 42, 9999, &runs)); /* 0..9999 within 10 s */
	assert_int_equal(runs, 3);
	assert_false(lookup_tracker_record(t, 42, 15000, &runs)); /* 5000..15000 is 10 s */
	assert_true(lookup_tracker_record(t, 42, 15001, &runs));  /* 9999..15001 */
	assert_false(lookup_tracker_record(t, 7, 15001, &runs));  /* another shape */
	lookup_tracker_free(t);
}

static void test_tracker_bounded(void **state)
{
	lookup_tracker *t = lookup_tracker_new(2, 60, 100);
	for (uint64_t s = 0; s < 1000; s++)
		lookup_tracker_record(t, s, (int64_t)s, NULL);
	assert_int_equal(lookup_tracker_size(t), 100);
	/* The most recent shapes survived; shape 0 was evicted and starts over. */
	assert_true(lookup_tracker_record(t, 999, 1000, NULL));
	assert_false(lookup_tracker_record(t, 0, 1000, NULL));
	lookup_tracker_free(t);
}

static void test_threshold_one(void **state)
{
	lookup_tracker *t = lookup_tracker_new(0, 60, 10); /* 0 means 1 */
	assert_true(lookup_tracker_record(t, 1, 0, NULL));
	assert_true(lookup_tracker_record(t, 1, 100000, NULL));
	lookup_tracker_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_is_balanced), cmocka_unit_test(test_table),
	    cmocka_unit_test(test_log_defaults),      cmocka_unit_test(test_tracker_exact_window),
	    cmocka_unit_test(test_tracker_bounded),   cmocka_unit_test(test_threshold_one),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
