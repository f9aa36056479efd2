/* The body walker (analyzers/engine/body.c): which keys it names, which it takes
 * for a wanted set, the views it makes and the shape parts it lists. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "analyzers/engine/body.h"
#include "fixtures/analyzer_fixture.h"

#define ALL_KEYS 0xffffffffu

static void test_key_names(void **state)
{
	static const struct {
		const char *key;
		body_key bk;
	} keys[] = {
	    {"filter", BK_FILTER},
	    {"query", BK_QUERY},
	    {"q", BK_Q},
	    {"update", BK_UPDATE},
	    {"u", BK_U},
	    {"updateMods", BK_UPDATE_MODS},
	    {"pipeline", BK_PIPELINE},
	    {"sort", BK_SORT},
	    {"collation", BK_COLLATION},
	    {"hint", BK_HINT},
	    {"upsert", BK_UPSERT},
	    {"key", BK_KEY},
	    {"arrayFilters", BK_ARRAY_FILTERS},
	    {"explain", BK_EXPLAIN},
	    {"limit", BK_LIMIT},
	    {"multi", BK_MULTI},
	    {"min", BK_MIN_MAX},
	    {"max", BK_MIN_MAX},
	};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_int_equal(body_key_of(keys[i].key), keys[i].bk);
	const char *others[] = {"",        "f",   "filters", "Filter",   "qq",
	                        "sorts",   "$db", "lsid",    "updates",  "mi",
	                        "upserts", "k",   "limits",  "explained"};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		assert_int_equal(body_key_of(others[i]), BK_NONE);
}

/* A find body: the wanted keys taken, the shape's parts in body order. */
static void test_walk_find(void **state)
{
	bson_t *doc = fx_doc("{'find':'users','filter':{'a':1},'sort':{'b':-1},'limit':-5,"
	                     "'hint':'b_1','collation':{'locale':'fr'},'min':{'b':0},"
	                     "'lsid':{'id':1},'projection':{'a':1}}");
	cmd_body b;
	body_init(&b, "db", "users");
	assert_true(body_walk(
	    &b, doc, BK(FILTER) | BK(SORT) | BK(COLLATION) | BK(HINT) | BK(LIMIT) | BK(MIN_MAX)));
	assert_true(b.has_filter);
	assert_false(b.has_update);
	assert_false(b.has_pipeline);
	assert_int_equal(b.limit, 5); /* its absolute value */
	assert_true(b.min_max);
	assert_non_null(b.q.sort);
	assert_non_null(b.q.collation);
	assert_string_equal(b.q.hint_name, "b_1");
	assert_null(b.q.hint_doc);
	assert_string_equal(b.q.db, "db");
	assert_string_equal(b.q.coll, "users");
	/* shown: filter, sort, hint, collation, min (limit never; lsid not wanted) */
	const char *shown[] = {"filter", "sort", "hint", "collation", "min"};
	assert_int_equal(b.n, 5);
	for (size_t i = 0; i < b.n; i++)
		assert_string_equal(b.parts[i].key, shown[i]);
	assert_int_equal(b.parts[0].mode, SHAPE_FILTER);
	/* the filter as a document only once a sort asks */
	assert_null(b.q.filter);
	const sort_query *q = body_sort_query(&b);
	assert_non_null(q->filter);
	assert_true(bson_has_field(q->filter, "a"));
	bson_destroy(doc);
}

/* Keys outside the wanted set are passed over, even known ones. */
static void test_walk_wanted_only(void **state)
{
	bson_t *doc = fx_doc("{'count':'users','query':{'a':1},'sort':{'b':1},'limit':3}");
	cmd_body b;
	body_init(&b, "db", "users");
	assert_true(body_walk(&b, doc, BK(QUERY)));
	assert_true(b.has_filter);
	assert_null(b.q.sort);
	assert_int_equal(b.limit, 0);
	assert_int_equal(b.n, 1);
	/* no sort: no filter document made */
	assert_null(body_sort_query(&b)->filter);
	bson_destroy(doc);
}

