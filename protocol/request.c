/* The request path: which opcode becomes which command view, which reply
 * form, and which requests a 5.1+ server would refuse (PROTOCOL.md,
 * "Framing"). */
#include "protocol/request.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/compress.h"
#include "protocol/handshake.h"

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

static request_status command(request *r)
{
	r->hello = cmdview_is_hello(&r->view);
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
	return command(r);
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
	return command(r);
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
