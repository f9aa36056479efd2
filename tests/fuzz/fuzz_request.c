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
#include "protocol/request_template.h"
#include "protocol/wire_doc.h"

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

/* The decoder's template (protocol/request_template.h): a message the
 * template takes must decode, with request_decode, to the same request
 * field by field. */
static void same_as_decoded(const request *t, const uint8_t *msg, size_t len)
{
	request r;
	wire_error err = {0};
	if (request_decode(&r, msg, len, &err) != REQUEST_COMMAND)
		abort(); /* the template took what the decoder refuses */
	bool same =
	    r.h.length == t->h.length && r.h.request_id == t->h.request_id &&
	    r.h.response_to == t->h.response_to && r.opcode == t->opcode && r.form == t->form &&
	    r.more_to_come == t->more_to_come && r.exhaust_allowed == t->exhaust_allowed &&
	    r.hello == t->hello && r.awaitable_hello == t->awaitable_hello && r.plain == t->plain &&
	    r.plain_len == t->plain_len && !r.inflated && r.m.flags == t->m.flags &&
	    r.m.body == t->m.body && r.m.body_len == t->m.body_len && r.m.nseqs == t->m.nseqs &&
	    r.view.db == t->view.db && r.view.name == t->view.name &&
	    bson_get_data(&r.view.body) == bson_get_data(&t->view.body) &&
	    r.view.body.len == t->view.body.len && r.view.nseqs == t->view.nseqs &&
	    r.view.flags == t->view.flags && r.view.ntop == t->view.ntop;
	for (size_t i = 0; same && i < r.view.ntop && i < CMDVIEW_TOP_KEYS; i++)
		same = r.view.top_keys[i] == t->view.top_keys[i] &&
		       r.view.top_lens[i] == t->view.top_lens[i];
	if (!same)
		abort(); /* the template's request differs from the decoded one */
	request_release(&r);
}

/* One template kept across inputs, as a connection keeps one across its
 * messages: whatever it takes must be what the decoder gives. Then, of a
 * command: a template of it alone, and the message with every byte of its
 * body's fixed-size values changed, which that template must take. */
static request_template *fz_conn_template;

static void check_templates(const uint8_t *msg, size_t len)
{
	request t;
	if (request_decode_repeat(&t, msg, len, fz_conn_template)) {
		same_as_decoded(&t, msg, len);
		request_release(&t);
	}
	request r;
	wire_error err = {0};
	if (request_decode(&r, msg, len, &err) != REQUEST_COMMAND) {
		request_release(&r);
		return;
	}
	request_template_keep(&fz_conn_template, &r);
	request_template *own = NULL;
	request_template_keep(&own, &r);
	byte_spans sp = {.base = msg, .n = 0, .full = false};
	if (own && r.opcode == OP_MSG && !r.inflated &&
	    wire_doc_fixed_spans(r.m.body, r.m.body_len, &sp)) {
		uint8_t *mut = malloc(len);
		if (mut) {
			memcpy(mut, msg, len);
			for (uint32_t i = 0; i < sp.n; i++)
				for (uint32_t k = 0; k < sp.s[i].len; k++)
					mut[sp.s[i].at + k] ^= 0xa5;
			uint64_t before = request_template_hits(own);
			if (request_decode_repeat(&t, mut, len, own)) {
				same_as_decoded(&t, mut, len);
				request_release(&t);
			} else if (before == 0 && request_template_hits(own) == 0 &&
			           request_decode_repeat(&t, msg, len, own)) {
				abort(); /* it takes the message, not its values changed */
			}
			free(mut);
		}
	}
	request_template_free(own);
	request_release(&r);
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
		check_templates(msg, len);
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
