/* opquery.c: the legacy handshake pair, OP_QUERY and OP_REPLY. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "fixtures/wire_builder.h"
#include "fixtures/wire_captures.h"
#include "protocol/opquery.h"

static void start_query(wb *b, const char *ns)
{
	wb_header(b, 5, 0, OP_QUERY);
	wb_i32(b, 0);
	wb_cstr(b, ns);
	wb_i32(b, 0);
	wb_i32(b, -1);
}

static void test_real_ismaster(void **state)
{
	opquery q;
	wire_error err = {0};
	assert_true(opquery_parse(fx_pymongo_ismaster_opquery, sizeof(fx_pymongo_ismaster_opquery),
	                          &q, &err));
	assert_int_equal(q.flags, 0);
	assert_string_equal(q.full_collection, "admin.$cmd");
	assert_int_equal(q.skip, 0);
	assert_int_equal(q.nreturn, -1);
	assert_null(q.fields);
	assert_int_equal(q.query_len, sizeof(fx_pymongo_ismaster_opquery) - 16 - 4 - 11 - 8);
	assert_true(opquery_is_command(&q));

	bson_t doc;
	bson_iter_t it;
	assert_true(bson_init_static(&doc, q.query, q.query_len));
	assert_true(bson_iter_init(&it, &doc) && bson_iter_next(&it));
	assert_string_equal(bson_iter_key(&it), "ismaster");
}

static void test_wrapped_query_and_fields(void **state)
{
	wb b;
	bson_t *query = BCON_NEW("$query", "{", "isMaster", BCON_INT32(1), "}", "$readPreference",
	                         "{", "mode", "secondaryPreferred", "}");
	bson_t *fields = BCON_NEW("x", BCON_INT32(1));
	start_query(&b, "admin.$cmd");
	wb_doc(&b, query);
	wb_doc(&b, fields);
	wb_finish(&b);
	opquery q;
	wire_error err = {0};
	assert_true(opquery_parse(b.buf, b.n, &q, &err));
	assert_int_equal(q.query_len, query->len);
	assert_non_null(q.fields);
	assert_int_equal(q.fields_len, fields->len);
	bson_destroy(query);
	bson_destroy(fields);
}

static void test_is_command(void **state)
{
	const char *yes[] = {"admin.$cmd", "a.$cmd", "my.db.$cmd"};
	const char *no[] = {"admin.c", ".$cmd", "$cmd", "admin.$cmd.x", "", "admin$cmd"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		opquery q = {.full_collection = yes[i]};
		assert_true(opquery_is_command(&q));
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		opquery q = {.full_collection = no[i]};
		assert_false(opquery_is_command(&q));
	}
}

static void test_malformed_query(void **state)
{
	opquery q;
	wire_error err = {0};
	wb b;
	bson_t *doc = BCON_NEW("isMaster", BCON_INT32(1));

	assert_false(
	    opquery_parse(fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg), &q, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "expected OP_QUERY (2004), got opcode 2013");

	assert_false(opquery_parse(fx_pymongo_ismaster_opquery, 100, &q, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL,
	                  "OP_QUERY header claims 292 bytes but the "
	                  "message has 100");

	/* namespace without its NUL */
	wb_header(&b, 5, 0, OP_QUERY);
	wb_i32(&b, 0);
	wb_bytes(&b, "admin.$cmd", 10);
	wb_finish(&b);
	assert_false(opquery_parse(b.buf, b.n, &q, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "fullCollectionName is not NUL-terminated");

	/* no room for the query document */
	start_query(&b, "admin.$cmd");
	wb_finish(&b);
	assert_false(opquery_parse(b.buf, b.n, &q, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "OP_QUERY query document is truncated");

	/* trailing bytes after the fields document */
	start_query(&b, "admin.$cmd");
	wb_doc(&b, doc);
	wb_doc(&b, doc);
	wb_u8(&b, 0);
	wb_finish(&b);
	assert_false(opquery_parse(b.buf, b.n, &q, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "OP_QUERY has 1 bytes after its fields document");

	/* a fields document too short to be one */
	start_query(&b, "admin.$cmd");
	wb_doc(&b, doc);
	wb_bytes(&b, "\0\0\0", 3);
	wb_finish(&b);
	assert_false(opquery_parse(b.buf, b.n, &q, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON,
	                  "OP_QUERY fields document is truncated: 3 bytes left");
	wb_u8(&b, 0);
	wb_finish(&b);
	assert_false(opquery_parse(b.buf, b.n, &q, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "OP_QUERY fields document has length 0");

	/* invalid BSON inside the query */
	start_query(&b, "admin.$cmd");
	size_t at = b.n;
	wb_doc(&b, doc);
	b.buf[at + 4] = 0x42; /* element type */
	wb_finish(&b);
	assert_false(opquery_parse(b.buf, b.n, &q, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "OP_QUERY query document is not valid BSON");
	bson_destroy(doc);
}

/* The real hello, cut short with the header patched to match. */
static void test_truncated_query(void **state)
{
	const struct {
		size_t cut;
		int code;
		const char *says;
	} cases[] = {
	    {16, WIRE_ERR_PROTOCOL, "truncated before its flags"},
	    {19, WIRE_ERR_PROTOCOL, "truncated before its flags"},
	    {25, WIRE_ERR_PROTOCOL, "fullCollectionName is not NUL-terminated"},
	    {31, WIRE_ERR_PROTOCOL, "truncated before numberToSkip and numberToReturn"},
	    {38, WIRE_ERR_PROTOCOL, "truncated before numberToSkip and numberToReturn"},
	    {39, WIRE_ERR_INVALID_BSON, "query document is truncated: 0 bytes left"},
	    {41, WIRE_ERR_INVALID_BSON, "query document is truncated: 2 bytes left"},
	    {200, WIRE_ERR_INVALID_BSON, "query document claims 253 bytes but only 161"},
	    {291, WIRE_ERR_INVALID_BSON, "query document claims 253 bytes but only 252"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		wb b = {.n = 0};
		wb_bytes(&b, fx_pymongo_ismaster_opquery, cases[i].cut);
		wb_finish(&b);
		opquery q;
		wire_error err = {0};
		if (opquery_parse(b.buf, b.n, &q, &err))
			fail_msg("cut at %zu parsed", cases[i].cut);
		assert_wire_error(err, cases[i].code, cases[i].says);
	}
}

static void test_build_query_round_trip(void **state)
{
	opquery q;
	wire_error err = {0};
	assert_true(opquery_parse(fx_pymongo_ismaster_opquery, sizeof(fx_pymongo_ismaster_opquery),
	                          &q, &err));
	size_t len;
	uint8_t *msg = opquery_build(wire_read_i32(fx_pymongo_ismaster_opquery + 4), &q, q.query,
	                             q.query_len, &len);
	assert_non_null(msg);
	assert_int_equal(len, sizeof(fx_pymongo_ismaster_opquery));
	assert_memory_equal(msg, fx_pymongo_ismaster_opquery, len);
	free(msg);

	/* with a fields document */
	bson_t *fields = BCON_NEW("a", BCON_INT32(1));
	q.fields = bson_get_data(fields);
	q.fields_len = fields->len;
	msg = opquery_build(9, &q, q.query, q.query_len, &len);
	opquery back;
	assert_true(opquery_parse(msg, len, &back, &err));
	assert_int_equal(back.fields_len, fields->len);
	assert_memory_equal(back.fields, bson_get_data(fields), fields->len);
	assert_int_equal(wire_read_i32(msg + 4), 9);
	free(msg);
	bson_destroy(fields);
}

static void test_real_reply(void **state)
{
	opreply r;
	wire_error err = {0};
	assert_true(opreply_parse(fx_ferretdb_ismaster_opreply,
	                          sizeof(fx_ferretdb_ismaster_opreply), &r, &err));
	assert_int_equal(r.cursor_id, 0);
	assert_int_equal(r.starting_from, 0);
	assert_int_equal(r.number_returned, 1);
	assert_int_equal(r.docs_len, sizeof(fx_ferretdb_ismaster_opreply) - 36);
	assert_int_equal(wire_read_i32(fx_ferretdb_ismaster_opreply + 8),
	                 wire_read_i32(fx_pymongo_ismaster_opquery + 4));
	bson_t doc;
	assert_true(bson_init_static(&doc, r.docs, r.docs_len));
	assert_true(bson_has_field(&doc, "maxWireVersion"));
}

static void test_malformed_reply(void **state)
{
	opreply r;
	wire_error err = {0};
	wb b = {.n = 0};
	wb_bytes(&b, fx_ferretdb_ismaster_opreply, sizeof(fx_ferretdb_ismaster_opreply));

	wire_write_i32(b.buf + 32, 2);
	assert_false(opreply_parse(b.buf, b.n, &r, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "numberReturned is 2 but it holds 1 documents");
	wire_write_i32(b.buf + 32, -1);
	assert_false(opreply_parse(b.buf, b.n, &r, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "numberReturned -1 is negative");
	wire_write_i32(b.buf + 32, 1);

	wire_write_i32(b.buf + 36, 9999);
	assert_false(opreply_parse(b.buf, b.n, &r, &err));
	assert_wire_error(err, WIRE_ERR_INVALID_BSON, "OP_REPLY document 1 claims 9999 bytes");

	b.n = 35;
	wb_finish(&b);
	assert_false(opreply_parse(b.buf, b.n, &r, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "shorter than the minimum of 36");

	/* no documents at all is framed correctly but says 1 */
	b.n = 36;
	wb_finish(&b);
	assert_false(opreply_parse(b.buf, b.n, &r, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "numberReturned is 1 but it holds 0");
}

static void test_build_reply(void **state)
{
	bson_t *doc = BCON_NEW("ok", BCON_DOUBLE(1.0));
	size_t len;
	uint8_t *msg =
	    opreply_build(3, 77, OPREPLY_QUERY_FAILURE, bson_get_data(doc), doc->len, &len);
	assert_non_null(msg);
	assert_int_equal(len, 36 + doc->len);
	assert_int_equal(wire_read_i32(msg + 8), 77);
	opreply r;
	wire_error err = {0};
	assert_true(opreply_parse(msg, len, &r, &err));
	assert_int_equal(r.flags, OPREPLY_QUERY_FAILURE);
	assert_int_equal(r.cursor_id, 0);
	assert_int_equal(r.number_returned, 1);
	assert_memory_equal(r.docs, bson_get_data(doc), doc->len);
	free(msg);
	bson_destroy(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_real_ismaster),   cmocka_unit_test(test_wrapped_query_and_fields),
	    cmocka_unit_test(test_is_command),      cmocka_unit_test(test_malformed_query),
	    cmocka_unit_test(test_truncated_query), cmocka_unit_test(test_build_query_round_trip),
	    cmocka_unit_test(test_real_reply),      cmocka_unit_test(test_malformed_reply),
	    cmocka_unit_test(test_build_reply),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
