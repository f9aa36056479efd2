/* hello_rewrite.c: hello replies of a three-member set (primary,
 * secondaries, a hidden member, an arbiter, a passive), a member added
 * after start-up, a mongos, both reply forms, checksums and moreToCome. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <bson/bson.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/frame.h"
#include "protocol/hello_rewrite.h"
#include "protocol/opmsg.h"
#include "protocol/opquery.h"

static const hello_map_entry members[] = {
    {"db1.example:27017", "127.0.0.1:27018"}, {"db2.example:27017", "127.0.0.1:27019"},
    {"db3.example:27017", "127.0.0.1:27020"}, {"db4.example:27017", "127.0.0.1:27021"},
    {"db5.example:27017", "127.0.0.1:27022"},
};

static hello_map map_for(const char *self_member, const char *self_listen)
{
	return (hello_map){members, sizeof(members) / sizeof(members[0]), self_listen, self_member};
}

/* An OP_MSG reply holding the JSON body; with a checksum when asked. */
static uint8_t *reply_msg(const char *json, uint32_t flags, size_t *len)
{
	bson_error_t e;
	bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &e);
	if (!b)
		fail_msg("bad fixture JSON: %s", e.message);
	uint8_t *m =
	    opmsg_build(77, 42, flags & ~OPMSG_CHECKSUM_PRESENT, bson_get_data(b), b->len, len);
	bson_destroy(b);
	if (flags & OPMSG_CHECKSUM_PRESENT) {
		m = realloc(m, *len + 4);
		wire_write_i32(m, (int32_t)(*len + 4));
		uint32_t f = wire_read_u32(m + 16) | OPMSG_CHECKSUM_PRESENT;
		memcpy(m + 16, &f, 4);
		uint32_t crc = opmsg_crc32c(m, *len);
		memcpy(m + *len, &crc, 4);
		*len += 4;
	}
	return m;
}

/* The rewritten reply's body as canonical JSON (caller frees). */
static char *body_json(const uint8_t *m, size_t len)
{
	opmsg parsed;
	wire_error err = {0};
	if (!opmsg_parse(m, len, &parsed, &err))
		fail_msg("rewritten reply does not parse: %s", err.msg);
	bson_t b;
	assert_true(bson_init_static(&b, parsed.body, parsed.body_len));
	return bson_as_relaxed_extended_json(&b, NULL);
}

static char *rewrite_ok(const char *json, const hello_map *map, hello_rewrite_result *r)
{
	size_t len;
	uint8_t *in = reply_msg(json, 0, &len);
	wire_error err = {0};
	assert_int_equal(hello_rewrite(in, len, map, r, &err), HELLO_REWRITTEN);
	assert_int_equal(wire_read_i32(r->msg + 4), 77); /* requestID kept */
	assert_int_equal(wire_read_i32(r->msg + 8), 42); /* responseTo kept */
	assert_int_equal(wire_read_i32(r->msg), (int32_t)r->len);
	char *out = body_json(r->msg, r->len);
	free(in);
	free(r->msg);
	return out;
}

static void test_primary(void **state)
{
	hello_map map = map_for("db1.example:27017", "127.0.0.1:27018");
	hello_rewrite_result r;
	char *out = rewrite_ok(
	    "{\"topologyVersion\": {\"counter\": 3}, \"hosts\": [\"db1.example:27017\", "
	    "\"db2.example:27017\", \"db3.example:27017\"], \"passives\": [\"db4.example:27017\"], "
	    "\"arbiters\": [\"db5.example:27017\"], \"setName\": \"rs0\", \"setVersion\": 4, "
	    "\"isWritablePrimary\": true, \"secondary\": false, \"primary\": "
	    "\"db1.example:27017\", "
	    "\"me\": \"db1.example:27017\", \"maxWireVersion\": 21, \"ok\": 1.0}",
	    &map, &r);
	assert_string_equal(
	    out, "{ \"topologyVersion\" : { \"counter\" : 3 }, \"hosts\" : [ \"127.0.0.1:27018\", "
	         "\"127.0.0.1:27019\", \"127.0.0.1:27020\" ], \"passives\" : [ \"127.0.0.1:27021\" "
	         "], \"arbiters\" : [ \"127.0.0.1:27022\" ], \"setName\" : \"rs0\", \"setVersion\" "
	         ": 4, \"isWritablePrimary\" : true, \"secondary\" : false, \"primary\" : "
	         "\"127.0.0.1:27018\", \"me\" : \"127.0.0.1:27018\", \"maxWireVersion\" : 21, "
	         "\"ok\" : 1.0 }");
	assert_true(r.replica_set);
	assert_false(r.mongos);
	assert_int_equal(r.nunmapped, 0);
	bson_free(out);
}

