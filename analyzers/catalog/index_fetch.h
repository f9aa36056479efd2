/* One fetch of a collection's facts for the index cache (index_cache.c),
 * on its metadata thread: listIndexes, the estimated document count, and
 * which indexes are multikey, from a server over a libmongoc client. */
#ifndef MG_ANALYZERS_CATALOG_INDEX_FETCH_H
#define MG_ANALYZERS_CATALOG_INDEX_FETCH_H

#include <mongoc/mongoc.h>
#include <stddef.h>

#include "analyzers/planner/index_set.h"

/* The side connection's URI from the upstream's (uri); NULL with err set
 * when libmongoc refuses it. */
mongoc_uri_t *index_fetch_uri(const char *uri, bson_error_t *err);

#define INDEX_FETCH_NS_MAX 512 /* "db.coll"; the server allows 255 */

/* The list of ns ("db.coll"), its count and multikey paths learnt. A
 * missing collection or a view gives an opaque set: nothing to judge
 * there. NULL when the fetch failed: err says why (empty when there is
 * nothing to tell, as when out of memory). */
index_set *index_fetch(mongoc_client_t *client, const char *ns, char *err, size_t errlen);

#endif
