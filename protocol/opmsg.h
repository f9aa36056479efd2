/* OP_MSG (2013): header, uint32 flagBits, sections, optional CRC-32C.
 *
 * opmsg_parse() validates a complete message in place and returns views into
 * it; nothing is copied or allocated, so the message must outlive the opmsg. */
#ifndef MG_PROTOCOL_OPMSG_H
#define MG_PROTOCOL_OPMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/wire_error.h"

#define OPMSG_CHECKSUM_PRESENT (1u << 0)
#define OPMSG_MORE_TO_COME     (1u << 1)
#define OPMSG_EXHAUST_ALLOWED  (1u << 16)
/* The low 16 bits are required: a set bit we do not know is an error. */
#define OPMSG_REQUIRED_MASK  0xffffu
#define OPMSG_KNOWN_REQUIRED (OPMSG_CHECKSUM_PRESENT | OPMSG_MORE_TO_COME)

/* Drivers send at most two sequences (bulkWrite: ops + nsInfo); a message
 * with more is refused rather than truncated. */
#define OPMSG_MAX_SEQUENCES 8

/* A kind-1 section: an identifier and BSON documents back to back. */
typedef struct opmsg_sequence {
	const char *id; /* NUL-terminated, points into the message */
	const uint8_t *docs;
	size_t docs_len;
	uint32_t count; /* documents in docs */
} opmsg_sequence;

typedef struct opmsg {
	uint32_t flags;
	const uint8_t *body; /* the kind-0 document */
	size_t body_len;
	opmsg_sequence seqs[OPMSG_MAX_SEQUENCES];
	size_t nseqs;
} opmsg;

/* msg/len is one whole message, header included. Checks flag bits, every
 * section, each document's framing, the body's BSON, and the checksum when
 * present. On failure returns false and says why in err. */
bool opmsg_parse(const uint8_t *msg, size_t len, opmsg *out, wire_error *err)
    __attribute__((warn_unused_result));

/* Reads only the flag bits of a complete-enough OP_MSG (>= 20 bytes). */
uint32_t opmsg_peek_flags(const uint8_t *msg);

/* CRC-32C (Castagnoli) as OP_MSG uses it. */
uint32_t opmsg_crc32c(const uint8_t *p, size_t n);

/* Builds a whole OP_MSG holding one kind-0 body and no checksum.
 * Returns a malloc'd buffer (caller frees) and its length in *len. */
uint8_t *opmsg_build(int32_t request_id, int32_t response_to, uint32_t flags, const uint8_t *body,
                     size_t body_len, size_t *len);

#endif
