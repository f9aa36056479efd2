/* libFuzzer target: the hello rewriter (protocol/hello_rewrite.c). The
 * input is a control byte and a hello reply body (BSON), which the target
 * wraps as an OP_MSG or OP_REPLY, or (bit 6) a whole raw reply whose length
 * field is set to the input's size:
 *
 *   bits 0-2  members in the map (0-4 of the fixed ones below)
 *   bits 3-4  this connection's listener: none, paired with db0, paired
 *             with "" (a single listener)
 *   bit 5     OP_REPLY instead of OP_MSG
 *   bit 6     raw
 *   bit 7     OP_MSG flags: moreToCome and a checksum bit (which must go)
 *
 * Checked: a rewritten reply is a valid reply of the same opcode, ids and
 * flags (less the checksum), exactly as long as its header says, whose body
 * is valid BSON; every host it names (hosts, passives, arbiters, primary,
 * me) is one of the map's listeners; and a reply passed unchanged names no
 * other host either (else the driver would dial around the proxy). */
#include <bson/bson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/frame.h"
#include "protocol/hello_rewrite.h"
#include "protocol/opmsg.h"
#include "protocol/opquery.h"
#include "protocol/wire_doc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const hello_map_entry fz_members[] = {
    {"db1.example:27017", "127.0.0.1:27101"},
    {"db2.example:27018", "127.0.0.1:27102"},
    {"DB3.Example", "127.0.0.1:27103"},
    {"[::1]:27019", "127.0.0.1:27104"},
};
#define FZ_SELF_LISTEN "127.0.0.1:27100"

static bool is_listener(const hello_map *map, const char *host)
{
	if (map->self_listen && !strcmp(host, map->self_listen))
		return true;
	for (size_t i = 0; i < map->n; i++)
		if (!strcmp(host, map->v[i].listen))
			return true;
	return false;
}

/* Every UTF-8 host name a driver reads from the body is a listener. */
static bool names_only_listeners(const hello_map *map, const uint8_t *p, size_t n)
{
	bson_t body;
	bson_iter_t it, child;
	if (!bson_init_static(&body, p, n) || !bson_iter_init(&it, &body))
		return true; /* unreadable: no driver reads hosts from it */
	while (bson_iter_next(&it)) {
		const char *key = bson_iter_key(&it);
		if (!strcmp(key, "hosts") || !strcmp(key, "passives") || !strcmp(key, "arbiters")) {
			if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &child))
				continue;
			while (bson_iter_next(&child))
				if (BSON_ITER_HOLDS_UTF8(&child) &&
				    !is_listener(map, bson_iter_utf8(&child, NULL)))
					return false;
		} else if ((!strcmp(key, "primary") || !strcmp(key, "me")) &&
		           BSON_ITER_HOLDS_UTF8(&it) &&
		           !is_listener(map, bson_iter_utf8(&it, NULL))) {
			return false;
		}
	}
	return true;
}

/* The body of a reply, as the rewriter reads it; false when it has none. */
static bool reply_body(const uint8_t *msg, size_t len, const uint8_t **body, size_t *body_len,
                       frame_header *h, uint32_t *flags, int32_t *reply_flags)
{
	wire_error err = {0};
	if (frame_header_parse(msg, len, h, &err) != FRAME_OK || (size_t)h->length != len)
		return false;
	if (h->opcode == OP_MSG) {
		opmsg m;
		if (!opmsg_parse(msg, len, &m, &err) || m.nseqs)
			return false;
		*body = m.body;
		*body_len = m.body_len;
		*flags = m.flags;
		return true;
	}
	opreply r;
	if (h->opcode != OP_REPLY || !opreply_parse(msg, len, &r, &err) || r.number_returned != 1)
		return false;
	*body = r.docs;
	*body_len = r.docs_len;
	*reply_flags = r.flags;
	return true;
}

