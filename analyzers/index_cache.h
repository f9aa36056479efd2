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

#endif
