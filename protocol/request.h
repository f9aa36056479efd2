/* The request path: one whole client message in, everything the proxy needs
 * to decide about it out. Shared by the live session, the fuzz targets and
 * the offline report, so each of them decodes a request the same way.
 *
 * request_decode() frames nothing and does no I/O: it takes exactly one
 * message (header included, as long as its header says) and answers with
 * what kind of request it is:
 *
 *   REQUEST_COMMAND  a command mongoguard analyses and then forwards: the
 *                    command view is valid, and so are the handshake facts;
 *   REQUEST_REJECT   a request that gets an error reply instead of being
 *                    forwarded (undecodable, or refused the way a 5.1+
 *                    server refuses it); err says why;
 *   REQUEST_CLOSE    a request that allows no reply and is not forwarded
 *                    (legacy write opcodes, an unknown opcode): the only
 *                    clear answer is closing the connection; err says why.
 *
 * A REJECT whose request has moreToCome allows no reply either: the caller
 * closes then too. The form of the reply (OP_MSG or OP_REPLY) and the
 * moreToCome / exhaustAllowed bits are known for every outcome, as far as
 * the bytes allow.
 *
 * The request points into the caller's message (and into its own inflated
 * copy of an OP_COMPRESSED one): it lives as long as that buffer and until
 * request_release(). Never copy a request by value (the view inside points
 * at itself). */
#ifndef MG_PROTOCOL_REQUEST_H
#define MG_PROTOCOL_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/cmdview.h"
#include "protocol/commands.h"
#include "protocol/frame.h"
#include "protocol/opmsg.h"
#include "protocol/opquery.h"
#include "protocol/reply.h"
#include "protocol/wire_error.h"

/* mongod's code for the legacy opcodes removed in 5.1. */
#define REQUEST_ERR_LEGACY_OPCODE 5739101

typedef enum {
	REQUEST_COMMAND,
	REQUEST_REJECT,
	REQUEST_CLOSE,
} request_status;

typedef struct request {
	frame_header h;     /* of the message as received */
	const uint8_t *msg; /* as received (possibly OP_COMPRESSED) */
	size_t len;
	int32_t opcode;    /* the decoded opcode: an OP_COMPRESSED's original one */
	reply_form form;   /* how an answer of mongoguard's must be framed */
	bool more_to_come; /* no reply will ever be wanted */
	bool exhaust_allowed;
	bool legacy_opcode;   /* refused because the opcode was removed in 5.1 */
	bool hello;           /* REQUEST_COMMAND: hello / isMaster / ismaster */
	bool awaitable_hello; /* ... with maxAwaitTimeMS: the reply may take seconds */
	cmd_id cmd;           /* REQUEST_COMMAND: cmd_find(view.name), looked up once */

	cmdview view; /* REQUEST_COMMAND only */

	/* The decoded message the view points into: msg itself, or the
	 * inflated copy of an OP_COMPRESSED one (owned). */
	const uint8_t *plain;
	size_t plain_len;
	uint8_t *inflated;
	opmsg m;
	opquery q;
} request;

/* msg/len: one whole message, len equal to its header's length (framed by
 * the caller with frame_header_parse). err is set for REJECT and CLOSE. */
request_status request_decode(request *r, const uint8_t *msg, size_t len, wire_error *err)
    __attribute__((warn_unused_result));

/* Frees what request_decode() allocated (an inflated copy). Safe on a
 * request whatever its status. */
void request_release(request *r);

/* For a hello carrying `compression`, the message to forward instead: a
 * malloc'd copy without that field (see handshake.h for why), its length in
 * *out_len. NULL when there is nothing to strip, when the request was
 * compressed (bytes mongoguard did not decode itself are never rewritten),
 * or when memory ran out. */
uint8_t *request_strip_compression(const request *r, size_t *out_len);

#endif
