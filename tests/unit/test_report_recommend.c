/* The report's merge rule (report/recommend.h): when one index
 * serves a shape's ESR key, how shapes merge into one index, which
 * existing index is a prefix of a recommendation, and reading back the
 * createIndex commands the rules write. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analyzers/planner/esr.h"
#include "report/recommend.h"

/* A key from "a b -c" (a leading '-' is direction -1), with its classes. */
static rec_key key(const char *fields, size_t neq, size_t nsort)
{
	rec_key k;
	char buf[512], *save = NULL;
	memset(&k, 0, sizeof k);
	snprintf(buf, sizeof buf, "%s", fields);
	for (char *f = strtok_r(buf, " ", &save); f; f = strtok_r(NULL, " ", &save)) {
		k.dir[k.n] = *f == '-' ? -1 : 1;
		snprintf(k.field[k.n++], sizeof k.field[0], "%s", *f == '-' ? f + 1 : f);
	}
	k.neq = neq;
	k.nsort = nsort;
	return k;
}

static char *json(const rec_key *k)
{
	static char buf[1024];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	rec_key_put(&t, k);
	return (char *)text_finish(&t);
}

static void test_prefix_serves(void **state)
{
	(void)state;
	rec_key ix = key("a b c", 0, 0);
	rec_key s = key("a b", 1, 1); /* find({a}).sort({b}) */
	assert_true(rec_key_serves(&ix, &s));
	s = key("a b c", 2, 1); /* find({a, b}).sort({c}) */
	assert_true(rec_key_serves(&ix, &s));
	s = key("a c", 1, 1); /* find({a}).sort({c}): b sits between */
	assert_false(rec_key_serves(&ix, &s));
	s = key("a b c d", 2, 1); /* longer than the index */
	assert_false(rec_key_serves(&ix, &s));
}

static void test_equality_fields_in_any_order(void **state)
{
	(void)state;
	rec_key ix = key("b a c", 0, 0);
	rec_key s = key("a b c", 2, 1); /* find({a, b}).sort({c}) */
	assert_true(rec_key_serves(&ix, &s));
	s = key("a b c", 1, 2); /* find({a}).sort({b, c}): sort order is fixed */
	assert_false(rec_key_serves(&ix, &s));
	s = key("a b", 0, 2); /* unknown classes: taken as written */
	assert_false(rec_key_serves(&ix, &s));
}

static void test_sort_directions(void **state)
{
	(void)state;
	rec_key ix = key("e s -t", 0, 0);
	rec_key s = key("e s -t", 1, 2);
	assert_true(rec_key_serves(&ix, &s));
	s = key("e -s t", 1, 2); /* every direction reversed: walked backwards */
	assert_true(rec_key_serves(&ix, &s));
	s = key("e -s -t", 1, 2); /* one reversed: no */
	assert_false(rec_key_serves(&ix, &s));
	s = key("-e s -t", 1, 2); /* an equality field's direction does not matter */
	assert_true(rec_key_serves(&ix, &s));
}

static void test_range_fields_in_any_order(void **state)
{
	(void)state;
	rec_key ix = key("a r1 r2", 0, 0);
	rec_key s = key("a r2 r1", 1, 0); /* find({a, r2: {$gt}, r1: {$lt}}) */
	assert_true(rec_key_serves(&ix, &s));
	s = key("r1 a", 0, 0); /* two ranges: either order */
	assert_true(rec_key_serves(&ix, &s));
	s = key("r1 a", 0, 2); /* classes unknown: as written, so no */
	assert_false(rec_key_serves(&ix, &s));
}

static void test_merge_prefix_into_one(void **state)
{
	(void)state;
	rec_key shapes[2] = {key("a b", 1, 1), key("a b c", 2, 1)};
	rec_key keys[2];
	size_t group[2];
	assert_int_equal(rec_merge(shapes, 2, keys, group), 1);
	assert_int_equal(group[0], 0);
	assert_int_equal(group[1], 0);
	assert_string_equal(json(&keys[0]), "{\"a\": 1, \"b\": 1, \"c\": 1}");
}

static void test_merge_moves_equality_fields_front(void **state)
{
	(void)state;
	/* find({a, b}).sort({c}) and find({b}): {b, a, c} serves both */
	rec_key shapes[2] = {key("b", 1, 0), key("a b c", 2, 1)};
	rec_key keys[2];
	size_t group[2];
	assert_int_equal(rec_merge(shapes, 2, keys, group), 1);
	assert_string_equal(json(&keys[0]), "{\"b\": 1, \"a\": 1, \"c\": 1}");
	for (int i = 0; i < 2; i++)
		assert_true(rec_key_serves(&keys[0], &shapes[i]));
}