static uint8_t *wrap(uint8_t ctl, const uint8_t *p, size_t n, size_t *len)
{
	if (ctl & 64) {
		uint8_t *msg = malloc(n ? n : 1);
		if (msg && n) {
			memcpy(msg, p, n);
			if (n >= 4)
				wire_write_i32(msg, (int32_t)n);
		}
		*len = n;
		return msg;
	}
	if (n < 5 || wire_read_u32(p) != n)
		return NULL;
	if (ctl & 32)
		return opreply_build(11, 7, 8, p, n, len); /* AwaitCapable */
	uint32_t flags = (ctl & 128) ? OPMSG_MORE_TO_COME | OPMSG_CHECKSUM_PRESENT : 0;
	uint8_t *msg = opmsg_build(11, 7, flags, p, n, len);
	/* a claimed checksum needs its 4 bytes */
	if (msg && (flags & OPMSG_CHECKSUM_PRESENT)) {
		uint8_t *grown = realloc(msg, *len + 4);
		if (!grown) {
			free(msg);
			return NULL;
		}
		msg = grown;
		*len += 4;
		wire_write_i32(msg, (int32_t)*len);
		wire_write_i32(msg + *len - 4, (int32_t)opmsg_crc32c(msg, *len - 4));
	}
	return msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t ctl = data[0];
	hello_map map = {.v = fz_members, .n = ctl & 7};
	if (map.n > sizeof fz_members / sizeof fz_members[0])
		map.n = sizeof fz_members / sizeof fz_members[0];
	switch ((ctl >> 3) & 3) {
	case 1:
		map.self_listen = FZ_SELF_LISTEN;
		map.self_member = "db0.example:27017";
		break;
	case 2:
		map.self_listen = FZ_SELF_LISTEN;
		map.self_member = "";
		break;
	default:
		break;
	}
	size_t len = 0;
	uint8_t *msg = wrap(ctl, data + 1, size - 1, &len);
	if (!msg)
		return 0;
	hello_rewrite_result out;
	wire_error err = {0};
	hello_rewrite_status st = hello_rewrite(msg, len, &map, &out, &err);
	const uint8_t *body;
	size_t body_len;
	frame_header h, oh;
	uint32_t flags = 0, oflags = 0;
	int32_t rflags = 0, orflags = 0;
	if (st == HELLO_REWRITTEN) {
		if (!out.msg || out.len < WIRE_HEADER_LEN ||
		    wire_read_i32(out.msg) != (int32_t)out.len)
			abort(); /* not as long as it says */
		if (!reply_body(msg, len, &body, &body_len, &h, &flags, &rflags) ||
		    !reply_body(out.msg, out.len, &body, &body_len, &oh, &oflags, &orflags))
			abort(); /* rewrote what it cannot read, or wrote what no one can */
		if (oh.opcode != h.opcode || oh.request_id != h.request_id ||
		    oh.response_to != h.response_to ||
		    oflags != (flags & ~OPMSG_CHECKSUM_PRESENT) || orflags != rflags)
			abort();
		wire_error verr = {0};
		if (!wire_doc_validate(body, body_len, &verr, "rewritten hello"))
			abort();
		if (!names_only_listeners(&map, body, body_len))
			abort(); /* names a host no listener serves */
		if (out.nunmapped < (out.primary_dropped ? 1u : 0u))
			abort();
		for (unsigned i = 0; i < out.nunmapped && i < HELLO_MAX_UNMAPPED; i++)
			if (strnlen(out.unmapped[i], HELLO_HOST_LEN) == HELLO_HOST_LEN)
				abort();
		free(out.msg);
	} else if (st == HELLO_UNCHANGED) {
		if (out.msg || !reply_body(msg, len, &body, &body_len, &h, &flags, &rflags))
			abort();
		if (!names_only_listeners(&map, body, body_len))
			abort(); /* passed on a host no listener serves */
	} else if (out.msg) {
		abort();
	}
	free(msg);
	return 0;
}
