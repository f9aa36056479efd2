/* libFuzzer target: the input is one whole client message, decoded by the
 * request path the proxy uses (protocol/request.h), and every decoded
 * command goes through handshake handling and both fuzz engines. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocol/frame.h"
#include "protocol/handshake.h"
#include "protocol/opmsg.h"
#include "protocol/opquery.h"
#include "protocol/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A hello's rewrite must itself be a valid request of the same opcode with
 * the same command, without compression; a compressed one is never
 * rewritten. */
static void check_stripped(const request *r)
{
	size_t out_len = 0;
	uint8_t *out = request_strip_compression(r, &out_len);
	if (!out)
		return;
	if (r->inflated)
		abort();
	request r2;
	wire_error err = {0};
	if (request_decode(&r2, out, out_len, &err) != REQUEST_COMMAND || r2.opcode != r->opcode ||
	    strcmp(r2.view.name, r->view.name) != 0 || handshake_has_compression(&r2.view))
		abort();
	request_release(&r2);
	free(out);
}

static void analyse(const request *r)
{
	const cmdview *v = &r->view;
	if (r->hello) {
		char app[128];
		if (handshake_app_name(v, app, sizeof app) &&
		    strnlen(app, sizeof app) == sizeof app)
			abort();
		(void)handshake_has_compression(v);
		check_stripped(r);
	}
	fz_walk_docs(v);
	fz_analyze(v);
}

/* Inflating must rebuild a header consistent with the original opcode. */
static bool inflated_consistent(const request *r)
{
	frame_header ph;
	wire_error err = {0};
	return frame_header_parse(r->plain, r->plain_len, &ph, &err) == FRAME_OK &&
	       (size_t)ph.length == r->plain_len && ph.opcode == r->opcode;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	frame_header h;
	wire_error err = {0};
	if (frame_header_parse(data, size, &h, &err) != FRAME_OK || (size_t)h.length > size)
		return 0;
	/* The proxy hands decoders exactly h.length bytes; a private copy of
	 * that size lets ASan see any read past the message. */
	size_t len = (size_t)h.length;
	uint8_t *msg = malloc(len);
	if (!msg)
		return 0;
	memcpy(msg, data, len);
	/* The fuzzer cannot compute a CRC-32C: when the request ID is even,
	 * fix the checksum of an OP_MSG that claims one, so the paths behind it
	 * (the strip that must drop it) run; odd IDs keep testing mismatches. */
	if (h.opcode == OP_MSG && len >= 25 && (opmsg_peek_flags(msg) & OPMSG_CHECKSUM_PRESENT) &&
	    (h.request_id & 1) == 0)
		wire_write_i32(msg + len - 4, (int32_t)opmsg_crc32c(msg, len - 4));
	if (h.opcode == OP_REPLY) {
		opreply r;
		if (opreply_parse(msg, len, &r, &err) && r.docs_len > len)
			abort();
	} else {
		request r;
		if (request_decode(&r, msg, len, &err) == REQUEST_COMMAND) {
			if (r.inflated && !inflated_consistent(&r))
				abort();
			analyse(&r);
		}
		request_release(&r);
	}
	free(msg);
	return 0;
}
