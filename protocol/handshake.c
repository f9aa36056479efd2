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

/* Copies `from` into `to`, leaving out the top-level `compression`. */
static bool copy_without_compression(const bson_t *from, bson_t *to)
{
	bson_iter_t it;
	if (!bson_iter_init(&it, from))
		return false;
	while (bson_iter_next(&it))
		if (strcmp(bson_iter_key(&it), "compression") != 0 &&
		    !bson_append_iter(to, NULL, 0, &it))
			return false;
	return true;
}

/* OP_MSG: the sections keep their order; the body is replaced, kind-1
 * sections are copied byte for byte, and the checksum goes (bit 0 cleared,
 * trailing 4 bytes dropped) because the bytes it covered changed. */
static uint8_t *rebuild_opmsg(const uint8_t *msg, size_t len, const bson_t *body, size_t *out_len)
{
	opmsg m;
	wire_error err;
	if (!opmsg_parse(msg, len, &m, &err))
		return NULL;
	size_t end = (m.flags & OPMSG_CHECKSUM_PRESENT) ? len - 4 : len;
	size_t total = end - m.body_len + body->len;
	if (total > WIRE_MAX_MESSAGE_LEN)
		return NULL;
	uint8_t *out = malloc(total);
	if (!out)
		return NULL;

	frame_header h = {(int32_t)total, wire_read_i32(msg + 4), wire_read_i32(msg + 8), OP_MSG};
	frame_header_write(out, &h);
	wire_write_i32(out + WIRE_HEADER_LEN, (int32_t)(m.flags & ~OPMSG_CHECKSUM_PRESENT));
	size_t w = WIRE_HEADER_LEN + 4;
	/* opmsg_parse accepted these sections, so their sizes can be trusted. */
	for (size_t off = WIRE_HEADER_LEN + 4; off < end;) {
		if (msg[off] == 0) {
			out[w++] = 0;
			memcpy(out + w, bson_get_data(body), body->len);
			w += body->len;
			off += 1 + m.body_len;
		} else {
			size_t n = 1 + (size_t)wire_read_i32(msg + off + 1);
			memcpy(out + w, msg + off, n);
			w += n;
			off += n;
		}
	}
	*out_len = total;
	return out;
}

/* OP_QUERY: a {$query: {...}, ...} wrapper stays a wrapper around the
 * stripped command. */
static uint8_t *rebuild_opquery(const uint8_t *msg, size_t len, const bson_t *body, size_t *out_len)
{
	opquery q;
	wire_error err;
	if (!opquery_parse(msg, len, &q, &err))
		return NULL;
	bson_t query, wrapper;
	bson_iter_t it;
	if (!bson_init_static(&query, q.query, q.query_len) || !bson_iter_init(&it, &query) ||
	    !bson_iter_next(&it))
		return NULL;
	const char *first = bson_iter_key(&it);
	bool wrapped = BSON_ITER_HOLDS_DOCUMENT(&it) &&
	               (strcmp(first, "$query") == 0 || strcmp(first, "query") == 0);
	uint8_t *out = NULL;
	if (!wrapped) {
		out = opquery_build(wire_read_i32(msg + 4), &q, bson_get_data(body), body->len,
		                    out_len);
	} else {
		bson_init(&wrapper);
		bool ok = bson_append_document(&wrapper, first, -1, body);
		while (ok && bson_iter_next(&it))
			ok = bson_append_iter(&wrapper, NULL, 0, &it);
		if (ok)
			out = opquery_build(wire_read_i32(msg + 4), &q, bson_get_data(&wrapper),
			                    wrapper.len, out_len);
		bson_destroy(&wrapper);
	}
	/* opquery_build addresses a fresh request; keep the original's responseTo. */
	if (out)
		wire_write_i32(out + 8, wire_read_i32(msg + 8));
	return out;
}

uint8_t *handshake_strip_compression(const uint8_t *msg, size_t len, const cmdview *v,
                                     size_t *out_len)
{
	if (!handshake_has_compression(v))
		return NULL;
	bson_t body;
	bson_init(&body);
	uint8_t *out = NULL;
	if (copy_without_compression(&v->body, &body))
		out = v->origin == CMDVIEW_FROM_OPMSG ? rebuild_opmsg(msg, len, &body, out_len)
		                                      : rebuild_opquery(msg, len, &body, out_len);
	bson_destroy(&body);
	return out;
}
