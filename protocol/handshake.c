/* The handshake: reading the client's application name and removing
 * `compression` so that no compressor is ever negotiated through the proxy
 * (see handshake.h for why). */
#include "protocol/handshake.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/frame.h"

bool handshake_app_name(const cmdview *v, char *buf, size_t size)
{
	if (size == 0)
		return false;
	buf[0] = '\0';
	bson_iter_t it, name;
	if (!bson_iter_init(&it, &v->body) ||
	    !bson_iter_find_descendant(&it, "client.application.name", &name) ||
	    !BSON_ITER_HOLDS_UTF8(&name))
		return false;
	uint32_t len;
	const char *s = bson_iter_utf8(&name, &len);
	size_t n = len < size - 1 ? len : size - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return true;
}

bool handshake_has_compression(const cmdview *v)
{
	bson_iter_t it;
	return bson_iter_init_find(&it, &v->body, "compression");
}

/* The byte range of each top-level `compression` element in the body, as
 * offsets from the body's start; returns how many bytes they take. */
static size_t compression_bytes(const bson_t *body)
{
	bson_iter_t it;
	size_t n = 0;
	if (!bson_iter_init(&it, body))
		return 0;
	while (bson_iter_next(&it))
		if (strcmp(bson_iter_key(&it), "compression") == 0)
			n += it.next_off - it.type;
	return n;
}

/* Where the body sits in msg, after checking msg is the message v was made
 * from: the body must be the OP_MSG's kind-0 document, or lie inside the
 * OP_QUERY's query document (itself, or the document a $query wraps).
 * *end is where the bytes to keep end (before an OP_MSG checksum);
 * *outer_off is the offset of an enclosing wrapper document, or 0. */
static bool locate_body(const uint8_t *msg, size_t len, const cmdview *v, size_t *body_off,
                        size_t *end, size_t *outer_off)
{
	wire_error err;
	uintptr_t body = (uintptr_t)bson_get_data(&v->body);
	*end = len;
	*outer_off = 0;
	if (v->origin == CMDVIEW_FROM_OPMSG) {
		opmsg m;
		if (!opmsg_parse(msg, len, &m, &err) || (uintptr_t)m.body != body)
			return false;
		if (m.flags & OPMSG_CHECKSUM_PRESENT)
			*end = len - 4;
	} else {
		opquery q;
		if (!opquery_parse(msg, len, &q, &err))
			return false;
		uintptr_t query = (uintptr_t)q.query;
		if (body < query || body + v->body.len > query + q.query_len)
			return false;
		if (body != query)
			*outer_off = (size_t)(query - (uintptr_t)msg);
	}
	*body_off = (size_t)(body - (uintptr_t)msg);
	return true;
}

/* The new message is the old one with the `compression` element's bytes cut
 * out and the lengths that enclosed them shortened: everything else,
 * requestID, flags, other sections, a $query wrapper and field order
 * included, stays byte for byte. An OP_MSG checksum cannot stay (the bytes
 * it covered changed), so bit 0 is cleared and its 4 bytes dropped. */
uint8_t *handshake_strip_compression(const uint8_t *msg, size_t len, const cmdview *v,
                                     size_t *out_len)
{
	if (!handshake_has_compression(v))
		return NULL;
	size_t body_off, end, outer_off;
	if (!locate_body(msg, len, v, &body_off, &end, &outer_off))
		return NULL;
	const uint8_t *body = msg + body_off;
	size_t body_len = v->body.len, removed = compression_bytes(&v->body);
	size_t total = end - removed;
	uint8_t *out = malloc(total);
	if (!out)
		return NULL;

	/* Header, everything before the body, and the body's length prefix. */
	size_t w = body_off + 4;
	memcpy(out, msg, w);
	bson_iter_t it;
	bool ok = bson_iter_init(&it, &v->body);
	while (ok && bson_iter_next(&it)) {
		if (strcmp(bson_iter_key(&it), "compression") == 0)
			continue;
		memcpy(out + w, body + it.type, it.next_off - it.type);
		w += it.next_off - it.type;
	}
	/* The body's terminator and everything after it, up to the checksum. */
	size_t tail = body_off + body_len - 1;
	memcpy(out + w, msg + tail, end - tail);
	w += end - tail;
	if (!ok || w != total) {
		free(out);
		return NULL;
	}

	wire_write_i32(out, (int32_t)total);
	wire_write_i32(out + body_off, (int32_t)(body_len - removed));
	if (outer_off)
		wire_write_i32(out + outer_off, wire_read_i32(msg + outer_off) - (int32_t)removed);
	if (v->origin == CMDVIEW_FROM_OPMSG)
		wire_write_i32(out + WIRE_HEADER_LEN,
		               (int32_t)(opmsg_peek_flags(msg) & ~OPMSG_CHECKSUM_PRESENT));
	*out_len = total;
	return out;
}
