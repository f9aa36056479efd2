/* The bounded LRU map: chained buckets plus one doubly linked use list,
 * newest at the front. Every operation is O(1) but find, which walks one
 * chain; with buckets >= max a chain holds about one node. */
#include "analyzers/catalog/lru_map.h"

#include <assert.h>
#include <stdlib.h>

bool lru_map_init(lru_map *m, size_t max_entries)
{
	size_t n = 1;
	m->max = max_entries ? max_entries : 1;
	while (n < m->max)
		n <<= 1;
	m->buckets = calloc(n, sizeof(*m->buckets));
	if (!m->buckets)
		return false;
	m->mask = n - 1;
	m->count = 0;
	m->newest = m->oldest = NULL;
	return true;
}

void lru_map_destroy(lru_map *m, lru_map_free_fn free_entry)
{
	for (lru_map_node *n = m->newest, *older; n && free_entry; n = older) {
		older = n->older;
		free_entry(n);
	}
	free(m->buckets);
	m->buckets = NULL;
	m->count = 0;
	m->newest = m->oldest = NULL;
}

/* Both halves folded in: callers pass 32-bit hashes, and 64-bit ones whose
 * low bits alone may be poor. */
static lru_map_node **bucket_of(const lru_map *m, uint64_t hash)
{
	return &m->buckets[(hash ^ (hash >> 32)) & m->mask];
}

lru_map_node *lru_map_find(const lru_map *m, uint64_t hash, lru_map_eq_fn eq, const void *key)
{
	for (lru_map_node *n = *bucket_of(m, hash); n; n = n->chain)
		if (n->hash == hash && (!eq || eq(n, key)))
			return n;
	return NULL;
}

static void list_unlink(lru_map *m, lru_map_node *n)
{
	if (n->newer)
		n->newer->older = n->older;
	else
		m->newest = n->older;
	if (n->older)
		n->older->newer = n->newer;
	else
		m->oldest = n->newer;
	n->newer = n->older = NULL;
}

static void list_push_newest(lru_map *m, lru_map_node *n)
{
	n->newer = NULL;
	n->older = m->newest;
	if (m->newest)
		m->newest->newer = n;
	m->newest = n;
	if (!m->oldest)
		m->oldest = n;
}

void lru_map_insert(lru_map *m, lru_map_node *node, uint64_t hash)
{
	assert(m->count < m->max);
	lru_map_node **b = bucket_of(m, hash);
	node->hash = hash;
	node->chain = *b;
	*b = node;
	list_push_newest(m, node);
	m->count++;
}

void lru_map_remove(lru_map *m, lru_map_node *node)
{
	lru_map_node **pp = bucket_of(m, node->hash);
	while (*pp != node)
		pp = &(*pp)->chain; /* node is in the map: the walk ends on it */
	*pp = node->chain;
	node->chain = NULL;
	list_unlink(m, node);
	m->count--;
}

void lru_map_touch(lru_map *m, lru_map_node *node)
{
	if (m->newest == node)
		return;
	list_unlink(m, node);
	list_push_newest(m, node);
}
