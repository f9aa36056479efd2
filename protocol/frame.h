/* Message framing: the 16-byte header every MongoDB wire message starts with.
 *
 * Pure code: bytes in, a verdict out. A length from the wire is never believed:
 * frame_header_parse() rejects anything outside [WIRE_MIN_MESSAGE_LEN,
 * WIRE_MAX_MESSAGE_LEN] before a caller allocates a byte for it. */
#ifndef MG_PROTOCOL_FRAME_H
#define MG_PROTOCOL_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/wire_error.h"

enum {
	WIRE_HEADER_LEN = 16,
	WIRE_MIN_MESSAGE_LEN = 16,
	WIRE_MAX_MESSAGE_LEN = 48000000,
	WIRE_MAX_BSON_LEN = 16 * 1024 * 1024,
};

typedef enum {
	OP_REPLY = 1,
	OP_UPDATE = 2001,
	OP_INSERT = 2002,
	OP_QUERY = 2004,
	OP_GET_MORE = 2005,
	OP_DELETE = 2006,
	OP_KILL_CURSORS = 2007,
	OP_COMPRESSED = 2012,
	OP_MSG = 2013,
} wire_opcode;

typedef struct frame_header {
	int32_t length; /* whole message, header included */
	int32_t request_id;
	int32_t response_to;
	int32_t opcode;
} frame_header;

/* Result of a progress-style parse: invalid / need more bytes / complete. */
typedef enum {
	FRAME_INVALID = -1,
	FRAME_NEED_MORE = 0,
	FRAME_OK = 1,
} frame_status;

/* Reads a header from the first n bytes of p. FRAME_NEED_MORE when n < 16;
 * FRAME_INVALID (with err set) when the length is outside the limits. */
frame_status frame_header_parse(const uint8_t *p, size_t n, frame_header *out, wire_error *err)
    __attribute__((warn_unused_result));

/* Writes a header in wire order (little-endian) into out[0..15]. */
void frame_header_write(uint8_t *out, const frame_header *h);

/* Human name of an opcode for logs ("OP_MSG"), "unknown" otherwise. */
const char *frame_opcode_name(int32_t opcode);

/* What another protocol's first bytes, read as a header whose length made
 * no sense, most likely were: "a TLS handshake", "an HTTP request", "a
 * PROXY protocol header", or NULL when they look like none of these. For
 * the log, as mongod says "It looks like you are trying to access MongoDB
 * over HTTP": the person reading it learns what the client really sent. */
const char *frame_foreign_protocol(const frame_header *h);

/* Little-endian helpers shared by every decoder. */
static inline int32_t wire_read_i32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	                 (uint32_t)p[3] << 24);
}

static inline uint32_t wire_read_u32(const uint8_t *p)
{
	return (uint32_t)wire_read_i32(p);
}

static inline int64_t wire_read_i64(const uint8_t *p)
{
	return (int64_t)((uint64_t)wire_read_u32(p) | (uint64_t)wire_read_u32(p + 4) << 32);
}

static inline void wire_write_i32(uint8_t *p, int32_t v)
{
	uint32_t u = (uint32_t)v;
	p[0] = (uint8_t)u;
	p[1] = (uint8_t)(u >> 8);
	p[2] = (uint8_t)(u >> 16);
	p[3] = (uint8_t)(u >> 24);
}

#endif
