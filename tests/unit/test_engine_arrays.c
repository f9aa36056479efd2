/* Multikey learned from writes (analyzers/engine/arrays_seen.c): a write
 * the engine forwards that puts an array under an index key marks that key
 * multikey on the shared index list, and the sort rule then judges a sort
 * on it as mongod does (a multikey key with bounds cannot give the order).
 * FerretDB's explain does not say multikey, so without this the sort is
 * missed there. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/rules/rule_doc.h"
#include "fixtures/analyzer_fixture.h"

static const char *const specs[] = {
    "{'v':2,'key':{'_id':1},'name':'_id_'}",
    "{'v':2,'key':{'tags':1},'name':'tags_1'}",
    "{'v':2,'key':{'a.b':1,'c':1},'name':'ab_c'}",
    "{'v':2,'key':{'s':1,'tags':1},'name':'s_tags'}",
};

/* {s: 1, tags: 1} gives this order while tags holds no arrays: s is one
 * point, then tags in key order. Once tags is multikey its bounds break
 * the order (a document sorts by its least tag, which may lie outside
 * them), and no whole-index scan gives a sort on the second key. */
#define SORT_TAGS "{'find':'orders','filter':{'s':5,'tags':{'$gte':'m'}},'sort':{'tags':1}}"

/* shop.orders with the first n specs (the sort test leaves out tags_1,
 * whose whole-index scan would give {tags: 1} whatever tags holds). */
static index_cache *cache_of(const char *const *list, size_t n)
{
	index_cache *ic = index_cache_new(NULL, 60, NULL, NULL, NULL, 0);
	index_set *set = fx_index_set(list, n);
	index_set_set_doc_count(set, 50000);
	index_cache_put(ic, "shop", "orders", set);
	index_set_release(set);
	return ic;
}

static index_cache *cache(void)
{
	return cache_of(specs, sizeof(specs) / sizeof(specs[0]));
}

/* The multikey keys of index name in shop.orders, as the rules read them. */
static uint32_t multikey(index_cache *ic, const char *name)
{
	index_set *set = NULL;
	assert_int_equal(index_cache_get(ic, "shop", "orders", &set), INDEXES_KNOWN);
	uint32_t bits = 0;
	for (size_t i = 0; i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		bool known;
		if (strcmp(d->name, name) == 0)
			bits = index_def_multikey(d, &known);
	}
	index_set_release(set);
	return bits;
}

static engine *engine_at(index_cache *ic, fx_sink *sink, engine_config *cfg)
{
	rule_config_defaults(cfg);
	for (int r = 0; r < RULE_COUNT; r++)
		cfg->rules[r].action = RULE_LOG;
	return engine_new(cfg, ic, fx_sink_fn, sink);
}

/* The sort is given by {s: 1, tags: 1} until an insert shows tags is an array. */
static void test_insert_makes_the_sort_in_memory(void **state)
{
	static const char *const sort_specs[] = {specs[0], specs[3]};
	index_cache *ic = cache_of(sort_specs, 2);
	fx_sink sink;
	fx_sink_init(&sink);
	engine_config cfg;
	engine *e = engine_at(ic, &sink, &cfg);
	assert_int_equal(fx_analyze(e, "shop", SORT_TAGS, NULL, 0, NULL, NULL), VERDICT_FORWARD);
	assert_int_equal(fx_sink_count(&sink, RULE_INDEX_MISMATCHED_SORT), 0);
	/* scalars and an array elsewhere say nothing */
	fx_analyze(e, "shop", "{'insert':'orders','documents':[{'tags':'x','other':[1,2]}]}", NULL,
	           0, NULL, NULL);
	assert_int_equal(multikey(ic, "s_tags"), 0);
	fx_seq seq = {"documents", {"{'_id':1,'tags':['red','blue']}"}};
	fx_analyze(e, "shop", "{'insert':'orders'}", &seq, 1, NULL, NULL);
	assert_int_equal(multikey(ic, "s_tags"), 2);
	fx_sink_clear(&sink);
	fx_analyze(e, "shop", SORT_TAGS, NULL, 0, NULL, NULL);
	assert_int_equal(fx_sink_count(&sink, RULE_INDEX_MISMATCHED_SORT), 1);
	/* without bounds on tags the index still gives the order */
	fx_sink_clear(&sink);
	fx_analyze(e, "shop", "{'find':'orders','filter':{'s':5},'sort':{'tags':1}}", NULL, 0, NULL,
	           NULL);
	assert_int_equal(fx_sink_count(&sink, RULE_INDEX_MISMATCHED_SORT), 0);
	/* the list fetched again (a refresh) keeps what the writes showed */
	index_set *again = fx_index_set(sort_specs, 2);
	index_cache_put(ic, "shop", "orders", again);
	index_set_release(again);
	assert_int_equal(multikey(ic, "s_tags"), 2);
	/* a list in which that index is another one starts over */
	static const char *const other[] = {
	    "{'v':2,'key':{'_id':1},'name':'_id_'}",
	    "{'v':2,'key':{'s':1,'tags':-1},'name':'s_tags'}",
	};
	again = fx_index_set(other, 2);
	index_cache_put(ic, "shop", "orders", again);
	index_set_release(again);
	assert_int_equal(multikey(ic, "s_tags"), 0);
	engine_free(e);
	index_cache_free(ic);
	fx_sink_free(&sink);
}

