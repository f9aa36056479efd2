/* libbson's reader as the judge of a BSON document, shared by the
 * differential unit test (tests/unit/test_protocol_wire_doc.c) and the
 * libFuzzer target (tests/fuzz/fuzz_bson_validate.c) of wire_doc_validate.
 *
 * bw_walk_all() walks everything with bson_iter_* and touches every byte
 * each accessor hands back (under ASan a read past the document fails). A
 * nested document or scope must frame like a bson_t would (length >= 5,
 * declared length consistent, last byte 0): bson_iter_recurse does not
 * check that itself, so a child with a bad frame would read as silently
 * cut short.
 *
 * bw_iters_agree() steps libbson's iterator and protocol/wire_iter.h's side
 * by side over any bytes, recursing as far as both go, and says whether
 * they were in the same state after every step; a wire_cur walks beside
 * them, and the iterator it makes must be the one both are in. Test-only
 * code. */
#ifndef MG_TESTS_FUZZ_BSON_WALK_H
#define MG_TESTS_FUZZ_BSON_WALK_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "protocol/frame.h"
#include "protocol/wire_doc.h"
#include "protocol/wire_iter.h"

static volatile unsigned bw_sink;

static void bw_touch(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		bw_sink += b[i];
}

/* 1: walked cleanly; 0: libbson's reader reports corruption or a bad
 * nested frame; -1: deeper than the limit. */
static int bw_walk_all(const uint8_t *p, size_t len, int depth)
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
		bw_touch(bson_iter_key(&it), strlen(bson_iter_key(&it)));
		switch (bson_iter_type(&it)) {
		case BSON_TYPE_DOCUMENT:
		case BSON_TYPE_ARRAY:
			if (BSON_ITER_HOLDS_DOCUMENT(&it))
				bson_iter_document(&it, &l, &d);
			else
				bson_iter_array(&it, &l, &d);
			if (!bson_iter_recurse(&it, &child))
				return 0;
			if ((r = bw_walk_all(d, l, depth + 1)) != 1)
				return r;
			break;
		case BSON_TYPE_UTF8:
			s = bson_iter_utf8(&it, &l);
			bw_touch(s, l + 1);
			break;
		case BSON_TYPE_CODE:
			s = bson_iter_code(&it, &l);
			bw_touch(s, l + 1);
			break;
		case BSON_TYPE_SYMBOL:
			s = bson_iter_symbol(&it, &l);
			bw_touch(s, l + 1);
			break;
		case BSON_TYPE_CODEWSCOPE:
			s = bson_iter_codewscope(&it, &l, &l2, &d);
			bw_touch(s, l + 1);
			if (s[l] != 0)
				return 0;
			if ((r = bw_walk_all(d, l2, depth + 1)) != 1)
				return r;
			break;
		case BSON_TYPE_REGEX:
			s = bson_iter_regex(&it, &s2);
			bw_touch(s, strlen(s));
			bw_touch(s2, strlen(s2));
			break;
		case BSON_TYPE_BINARY: {
			bson_subtype_t st;
			bson_iter_binary(&it, &st, &l, &d);
			bw_touch(d, l);
			break;
		}
		case BSON_TYPE_DBPOINTER: {
			const bson_oid_t *oid;
			bson_iter_dbpointer(&it, &l, &s, &oid);
			bw_touch(s, l + 1);
			bw_touch(oid, sizeof *oid);
			break;
		}
		default: {
			const bson_value_t *v = bson_iter_value(&it);
			bw_touch(v, sizeof *v);
		}
		}
	}
	return it.err_off == 0;
}

/* Every key, at any depth, is valid UTF-8. Only called on documents that
 * walked cleanly. */
static bool bw_keys_utf8(const uint8_t *p, size_t len)
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
			if (!bw_keys_utf8(d, l))
				return false;
		} else if (BSON_ITER_HOLDS_ARRAY(&it)) {
			bson_iter_array(&it, &l, &d);
			if (!bw_keys_utf8(d, l))
				return false;
		} else if (BSON_ITER_HOLDS_CODEWSCOPE(&it)) {
			bson_iter_codewscope(&it, &l, &l2, &d);
			if (!bw_keys_utf8(d, l2))
				return false;
		}
	}
	return true;
}

/* Every field libbson's accessors read (all but the value scratch). */
static bool bw_same_state(const bson_iter_t *a, const bson_iter_t *b)
{
	return a->raw == b->raw && a->len == b->len && a->off == b->off && a->type == b->type &&
	       a->key == b->key && a->d1 == b->d1 && a->d2 == b->d2 && a->d3 == b->d3 &&
	       a->d4 == b->d4 && a->next_off == b->next_off && a->err_off == b->err_off;
}

/* a (libbson) and b (wire_iter) start in the same state; both are stepped
 * to the end, each document or array both can enter entered (to a depth a
 * little past the limit). False at the first step whose results or states
 * differ. */
static bool bw_iters_agree_from(bson_iter_t *a, bson_iter_t *b, wire_cur *c, int depth)
{
	for (;;) {
		/* wire_iter_walk: the same step, or false where it could only end;
		 * a cursor's walk: the same, and the iterator it makes the same */
		bson_iter_t w = *b, cw;
		bool rw = wire_iter_walk(&w), rc = wire_cur_walk(c);
		bool ra = bson_iter_next(a), rb = wire_iter_next(b);
		if (ra != rb || !bw_same_state(a, b) || rw != rb || (rw && !bw_same_state(&w, b)))
			return false;
		if (rc != rw)
			return false;
		if (rc) {
			memset(&cw, 0x5a, sizeof cw);
			wire_cur_iter(c, &cw);
			if (!bw_same_state(&cw, b) || wire_cur_type(c) != bson_iter_type(a) ||
			    wire_cur_key(c) != bson_iter_key(a) ||
			    wire_cur_key_len(c) != strlen(bson_iter_key(a)))
				return false;
		}
		if (!ra)
			return true;
		if (wire_iter_type(b) != bson_iter_type(a) || wire_iter_key(b) != bson_iter_key(a))
			return false;
		if (depth > WIRE_MAX_BSON_DEPTH + 2)
			continue;
		bson_iter_t ca, cb;
		memset(&ca, 0xa5, sizeof ca); /* what recurse leaves alone must not matter */
		memcpy(&cb, &ca, sizeof cb);
		wire_cur cc;
		bool ea = bson_iter_recurse(a, &ca), eb = wire_iter_recurse(b, &cb);
		bool ec = wire_cur_recurse(c, &cc);
		if (ea != eb || (ea && !bw_same_state(&ca, &cb)) || ec != eb)
			return false;
		if (ec && (cc.raw != cb.raw || cc.len != cb.len || cc.next != cb.next_off))
			return false;
		if (ea && !bw_iters_agree_from(&ca, &cb, &cc, depth + 1))
			return false;
	}
}

/* p/len: any bytes, len >= 5; iterated as bson_iter_init would set up a
 * bson_t of them (nothing about the frame is required). */
static bool bw_iters_agree(const uint8_t *p, uint32_t len)
{
	bson_iter_t a, b;
	memset(&a, 0, sizeof a);
	a.raw = p;
	a.len = len;
	a.next_off = 4;
	b = a;
	wire_cur c;
	wire_cur_init_framed(&c, p, len);
	return bw_iters_agree_from(&a, &b, &c, 0);
}

#endif
