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

/* Whether key, with its NUL as BSON stores a key, occurs anywhere in the
 * bytes of a document or array. False means no element at any depth is
 * named key, so a walk looking for one can be skipped; true only means
 * "look" (a string value may hold the same bytes). */
static inline bool key_maybe_in(const uint8_t *p, size_t len, const char *key)
{
	size_t n = strlen(key) + 1;
	if (len < n)
		return false;
	const uint8_t *last = p + len - n; /* the last place a match can start */
	while (p <= last) {
		const uint8_t *q = memchr(p, (unsigned char)key[0], (size_t)(last - p) + 1);
		if (!q)
			return false;
		if (memcmp(q, key, n) == 0)
			return true;
		p = q + 1;
	}
	return false;
}

#endif