/* Which writes put an array under which key. */
static void test_update_paths(void **state)
{
	static const struct {
		const char *update; /* the u of one statement on shop.orders */
		const char *index;
		uint32_t bits;
	} cases[] = {
	    {"{'$push':{'tags':'x'}}", "tags_1", 1},
	    {"{'$addToSet':{'tags':{'$each':['x']}}}", "tags_1", 1},
	    {"{'$set':{'tags':['x']}}", "tags_1", 1},
	    {"{'$setOnInsert':{'a':[{'b':1}]}}", "ab_c", 1},
	    {"{'$set':{'a':{'b':[1,2]}}}", "ab_c", 1},
	    {"{'$set':{'a.$.b':1}}", "ab_c", 1},
	    {"{'$set':{'a.$[e].b':1}}", "ab_c", 1},
	    {"{'$push':{'c':1}}", "ab_c", 2},
	    {"{'c':[1],'a':{'b':2}}", "ab_c", 2}, /* a replacement */
	    {"{'$set':{'a.$[].b':1}}", "ab_c", 1},
	    {"{'$set':{'x':1,'y':2},'$inc':{'n':1},'$push':{'c':1}}", "ab_c", 2},
	    {"{'$push':{'z':1},'$push':{'tags':1}}", "tags_1", 1}, /* a repeated operator */
	    /* sixteen array writes are read; past them nothing is learned */
	    {"{'$set':{'p0':[],'p1':[],'p2':[],'p3':[],'p4':[],'p5':[],'p6':[],'p7':[],"
	     "'p8':[],'p9':[],'pa':[],'pb':[],'pc':[],'pd':[],'pe':[],'tags':[]}}",
	     "tags_1", 1},
	    {"{'$set':{'p0':[],'p1':[],'p2':[],'p3':[],'p4':[],'p5':[],'p6':[],'p7':[],"
	     "'p8':[],'p9':[],'pa':[],'pb':[],'pc':[],'pd':[],'pe':[],'pf':[],'tags':[]}}",
	     "tags_1", 0},
	    /* scalar $sets are not kept, so do not count towards the sixteen */
	    {"{'$set':{'s0':1,'s1':1,'s2':1,'s3':1,'s4':1,'s5':1,'s6':1,'s7':1,'s8':1,"
	     "'s9':1,'sa':1,'sb':1,'sc':1,'sd':1,'se':1,'sf':1,'sg':1,'tags':['x']}}",
	     "tags_1", 1},
	    /* near misses */
	    {"{'$set':{'tags':'x'}}", "tags_1", 0},
	    {"{'$set':{'a':{'b':1,'z':[1]}}}", "ab_c", 0},
	    {"{'$push':{'a.z':1}}", "ab_c", 0}, /* a is a document holding an array z */
	    {"{'$set':{'tagsX':[1]}}", "tags_1", 0},
	    {"{'$inc':{'tags':1}}", "tags_1", 0},
	    {"[{'$set':{'tags':['x']}}]", "tags_1", 0}, /* a pipeline computes: not read */
	    {"{'$set':{'a.0.b':1}}", "ab_c", 0},        /* "0" may be a field name */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		index_cache *ic = cache();
		fx_sink sink;
		fx_sink_init(&sink);
		engine_config cfg;
		engine *e = engine_at(ic, &sink, &cfg);
		char json[1024];
		snprintf(json, sizeof(json),
		         "{'update':'orders','updates':[{'q':{'_id':1},'u':%s,'upsert':true}]}",
		         cases[i].update);
		fx_analyze(e, "shop", json, NULL, 0, NULL, NULL);
		if (multikey(ic, cases[i].index) != cases[i].bits)
			fail_msg("%s: %s multikey bits %u, expected %u", cases[i].update,
			         cases[i].index, multikey(ic, cases[i].index), cases[i].bits);
		engine_free(e);
		index_cache_free(ic);
		fx_sink_free(&sink);
	}
}

