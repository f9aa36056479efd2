/* The values the first documents of a reply held, as a Bloom filter:
 * whether a value read later may have come from them. What
 * client-side-join (rule_join.c) asks of a parent read before it takes a
 * chain of keyed reads for a join of it: a connection that read 5
 * migrations and then looked up 3 usernames read no value of the first in
 * the second, and is no join.
 *
 * Only a first batch's first VALUE_FILTER_DOCS documents are read, and of
 * them at most VALUE_FILTER_MAX values, so that a parent costs the proxy a
 * bounded walk (about 70 instructions a value) however large its reply: a
 * loop over a parent's documents starts with its first ones, and a chain
 * that reads one of their values is the parent's. `all` says whether the
 * filter holds every value of the batch (a parent of a few documents):
 * then a value it does not hold is no value of the parent at all.
 *
 * A value is its type and bytes, numbers by value (an int32 5, an int64 5
 * and a double 5.0 are one value, as mongod compares them); a string, an
 * ObjectId, a binary, a document by their bytes. The filter says "maybe"
 * for every value added and, wrongly, for a few others (with
 * VALUE_FILTER_MAX values in it about 1 in 200; with 20, 1 in 40,000), never
 * "no" for a value added.
 *
 * Every hash is salted with value_hash_salt, a secret drawn when the
 * process starts and never written: a capture keeps a parent's bits and
 * each keyed read's value hashes (protocol/capture.h) as the live proxy
 * judged with them, so the report judges the same, and no one holding the
 * capture can test a guessed value against them. */
#ifndef MG_PROTOCOL_VALUE_FILTER_H
#define MG_PROTOCOL_VALUE_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
	VALUE_FILTER_WORDS = 32,
	VALUE_FILTER_BITS = 64 * VALUE_FILTER_WORDS,
	VALUE_FILTER_BYTES = 8 * VALUE_FILTER_WORDS,
	VALUE_FILTER_DOCS = 4,  /* the most documents read */
	VALUE_FILTER_MAX = 128, /* the most values added */
};

typedef struct value_filter {
	uint64_t w[VALUE_FILTER_WORDS];
	uint32_t n; /* values added (a value added twice counts twice) */
	bool all;   /* every value of the batch is in it */
} value_filter;

static inline void value_filter_clear(value_filter *f)
{
	memset(f, 0, sizeof(*f));
}

/* Whether a number (int32, int64 or double) is integral: its value. */
static inline bool value_integral(uint8_t t, const uint8_t *p, size_t len, int64_t *out)
{
	if (t == 0x10 && len == 4) {
		int32_t v;
		memcpy(&v, p, 4);
		*out = v;
		return true;
	}
	if (t == 0x12 && len == 8) {
		memcpy(out, p, 8);
		return true;
	}
	if (t == 0x01 && len == 8) {
		double d;
		memcpy(&d, p, 8);
		if (d >= -9.2e18 && d <= 9.2e18 && (double)(int64_t)d == d) {
			*out = (int64_t)d; /* -0.0 too: 0 */
			return true;
		}
	}
	return false;
}

/* Whether a value of type t and len bytes is one the filter holds: the
 * types a reference is made of (numbers, a string of at most 128 bytes,
 * an ObjectId, a date, a timestamp, a binary or a document of at most 64
 * bytes). Any other is neither added nor asked about: a read by it is
 * taken as maybe from anywhere. */
static inline bool value_checkable(uint8_t t, size_t len)
{
	switch (t) {
	case 0x01: /* double */
	case 0x07: /* ObjectId */
	case 0x09: /* date */
	case 0x10: /* int32 */
	case 0x11: /* timestamp */
	case 0x12: /* int64 */
	case 0x13: /* decimal128 */
		return true;
	case 0x02: /* string */
		return len <= 128;
	case 0x03: /* document: a compound key */
	case 0x05: /* binary: a UUID */
		return len <= 64;
	default:
		return false;
	}
}

