/* OP_MSG decoding. The whole message is checked before anything reads it:
 * header, flag bits, checksum, then each section. The body is walked in full
 * (analyzers iterate it and block decisions rest on it); documents in kind-1
 * sequences are only framed, because analyzers iterate what they read and
 * the server validates the rest, and a 48 MB insert should not be walked
 * twice. */
#include "protocol/opmsg.h"

#include <bson/bson.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/crc32c.h"
#include "protocol/frame.h"
#include "protocol/wire_doc.h"

enum {
	OPMSG_FLAGS_OFF = WIRE_HEADER_LEN,
	OPMSG_SECTIONS_OFF = WIRE_HEADER_LEN + 4,
	OPMSG_CHECKSUM_LEN = 4,
};

#define PROTOCOL_ERROR(err, ...)                                                                   \
	wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError", __VA_ARGS__)

uint32_t opmsg_crc32c(const uint8_t *p, size_t n)
{
	return crc32c_hw_available() ? crc32c_hw(p, n) : crc32c_sw(p, n);
}

uint32_t opmsg_peek_flags(const uint8_t *msg)
{
	return wire_read_u32(msg + OPMSG_FLAGS_OFF);
}

/* Kind 1: int32 size (counting itself), C-string identifier, documents that
 * fill the rest of the size exactly. p points at the size; avail is what is
 * left of the sections. */
static bool parse_sequence(const uint8_t *p, size_t avail, opmsg_sequence *seq, size_t *consumed,
                           wire_error *err)
{
	if (avail < 4) {
		PROTOCOL_ERROR(err,
		               "OP_MSG kind-1 section is truncated: %zu bytes left, fewer "
		               "than its 4-byte size",
		               avail);
		return false;
	}
	int32_t size = wire_read_i32(p);
	if (size < 5) {
		PROTOCOL_ERROR(err,
		               "OP_MSG kind-1 section size %d is below the minimum of 5 (size and "
		               "an identifier)",
		               size);
		return false;
	}
	if ((size_t)size > avail) {
		PROTOCOL_ERROR(err,
		               "OP_MSG kind-1 section size %d exceeds the %zu bytes left in the "
		               "message",
		               size, avail);
		return false;
	}
	const uint8_t *id = p + 4, *end = p + size;
	const uint8_t *nul = memchr(id, 0, (size_t)(end - id));
	if (!nul) {
		PROTOCOL_ERROR(err,
		               "OP_MSG kind-1 section identifier is not NUL-terminated within "
		               "the section's %d bytes",
		               size);
		return false;
	}
	seq->id = (const char *)id;
	seq->docs = nul + 1;
	seq->docs_len = (size_t)(end - seq->docs);
	seq->count = 0;
	for (const uint8_t *d = seq->docs; d < end;) {
		size_t doc_len;
		if (!wire_doc_frame(d, (size_t)(end - d), &doc_len, err,
		                    "document %u of OP_MSG sequence '%s'", seq->count + 1, seq->id))
			return false;
		d += doc_len;
		seq->count++;
	}
	*consumed = (size_t)size;
	return true;
}

static bool parse_body(const uint8_t *p, size_t avail, opmsg *out, size_t *consumed,
                       wire_error *err)
{
	if (out->body) {
		PROTOCOL_ERROR(err, "OP_MSG has more than one kind-0 section");
		return false;
	}
	size_t len;
	if (!wire_doc_frame(p, avail, &len, err, "OP_MSG body"))
		return false;
	out->body = p;
	out->body_len = len;
	*consumed = len;
	return true;
}

/* Once every section is read: ids are unique and none is also a body key
 * (the server would not know which one the command meant). */
static bool check_names(const opmsg *m, wire_error *err)
{
	for (size_t i = 0; i < m->nseqs; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(m->seqs[i].id, m->seqs[j].id) == 0) {
				PROTOCOL_ERROR(err, "OP_MSG has two kind-1 sections named '%s'",
				               m->seqs[i].id);
				return false;
			}
	if (m->nseqs == 0)
		return true;
	bson_t body;
	bson_iter_t it;
	if (!bson_init_static(&body, m->body, m->body_len) || !bson_iter_init(&it, &body))
		return false; /* unreachable: the body was validated */
	while (bson_iter_next(&it)) {
		const char *key = bson_iter_key(&it);
		for (size_t i = 0; i < m->nseqs; i++)
			if (strcmp(key, m->seqs[i].id) == 0) {
				PROTOCOL_ERROR(err,
				               "OP_MSG field '%s' is both a body key and a kind-1 "
				               "section identifier",
				               key);
				return false;
			}
	}
	return true;
}

