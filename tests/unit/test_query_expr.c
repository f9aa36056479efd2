/* The one reading of $expr (analyzers/planner/query_preds.c,
 * query_expr_comparisons) that collection-scan's bounds, the sort rule's
 * points and the collation form's string comparisons share: which
 * comparisons mongod 5.0+ rewrites for an index, and what is left. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "analyzers/planner/query_preds.h"
#include "fixtures/analyzer_fixture.h"

typedef struct seen {
	char text[512];
} seen;

static void on_cmp(void *arg, const query_expr_cmp *c)
{
	seen *s = arg;
	size_t n = strlen(s->text);
	snprintf(s->text + n, sizeof(s->text) - n, "%s%s %s%s", n ? "; " : "", c->field, c->op,
	         c->variable ? " var" : "");
}

static void on_other(void *arg)
{
	seen *s = arg;
	size_t n = strlen(s->text);
	snprintf(s->text + n, sizeof(s->text) - n, "%sother", n ? "; " : "");
}

static void expect(const char *expr, const char *want)
{
	char json[512];
	snprintf(json, sizeof(json), "{'$expr':%s}", expr);
	bson_t *doc = fx_json(json);
	assert_non_null(doc);
	bson_iter_t it;
	assert_true(bson_iter_init_find(&it, doc, "$expr"));
	seen s = {{0}};
	query_expr_comparisons(&it, on_cmp, on_other, &s);
	if (strcmp(s.text, want) != 0)
		fail_msg("%s\n got: %s\nwant: %s", expr, s.text, want);
	bson_destroy(doc);
}

static void test_rewritten_comparisons(void **state)
{
	expect("{'$eq':['$a',5]}", "a $eq");
	expect("{'$gte':['x','$b.c']}", "b.c $gte"); /* either order */
	expect("{'$lt':['$a','$$limit']}", "a $lt var");
	/* folded into a constant (a date, a timestamp) before the rewrite */
	expect("{'$lt':['$exp','$$NOW']}", "exp $lt var");
	expect("{'$gte':['$$CLUSTER_TIME','$at']}", "at $gte var");
	expect("{'$and':[{'$eq':['$a',1]},{'$and':[{'$gt':['$b',2]}]},{'$ne':['$c',3]}]}",
	       "a $eq; b $gt; other");
	/* not rewritten: two paths, $ne, a system variable, an array or a
	 * document operand, three operands */
	expect("{'$eq':['$a','$b']}", "other");
	expect("{'$ne':['$a',1]}", "other");
	expect("{'$eq':['$a','$$ROOT']}", "other");
	expect("{'$eq':['$a','$$REMOVE']}", "other");
	expect("{'$eq':['$roles','$$USER_ROLES']}", "other");
	expect("{'$lt':['$a','$$NOWISH']}", "other");
	expect("{'$eq':['$a',[1,2]]}", "other");
	expect("{'$eq':['$a',{'x':1}]}", "other");
	expect("{'$eq':['$a',1,2]}", "other");
	expect("{'$eq':[1,2]}", "other");
	expect("true", "other");
}

/* Every operator mongod's parser knows is known, each where it is one;
 * a near miss of each is not (a typo there would silence the rules on a
 * query mongod runs). */
static void test_operators_known(void **state)
{
	(void)state;
	static const char *const field[] = {"$eq",
	                                    "$ne",
	                                    "$gt",
	                                    "$gte",
	                                    "$lt",
	                                    "$lte",
	                                    "$in",
	                                    "$nin",
	                                    "$exists",
	                                    "$type",
	                                    "$regex",
	                                    "$options",
	                                    "$not",
	                                    "$elemMatch",
	                                    "$all",
	                                    "$size",
	                                    "$mod",
	                                    "$near",
	                                    "$nearSphere",
	                                    "$geoNear",
	                                    "$within",
	                                    "$geoWithin",
	                                    "$geoIntersects",
	                                    "$maxDistance",
	                                    "$minDistance",
	                                    "$bitsAllSet",
	                                    "$bitsAllClear",
	                                    "$bitsAnySet",
	                                    "$bitsAnyClear",
	                                    "$_internalExprEq"};
	static const char *const top[] = {
	    "$and",     "$or",         "$nor",        "$expr",        "$where",      "$text",
	    "$comment", "$jsonSchema", "$alwaysTrue", "$alwaysFalse", "$sampleRate", "$_internalX"};
	char miss[64];
	for (size_t i = 0; i < sizeof(field) / sizeof(field[0]); i++) {
		assert_true(query_operator_known(field[i], false));
		snprintf(miss, sizeof miss, "%sx", field[i]);
		if (strncmp(field[i], "$_internal", 10) != 0)
			assert_false(query_operator_known(miss, false));
	}
	for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++) {
		assert_true(query_operator_known(top[i], true));
		if (strncmp(top[i], "$_internal", 10) != 0) {
			snprintf(miss, sizeof miss, "%sx", top[i]);
			assert_false(query_operator_known(miss, true));
			assert_false(query_operator_known(top[i], false));
		}
	}
	assert_false(query_operator_known("$eq", true));
	assert_false(query_operator_known("$notAnOperator", false));
	assert_false(query_operator_known("$", false));
	assert_false(query_operator_known("eq", false));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rewritten_comparisons),
	    cmocka_unit_test(test_operators_known),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