/* A batch's statement matched by the template of the one before it is
 * not read: only value bytes no read looks at may differ. The operand of
 * a $set is read for the arrays it writes, so a $set of an array of the
 * same length as the scalar $set before it must still be learned. */
static void test_template_hides_no_write(void **state)
{
	static const char *const batches[] = {
	    /* {other: 5} and {tags: []}: the same 11 bytes inside the $set */
	    "{'update':'orders','updates':[{'q':{'_id':1},'u':{'$set':{'other':5}}},"
	    "{'q':{'_id':2},'u':{'$set':{'tags':[]}}}]}",
	    /* a bounded $push, of the same length as an unbounded one after it */
	    "{'update':'orders','updates':[{'q':{'_id':1},'u':{'$push':{'tagz':{'$each':[1],"
	    "'$slice':-8}}}},{'q':{'_id':2},'u':{'$push':{'tags':{'$eaxh':[1],'$slice':-8}}}}]}",
	};
	for (size_t i = 0; i < sizeof(batches) / sizeof(batches[0]); i++) {
		index_cache *ic = cache();
		fx_sink sink;
		fx_sink_init(&sink);
		engine_config cfg;
		engine *e = engine_at(ic, &sink, &cfg);
		fx_analyze(e, "shop", batches[i], NULL, 0, NULL, NULL);
		if (multikey(ic, "tags_1") != 1)
			fail_msg("batch %zu: tags_1 multikey bits %u, expected 1", i,
			         multikey(ic, "tags_1"));
		if (i == 1 && fx_sink_count(&sink, RULE_UNBOUNDED_PUSH) != 1)
			fail_msg("batch %zu: %zu unbounded-push findings, expected 1", i,
			         fx_sink_count(&sink, RULE_UNBOUNDED_PUSH));
		engine_free(e);
		index_cache_free(ic);
		fx_sink_free(&sink);
	}
}

/* What is not written marks nothing: a blocked insert, an explain, and a
 * configuration whose index-reading rules are all off. */
static void test_only_what_is_written(void **state)
{
	index_cache *ic = cache();
	fx_sink sink;
	fx_sink_init(&sink);
	engine_config cfg;
	engine *e = engine_at(ic, &sink, &cfg);
	engine_free(e);
	cfg.rules[RULE_LARGE_DOCUMENT].action = RULE_BLOCK;
	cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_ARRAY_LENGTH] = 2;
	e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	block_info b = {0};
	assert_int_equal(fx_analyze(e, "shop",
	                            "{'insert':'orders','documents':[{'tags':['a','b','c']}]}",
	                            NULL, 0, NULL, &b),
	                 VERDICT_BLOCK);
	assert_int_equal(multikey(ic, "tags_1"), 0);
	fx_analyze(e, "shop",
	           "{'explain':{'update':'orders','updates':[{'q':{},'u':{'$push':{'tags':1}}}]}}",
	           NULL, 0, NULL, NULL);
	assert_int_equal(multikey(ic, "tags_1"), 0);
	engine_free(e);
	for (int r = 0; r < RULE_COUNT; r++)
		cfg.rules[r].action = RULE_OFF;
	cfg.rules[RULE_LARGE_DOCUMENT].action = RULE_LOG;
	e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	fx_analyze(e, "shop", "{'insert':'orders','documents':[{'tags':['a']}]}", NULL, 0, NULL,
	           NULL);
	assert_int_equal(multikey(ic, "tags_1"), 0);
	engine_free(e);
	/* bulkWrite's insert ops are read as inserts are */
	cfg.rules[RULE_INDEX_MISMATCHED_SORT].action = RULE_LOG;
	e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	fx_analyze(e, "admin",
	           "{'bulkWrite':1,'nsInfo':[{'ns':'shop.orders'}],'ops':[{'insert':0,'document':{"
	           "'tags':['a']}}]}",
	           NULL, 0, NULL, NULL);
	assert_int_equal(multikey(ic, "tags_1"), 1);
	engine_free(e);
	index_cache_free(ic);
	fx_sink_free(&sink);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_insert_makes_the_sort_in_memory),
	    cmocka_unit_test(test_update_paths),
	    cmocka_unit_test(test_template_hides_no_write),
	    cmocka_unit_test(test_only_what_is_written),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
