/* The index cache: which indexes each collection has, learned over a side
 * connection (libmongoc, `listIndexes`) that never blocks the request path.
 *
 * A dedicated metadata thread owns the libmongoc client. Lookups from worker
 * threads either find a known index list or schedule a fetch and answer
 * "unknown"; when a fetch completes the cache calls `notify` (from the
 * metadata thread) so the proxy can re-run requests that were waiting.
 * Entries are refreshed every refresh_secs and dropped when a DDL command
 * passes through the proxy (engine_note_ddl). With each list the thread
 * learns the collection's estimated document count (index_set_doc_count;
 * `count` without a filter, which reads metadata only), refreshed with it. */
#ifndef MG_ANALYZERS_CATALOG_INDEX_CACHE_H
#define MG_ANALYZERS_CATALOG_INDEX_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct index_cache index_cache;
typedef void (*index_cache_notify_fn)(void *arg);

/* uri: any mongodb:// URI libmongoc accepts. Returns NULL with err set when
 * the URI is invalid. The thread starts with index_cache_start(). The side
 * connection uses appname "mongoguard-metadata" and, unless the URI says
 * otherwise, 3 s server selection and connect timeouts and a 10 s socket
 * timeout. refresh_secs 0: known lists are never refreshed in the background. */
index_cache *index_cache_new(const char *uri, uint32_t refresh_secs, index_cache_notify_fn notify,
                             void *notify_arg, char *err, size_t errlen);
bool index_cache_start(index_cache *ic, char *err, size_t errlen);
/* Called from the metadata thread when listIndexes fails for a reason
 * other than "no such collection" or "a view" (auth, network, ...); the
 * namespace then has no sort verdict until a retry succeeds. Set before
 * index_cache_start(). */
typedef void (*index_cache_error_fn)(void *arg, const char *ns, const char *message);
void index_cache_set_error_hook(index_cache *ic, index_cache_error_fn fn, void *arg);

/* Stops the thread and frees everything. */
/* Stops the thread and joins it when it ends within wait_ms (its callbacks
 * have all returned then): true. False when it is still inside a request
 * to the server (a silent server holds it for the socket timeout): it then
 * ends by itself when that returns, and the cache must not be freed. What
 * the cache knows stays readable until index_cache_free, which waits as
 * long as it takes. */
#define INDEX_CACHE_WAIT_FOREVER UINT32_MAX
bool index_cache_stop(index_cache *ic, uint32_t wait_ms) __attribute__((warn_unused_result));
void index_cache_free(index_cache *ic);

/* ---- used by the engine ---- */
#include "analyzers/planner/index_set.h"

typedef enum {
	INDEXES_KNOWN,       /* *out holds a retained set: release it */
	INDEXES_PENDING,     /* a fetch is scheduled or running */
	INDEXES_UNAVAILABLE, /* the last fetch failed recently; no verdict possible */
} index_lookup;

index_lookup index_cache_get(index_cache *ic, const char *db, const char *coll, index_set **out);

/* The same, and where the cache stood at that lookup, read under its lock:
 * its change count (index_cache_changes) and schema count
 * (index_cache_schema_seq). A request carries them, so the capture writes
 * it after every list and schema change it was judged after and before
 * every later one, and a verdict it owes counts the schema changes after
 * this lookup, not after a moment later. */
typedef struct index_cache_at {
	uint64_t changes, schema_seq;
} index_cache_at;
index_lookup index_cache_get_at(index_cache *ic, const char *db, const char *coll, index_set **out,
                                index_cache_at *at);
/* The same for ns, "db.coll" as the cache joins them (db and coll not
 * empty, the whole under 512 bytes with its NUL; len its strlen): for a
 * caller that keeps the joined name anyway (the engine's lookup, once per
 * request), so it is not measured and copied twice.
 *
 * Each thread keeps its last KNOWN answer and gives it again without the
 * lock while index_cache_changes has not moved (every landing and every
 * forgetting moves it, an eviction too): the same set and the same
 * index_cache_at the lock would give. Such a hit does not move the entry
 * to the front of the LRU order. The memo holds a reference: a thread that
 * looked lists up calls index_cache_thread_end before it exits
 * (index_cache_free drops the calling thread's). */
index_lookup index_cache_get_ns(index_cache *ic, const char *ns, size_t len, index_set **out,
                                index_cache_at *at);
void index_cache_thread_end(void);

