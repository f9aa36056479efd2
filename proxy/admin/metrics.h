/* The numbers the admin endpoint exposes as Prometheus text (docs/operations.md,
 * "Metrics": names prefixed mongoguard_, label sets bounded: rule, action,
 * command, direction; never namespaces or shapes).
 *
 * The request path writes without contention: each worker has its own
 * shard, written by that worker's thread alone (a relaxed load and store, no
 * locked instruction), and a scrape sums the shards. The few counters
 * written from several threads (findings, refusals on the listener) are
 * atomic adds; they are off the per-request path. */
#ifndef MG_PROXY_ADMIN_METRICS_H
#define MG_PROXY_ADMIN_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzers/engine/rule_config.h"
#include "analyzers/rules/rules.h"
#include "protocol/commands.h"
#include "protocol/text.h"

typedef _Atomic uint64_t mx_counter;

/* One writer thread only: a plain increment that a scraper may read. */
static inline void mx_add(mx_counter *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
	                      memory_order_relaxed);
}

/* Any thread. */
static inline void mx_add_shared(mx_counter *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* Commands as labels: each row of the command table says its label
 * (protocol/commands.h, cmd_label); an unknown name is "other". */
typedef cmd_label mx_command;
#define MX_CMD_LABELS CMD_LABELS

/* The label of a command the table knows by id (a request's, looked up
 * once when it was decoded); CMD_NONE's is "other". */
static inline mx_command mx_command_by_id(cmd_id id)
{
	return cmd_rows[id].label;
}

/* The label of a command name as sent (NULL: "other"). */
static inline mx_command mx_command_of(const char *name)
{
	return mx_command_by_id(cmd_find(name));
}

static inline const char *mx_command_name(mx_command c)
{
	return cmd_label_name(c);
}

typedef enum {
	MX_DIR_REQUEST, /* client -> upstream */
	MX_DIR_REPLY,   /* upstream -> client */
	MX_DIRS,
} mx_direction;

/* Actions as labels: every rule_action. */
#define MX_ACTIONS (RULE_BLOCK + 1)

/* Why a rule gave no verdict on a request (mongoguard_verdicts_skipped_total):
 * the facts it reads (an index list, a document count) did not come. */
typedef enum {
	MX_SKIP_WAIT_EXPIRED,   /* a held request's wait (analysis.indexWaitMS) ran out */
	MX_SKIP_NEVER_CAME,     /* a late verdict's facts did not come in time, or the
	                           connection ended first */
	MX_SKIP_NO_ROOM,        /* too many late verdicts owed at once, or a request
	                           too large to keep a copy of */
	MX_SKIP_SCHEMA_CHANGED, /* a schema change named a late verdict's collection
	                           before its facts came: a list fetched after it
	                           need not be the one the request ran with */
	MX_SKIP_REASONS,
} mx_skip_reason;

/* Histogram bounds in nanoseconds (Prometheus "le", shown in seconds):
 * 1 us .. 10 s, so one set serves analysis (around a microsecond) and
 * round trips (loopback tens of microseconds, blocking sorts seconds). */
#define MX_HIST_BUCKETS 20
extern const uint64_t mx_hist_bounds_ns[MX_HIST_BUCKETS];

typedef struct mx_hist {
	mx_counter bucket[MX_HIST_BUCKETS + 1]; /* the last one is +Inf */
	mx_counter count;
	mx_counter sum_ns;
} mx_hist;

/* One writer: the shard's worker thread. */
void mx_observe(mx_hist *h, uint64_t ns);

/* Written by one worker thread. */
typedef struct metrics_shard {
	mx_counter accepted;
	mx_counter messages[MX_DIRS];
	mx_counter bytes[MX_DIRS];
	mx_counter commands[MX_CMD_LABELS];
	mx_counter blocked[RULE_COUNT];
	mx_counter skipped[RULE_COUNT][MX_SKIP_REASONS];
	mx_counter bad_requests;
	mx_counter upstream_connect_failures;
	mx_counter repeats; /* judged by the connection's template (engine_repeat) */
	mx_hist latency;    /* request forwarded -> first byte of its reply */
	mx_hist analysis;   /* time in engine_analyze */
} metrics_shard;

typedef struct metrics {
	metrics_shard *shards; /* one per worker */
	size_t nshards;
	const atomic_uint *connections; /* open now */
	mx_counter refused;             /* at accept: maxConnections, out of memory */
	mx_counter accept_pauses;       /* accepting paused: out of descriptors */
	mx_counter findings[RULE_COUNT][MX_ACTIONS];
	mx_counter reloads_ok, reloads_failed;
	mx_counter index_lists_learned; /* the index cache's change notices */
	mx_counter index_fetch_failures;
	mx_counter sink_written, sink_dropped; /* the findings collection sink */
	const char *version;
} metrics;

/* shards zeroed; NULL-safe free. */
metrics *metrics_new(size_t nshards, const atomic_uint *connections, const char *version);
void metrics_free(metrics *m);

/* The whole exposition, Prometheus text format 0.0.4. Sized by the caller;
 * metrics_text_size() is enough for any content. */
void metrics_render(const metrics *m, text_buf *out);
size_t metrics_text_size(void);

#endif
