/* The 16-byte message header. The length is checked as soon as its four
 * bytes are in, so a caller never waits for (or allocates) a message whose
 * size alone already condemns it. */
#include "protocol/frame.h"

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
