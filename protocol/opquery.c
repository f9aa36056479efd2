/* OP_QUERY and OP_REPLY. Only the handshake still travels this way, so the
 * decoders favour strictness over speed: every length is bounds-checked and
 * every document is walked in full. */
#include "protocol/opquery.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/frame.h"
#include "protocol/wire_doc.h"

#define PROTOCOL_ERROR(err, ...)                                                                   \
	wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError", __VA_ARGS__)

enum {
	OPREPLY_FIXED_LEN = 4 + 8 + 4 + 4, /* flags, cursorID, startingFrom, numberReturned */
};

/* Common to both: the header agrees with the buffer and names the opcode. */
static bool check_header(const uint8_t *msg, size_t len, int32_t want, const char *name,
                         wire_error *err)
{
	if (len < WIRE_HEADER_LEN) {
		PROTOCOL_ERROR(err, "%s of %zu bytes is shorter than its 16-byte header", name,
		               len);
		return false;
	}
	int32_t length = wire_read_i32(msg), opcode = wire_read_i32(msg + 12);
	if (opcode != want) {
		PROTOCOL_ERROR(err, "expected %s (%d), got opcode %d", name, want, opcode);
		return false;
	}
	if (length < 0 || (size_t)length != len) {
		PROTOCOL_ERROR(err, "%s header claims %d bytes but the message has %zu", name,
		               length, len);
		return false;
	}
	return true;
}

bool opquery_parse(const uint8_t *msg, size_t len, opquery *out, wire_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!check_header(msg, len, OP_QUERY, "OP_QUERY", err))
		return false;
	const uint8_t *p = msg + WIRE_HEADER_LEN, *end = msg + len;

	if (end - p < 4) {
		PROTOCOL_ERROR(err, "OP_QUERY is truncated before its flags");
		return false;
	}
	out->flags = wire_read_i32(p);
	p += 4;

	const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
	if (!nul) {
		PROTOCOL_ERROR(err, "OP_QUERY fullCollectionName is not NUL-terminated");
		return false;
	}
	out->full_collection = (const char *)p;
	p = nul + 1;

	if (end - p < 8) {
		PROTOCOL_ERROR(err,
		               "OP_QUERY on '%s' is truncated before numberToSkip and "
		               "numberToReturn",
		               out->full_collection);
		return false;
	}
	out->skip = wire_read_i32(p);
	out->nreturn = wire_read_i32(p + 4);
	p += 8;

	size_t doc_len;
	if (!wire_doc_frame(p, (size_t)(end - p), &doc_len, err, "OP_QUERY query document") ||
	    !wire_doc_validate(p, doc_len, err, "OP_QUERY query document"))
		return false;
	out->query = p;
	out->query_len = doc_len;
	p += doc_len;

	if (p == end)
		return true;
	/* The optional projection must fill the rest exactly. */
	if (!wire_doc_frame(p, (size_t)(end - p), &doc_len, err, "OP_QUERY fields document") ||
	    !wire_doc_validate(p, doc_len, err, "OP_QUERY fields document"))
		return false;
	if (p + doc_len != end) {
		PROTOCOL_ERROR(err, "OP_QUERY has %zu bytes after its fields document",
		               (size_t)(end - p - doc_len));
		return false;
	}
	out->fields = p;
	out->fields_len = doc_len;
	return true;
}

bool opreply_parse(const uint8_t *msg, size_t len, opreply *out, wire_error *err)
{
	memset(out, 0, sizeof(*out));
	if (!check_header(msg, len, OP_REPLY, "OP_REPLY", err))
		return false;
	if (len < WIRE_HEADER_LEN + OPREPLY_FIXED_LEN) {
		PROTOCOL_ERROR(err, "OP_REPLY of %zu bytes is shorter than the minimum of %d", len,
		               WIRE_HEADER_LEN + OPREPLY_FIXED_LEN);
		return false;
	}
	const uint8_t *p = msg + WIRE_HEADER_LEN;
	out->flags = wire_read_i32(p);
	out->cursor_id = wire_read_i64(p + 4);
	out->starting_from = wire_read_i32(p + 12);
	out->number_returned = wire_read_i32(p + 16);
	out->docs = p + OPREPLY_FIXED_LEN;
	out->docs_len = len - WIRE_HEADER_LEN - OPREPLY_FIXED_LEN;

	if (out->number_returned < 0) {
		PROTOCOL_ERROR(err, "OP_REPLY numberReturned %d is negative", out->number_returned);
		return false;
	}
	int32_t count = 0;
	for (const uint8_t *d = out->docs, *end = msg + len; d < end; count++) {
		size_t doc_len;
		if (!wire_doc_frame(d, (size_t)(end - d), &doc_len, err, "OP_REPLY document %d",
		                    count + 1) ||
		    !wire_doc_validate(d, doc_len, err, "OP_REPLY document %d", count + 1))
			return false;
		d += doc_len;
	}
	if (count != out->number_returned) {
		PROTOCOL_ERROR(err, "OP_REPLY numberReturned is %d but it holds %d documents",
		               out->number_returned, count);
		return false;
	}
	return true;
}

bool opquery_is_command(const opquery *q)
{
	static const char suffix[] = ".$cmd";
	size_t n = q->full_collection ? strlen(q->full_collection) : 0;
	size_t s = sizeof(suffix) - 1;
	return n > s && memcmp(q->full_collection + n - s, suffix, s) == 0;
}

uint8_t *opreply_build(int32_t request_id, int32_t response_to, int32_t flags, const uint8_t *doc,
                       size_t doc_len, size_t *len)
{
	size_t total = WIRE_HEADER_LEN + OPREPLY_FIXED_LEN + doc_len;
	if (total > WIRE_MAX_MESSAGE_LEN)
		return NULL;
	uint8_t *out = malloc(total);
	if (!out)
		return NULL;
	frame_header h = {(int32_t)total, request_id, response_to, OP_REPLY};
	frame_header_write(out, &h);
	uint8_t *p = out + WIRE_HEADER_LEN;
	wire_write_i32(p, flags);
	memset(p + 4, 0, 8); /* cursorID: a command reply has no cursor */
	wire_write_i32(p + 12, 0);
	wire_write_i32(p + 16, 1);
	memcpy(p + OPREPLY_FIXED_LEN, doc, doc_len);
	*len = total;
	return out;
}

uint8_t *opquery_build(int32_t request_id, const opquery *q, const uint8_t *query, size_t query_len,
                       size_t *len)
{
	size_t ns_len = strlen(q->full_collection) + 1;
	size_t fields_len = q->fields ? q->fields_len : 0;
	size_t total = WIRE_HEADER_LEN + 4 + ns_len + 8 + query_len + fields_len;
	if (total > WIRE_MAX_MESSAGE_LEN)
		return NULL;
	uint8_t *out = malloc(total);
	if (!out)
		return NULL;
	frame_header h = {(int32_t)total, request_id, 0, OP_QUERY};
	frame_header_write(out, &h);
	uint8_t *p = out + WIRE_HEADER_LEN;
	wire_write_i32(p, q->flags);
	p += 4;
	memcpy(p, q->full_collection, ns_len);
	p += ns_len;
	wire_write_i32(p, q->skip);
	wire_write_i32(p + 4, q->nreturn);
	p += 8;
	memcpy(p, query, query_len);
	p += query_len;
	if (fields_len)
		memcpy(p, q->fields, fields_len);
	*len = total;
	return out;
}
