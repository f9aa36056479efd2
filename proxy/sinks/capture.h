/* The capture writer: records requests, replies and index lists into
 * capture files (protocol/capture.h is the format) on a thread of its own.
 *
 * The request path only copies bytes into an item and appends it to a
 * bounded queue (a count and a byte budget); when the queue is full the
 * item is dropped and counted, never waited for. The writer thread turns
 * items into records (redaction, reply inspection and document sampling
 * all happen there), writes them, rotates files by size and age, deletes
 * the oldest files beyond the total cap, writes a gap record for what was
 * dropped (and logs it), and asks the index cache for each namespace's
 * index list, writing a snapshot whenever the list it gets is a new one. */
#ifndef MG_PROXY_SINKS_CAPTURE_H
#define MG_PROXY_SINKS_CAPTURE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzers/engine/engine.h"
#include "protocol/capture.h"

typedef struct index_cache index_cache;

/* capture.* in the configuration (README, "Configuration"). */
typedef struct capture_settings {
	char dir[1024];           /* "" = capture off */
	bool redact_literals;     /* true: shapes only; false: whole requests */
	bool value_hashes;        /* false: no request's vh, no reply's vals (capture.h) */
	uint32_t max_file_mb;     /* rotate when a file reaches this */
	uint32_t rotate_secs;     /* ... or is this old */
	uint32_t max_total_mb;    /* oldest files deleted beyond this */
	uint32_t queue_mb;        /* bytes waiting for the writer, at most */
	uint32_t max_reply_kb;    /* bigger replies are recorded by size only */
	uint32_t reply_sample;    /* every Nth reply gets document sizes measured */
	uint64_t max_file_bytes;  /* tests: overrides max_file_mb when set */
	uint64_t max_total_bytes; /* tests: overrides max_total_mb when set */
	uint64_t queue_bytes;     /* tests: overrides queue_mb when set */
	uint64_t event_hold_us;   /* tests: how long a list or forgetting is held at most
	                             (0: 0.1 s), so an order test does not race the clock */
} capture_settings;

void capture_settings_defaults(capture_settings *s);

typedef struct capture_sink capture_sink;

typedef struct capture_stats {
	uint64_t records; /* written */
	uint64_t dropped; /* lost to a full queue */
	uint64_t files;   /* opened */
	uint64_t deleted; /* removed by the size cap */
} capture_stats;

/* rules: the engine configuration for the header (copied; may be NULL). ic:
 * where index lists come from (NULL: none). NULL with err set when dir
 * cannot be used. The thread starts with capture_sink_start(). */
capture_sink *capture_sink_new(const capture_settings *s, const char *version, const bson_t *rules,
                               index_cache *ic, char *err, size_t errlen);
bool capture_sink_start(capture_sink *c, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* Writes what is queued, closes the file, stops the thread, frees. final
 * (may be NULL) gets the last figures. */
void capture_sink_free(capture_sink *c, capture_stats *final);

/* ---- the request path (any worker thread) ---- */

/* Copies msg. verdict: "forward" or "block". judged_at: the request's
 * block_info.judged_at (0: it was judged with no index list). The writer
 * puts the request after every index list and schema change the cache
 * saw up to judged_at and before any later one, though another thread
 * may have queued one of those between the verdict and this call: the
 * report's replay then judges it with the lists it was judged with, and a
 * verdict it owed across the same schema changes. counts: the document
 * counts its verdict read (block_info.counts; NULL or none: no "counts"),
 * written with it, which the replay judges with. */
void capture_sink_request(capture_sink *c, const capture_origin *o, const uint8_t *msg, size_t len,
                          const char *outcome, uint64_t judged_at, const engine_counts *counts);

/* A reply is starting: a buffer for its len bytes (owned by the caller
 * until capture_sink_reply), or NULL when it is too big or the queue has
 * no room (the reply is then recorded by size alone). */
uint8_t *capture_sink_reply_buffer(capture_sink *c, size_t len);
/* The reply ended; bytes (from capture_sink_reply_buffer, or NULL) is
 * taken over. */
void capture_sink_reply(capture_sink *c, const capture_origin *o, int32_t response_to, size_t len,
                        uint8_t *bytes);

/* SIGUSR1: the writer starts a new file before its next record (or at its
 * next wake-up, within a second). Any thread; never waits. */
void capture_sink_rotate(capture_sink *c);

/* So far; records and files are the writer's and may lag. */
void capture_sink_get_stats(capture_sink *c, capture_stats *st);

/* Wall clock in microseconds, as records carry it. */
int64_t capture_now_us(void);

#endif
