/* The request path: which opcode becomes which command view, which reply
 * form, and which requests a 5.1+ server would refuse (docs/internals.md,
 * "How it handles the protocol"). */
#include "protocol/request.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/compress.h"
#include "protocol/handshake.h"
#include "protocol/wire_doc.h"

/* OP_QUERY commands a 5.1+ server still accepts. */
static bool opquery_allowed(const char *name)
{
	static const char *const names[] = {
	    "hello",        "isMaster",  "ismaster",  "saslStart", "saslContinue", "getnonce",
	    "authenticate", "buildinfo", "buildInfo", "ping",      NULL,
	};
	for (int i = 0; names[i]; i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

/* mongod's code for a repeated field in a command (IDL's duplicate field). */
#define REQUEST_ERR_DUPLICATE_FIELD 40413

/* Bodies with at most this many top-level keys (the ones the view keeps)
 * are checked in place; a larger one (no driver sends one) is sorted in a
 * malloc'd copy. */
#define UNIQUE_KEYS_INLINE CMDVIEW_TOP_KEYS

typedef struct key_ref {
	const char *k;
	uint32_t len;
} key_ref;

static int key_ref_cmp(const void *a, const void *b)
{
	const key_ref *x = a, *y = b;
	return strcmp(x->k, y->k);
}

/* The first key of a large body that appears twice, or NULL; false when
 * memory ran out. */
static bool repeated_key_sorted(const uint8_t *p, size_t len, size_t n, const char **dup)
{
	const char **keys = malloc(n * sizeof(*keys));
	uint32_t *lens = malloc(n * sizeof(*lens));
	key_ref *refs = malloc(n * sizeof(*refs));
	bool ok = keys && lens && refs;
	*dup = NULL;
	if (ok) {
		wire_doc_keys(p, len, keys, lens, n);
		for (size_t i = 0; i < n; i++)
			refs[i] = (key_ref){keys[i], lens[i]};
		qsort(refs, n, sizeof(*refs), key_ref_cmp);
		for (size_t i = 1; i < n && !*dup; i++)
			if (refs[i].len == refs[i - 1].len && !strcmp(refs[i].k, refs[i - 1].k))
				*dup = refs[i].k;
	}
	free(keys);
	free(lens);
	free(refs);
	return ok;
}

/* A command body must not name a top-level field twice. mongod refuses it
 * (its command parsers raise 40413), but other servers read one of the two,
 * and not always the one mongoguard would: FerretDB takes the last `$db`,
 * the last collection name and the last `updates`, where the namespace and
 * the statement iterator here took the first. Judging one occurrence while
 * the server runs the other would let a blocked request through, so the
 * request is refused before any analyzer sees it. Nested documents are not
 * checked: mongod's matcher and update parser read every occurrence there,
 * and so do the analyzers.
 *
 * On every request, so: keys come from a bare walk of the validated body,
 * and a 256-bit filter on (length, first and last byte) lets a key be
 * compared only with the earlier keys that share its bit. */
static bool unique_keys(const cmdview *v, wire_error *err)
{
	const uint8_t *p = bson_get_data(&v->body);
	size_t len = v->body.len;
	uint8_t bit[UNIQUE_KEYS_INLINE];
	/* the view walked the body's top level already */
	const char *const *keys = v->top_keys;
	const uint32_t *lens = v->top_lens;
	size_t n = v->ntop;
	const char *dup = NULL;
	if (n > UNIQUE_KEYS_INLINE) {
		if (!repeated_key_sorted(p, len, n, &dup)) {
			wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
			               "out of memory checking the fields of command '%s'",
			               v->name);
			return false;
		}
	} else {
		uint64_t seen[4] = {0, 0, 0, 0};
		for (size_t i = 0; i < n && !dup; i++) {
			uint32_t l = lens[i];
			const uint8_t *k = (const uint8_t *)keys[i];
			uint8_t b = (uint8_t)(l * 31u + (l ? k[0] * 7u + k[l - 1] : 0u));
			bit[i] = b;
			if (seen[b >> 6] & (1ull << (b & 63)))
				for (size_t j = 0; j < i; j++)
					if (bit[j] == b && lens[j] == l &&
					    !memcmp(keys[j], keys[i], l)) {
						dup = keys[i];
						break;
					}
			seen[b >> 6] |= 1ull << (b & 63);
		}
	}
	if (!dup)
		return true;
	wire_error_set(err, REQUEST_ERR_DUPLICATE_FIELD, "Location40413",
	               "BSON field '%s.%s' is a duplicate field: a command may name each field "
	               "once (servers differ on which occurrence they read)",
	               v->name, dup);
	return false;
}

static request_status command(request *r, wire_error *err)
{
	if (!unique_keys(&r->view, err))
		return REQUEST_REJECT;
	r->cmd = cmd_find(r->view.name);
	r->hello = r->cmd == CMD_HELLO;
	r->awaitable_hello = r->hello && bson_has_field(&r->view.body, "maxAwaitTimeMS");
	return REQUEST_COMMAND;
}

static request_status decode_opmsg(request *r, wire_error *err)
{
	if (r->plain_len >= WIRE_HEADER_LEN + 4) {
		uint32_t flags = opmsg_peek_flags(r->plain);
		r->more_to_come = flags & OPMSG_MORE_TO_COME;
		r->exhaust_allowed = flags & OPMSG_EXHAUST_ALLOWED;
	}
	if (!opmsg_parse(r->plain, r->plain_len, &r->m, err) ||
	    !cmdview_from_opmsg(&r->m, &r->view, err))
		return REQUEST_REJECT;
	return command(r, err);
}

static request_status decode_opquery(request *r, wire_error *err)
{
	r->form = REPLY_FORM_OPREPLY;
	if (!opquery_parse(r->plain, r->plain_len, &r->q, err))
		return REQUEST_REJECT;
	/* A 5.1+ server takes OP_QUERY only for a few commands on <db>.$cmd. */
	const char *refused = !opquery_is_command(&r->q) ? r->q.full_collection : NULL;
	if (!refused) {
		if (!cmdview_from_opquery(&r->q, &r->view, err))
			return REQUEST_REJECT; /* e.g. invalid BSON: say exactly that */
		if (!opquery_allowed(r->view.name))
			refused = r->view.name;
	}
	if (refused) {
		wire_error_set(err, WIRE_ERR_UNSUPPORTED_OPQUERY, "UnsupportedOpQueryCommand",
		               "Unsupported OP_QUERY command: %s. The client driver may require "
		               "an upgrade. For more details see "
		               "https://dochub.mongodb.org/core/legacy-opcode-removal",
		               refused);
		return REQUEST_REJECT;
	}
	return command(r, err);
}

static request_status decode_compressed(request *r, wire_error *err)
{
	compressed_msg c;
	if (!compress_parse(r->msg, r->len, &c, err) ||
	    !compress_inflate(&c, &r->inflated, &r->plain_len, err))
		return REQUEST_REJECT;
	r->plain = r->inflated;
	r->opcode = c.original_opcode;
	if (c.original_opcode == OP_MSG)
		return decode_opmsg(r, err);
	if (c.original_opcode == OP_QUERY)
		return decode_opquery(r, err);
	wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
	               "OP_COMPRESSED wraps opcode %d, which mongoguard does not accept",
	               c.original_opcode);
	return REQUEST_REJECT;
}

