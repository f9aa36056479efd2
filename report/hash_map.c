/* The report's key map (hash_map.h). */
#include "report/hash_map.h"

#include <stdlib.h>

static void hash_map_grow(hash_map *m)
{
	hash_map old = *m;
	m->cap = old.cap ? old.cap * 2 : 1024;
	m->n = 0;
	m->keys = calloc(m->cap, sizeof *m->keys);
	m->vals = calloc(m->cap, sizeof *m->vals);
	if (!m->keys || !m->vals)
		abort(); /* the report has nothing sensible to do */
	for (size_t i = 0; i < old.cap; i++)
		if (old.vals[i])
			hash_map_put(m, old.keys[i], old.vals[i]);
	free(old.keys);
	free(old.vals);
}

void hash_map_put(hash_map *m, uint64_t k, size_t v)
{
	if ((m->n + 1) * 2 > m->cap)
		hash_map_grow(m);
	size_t i = k & (m->cap - 1);
	while (m->vals[i] && m->keys[i] != k)
		i = (i + 1) & (m->cap - 1);
	if (!m->vals[i])
		m->n++;
	m->keys[i] = k;
	m->vals[i] = v;
}

void hash_map_free(hash_map *m)
{
	free(m->keys);
	free(m->vals);
}
