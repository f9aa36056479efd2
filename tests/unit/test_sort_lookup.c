/* index-mismatched-sort through the engine: a $sort in a $lookup
 * sub-pipeline (both forms), judged against the foreign collection's
 * indexes at its namespace, with the bounds the sub-pipeline gets per
 * outer document (the $expr equalities on variables, localField/
 * foreignField). Before round 4 no $lookup sort was ever judged: every
 * "true" row below failed then. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "analyzers/catalog/index_cache.h"
#include "analyzers/planner/index_set.h"
#include "fixtures/analyzer_fixture.h"

static index_cache *lookup_cache(void)
{
	static const char *const specs[][2] = {
	    {"orders", "[{'key':{'_id':1},'name':'_id_'},{'key':{'cust':1},'name':'cust_1'}]"},
	    {"items", "[{'key':{'_id':1},'name':'_id_'},"
	              "{'key':{'order':1,'at':-1},'name':'order_1_at_-1'}]"},
	};
	return fx_cache_of(specs, sizeof(specs) / sizeof(specs[0]), 100);
}

#define AGG(stages) "{'aggregate':'orders','pipeline':[" stages "],'cursor':{}}"
#define LET         "'let':{'o':'$_id'}"

static const fx_expect cases[] = {
    {"correlated $expr equality on the index prefix: provided", false, NULL, NULL, NULL, NULL},
    {"correlated, sort on a field no index orders", true, "test.items", "aggregate",
     "sort {\"qty\": 1} on test.items: no index provides it",
     "getCollection(\"items\").createIndex({\"order\": 1, \"qty\": 1})"},
    {"uncorrelated $match, sort no index provides", true, "test.items", "aggregate",
     "sort {\"at\": -1} on test.items: no index provides it", NULL},
    {"localField/foreignField with a pipeline: an equality on foreignField", false, NULL, NULL,
     NULL, NULL},
    {"mate: the same sort without the foreignField bound", true, "test.items", "aggregate",
     "sort {\"at\": -1} on test.items", NULL},
    {"$expr $and of equalities", false, NULL, NULL, NULL, NULL},
    {"two field paths compared bound nothing", true, "test.items", "aggregate",
     "sort {\"at\": -1} on test.items", NULL},
    {"concise $lookup without a pipeline sorts nothing", false, NULL, NULL, NULL, NULL},
    {"a $sort after another stage is not judged", false, NULL, NULL, NULL, NULL},
    /* the engine's walk is the one every rule shares (planner/stages.c):
     * sub-pipelines nested past 4 levels were not judged before */
    {"a $lookup sort five sub-pipelines deep", true, "test.items", "aggregate",
     "sort {\"zz\": 1} on test.items", NULL},
};

static const char *const json[] = {
    AGG("{'$lookup':{'from':'items'," LET ",'pipeline':[{'$match':{'$expr':{'$eq':['$order',"
        "'$$o']}}},{'$sort':{'at':-1}}],'as':'i'}}"),
    AGG("{'$lookup':{'from':'items'," LET ",'pipeline':[{'$match':{'$expr':{'$eq':['$order',"
        "'$$o']}}},{'$sort':{'qty':1}}],'as':'i'}}"),
    AGG("{'$lookup':{'from':'items','pipeline':[{'$match':{'kind':'SECRET'}},{'$sort':{'at':-1}}],"
        "'as':'i'}}"),
    AGG("{'$lookup':{'from':'items','localField':'_id','foreignField':'order','pipeline':[{'$sort':"
        "{'at':-1}}],'as':'i'}}"),
    AGG("{'$lookup':{'from':'items','pipeline':[{'$sort':{'at':-1}}],'as':'i'}}"),
    AGG("{'$lookup':{'from':'items'," LET ",'pipeline':[{'$match':{'$expr':{'$and':[{'$eq':['$$o',"
        "'$order']},{'$gt':['$at',1]}]}}},{'$sort':{'at':-1}}],'as':'i'}}"),
    AGG("{'$lookup':{'from':'items','pipeline':[{'$match':{'$expr':{'$eq':['$order','$x']}}},"
        "{'$sort':{'at':-1}}],'as':'i'}}"),
    AGG("{'$lookup':{'from':'items','localField':'_id','foreignField':'order','as':'i'}}"),
    AGG("{'$lookup':{'from':'items','pipeline':[{'$project':{'at':1}},{'$sort':{'zz':1}}],"
        "'as':'i'}}"),
    AGG("{'$unionWith':{'coll':'orders','pipeline':[{'$unionWith':{'coll':'orders','pipeline':["
        "{'$unionWith':{'coll':'orders','pipeline':[{'$unionWith':{'coll':'orders','pipeline':["
        "{'$lookup':{'from':'items','pipeline':[{'$sort':{'zz':1}}],'as':'i'}}]}}]}}]}}]}}"),
};

static void test_lookup_forms(void **state)
{
	(void)state;
	index_cache *ic = lookup_cache();
	size_t n = sizeof(cases) / sizeof(cases[0]);
	assert_int_equal(n, sizeof(json) / sizeof(json[0]));
	for (size_t i = 0; i < n; i++) {
		fx_run_rule_case_ic(RULE_INDEX_MISMATCHED_SORT, RULE_LOG, ic, json[i], NULL, 0,
		                    &cases[i]);
		fx_run_rule_case_ic(RULE_INDEX_MISMATCHED_SORT, RULE_BLOCK, ic, json[i], NULL, 0,
		                    &cases[i]);
	}
	index_cache_free(ic);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lookup_forms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
