/* OP_COMPRESSED. The claimed size is a length from the wire like any other:
 * checked against the message limit before a byte is allocated for it, and
 * against what the data really inflates to afterwards. Where the format
 * tells the inflated size up front (noop, snappy, a zstd frame header) or
 * bounds it (deflate's ~1032:1), that is checked before allocating too. */
#include "protocol/compress.h"

#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "protocol/frame.h"

#define PROTOCOL_ERROR(err, ...)                                                                   \
	wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError", __VA_ARGS__)

enum {
	COMPRESSED_FIXED_LEN = 4 + 4 + 1, /* originalOpcode, uncompressedSize, compressorId */
};

const char *compress_name(uint8_t compressor_id)
{
	switch (compressor_id) {
	case COMPRESSOR_NOOP:
		return "noop";
	case COMPRESSOR_SNAPPY:
		return "snappy";
	case COMPRESSOR_ZLIB:
		return "zlib";
	case COMPRESSOR_ZSTD:
		return "zstd";
	}
	return "unknown";
}

static bool check_claims(const compressed_msg *c, wire_error *err)
{
	if (c->uncompressed_size <= 0 ||
	    c->uncompressed_size > WIRE_MAX_MESSAGE_LEN - WIRE_HEADER_LEN) {
		PROTOCOL_ERROR(err,
		               "OP_COMPRESSED uncompressedSize %d is outside 1..%d (the message "
		               "limit less the header)",
		               c->uncompressed_size, WIRE_MAX_MESSAGE_LEN - WIRE_HEADER_LEN);
		return false;
	}
	if (c->compressor_id > COMPRESSOR_ZSTD) {
		PROTOCOL_ERROR(err, "OP_COMPRESSED compressorId %u is unknown", c->compressor_id);
		return false;
	}
	if (c->original_opcode == OP_COMPRESSED) {
		PROTOCOL_ERROR(err, "OP_COMPRESSED wraps another OP_COMPRESSED");
		return false;
	}
	return true;
}

bool compress_parse(const uint8_t *msg, size_t len, compressed_msg *out, wire_error *err)
{
	memset(out, 0, sizeof(*out));
	if (len < WIRE_HEADER_LEN + COMPRESSED_FIXED_LEN) {
		PROTOCOL_ERROR(err, "OP_COMPRESSED of %zu bytes is shorter than the minimum of %d",
		               len, WIRE_HEADER_LEN + COMPRESSED_FIXED_LEN);
		return false;
	}
	int32_t length = wire_read_i32(msg), opcode = wire_read_i32(msg + 12);
	if (opcode != OP_COMPRESSED) {
		PROTOCOL_ERROR(err, "expected OP_COMPRESSED (2012), got opcode %d", opcode);
		return false;
	}
	if (length < 0 || (size_t)length != len) {
		PROTOCOL_ERROR(err, "OP_COMPRESSED header claims %d bytes but the message has %zu",
		               length, len);
		return false;
	}
	out->request_id = wire_read_i32(msg + 4);
	out->response_to = wire_read_i32(msg + 8);
	out->original_opcode = wire_read_i32(msg + 16);
	out->uncompressed_size = wire_read_i32(msg + 20);
	out->compressor_id = msg[24];
	out->data = msg + WIRE_HEADER_LEN + COMPRESSED_FIXED_LEN;
	out->data_len = len - WIRE_HEADER_LEN - COMPRESSED_FIXED_LEN;
	return check_claims(out, err);
}

/* What can be learnt about the inflated size without inflating, so that a
 * 30-byte message claiming 47 MB is refused before 47 MB are allocated. */
