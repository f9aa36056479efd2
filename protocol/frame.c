/* The 16-byte message header. The length is checked as soon as its four
 * bytes are in, so a caller never waits for (or allocates) a message whose
 * size alone already condemns it. */
#include "protocol/frame.h"

#include <string.h>

frame_status frame_header_parse(const uint8_t *p, size_t n, frame_header *out, wire_error *err)
{
	if (n >= 4) {
		int32_t length = wire_read_i32(p);
		if (length < WIRE_MIN_MESSAGE_LEN || length > WIRE_MAX_MESSAGE_LEN) {
			wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
			               "message length %d is outside the allowed range %d..%d",
			               length, WIRE_MIN_MESSAGE_LEN, WIRE_MAX_MESSAGE_LEN);
			return FRAME_INVALID;
		}
	}
	if (n < WIRE_HEADER_LEN)
		return FRAME_NEED_MORE;
	out->length = wire_read_i32(p);
	out->request_id = wire_read_i32(p + 4);
	out->response_to = wire_read_i32(p + 8);
	out->opcode = wire_read_i32(p + 12);
	/* A TLS ClientHello's first bytes make a length in range (a 512-byte
	 * record reads as 33 MB): its opcode, random bytes, says it is none,
	 * and waiting for 33 MB would only end in a frame timeout. */
	if (p[0] == 0x16 && p[1] == 0x03 && p[2] <= 0x04 &&
	    !strcmp(frame_opcode_name(out->opcode), "unknown")) {
		wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
		               "a TLS record where a message header was expected (opcode %d)",
		               out->opcode);
		return FRAME_INVALID;
	}
	return FRAME_OK;
}

void frame_header_write(uint8_t *out, const frame_header *h)
{
	wire_write_i32(out, h->length);
	wire_write_i32(out + 4, h->request_id);
	wire_write_i32(out + 8, h->response_to);
	wire_write_i32(out + 12, h->opcode);
}

const char *frame_opcode_name(int32_t opcode)
{
	switch (opcode) {
	case OP_REPLY:
		return "OP_REPLY";
	case OP_UPDATE:
		return "OP_UPDATE";
	case OP_INSERT:
		return "OP_INSERT";
	case OP_QUERY:
		return "OP_QUERY";
	case OP_GET_MORE:
		return "OP_GET_MORE";
	case OP_DELETE:
		return "OP_DELETE";
	case OP_KILL_CURSORS:
		return "OP_KILL_CURSORS";
	case OP_COMPRESSED:
		return "OP_COMPRESSED";
	case OP_MSG:
		return "OP_MSG";
	}
	return "unknown";
}

const char *frame_foreign_protocol(const frame_header *h)
{
	/* Only the length is sure to be read: a bad one stops the parse at its
	 * four bytes, so four bytes tell. */
	uint8_t b[4];
	for (int k = 0; k < 4; k++)
		b[k] = (uint8_t)((uint32_t)h->length >> (8 * k));
	/* a TLS record: handshake (22), version 3.x */
	if (b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04)
		return "a TLS handshake";
	/* PROXY protocol v1 ("PROXY ") and v2 (its signature starts \r\n\r\n) */
	if (!memcmp(b, "PROX", 4) || !memcmp(b, "\r\n\r\n", 4))
		return "a PROXY protocol header";
	static const char methods[][5] = {"GET ", "POST", "HEAD", "PUT ", "DELE",
	                                  "OPTI", "PATC", "CONN", "TRAC"};
	for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
		if (!memcmp(b, methods[i], 4))
			return "an HTTP request";
	return NULL;
}
