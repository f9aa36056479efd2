/* libbson's iterator, stepped without libbson's call overhead.
 *
 * Every analyzer reads BSON with bson_iter_t, and walks a find's body, its
 * filter and each update statement several times over (once per rule).
 * bson_iter_next is a call through the PLT into a wrapper, a call into the
 * decoder, a byte loop for the key and assertions; bson_iter_type and
 * bson_iter_key are calls too. Together they are a large share of what
 * analysing an update statement costs (tests/bench/README.md).
 *
 * wire_iter_next() is a drop-in for bson_iter_next() and
 * wire_iter_recurse() for bson_iter_recurse(): the same checks on the same
 * bytes, in the same order, leaving the bson_iter_t in the same state
 * (every offset, err_off included), so every other bson_iter_* call reads
 * what it would have read, and a corrupt element ends the walk exactly
 * where libbson ends it. They are safe on any bytes libbson's are: nothing
 * here assumes the document passed wire_doc_validate (update statements
 * and other kind-1 documents are only framed).
 *
 * This writes bson_iter_t's fields, which libbson documents as private;
 * the layout has not changed since libbson 1.0. The equivalence is not
 * taken on trust: tests/unit/test_protocol_wire_doc.c and
 * fuzz_bson_validate step both iterators side by side over every input
 * and abort on the first field that differs, against the libbson the
 * build links. If a libbson release changes what its iterator does, those
 * fail, not the analyzers. */
#ifndef MG_PROTOCOL_WIRE_ITER_H
#define MG_PROTOCOL_WIRE_ITER_H

#include <bson/bson.h>
#include <stdbool.h>
#include <string.h>

/* The whole step, out of line: every type, every check. */
bool wire_iter_next_any(bson_iter_t *iter);

/* One more than the bytes a value of a fixed-size type takes after its
 * key; 0 for the other types, the end of a document and unknown types. */
extern const uint8_t wire_iter_fixed_plus_one[256];

/* The offset of the first 0x00 in raw[o, len), or len when there is none,
 * or o itself when o >= len (a nested document whose length prefix claims
 * fewer than five bytes starts its walk past its end): a key's end. A word
 * at a time while eight bytes are left, since a byte loop cost six
 * instructions a byte of every key and most keys fit in one word; the
 * lowest flagged byte of a word is its first 0x00 (a false flag only
 * follows a true one, in higher bytes), so only on little-endian machines;
 * the rest a byte at a time. */
static inline __attribute__((always_inline)) uint32_t wire_nul_from(const uint8_t *raw, uint32_t o,
                                                                    uint32_t len)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	while (o < len && len - o >= 8) {
		uint64_t w;
		memcpy(&w, raw + o, sizeof w);
		uint64_t zero = (w - 0x0101010101010101u) & ~w & 0x8080808080808080u;
		if (zero)
			return o + (uint32_t)(__builtin_ctzll(zero) >> 3);
		o += 8;
	}
#endif
	while (o < len && raw[o])
		o++;
	return o;
}

/* As bson_iter_next(iter). Inline for what filters and updates are mostly
 * made of (fixed-size values, strings, documents, arrays) and for the end
 * of a document, where a call was a third of the cost of a step; anything else,
 * and anything that fails a check, takes the whole step from the start
 * (nothing is written before it), so the iterator ends in the same state
 * either way. */
