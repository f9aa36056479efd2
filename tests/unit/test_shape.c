/* Query shapes: literals replaced by type placeholders, structure kept, the
 * hash stable, output valid JSON even when truncated. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "analyzers/engine/shape.h"
#include "fixtures/analyzer_fixture.h"

/* Renders one value of mode `mode` from {"v": <json>}. */
static const char *render(const char *json_value, shape_mode mode, bool redact)
{
	static char buf[SHAPE_BUF_LEN];
	char doc[4096];
	snprintf(doc, sizeof(doc), "{'v':%s}", json_value);
	bson_t *b = fx_json(doc);
	bson_iter_t it;
	assert_true(bson_iter_init_find(&it, b, "v"));
	shape_render_value(&it, mode, redact, buf, sizeof(buf));
	bson_destroy(b);
	return buf;
}

/* {"find":"coll", "filter":..., "sort":...} from a whole command. */
static const char *render_find(const char *cmd_json, bool redact, char *buf, size_t cap)
{
	bson_t *b = fx_json(cmd_json);
	shape_part parts[2];
	size_t n = 0;
	bson_iter_t it;
	bson_iter_init(&it, b);
	while (bson_iter_next(&it)) {
		if (strcmp(bson_iter_key(&it), "filter") == 0)
			parts[n] = (shape_part){"filter", SHAPE_FILTER, NULL, {0}};
		else if (strcmp(bson_iter_key(&it), "sort") == 0)
			parts[n] = (shape_part){"sort", SHAPE_VERBATIM, NULL, {0}};
		else
			continue;
		wire_cur_of_iter(&parts[n++].value, &it);
	}
	shape_spec spec = {"find", "users", false, parts, n};
	shape_render(&spec, redact, buf, cap);
	bson_destroy(b);
	return buf;
}

static void assert_valid_json(const char *s)
{
	bson_error_t err;
	bson_t *b = bson_new_from_json((const uint8_t *)s, -1, &err);
	if (!b)
		fail_msg("not JSON (%s): %.300s", err.message, s);
	bson_destroy(b);
}

static void test_placeholders(void **state)
{
	assert_string_equal(render("'x'", SHAPE_DATA, true), "\"?string\"");
	assert_string_equal(render("5", SHAPE_DATA, true), "\"?number\"");
	assert_string_equal(render("{'$numberLong':'5'}", SHAPE_DATA, true), "\"?number\"");
	assert_string_equal(render("2.5", SHAPE_DATA, true), "\"?number\"");
	assert_string_equal(render("{'$numberDecimal':'2.5'}", SHAPE_DATA, true), "\"?number\"");
	assert_string_equal(render("true", SHAPE_DATA, true), "\"?bool\"");
	assert_string_equal(render("null", SHAPE_DATA, true), "\"?null\"");
	assert_string_equal(render("{'$date':'2024-01-01T00:00:00Z'}", SHAPE_DATA, true),
	                    "\"?date\"");
	assert_string_equal(render("{'$oid':'0123456789abcdef01234567'}", SHAPE_DATA, true),
	                    "\"?objectId\"");
	assert_string_equal(
	    render("{'$binary':{'base64':'AAEC','subType':'00'}}", SHAPE_DATA, true),
	    "\"?binData\"");
	assert_string_equal(
	    render("{'$regularExpression':{'pattern':'a','options':'i'}}", SHAPE_DATA, true),
	    "\"?regex/i\"");
	assert_string_equal(
	    render("{'$regularExpression':{'pattern':'a','options':''}}", SHAPE_DATA, true),
	    "\"?regex\"");
	assert_string_equal(render("{'$timestamp':{'t':1,'i':2}}", SHAPE_DATA, true),
	                    "\"?timestamp\"");
	assert_string_equal(render("{'$minKey':1}", SHAPE_DATA, true), "\"?minKey\"");
	assert_string_equal(render("{'a':1}", SHAPE_DATA, true), "\"?object\"");
	assert_string_equal(render("[1,2,3]", SHAPE_DATA, true), "\"?array<?number>\"");
	assert_string_equal(render("[1,'a']", SHAPE_DATA, true), "\"?array\"");
	assert_string_equal(render("[]", SHAPE_DATA, true), "\"?array\"");
	assert_string_equal(render("[{'a':1},{'b':2}]", SHAPE_DATA, true), "\"?array<?object>\"");
}

