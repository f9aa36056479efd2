/* frame.c: the header and its length limits. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "fixtures/wire_builder.h"
#include "fixtures/wire_captures.h"
#include "protocol/frame.h"

static frame_status parse_len(int32_t length, size_t n, wire_error *err)
{
	uint8_t b[16] = {0};
	wire_write_i32(b, length);
	wire_write_i32(b + 12, OP_MSG);
	frame_header h;
	return frame_header_parse(b, n, &h, err);
}

static void test_real_header(void **state)
{
	frame_header h;
	wire_error err = {0};
	assert_int_equal(
	    frame_header_parse(fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg), &h, &err),
	    FRAME_OK);
	assert_int_equal(h.length, sizeof(fx_pymongo_insert_opmsg));
	assert_int_equal(h.opcode, OP_MSG);
	assert_int_equal(h.response_to, 0);
	assert_int_equal(h.request_id, wire_read_i32(fx_pymongo_insert_opmsg + 4));

	assert_int_equal(frame_header_parse(fx_ferretdb_insert_reply_opmsg, 16, &h, &err),
	                 FRAME_OK);
	assert_int_equal(h.response_to, wire_read_i32(fx_pymongo_insert_opmsg + 4));
}

static void test_need_more_below_16_bytes(void **state)
{
	wire_error err = {0};
	for (size_t n = 0; n < 16; n++)
		assert_int_equal(parse_len(100, n, &err), FRAME_NEED_MORE);
	assert_int_equal(parse_len(100, 16, &err), FRAME_OK);
}

static void test_length_limits(void **state)
{
	wire_error err = {0};
	assert_int_equal(parse_len(16, 16, &err), FRAME_OK);
	assert_int_equal(parse_len(48000000, 16, &err), FRAME_OK);

	assert_int_equal(parse_len(15, 16, &err), FRAME_INVALID);
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "message length 15 is outside");
	assert_int_equal(parse_len(48000001, 16, &err), FRAME_INVALID);
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "message length 48000001 is outside");
	assert_int_equal(parse_len(-1, 16, &err), FRAME_INVALID);
	assert_int_equal(parse_len(0, 16, &err), FRAME_INVALID);
	assert_int_equal(parse_len(INT32_MIN, 16, &err), FRAME_INVALID);
}

/* The length condemns a message as soon as its 4 bytes are in: nobody waits
 * for the rest of a header, let alone allocates, for a bad one. */
static void test_bad_length_before_whole_header(void **state)
{
	wire_error err = {0};
	for (size_t n = 4; n < 16; n++) {
		assert_int_equal(parse_len(48000001, n, &err), FRAME_INVALID);
		assert_int_equal(parse_len(15, n, &err), FRAME_INVALID);
	}
	assert_int_equal(parse_len(15, 3, &err), FRAME_NEED_MORE);
}

static void test_write_round_trip(void **state)
{
	frame_header in = {1234, -7, 0x01020304, OP_COMPRESSED}, out;
	uint8_t b[16];
	wire_error err = {0};
	frame_header_write(b, &in);
	assert_int_equal(b[0], 0xd2); /* little-endian */
	assert_int_equal(b[1], 0x04);
	assert_int_equal(frame_header_parse(b, sizeof(b), &out, &err), FRAME_OK);
	assert_memory_equal(&in, &out, sizeof(in));
}

static void test_opcode_names(void **state)
{
	assert_string_equal(frame_opcode_name(OP_MSG), "OP_MSG");
	assert_string_equal(frame_opcode_name(OP_QUERY), "OP_QUERY");
	assert_string_equal(frame_opcode_name(OP_REPLY), "OP_REPLY");
	assert_string_equal(frame_opcode_name(OP_COMPRESSED), "OP_COMPRESSED");
	assert_string_equal(frame_opcode_name(OP_KILL_CURSORS), "OP_KILL_CURSORS");
	assert_string_equal(frame_opcode_name(2014), "unknown");
}

static void test_read_helpers(void **state)
{
	const uint8_t b[8] = {0xff, 0xff, 0xff, 0xff, 0x01, 0x00, 0x00, 0x80};
	assert_int_equal(wire_read_i32(b), -1);
	assert_int_equal(wire_read_u32(b), 0xffffffffu);
	assert_true(wire_read_i64(b) == (int64_t)0x80000001ffffffffull);
}

/* Another protocol's first bytes read as a header: the log says what they
 * most likely were. */
static frame_header header_of(const char *bytes)
{
	uint8_t b[16] = {0};
	memcpy(b, bytes, strnlen(bytes, 16));
	frame_header h = {wire_read_i32(b), wire_read_i32(b + 4), wire_read_i32(b + 8),
	                  wire_read_i32(b + 12)};
	return h;
}

static void test_foreign_protocols(void **state)
{
	frame_header tls = header_of("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03");
	assert_string_equal(frame_foreign_protocol(&tls), "a TLS handshake");
	frame_header get = header_of("GET / HTTP/1.1\r\nHost");
	assert_string_equal(frame_foreign_protocol(&get), "an HTTP request");
	frame_header post = header_of("POST /x HTTP/1.1");
	assert_string_equal(frame_foreign_protocol(&post), "an HTTP request");
	frame_header proxy = header_of("PROXY TCP4 1.2.3.4");
	assert_string_equal(frame_foreign_protocol(&proxy), "a PROXY protocol header");
	/* a MongoDB header, even a bad one, is none of these */
	frame_header mongo = {60, 1, 0, OP_MSG};
	assert_null(frame_foreign_protocol(&mongo));
	frame_header big = {0x7fffffff, 1, 0, OP_MSG};
	assert_null(frame_foreign_protocol(&big));
	frame_header geta = header_of("GETX");
	assert_null(frame_foreign_protocol(&geta));
	/* a ClientHello's length is in range: its opcode (random bytes) condemns
	 * it at once, instead of a wait for 33 MB */
	const uint8_t hello[16] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01,
	                           0xfc, 0x03, 0x03, 0x5a, 0x11, 0x22, 0x33, 0x44};
	frame_header fh;
	wire_error err = {0};
	assert_int_equal(frame_header_parse(hello, 16, &fh, &err), FRAME_INVALID);
	assert_non_null(strstr(err.msg, "a TLS record"));
	assert_string_equal(frame_foreign_protocol(&fh), "a TLS handshake");
	/* the length alone decides: a bad length stops the parse there */
	frame_header only = {get.length, 0, 0, 0};
	assert_string_equal(frame_foreign_protocol(&only), "an HTTP request");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_real_header),
	    cmocka_unit_test(test_need_more_below_16_bytes),
	    cmocka_unit_test(test_length_limits),
	    cmocka_unit_test(test_bad_length_before_whole_header),
	    cmocka_unit_test(test_write_round_trip),
	    cmocka_unit_test(test_opcode_names),
	    cmocka_unit_test(test_read_helpers),
	    cmocka_unit_test(test_foreign_protocols),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
