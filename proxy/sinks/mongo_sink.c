/* The findings collection writer (see mongo_sink.h). */
#include "proxy/sinks/mongo_sink.h"

#include <errno.h>
#include <mongoc/mongoc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyzers/rules/rules.h"
#include "proxy/sinks/log.h"

enum {
	BACKOFF_MIN_MS = 100,
	BACKOFF_MAX_MS = 30000,
	SELECT_TIMEOUT_MS = 2000, /* a deployment that is away fails fast, then backs off */
};

struct mongo_sink {
	mongo_sink_config cfg;
	char instance[256];
	metrics *m;
	mongoc_uri_t *uri;

	pthread_mutex_t lock; /* guards the queue and `stopping` */
	pthread_cond_t wake;
	bson_t **queue; /* ring of cfg.queue_size records */
	size_t head, count;
	bool stopping;
	uint64_t dropped; /* since the last "resumed" line */
	bool dropping;    /* the "started dropping" line was written */

	pthread_t thread;
	bool started;
};

void mongo_sink_defaults(mongo_sink_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->database, sizeof(c->database), "mongoguard");
	snprintf(c->collection, sizeof(c->collection), "findings");
	c->ttl_days = 30;
	c->queue_size = 10000;
	c->batch_size = 500;
	c->flush_ms = 1000;
}

