/* libFuzzer target, differential: the input is one BSON document, judged by
 * wire_doc_validate() (protocol/wire_doc.c) and by libbson. Two properties,
 * abort() on either failing:
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
 *    key that is not UTF-8 (the one check dropped on purpose).
 *
 * The first four bytes are overwritten with the input's size, so the
 * fuzzer's time goes into elements rather than into the outer frame. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "protocol/frame.h"
#include "protocol/wire_doc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;

static void touch(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		sink += b[i];
}

/* 1: walked cleanly; 0: libbson's reader reports corruption or a bad
 * nested frame; -1: deeper than the limit. */
static int walk_all(const uint8_t *p, size_t len, int depth)
{
	bson_iter_t it, child;
	if (depth > WIRE_MAX_BSON_DEPTH)
		return -1;
	if (len < 5 || wire_read_u32(p) != len || p[len - 1] != 0 ||
	    !bson_iter_init_from_data(&it, p, len))
		return 0;
	while (bson_iter_next(&it)) {
		uint32_t l = 0, l2 = 0;
		const uint8_t *d = NULL;
		const char *s = NULL, *s2 = NULL;
		int r;
		touch(bson_iter_key(&it), strlen(bson_iter_key(&it)));
		switch (bson_iter_type(&it)) {
		case BSON_TYPE_DOCUMENT:
		case BSON_TYPE_ARRAY:
			if (BSON_ITER_HOLDS_DOCUMENT(&it))
				bson_iter_document(&it, &l, &d);
			else
				bson_iter_array(&it, &l, &d);
			if (!bson_iter_recurse(&it, &child))
				return 0;
			if ((r = walk_all(d, l, depth + 1)) != 1)
				return r;
			break;
		case BSON_TYPE_UTF8:
			s = bson_iter_utf8(&it, &l);
			touch(s, l + 1);
			break;
		case BSON_TYPE_CODE:
			s = bson_iter_code(&it, &l);
			touch(s, l + 1);
			break;
		case BSON_TYPE_SYMBOL:
			s = bson_iter_symbol(&it, &l);
			touch(s, l + 1);
			break;
		case BSON_TYPE_CODEWSCOPE:
			s = bson_iter_codewscope(&it, &l, &l2, &d);
			touch(s, l + 1);
			if (s[l] != 0)
				return 0;
			if ((r = walk_all(d, l2, depth + 1)) != 1)
				return r;
			break;
		case BSON_TYPE_REGEX:
			s = bson_iter_regex(&it, &s2);
			touch(s, strlen(s));
			touch(s2, strlen(s2));
			break;
		case BSON_TYPE_BINARY: {
			bson_subtype_t st;
			bson_iter_binary(&it, &st, &l, &d);
			touch(d, l);
			break;
		}
		case BSON_TYPE_DBPOINTER: {
			const bson_oid_t *oid;
			bson_iter_dbpointer(&it, &l, &s, &oid);
			touch(s, l + 1);
			touch(oid, sizeof *oid);
			break;
		}
		default: {
			const bson_value_t *v = bson_iter_value(&it);
			touch(v, sizeof *v);
		}
		}
	}
	return it.err_off == 0;
}

/* Every key, at any depth, is valid UTF-8. Only called on documents that
 * walked cleanly. */
static bool keys_utf8(const uint8_t *p, size_t len)
{
	bson_iter_t it;
	if (!bson_iter_init_from_data(&it, p, len))
		return false;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		uint32_t l, l2;
		const uint8_t *d;
		if (!bson_utf8_validate(k, strlen(k), false))
			return false;
		if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
			bson_iter_document(&it, &l, &d);
			if (!keys_utf8(d, l))
				return false;
		} else if (BSON_ITER_HOLDS_ARRAY(&it)) {
			bson_iter_array(&it, &l, &d);
			if (!keys_utf8(d, l))
				return false;
		} else if (BSON_ITER_HOLDS_CODEWSCOPE(&it)) {
			bson_iter_codewscope(&it, &l, &l2, &d);
			if (!keys_utf8(d, l2))
				return false;
		}
	}
	return true;
}

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
	wire_error err = {0};
	bool ours = wire_doc_validate(doc, size, &err, "fuzz document");
	int readable = walk_all(doc, size, 0);
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
	if (ours && !theirs && readable == 1 && keys_utf8(doc, size))
		abort();
	free(doc);
	return 0;
}
