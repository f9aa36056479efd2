/* --indexes-from (live.h). One libmongoc client, used before the second
 * pass, so the engine reads a cache that is already complete. */
#include "report/live.h"

#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/capture.h"

#define LIVE_MAX_NS 4096

typedef struct live_stat {
	char ns[256];
	char name[128];
	int64_t ops;
} live_stat;

struct live_ctx {
	mongoc_client_t *client;
	char (*ns)[256];
	size_t nns;
	live_stat *stats;
	size_t nstats, capstats;
};

live_ctx *live_new(const char *uri, char *err, size_t errlen)
{
	bson_error_t e;
	mongoc_uri_t *u = mongoc_uri_new_with_error(uri, &e);
	if (!u) {
		snprintf(err, errlen, "--indexes-from: %s", e.message);
		return NULL;
	}
	live_ctx *l = calloc(1, sizeof *l);
	if (l)
		l->ns = calloc(LIVE_MAX_NS, sizeof *l->ns);
	if (l && l->ns) {
		mongoc_uri_set_appname(u, "mongoguard-report");
		l->client = mongoc_client_new_from_uri_with_error(u, &e);
	}
	mongoc_uri_destroy(u);
	if (!l || !l->ns || !l->client) {
		snprintf(err, errlen, "--indexes-from: %s",
		         l && l->ns ? e.message : "out of memory");
		live_free(l);
		return NULL;
	}
	return l;
}

void live_note_record(live_ctx *l, const bson_t *rec)
{
	bson_iter_t it;
	if (capture_kind(rec) != CAPTURE_REC_REQUEST || !bson_iter_init_find(&it, rec, "ns") ||
	    !BSON_ITER_HOLDS_UTF8(&it))
		return;
	const char *ns = bson_iter_utf8(&it, NULL);
	if (strstr(ns, ".$cmd") || strstr(ns, ".system."))
		return;
	for (size_t i = 0; i < l->nns; i++)
		if (!strcmp(l->ns[i], ns))
			return;
	if (l->nns < LIVE_MAX_NS)
		snprintf(l->ns[l->nns++], sizeof l->ns[0], "%s", ns);
}

static void index_stats(live_ctx *l, mongoc_collection_t *coll, const char *ns)
{
	bson_t *pipeline = BCON_NEW("pipeline", "[", "{", "$indexStats", "{", "}", "}", "]");
	mongoc_cursor_t *cur =
	    mongoc_collection_aggregate(coll, MONGOC_QUERY_NONE, pipeline, NULL, NULL);
	const bson_t *doc;
	while (mongoc_cursor_next(cur, &doc)) {
		bson_iter_t it, a;
		if (!bson_iter_init_find(&it, doc, "name") || !BSON_ITER_HOLDS_UTF8(&it))
			continue;
		if (l->nstats == l->capstats) {
			size_t nc = l->capstats ? l->capstats * 2 : 64;
			live_stat *ns2 = realloc(l->stats, nc * sizeof *ns2);
			if (!ns2)
				break;
			l->stats = ns2;
			l->capstats = nc;
		}
		live_stat *s = &l->stats[l->nstats++];
		snprintf(s->ns, sizeof s->ns, "%s", ns);
		snprintf(s->name, sizeof s->name, "%s", bson_iter_utf8(&it, NULL));
		s->ops = bson_iter_init_find(&a, doc, "accesses") &&
		                 bson_iter_find_descendant(&a, "ops", &it) &&
		                 BSON_ITER_HOLDS_NUMBER(&it)
		             ? bson_iter_as_int64(&it)
		             : -1;
	}
	mongoc_cursor_destroy(cur); /* a server without $indexStats: counts stay unknown */
	bson_destroy(pipeline);
}

bool live_fetch(live_ctx *l, aggregator *a, char *err, size_t errlen)
{
	bson_error_t e;
	bson_t ping = BSON_INITIALIZER;
	BSON_APPEND_INT32(&ping, "ping", 1);
	bool up = mongoc_client_command_simple(l->client, "admin", &ping, NULL, NULL, &e);
	bson_destroy(&ping);
	if (!up) {
		snprintf(err, errlen, "--indexes-from: cannot reach the server: %s", e.message);
		return false;
	}
	for (size_t i = 0; i < l->nns; i++) {
		char db[128];
		const char *dot = strchr(l->ns[i], '.');
		if (!dot || (size_t)(dot - l->ns[i]) >= sizeof db)
			continue;
		memcpy(db, l->ns[i], (size_t)(dot - l->ns[i]));
		db[dot - l->ns[i]] = '\0';
		mongoc_collection_t *coll = mongoc_client_get_collection(l->client, db, dot + 1);
		mongoc_cursor_t *cur = mongoc_collection_find_indexes_with_opts(coll, NULL);
		const bson_t *doc;
		bson_t *specs[256];
		size_t n = 0;
		while (n < 256 && mongoc_cursor_next(cur, &doc))
			specs[n++] = bson_copy(doc);
		if (!mongoc_cursor_error(cur, &e) && n)
			aggregator_put_indexes(a, l->ns[i], (const bson_t *const *)specs, n);
		for (size_t k = 0; k < n; k++)
			bson_destroy(specs[k]);
		mongoc_cursor_destroy(cur);
		index_stats(l, coll, l->ns[i]);
		mongoc_collection_destroy(coll);
	}
	(void)a;
	return true;
}

void live_apply(live_ctx *l, model *m)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nstats; i++)
		for (size_t n = 0; n < m->nnss; n++)
			if (!strcmp(m->nss[n].ns, l->stats[i].ns))
				for (size_t k = 0; k < m->nss[n].nindexes; k++)
					if (!strcmp(m->nss[n].indexes[k].name, l->stats[i].name))
						m->nss[n].indexes[k].ops = l->stats[i].ops;
}

void live_free(live_ctx *l)
{
	if (!l)
		return;
	if (l->client)
		mongoc_client_destroy(l->client);
	free(l->ns);
	free(l->stats);
	free(l);
}