request_status request_decode(request *r, const uint8_t *msg, size_t len, wire_error *err)
{
	memset(r, 0, offsetof(request, view));
	r->inflated = NULL;
	r->msg = r->plain = msg;
	r->len = r->plain_len = len;
	r->form = REPLY_FORM_OPMSG;
	frame_status fs = frame_header_parse(msg, len, &r->h, err);
	if (fs == FRAME_NEED_MORE)
		wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
		               "message of %zu bytes is shorter than its 16-byte header", len);
	if (fs != FRAME_OK)
		return REQUEST_CLOSE;
	if ((size_t)r->h.length != len) {
		wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
		               "message header says %d bytes, but %zu were framed", r->h.length,
		               len);
		return REQUEST_CLOSE;
	}
	r->opcode = r->h.opcode;
	switch (r->h.opcode) {
	case OP_MSG:
		return decode_opmsg(r, err);
	case OP_QUERY:
		return decode_opquery(r, err);
	case OP_COMPRESSED:
		return decode_compressed(r, err);
	case OP_GET_MORE:
		r->form = REPLY_FORM_OPREPLY;
		r->legacy_opcode = true;
		wire_error_set(err, REQUEST_ERR_LEGACY_OPCODE, "Location5739101",
		               "OP_GET_MORE is no longer supported (removed in MongoDB 5.1); "
		               "use the getMore command");
		return REQUEST_REJECT;
	case OP_INSERT:
	case OP_UPDATE:
	case OP_DELETE:
	case OP_KILL_CURSORS:
		/* These never get a reply, so the only clear answer is closing. */
		r->legacy_opcode = true;
		r->more_to_come = true;
		wire_error_set(err, REQUEST_ERR_LEGACY_OPCODE, "Location5739101",
		               "legacy opcode %s is not supported (removed in MongoDB 5.1); it "
		               "allows no reply, so the connection is closed",
		               frame_opcode_name(r->h.opcode));
		return REQUEST_CLOSE;
	default:
		r->more_to_come = true;
		wire_error_set(err, WIRE_ERR_PROTOCOL, "ProtocolError",
		               "unknown opcode %d from client", r->h.opcode);
		return REQUEST_CLOSE;
	}
}

void request_release(request *r)
{
	free(r->inflated);
	r->inflated = NULL;
	r->plain = r->msg;
}

uint8_t *request_strip_compression(const request *r, size_t *out_len)
{
	if (!r->hello || r->inflated) /* never rewrite bytes we did not decode */
		return NULL;
	return handshake_strip_compression(r->plain, r->plain_len, &r->view, out_len);
}
