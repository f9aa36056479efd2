/* ESR suggestions: exact strings, and the promise behind them: once the
 * suggested index exists, the sort rule finds the sort provided. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/planner/esr.h"
#include "analyzers/planner/index_set.h"
#include "fixtures/analyzer_fixture.h"
#include "analyzers/rules/rule_sort.h"

typedef struct esr_case {
	const char *name;
	const char *db, *coll;
	const char *filter; /* single quotes; NULL: none */
	const char *sort;
	const char *collation;
	const char *want; /* single quotes stand for double quotes */
} esr_case;

#define CMD(db, coll) "db.getSiblingDB('" db "').getCollection('" coll "').createIndex("

static const esr_case cases[] = {
    {"PROTOCOL.md's example", "shop", "cars", "{'manufacturer':'Ford','cost':{'$gt':10000}}",
     "{'model':1}", NULL, CMD("shop", "cars") "{'manufacturer': 1, 'model': 1, 'cost': 1})"},
    {"sort direction kept, range after", "shop", "orders", "{'status':'A','price':{'$gte':10}}",
     "{'created':-1}", NULL, CMD("shop", "orders") "{'status': 1, 'created': -1, 'price': 1})"},
    {"equalities in filter order", "d", "c", "{'b':1,'a':2}", "{'s':1}", NULL,
     CMD("d", "c") "{'b': 1, 'a': 1, 's': 1})"},
    {"$in with a sort is a range", "shop", "orders", "{'status':{'$in':['A','B']},'cust':7}",
     "{'created':-1}", NULL, CMD("shop", "orders") "{'cust': 1, 'created': -1, 'status': 1})"},
    {"$in of one value is equality", "d", "c", "{'a':{'$in':[1]}}", "{'s':-1}", NULL,
     CMD("d", "c") "{'a': 1, 's': -1})"},
    {"every range operator, filter order", "d", "c",
     "{'x':{'$regularExpression':{'pattern':'^a','options':''}},'y':{'$ne':1},'e':1,"
     "'z':{'$nin':[1]},'w':{'$exists':true},'r':{'$regex':'q'},'l':{'$lt':3}}",
     "{'s':1}", NULL,
     CMD("d", "c") "{'e': 1, 's': 1, 'x': 1, 'y': 1, 'z': 1, 'w': 1, 'r': 1, 'l': 1})"},
    {"equality on a sort field is listed once, as equality", "d", "c", "{'a':5}", "{'a':-1,'b':-1}",
     NULL, CMD("d", "c") "{'a': 1, 'b': -1})"},
    {"range on a sort field is listed once, as sort", "d", "c", "{'a':{'$gt':1}}", "{'a':-1}", NULL,
     CMD("d", "c") "{'a': -1})"},
    {"$and contributes, $or does not", "d", "c",
     "{'$and':[{'a':1},{'b':{'$lt':3}}],'$or':[{'x':1},{'y':2}]}", "{'c':1}", NULL,
     CMD("d", "c") "{'a': 1, 'c': 1, 'b': 1})"},
    {"$nor, $not and an $expr range contribute nothing", "d", "c",
     "{'$nor':[{'n':1}],'m':{'$not':{'$gt':1}},'$expr':{'$gt':['$q',1]}}", "{'s':1}", NULL,
     CMD("d", "c") "{'s': 1})"},
    /* mongod makes it an index point ($_internalExprEq), as the sort rule reads it */
    {"an $expr $eq is an equality", "d", "c", "{'$expr':{'$eq':['$q',1]}}", "{'s':1}", NULL,
     CMD("d", "c") "{'q': 1, 's': 1})"},
    {"no filter", "d", "c", NULL, "{'s':1,'t':-1}", NULL, CMD("d", "c") "{'s': 1, 't': -1})"},
    {"query collation goes with the index", "shop", "users", "{'country':'fr'}", "{'name':1}",
     "{'locale':'fr','strength':2}",
     CMD("shop",
         "users") "{'country': 1, 'name': 1}, {'collation': {'locale': 'fr', 'strength': 2}})"},
    {"the simple collation is not written", "d", "c", NULL, "{'name':1}", "{'locale':'simple'}",
     CMD("d", "c") "{'name': 1})"},
};

/* $elemMatch: the index is on what it tests (the array's sub-fields, or
 * the array for the value form), never createIndex({}), which mongod
 * refuses. Not in the table above: the sort rule does not read the bounds
 * an $elemMatch gives, so the promise there is not one it can check. The
 * sort may be NULL here (esr_suggest_parsed: collection-scan asks with a
 * filter only). want NULL: no suggestion. */
