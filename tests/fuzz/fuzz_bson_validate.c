/* libFuzzer target, differential: the input is one BSON document, judged by
 * wire_doc_validate() (protocol/wire_doc.c) and by libbson. Four properties,
 * abort() on any failing:
 *
 *  - what wire_doc_validate accepts, libbson's reader can walk to the last
 *    nested element (bson_iter_next / recurse / every accessor, each
 *    nested document or scope framed as bson_init_static wants it) with
 *    no iterator error and within WIRE_MAX_BSON_DEPTH levels, and ASan sees
 *    no read outside the input;
 *  - what libbson's reader can walk that way, wire_doc_validate accepts;
 *    and what bson_validate(BSON_VALIDATE_NONE) accepts, wire_doc_validate
 *    accepts too, unless the reader cannot walk it (bson_validate skips a
 *    nested document whose frame is bad without looking inside) or the
 *    document is nested deeper than the limit (bson_validate has none);
 *    and what wire_doc_validate accepts and bson_validate refuses has a
 *    key that is not UTF-8 (the one check dropped on purpose);
 *  - on what it accepts, the bare top-level passes agree with the
 *    iterator: wire_doc_keys gives its keys in order, wire_doc_find the
 *    element bson_iter_find lands on;
 *  - on anything, wire_iter_next / wire_iter_recurse (protocol/wire_iter.h)
 *    step exactly as bson_iter_next / bson_iter_recurse do: the same result
 *    and the same iterator state after every step, at every depth.
 *
 * The first four bytes are overwritten with the input's size, so the
 * fuzzer's time goes into elements rather than into the outer frame. The judge
 * is tests/fuzz/bson_walk.h, shared with the unit test. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "protocol/frame.h"
#include "protocol/wire_doc.h"
#include "tests/fuzz/bson_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5 || size > WIRE_MAX_BSON_LEN)
		return 0;
	/* an exact-size private copy: ASan sees any read past the input */
	uint8_t *doc = malloc(size);
	if (!doc)
		return 0;
	memcpy(doc, data, size);
	wire_write_i32(doc, (int32_t)size);
	if (!bw_iters_agree(doc, (uint32_t)size))
		abort();
	wire_error err = {0};
	bool ours = wire_doc_validate(doc, size, &err, "fuzz document");
	int readable = bw_walk_all(doc, size, 0);
	if (ours != (readable == 1))
		abort();
	/* bson_validate recurses without limit: deep inputs (readable == -1)
	 * are not handed to it */
	bson_t b;
	size_t off;
	bool theirs = readable != -1 && bson_init_static(&b, doc, size) &&
	              bson_validate(&b, BSON_VALIDATE_NONE, &off);
	if (theirs && !ours && readable != 0)
		abort();
	/* bson_validate also checked every key's UTF-8; nothing else may
	 * separate the two */
	if (ours && !theirs && readable == 1 && bw_keys_utf8(doc, size))
		abort();
	/* the bare top-level passes over what passed: wire_doc_keys names the
	 * keys libbson's iterator meets, in order, and wire_doc_find lands on
	 * the first element of each name, as bson_iter_find does */
	bson_iter_t it, first;
	if (ours && bson_init_static(&b, doc, size) && bson_iter_init(&it, &b)) {
		const char *keys[64];
		uint32_t lens[64];
		size_t n = 0, total = wire_doc_keys(doc, size, keys, lens, 64);
		while (bson_iter_next(&it)) {
			const char *k = bson_iter_key(&it);
			const uint8_t *e = wire_doc_find(doc, size, k, strlen(k));
			if ((n < 64 && (keys[n] != k || lens[n] != strlen(k))) ||
			    !bson_iter_init_find(&first, &b, k) || !e ||
			    (const char *)e + 1 != bson_iter_key(&first))
				abort();
			n++;
		}
		if (n != total)
			abort();
	}
	free(doc);
	return 0;
}