static inline __attribute__((always_inline)) bool wire_iter_next(bson_iter_t *it)
{
	const uint8_t *raw = it->raw;
	if (!raw)
		return false;
	uint32_t len = it->len, at = it->next_off; /* at < len after any step */
	uint8_t type = raw[at];
	if (type == 0 && at + 1 == len) { /* the end, as wire_iter_next_any ends */
		it->off = it->type = at;
		it->key = at + 1;
		it->d1 = it->d2 = it->d3 = it->d4 = 0;
		it->raw = NULL;
		it->len = 0;
		it->next_off = 0;
		return false;
	}
	uint32_t fixed = wire_iter_fixed_plus_one[type];
	if (!fixed && type != BSON_TYPE_DOCUMENT && type != BSON_TYPE_ARRAY &&
	    type != BSON_TYPE_UTF8)
		return wire_iter_next_any(it);
	uint32_t o = wire_nul_from(raw, at + 1, len);
	if (o >= len)
		return wire_iter_next_any(it);
	o++;
	uint32_t next, d2 = 0;
	if (fixed) {
		next = o + fixed - 1u;
	} else if (type == BSON_TYPE_UTF8) { /* libbson's checks, as wire_iter_next_any's */
		uint32_t l;
		if (o + 4 >= len)
			return wire_iter_next_any(it);
		memcpy(&l, raw + o, sizeof l);
		l = BSON_UINT32_FROM_LE(l);
		if (l > len - (o + 4))
			return wire_iter_next_any(it);
		next = o + 4 + l;
		if (l == 0 || next >= len || raw[next - 1] != 0)
			return wire_iter_next_any(it);
		d2 = o + 4;
	} else {
		uint32_t l;
		if (o >= len - 4)
			return wire_iter_next_any(it);
		memcpy(&l, raw + o, sizeof l);
		l = BSON_UINT32_FROM_LE(l);
		if (l > len || l > len - o)
			return wire_iter_next_any(it);
		next = o + l;
	}
	if (next >= len)
		return wire_iter_next_any(it);
	it->off = it->type = at;
	it->key = at + 1;
	it->d1 = o;
	it->d2 = d2;
	it->d3 = it->d4 = 0;
	it->next_off = next;
	it->err_off = 0;
	return true;
}

/* As wire_iter_next(it), for a walk whose iterator is not read once this
 * says false: on the last element of its document (the next step could
 * only end the walk: there is one byte left, its terminator, or a key
 * with no room), false without stepping, the iterator left on that
 * element instead of ended. A walk then costs one step per element, not
 * one more for the end. tests/fuzz/bson_walk.h checks it against
 * wire_iter_next wherever that one is checked against libbson. */
static inline __attribute__((always_inline)) bool wire_iter_walk(bson_iter_t *it)
{
	return it->next_off + 1 != it->len && wire_iter_next(it);
}

/* An iterator before the first element of data/len, which is framed
 * already (its length prefix is len, its last byte 0). */
static inline void wire_iter_init_framed(bson_iter_t *iter, const uint8_t *data, uint32_t len)
{
	iter->raw = data;
	iter->len = len;
	iter->off = iter->type = iter->key = 0;
	iter->d1 = iter->d2 = iter->d3 = iter->d4 = 0;
	iter->next_off = 4;
	iter->err_off = 0;
}

/* As bson_init_static(&b, data, len) followed by bson_iter_init(iter, &b):
 * false when the view could not be made (fewer than 5 bytes, a length
 * prefix that is not len, a last byte that is not 0). Inline: on every
 * statement of a batch. */
static inline bool wire_iter_init_raw(bson_iter_t *iter, const uint8_t *data, uint32_t len)
{
	uint32_t n;
	if (len < 5)
		return false;
	memcpy(&n, data, sizeof n);
	if (BSON_UINT32_FROM_LE(n) != len || data[len - 1] != 0)
		return false;
	wire_iter_init_framed(iter, data, len);
	return true;
}

/* As bson_iter_recurse(iter, child). Inline: every level of every
 * filter and update is entered through it, and inlined, the stores its
 * first step overwrites go. */
/* The document or array whose type byte is at raw[at] and whose value
 * starts at raw[val]: its bytes and its length prefix; false for any
 * other type. What each recurse below (iterator or cursor) enters. */
static inline __attribute__((always_inline)) bool
wire_child_of(const uint8_t *raw, uint32_t at, uint32_t val, const uint8_t **data, uint32_t *len)
{
	uint8_t type = raw[at];
	if (type != BSON_TYPE_DOCUMENT && type != BSON_TYPE_ARRAY)
		return false;
	memcpy(len, raw + val, sizeof *len);
	*len = BSON_UINT32_FROM_LE(*len);
	*data = raw + val;
	return true;
}

