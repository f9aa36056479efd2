/* Comparing BSON keys with literals on the request path.
 *
 * Analyzers compare every key they meet against a handful of names. Most
 * keys differ from the wanted name in one of the first two bytes (operator
 * and stage names all start with '$', so the first alone is not enough);
 * checking those before strcmp keeps the common case free of calls. */
#ifndef MG_ANALYZERS_ENGINE_KEYS_H
#define MG_ANALYZERS_ENGINE_KEYS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "protocol/wire_iter.h"

/* lit must be a literal: its length is then known where this is inlined,
 * so a one-letter name ("q", "u") costs two byte comparisons and a longer
 * one a call for the rest only when the first two bytes match. */
static inline bool key_eq(const char *k, const char *lit)
{
	if (k[0] != lit[0])
		return false;
	if (lit[0] == '\0')
		return true;
	if (k[1] != lit[1])
		return false;
	return lit[1] == '\0' || strcmp(k + 2, lit + 2) == 0;
}

/* Whether the key of the element it is on is lit, a literal: its length
 * is known from the step (wire_iter_key_len), so a key of another length
 * costs one comparison and one of lit's length a compare of a size known
 * where this is inlined, never a strcmp call. */
#define KEY_IS(it, lit) key_is_n((it), "" lit "", sizeof(lit) - 1)

static inline __attribute__((always_inline)) bool key_is_n(const bson_iter_t *it, const char *lit,
                                                           uint32_t n)
{
	return wire_iter_key_len(it) == n && memcmp(wire_iter_key(it), lit, n) == 0;
}

/* KEY_IS for a cursor (wire_cur) on an element. */
#define CUR_KEY_IS(c, lit) cur_key_is_n((c), "" lit "", sizeof(lit) - 1)

static inline __attribute__((always_inline)) bool cur_key_is_n(const wire_cur *c, const char *lit,
                                                               uint32_t n)
{
	return wire_cur_key_len(c) == n && memcmp(wire_cur_key(c), lit, n) == 0;
}

/* Whether key, with its NUL as BSON stores a key, occurs anywhere in the
 * bytes of a document or array. False means no element at any depth is
 * named key, so a walk looking for one can be skipped; true only means
 * "look" (a string value may hold the same bytes). */
static inline bool key_maybe_in(const uint8_t *p, size_t len, const char *key)
{
	/* searched by the key's last byte, not its first: nearly every key
	 * sought here starts with the '$' every operator and stage name
	 * starts with, which made a memchr per operator */
	size_t n = strlen(key); /* the key's bytes; its NUL follows them */
	if (n == 0 || len < n + 1)
		return false;
	const uint8_t *end = p + len - 1; /* where a match's NUL can be, at most */
	for (const uint8_t *at = p + n - 1; at < end;) {
		const uint8_t *q = memchr(at, (unsigned char)key[n - 1], (size_t)(end - at));
		if (!q)
			return false;
		if (q[1] == 0 && memcmp(q + 1 - n, key, n) == 0)
			return true;
		at = q + 1;
	}
	return false;
}

/* key_maybe_in(p, len, "$lookup") || key_maybe_in(p, len, "$graphLookup"),
 * in one search: for their common tail, then the head before it. */
static inline bool join_maybe_in(const uint8_t *p, size_t len)
{
	if (len < 8)
		return false;
	const uint8_t *end = p + len - 1;
	for (const uint8_t *at = p + 6; at < end;) {
		const uint8_t *q = memchr(at, 'p', (size_t)(end - at)); /* "...ookup" */
		if (!q)
			return false;
		if (q[1] == 0 && memcmp(q - 4, "ooku", 4) == 0 &&
		    ((q - p >= 6 && memcmp(q - 6, "$l", 2) == 0) ||
		     (q - p >= 11 && memcmp(q - 11, "$graphL", 7) == 0)))
			return true;
		at = q + 1;
	}
	return false;
}

#endif
