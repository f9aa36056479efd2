/* Reading just enough of a reply to frame it. */
#include "protocol/reply_peek.h"

#include <stdlib.h>

#include "protocol/compress.h"
#include "protocol/opmsg.h"

/* The flag bits of an OP_COMPRESSED reply are compressed: inflate a copy
 * to read them. Only clients that compress without negotiating get here. */
static frame_status peek_compressed(const uint8_t *p, size_t len, reply_peek *out, wire_error *err)
{
	compressed_msg c;
	uint8_t *plain = NULL;
	size_t plain_len = 0;
	if (!compress_parse(p, len, &c, err) || !compress_inflate(&c, &plain, &plain_len, err)) {
		char why[sizeof(err->msg)];
		snprintf(why, sizeof(why), "%s", err->msg);
		wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
		               "unreadable OP_COMPRESSED reply: %s", why);
		return FRAME_INVALID;
	}
	out->compressed = true;
	if (c.original_opcode == OP_MSG && plain_len >= REPLY_PEEK_LEN)
		out->more_to_come = opmsg_peek_flags(plain) & OPMSG_MORE_TO_COME;
	free(plain);
	return FRAME_OK;
}

frame_status reply_peek_parse(const uint8_t *p, size_t n, reply_peek *out, size_t *need,
                              wire_error *err)
{
	out->more_to_come = out->compressed = false;
	*need = WIRE_HEADER_LEN;
	frame_status fs = frame_header_parse(p, n, &out->h, err);
	if (fs != FRAME_OK)
		return fs;
	switch (out->h.opcode) {
	case OP_REPLY:
		return FRAME_OK;
	case OP_MSG:
		if (out->h.length < REPLY_PEEK_LEN) {
			wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
			               "a %d-byte OP_MSG reply is too short for its flag bits",
			               out->h.length);
			return FRAME_INVALID;
		}
		if (n < REPLY_PEEK_LEN) {
			*need = REPLY_PEEK_LEN;
			return FRAME_NEED_MORE;
		}
		out->more_to_come = opmsg_peek_flags(p) & OPMSG_MORE_TO_COME;
		return FRAME_OK;
	case OP_COMPRESSED:
		if (n < (size_t)out->h.length) {
			*need = (size_t)out->h.length;
			return FRAME_NEED_MORE;
		}
		return peek_compressed(p, (size_t)out->h.length, out, err);
	default:
		wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError", "opcode %d is not a reply",
		               out->h.opcode);
		return FRAME_INVALID;
	}
}
