/* handshake.c: the application name, and removing `compression` from the
 * client's hello in both forms it arrives in. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "fixtures/wire_builder.h"
#include "fixtures/wire_captures.h"
#include "protocol/commands.h"
#include "protocol/handshake.h"

static void view_query(const uint8_t *msg, size_t len, opquery *q, cmdview *v)
{
	wire_error err = {0};
	if (!opquery_parse(msg, len, q, &err) || !cmdview_from_opquery(q, v, &err))
		fail_msg("%s", err.msg);
}

static void view_msg(const uint8_t *msg, size_t len, opmsg *m, cmdview *v)
{
	wire_error err = {0};
	if (!opmsg_parse(msg, len, m, &err) || !cmdview_from_opmsg(m, v, &err))
		fail_msg("%s", err.msg);
}

static void test_app_name(void **state)
{
	opquery q;
	cmdview v;
	char buf[64];
	view_query(fx_pymongo_ismaster_opquery, sizeof(fx_pymongo_ismaster_opquery), &q, &v);
	assert_true(handshake_app_name(&v, buf, sizeof(buf)));
	assert_string_equal(buf, "mgfixture");
	assert_true(handshake_app_name(&v, buf, 4)); /* truncated to fit */
	assert_string_equal(buf, "mgf");
	assert_false(handshake_app_name(&v, buf, 0));

	const char *without[] = {
	    "{\"hello\": 1}",
	    "{\"hello\": 1, \"client\": {\"driver\": {\"name\": \"x\"}}}",
	    "{\"hello\": 1, \"client\": {\"application\": {\"name\": 7}}}",
	    "{\"hello\": 1, \"client\": {\"application\": \"x\"}}",
	};
	for (size_t i = 0; i < sizeof(without) / sizeof(without[0]); i++) {
		bson_t *body = bson_new_from_json((const uint8_t *)without[i], -1, NULL);
		assert_non_null(body);
		cmdview w = {.origin = CMDVIEW_FROM_OPMSG};
		assert_true(bson_init_static(&w.body, bson_get_data(body), body->len));
		strcpy(buf, "stale");
		assert_false(handshake_app_name(&w, buf, sizeof(buf)));
		assert_string_equal(buf, "");
		bson_destroy(body);
	}
}

/* The real pymongo hello with compressors=zlib, stripped, is the real hello
 * without compressors: identical but for the requestID. */
static void test_strip_real_opquery(void **state)
{
	opquery q;
	cmdview v;
	view_query(fx_pymongo_ismaster_zlib_opquery, sizeof(fx_pymongo_ismaster_zlib_opquery), &q,
	           &v);
	assert_true(handshake_has_compression(&v));
	size_t len;
	uint8_t *out = handshake_strip_compression(
	    fx_pymongo_ismaster_zlib_opquery, sizeof(fx_pymongo_ismaster_zlib_opquery), &v, &len);
	assert_non_null(out);
	assert_int_equal(len, sizeof(fx_pymongo_ismaster_opquery));
	assert_memory_equal(out, fx_pymongo_ismaster_opquery, 4);
	assert_memory_equal(out + 4, fx_pymongo_ismaster_zlib_opquery + 4, 4);
	assert_memory_equal(out + 8, fx_pymongo_ismaster_opquery + 8, len - 8);
	free(out);

	/* nothing to strip */
	view_query(fx_pymongo_ismaster_opquery, sizeof(fx_pymongo_ismaster_opquery), &q, &v);
	assert_false(handshake_has_compression(&v));
	assert_null(handshake_strip_compression(fx_pymongo_ismaster_opquery,
	                                        sizeof(fx_pymongo_ismaster_opquery), &v, &len));
}

static void test_strip_wrapped_opquery(void **state)
{
	bson_t *query = BCON_NEW("$query", "{", "isMaster", BCON_INT32(1), "compression", "[",
	                         "zstd", "snappy", "]", "helloOk", BCON_BOOL(true), "}",
	                         "$readPreference", "{", "mode", "primaryPreferred", "}");
	wb b;
	wb_opquery(&b, 31, 4 /* secondaryOk */, "admin.$cmd", query);
	opquery q;
	cmdview v;
	view_query(b.buf, b.n, &q, &v);
	size_t len;
	uint8_t *out = handshake_strip_compression(b.buf, b.n, &v, &len);
	assert_non_null(out);
	assert_int_equal(wire_read_i32(out), len);
	assert_int_equal(wire_read_i32(out + 4), 31);

	opquery q2;
	cmdview v2;
	view_query(out, len, &q2, &v2);
	assert_int_equal(q2.flags, 4);
	assert_int_equal(q2.nreturn, -1);
	assert_string_equal(v2.name, "isMaster");
	assert_false(handshake_has_compression(&v2));
	assert_true(bson_has_field(&v2.body, "helloOk"));
	bson_t outer;
	assert_true(bson_init_static(&outer, q2.query, q2.query_len));
	char *json = bson_as_relaxed_extended_json(&outer, NULL);
	assert_string_equal(json, "{ \"$query\" : { \"isMaster\" : 1, \"helloOk\" : true }, "
	                          "\"$readPreference\" : { \"mode\" : \"primaryPreferred\" } }");
	bson_free(json);
	free(out);
	bson_destroy(query);
}