/* Statements: q and u, multi, arrayFilters shown as a filter list; a
 * repeated key counts as its last occurrence; an op's kind stays first. */
static void test_walk_statement(void **state)
{
	bson_t *doc = fx_doc("{'q':{'a':1},'u':{'$set':{'b':1}},'multi':true,"
	                     "'arrayFilters':[{'x.y':1}],'q':{'c':2},'upsert':true}");
	cmd_body b;
	body_init(&b, NULL, NULL);
	b.parts[0].key = "op";
	b.parts[0].str = "update";
	b.parts[0].mode = SHAPE_VERBATIM;
	b.n = 1;
	assert_true(body_walk(&b, doc, BK(Q) | BK(U) | BK(MULTI) | BK(ARRAY_FILTERS) | BK(UPSERT)));
	assert_true(b.multi);
	assert_true(b.has_update);
	assert_string_equal(b.parts[0].str, "update");
	assert_string_equal(b.parts[0].key, "op");
	assert_true(b.has_filter);
	bson_t f;
	assert_true(wire_iter_doc_view(&b.filter, &f));
	assert_true(bson_has_field(&f, "c")); /* the last q */
	const char *shown[] = {"op", "q", "u", "arrayFilters", "q", "upsert"};
	assert_int_equal(b.n, 6);
	for (size_t i = 0; i < b.n; i++)
		assert_string_equal(b.parts[i].key, shown[i]);
	assert_int_equal(b.parts[2].mode, SHAPE_UPDATE);
	assert_int_equal(b.parts[3].mode, SHAPE_FILTER_LIST);
	bson_destroy(doc);
}

/* Wrong types are passed over; explain only for a true bool or number;
 * a hint document; INT64_MIN's absolute value saturates. */
static void test_walk_types(void **state)
{
	bson_t *doc = fx_doc("{'aggregate':'c','pipeline':{'not':'array'},'filter':'str',"
	                     "'sort':[1],'collation':5,'explain':'true','hint':{'a':1},"
	                     "'limit':{'$numberLong':'-9223372036854775808'}}");
	cmd_body b;
	body_init(&b, "db", "c");
	assert_true(body_walk(&b, doc, ALL_KEYS & ~1u));
	assert_false(b.has_pipeline);
	assert_false(b.has_filter);
	assert_null(b.q.sort);
	assert_null(b.q.collation);
	assert_false(b.explain);
	assert_non_null(b.q.hint_doc);
	assert_null(b.q.hint_name);
	assert_int_equal(b.limit, INT64_MAX);
	assert_int_equal(b.n, 1); /* the hint alone */
	bson_destroy(doc);

	const char *explains[] = {"{'explain':true}", "{'explain':1}", "{'explain':2.5}"};
	const char *runs[] = {"{'explain':false}", "{'explain':0}", "{'explain':'x'}",
	                      "{'explain':{'a':1}}"};
	for (size_t i = 0; i < sizeof(explains) / sizeof(explains[0]); i++) {
		doc = fx_doc(explains[i]);
		body_init(&b, NULL, NULL);
		assert_true(body_walk(&b, doc, BK(EXPLAIN)));
		assert_true(b.explain);
		assert_int_equal(b.n, 0); /* explain is not part of the shape */
		bson_destroy(doc);
	}
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		doc = fx_doc(runs[i]);
		body_init(&b, NULL, NULL);
		assert_true(body_walk(&b, doc, BK(EXPLAIN)));
		assert_false(b.explain);
		bson_destroy(doc);
	}
}

