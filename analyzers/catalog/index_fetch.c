/* One fetch of a collection's facts (index_fetch.h). Split from
 * index_cache.c, which runs it on its metadata thread. */
#include "analyzers/catalog/index_fetch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IC_TIMEOUT_MS        3000 /* server selection and connect, side channel */
#define IC_SOCKET_TIMEOUT_MS 10000

/* The side channel names itself in the server's logs and gives up
 * quickly: a slow answer is no better than none, since lookups never
 * wait for it. The user's own settings win when present. */
mongoc_uri_t *index_fetch_uri(const char *uri, bson_error_t *err)
{
	mongoc_uri_t *u = mongoc_uri_new_with_error(uri, err);
	if (u == NULL)
		return NULL;
	mongoc_uri_set_appname(u, "mongoguard-metadata");
	if (!mongoc_uri_has_option(u, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
		mongoc_uri_set_option_as_int32(u, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
		                               IC_TIMEOUT_MS);
	if (!mongoc_uri_has_option(u, MONGOC_URI_CONNECTTIMEOUTMS))
		mongoc_uri_set_option_as_int32(u, MONGOC_URI_CONNECTTIMEOUTMS, IC_TIMEOUT_MS);
	if (!mongoc_uri_has_option(u, MONGOC_URI_SOCKETTIMEOUTMS))
		mongoc_uri_set_option_as_int32(u, MONGOC_URI_SOCKETTIMEOUTMS, IC_SOCKET_TIMEOUT_MS);
	return u;
}

#define CODE_NAMESPACE_NOT_FOUND 26
#define CODE_NOT_ON_VIEW         166

static bool has_id_index(const index_set *s)
{
	for (size_t i = 0; i < index_set_count(s); i++) {
		const index_def *d = index_set_get(s, i);
		if (d->nkeys == 1 && strcmp(d->keys[0].field, "_id") == 0 &&
		    d->keys[0].direction != 0)
			return true;
	}
	return false;
}

/* The collection's size as its metadata says (the count command without a
 * filter, which reads no document); -1 when the server does not answer it,
 * and the collection-scan rule then stays silent. */
static int64_t estimated_count(mongoc_collection_t *c)
{
	bson_error_t error;
	int64_t n = mongoc_collection_estimated_document_count(c, NULL, NULL, NULL, &error);
	return n < 0 ? -1 : n;
}

/* Which index fields hold arrays: listIndexes does not say, explain of a
 * query hinted to the index does (mongod's IXSCAN stage: isMultiKey,
 * multiKeyPaths). One explain per index per refresh, on this thread. A
 * server that answers otherwise (FerretDB) leaves the index unknown, which
 * the sort rule treats as not multikey, as before. */
static void learn_multikey(mongoc_client_t *client, const char *db, const char *coll,
                           index_set *set)
{
	for (size_t i = 0; i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		if (d->hidden || d->odd || d->wildcard || d->plugin || d->nkeys == 0)
			continue; /* not hintable, or not a sort question */
		bson_t hint, cmd, find, filter, reply;
		bson_error_t error;
		index_def_key_pattern(d, &hint);
		bson_init(&cmd);
		bson_append_document_begin(&cmd, "explain", -1, &find);
		BSON_APPEND_UTF8(&find, "find", coll);
		bson_append_document_begin(&find, "filter", -1, &filter);
		bson_append_document_end(&find, &filter);
		BSON_APPEND_DOCUMENT(&find, "hint", &hint);
		BSON_APPEND_INT32(&find, "limit", 1);
		bson_append_document_end(&cmd, &find);
		BSON_APPEND_UTF8(&cmd, "verbosity", "queryPlanner");
		if (mongoc_client_read_command_with_opts(client, db, &cmd, NULL, NULL, &reply,
		                                         &error))
			(void)index_set_learn_multikey(set, i, &reply);
		bson_destroy(&reply);
		bson_destroy(&cmd);
		bson_destroy(&hint);
	}
}

index_set *index_fetch(mongoc_client_t *client, const char *ns, char *err, size_t errlen)
{
	char db[INDEX_FETCH_NS_MAX];
	const char *dot = strchr(ns, '.');
	bson_error_t error;
	const bson_t *doc;
	bson_t **docs = NULL;
	size_t n = 0, cap = 0;
	index_set *set = NULL;

	err[0] = '\0';
	if (dot == NULL || (size_t)(dot - ns) >= sizeof db)
		return NULL;
	memcpy(db, ns, (size_t)(dot - ns));
	db[dot - ns] = '\0';

	mongoc_collection_t *c = mongoc_client_get_collection(client, db, dot + 1);
	mongoc_cursor_t *cur = mongoc_collection_find_indexes_with_opts(c, NULL);
	bool oom = false;
	while (!oom && mongoc_cursor_next(cur, &doc)) {
		if (n == cap) {
			size_t ncap = cap == 0 ? 8 : cap * 2;
			bson_t **grown = realloc(docs, ncap * sizeof *docs);
			if (grown == NULL) {
				oom = true;
				break;
			}
			docs = grown;
			cap = ncap;
		}
		docs[n++] = bson_copy(doc);
	}
	if (mongoc_cursor_error(cur, &error)) {
		/* libmongoc already turns NamespaceNotFound into an empty list;
		 * older drivers and some servers do not. */
		if (error.domain == MONGOC_ERROR_SERVER && error.code == CODE_NAMESPACE_NOT_FOUND)
			set = index_set_new_opaque("the collection does not exist");
		else if (error.domain == MONGOC_ERROR_SERVER && error.code == CODE_NOT_ON_VIEW)
			set = index_set_new_opaque("the namespace is a view");
		else
			snprintf(err, errlen, "%s", error.message);
	} else if (!oom && n == 0) {
		/* Every collection has an _id index; no index at all means no
		 * collection (time-series collections list their own). */
		set = index_set_new_opaque("the collection does not exist");
	} else if (!oom) {
		set = index_set_from_specs((const bson_t *const *)docs, n);
		if (set != NULL && !has_id_index(set)) {
			/* Time-series collections (whose sorts run over buckets) and
			 * system collections like the oplog: not what the rule models. */
			index_set_release(set);
			set =
			    index_set_new_opaque("the collection has no _id index (time-series?)");
		} else if (set != NULL) {
			index_set_set_doc_count(set, estimated_count(c));
			learn_multikey(client, db, dot + 1, set);
		}
	}
	for (size_t i = 0; i < n; i++)
		bson_destroy(docs[i]);
	free(docs);
	mongoc_cursor_destroy(cur);
	mongoc_collection_destroy(c);
	return set;
}
