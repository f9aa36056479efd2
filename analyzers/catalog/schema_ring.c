/* The index cache's last schema changes: see schema_ring.h. */
#include "analyzers/catalog/schema_ring.h"

/* Does slot n name the collection or its database? */
static bool names(const schema_ring *r, uint64_t n, uint32_t coll_hash, uint32_t db_hash)
{
	const uint32_t want = r->at[n % SCHEMA_RING_SLOTS].whole_db ? db_hash : coll_hash;
	return r->at[n % SCHEMA_RING_SLOTS].hash == want;
}

uint64_t schema_ring_add(schema_ring *r, uint32_t hash, bool whole_db, schema_kind kind)
{
	uint64_t n = atomic_load_explicit(&r->seq, memory_order_relaxed) + 1;
	r->at[n % SCHEMA_RING_SLOTS].hash = hash;
	r->at[n % SCHEMA_RING_SLOTS].whole_db = whole_db;
	r->at[n % SCHEMA_RING_SLOTS].kind = (uint8_t)kind;
	if (kind == SCHEMA_DROPPED && r->first_drop == 0)
		r->first_drop = n;
	if (kind == SCHEMA_DROPPED)
		r->last_drop = n;
	atomic_store_explicit(&r->seq, n, memory_order_release);
	return n;
}

bool schema_ring_named(const schema_ring *r, uint32_t coll_hash, uint32_t db_hash, uint64_t since,
                       uint64_t until)
{
	uint64_t now = atomic_load_explicit(&r->seq, memory_order_relaxed);
	now = until < now ? until : now;
	if (now <= since)
		return false;
	if (now - since > SCHEMA_RING_SLOTS)
		return true; /* too many since to tell */
	for (uint64_t n = since + 1; n <= now; n++)
		if (names(r, n, coll_hash, db_hash))
			return true;
	return false;
}

/* Newest first, back to the ring's end or to the first drop ever (a
 * change before it cannot be one); nothing to walk when no drop is left
 * in the ring. */
bool schema_ring_dropped(const schema_ring *r, uint32_t coll_hash, uint32_t db_hash)
{
	uint64_t now = atomic_load_explicit(&r->seq, memory_order_relaxed);
	if (r->last_drop == 0 || now - r->last_drop >= SCHEMA_RING_SLOTS)
		return false;
	uint64_t oldest = now >= SCHEMA_RING_SLOTS ? now - SCHEMA_RING_SLOTS + 1 : 1;
	if (oldest < r->first_drop)
		oldest = r->first_drop;
	for (uint64_t n = now; n >= oldest; n--)
		if (names(r, n, coll_hash, db_hash))
			return r->at[n % SCHEMA_RING_SLOTS].kind == SCHEMA_DROPPED;
	return false;
}