static void test_secondary_and_passive(void **state)
{
	hello_map map = map_for("db2.example:27017", "127.0.0.1:27019");
	hello_rewrite_result r;
	char *out = rewrite_ok(
	    "{\"hosts\": [\"db1.example:27017\", \"db2.example:27017\", \"db3.example:27017\"], "
	    "\"passives\": [\"db4.example:27017\"], \"setName\": \"rs0\", \"secondary\": true, "
	    "\"primary\": \"db1.example:27017\", \"me\": \"db2.example:27017\", \"ok\": 1}",
	    &map, &r);
	assert_non_null(strstr(out, "\"primary\" : \"127.0.0.1:27018\""));
	assert_non_null(strstr(out, "\"me\" : \"127.0.0.1:27019\""));
	bson_free(out);

	/* the passive member's own reply: passive: true, me in passives */
	map = map_for("db4.example:27017", "127.0.0.1:27021");
	out = rewrite_ok("{\"hosts\": [\"db1.example:27017\"], \"passives\": "
	                 "[\"db4.example:27017\"], \"setName\": \"rs0\", \"passive\": true, "
	                 "\"secondary\": true, \"me\": \"db4.example:27017\", \"ok\": 1}",
	                 &map, &r);
	assert_non_null(strstr(out, "\"passives\" : [ \"127.0.0.1:27021\" ]"));
	assert_non_null(strstr(out, "\"me\" : \"127.0.0.1:27021\""));
	bson_free(out);
}

/* A hidden member is in no list; its `me` still becomes its listener,
 * through the connection's own pairing. */
static void test_hidden(void **state)
{
	hello_map map = map_for("db6.example:27017", "127.0.0.1:27030");
	hello_rewrite_result r;
	char *out = rewrite_ok("{\"hosts\": [\"db1.example:27017\", \"db2.example:27017\"], "
	                       "\"setName\": \"rs0\", \"secondary\": true, \"hidden\": true, "
	                       "\"primary\": \"db1.example:27017\", \"me\": \"db6.example:27017\", "
	                       "\"ok\": 1}",
	                       &map, &r);
	assert_non_null(strstr(out, "\"hosts\" : [ \"127.0.0.1:27018\", \"127.0.0.1:27019\" ]"));
	assert_non_null(strstr(out, "\"me\" : \"127.0.0.1:27030\""));
	assert_non_null(strstr(out, "\"hidden\" : true"));
	assert_int_equal(r.nunmapped, 0);
	bson_free(out);
}

/* The set grew: db7 has no listener. It is left out (never passed on to
 * send the driver around the proxy) and reported. */
static void test_member_added(void **state)
{
	hello_map map = map_for("db1.example:27017", "127.0.0.1:27018");
	hello_rewrite_result r;
	char *out = rewrite_ok("{\"hosts\": [\"db1.example:27017\", \"db7.example:27017\", "
	                       "\"db2.example:27017\"], \"setName\": \"rs0\", \"setVersion\": 5, "
	                       "\"primary\": \"db1.example:27017\", \"ok\": 1}",
	                       &map, &r);
	assert_non_null(strstr(out, "\"hosts\" : [ \"127.0.0.1:27018\", \"127.0.0.1:27019\" ]"));
	assert_null(strstr(out, "db7"));
	assert_int_equal(r.nunmapped, 1);
	assert_string_equal(r.unmapped[0], "db7.example:27017");
	assert_false(r.primary_dropped);
	bson_free(out);

	/* ... and became primary: `primary` goes too, rather than name it */
	out = rewrite_ok("{\"hosts\": [\"db1.example:27017\", \"db7.example:27017\"], "
	                 "\"setName\": \"rs0\", \"secondary\": true, \"primary\": "
	                 "\"db7.example:27017\", \"ok\": 1}",
	                 &map, &r);
	assert_null(strstr(out, "primary"));
	assert_true(r.primary_dropped);
	assert_int_equal(r.nunmapped, 1); /* counted once */
	bson_free(out);
}

