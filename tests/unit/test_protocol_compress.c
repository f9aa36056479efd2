/* compress.c: OP_COMPRESSED with every compressor, and every lie about size. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "fixtures/wire_builder.h"
#include "fixtures/wire_captures.h"
#include "protocol/compress.h"

static const struct {
	const uint8_t *p;
	size_t n;
	uint8_t id;
} fixtures[] = {
    {fx_compressed_noop, sizeof(fx_compressed_noop), COMPRESSOR_NOOP},
    {fx_compressed_snappy, sizeof(fx_compressed_snappy), COMPRESSOR_SNAPPY},
    {fx_compressed_zlib, sizeof(fx_compressed_zlib), COMPRESSOR_ZLIB},
    {fx_compressed_zstd, sizeof(fx_compressed_zstd), COMPRESSOR_ZSTD},
};
#define NFIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

/* A copy of fixture i with uncompressedSize replaced. */
static void with_claim(wb *b, size_t i, int32_t claim)
{
	b->n = 0;
	wb_bytes(b, fixtures[i].p, fixtures[i].n);
	wire_write_i32(b->buf + 20, claim);
}

static void test_inflates_to_identical_original(void **state)
{
	for (size_t i = 0; i < NFIXTURES; i++) {
		compressed_msg c;
		wire_error err = {0};
		assert_true(compress_parse(fixtures[i].p, fixtures[i].n, &c, &err));
		assert_int_equal(c.compressor_id, fixtures[i].id);
		assert_int_equal(c.original_opcode, OP_MSG);
		assert_int_equal(c.uncompressed_size, sizeof(fx_pymongo_find_opmsg) - 16);
		assert_int_equal(c.request_id, wire_read_i32(fx_pymongo_find_opmsg + 4));
		assert_int_equal(c.response_to, 0);
		assert_int_equal(c.data_len, fixtures[i].n - 25);

		uint8_t *out;
		size_t out_len;
		if (!compress_inflate(&c, &out, &out_len, &err))
			fail_msg("%s: %s", compress_name(c.compressor_id), err.msg);
		assert_int_equal(out_len, sizeof(fx_pymongo_find_opmsg));
		assert_memory_equal(out, fx_pymongo_find_opmsg, out_len);
		opmsg m;
		assert_true(opmsg_parse(out, out_len, &m, &err));
		free(out);
	}
	/* the compressed ones really are compressed */
	assert_true(sizeof(fx_compressed_zstd) < sizeof(fx_compressed_noop));
	assert_true(sizeof(fx_compressed_zlib) < sizeof(fx_compressed_noop));
}

static void test_names(void **state)
{
	assert_string_equal(compress_name(COMPRESSOR_NOOP), "noop");
	assert_string_equal(compress_name(COMPRESSOR_SNAPPY), "snappy");
	assert_string_equal(compress_name(COMPRESSOR_ZLIB), "zlib");
	assert_string_equal(compress_name(COMPRESSOR_ZSTD), "zstd");
	assert_string_equal(compress_name(4), "unknown");
}

/* Claims beyond the message limit are refused by parse and by inflate, the
 * latter for a compressed_msg that never went through parse. */
static void test_claims_beyond_limit(void **state)
{
	const int32_t bad[] = {47999985, 48000000, INT32_MAX, 0, -1, INT32_MIN};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		wb b;
		compressed_msg c;
		wire_error err = {0};
		with_claim(&b, 1, bad[k]);
		assert_false(compress_parse(b.buf, b.n, &c, &err));
		assert_wire_error(err, WIRE_ERR_PROTOCOL, "is outside 1..47999984");

		assert_true(compress_parse(fixtures[1].p, fixtures[1].n, &c, &err));
		c.uncompressed_size = bad[k];
		uint8_t *out = (uint8_t *)&c;
		size_t out_len = 1;
		assert_false(compress_inflate(&c, &out, &out_len, &err));
		assert_null(out);
		assert_int_equal(out_len, 0);
		assert_wire_error(err, WIRE_ERR_PROTOCOL, "uncompressedSize");
	}
}

/* At the limit is allowed by parse, and each compressor's own size hint
 * refuses it before 48 MB are allocated. */
static void test_claims_48mb_at_limit(void **state)
{
	const char *says[] = {
	    "noop data inflates to 180 bytes, not the claimed uncompressedSize 47999984",
	    "snappy data inflates to 180 bytes, not the claimed uncompressedSize 47999984",
	    "cannot inflate to the claimed uncompressedSize 47999984",
	    "zstd data inflates to 180 bytes, not the claimed uncompressedSize 47999984",
	};
	for (size_t i = 0; i < NFIXTURES; i++) {
		wb b;
		compressed_msg c;
		wire_error err = {0};
		with_claim(&b, i, 48000000 - 16);
		assert_true(compress_parse(b.buf, b.n, &c, &err));
		uint8_t *out;
		size_t out_len;
		assert_false(compress_inflate(&c, &out, &out_len, &err));
		assert_wire_error(err, WIRE_ERR_PROTOCOL, says[i]);
	}
}

