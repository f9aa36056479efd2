/* Late verdicts: requests that went on before the facts some rule reads
 * were known (engine_late in analyzers/engine/engine.h), kept as copies and judged
 * again by those rules alone when the index cache changes, until they are
 * judged or LATE_WAIT_MS has passed (late_queue_expire, whether or not
 * anything changed). One queue per worker, outliving the
 * connection that sent them: a test suite or a batch job often closes its
 * connection right after its last query. Only the worker's thread touches
 * its queue. */
#ifndef MG_PROXY_SESSION_LATE_H
#define MG_PROXY_SESSION_LATE_H

#include <stddef.h>
#include <stdint.h>

#include "analyzers/engine/engine.h"
#include "proxy/admin/metrics.h"

enum {
	LATE_QUEUE_MAX = 256,      /* owed at once per worker */
	LATE_COPY_MAX = 64 * 1024, /* the largest request kept for it */
	LATE_WAIT_MS = 30000,
};

typedef struct late_queue late_queue;

/* mx: the worker's counters (mongoguard_verdicts_skipped_total). NULL
 * when out of memory. */
late_queue *late_queue_new(metrics_shard *mx);

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

/* Counts rules (bit r: rule r) as given no verdict, for why. */
void late_count_skipped(metrics_shard *mx, uint32_t rules, mx_skip_reason why);

#endif
