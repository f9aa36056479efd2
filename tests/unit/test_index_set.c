/* Which index a hint names (index_def_matches_hint, index_set_find_hint),
 * the one lookup the sort and collection-scan rules share; when a partial
 * index may serve a filter (index_def_usable_for, query_implies); which
 * filters name only an index's keys (index_def_keys_cover). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analyzers/planner/index_set.h"
#include "analyzers/planner/query_preds.h"

static index_set *set_of(const char *json)
{
	char err[256];
	index_set *s = index_set_from_json(json, err, sizeof err);
	if (!s)
		fail_msg("%s", err);
	return s;
}

static bool matches(const index_def *d, const char *hint_json)
{
	bson_error_t e;
	bson_t *hint = bson_new_from_json((const uint8_t *)hint_json, -1, &e);
	assert_non_null(hint);
	bool m = index_def_matches_hint(d, hint);
	bson_destroy(hint);
	return m;
}

static void test_key_pattern(void **state)
{
	(void)state;
	index_set *s = set_of("[{\"key\": {\"a\": 1, \"b\": -1}, \"name\": \"a_1_b_-1\"},"
	                      " {\"key\": {\"h\": \"hashed\"}, \"name\": \"h_hashed\"}]");
	const index_def *ab = index_set_get(s, 0), *h = index_set_get(s, 1);
	assert_true(matches(ab, "{\"a\": 1, \"b\": -1}"));
	assert_true(matches(ab, "{\"a\": 2.5, \"b\": {\"$numberLong\": \"-3\"}}")); /* the sign */
	assert_false(matches(ab, "{\"a\": 1}")); /* a prefix is another index */
	assert_false(matches(ab, "{\"a\": 1, \"b\": -1, \"c\": 1}")); /* and so is a longer one */
	assert_false(matches(ab, "{\"a\": 1, \"b\": 1}"));            /* the direction counts */
	assert_false(matches(ab, "{\"b\": -1, \"a\": 1}"));           /* and the order */
	assert_false(matches(ab, "{\"a\": \"hashed\", \"b\": -1}"));
	assert_true(matches(h, "{\"h\": \"hashed\"}")); /* a special key by its type */
	assert_false(matches(h, "{\"h\": 1}"));
	assert_false(matches(ab, "{}"));
	index_set_release(s);
}

static size_t find(const index_set *s, const char *name, const char *hint_json,
                   const index_def **out)
{
	bson_error_t e;
	bson_t *hint = hint_json ? bson_new_from_json((const uint8_t *)hint_json, -1, &e) : NULL;
	size_t n = index_set_find_hint(s, name, hint, out);
	if (hint)
		bson_destroy(hint);
	return n;
}

static void test_find_in_set(void **state)
{
	(void)state;
	/* two indexes on the same keys, told apart by collation: a key-pattern
	 * hint names both (the server refuses it), a name one of them */
	index_set *s = set_of("[{\"key\": {\"_id\": 1}, \"name\": \"_id_\"},"
	                      " {\"key\": {\"a\": 1}, \"name\": \"a_1\"},"
	                      " {\"key\": {\"a\": 1}, \"name\": \"a_ci\","
	                      "  \"collation\": {\"locale\": \"en\", \"strength\": 2}}]");
	const index_def *d = NULL;
	assert_int_equal(find(s, "a_ci", NULL, &d), 1);
	assert_string_equal(d->name, "a_ci");
	assert_int_equal(find(s, "a_ci", "{\"_id\": 1}", &d), 1); /* the name wins */
	assert_string_equal(d->name, "a_ci");
	assert_int_equal(find(s, NULL, "{\"_id\": 1}", &d), 1);
	assert_string_equal(d->name, "_id_");
	assert_int_equal(find(s, NULL, "{\"a\": 1}", &d), 2);
	assert_int_equal(find(s, "nope", NULL, &d), 0);
	assert_null(d);
	assert_int_equal(find(s, NULL, "{\"b\": 1}", &d), 0);
	assert_null(d);
	index_set_release(s);
}

static bool implies(const char *filter_json, const char *expr_json)
{
	bson_error_t e;
	bson_t *f = bson_new_from_json((const uint8_t *)filter_json, -1, &e);
	bson_t *x = bson_new_from_json((const uint8_t *)expr_json, -1, &e);
	assert_non_null(f);
	assert_non_null(x);
	const bson_t *fs[] = {f};
	bool r = query_implies(fs, 1, x);
	bson_destroy(f);
	bson_destroy(x);
	return r;
}