/* Flag bits and checksum; *end is where the sections end. */
static bool check_flags(const uint8_t *msg, size_t len, opmsg *out, size_t *end, wire_error *err)
{
	uint32_t flags = opmsg_peek_flags(msg);
	uint32_t unknown = flags & OPMSG_REQUIRED_MASK & ~OPMSG_KNOWN_REQUIRED;
	if (unknown) {
		PROTOCOL_ERROR(err, "OP_MSG has unknown required flag bits 0x%x (flagBits 0x%x)",
		               unknown, flags);
		return false;
	}
	out->flags = flags;
	*end = len;
	if (!(flags & OPMSG_CHECKSUM_PRESENT))
		return true;
	if (len < OPMSG_SECTIONS_OFF + 1 + 5 + OPMSG_CHECKSUM_LEN) {
		PROTOCOL_ERROR(err, "OP_MSG of %zu bytes is too short to hold its checksum", len);
		return false;
	}
	*end = len - OPMSG_CHECKSUM_LEN;
	uint32_t want = wire_read_u32(msg + *end), got = opmsg_crc32c(msg, *end);
	if (want != got) {
		wire_error_set(
		    err, WIRE_ERR_CHECKSUM, "ChecksumMismatch",
		    "OP_MSG checksum 0x%08x does not match its contents (CRC-32C 0x%08x)", want,
		    got);
		return false;
	}
	return true;
}

static bool parse_sections(const uint8_t *msg, size_t end, opmsg *out, wire_error *err)
{
	for (size_t off = OPMSG_SECTIONS_OFF; off < end;) {
		uint8_t kind = msg[off];
		const uint8_t *p = msg + off + 1;
		size_t avail = end - off - 1, used;
		switch (kind) {
		case 0:
			if (!parse_body(p, avail, out, &used, err))
				return false;
			break;
		case 1:
			if (out->nseqs == OPMSG_MAX_SEQUENCES) {
				PROTOCOL_ERROR(err, "OP_MSG has more than %d kind-1 sections",
				               OPMSG_MAX_SEQUENCES);
				return false;
			}
			if (!parse_sequence(p, avail, &out->seqs[out->nseqs], &used, err))
				return false;
			out->nseqs++;
			break;
		default:
			PROTOCOL_ERROR(err, "OP_MSG section kind %u at byte %zu is unknown", kind,
			               off);
			return false;
		}
		off += 1 + used;
	}
	return true;
}

bool opmsg_parse(const uint8_t *msg, size_t len, opmsg *out, wire_error *err)
{
	memset(out, 0, sizeof(*out));
	/* Header, flags and at least a kind byte plus the smallest document. */
	if (len < OPMSG_SECTIONS_OFF + 1 + 5) {
		PROTOCOL_ERROR(err, "OP_MSG of %zu bytes is shorter than the minimum of %d", len,
		               OPMSG_SECTIONS_OFF + 1 + 5);
		return false;
	}
	int32_t length = wire_read_i32(msg), opcode = wire_read_i32(msg + 12);
	if (opcode != OP_MSG) {
		PROTOCOL_ERROR(err, "expected OP_MSG (2013), got opcode %d", opcode);
		return false;
	}
	if (length < 0 || (size_t)length != len) {
		PROTOCOL_ERROR(err, "OP_MSG header claims %d bytes but the message has %zu", length,
		               len);
		return false;
	}
	size_t end;
	if (!check_flags(msg, len, out, &end, err) || !parse_sections(msg, end, out, err))
		return false;
	if (!out->body) {
		PROTOCOL_ERROR(err, "OP_MSG has no kind-0 section (the command body)");
		return false;
	}
	if (!wire_doc_validate(out->body, out->body_len, err, "OP_MSG body"))
		return false;
	return check_names(out, err);
}

uint8_t *opmsg_build(int32_t request_id, int32_t response_to, uint32_t flags, const uint8_t *body,
                     size_t body_len, size_t *len)
{
	size_t total = OPMSG_SECTIONS_OFF + 1 + body_len;
	if (total > WIRE_MAX_MESSAGE_LEN)
		return NULL;
	uint8_t *out = malloc(total);
	if (!out)
		return NULL;
	frame_header h = {(int32_t)total, request_id, response_to, OP_MSG};
	frame_header_write(out, &h);
	/* The builder never writes a checksum, so it never claims one. */
	wire_write_i32(out + OPMSG_FLAGS_OFF, (int32_t)(flags & ~OPMSG_CHECKSUM_PRESENT));
	out[OPMSG_SECTIONS_OFF] = 0;
	memcpy(out + OPMSG_SECTIONS_OFF + 1, body, body_len);
	*len = total;
	return out;
}
