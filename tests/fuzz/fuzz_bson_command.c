/* libFuzzer target: the input is a BSON command body, optionally followed by
 * raw OP_MSG sections (kind-1 sequences). The body gets "$db": "test"
 * appended unless it has a $db, is wrapped into an OP_MSG by opmsg_build,
 * and goes through the same parse + analysis as a real request. Starting
 * from a document instead of a frame gets the fuzzer to the analyzers'
 * deep paths (filters, updates, pipelines, sorts) much sooner. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocol/frame.h"
#include "protocol/opmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5)
		return 0;
	uint32_t doc_len = wire_read_u32(data);
	if (doc_len < 5 || doc_len > size || doc_len > WIRE_MAX_BSON_LEN)
		return 0;
	bson_t in;
	if (!bson_init_static(&in, data, doc_len))
		return 0;
	bson_t *body = bson_copy(&in);
	if (!body)
		return 0;
	if (!bson_has_field(body, "$db"))
		BSON_APPEND_UTF8(body, "$db", "test");
	size_t len = 0;
	uint8_t *msg = opmsg_build(1, 0, 0, bson_get_data(body), body->len, &len);
	bson_destroy(body);
	if (!msg)
		return 0;
	size_t rest = size - doc_len;
	if (rest) {
		uint8_t *grown = realloc(msg, len + rest);
		if (!grown) {
			free(msg);
			return 0;
		}
		msg = grown;
		memcpy(msg + len, data + doc_len, rest);
		len += rest;
		wire_write_i32(msg, (int32_t)len);
	}
	opmsg m;
	cmdview v;
	wire_error err = {0};
	if (opmsg_parse(msg, len, &m, &err) && cmdview_from_opmsg(&m, &v, &err)) {
		cmdview_docs d;
		bson_t doc;
		static const char *const fields[] = {"documents", "updates", "deletes", "ops",
		                                     "nsInfo"};
		for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
			cmdview_docs_init(&d, &v, fields[i]);
			while (cmdview_docs_next(&d, &doc))
				(void)bson_count_keys(&doc);
		}
		fz_analyze(&v);
	}
	free(msg);
	return 0;
}