static inline __attribute__((always_inline)) bool wire_iter_recurse(const bson_iter_t *it,
                                                                    bson_iter_t *child)
{
	const uint8_t *data;
	uint32_t len;
	if (!wire_child_of(it->raw, it->type, it->d1, &data, &len))
		return false;
	wire_iter_init_framed(child, data, len);
	return true;
}

/* As bson_iter_type(iter), inline: the type byte of the element iter is on
 * (iter must be on one, as libbson requires). The analyzers ask it of
 * nearly every element they meet, through these macros, libbson's
 * BSON_ITER_HOLDS_* with the same meaning. */
static inline bson_type_t wire_iter_type(const bson_iter_t *iter)
{
	return (bson_type_t)iter->raw[iter->type];
}

/* As bson_iter_key(iter), inline. */
static inline const char *wire_iter_key(const bson_iter_t *iter)
{
	return (const char *)(iter->raw + iter->key);
}

/* strlen(wire_iter_key(iter)), without the loop: the step that put iter
 * on its element (this file's or libbson's) found the key's NUL, and the
 * value starts after it (d1). */
static inline uint32_t wire_iter_key_len(const bson_iter_t *iter)
{
	return iter->d1 - iter->key - 1;
}

/* ---- wire_cur: the same walk, without the bson_iter_t ----
 *
 * A hot walk that reads only an element's type, key and value offset (a
 * statement's keys, a filter's members, an update's operators) need not
 * keep libbson's iterator: wire_iter_next stores nine fields a step, and
 * a position kept as a bson_iter_t is an 80-byte copy. A cursor is the
 * three offsets those walks read, in 24 bytes; a step stores three.
 *
 * It steps exactly as wire_iter_walk does (the same checks, in the same
 * order, over the same bytes: a type the inline step does not take goes
 * through wire_iter_next_any), so a walk on a cursor visits the elements
 * an iterator's walk visits and stops where it stops. wire_cur_iter
 * makes, from a cursor on an element, the very bson_iter_t wire_iter_next
 * left on it, for a reader that needs one (a rule's check, a shape).
 * tests/fuzz/bson_walk.h steps a cursor beside both iterators, over every
 * input the iterators are checked on. */
typedef struct wire_cur {
	const uint8_t *raw; /* the document walked: its first byte */
	uint32_t len;       /* its length (the iterator's len) */
	uint32_t at;        /* the element's type byte (off); 0 before the first */
	uint32_t val;       /* its value's first byte (d1) */
	uint32_t next;      /* the next element's type byte (next_off) */
} wire_cur;

/* A cursor before the first element of data/len, framed already. */
static inline void wire_cur_init_framed(wire_cur *c, const uint8_t *data, uint32_t len)
{
	c->raw = data;
	c->len = len;
	c->at = c->val = 0;
	c->next = 4;
}

/* The cursor of it, an iterator on an element or before the first (as
 * bson_iter_init or wire_iter_recurse leave one): it walks on from there. */
static inline void wire_cur_of_iter(wire_cur *c, const bson_iter_t *it)
{
	c->raw = it->raw;
	c->len = it->len;
	c->at = it->off;
	c->val = it->d1;
	c->next = it->next_off;
}

/* The step of a type the inline one does not take (or that fails one of
 * its checks), as wire_iter_next_any takes it, from the element at `at`
 * of raw/len: ok, and where it put the element, its value and the next.
 * Returned by value, not through the cursor, so that a walk's cursor
 * need not live in memory for it. */
typedef struct wire_cur_step {
	uint32_t ok, at, val, next;
} wire_cur_step;

wire_cur_step wire_cur_step_any(const uint8_t *raw, uint32_t len, uint32_t at);

static inline __attribute__((always_inline)) bool wire_cur_step_slow(wire_cur *c)
{
	wire_cur_step r = wire_cur_step_any(c->raw, c->len, c->next);
	if (!r.ok)
		return false;
	c->at = r.at;
	c->val = r.val;
	c->next = r.next;
	return true;
}