static const esr_case elem_cases[] = {
    {"sub-fields: equality before the sort, range after", "d", "c",
     "{'e':{'$elemMatch':{'b':{'$gt':2},'a':1}}}", "{'s':1}", NULL,
     CMD("d", "c") "{'e.a': 1, 's': 1, 'e.b': 1})"},
    {"in filter order among the other fields", "d", "c",
     "{'u':2,'e':{'$elemMatch':{'k':'x'}},'v':{'$lt':3}}", NULL, NULL,
     CMD("d", "c") "{'u': 1, 'e.k': 1, 'v': 1})"},
    {"value form: the array's own values, a range", "d", "c",
     "{'scores':{'$elemMatch':{'$gte':80,'$lt':85}}}", NULL, NULL, CMD("d", "c") "{'scores': 1})"},
    {"value form $eq: a point", "d", "c", "{'r':{'$elemMatch':{'$eq':5}}}", "{'s':-1}", NULL,
     CMD("d", "c") "{'r': 1, 's': -1})"},
    {"nested $elemMatch", "d", "c", "{'a':{'$elemMatch':{'b':{'$elemMatch':{'c':1}}}}}", NULL, NULL,
     CMD("d", "c") "{'a.b.c': 1})"},
    {"$and inside", "d", "c", "{'a':{'$elemMatch':{'$and':[{'x':1},{'y':{'$lt':2}}]}}}", NULL, NULL,
     CMD("d", "c") "{'a.x': 1, 'a.y': 1})"},
    {"a sub-field of no ESR class", "d", "c", "{'a':{'$elemMatch':{'t':{'$size':2}}}}", NULL, NULL,
     CMD("d", "c") "{'a.t': 1})"},
    {"empty $elemMatch", "d", "c", "{'e':{'$elemMatch':{}}}", NULL, NULL,
     CMD("d", "c") "{'e': 1})"},
    {"the query's collation goes with it", "d", "c", "{'e':{'$elemMatch':{'name':'x'}}}", NULL,
     "{'locale':'fr','strength':2}",
     CMD("d", "c") "{'e.name': 1}, {'collation': {'locale': 'fr', 'strength': 2}})"},
    {"only fields of no ESR class: those fields", "d", "c", "{'a':{'$size':2},'b':{'$mod':[2,0]}}",
     NULL, NULL, CMD("d", "c") "{'a': 1, 'b': 1})"},
    /* $all of values: an $and of equalities (it had no class, so the case
     * above named it; explode_for_sort_equality_to_array.js) */
    {"$all of values: an equality, before the sort", "d", "c",
     "{'a':{'$size':2},'b':{'$all':[1,2]}}", "{'n':1}", NULL, CMD("d", "c") "{'b': 1, 'n': 1})"},
    {"no field and no sort: nothing", "d", "c", "{'$expr':{'$eq':['$q',1]}}", NULL, NULL, NULL},
};

static void test_elem_match(void **state)
{
	size_t failed = 0;
	for (size_t i = 0; i < sizeof elem_cases / sizeof elem_cases[0]; i++) {
		const esr_case *c = &elem_cases[i];
		bson_t *filter = fx_doc(c->filter), *sortdoc = fx_doc(c->sort),
		       *coll = fx_doc(c->collation);
		query_preds preds;
		sort_spec sort;
		query_preds_init(&preds);
		query_preds_collect(&preds, filter);
		if (query_sort_parse(sortdoc, &sort) != SORT_SPEC_KEYS)
			sort.n = 0;
		char out[512];
		char *want = c->want ? fx_dequote(c->want) : strdup("");
		bool ok = esr_suggest_parsed(c->db, c->coll, &preds, &sort, coll, out, sizeof out);
		if (ok != (c->want != NULL) || strcmp(out, want) != 0) {
			print_error("case \"%s\":\n want %s\n got  %s\n", c->name, want, out);
			failed++;
		}
		if (ok && !fx_suggestion_keys_ok(out)) {
			print_error("case \"%s\": no valid createIndex: %s\n", c->name, out);
			failed++;
		}
		free(want);
		bson_destroy(filter);
		if (sortdoc)
			bson_destroy(sortdoc);
		if (coll)
			bson_destroy(coll);
	}
	assert_int_equal(failed, 0);
}

/* Turns the suggestion back into a listIndexes spec: the key document
 * between "createIndex(" and the first "}", and the collation option. */
static bson_t *spec_from_suggestion(const char *sugg)
{
	bson_error_t err;
	const char *k = strstr(sugg, "createIndex(");
	assert_non_null(k);
	k += strlen("createIndex(");
	const char *end = strchr(k, '}');
	assert_non_null(end);
	bson_t *key = bson_new_from_json((const uint8_t *)k, end - k + 1, &err);
	assert_non_null(key);
	bson_t *spec = bson_new();
	BSON_APPEND_DOCUMENT(spec, "key", key);
	BSON_APPEND_UTF8(spec, "name", "suggested");
	const char *opts = strstr(end, ", {\"collation\": ");
	if (opts != NULL) {
		opts += 2;
		bson_t *o = bson_new_from_json((const uint8_t *)opts, strlen(opts) - 1, &err);
		assert_non_null(o);
		bson_iter_t it;
		assert_true(bson_iter_init_find(&it, o, "collation"));
		bson_append_iter(spec, "collation", -1, &it);
		bson_destroy(o);
	}
	bson_destroy(key);
	return spec;
}

