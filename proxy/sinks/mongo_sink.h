/* The fleet view: findings written, batched and asynchronously, to a
 * collection on a MongoDB deployment (sinks.mongodb), with the instance's
 * name on every record, so many mongoguard instances aggregate in one place
 * any MongoDB tool can query.
 *
 * The request path never waits on it: mongo_sink_push() builds the record
 * and appends it to a bounded queue, or drops it (counted) when the queue
 * is full. A thread of its own writes batches with insertMany, creates a TTL
 * index on `t` at its first connection, retries with backoff (100 ms
 * doubling to 30 s) while the deployment is away, and logs once when it
 * starts dropping or failing and once when it recovers. */
#ifndef MG_PROXY_SINKS_MONGO_SINK_H
#define MG_PROXY_SINKS_MONGO_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzers/engine/finding.h"
#include "proxy/admin/metrics.h"

typedef struct mongo_sink_config {
	char uri[2048];       /* "" = off */
	char database[128];   /* default "mongoguard" */
	char collection[128]; /* default "findings" */
	uint32_t ttl_days;    /* records expire after this; default 30 */
	uint32_t queue_size;  /* records waiting at most; default 10000 */
	uint32_t batch_size;  /* records per insertMany at most; default 500 */
	uint32_t flush_ms;    /* longest a record waits before a batch goes; default 1000 */
} mongo_sink_config;

typedef struct mongo_sink mongo_sink;

void mongo_sink_defaults(mongo_sink_config *c);

/* Starts the writer thread (it connects on its own; a deployment that is
 * away at start is retried like any outage). NULL with err set when the
 * URI does not parse or memory runs out. instance: the name on every
 * record. m: counters (written, dropped), may be NULL. */
mongo_sink *mongo_sink_start(const mongo_sink_config *c, const char *instance, metrics *m,
                             char *err, size_t errlen);

/* Any thread; never blocks on the network. */
void mongo_sink_push(mongo_sink *s, const finding *f);

/* Writes what is queued, stops the thread, frees everything. While the
 * deployment is away, one last try (bounded by the URI's
 * serverSelectionTimeoutMS, 2 s unless it says otherwise), then what is
 * left is dropped and counted. NULL-safe. */
void mongo_sink_stop(mongo_sink *s);

#endif