/* More parts than BODY_MAX_PARTS: every key read, the first ones shown. */
static void test_walk_parts_cap(void **state)
{
	bson_t *doc = fx_doc("{'sort':{'a':1},'sort':{'a':1},'sort':{'a':1},'sort':{'a':1},"
	                     "'sort':{'a':1},'sort':{'a':1},'sort':{'a':1},'sort':{'a':1},"
	                     "'sort':{'a':1},'filter':{'z':1}}");
	cmd_body b;
	body_init(&b, NULL, NULL);
	assert_true(body_walk(&b, doc, BK(SORT) | BK(FILTER)));
	assert_int_equal(b.n, BODY_MAX_PARTS);
	assert_true(b.has_filter);
	bson_destroy(doc);
}

static void test_coll_and_view(void **state)
{
	bson_t *doc = fx_doc("{'find':'users','filter':{'a':1}}");
	assert_string_equal(body_coll_of(doc), "users");
	bson_destroy(doc);
	doc = fx_doc("{'aggregate':1,'pipeline':[]}");
	assert_null(body_coll_of(doc));
	bson_iter_t it;
	assert_true(bson_iter_init_find(&it, doc, "pipeline"));
	bson_t v;
	assert_false(wire_iter_doc_view(&it, &v)); /* an array is not a document */
	bson_destroy(doc);
}

/* What body_coll_of did with libbson's calls, the reference for the
 * inline read that replaced them. */
static const char *coll_by_libbson(const bson_t *doc)
{
	bson_iter_t it;
	if (bson_iter_init(&it, doc) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return NULL;
}

/* {find: "users"} with its string's length, its string's last byte and
 * its key's terminator each corrupted: the same answer as libbson's on
 * every one (a pointer into the same bytes, or NULL). */
static void test_coll_as_libbson(void **state)
{
	(void)state;
	bson_t *good = fx_doc("{'find':'users'}");
	const uint8_t *g = bson_get_data(good);
	uint32_t n = good->len; /* 4 + 1 + "find" 5 + 4 + "users" 6 + 1 = 21 */
	assert_int_equal(n, 21);
	const uint32_t lens[] = {0, 1, 5, 6, 7, 8, 11, 0x7fffffffu, 0xffffffffu};
	for (size_t variant = 0; variant < sizeof lens / sizeof lens[0] + 3; variant++) {
		uint8_t b[21];
		memcpy(b, g, n);
		if (variant < sizeof lens / sizeof lens[0]) {
			uint32_t le = BSON_UINT32_TO_LE(lens[variant]);
			memcpy(b + 10, &le, 4); /* the string's length */
		} else if (variant == sizeof lens / sizeof lens[0]) {
			b[19] = 'x'; /* the string's NUL */
		} else if (variant == sizeof lens / sizeof lens[0] + 1) {
			b[9] = 'x'; /* the key's NUL */
		} else {
			b[4] = BSON_TYPE_SYMBOL; /* not a string */
		}
		bson_t v;
		assert_true(bson_init_static(&v, b, n));
		const char *want = coll_by_libbson(&v), *got = body_coll_of(&v);
		if (want == NULL)
			assert_null(got);
		else
			assert_ptr_equal(got, want);
		/* and from a view's first key, as the decoder's pass finds it in
		 * a body it validated (the key intact, whatever follows it) */
		if (b[9] != 0)
			continue;
		cmdview cv;
		memset(&cv, 0, sizeof cv);
		assert_true(bson_init_static(&cv.body, b, n));
		cv.ntop = 1;
		cv.top_keys[0] = (const char *)b + 5;
		cv.top_lens[0] = 4;
		got = cmdview_coll(&cv);
		if (want == NULL)
			assert_null(got);
		else
			assert_ptr_equal(got, want);
	}
	bson_t empty = BSON_INITIALIZER;
	assert_null(body_coll_of(&empty));
	bson_destroy(good);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key_names),        cmocka_unit_test(test_walk_find),
	    cmocka_unit_test(test_walk_wanted_only), cmocka_unit_test(test_walk_statement),
	    cmocka_unit_test(test_walk_types),       cmocka_unit_test(test_walk_parts_cap),
	    cmocka_unit_test(test_coll_and_view),    cmocka_unit_test(test_coll_as_libbson),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
