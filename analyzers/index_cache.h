/* The index cache: which indexes each collection has, learned over a side
 * connection (libmongoc, `listIndexes`) that never blocks the request path.
 *
 * A dedicated metadata thread owns the libmongoc client. Lookups from worker
 * threads either find a known index list or schedule a fetch and answer
 * "unknown"; when a fetch completes the cache calls `notify` (from the
 * metadata thread) so the proxy can re-run requests that were waiting.
 * Entries are refreshed every refresh_secs and dropped when a DDL command
 * passes through the proxy (engine_note_ddl). */
#ifndef MG_ANALYZERS_INDEX_CACHE_H
#define MG_ANALYZERS_INDEX_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct index_cache index_cache;
typedef void (*index_cache_notify_fn)(void *arg);

/* uri: any mongodb:// URI libmongoc accepts. Returns NULL with err set when
 * the URI is invalid. The thread starts with index_cache_start(). */
index_cache *index_cache_new(const char *uri, uint32_t refresh_secs, index_cache_notify_fn notify,
			     void *notify_arg, char *err, size_t errlen);
bool index_cache_start(index_cache *ic, char *err, size_t errlen);
/* Stops the thread and frees everything. */
void index_cache_free(index_cache *ic);



/* ---- used by the engine ---- */
#include "analyzers/index_set.h"

typedef enum {
	INDEXES_KNOWN,	     /* *out holds a retained set: release it */
	INDEXES_PENDING,     /* a fetch is scheduled or running */
	INDEXES_UNAVAILABLE, /* the last fetch failed recently; no verdict possible */
} index_lookup;

index_lookup index_cache_get(index_cache *ic, const char *db, const char *coll, index_set **out);

/* Forgets what is known about db.coll (coll NULL: every collection of db)
 * and refetches on next use. Safe from any thread. */
void index_cache_invalidate(index_cache *ic, const char *db, const char *coll);

/* For tests: installs a known set for db.coll without any connection. */
void index_cache_put(index_cache *ic, const char *db, const char *coll, index_set *s);
#endif
