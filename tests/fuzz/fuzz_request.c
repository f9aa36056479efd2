/* libFuzzer target: the input is one whole client message, decoded the way
 * proxy/session.c decodes it (frame header, then by opcode), and every
 * decoded command goes through handshake handling and both fuzz engines. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocol/compress.h"
#include "protocol/frame.h"
#include "protocol/handshake.h"
#include "protocol/opmsg.h"
#include "protocol/opquery.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A hello's rewrite must itself be a valid message of the same opcode with
 * the same command, without compression. */
static void check_stripped(const uint8_t *msg, size_t len, const cmdview *v)
{
	size_t out_len = 0;
	uint8_t *out = handshake_strip_compression(msg, len, v, &out_len);
	if (!out)
		return;
	frame_header h;
	wire_error err = {0};
	if (frame_header_parse(out, out_len, &h, &err) != FRAME_OK || (size_t)h.length != out_len)
		abort();
	cmdview v2;
	if (h.opcode == OP_MSG) {
		opmsg m;
		if (!opmsg_parse(out, out_len, &m, &err) || !cmdview_from_opmsg(&m, &v2, &err))
			abort();
		if (strcmp(v2.name, v->name) != 0 || handshake_has_compression(&v2))
			abort();
	} else if (h.opcode == OP_QUERY) {
		opquery q;
		if (!opquery_parse(out, out_len, &q, &err) || !cmdview_from_opquery(&q, &v2, &err))
			abort();
		if (strcmp(v2.name, v->name) != 0 || handshake_has_compression(&v2))
			abort();
	} else {
		abort();
	}
	free(out);
}

static void analyse(const uint8_t *msg, size_t len, const cmdview *v, bool may_rewrite)
{
	if (cmdview_is_hello(v)) {
		char app[128];
		if (handshake_app_name(v, app, sizeof app) &&
		    strnlen(app, sizeof app) == sizeof app)
			abort();
		(void)handshake_has_compression(v);
		if (may_rewrite)
			check_stripped(msg, len, v);
	}
	/* the iterator the rules use on kind-1 sequences and body arrays */
	static const char *const fields[] = {"documents", "updates", "deletes", "ops", "nsInfo"};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
		cmdview_docs d;
		bson_t doc;
		cmdview_docs_init(&d, v, fields[i]);
		while (cmdview_docs_next(&d, &doc))
			(void)bson_count_keys(&doc);
	}
	fz_analyze(v);
}

static void decode(const uint8_t *msg, size_t len, int32_t opcode, bool may_rewrite)
{
	wire_error err = {0};
	cmdview v;
	if (opcode == OP_MSG) {
		opmsg m;
		if (len >= 20)
			(void)opmsg_peek_flags(msg);
		if (opmsg_parse(msg, len, &m, &err) && cmdview_from_opmsg(&m, &v, &err))
			analyse(msg, len, &v, may_rewrite);
	} else if (opcode == OP_QUERY) {
		opquery q;
		if (opquery_parse(msg, len, &q, &err) && opquery_is_command(&q) &&
		    cmdview_from_opquery(&q, &v, &err))
			analyse(msg, len, &v, may_rewrite);
	}
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
	switch (h.opcode) {
	case OP_MSG:
	case OP_QUERY:
		decode(msg, len, h.opcode, true);
		break;
	case OP_COMPRESSED: {
		compressed_msg c;
		uint8_t *plain = NULL;
		size_t plain_len = 0;
		if (compress_parse(msg, len, &c, &err) &&
		    compress_inflate(&c, &plain, &plain_len, &err)) {
			frame_header ph;
			if (frame_header_parse(plain, plain_len, &ph, &err) != FRAME_OK ||
			    (size_t)ph.length != plain_len || ph.opcode != c.original_opcode)
				abort(); /* inflate must rebuild a consistent header */
			decode(plain, plain_len, c.original_opcode, false);
			free(plain);
		}
		break;
	}
	case OP_REPLY: {
		opreply r;
		if (opreply_parse(msg, len, &r, &err) && r.docs_len > len)
			abort();
		break;
	}
	default:
		break;
	}
	free(msg);
	return 0;
}
