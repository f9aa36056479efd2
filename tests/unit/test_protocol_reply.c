/* reply.c: the error replies mongoguard writes must read like mongod's. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "fixtures/wire_builder.h"
#include "fixtures/wire_captures.h"
#include "protocol/opquery.h"
#include "protocol/reply.h"

/* Built from the same facts, our reply is byte for byte the one FerretDB
 * sent for an unknown command. */
static void test_matches_real_server_reply(void **state)
{
	const uint8_t *real = fx_ferretdb_error_reply_opmsg;
	size_t len;
	uint8_t *msg =
	    reply_error(REPLY_FORM_OPMSG, wire_read_i32(real + 4), wire_read_i32(real + 8), 59,
	                "CommandNotFound", "no such command: 'endSessions'", NULL, &len);
	assert_non_null(msg);
	assert_int_equal(len, sizeof(fx_ferretdb_error_reply_opmsg));
	assert_memory_equal(msg, real, len);
	free(msg);
}

static void test_opmsg_form_with_extra(void **state)
{
	bson_t *extra = BCON_NEW("rule", "unbounded-push", "ok", BCON_DOUBLE(1.0), "code",
	                         BCON_INT32(1), "errorLabels", "[", "]");
	size_t len;
	uint8_t *msg = reply_error(REPLY_FORM_OPMSG, 900, 41, 2, "BadValue",
	                           "mongoguard: blocked by rule unbounded-push", extra, &len);
	assert_non_null(msg);
	assert_int_equal(wire_read_i32(msg + 4), 900);
	assert_int_equal(wire_read_i32(msg + 8), 41);
	opmsg m;
	wire_error err = {0};
	assert_true(opmsg_parse(msg, len, &m, &err));
	assert_int_equal(m.flags, 0);
	assert_int_equal(m.nseqs, 0);

	bson_t body;
	bson_iter_t it;
	assert_true(bson_init_static(&body, m.body, m.body_len));
	assert_true(bson_iter_init(&it, &body));
	const char *keys[] = {"ok", "errmsg", "code", "codeName", "rule", "errorLabels"};
	for (size_t i = 0; i < 6; i++) {
		assert_true(bson_iter_next(&it));
		assert_string_equal(bson_iter_key(&it), keys[i]);
		if (i == 0) {
			assert_int_equal(bson_iter_type(&it), BSON_TYPE_DOUBLE);
			assert_true(bson_iter_double(&it) == 0.0);
		} else if (i == 2) {
			assert_int_equal(bson_iter_type(&it), BSON_TYPE_INT32);
			assert_int_equal(bson_iter_int32(&it), 2);
		}
	}
	assert_false(bson_iter_next(&it)); /* "ok" and "code" from extra were dropped */
	free(msg);
	bson_destroy(extra);
}

static void test_opreply_form(void **state)
{
	size_t len;
	uint8_t *msg = reply_error(REPLY_FORM_OPREPLY, 5, 1234, 352, "UnsupportedOpQueryCommand",
	                           "only hello over OP_QUERY", NULL, &len);
	assert_non_null(msg);
	assert_int_equal(wire_read_i32(msg + 12), OP_REPLY);
	assert_int_equal(wire_read_i32(msg + 8), 1234);
	opreply r;
	wire_error err = {0};
	assert_true(opreply_parse(msg, len, &r, &err));
	assert_int_equal(r.flags, 0);
	assert_int_equal(r.cursor_id, 0);
	assert_int_equal(r.starting_from, 0);
	assert_int_equal(r.number_returned, 1);
	bson_t doc;
	bson_iter_t it;
	assert_true(bson_init_static(&doc, r.docs, r.docs_len));
	assert_true(bson_iter_init_find(&it, &doc, "codeName"));
	assert_string_equal(bson_iter_utf8(&it, NULL), "UnsupportedOpQueryCommand");
	assert_true(bson_iter_init_find(&it, &doc, "errmsg"));
	assert_string_equal(bson_iter_utf8(&it, NULL), "only hello over OP_QUERY");
	free(msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_matches_real_server_reply),
	    cmocka_unit_test(test_opmsg_form_with_extra),
	    cmocka_unit_test(test_opreply_form),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