static void test_filter_shapes(void **state)
{
	assert_string_equal(render("{'a':1,'b':{'$gt':5,'$lt':'z'}}", SHAPE_FILTER, true),
	                    "{\"a\":\"?number\",\"b\":{\"$gt\":\"?number\",\"$lt\":\"?string\"}}");
	assert_string_equal(
	    render("{'$or':[{'a':1},{'b':{'$in':[1,2]}}]}", SHAPE_FILTER, true),
	    "{\"$or\":[{\"a\":\"?number\"},{\"b\":{\"$in\":\"?array<?number>\"}}]}");
	assert_string_equal(render("{'n':{'%regex':'sec.*','%options':'i'}}", SHAPE_FILTER, true),
	                    "{\"n\":{\"$regex\":\"?string\",\"$options\":\"i\"}}");
	assert_string_equal(render("{'n':{'$exists':true,'$type':'string'}}", SHAPE_FILTER, true),
	                    "{\"n\":{\"$exists\":true,\"$type\":\"string\"}}");
	assert_string_equal(
	    render("{'items':{'$elemMatch':{'sku':'x','qty':{'$gt':1}}}}", SHAPE_FILTER, true),
	    "{\"items\":{\"$elemMatch\":{\"sku\":\"?string\",\"qty\":{\"$gt\":\"?number\"}}}}");
	assert_string_equal(
	    render("{'$expr':{'$eq':['$a',{'$add':['$b',1]}]}}", SHAPE_FILTER, true),
	    "{\"$expr\":{\"$eq\":[\"$a\",{\"$add\":[\"$b\",\"?number\"]}]}}");
	assert_string_equal(render("{'$expr':{'$in':['$a',['x','y','z']]}}", SHAPE_FILTER, true),
	                    "{\"$expr\":{\"$in\":[\"$a\",\"?array<?string>\"]}}");
	/* embedded document equality is one literal */
	assert_string_equal(render("{'addr':{'city':'x','zip':1}}", SHAPE_FILTER, true),
	                    "{\"addr\":\"?object\"}");
}

static void test_pipeline_shapes(void **state)
{
	assert_string_equal(
	    render("[{'$match':{'s':'A'}},{'$sort':{'t':-1}},{'$lookup':{'from':'users',"
	           "'localField':'uid','foreignField':'_id','as':'u'}},{'$unwind':'$u'},"
	           "{'$group':{'_id':'$u.city','n':{'$sum':1}}},{'$project':{'n':1,'x':'$n'}},"
	           "{'$limit':10}]",
	           SHAPE_PIPELINE, true),
	    "[{\"$match\":{\"s\":\"?string\"}},{\"$sort\":{\"t\":-1}},{\"$lookup\":{\"from\":"
	    "\"users\",\"localField\":\"uid\",\"foreignField\":\"_id\",\"as\":\"u\"}},"
	    "{\"$unwind\":\"$u\"},{\"$group\":{\"_id\":\"$u.city\",\"n\":{\"$sum\":\"?number\"}}},"
	    "{\"$project\":{\"n\":1,\"x\":\"$n\"}},{\"$limit\":\"?number\"}]");
	assert_string_equal(
	    render("[{'$facet':{'a':[{'$match':{'x':1}}]}},{'$unionWith':{'coll':'b','pipeline':"
	           "[{'$match':{'y':'s'}}]}}]",
	           SHAPE_PIPELINE, true),
	    "[{\"$facet\":{\"a\":[{\"$match\":{\"x\":\"?number\"}}]}},{\"$unionWith\":{\"coll\":"
	    "\"b\",\"pipeline\":[{\"$match\":{\"y\":\"?string\"}}]}}]");
}

