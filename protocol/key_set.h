/* A set of BSON values, as 256 bits: each value's type and bytes hashed
 * to one bit, so a value added again sets the same bit. What the
 * client-side-join rule (analyzers/rules/rule_join.c) and the report's
 * relationships (report/relationships.c) count a join's fan-out in: the
 * distinct values looked up, so one value read again and again (a
 * discriminator, a counter's _id) is no fan-out. */
#ifndef MG_PROTOCOL_KEY_SET_H
#define MG_PROTOCOL_KEY_SET_H

#include <bson/bson.h>
#include <stdint.h>
#include <string.h>

enum { KEY_SET_WORDS = 4, KEY_SET_BITS = 64 * KEY_SET_WORDS };

typedef struct key_set {
	uint64_t w[KEY_SET_WORDS];
} key_set;

static inline void key_set_clear(key_set *s)
{
	memset(s, 0, sizeof(*s));
}

/* The value the iterator is on: its type and its bytes (FNV-1a). */
static inline void key_set_add(key_set *s, const bson_iter_t *it)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)it->raw[it->type];
	for (uint32_t i = it->d1; i < it->next_off; i++)
		h = (h ^ it->raw[i]) * 0x100000001b3ull;
	h ^= h >> 32;
	unsigned bit = (unsigned)(h % KEY_SET_BITS);
	s->w[bit / 64] |= 1ull << (bit % 64);
}

/* A value by its hash (value_filter.h, value_hash): how client-side-join
 * keys the values it can hash, so that a capture's replay, which has the
 * hashes and not the values, counts the same distinct values. */
static inline void key_set_add_hash(key_set *s, uint64_t h)
{
	unsigned bit = (unsigned)(h >> 40) % KEY_SET_BITS;
	s->w[bit / 64] |= 1ull << (bit % 64);
}

static inline void key_set_union(key_set *s, const key_set *o)
{
	for (int i = 0; i < KEY_SET_WORDS; i++)
		s->w[i] |= o->w[i];
}

/* How many distinct values it holds: z of its m bits set estimate
 * -m ln(1 - z/m) values (linear counting), rounded down, so a collision
 * can make it a few short at 50 values, never more than there are. A set
 * full of ones: UINT32_MAX. No libm: ln(1 - x) as its series. */
static inline uint32_t key_set_count(const key_set *s)
{
	unsigned z = 0;
	for (int i = 0; i < KEY_SET_WORDS; i++)
		z += (unsigned)__builtin_popcountll(s->w[i]);
	if (z == KEY_SET_BITS)
		return UINT32_MAX;
	double x = (double)z / KEY_SET_BITS, term = x, sum = 0;
	for (int k = 1; k <= 64 && term > 1e-9; k++, term *= x)
		sum += term / k;
	return (uint32_t)(KEY_SET_BITS * sum);
}

#endif