static void test_lies_about_size(void **state)
{
	const char *fewer[] = {
	    "noop data inflates to 180 bytes, not the claimed uncompressedSize 181",
	    "snappy data inflates to 180 bytes, not the claimed uncompressedSize 181",
	    "zlib data inflates to 180 bytes, not the claimed uncompressedSize 181",
	    "zstd data inflates to 180 bytes, not the claimed uncompressedSize 181",
	};
	const char *more[] = {
	    "noop data inflates to 180 bytes, not the claimed uncompressedSize 179",
	    "snappy data inflates to 180 bytes, not the claimed uncompressedSize 179",
	    "zlib stream does not end within the claimed uncompressedSize 179",
	    "zstd data inflates to 180 bytes, not the claimed uncompressedSize 179",
	};
	for (size_t i = 0; i < NFIXTURES; i++) {
		wb b;
		compressed_msg c;
		wire_error err = {0};
		uint8_t *out;
		size_t out_len;
		with_claim(&b, i, 181);
		assert_true(compress_parse(b.buf, b.n, &c, &err));
		assert_false(compress_inflate(&c, &out, &out_len, &err));
		assert_wire_error(err, WIRE_ERR_PROTOCOL, fewer[i]);

		with_claim(&b, i, 179);
		assert_true(compress_parse(b.buf, b.n, &c, &err));
		assert_false(compress_inflate(&c, &out, &out_len, &err));
		assert_wire_error(err, WIRE_ERR_PROTOCOL, more[i]);
	}
}

/* A zstd frame whose header carries no content size (as streaming
 * compressors write it): only inflating can catch a lie. Built by hand: magic,
 * descriptor 0x00 (no content size, not single-segment), window descriptor
 * 0x00 (1 KiB), then one raw last block holding the original body. */
static void zstd_raw_frame(wb *b, int32_t claim)
{
	const size_t body_len = sizeof(fx_pymongo_find_opmsg) - 16;
	wb_header(b, 3, 0, OP_COMPRESSED);
	wb_i32(b, OP_MSG);
	wb_i32(b, claim);
	wb_u8(b, COMPRESSOR_ZSTD);
	wb_bytes(b, "\x28\xb5\x2f\xfd\x00\x00", 6);
	uint32_t block = (uint32_t)(body_len << 3) | 1; /* last block, raw */
	wb_u8(b, (uint8_t)block);
	wb_u8(b, (uint8_t)(block >> 8));
	wb_u8(b, (uint8_t)(block >> 16));
	wb_bytes(b, fx_pymongo_find_opmsg + 16, body_len);
	wb_finish(b);
}

static void test_zstd_without_content_size(void **state)
{
	wb b;
	compressed_msg c;
	wire_error err = {0};
	uint8_t *out;
	size_t out_len;

	zstd_raw_frame(&b, 180);
	assert_true(compress_parse(b.buf, b.n, &c, &err));
	assert_true(compress_inflate(&c, &out, &out_len, &err));
	assert_memory_equal(out + 16, fx_pymongo_find_opmsg + 16, 180);
	free(out);

	zstd_raw_frame(&b, 181);
	assert_true(compress_parse(b.buf, b.n, &c, &err));
	assert_false(compress_inflate(&c, &out, &out_len, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL,
	                  "zstd data inflates to 180 bytes, not the claimed uncompressedSize 181");

	zstd_raw_frame(&b, 179);
	assert_true(compress_parse(b.buf, b.n, &c, &err));
	assert_false(compress_inflate(&c, &out, &out_len, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "zstd data does not inflate to 179 bytes");

	/* not a zstd frame at all */
	zstd_raw_frame(&b, 180);
	b.buf[25] ^= 0xff;
	assert_true(compress_parse(b.buf, b.n, &c, &err));
	assert_false(compress_inflate(&c, &out, &out_len, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "zstd data is not a zstd frame");
}

static void test_corrupt_data(void **state)
{
	const char *says[] = {
	    NULL,
	    "snappy data is corrupt",
	    "zlib data is corrupt or truncated",
	    "zstd data does not inflate to 180 bytes",
	};
	for (size_t i = 1; i < NFIXTURES; i++) {
		/* cut the compressed stream short, patching the header to match */
		wb b;
		compressed_msg c;
		wire_error err = {0};
		uint8_t *out;
		size_t out_len;
		with_claim(&b, i, 180);
		b.n -= 6;
		wb_finish(&b);
		assert_true(compress_parse(b.buf, b.n, &c, &err));
		assert_false(compress_inflate(&c, &out, &out_len, &err));
		assert_wire_error(err, WIRE_ERR_PROTOCOL, says[i]);
	}
}

static void test_unknown_compressor(void **state)
{
	wb b;
	compressed_msg c;
	wire_error err = {0};
	with_claim(&b, 0, 180);
	b.buf[24] = 4;
	assert_false(compress_parse(b.buf, b.n, &c, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "OP_COMPRESSED compressorId 4 is unknown");

	assert_true(compress_parse(fixtures[0].p, fixtures[0].n, &c, &err));
	c.compressor_id = 200;
	uint8_t *out;
	size_t out_len;
	assert_false(compress_inflate(&c, &out, &out_len, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "compressorId 200 is unknown");
}

static void test_malformed_envelope(void **state)
{
	wb b;
	compressed_msg c;
	wire_error err = {0};

	with_claim(&b, 0, 180);
	wire_write_i32(b.buf + 16, OP_COMPRESSED);
	assert_false(compress_parse(b.buf, b.n, &c, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "wraps another OP_COMPRESSED");

	assert_false(compress_parse(fixtures[0].p, 24, &c, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "shorter than the minimum of 25");

	assert_false(compress_parse(fixtures[0].p, fixtures[0].n - 1, &c, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "header claims");

	assert_false(
	    compress_parse(fx_pymongo_find_opmsg, sizeof(fx_pymongo_find_opmsg), &c, &err));
	assert_wire_error(err, WIRE_ERR_PROTOCOL, "expected OP_COMPRESSED (2012), got opcode 2013");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inflates_to_identical_original),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_claims_beyond_limit),
	    cmocka_unit_test(test_claims_48mb_at_limit),
	    cmocka_unit_test(test_lies_about_size),
	    cmocka_unit_test(test_zstd_without_content_size),
	    cmocka_unit_test(test_corrupt_data),
	    cmocka_unit_test(test_unknown_compressor),
	    cmocka_unit_test(test_malformed_envelope),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