static void test_update_shapes(void **state)
{
	assert_string_equal(
	    render("{'$set':{'a':'x'},'$push':{'c':{'$each':[1,2],'$slice':-5,'$sort':{'t':1}}}}",
	           SHAPE_UPDATE, true),
	    "{\"$set\":{\"a\":\"?string\"},\"$push\":{\"c\":{\"$each\":\"?array<?number>\","
	    "\"$slice\":\"?number\",\"$sort\":{\"t\":1}}}}");
	assert_string_equal(render("{'name':'x','tags':['a']}", SHAPE_UPDATE, true),
	                    "{\"name\":\"?string\",\"tags\":\"?array<?string>\"}");
	assert_string_equal(
	    render("[{'$set':{'l':{'$concatArrays':['$l',['x']]}}}]", SHAPE_UPDATE, true),
	    "[{\"$set\":{\"l\":{\"$concatArrays\":[\"$l\",\"?array<?string>\"]}}}]");
}

static void test_same_shape_for_different_literals(void **state)
{
	char a[SHAPE_BUF_LEN], b[SHAPE_BUF_LEN];
	render_find("{'filter':{'name':'ann','age':{'$gte':18},'tags':{'$in':['x','y']}},"
	            "'sort':{'age':-1}}",
	            true, a, sizeof(a));
	render_find("{'filter':{'name':'bob','age':{'$gte':65},'tags':{'$in':['p','q','r','s','t',"
	            "'u']}},'sort':{'age':-1}}",
	            true, b, sizeof(b));
	assert_string_equal(a, b);
	assert_string_equal(a, "{\"find\":\"users\",\"filter\":{\"name\":\"?string\",\"age\":{"
	                       "\"$gte\":\"?number\"},\"tags\":{\"$in\":\"?array<?string>\"}},"
	                       "\"sort\":{\"age\":-1}}");
	assert_true(shape_hash("app.users", "find", a) == shape_hash("app.users", "find", b));
	/* the sort is part of the shape */
	render_find("{'filter':{'name':'ann'},'sort':{'age':1}}", true, a, sizeof(a));
	render_find("{'filter':{'name':'ann'},'sort':{'age':-1}}", true, b, sizeof(b));
	assert_string_not_equal(a, b);
}

/* The hash is FNV-1a 64 over ns, NUL, command, NUL, shape: fixed forever,
 * so log lines from different runs and machines can be joined on it. */
static void test_hash_is_stable(void **state)
{
	const char *shape = "{\"find\":\"users\",\"filter\":{\"name\":\"?string\"}}";
	uint64_t h = shape_hash("app.users", "find", shape);
	char hex[17];
	shape_hash_hex(h, hex);
	assert_string_equal(hex, "1f00b0fac014f435"); /* checked against a Python FNV-1a */
	assert_int_equal(strlen(hex), 16);
	/* each component counts, and the separators keep them apart */
	assert_true(h != shape_hash("app.user", "find", shape));
	assert_true(h != shape_hash("app.users", "count", shape));
	assert_true(shape_hash("a", "bc", "") != shape_hash("ab", "c", ""));
	/* FNV-1a 64 of the empty input with two NUL separators */
	assert_true(shape_hash("", "", "") != 0);
}

static void test_redaction_off_shows_literals(void **state)
{
	char a[SHAPE_BUF_LEN];
	render_find("{'filter':{'name':'ann','n':{'$in':[1,2]},'r':{'%regex':'^a','%options':'i'},"
	            "'d':{'$oid':'0123456789abcdef01234567'}},'sort':{'n':1}}",
	            false, a, sizeof(a));
	assert_string_equal(
	    a,
	    "{\"find\":\"users\",\"filter\":{\"name\":\"ann\",\"n\":{\"$in\":[1,2]},\"r\":{"
	    "\"$regex\":\"^a\",\"$options\":\"i\"},\"d\":{\"$oid\":\"0123456789abcdef01234567\"}},"
	    "\"sort\":{\"n\":1}}");
	assert_valid_json(a);
	assert_string_equal(
	    render("[1.5,2.0,'a\\\\c',{'$date':'2024-01-01T00:00:00Z'}]", SHAPE_DATA, false),
	    "[1.5,2.0,\"a\\\\c\",{\"$date\":1704067200000}]");
	assert_valid_json(
	    render("{'b':{'$binary':{'base64':'AAECAw==','subType':'04'}}}", SHAPE_DATA, false));
}