/* What the capture hears of the cache, called under the cache's lock (a
 * hook must take no lock the cache's callers may hold while they call it),
 * so the writer's queue holds both kinds in the order the cache saw them:
 *
 * landed: from the metadata thread, each time a fetched list lands
 * (index_cache_fetch_end), with a reference to it the hook must release:
 * the capture writes it where it landed among the requests, so the report
 * can judge a late verdict given with a list that a schema change made the
 * cache forget before anyone looked again.
 *
 * forget: from any thread, each time the cache forgets a list: why
 * INDEX_FORGET_SCHEMA at index_cache_invalidate and index_cache_drop (ns
 * "db.coll", or "db" with whole_db), INDEX_FORGET_WRITTEN when documents
 * were written into a collection it listed missing (index_cache_note_made,
 * _note_docs), INDEX_FORGET_MADE when a dropped collection exists again (a
 * write made it, or a list shows it: a schema change of the namespace,
 * index_cache_drop; what it listed missing is forgotten too); stamp is the
 * change count it made (index_cache_changes). The report forgets there,
 * as the proxy did, whatever the position of the reply that made the
 * proxy forget among the landings.
 *
 * fn NULL unsets one; once this returns, no call of the old ones is
 * running. */
typedef void (*index_cache_landed_fn)(void *arg, const char *ns, index_set *set);
typedef enum { INDEX_FORGET_SCHEMA, INDEX_FORGET_WRITTEN, INDEX_FORGET_MADE } index_forget;
typedef void (*index_cache_forget_fn)(void *arg, const char *ns, bool whole_db, uint64_t stamp,
                                      index_forget why);
void index_cache_set_hooks(index_cache *ic, index_cache_landed_fn landed,
                           index_cache_forget_fn forget, void *arg);

/* The report's replay of a capture that recorded what the proxy's cache
 * forgot (the forget hook's records): writes move the counts as they did
 * live, but forget nothing and make no collection themselves (replay
 * true); index_cache_forget does, where each record stands. */
void index_cache_set_replay(index_cache *ic, bool replay);
void index_cache_forget(index_cache *ic, const char *db, const char *coll, index_forget why);

/* How many times a list has landed (a fetch's or a put's) or been
 * forgotten (index_cache_invalidate) since the cache was made: a reader
 * that has seen this number has seen every list stamped with it or less
 * (index_set_stamp). Any thread, without the lock. A capture item carries
 * it, so the writer puts a snapshot before the first request judged with
 * it, never before one judged earlier, and looks again at once after a
 * change. */
uint64_t index_cache_changes(index_cache *ic);

/* Documents were inserted (delta > 0) or deleted in db.coll, as the
 * replies said: the known count follows (index_set_note_docs). When the
 * estimate has moved by more than INDEX_CACHE_RECOUNT of the count read
 * (and at least INDEX_CACHE_RECOUNT_MIN documents), the list and count are
 * fetched again early; the old set serves until the new one lands. When
 * the collection may not have existed (its list says it does not, or is
 * being fetched) and documents were inserted, what is known is forgotten instead: the list
 * is fetched again and a lookup waits for it (PENDING; an answer already
 * on the wire is dropped), so no request is judged "does not exist" after
 * the write that made it. Nothing when db.coll is not known. */
/* db.coll exists now (an upsert into it was answered): a list that says
 * it does not, or one being fetched (whose answer may predate the upsert),
 * is forgotten as by a write (index_cache_note_docs); a list of it known
 * to exist is kept. Either, after a drop, makes it again (index_cache_drop). */
void index_cache_note_made(index_cache *ic, const char *db, const char *coll);

#define INDEX_CACHE_RECOUNT     0.5
#define INDEX_CACHE_RECOUNT_MIN 8
void index_cache_note_docs(index_cache *ic, const char *db, const char *coll, int64_t delta);

/* Forgets what is known about db.coll (coll NULL: every collection of db)
 * and refetches on next use: a schema change passed. Safe from any thread. */
void index_cache_invalidate(index_cache *ic, const char *db, const char *coll);
/* The same for a drop (drop, dropDatabase, a rename's source): the
 * collection is gone, and stays dropped until the cache hears that it
 * exists again: an insert or an upsert into it answered
 * (index_cache_note_docs, _note_made), or a list of it landing that shows
 * it. That is a schema change of db.coll too (INDEX_FORGET_MADE): a
 * request sent after the drop and before it ran on no collection, and the
 * late verdict it owes gives none (index_cache_schema_changed), whether
 * the first list after the drop landed before the write ("does not
 * exist") or after it (listing what the write made). A schema change
 * other than a drop naming it since (a createIndexes makes a collection
 * too) ends it as well. */
void index_cache_drop(index_cache *ic, const char *db, const char *coll);

/* How many schema changes (index_cache_invalidate) have passed since the
 * cache was made. Any thread, without the lock. A late verdict keeps the
 * number read before its request went on: */
uint64_t index_cache_schema_seq(index_cache *ic);

