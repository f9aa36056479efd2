/* OP_COMPRESSED (2012): header, int32 originalOpcode, int32 uncompressedSize,
 * uint8 compressorId, compressed data. compress_inflate() rebuilds the
 * original message (header with the original opcode and length) so the rest
 * of protocol/ never sees compressed bytes. The claimed size is checked
 * against WIRE_MAX_MESSAGE_LEN before allocating, and against what the data
 * really inflates to afterwards. */
#ifndef MG_PROTOCOL_COMPRESS_H
#define MG_PROTOCOL_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/wire_error.h"

enum {
	COMPRESSOR_NOOP = 0,
	COMPRESSOR_SNAPPY = 1,
	COMPRESSOR_ZLIB = 2,
	COMPRESSOR_ZSTD = 3,
};

typedef struct compressed_msg {
	int32_t request_id;
	int32_t response_to;
	int32_t original_opcode;
	int32_t uncompressed_size; /* without the 16-byte header */
	uint8_t compressor_id;
	const uint8_t *data;
	size_t data_len;
} compressed_msg;

bool compress_parse(const uint8_t *msg, size_t len, compressed_msg *out, wire_error *err)
    __attribute__((warn_unused_result));

/* Returns a malloc'd whole message (16-byte header + original body) in
 * *out and *out_len. The caller frees it. */
bool compress_inflate(const compressed_msg *c, uint8_t **out, size_t *out_len, wire_error *err)
    __attribute__((warn_unused_result));

/* Name for logs: "snappy", "zlib", "zstd", "noop", or "unknown". */
const char *compress_name(uint8_t compressor_id);

#endif