/* The server's isSubsetOf cases this test answers, and what it declines. */
static void test_partial_filter_implied(void **state)
{
	const char *gt5 = "{\"p\": {\"$gt\": 5}}";
	assert_true(implies("{\"p\": 6}", gt5));
	assert_true(implies("{\"p\": 5.5}", gt5));
	assert_true(implies("{\"p\": {\"$gt\": 5}}", gt5));
	assert_true(implies("{\"p\": {\"$gte\": 6, \"$lt\": 0}}", gt5));
	assert_true(implies("{\"p\": {\"$in\": [6, 7]}}", gt5));
	assert_true(implies("{\"$and\": [{\"q\": 1}, {\"p\": {\"$eq\": 9}}]}", gt5));
	assert_false(implies("{\"p\": 5}", gt5));
	assert_false(implies("{\"p\": {\"$gte\": 5}}", gt5));
	assert_false(implies("{\"p\": {\"$lt\": 9}}", gt5));
	assert_false(implies("{\"p\": \"6\"}", gt5)); /* another type: not in the range */
	assert_false(implies("{\"p\": {\"$in\": [6, 1]}}", gt5));
	assert_false(implies("{\"q\": 6}", gt5));
	assert_false(implies("{\"$or\": [{\"p\": 6}, {\"p\": 7}]}", gt5)); /* not read */
	const char *exists = "{\"p\": {\"$exists\": true}}";
	assert_true(implies("{\"p\": 1}", exists));
	assert_true(implies("{\"p\": {\"$gt\": \"a\"}}", exists));
	assert_true(implies("{\"p\": {\"$exists\": true}}", exists));
	assert_false(implies("{\"p\": null}", exists));
	assert_false(implies("{\"p\": {\"$ne\": 1}}", exists));
	const char *eq = "{\"status\": \"A\", \"n\": {\"$lte\": 10}}";
	assert_true(implies("{\"status\": \"A\", \"n\": {\"$lt\": 3}}", eq));
	assert_false(implies("{\"status\": \"a\", \"n\": {\"$lt\": 3}}", eq));
	assert_false(implies("{\"status\": \"A\"}", eq));
	assert_false(implies("{\"status\": {\"$gt\": \"A\"}, \"n\": 1}", eq)); /* string order */
	assert_true(implies("{\"n\": 2}", "{\"$or\": [{\"n\": {\"$lt\": 0}}, {\"n\": 2}]}"));
	assert_false(implies("{\"n\": 2}", "{\"n\": {\"$type\": \"int\"}}"));

	index_set *s = set_of("[{\"key\": {\"_id\": 1}, \"name\": \"_id_\"},"
	                      "{\"key\": {\"p\": 1}, \"name\": \"p_1\","
	                      " \"partialFilterExpression\": {\"p\": {\"$gt\": 5}}}]");
	bson_error_t e;
	bson_t *f = bson_new_from_json((const uint8_t *)"{\"p\": 3}", -1, &e);
	const bson_t *fs[] = {f};
	assert_true(index_def_usable_for(index_set_get(s, 0), fs, 1));
	assert_true(index_set_get(s, 1)->partial);
	assert_false(index_def_usable_for(index_set_get(s, 1), fs, 1));
	bson_destroy(f);
	index_set_release(s);
}

static void test_keys_cover(void **state)
{
	index_set *s = set_of("[{\"key\": {\"a\": 1, \"b\": -1}, \"name\": \"a_1_b_-1\"}]");
	const index_def *d = index_set_get(s, 0);
	const char *yes[] = {"{}", "{\"a\": 1}", "{\"b\": {\"$gt\": 1}, \"a\": {\"$ne\": 2}}",
	                     "{\"$or\": [{\"a\": 1}, {\"b\": 2}]}", "{\"$comment\": \"x\"}"};
	const char *no[] = {"{\"c\": 1}", "{\"a\": 1, \"c\": 1}",
	                    "{\"$expr\": {\"$eq\": [\"$a\", 1]}}",
	                    "{\"$and\": [{\"a\": 1}, {\"c\": 2}]}", "{\"a.x\": 1}"};
	for (size_t i = 0; i < 5; i++) {
		bson_error_t e;
		bson_t *y = bson_new_from_json((const uint8_t *)yes[i], -1, &e);
		bson_t *n = bson_new_from_json((const uint8_t *)no[i], -1, &e);
		assert_true(index_def_keys_cover(d, y));
		assert_false(index_def_keys_cover(d, n));
		bson_destroy(y);
		bson_destroy(n);
	}
	assert_true(index_def_keys_cover(d, NULL));
	index_set_release(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key_pattern),
	    cmocka_unit_test(test_find_in_set),
	    cmocka_unit_test(test_partial_filter_implied),
	    cmocka_unit_test(test_keys_cover),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
