/* The hello rewriter (see hello_rewrite.h). */
#include "protocol/hello_rewrite.h"

#include <bson/bson.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "protocol/frame.h"
#include "protocol/opmsg.h"
#include "protocol/opquery.h"

/* "Host:Port" to "host:port" (":27017" added when absent), so names that
 * a replica-set config and a URI spell differently still compare equal.
 * False when it does not fit. */
static bool host_normalise(const char *in, char *out, size_t size)
{
	size_t n = strlen(in);
	const char *colon = strrchr(in, ':');
	const char *bracket = strrchr(in, ']');
	bool has_port =
	    colon && (!bracket || colon > bracket) && (in[0] == '[' || strchr(in, ':') == colon);
	if (n + (has_port ? 0 : 6) + 1 > size)
		return false;
	for (size_t i = 0; i <= n; i++)
		out[i] = (char)tolower((unsigned char)in[i]);
	if (!has_port)
		strcat(out, ":27017");
	return true;
}

static bool same_host(const char *a, const char *b)
{
	char na[HELLO_HOST_LEN + 8], nb[HELLO_HOST_LEN + 8];
	return a && b && *a && *b && host_normalise(a, na, sizeof(na)) &&
	       host_normalise(b, nb, sizeof(nb)) && !strcmp(na, nb);
}

const char *hello_map_lookup(const hello_map *map, const char *host)
{
	if (map->self_listen && same_host(host, map->self_member))
		return map->self_listen;
	for (size_t i = 0; i < map->n; i++)
		if (same_host(host, map->v[i].member))
			return map->v[i].listen;
	return NULL;
}

#define NOT_A_STRING "(a host name that is not a string)"

static void note_unmapped(hello_rewrite_result *out, const char *host)
{
	for (unsigned i = 0; i < out->nunmapped && i < HELLO_MAX_UNMAPPED; i++)
		if (!strcmp(out->unmapped[i], host))
			return;
	if (out->nunmapped < HELLO_MAX_UNMAPPED)
		snprintf(out->unmapped[out->nunmapped], HELLO_HOST_LEN, "%s", host);
	out->nunmapped++;
}

/* hosts / passives / arbiters: each name mapped to its listener, unmapped
 * ones left out. */
static bool rewrite_list(bson_iter_t *it, const char *key, const hello_map *map, bson_t *doc,
                         hello_rewrite_result *out)
{
	bson_iter_t child;
	bson_t arr;
	bool changed = false;
	if (!bson_iter_recurse(it, &child) || !bson_append_array_begin(doc, key, -1, &arr))
		return false;
	uint32_t i = 0;
	while (bson_iter_next(&child)) {
		char idx[16];
		const char *ikey;
		bson_uint32_to_string(i, &ikey, idx, sizeof(idx));
		if (!BSON_ITER_HOLDS_UTF8(&child)) {
			/* no server sends one; a driver that reads a symbol as a
			 * string would dial it, around mongoguard */
			note_unmapped(out, NOT_A_STRING);
			changed = true;
			continue;
		}
		const char *host = bson_iter_utf8(&child, NULL);
		const char *to = hello_map_lookup(map, host);
		if (!to) {
			note_unmapped(out, host);
			changed = true;
			continue;
		}
		changed |= strcmp(to, host) != 0;
		bson_append_utf8(&arr, ikey, -1, to, -1);
		i++;
	}
	bson_append_array_end(doc, &arr);
	return changed;
}

