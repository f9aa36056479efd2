/* The aggregator's key map (aggregate_int.h): open addressing, grown at
 * half full. */
#include "report/aggregate_int.h"

static void imap_grow(imap *m)
{
	imap old = *m;
	m->cap = old.cap ? old.cap * 2 : 1024;
	m->n = 0;
	m->keys = calloc(m->cap, sizeof *m->keys);
	m->vals = calloc(m->cap, sizeof *m->vals);
	if (!m->keys || !m->vals)
		abort();
	for (size_t i = 0; i < old.cap; i++)
		if (old.vals[i])
			imap_put(m, old.keys[i], old.vals[i]);
	free(old.keys);
	free(old.vals);
}

void imap_put(imap *m, uint64_t k, size_t v)
{
	if ((m->n + 1) * 2 > m->cap)
		imap_grow(m);
	size_t i = k & (m->cap - 1);
	while (m->vals[i] && m->keys[i] != k)
		i = (i + 1) & (m->cap - 1);
	if (!m->vals[i])
		m->n++;
	m->keys[i] = k;
	m->vals[i] = v;
}

void imap_free(imap *m)
{
	free(m->keys);
	free(m->vals);
}
