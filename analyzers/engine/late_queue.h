/* Late verdicts: requests that went on before the facts some rule reads
 * were known (engine_late in analyzers/engine/engine.h), kept as copies and judged
 * again by those rules alone when the index cache changes, until they are
 * judged or LATE_WAIT_MS has passed (late_queue_expire, whether or not
 * anything changed). The proxy keeps one queue per worker, outliving the
 * connection that sent them: a test suite or a batch job often closes its
 * connection right after its last query. The report's replay keeps one,
 * judged when a capture's index list is met, on the capture's clock. Only
 * one thread touches a queue. */
#ifndef MG_ANALYZERS_ENGINE_LATE_QUEUE_H
#define MG_ANALYZERS_ENGINE_LATE_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "analyzers/engine/engine.h"

enum {
	LATE_QUEUE_MAX = 256,      /* owed at once per worker */
	LATE_COPY_MAX = 64 * 1024, /* the largest request kept for it */
	LATE_WAIT_MS = 30000,
};

typedef struct late_queue late_queue;

/* Why verdicts owed are never given. */
typedef enum {
	LATE_LOST_NO_ROOM,        /* the queue was full, or the request too large to keep */
	LATE_LOST_NEVER_CAME,     /* the facts did not come within LATE_WAIT_MS */
	LATE_LOST_SCHEMA_CHANGED, /* a schema change named the collection first (engine_late) */
} late_loss;

/* Told the rules (bit r: rule r) whose verdicts are lost, and why (the
 * proxy counts them in mongoguard_verdicts_skipped_total). */
typedef void (*late_lost_fn)(void *arg, uint32_t rules, late_loss why);

/* lost (may be NULL) and its arg. NULL when out of memory. */
late_queue *late_queue_new(late_lost_fn lost, void *arg);

/* Frees the queue; what is still owed is counted as never given. */
void late_queue_free(late_queue *q);

/* The request (msg: its decoded bytes, as request_decode reads them) owes
 * the verdicts in `owed`; app, client and conn (its connection's number) are
 * the sender's, for the findings. A full queue or a request over LATE_COPY_MAX is counted
 * instead (no_room). */
void late_queue_owe(late_queue *q, const uint8_t *msg, size_t len, const engine_late *owed,
                    const char *app, const char *client, uint64_t conn, int64_t now_ms);

/* The index cache changed: every request owed is judged again by the
 * rules it owes (e NULL: analysis is off now, they are dropped). */
void late_queue_judge(late_queue *q, engine *e, int64_t now_ms);

/* Drops what has been owed LATE_WAIT_MS by now, counted as never given
 * (facts_never_came), without judging anything: the worker's maintenance
 * step calls it, since a list that never comes (a failed listIndexes)
 * changes nothing that would call late_queue_judge. Cheap when nothing is
 * owed. */
void late_queue_expire(late_queue *q, int64_t now_ms);

/* How many requests are owed verdicts now (at most LATE_QUEUE_MAX): for
 * tests and fuzz_late, which check the queue's bounds from outside. */
unsigned late_queue_size(const late_queue *q);

#endif
