/* The reply peek: what the proxy must know of a server reply to relay it
 * without reading its body (its length, who it answers, and whether more
 * replies follow unasked). */
#ifndef MG_PROTOCOL_REPLY_PEEK_H
#define MG_PROTOCOL_REPLY_PEEK_H

#include <stdbool.h>
#include <stddef.h>

#include "protocol/frame.h"
#include "protocol/wire_error.h"

typedef struct reply_peek {
	frame_header h;
	bool more_to_come; /* more replies follow unasked (exhaust, streaming hello) */
	bool compressed;
} reply_peek;

/* What a peek needs at least: the header and an OP_MSG's flag bits. */
#define REPLY_PEEK_LEN (WIRE_HEADER_LEN + 4)

/* p/n: the first n contiguous bytes of a reply. FRAME_OK with *out filled;
 * FRAME_NEED_MORE with *need set to the number of contiguous bytes to come
 * back with (REPLY_PEEK_LEN, or a whole OP_COMPRESSED reply, whose flag
 * bits are compressed); FRAME_INVALID with err set when the stream cannot
 * go on (a bad length, an opcode that is no reply, an OP_MSG too short for
 * its flag bits, an OP_COMPRESSED that does not inflate). An OP_REPLY needs
 * only its header. */
frame_status reply_peek_parse(const uint8_t *p, size_t n, reply_peek *out, size_t *need,
                              wire_error *err) __attribute__((warn_unused_result));

#endif