static bool precheck(const compressed_msg *c, size_t want, wire_error *err)
{
	const char *name = compress_name(c->compressor_id);
	size_t known = 0;
	switch (c->compressor_id) {
	case COMPRESSOR_NOOP:
		known = c->data_len;
		break;
	case COMPRESSOR_SNAPPY:
		if (snappy_uncompressed_length((const char *)c->data, c->data_len, &known) !=
		    SNAPPY_OK) {
			PROTOCOL_ERROR(err, "OP_COMPRESSED snappy data is corrupt");
			return false;
		}
		break;
	case COMPRESSOR_ZLIB:
		/* deflate never does better than about 1032:1 */
		if (want / 1032 > c->data_len) {
			PROTOCOL_ERROR(err,
			               "OP_COMPRESSED zlib data of %zu bytes cannot inflate to the "
			               "claimed uncompressedSize %zu",
			               c->data_len, want);
			return false;
		}
		return true;
	case COMPRESSOR_ZSTD: {
		unsigned long long n = ZSTD_getFrameContentSize(c->data, c->data_len);
		if (n == ZSTD_CONTENTSIZE_ERROR) {
			PROTOCOL_ERROR(err, "OP_COMPRESSED zstd data is not a zstd frame");
			return false;
		}
		/* Several frames may add up to the claim; one frame alone may not
		 * exceed it. */
		if (n == ZSTD_CONTENTSIZE_UNKNOWN || n <= want)
			return true;
		known = n > SIZE_MAX ? SIZE_MAX : (size_t)n;
		break;
	}
	default:
		PROTOCOL_ERROR(err, "OP_COMPRESSED compressorId %u is unknown", c->compressor_id);
		return false;
	}
	if (known != want) {
		PROTOCOL_ERROR(err,
		               "OP_COMPRESSED %s data inflates to %zu bytes, not the claimed "
		               "uncompressedSize %zu",
		               name, known, want);
		return false;
	}
	return true;
}

/* Writes exactly `want` bytes into dst or fails: more and fewer than
 * claimed are both lies. */
static bool inflate_into(const compressed_msg *c, uint8_t *dst, size_t want, wire_error *err)
{
	size_t got = 0;
	switch (c->compressor_id) {
	case COMPRESSOR_NOOP:
		memcpy(dst, c->data, want); /* precheck: data_len == want */
		return true;
	case COMPRESSOR_SNAPPY:
		got = want;
		if (snappy_uncompress((const char *)c->data, c->data_len, (char *)dst, &got) !=
		    SNAPPY_OK) {
			PROTOCOL_ERROR(err, "OP_COMPRESSED snappy data is corrupt");
			return false;
		}
		break;
	case COMPRESSOR_ZLIB: {
		uLongf n = (uLongf)want;
		int rc = uncompress(dst, &n, c->data, (uLong)c->data_len);
		if (rc == Z_BUF_ERROR) {
			/* zlib says this only when the output is full and the stream
			 * has not ended */
			PROTOCOL_ERROR(err,
			               "OP_COMPRESSED zlib stream does not end within the claimed "
			               "uncompressedSize %zu",
			               want);
			return false;
		}
		if (rc != Z_OK) {
			PROTOCOL_ERROR(err, "OP_COMPRESSED zlib data is corrupt or truncated (%s)",
			               rc == Z_DATA_ERROR ? "Z_DATA_ERROR" : "zlib error");
			return false;
		}
		got = (size_t)n;
		break;
	}
	case COMPRESSOR_ZSTD:
		got = ZSTD_decompress(dst, want, c->data, c->data_len);
		if (ZSTD_isError(got)) {
			PROTOCOL_ERROR(err,
			               "OP_COMPRESSED zstd data does not inflate to %zu bytes: %s",
			               want, ZSTD_getErrorName(got));
			return false;
		}
		break;
	}
	if (got != want) {
		PROTOCOL_ERROR(err,
		               "OP_COMPRESSED %s data inflates to %zu bytes, not the claimed "
		               "uncompressedSize %zu",
		               compress_name(c->compressor_id), got, want);
		return false;
	}
	return true;
}

bool compress_inflate(const compressed_msg *c, uint8_t **out, size_t *out_len, wire_error *err)
{
	*out = NULL;
	*out_len = 0;
	if (!check_claims(c, err))
		return false;
	size_t want = (size_t)c->uncompressed_size;
	if (!precheck(c, want, err))
		return false;
	uint8_t *buf = malloc(WIRE_HEADER_LEN + want);
	if (!buf) {
		PROTOCOL_ERROR(err, "cannot allocate %zu bytes to inflate OP_COMPRESSED",
		               WIRE_HEADER_LEN + want);
		return false;
	}
	if (!inflate_into(c, buf + WIRE_HEADER_LEN, want, err)) {
		free(buf);
		return false;
	}
	frame_header h = {(int32_t)(WIRE_HEADER_LEN + want), c->request_id, c->response_to,
	                  c->original_opcode};
	frame_header_write(buf, &h);
	*out = buf;
	*out_len = WIRE_HEADER_LEN + want;
	return true;
}