static void test_mongos_and_standalone_unchanged(void **state)
{
	hello_map map = map_for("db1.example:27017", "127.0.0.1:27018");
	const char *bodies[] = {
	    "{\"isWritablePrimary\": true, \"msg\": \"isdbgrid\", \"maxWireVersion\": 21, \"ok\": "
	    "1}",
	    "{\"isWritablePrimary\": true, \"maxWireVersion\": 21, \"ok\": 1}",
	};
	for (size_t i = 0; i < 2; i++) {
		size_t len;
		uint8_t *in = reply_msg(bodies[i], 0, &len);
		hello_rewrite_result r;
		wire_error err = {0};
		assert_int_equal(hello_rewrite(in, len, &map, &r, &err), HELLO_UNCHANGED);
		assert_null(r.msg);
		assert_int_equal(r.mongos, i == 0);
		assert_false(r.replica_set);
		free(in);
	}
	/* a set whose names already are the listeners: nothing to do */
	size_t len;
	uint8_t *in = reply_msg("{\"hosts\": [\"127.0.0.1:27018\"], \"setName\": \"rs0\", "
	                        "\"me\": \"127.0.0.1:27018\", \"ok\": 1}",
	                        0, &len);
	hello_map self = {NULL, 0, "127.0.0.1:27018", "127.0.0.1:27018"};
	hello_rewrite_result r;
	wire_error err = {0};
	assert_int_equal(hello_rewrite(in, len, &self, &r, &err), HELLO_UNCHANGED);
	free(in);
}

/* The one-member default: no map but the connection's own pairing. */
static void test_one_member_default(void **state)
{
	hello_map map = {NULL, 0, "127.0.0.1:27018", "127.0.0.1:27117"};
	hello_rewrite_result r;
	char *out = rewrite_ok("{\"isWritablePrimary\": true, \"setName\": \"rs0\", \"hosts\": "
	                       "[\"127.0.0.1:27117\"], \"ok\": 1}",
	                       &map, &r);
	assert_string_equal(out, "{ \"isWritablePrimary\" : true, \"setName\" : \"rs0\", "
	                         "\"hosts\" : [ \"127.0.0.1:27018\" ], \"ok\" : 1 }");
	bson_free(out);
}

static void test_names_compare_loosely(void **state)
{
	hello_map map = map_for("", NULL);
	assert_string_equal(hello_map_lookup(&map, "DB2.Example:27017"), "127.0.0.1:27019");
	assert_string_equal(hello_map_lookup(&map, "db2.example"), "127.0.0.1:27019");
	assert_null(hello_map_lookup(&map, "db2.example:27018"));
	assert_null(hello_map_lookup(&map, "db2"));
	hello_map_entry v6[] = {{"[::1]:27017", "[::1]:27018"}};
	hello_map m6 = {v6, 1, NULL, NULL};
	assert_string_equal(hello_map_lookup(&m6, "[::1]"), "[::1]:27018");
	assert_null(hello_map_lookup(&m6, "[::1]:27019"));
}

/* OP_REPLY (the OP_QUERY isMaster handshake) comes back as OP_REPLY. */
static void test_op_reply(void **state)
{
	bson_t *b = BCON_NEW("ismaster", BCON_BOOL(true), "setName", "rs0", "hosts", "[",
	                     "db1.example:27017", "]", "ok", BCON_DOUBLE(1));
	size_t len;
	uint8_t *in = opreply_build(5, 9, 8, bson_get_data(b), b->len, &len);
	hello_map map = map_for("db1.example:27017", "127.0.0.1:27018");
	hello_rewrite_result r;
	wire_error err = {0};
	assert_int_equal(hello_rewrite(in, len, &map, &r, &err), HELLO_REWRITTEN);
	opreply rep;
	assert_true(opreply_parse(r.msg, r.len, &rep, &err));
	assert_int_equal(wire_read_i32(r.msg + 12), OP_REPLY);
	assert_int_equal(wire_read_i32(r.msg + 8), 9);
	assert_int_equal(rep.flags, 8);
	assert_int_equal(rep.number_returned, 1);
	bson_t doc;
	assert_true(bson_init_static(&doc, rep.docs, rep.docs_len));
	bson_iter_t it;
	bson_iter_t host;
	assert_true(bson_iter_init(&it, &doc) && bson_iter_find_descendant(&it, "hosts.0", &host));
	assert_string_equal(bson_iter_utf8(&host, NULL), "127.0.0.1:27018");
	free(r.msg);
	free(in);
	bson_destroy(b);
}