static void test_merge_keeps_apart_what_one_index_cannot_serve(void **state)
{
	(void)state;
	/* find({a}).sort({c}) and find({a, b}).sort({c}): c must follow a in one,
	 * b in the other */
	rec_key shapes[3] = {key("a c", 1, 1), key("a b c", 2, 1), key("x", 1, 0)};
	rec_key keys[3];
	size_t group[3];
	assert_int_equal(rec_merge(shapes, 3, keys, group), 3);
	assert_int_not_equal(group[0], group[1]);
	for (int i = 0; i < 3; i++)
		assert_true(rec_key_serves(&keys[group[i]], &shapes[i]));
}

static void test_existing_prefix_is_redundant(void **state)
{
	(void)state;
	rec_key rec = key("status -created", 0, 0);
	rec_key old = key("status", 0, 0);
	assert_true(rec_key_is_prefix(&old, &rec));
	old = key("-status", 0, 0);
	assert_false(rec_key_is_prefix(&old, &rec));
	old = key("created", 0, 0);
	assert_false(rec_key_is_prefix(&old, &rec));
	rec_key parsed;
	assert_true(rec_key_from_json("{ \"status\" : 1 }", &parsed));
	assert_true(rec_key_is_prefix(&parsed, &rec));
	assert_false(rec_key_from_json("{ \"t\" : \"text\" }", &parsed));
}

static void test_parse_commands(void **state)
{
	(void)state;
	rec_command c;
	const char *esr =
	    "db.getSiblingDB(\"shop\").getCollection(\"o\\\"x\").createIndex({\"a\": 1, "
	    "\"b\": -1}, {\"collation\": {\"locale\": \"fr\", \"strength\": 2}})";
	assert_true(rec_parse_command(esr, &c));
	assert_string_equal(c.db, "shop");
	assert_string_equal(c.coll, "o\"x");
	assert_int_equal(c.key.n, 2);
	assert_int_equal(c.key.dir[1], -1);
	assert_string_equal(c.opts, "{\"collation\": {\"locale\": \"fr\", \"strength\": 2}}");
	assert_int_equal(c.len, strlen(esr));
	const char *regex =
	    "db.getSiblingDB(\"s\").getCollection(\"c\").createIndex({\"email\": 1}, "
	    "{collation: {locale: \"en\", strength: 2}}) and query by equality";
	assert_true(rec_parse_command(regex, &c));
	assert_string_equal(regex + c.len, " and query by equality");
	assert_false(rec_parse_command("push with {$each: [<items>], $slice: -N}", &c));
	assert_false(
	    rec_parse_command("db.getSiblingDB(\"s\").getCollection(\"c\").createIndex({\"t\":"
	                      " \"text\"})",
	                      &c));
}

/* The geo keys the collection-scan rule suggests for $geoWithin and
 * $geoIntersects are read back and written as they were. */
static void test_geo_keys(void **state)
{
	(void)state;
	rec_command c;
	const char *cmd = "db.getSiblingDB(\"s\").getCollection(\"c\").createIndex({\"qty\": 1, "
	                  "\"area\": \"2dsphere\"})";
	assert_true(rec_parse_command(cmd, &c));
	assert_int_equal(c.key.n, 2);
	assert_int_equal(c.key.dir[1], ESR_DIR_2DSPHERE);
	assert_string_equal(json(&c.key), "{\"qty\": 1, \"area\": \"2dsphere\"}");
	rec_key parsed;
	assert_true(rec_key_from_json("{ \"pos\" : \"2d\" }", &parsed));
	assert_string_equal(json(&parsed), "{\"pos\": \"2d\"}");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prefix_serves),
	    cmocka_unit_test(test_equality_fields_in_any_order),
	    cmocka_unit_test(test_sort_directions),
	    cmocka_unit_test(test_range_fields_in_any_order),
	    cmocka_unit_test(test_merge_prefix_into_one),
	    cmocka_unit_test(test_merge_moves_equality_fields_front),
	    cmocka_unit_test(test_merge_keeps_apart_what_one_index_cannot_serve),
	    cmocka_unit_test(test_existing_prefix_is_redundant),
	    cmocka_unit_test(test_parse_commands),
	    cmocka_unit_test(test_geo_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
