/* A set of BSON values: each value's type and bytes hashed, the first
 * KEY_SET_EXACT distinct ones kept by a 32-bit fingerprint, and every one
 * as one bit of 256, so a value added again changes nothing. What the
 * client-side-join rule (analyzers/rules/rule_join.c) and the report's
 * relationships (report/relationships.c) count a join's fan-out in: the
 * distinct values looked up, so one value read again and again (a
 * discriminator, a counter's _id) is no fan-out. Up to KEY_SET_EXACT
 * values the count is exact (two values sharing a fingerprint: 1 in 36
 * million at 16); the bits alone lost a populate of 3 ids in about 1 in
 * 85, when two of them fell on one bit (a helper's held-out run of
 * mongoose-delete lost both of a run's populate findings so). */
#ifndef MG_PROTOCOL_KEY_SET_H
#define MG_PROTOCOL_KEY_SET_H

#include <bson/bson.h>
#include <stdint.h>
#include <string.h>

enum { KEY_SET_WORDS = 4, KEY_SET_BITS = 64 * KEY_SET_WORDS, KEY_SET_EXACT = 16 };

typedef struct key_set {
	uint64_t w[KEY_SET_WORDS];
	uint32_t exact[KEY_SET_EXACT]; /* the first distinct values' fingerprints */
	uint32_t nexact;               /* how many; KEY_SET_EXACT + 1: more came */
} key_set;

static inline void key_set_clear(key_set *s)
{
	memset(s, 0, sizeof(*s));
}

static inline void key_set_fingerprint(key_set *s, uint32_t fp)
{
	if (s->nexact > KEY_SET_EXACT)
		return;
	for (uint32_t i = 0; i < s->nexact; i++)
		if (s->exact[i] == fp)
			return;
	if (s->nexact < KEY_SET_EXACT)
		s->exact[s->nexact] = fp;
	s->nexact++;
}

static inline void key_set_bit(key_set *s, unsigned bit)
{
	s->w[bit / 64] |= 1ull << (bit % 64);
}

/* The value the iterator is on: its type and its bytes (FNV-1a). */
static inline void key_set_add(key_set *s, const bson_iter_t *it)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)it->raw[it->type];
	for (uint32_t i = it->d1; i < it->next_off; i++)
		h = (h ^ it->raw[i]) * 0x100000001b3ull;
	h ^= h >> 32;
	key_set_bit(s, (unsigned)(h % KEY_SET_BITS));
	key_set_fingerprint(s, (uint32_t)(h * 0x9e3779b97f4a7c15ull >> 32));
}

/* A value by its hash (value_filter.h, value_hash): how client-side-join
 * keys the values it can hash, so that a capture's replay, which has the
 * hashes and not the values, counts the same distinct values. */
static inline void key_set_add_hash(key_set *s, uint64_t h)
{
	key_set_bit(s, (unsigned)(h >> 40) % KEY_SET_BITS);
	key_set_fingerprint(s, (uint32_t)h);
}

static inline void key_set_union(key_set *s, const key_set *o)
{
	for (int i = 0; i < KEY_SET_WORDS; i++)
		s->w[i] |= o->w[i];
	for (uint32_t i = 0; i < o->nexact && i < KEY_SET_EXACT; i++)
		key_set_fingerprint(s, o->exact[i]);
	if (o->nexact > KEY_SET_EXACT)
		s->nexact = KEY_SET_EXACT + 1;
}

/* How many distinct values it holds: exactly, up to KEY_SET_EXACT; past
 * that, from the bits: z of its m bits set estimate -m ln(1 - z/m) values
 * (linear counting), rounded down, a few off either way at 50 values (the
 * rule counts no more than the values read), and never fewer than
 * KEY_SET_EXACT + 1. A set full of ones: UINT32_MAX. No libm: ln(1 - x)
 * as its series. */
static inline uint32_t key_set_count(const key_set *s)
{
	if (s->nexact <= KEY_SET_EXACT)
		return s->nexact;
	unsigned z = 0;
	for (int i = 0; i < KEY_SET_WORDS; i++)
		z += (unsigned)__builtin_popcountll(s->w[i]);
	if (z == KEY_SET_BITS)
		return UINT32_MAX;
	double x = (double)z / KEY_SET_BITS, term = x, sum = 0;
	for (int k = 1; k <= 64 && term > 1e-9; k++, term *= x)
		sum += term / k;
	uint32_t n = (uint32_t)(KEY_SET_BITS * sum);
	return n > KEY_SET_EXACT ? n : KEY_SET_EXACT + 1;
}

#endif