/* The body rewritten into *doc; true when anything changed. */
static bool rewrite_body(const bson_t *body, const hello_map *map, bson_t *doc,
                         hello_rewrite_result *out)
{
	bson_iter_t it;
	bool changed = false;
	bson_iter_init(&it, body);
	while (bson_iter_next(&it)) {
		const char *key = bson_iter_key(&it);
		bool list =
		    !strcmp(key, "hosts") || !strcmp(key, "passives") || !strcmp(key, "arbiters");
		if (list && BSON_ITER_HOLDS_ARRAY(&it)) {
			changed |= rewrite_list(&it, key, map, doc, out);
			continue;
		}
		if (!strcmp(key, "setName"))
			out->replica_set = true;
		else if (!strcmp(key, "serviceId"))
			out->load_balanced = true;
		else if (!strcmp(key, "msg") && BSON_ITER_HOLDS_UTF8(&it) &&
		         !strcmp(bson_iter_utf8(&it, NULL), "isdbgrid"))
			out->mongos = true;
		bool me = !strcmp(key, "me");
		if ((me || !strcmp(key, "primary")) && !BSON_ITER_HOLDS_UTF8(&it)) {
			note_unmapped(out, NOT_A_STRING); /* as in rewrite_list */
			out->primary_dropped |= !me;
			changed = true;
			continue;
		}
		if ((me || !strcmp(key, "primary")) && BSON_ITER_HOLDS_UTF8(&it)) {
			const char *host = bson_iter_utf8(&it, NULL);
			/* `me` is the member this connection is paired with,
			 * whatever the map says */
			const char *to =
			    me && map->self_listen ? map->self_listen : hello_map_lookup(map, host);
			if (!to) {
				note_unmapped(out, host);
				out->primary_dropped = true;
				changed = true;
				continue;
			}
			changed |= strcmp(to, host) != 0;
			bson_append_utf8(doc, key, -1, to, -1);
			continue;
		}
		bson_append_iter(doc, NULL, 0, &it);
	}
	return changed;
}

static hello_rewrite_status rewrite_doc(const uint8_t *p, size_t n, const hello_map *map,
                                        bson_t *doc, hello_rewrite_result *out, wire_error *err)
{
	bson_t body;
	if (!bson_init_static(&body, p, n) || !bson_validate(&body, BSON_VALIDATE_NONE, NULL)) {
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "hello reply body is not BSON");
		return HELLO_INVALID;
	}
	return rewrite_body(&body, map, doc, out) ? HELLO_REWRITTEN : HELLO_UNCHANGED;
}

hello_rewrite_status hello_rewrite(const uint8_t *msg, size_t len, const hello_map *map,
                                   hello_rewrite_result *out, wire_error *err)
{
	memset(out, 0, sizeof(*out));
	frame_header h;
	if (frame_header_parse(msg, len, &h, err) != FRAME_OK)
		return HELLO_INVALID;
	if ((size_t)h.length != len) {
		wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
		               "hello reply is %zu bytes, its header says %d", len, h.length);
		return HELLO_INVALID;
	}
	const uint8_t *body;
	size_t body_len;
	uint32_t flags = 0;
	int32_t reply_flags = 0;
	if (h.opcode == OP_MSG) {
		opmsg m;
		if (!opmsg_parse(msg, len, &m, err))
			return HELLO_INVALID;
		if (m.nseqs) {
			wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
			               "hello reply with document sequences");
			return HELLO_INVALID;
		}
		body = m.body;
		body_len = m.body_len;
		flags = m.flags & ~OPMSG_CHECKSUM_PRESENT; /* the bytes change */
	} else if (h.opcode == OP_REPLY) {
		opreply r;
		if (!opreply_parse(msg, len, &r, err))
			return HELLO_INVALID;
		if (r.number_returned != 1) {
			wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
			               "hello OP_REPLY holds %d documents", r.number_returned);
			return HELLO_INVALID;
		}
		body = r.docs;
		body_len = r.docs_len;
		reply_flags = r.flags;
	} else {
		wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError", "%s is no hello reply",
		               frame_opcode_name(h.opcode));
		return HELLO_INVALID;
	}
	bson_t doc = BSON_INITIALIZER;
	hello_rewrite_status st = rewrite_doc(body, body_len, map, &doc, out, err);
	if (st == HELLO_REWRITTEN) {
		out->msg = h.opcode == OP_MSG
		               ? opmsg_build(h.request_id, h.response_to, flags,
		                             bson_get_data(&doc), doc.len, &out->len)
		               : opreply_build(h.request_id, h.response_to, reply_flags,
		                               bson_get_data(&doc), doc.len, &out->len);
		if (!out->msg) {
			wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError", "out of memory");
			st = HELLO_INVALID;
		}
	}
	bson_destroy(&doc);
	return st;
}
