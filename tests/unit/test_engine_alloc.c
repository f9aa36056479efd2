/* The engine's promise: no heap allocation per request in the common case.
 * Every malloc of the process is counted (AddressSanitizer's allocation
 * hooks) around engine_analyze() calls on requests that fire no new finding:
 * clean commands, and repeats of findings and joins already known. Without
 * the sanitizer (no hooks to count with) the test skips. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "analyzers/catalog/index_cache.h"
#include "analyzers/planner/index_set.h"
#include "analyzers/rules/rule_doc.h"
#include "fixtures/analyzer_fixture.h"

/* From <sanitizer/allocator_interface.h>; weak so the test links without
 * the sanitizer runtime. */
extern int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *,
                                                                         size_t),
                                                     void (*free_hook)(const volatile void *))
    __attribute__((weak));

static volatile size_t allocations;
static volatile bool counting;

static void on_malloc(const volatile void *p, size_t n)
{
	if (counting)
		allocations++;
}

static void on_free(const volatile void *p)
{
}

typedef struct acase {
	const char *name;
	const char *json;
	fx_seq seqs[2];
} acase;

#define C(n, j)                                                                                    \
	{                                                                                          \
		n, j, FX_NOSEQ                                                                     \
	}

static const acase cases[] = {
    C("find by _id", "{'find':'orders','filter':{'_id':{'$oid':'0123456789abcdef01234567'}}}"),
    C("find filter+sort (index known)",
      "{'find':'orders','filter':{'status':'A','qty':{'$gt':5}},'sort':{'created':-1}}"),
    C("insert", "{'insert':'orders','documents':[{'a':1}]}"),
    {"update $set (kind-1)",
     "{'update':'orders'}",
     {{"updates", {"{'q':{'_id':1},'u':{'$set':{'a':1}}}", "{'q':{'_id':2},'u':{'$inc':{'n':1}}}"}},
      {NULL, {NULL}}}},
    C("aggregate $match/$group",
      "{'aggregate':'orders','pipeline':[{'$match':{'status':'A'}},{'$group':{'_id':'$c','t':{"
      "'$sum':'$a'}}},{'$sort':{'t':-1}}],'cursor':{}}"),
    C("aggregate $match/$sort (index known)",
      "{'aggregate':'orders','pipeline':[{'$match':{'status':'A'}},{'$sort':{'created':-1}}],"
      "'cursor':{}}"),
    C("count", "{'count':'orders','query':{'status':'A'}}"),
    C("distinct", "{'distinct':'orders','key':'status','query':{'qty':{'$in':[1,2,3]}}}"),
    C("delete", "{'delete':'orders','deletes':[{'q':{'status':'Z'},'limit':0}]}"),
    C("findAndModify $set",
      "{'findAndModify':'orders','query':{'_id':1},'update':{'$set':{'a':1}},'new':true}"),
    {"bulkWrite (kind-1)",
     "{'bulkWrite':1}",
     {{"ops",
       {"{'insert':0,'document':{'a':1}}", "{'update':0,'filter':{'_id':1},'updateMods':{"
                                           "'$set':{'a':2}}}"}},
      {"nsInfo", {"{'ns':'shop.orders'}"}}}},
    C("explain find", "{'explain':{'find':'orders','filter':{'a':1}}}"),
    C("repeat of a known regex finding", "{'find':'users','filter':{'name':{'$regularExpression':"
                                         "{'pattern':'x','options':'i'}}}}"),
    C("repeat of a known push finding",
      "{'update':'posts','updates':[{'q':{'_id':1},'u':{'$push':{'h':1}}}]}"),
    C("find bounded by an index (collection-scan judged)",
      "{'find':'orders','filter':{'status':{'$in':['A','B']},'qty':{'$ne':3}}}"),
    C("repeat of a known collection-scan finding",
      "{'find':'orders','filter':{'qty':{'$gt':5}},'sort':{'qty':1}}"),
    C("repeat of a known empty-filter scan", "{'delete':'orders','deletes':[{'q':{},'limit':0}]}"),
    C("repeat of a known $lookup scan",
      "{'aggregate':'orders','pipeline':[{'$match':{'status':'A'}},{'$lookup':{'from':'orders',"
      "'localField':'a','foreignField':'zz','as':'j'}}],'cursor':{}}"),
    C("insert of a small document (large-document judged)",
      "{'insert':'orders','documents':[{'a':1,'items':[1,2,3],'s':'xxxxxxxxxxxxxxxxxxxxxxxxx'}]}"),
    C("repeat of a known large-document finding",
      "{'insert':'orders','documents':[{'a':[0,0,0,0,0,0,0,0,0,0,0,0]}]}"),
    C("guarded $push (bucket pattern)",
      "{'update':'sensor','updates':[{'q':{'k':1,'n':{'$lt':200}},'u':{'$push':{'r':1},'$inc':{"
      "'n':1}},'upsert':true}]}"),
    C("repeat of a known hot join",
      "{'aggregate':'orders','pipeline':[{'$lookup':{'from':'u','localField':'a','foreignField':"
      "'b','as':'j'}}],'cursor':{}}"),
};

static void test_no_allocation(void **state)
{
	if (!__sanitizer_install_malloc_and_free_hooks)
		skip();
	__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
	/* guard the guard: the hook sees allocations */
	allocations = 0;
	counting = true;
	void *volatile p = malloc(16);
	counting = false;
	free(p);
	assert_true(allocations > 0);

	index_cache *ic = fx_orders_cache();
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_HOT_PATH_LOOKUP].params[LOOKUP_PARAM_THRESHOLD] = 1;
	cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_ARRAY_LENGTH] = 10;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	request_ctx rc = {.app_name = "app", .client = "c:1", .now_ms = 1};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const acase *c = &cases[i];
		fx_req r;
		size_t n = c->seqs[1].id ? 2 : c->seqs[0].id ? 1 : 0;
		assert_true(fx_req_build(&r, "shop", c->json, c->seqs, n));
		block_info b;
		engine_analyze(e, &r.v, &rc, &b); /* first: may report, may allocate */
		allocations = 0;
		counting = true;
		for (int k = 0; k < 100; k++)
			engine_analyze(e, &r.v, &rc, &b);
		counting = false;
		if (allocations)
			fail_msg("%s: %zu allocations in 100 calls", c->name, (size_t)allocations);
		fx_req_free(&r);
	}
	__sanitizer_install_malloc_and_free_hooks(NULL, NULL);
	/* The "repeat of a known finding" rows are repeats: each fired once
	 * (collection-scan: those three, the explain of find {a: 1}, the
	 * distinct whose filter is on qty, outside the index its key leads: a
	 * DISTINCT_SCAN cannot apply it, so every document is read, and since
	 * stop 40 the hot join's aggregation, which filters nothing: every
	 * document of orders reaches its cursor). */
	assert_int_equal(fx_sink_count(&sink, RULE_COLLECTION_SCAN), 6);
	assert_int_equal(fx_sink_count(&sink, RULE_LARGE_DOCUMENT), 1);
	assert_int_equal(fx_sink_count(&sink, RULE_UNBOUNDED_PUSH), 1);
	engine_free(e);
	index_cache_free(ic);
	fx_sink_free(&sink);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_allocation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