static void test_escaping(void **state)
{
	bson_t *b = bson_new();
	BSON_APPEND_UTF8(b, "we\"ird\\key\n", "v\x01");
	bson_iter_t it;
	bson_iter_init(&it, b);
	shape_part p = {"filter", SHAPE_FILTER, NULL, {0}};
	bson_t wrap = BSON_INITIALIZER;
	BSON_APPEND_DOCUMENT(&wrap, "filter", b);
	bson_iter_t at;
	bson_iter_init_find(&at, &wrap, "filter");
	wire_cur_of_iter(&p.value, &at);
	char buf[SHAPE_BUF_LEN];
	shape_spec spec = {"find", "c\"oll", false, &p, 1};
	shape_render(&spec, false, buf, sizeof(buf));
	assert_string_equal(buf, "{\"find\":\"c\\\"oll\",\"filter\":{\"we\\\"ird\\\\key\\u000a\":"
	                         "\"v\\u0001\"}}");
	assert_valid_json(buf);
	bson_destroy(b);
	bson_destroy(&wrap);
}

static void test_truncation_stays_valid_json(void **state)
{
	/* a filter of 2000 fields, 20 levels deep in places */
	bson_string_t *s = bson_string_new("{'filter':{");
	for (int i = 0; i < 2000; i++)
		bson_string_append_printf(s, "%s'field_number_%d':{'$in':[{'a':[[1]]}]}",
		                          i ? "," : "", i);
	bson_string_append(s, "}}");
	char buf[SHAPE_BUF_LEN];
	size_t n;
	render_find(s->str, true, buf, sizeof(buf));
	n = strlen(buf);
	assert_true(n < sizeof(buf));
	assert_non_null(strstr(buf, "\"$truncated\":true"));
	assert_valid_json(buf);
	render_find(s->str, false, buf, sizeof(buf));
	assert_non_null(strstr(buf, "\"$truncated\":true"));
	assert_valid_json(buf);
	/* small buffers too */
	for (size_t cap = 128; cap < 400; cap += 7) {
		char small[400];
		render_find(s->str, false, small, cap);
		assert_true(strlen(small) < cap);
		assert_valid_json(small);
	}
	bson_string_free(s, true);
}

static void test_deep_nesting(void **state)
{
	bson_string_t *s = bson_string_new("{'filter':{'$and':[");
	for (int i = 0; i < 45; i++)
		bson_string_append(s, "{'$or':[");
	bson_string_append(s, "{'a':1}");
	for (int i = 0; i < 45; i++)
		bson_string_append(s, "]}");
	bson_string_append(s, "]}}");
	char buf[SHAPE_BUF_LEN];
	render_find(s->str, true, buf, sizeof(buf));
	assert_non_null(strstr(buf, "?deep"));
	assert_valid_json(buf);
	bson_string_free(s, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_placeholders),
	    cmocka_unit_test(test_filter_shapes),
	    cmocka_unit_test(test_pipeline_shapes),
	    cmocka_unit_test(test_update_shapes),
	    cmocka_unit_test(test_same_shape_for_different_literals),
	    cmocka_unit_test(test_hash_is_stable),
	    cmocka_unit_test(test_redaction_off_shows_literals),
	    cmocka_unit_test(test_escaping),
	    cmocka_unit_test(test_truncation_stays_valid_json),
	    cmocka_unit_test(test_deep_nesting),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
