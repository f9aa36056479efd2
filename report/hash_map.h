/* A map from a 64-bit key to a row's index + 1 (0: absent): open
 * addressing, grown at half full. The aggregator keys its shapes,
 * findings, namespaces, apps and databases by it, the recommendations
 * their shapes; keys are FNV-1a hashes (hash_map_fnv). */
#ifndef MG_REPORT_HASH_MAP_H
#define MG_REPORT_HASH_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct hash_map {
	uint64_t *keys;
	size_t *vals; /* 0: an empty slot */
	size_t cap, n;
} hash_map;

static inline size_t hash_map_get(const hash_map *m, uint64_t k)
{
	if (!m->cap)
		return 0;
	for (size_t i = k & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->vals[i])
			return 0;
		if (m->keys[i] == k)
			return m->vals[i];
	}
}

/* v must not be 0. */
void hash_map_put(hash_map *m, uint64_t k, size_t v);
void hash_map_free(hash_map *m);

#define HASH_MAP_FNV0 1469598103934665603ull

/* FNV-1a of n bytes, continuing from h (HASH_MAP_FNV0 to start). */
static inline uint64_t hash_map_fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 1099511628211ull;
	return h;
}

static inline uint64_t hash_map_str_key(const char *s)
{
	return hash_map_fnv(s, strlen(s), HASH_MAP_FNV0);
}

#endif
