/* A bounded hash map that remembers which entry was used least recently:
 * the one table under the findings dedupe, the hot-path-lookup tracker and
 * the index cache.
 *
 * Intrusive: the caller's entry embeds an lru_map_node and the map only
 * links nodes, so it allocates nothing after lru_map_init (entries are the
 * caller's to allocate, reuse and free). The caller hashes its key; the map
 * keeps the hash in the node, compares it first and asks eq only when it
 * matches. With eq NULL the hash is the key (a u64 key needs no callback).
 *
 * Bounded, but the caller evicts: each user has its own policy (report the
 * victim's pending count, reuse its memory, or skip entries that are busy),
 * so the map says when it is full and which entry is oldest, and insert
 * requires room. Not thread-safe: every call goes under the caller's lock. */
#ifndef MG_ANALYZERS_CATALOG_LRU_MAP_H
#define MG_ANALYZERS_CATALOG_LRU_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lru_map_node {
	struct lru_map_node *chain; /* next in the same bucket */
	struct lru_map_node *newer; /* NULL on the most recently used */
	struct lru_map_node *older; /* NULL on the least recently used */
	uint64_t hash;
} lru_map_node;

/* Invariants: count <= max; every node is on exactly one bucket chain and
 * on the newest..oldest list, which together hold count nodes. */
typedef struct lru_map {
	lru_map_node **buckets;
	size_t mask; /* buckets - 1; buckets a power of two >= max */
	size_t count, max;
	lru_map_node *newest, *oldest;
} lru_map;

/* The entry that embeds node as member. */
#define LRU_MAP_ENTRY(node, type, member) ((type *)(void *)((char *)(node)-offsetof(type, member)))

typedef bool (*lru_map_eq_fn)(const lru_map_node *node, const void *key);

/* max_entries 0 is taken as 1. False when out of memory. */
bool lru_map_init(lru_map *m, size_t max_entries) __attribute__((warn_unused_result));
/* Hands every entry to free_entry (NULL: the caller frees them otherwise),
 * then frees the buckets. */
typedef void (*lru_map_free_fn)(lru_map_node *node);
void lru_map_destroy(lru_map *m, lru_map_free_fn free_entry);

/* The node with this hash for which eq(node, key) holds (eq NULL: the hash
 * alone), or NULL. Does not count as a use: see lru_map_touch. */
lru_map_node *lru_map_find(const lru_map *m, uint64_t hash, lru_map_eq_fn eq, const void *key);
/* Links node as the most recently used. The map must not be full and node
 * not in it (a caller that finds it full removes a victim first). */
void lru_map_insert(lru_map *m, lru_map_node *node, uint64_t hash);
void lru_map_remove(lru_map *m, lru_map_node *node);
/* Marks node as the most recently used. */
void lru_map_touch(lru_map *m, lru_map_node *node);

static inline size_t lru_map_count(const lru_map *m)
{
	return m->count;
}

static inline bool lru_map_full(const lru_map *m)
{
	return m->count >= m->max;
}

/* Walking in use order; each returns NULL past the end. A walk that removes
 * the node it stands on reads the next one first. */
static inline lru_map_node *lru_map_newest(const lru_map *m)
{
	return m->newest;
}

static inline lru_map_node *lru_map_oldest(const lru_map *m)
{
	return m->oldest;
}

static inline lru_map_node *lru_map_older(const lru_map_node *node)
{
	return node->older;
}

static inline lru_map_node *lru_map_newer(const lru_map_node *node)
{
	return node->newer;
}

#endif