/* wire_cur_walk's class of a type byte: its fixed value's bytes plus one
 * (as wire_iter_fixed_plus_one), WIRE_CUR_DOC for a document or an array,
 * WIRE_CUR_STR for a string, 0 for a type the inline step does not take.
 * One load and one test where three compares were. */
#define WIRE_CUR_DOC 0x40u
#define WIRE_CUR_STR 0x80u
extern const uint8_t wire_cur_class[256];

/* As wire_iter_walk(it) on the iterator c stands for: false on the last
 * element (left on it) and where a step fails (left where it was); a
 * cursor that said false is not stepped again. */
static inline __attribute__((always_inline)) bool wire_cur_walk(wire_cur *c)
{
	const uint8_t *raw = c->raw;
	uint32_t len = c->len, at = c->next;
	/* at + 1 == len: the last element's step (wire_iter_walk's test);
	 * past it (a nested document whose prefix claims under five bytes),
	 * a step finds no key's end before len and fails, so the key scan
	 * below may take o < len */
	if (at + 1 >= len)
		return false;
	uint32_t k = wire_cur_class[raw[at]];
	if (!k)
		return wire_cur_step_slow(c);
	/* the key's NUL, a word at a time while one fits before len (o <=
	 * len after each: no wrap); found in a word, it is before len */
	uint32_t o = at + 1;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	while (len - o >= 8) {
		uint64_t w;
		memcpy(&w, raw + o, sizeof w);
		uint64_t zero = (w - 0x0101010101010101u) & ~w & 0x8080808080808080u;
		if (zero) {
			o += (uint32_t)(__builtin_ctzll(zero) >> 3);
			goto key_ended;
		}
		o += 8;
	}
#endif
	while (o < len && raw[o])
		o++;
	if (o >= len)
		return wire_cur_step_slow(c);
key_ended:
	o++;
	/* wire_iter_next's checks, each branch's folded with the last one
	 * (the next element starts inside the document): what passes here
	 * passes all of them, and anything else takes the whole step again */
	uint32_t next;
	if (k < WIRE_CUR_DOC) {
		next = o + k - 1u;
		if (next >= len)
			return wire_cur_step_slow(c);
	} else if (k == WIRE_CUR_STR) {
		uint32_t l;
		if (o + 4 >= len)
			return wire_cur_step_slow(c);
		memcpy(&l, raw + o, sizeof l);
		l = BSON_UINT32_FROM_LE(l);
		if (l > len - (o + 4))
			return wire_cur_step_slow(c);
		next = o + 4 + l;
		if (l == 0 || next >= len || raw[next - 1] != 0)
			return wire_cur_step_slow(c);
	} else {
		/* o is at least 6 (a key after a 4-byte length), so len - 4
		 * does not wrap; with o < len - 4, l < len - o is l <= len,
		 * l <= len - o and o + l < len at once */
		uint32_t l;
		if (o >= len - 4)
			return wire_cur_step_slow(c);
		memcpy(&l, raw + o, sizeof l);
		l = BSON_UINT32_FROM_LE(l);
		if (l >= len - o)
			return wire_cur_step_slow(c);
		next = o + l;
	}
	c->at = at;
	c->val = o;
	c->next = next;
	return true;
}

static inline bson_type_t wire_cur_type(const wire_cur *c)
{
	return (bson_type_t)c->raw[c->at];
}

static inline const char *wire_cur_key(const wire_cur *c)
{
	return (const char *)(c->raw + c->at + 1);
}

/* strlen(wire_cur_key(c)): the key's NUL is right before the value. */
static inline uint32_t wire_cur_key_len(const wire_cur *c)
{
	return c->val - c->at - 2;
}

/* As wire_iter_recurse on the iterator c stands for: a cursor before the
 * first element of the document or array c is on. */
static inline __attribute__((always_inline)) bool wire_cur_recurse(const wire_cur *c,
                                                                   wire_cur *child)
{
	const uint8_t *data;
	uint32_t len;
	if (!wire_child_of(c->raw, c->at, c->val, &data, &len))
		return false;
	wire_cur_init_framed(child, data, len);
	return true;
}