/* OP_MSG hello (drivers with a declared API or load balancing send it this
 * way) with a checksum and kind-1 sections on both sides of the body. */
static void test_strip_opmsg(void **state)
{
	bson_t *body = BCON_NEW("hello", BCON_INT32(1), "compression", "[", "zlib", "]",
	                        "loadBalanced", BCON_BOOL(true), "$db", "admin");
	bson_t *doc = BCON_NEW("x", BCON_INT32(1));
	wb b;
	wb_header(&b, 77, 0, OP_MSG);
	wb_i32(&b, (int32_t)(OPMSG_CHECKSUM_PRESENT | OPMSG_EXHAUST_ALLOWED));
	size_t s = wb_seq_begin(&b, "before");
	wb_doc(&b, doc);
	wb_seq_end(&b, s);
	wb_u8(&b, 0);
	wb_doc(&b, body);
	s = wb_seq_begin(&b, "after");
	wb_doc(&b, doc);
	wb_doc(&b, doc);
	wb_seq_end(&b, s);
	wb_finish_checksum(&b);

	opmsg m;
	cmdview v;
	view_msg(b.buf, b.n, &m, &v);
	assert_int_equal(cmd_find(v.name), CMD_HELLO);
	size_t len;
	uint8_t *out = handshake_strip_compression(b.buf, b.n, &v, &len);
	assert_non_null(out);

	size_t compression_len = 1 + strlen("compression") + 1 + 4 + (1 + 2 + 4 + 5) + 1;
	assert_int_equal(len, b.n - 4 - compression_len);
	assert_int_equal(wire_read_i32(out), len);
	assert_int_equal(wire_read_i32(out + 4), 77);
	opmsg m2;
	cmdview v2;
	view_msg(out, len, &m2, &v2);
	assert_int_equal(m2.flags, OPMSG_EXHAUST_ALLOWED); /* checksum flag gone */
	assert_int_equal(m2.nseqs, 2);
	assert_string_equal(m2.seqs[0].id, "before");
	assert_int_equal(m2.seqs[0].count, 1);
	assert_string_equal(m2.seqs[1].id, "after");
	assert_int_equal(m2.seqs[1].count, 2);
	assert_false(handshake_has_compression(&v2));
	assert_string_equal(v2.db, "admin");
	assert_true(bson_has_field(&v2.body, "loadBalanced"));
	/* the first section is copied byte for byte */
	assert_memory_equal(out + 20, b.buf + 20, 1 + wire_read_i32(b.buf + 21));
	free(out);

	/* a message that no longer parses cannot be rebuilt */
	b.buf[b.n - 1] ^= 1;
	assert_null(handshake_strip_compression(b.buf, b.n, &v, &len));
	bson_destroy(body);
	bson_destroy(doc);
}

/* Every top-level `compression` goes, nested ones stay, order is kept. */
static void test_strip_every_top_level_copy(void **state)
{
	bson_t *body =
	    BCON_NEW("hello", BCON_INT32(1), "compression", "[", "zlib", "]", "client", "{",
	             "compression", BCON_INT32(1), "}", "compression", "[", "]", "$db", "admin");
	wb b;
	wb_header(&b, 1, 0, OP_MSG);
	wb_i32(&b, 0);
	wb_u8(&b, 0);
	wb_doc(&b, body);
	wb_finish(&b);
	opmsg m;
	cmdview v;
	view_msg(b.buf, b.n, &m, &v);
	size_t len;
	uint8_t *out = handshake_strip_compression(b.buf, b.n, &v, &len);
	assert_non_null(out);
	view_msg(out, len, &m, &v);
	char *json = bson_as_relaxed_extended_json(&v.body, NULL);
	assert_string_equal(json, "{ \"hello\" : 1, \"client\" : { \"compression\" : 1 }, "
	                          "\"$db\" : \"admin\" }");
	bson_free(json);
	free(out);
	bson_destroy(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_app_name),
	    cmocka_unit_test(test_strip_real_opquery),
	    cmocka_unit_test(test_strip_wrapped_opquery),
	    cmocka_unit_test(test_strip_opmsg),
	    cmocka_unit_test(test_strip_every_top_level_copy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