/* A checksum cannot survive the change (PROTOCOL.md: recompute, or clear
 * the bit and drop it); moreToCome (a streaming hello) must. */
static void test_checksum_dropped_more_to_come_kept(void **state)
{
	size_t len;
	uint8_t *in = reply_msg("{\"hosts\": [\"db1.example:27017\"], \"setName\": \"rs0\", "
	                        "\"ok\": 1}",
	                        OPMSG_CHECKSUM_PRESENT | OPMSG_MORE_TO_COME, &len);
	opmsg m;
	wire_error err = {0};
	assert_true(opmsg_parse(in, len, &m, &err)); /* the fixture's checksum is right */
	hello_map map = map_for("db1.example:27017", "127.0.0.1:27018");
	hello_rewrite_result r;
	assert_int_equal(hello_rewrite(in, len, &map, &r, &err), HELLO_REWRITTEN);
	assert_true(opmsg_parse(r.msg, r.len, &m, &err));
	assert_int_equal(m.flags, OPMSG_MORE_TO_COME);
	free(r.msg);
	/* a corrupted checksum: not a reply to rewrite */
	in[len - 1] ^= 0xff;
	assert_int_equal(hello_rewrite(in, len, &map, &r, &err), HELLO_INVALID);
	free(in);
}

/* A host that is not a string (a symbol, say) is no name a server sends, but
 * a driver that reads symbols as strings would dial it, around mongoguard:
 * left out like an unmapped host, in the lists and as primary or me. */
static void test_non_string_hosts_left_out(void **state)
{
	hello_map map = map_for("db1.example:27017", "127.0.0.1:27018");
	hello_rewrite_result r;
	char *out = rewrite_ok(
	    "{\"hosts\": [\"db1.example:27017\", {\"$symbol\": \"evil.example:27017\"}, 7], "
	    "\"passives\": [{\"$symbol\": \"db4.example:27017\"}], \"setName\": \"rs0\", "
	    "\"primary\": {\"$symbol\": \"evil.example:27017\"}, \"me\": null, \"ok\": 1}",
	    &map, &r);
	assert_string_equal(out, "{ \"hosts\" : [ \"127.0.0.1:27018\" ], \"passives\" : [  ], "
	                         "\"setName\" : \"rs0\", \"ok\" : 1 }");
	assert_true(r.nunmapped >= 1);
	assert_true(r.primary_dropped);
	bson_free(out);
}

static void test_invalid(void **state)
{
	hello_map map = map_for("db1.example:27017", "127.0.0.1:27018");
	hello_rewrite_result r;
	wire_error err = {0};
	uint8_t junk[20] = {20, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0xd4, 7, 0, 0, 0, 0, 0, 0};
	assert_int_equal(hello_rewrite(junk, sizeof(junk), &map, &r, &err), HELLO_INVALID);
	size_t len;
	uint8_t *in = reply_msg("{\"ok\": 1}", 0, &len);
	assert_int_equal(hello_rewrite(in, len - 1, &map, &r, &err), HELLO_INVALID);
	wire_write_i32(in + 12, OP_QUERY);
	assert_int_equal(hello_rewrite(in, len, &map, &r, &err), HELLO_INVALID);
	assert_non_null(strstr(err.msg, "no hello reply"));
	free(in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_primary),
	    cmocka_unit_test(test_secondary_and_passive),
	    cmocka_unit_test(test_hidden),
	    cmocka_unit_test(test_member_added),
	    cmocka_unit_test(test_mongos_and_standalone_unchanged),
	    cmocka_unit_test(test_one_member_default),
	    cmocka_unit_test(test_names_compare_loosely),
	    cmocka_unit_test(test_op_reply),
	    cmocka_unit_test(test_checksum_dropped_more_to_come_kept),
	    cmocka_unit_test(test_non_string_hosts_left_out),
	    cmocka_unit_test(test_invalid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