/* True when a schema change after the since'th, up to the until'th
 * (UINT64_MAX: every one so far), named db.coll or all of db: a list
 * fetched after it may not be the one the request ran with (a
 * createIndex, a find, a dropIndexes within milliseconds). Also true when
 * more than INDEX_CACHE_SCHEMA_RING changes have passed since (or, rarely,
 * another namespace's hash is the same): "cannot tell" is never "no". */
#define INDEX_CACHE_SCHEMA_RING 1024
bool index_cache_schema_changed(index_cache *ic, const char *db, const char *coll, uint64_t since,
                                uint64_t until);

/* The first list of db.coll that landed after the cache's change count
 * was `after` (index_cache_changes, read before a request went on), and
 * the schema count when it landed: what a late verdict is judged with,
 * as the report's replay judges it at that list's snapshot
 * (index_landings.h). A reference into *set. False when none is kept. */
bool index_cache_landed_after(index_cache *ic, const char *db, const char *coll, uint64_t after,
                              index_set **set, uint64_t *schema_seq);

/* For tests: installs a known set for db.coll without any connection. The
 * cache takes its own reference (index_set_retain): the caller still owns
 * and releases the one it passed. A fetch in flight for db.coll is
 * discarded when it lands. s NULL forgets db.coll. */
void index_cache_put(index_cache *ic, const char *db, const char *coll, index_set *s);

/* ---- additions: testing hooks and the metadata thread's own steps ----
 *
 * index_cache_new accepts uri NULL: a cache that never connects (tests;
 * index_cache_start then fails). The thread runs one listIndexes at a time
 * as the two halves below, which tests call directly to drive the
 * generation logic without a server. */

/* Takes the next namespace waiting for a fetch ("db.coll" into ns) and the
 * generation the answer must match. False when nothing waits. */
bool index_cache_fetch_begin(index_cache *ic, char *ns, size_t nslen, uint64_t *gen);
/* Lands a fetch: set is the new list (the cache takes the caller's
 * reference; an opaque set for a missing collection or a view) or NULL when
 * listIndexes failed. Returns false when db.coll was invalidated or
 * replaced since fetch_begin: the answer is stale and is dropped, and the
 * entry, if asked for again, is fetched anew. Also false for a refresh
 * during which writes were noted (index_cache_note_docs): its count may
 * predate them, so the old set (whose estimate has them) serves on and the
 * refresh runs once more; that second one lands whatever was written. */
bool index_cache_fetch_end(index_cache *ic, const char *ns, uint64_t gen, index_set *set);

/* Milliseconds on a monotonic clock; the default reads CLOCK_MONOTONIC.
 * Tests replace it to step over the failure back-off (5 s) and refresh. */
typedef int64_t (*index_cache_clock_fn)(void *arg);
void index_cache_set_clock(index_cache *ic, index_cache_clock_fn now_ms, void *arg);

/* ---- the side connection and the clients' schema changes ----
 *
 * The side connection's requests must not change what a client sees. An
 * upstream that serves a database over a pool of its own connections may
 * answer a client's schema change wrongly when a side request runs beside
 * it: FerretDB's SQLite backend opens a second connection for the
 * concurrent request, and a CREATE INDEX (or CREATE TABLE) that later lands
 * on the connection which missed a DROP fails with "index ... already
 * exists", from a schema cached before the drop (pymongo's GridFS tests hit
 * it: dropIndexes, then createIndexes while the side connection counted the
 * collection). So the two never overlap within a database: a client's
 * schema-changing request (DDL, insert) waits while the metadata thread is
 * fetching from that database (index_cache_side_busy; the proxy holds it
 * as it holds a request waiting for an index list, and notify lets it
 * go), and the thread starts no fetch in a database while such a request
 * is in flight there (index_cache_client_begin/_end; the queued entry
 * waits its turn, others go first). */

/* True while the metadata thread has a request out for a namespace of db. */
bool index_cache_side_busy(index_cache *ic, const char *db);
/* A client's schema-changing request to db is about to go: the thread
 * starts no fetch in db until index_cache_client_end(ic, the slot
 * returned). -1 (nothing to end) when db is not tracked (too long, or
 * INDEX_CACHE_GATES databases have such requests in flight already).
 * *side_busy: index_cache_side_busy(ic, db), read under the same lock. */
#define INDEX_CACHE_GATES 32
int index_cache_client_begin(index_cache *ic, const char *db, bool *side_busy);
void index_cache_client_end(index_cache *ic, int slot);

/* Namespaces remembered at most; the least recently used idle entry goes. */
#define INDEX_CACHE_MAX_ENTRIES 10000
/* After a failed fetch, lookups answer INDEXES_UNAVAILABLE for this long. */
#define INDEX_CACHE_RETRY_MS 5000
#endif