static void add_timespec_ms(struct timespec *ts, uint32_t ms)
{
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* ---- records ---- */

static bson_t *record_of(const mongo_sink *s, const finding *f)
{
	bson_t *b = bson_new();
	char hash[17];
	snprintf(hash, sizeof(hash), "%016llx", (unsigned long long)f->shape_hash);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	BSON_APPEND_DATE_TIME(b, "t", (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000);
	BSON_APPEND_UTF8(b, "instance", s->instance);
	BSON_APPEND_UTF8(b, "kind", f->repeats ? "summary" : "first");
	BSON_APPEND_UTF8(b, "rule", rule_name(f->rule));
	BSON_APPEND_UTF8(b, "action", rule_action_name(f->action));
	BSON_APPEND_UTF8(b, "ns", f->ns ? f->ns : "");
	BSON_APPEND_UTF8(b, "command", f->command ? f->command : "");
	BSON_APPEND_UTF8(b, "shapeHash", hash);
	/* the shape as a document when it is JSON (it is, redacted or not) */
	bson_t *shape = f->shape && f->shape[0] == '{'
	                    ? bson_new_from_json((const uint8_t *)f->shape, -1, NULL)
	                    : NULL;
	if (shape) {
		BSON_APPEND_DOCUMENT(b, "shape", shape);
		bson_destroy(shape);
	} else {
		BSON_APPEND_UTF8(b, "shape", f->shape ? f->shape : "");
	}
	BSON_APPEND_UTF8(b, "suggestion", f->suggestion ? f->suggestion : "");
	BSON_APPEND_UTF8(b, "detail", f->detail ? f->detail : "");
	BSON_APPEND_UTF8(b, "appName", f->app_name ? f->app_name : "");
	BSON_APPEND_UTF8(b, "client", f->client ? f->client : "");
	BSON_APPEND_INT64(b, "repeats", (int64_t)f->repeats);
	if (f->would_block)
		BSON_APPEND_UTF8(b, "wouldBlock", f->would_block);
	if (f->sampled_out)
		BSON_APPEND_UTF8(b, "decidedBy", "sample");
	if (f->late)
		BSON_APPEND_BOOL(b, "late", true);
	return b;
}

void mongo_sink_push(mongo_sink *s, const finding *f)
{
	bson_t *rec = record_of(s, f);
	bool log_drop = false;
	pthread_mutex_lock(&s->lock);
	if (s->count == s->cfg.queue_size) {
		s->dropped++;
		log_drop = !s->dropping;
		s->dropping = true;
		pthread_mutex_unlock(&s->lock);
		bson_destroy(rec);
		if (s->m)
			mx_add_shared(&s->m->sink_dropped, 1);
		if (log_drop)
			log_reason(LOG_WARNING, "ANALYZER", LOGID_SINK, NULL,
			           "Findings collection sink: queue full (%u records); dropping "
			           "findings until it drains",
			           s->cfg.queue_size);
		return;
	}
	s->queue[(s->head + s->count) % s->cfg.queue_size] = rec;
	s->count++;
	if (s->count >= s->cfg.batch_size)
		pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}

/* ---- the writer thread ---- */

/* Up to batch_size records off the queue, into batch; waits for a full
 * batch or flush_ms. Returns how many; 0 with *stop when stopping. */
static size_t take_batch(mongo_sink *s, bson_t **batch, bool *stop)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	add_timespec_ms(&until, s->cfg.flush_ms);
	pthread_mutex_lock(&s->lock);
	while (!s->stopping && s->count < s->cfg.batch_size)
		if (pthread_cond_timedwait(&s->wake, &s->lock, &until) == ETIMEDOUT)
			break;
	size_t n = s->count < s->cfg.batch_size ? s->count : s->cfg.batch_size;
	for (size_t i = 0; i < n; i++) {
		batch[i] = s->queue[s->head];
		s->head = (s->head + 1) % s->cfg.queue_size;
	}
	s->count -= n;
	*stop = s->stopping && s->count == 0;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static bool ensure_ttl_index(mongo_sink *s, mongoc_client_t *c, bson_error_t *err)
{
	bson_t *cmd =
	    BCON_NEW("createIndexes", BCON_UTF8(s->cfg.collection), "indexes", "[", "{", "key", "{",
	             "t", BCON_INT32(1), "}", "name", BCON_UTF8("t_ttl"), "expireAfterSeconds",
	             BCON_INT64((int64_t)s->cfg.ttl_days * 86400), "}", "]");
	bool ok = mongoc_client_command_simple(c, s->cfg.database, cmd, NULL, NULL, err);
	bson_destroy(cmd);
	if (!ok && err->code == 238) { /* NotImplemented (FerretDB, for one) */
		log_line *l =
		    log_begin(LOG_WARNING, "ANALYZER", LOGID_SINK, NULL,
		              "Findings collection sink: the deployment cannot create a TTL "
		              "index, so records will not expire; writing without one");
		log_attr_str(l, "error", err->message);
		log_end(l);
		return true;
	}
	return ok;
}

static bool write_batch(mongo_sink *s, mongoc_client_t *c, bool *indexed, bson_t **batch, size_t n,
                        bson_error_t *err)
{
	if (!*indexed && !(*indexed = ensure_ttl_index(s, c, err)))
		return false;
	mongoc_collection_t *coll =
	    mongoc_client_get_collection(c, s->cfg.database, s->cfg.collection);
	bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
	bool ok = mongoc_collection_insert_many(coll, (const bson_t **)batch, n, opts, NULL, err);
	bson_destroy(opts);
	mongoc_collection_destroy(coll);
	return ok;
}

static void note_outage(mongo_sink *s, bool *failing, const bson_error_t *err)
{
	if (*failing)
		return;
	*failing = true;
	log_line *l = log_begin(LOG_WARNING, "ANALYZER", LOGID_SINK, NULL,
	                        "Findings collection sink cannot write; retrying with backoff");
	log_attr_str(l, "database", s->cfg.database);
	log_attr_str(l, "collection", s->cfg.collection);
	log_attr_str(l, "error", err->message);
	log_end(l);
}

static void note_recovery(mongo_sink *s, bool *failing)
{
	pthread_mutex_lock(&s->lock);
	uint64_t dropped = s->dropped;
	bool was_dropping = s->dropping;
	s->dropped = 0;
	s->dropping = false;
	pthread_mutex_unlock(&s->lock);
	if (!*failing && !was_dropping)
		return;
	*failing = false;
	log_line *l = log_begin(LOG_INFO, "ANALYZER", LOGID_SINK, NULL,
	                        "Findings collection sink writing again");
	log_attr_int(l, "droppedMeanwhile", (int64_t)dropped);
	log_end(l);
}

/* Sleeps ms unless the sink is told to stop; true when it was. */
static bool backoff_sleep(mongo_sink *s, uint32_t ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	add_timespec_ms(&until, ms);
	pthread_mutex_lock(&s->lock);
	while (!s->stopping)
		if (pthread_cond_timedwait(&s->wake, &s->lock, &until) == ETIMEDOUT)
			break;
	bool stop = s->stopping;
	pthread_mutex_unlock(&s->lock);
	return stop;
}

/* Writes one batch, retrying with backoff while the deployment is away.
 * Once stopping, one last try; after a failed last try (*give_up) the rest
 * is dropped without trying, so shutdown stays bounded. */
static bool write_with_retry(mongo_sink *s, mongoc_client_t *c, bool *indexed, bson_t **batch,
                             size_t n, bool *failing, bool *give_up)
{
	static uint32_t backoff = BACKOFF_MIN_MS; /* only the writer thread runs this */
	bson_error_t err;
	if (*give_up)
		return false;
	while (!write_batch(s, c, indexed, batch, n, &err)) {
		note_outage(s, failing, &err);
		if (backoff_sleep(s, backoff)) {
			if (write_batch(s, c, indexed, batch, n, &err))
				break;
			*give_up = true;
			return false;
		}
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	backoff = BACKOFF_MIN_MS;
	return true;
}

static void *writer_main(void *arg)
{
	mongo_sink *s = arg;
	mongoc_client_t *c = mongoc_client_new_from_uri(s->uri);
	bson_t **batch = calloc(s->cfg.batch_size, sizeof(*batch));
	bool indexed = false, failing = false, give_up = false, stop = false;
	if (c)
		mongoc_client_set_appname(c, "mongoguard-findings-sink");
	while (c && batch && !stop) {
		size_t n = take_batch(s, batch, &stop);
		if (n == 0)
			continue;
		if (write_with_retry(s, c, &indexed, batch, n, &failing, &give_up)) {
			if (s->m)
				mx_add_shared(&s->m->sink_written, n);
			note_recovery(s, &failing);
		} else if (s->m) {
			mx_add_shared(&s->m->sink_dropped, n);
		}
		for (size_t i = 0; i < n; i++)
			bson_destroy(batch[i]);
	}
	free(batch);
	if (c)
		mongoc_client_destroy(c);
	return NULL;
}

mongo_sink *mongo_sink_start(const mongo_sink_config *c, const char *instance, metrics *m,
                             char *err, size_t errlen)
{
	bson_error_t berr;
	mongo_sink *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->cfg = *c;
	s->m = m;
	snprintf(s->instance, sizeof(s->instance), "%s", instance);
	s->uri = mongoc_uri_new_with_error(c->uri, &berr);
	s->queue = calloc(c->queue_size ? c->queue_size : 1, sizeof(*s->queue));
	if (!s->uri || !s->queue) {
		snprintf(err, errlen, "sinks.mongodb.uri: %s",
		         s->uri ? "out of memory" : berr.message);
		mongo_sink_stop(s);
		return NULL;
	}
	if (!mongoc_uri_has_option(s->uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
		mongoc_uri_set_option_as_int32(s->uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
		                               SELECT_TIMEOUT_MS);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	s->started = pthread_create(&s->thread, NULL, writer_main, s) == 0;
	if (!s->started) {
		snprintf(err, errlen, "cannot start the findings sink thread");
		pthread_cond_destroy(&s->wake);
		pthread_mutex_destroy(&s->lock);
		mongoc_uri_destroy(s->uri);
		free(s->queue);
		free(s);
		return NULL;
	}
	log_line *l =
	    log_begin(LOG_INFO, "ANALYZER", LOGID_SINK, NULL, "Findings collection sink started");
	log_attr_str(l, "database", c->database);
	log_attr_str(l, "collection", c->collection);
	log_attr_str(l, "instance", s->instance);
	log_end(l);
	return s;
}

void mongo_sink_stop(mongo_sink *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		s->stopping = true;
		pthread_cond_broadcast(&s->wake);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
		pthread_cond_destroy(&s->wake);
		pthread_mutex_destroy(&s->lock);
	}
	for (size_t i = 0; i < s->count; i++)
		bson_destroy(s->queue[(s->head + i) % s->cfg.queue_size]);
	free(s->queue);
	if (s->uri)
		mongoc_uri_destroy(s->uri);
	free(s);
}
