/* The index lists that landed last (index_landings.h). */
#include "analyzers/catalog/index_landings.h"

#include <string.h>

index_set *index_landings_add(index_landings *l, const char *ns, uint64_t stamp,
                              uint64_t schema_seq, index_set *set)
{
	size_t len = strlen(ns);
	if (len >= INDEX_LANDINGS_NS)
		return NULL; /* the cache refuses such a name before */
	unsigned slot = (unsigned)(l->n++ % INDEX_LANDINGS);
	index_set *old = l->at[slot].set;
	memcpy(l->at[slot].ns, ns, len + 1);
	l->at[slot].stamp = stamp;
	l->at[slot].schema_seq = schema_seq;
	l->at[slot].set = index_set_retain(set);
	return old;
}

bool index_landings_first_after(const index_landings *l, const char *ns, uint64_t after,
                                index_set **set, uint64_t *schema_seq)
{
	uint64_t kept = l->n < INDEX_LANDINGS ? l->n : INDEX_LANDINGS;
	/* oldest first: stamps grow with n */
	for (uint64_t i = l->n - kept; i < l->n; i++) {
		unsigned slot = (unsigned)(i % INDEX_LANDINGS);
		if (l->at[slot].stamp > after && l->at[slot].set &&
		    strcmp(l->at[slot].ns, ns) == 0) {
			*set = index_set_retain(l->at[slot].set);
			*schema_seq = l->at[slot].schema_seq;
			return true;
		}
	}
	return false;
}

void index_landings_clear(index_landings *l)
{
	for (unsigned i = 0; i < INDEX_LANDINGS; i++) {
		index_set_release(l->at[i].set);
		l->at[i].set = NULL;
	}
	l->n = 0;
}
