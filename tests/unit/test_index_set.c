/* Which index a hint names (index_def_matches_hint, index_set_find_hint),
 * the one lookup the sort and collection-scan rules share. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analyzers/planner/index_set.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key_pattern),
	    cmocka_unit_test(test_find_in_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