/* n bytes at p mixed into h, a word at a time: the hash of a namespace,
 * a filter's field names (client-side-join) and a value's bytes. */
static inline uint64_t hash_words(uint64_t h, const void *bytes, size_t n)
{
	const uint8_t *p = bytes;
	uint64_t w;
	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, p, n);
	h = (h ^ w ^ ((uint64_t)n << 56)) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* The process's salt (value_filter.c): 0 until value_hash_salt_init. */
extern uint64_t value_hash_salt;

/* Draws the salt (getrandom; the clock if that fails). Once, at start. */
void value_hash_salt_init(void);

/* A value of BSON type t whose bytes are p..p+len (a string's with its
 * length and NUL, as a document holds them): one 64-bit hash, never 0,
 * from which the filter's three bits are taken. Integral numbers as an
 * int64. */
static inline uint64_t value_hash(uint8_t t, const uint8_t *p, size_t len)
{
	int64_t i;
	if (value_integral(t, p, len, &i)) {
		t = 0x12;
		p = (const uint8_t *)&i;
		len = 8;
	}
	uint64_t h = (0x6a09e667f3bcc909ull ^ value_hash_salt) * 0x9e3779b97f4a7c15ull ^ t;
	h = hash_words(h, p, len) * 0xbf58476d1ce4e5b9ull;
	h ^= h >> 31;
	return h ? h : 1;
}

/* An ObjectId's other form, its 24 hex digits as a string, and the other
 * way round (either case): an application that keeps a reference as a
 * string and reads by ObjectId (Beanie's links in a repro of stop 45), or
 * the reverse, looks up a value its parent held. Its type, bytes (in buf,
 * 29 bytes) and length, or false when the value has no other form. */
static inline bool value_twin(uint8_t t, const uint8_t *p, size_t len, uint8_t *buf, uint8_t *t2,
                              size_t *len2)
{
	static const char hex[] = "0123456789abcdef";
	if (t == 0x07 && len == 12) {
		buf[0] = 25;
		buf[1] = buf[2] = buf[3] = 0;
		for (int i = 0; i < 12; i++) {
			buf[4 + 2 * i] = (uint8_t)hex[p[i] >> 4];
			buf[5 + 2 * i] = (uint8_t)hex[p[i] & 15];
		}
		buf[28] = 0;
		*t2 = 0x02;
		*len2 = 29;
		return true;
	}
	if (t != 0x02 || len != 29 || p[0] != 25 || p[1] || p[2] || p[3] || p[28])
		return false;
	for (int i = 0; i < 24; i++) {
		uint8_t c = p[4 + i], d;
		if (c >= '0' && c <= '9')
			d = (uint8_t)(c - '0');
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (uint8_t)((c | 0x20) - 'a' + 10);
		else
			return false;
		buf[i / 2] = i % 2 ? (uint8_t)(buf[i / 2] | d) : (uint8_t)(d << 4);
	}
	*t2 = 0x07;
	*len2 = 12;
	return true;
}

/* The three bits of a hash, from three of its 11-bit slices (its high
 * bits: the multiply leaves the best mixed there). */
#define VALUE_FILTER_BIT(h, k) ((unsigned)((h) >> (64 - 11 * ((k) + 1))) % VALUE_FILTER_BITS)

static inline void value_filter_add(value_filter *f, uint64_t h)
{
	for (int k = 0; k < 3; k++) {
		unsigned b = VALUE_FILTER_BIT(h, k);
		f->w[b / 64] |= 1ull << (b % 64);
	}
	f->n++;
}

static inline bool value_filter_has(const value_filter *f, uint64_t h)
{
	for (int k = 0; k < 3; k++) {
		unsigned b = VALUE_FILTER_BIT(h, k);
		if (!(f->w[b / 64] >> (b % 64) & 1))
			return false;
	}
	return true;
}

#endif