/* The same, from an iterator on a document or array (as wire_iter_recurse). */
static inline __attribute__((always_inline)) bool wire_cur_recurse_iter(const bson_iter_t *it,
                                                                        wire_cur *child)
{
	const uint8_t *data;
	uint32_t len;
	if (!wire_child_of(it->raw, it->type, it->d1, &data, &len))
		return false;
	wire_cur_init_framed(child, data, len);
	return true;
}

/* The bson_iter_t wire_iter_next left on the element c is on (c must be
 * on one). Where wire_iter_next_any puts a type's offsets is known from
 * the value's start for all but three types (wire_iter.c); those are
 * stepped onto again, from where the iterator stood before them. */
void wire_cur_iter_any(const wire_cur *c, bson_iter_t *it);

static inline __attribute__((always_inline)) void wire_cur_iter(const wire_cur *c, bson_iter_t *it)
{
	uint8_t type = c->raw[c->at];
	uint32_t d2 = 0, d3 = 0;
	if (type == BSON_TYPE_DOCUMENT || type == BSON_TYPE_ARRAY ||
	    wire_iter_fixed_plus_one[type] || type == BSON_TYPE_BOOL) {
		/* nothing past d1 */
	} else if (type == BSON_TYPE_UTF8 || type == BSON_TYPE_CODE || type == BSON_TYPE_SYMBOL) {
		d2 = c->val + 4; /* the string, after its length */
	} else if (type == BSON_TYPE_BINARY) {
		d2 = c->val + 4; /* the subtype */
		d3 = c->val + 5; /* the bytes */
	} else { /* a regex, a DBPointer, code with scope: offsets found by a scan */
		wire_cur_iter_any(c, it);
		return;
	}
	it->raw = c->raw;
	it->len = c->len;
	it->off = it->type = c->at;
	it->key = c->at + 1;
	it->d1 = c->val;
	it->d2 = d2;
	it->d3 = d3;
	it->d4 = 0;
	it->next_off = c->next;
	it->err_off = 0;
}

/* As wire_iter_doc_view on the iterator c stands for. */
static inline bool wire_cur_doc_view(const wire_cur *c, bson_t *out)
{
	uint32_t len;
	if (wire_cur_type(c) != BSON_TYPE_DOCUMENT)
		return false;
	memcpy(&len, c->raw + c->val, sizeof len);
	return bson_init_static(out, c->raw + c->val, BSON_UINT32_FROM_LE(len));
}

#define WIRE_ITER_HOLDS_DOCUMENT(iter) (wire_iter_type(iter) == BSON_TYPE_DOCUMENT)
#define WIRE_ITER_HOLDS_ARRAY(iter)    (wire_iter_type(iter) == BSON_TYPE_ARRAY)
#define WIRE_ITER_HOLDS_UTF8(iter)     (wire_iter_type(iter) == BSON_TYPE_UTF8)
#define WIRE_ITER_HOLDS_REGEX(iter)    (wire_iter_type(iter) == BSON_TYPE_REGEX)
#define WIRE_ITER_HOLDS_BOOL(iter)     (wire_iter_type(iter) == BSON_TYPE_BOOL)
#define WIRE_ITER_HOLDS_BINARY(iter)   (wire_iter_type(iter) == BSON_TYPE_BINARY)
#define WIRE_ITER_HOLDS_INT(iter)                                                                  \
	(wire_iter_type(iter) == BSON_TYPE_INT32 || wire_iter_type(iter) == BSON_TYPE_INT64)
#define WIRE_ITER_HOLDS_NUMBER(iter)                                                               \
	(WIRE_ITER_HOLDS_INT(iter) || wire_iter_type(iter) == BSON_TYPE_DOUBLE)

/* A static view of the document under it (false when it is not one): no
 * copy, it reads the request's bytes. */
static inline bool wire_iter_doc_view(const bson_iter_t *it, bson_t *out)
{
	uint32_t len;
	const uint8_t *data;
	if (!WIRE_ITER_HOLDS_DOCUMENT(it))
		return false;
	bson_iter_document(it, &len, &data);
	return bson_init_static(out, data, len);
}

#endif