static void test_exact_strings(void **state)
{
	size_t failed = 0;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const esr_case *c = &cases[i];
		bson_t *filter = fx_doc(c->filter), *sort = fx_doc(c->sort),
		       *coll = fx_doc(c->collation);
		sort_query q = {.db = c->db,
		                .coll = c->coll,
		                .filter = filter,
		                .sort = sort,
		                .collation = coll};
		char out[512];
		char *want = fx_dequote(c->want);
		assert_true(esr_suggest(&q, out, sizeof out));
		if (strcmp(out, want) != 0) {
			print_error("case \"%s\":\n want %s\n got  %s\n", c->name, want, out);
			failed++;
		}
		free(want);
		if (filter)
			bson_destroy(filter);
		bson_destroy(sort);
		if (coll)
			bson_destroy(coll);
	}
	assert_int_equal(failed, 0);
}

/* With only _id_ every case is a finding whose suggestion is the ESR string;
 * adding that index makes the same query's sort provided. */
static void test_suggestion_fixes_the_finding(void **state)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const esr_case *c = &cases[i];
		bson_t *filter = fx_doc(c->filter), *sort = fx_doc(c->sort),
		       *coll = fx_doc(c->collation);
		bson_t *id = fx_doc("{'v':2,'key':{'_id':1},'name':'_id_'}");
		const bson_t *specs[2] = {id, NULL};
		sort_query q = {.db = c->db,
		                .coll = c->coll,
		                .filter = filter,
		                .sort = sort,
		                .collation = coll};
		char sugg[512], esr[512], detail[512];

		index_set *before = index_set_from_specs(specs, 1);
		assert_int_equal(sort_check(before, &q, sugg, sizeof sugg, detail, sizeof detail),
		                 SORT_BLOCKING);
		assert_true(esr_suggest(&q, esr, sizeof esr));
		assert_string_equal(sugg, esr);

		bson_t *spec = spec_from_suggestion(sugg);
		specs[1] = spec;
		index_set *after = index_set_from_specs(specs, 2);
		sort_verdict v = sort_check(after, &q, NULL, 0, detail, sizeof detail);
		if (v != SORT_PROVIDED)
			fail_msg("case \"%s\": suggested index does not provide the sort: %s",
			         c->name, detail);
		index_set_release(before);
		index_set_release(after);
		bson_destroy(spec);
		bson_destroy(id);
		if (filter)
			bson_destroy(filter);
		bson_destroy(sort);
		if (coll)
			bson_destroy(coll);
	}
}

static void test_names_are_escaped(void **state)
{
	bson_t *sort = bson_new();
	BSON_APPEND_INT32(sort, "we\"ird\\f", -1);
	sort_query q = {.db = "s\"hop", .coll = "or\nders", .sort = sort};
	char out[256];
	assert_true(esr_suggest(&q, out, sizeof out));
	assert_string_equal(out, "db.getSiblingDB(\"s\\\"hop\").getCollection(\"or\\u000aders\")."
	                         "createIndex({\"we\\\"ird\\\\f\": -1})");
	bson_destroy(sort);
}

static void test_too_small_a_buffer_gives_nothing(void **state)
{
	bson_t *sort = fx_doc("{'created':-1}");
	sort_query q = {.db = "shop", .coll = "orders", .sort = sort};
	char out[40];
	memset(out, 'x', sizeof out);
	assert_false(esr_suggest(&q, out, sizeof out));
	assert_string_equal(out, "");
	bson_destroy(sort);
}

static void test_no_index_question_no_suggestion(void **state)
{
	bson_t *sort = fx_doc("{'$natural':1}");
	sort_query q = {.db = "shop", .coll = "orders", .sort = sort};
	char out[128] = "junk";
	assert_false(esr_suggest(&q, out, sizeof out));
	assert_string_equal(out, "");
	bson_destroy(sort);
}

/* Compound indexes stop at 32 fields; so does the suggestion. */
static void test_at_most_32_fields(void **state)
{
	bson_t *filter = bson_new();
	for (int i = 0; i < 40; i++) {
		char k[8];
		snprintf(k, sizeof k, "f%02d", i);
		BSON_APPEND_INT32(filter, k, i);
	}
	bson_t *sort = fx_doc("{'zz':1}");
	sort_query q = {.db = "d", .coll = "c", .filter = filter, .sort = sort};
	char out[1024];
	assert_true(esr_suggest(&q, out, sizeof out));
	size_t fields = 0;
	for (const char *p = out; (p = strstr(p, "\": ")) != NULL; p++)
		fields++;
	assert_int_equal(fields, 32);
	assert_non_null(strstr(out, "\"f31\": 1})"));
	bson_destroy(sort);
	bson_destroy(filter);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exact_strings),
	    cmocka_unit_test(test_suggestion_fixes_the_finding),
	    cmocka_unit_test(test_elem_match),
	    cmocka_unit_test(test_names_are_escaped),
	    cmocka_unit_test(test_too_small_a_buffer_gives_nothing),
	    cmocka_unit_test(test_no_index_question_no_suggestion),
	    cmocka_unit_test(test_at_most_32_fields),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
