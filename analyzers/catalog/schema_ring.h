/* The schema changes the index cache saw last (index_cache.c keeps one of
 * these under its lock), for two questions:
 *
 * - did a change after the since'th, up to the until'th, name a
 *   collection (or its database)? A late verdict owed for a request before
 *   it gives none (index_cache_schema_changed);
 * - is a collection dropped now: was the newest change naming it (or its
 *   database) a drop? Then the first write that makes it again, or the
 *   first list that shows it, is a change of its own (SCHEMA_MADE): the
 *   collection came into existence, and a request sent before that ran on
 *   none (index_cache.h, index_cache_note_made).
 *
 * Change n sits in slot n % SCHEMA_RING_SLOTS, keyed by a 32-bit hash of
 * "db.coll" (or of "db" for a whole database): past the ring, or for
 * another name of the same hash, the first answer is "cannot tell", which
 * is never "no", and the second is "not dropped", which leaves the cache
 * as it was before drops were told apart. */
#ifndef MG_ANALYZERS_CATALOG_SCHEMA_RING_H
#define MG_ANALYZERS_CATALOG_SCHEMA_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SCHEMA_RING_SLOTS 1024

typedef enum {
	SCHEMA_CHANGED, /* createIndexes, dropIndexes, collMod, create, a rename's target... */
	SCHEMA_DROPPED, /* drop, dropDatabase, a rename's source: the collection is gone */
	SCHEMA_MADE,    /* a dropped collection exists again (a write, or a list showed it) */
} schema_kind;

typedef struct schema_ring {
	_Atomic uint64_t seq; /* changes so far; written under the owner's lock */
	uint64_t first_drop,
	    last_drop; /* the oldest and newest SCHEMA_DROPPED's numbers; 0: none */
	struct {
		uint32_t hash;
		bool whole_db;
		uint8_t kind; /* schema_kind */
	} at[SCHEMA_RING_SLOTS];
} schema_ring;

/* Any thread, without the owner's lock. */
static inline uint64_t schema_ring_seq(const schema_ring *r)
{
	return atomic_load_explicit(&r->seq, memory_order_acquire);
}

/* Records a change naming hash (whole_db: a database's); its number. */
uint64_t schema_ring_add(schema_ring *r, uint32_t hash, bool whole_db, schema_kind kind);

/* True when a change after the since'th, up to the until'th (past the
 * newest: up to the newest), named the collection (coll_hash) or its
 * database (db_hash); true too when more than SCHEMA_RING_SLOTS have
 * passed since. */
bool schema_ring_named(const schema_ring *r, uint32_t coll_hash, uint32_t db_hash, uint64_t since,
                       uint64_t until);

/* True when the newest change in the ring naming the collection or its
 * database is a SCHEMA_DROPPED. */
bool schema_ring_dropped(const schema_ring *r, uint32_t coll_hash, uint32_t db_hash);

#endif
