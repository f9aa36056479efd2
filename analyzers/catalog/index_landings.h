/* The index lists that landed last, for the late verdicts (index_cache.c
 * keeps one of these under its lock).
 *
 * A request that went on before its collection's list was known is judged
 * when the list lands. The proxy's worker judges it when it next wakes,
 * and by then another worker may have relayed a schema change of that
 * collection (a createIndexes of indexes that exist, as ODMs send on every
 * start): the cache forgot the list, and the change counted against the
 * verdict. The report's replay judges at the list's snapshot, before that
 * change's reply, and gave the verdict. So a late verdict is judged with
 * the first list of its collection that landed after its request went
 * on, kept here, against the schema changes before that landing only. */
#ifndef MG_ANALYZERS_CATALOG_INDEX_LANDINGS_H
#define MG_ANALYZERS_CATALOG_INDEX_LANDINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "analyzers/planner/index_set.h"

#define INDEX_LANDINGS    64
#define INDEX_LANDINGS_NS 512 /* "db.coll", as the cache's own limit */

typedef struct index_landings {
	struct {
		char ns[INDEX_LANDINGS_NS];
		uint64_t stamp;      /* the cache's change count it landed at (index_set_stamp) */
		uint64_t schema_seq; /* the schema changes before it (index_cache_schema_seq) */
		index_set *set;      /* a reference; NULL: a free slot */
	} at[INDEX_LANDINGS];
	uint64_t n; /* landings so far; the newest in slot (n - 1) % INDEX_LANDINGS */
} index_landings;

/* Remembers that set landed for ns (under the cache's lock; takes a
 * reference). Returns the set it no longer keeps, for the caller to
 * release once the lock is let go (NULL: none). */
index_set *index_landings_add(index_landings *l, const char *ns, uint64_t stamp,
                              uint64_t schema_seq, index_set *set);

/* The first list of ns that landed with a stamp above `after` (under the
 * cache's lock): a reference into *set, its schema count into *schema_seq.
 * False when none is kept (none landed since, or more than
 * INDEX_LANDINGS landed after it). */
bool index_landings_first_after(const index_landings *l, const char *ns, uint64_t after,
                                index_set **set, uint64_t *schema_seq);

/* Releases every reference kept. */
void index_landings_clear(index_landings *l);

#endif
