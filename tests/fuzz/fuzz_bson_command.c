/* libFuzzer target: the input is a BSON command body, optionally followed by
 * raw OP_MSG sections (kind-1 sequences), made into an OP_MSG by
 * fz_body_view (fuzz_common.h) and put through the same parse + analysis as
 * a real request. Starting from a document instead of a frame gets the
 * fuzzer to the analyzers' deep paths (filters, updates, pipelines, sorts)
 * much sooner. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	opmsg m;
	cmdview v;
	uint8_t *msg = fz_body_view(data, size, &m, &v);
	if (msg) {
		fz_walk_docs(&v);
		fz_analyze(&v);
	}
	free(msg);
	return 0;
}
