/* Whether the upstream answers, said in the log at start-up and whenever it
 * changes ("Upstream reachable", "Upstream unreachable: <reason>"), and
 * asked by /readyz, so the log and readiness tell one story.
 *
 * The probe is the one /readyz always made: a TCP connection to the
 * upstream within a second, closed at once. A thread probes every
 * WATCH_UP_SECS while it answers (sooner when sessions start failing to
 * connect: the failures counter grows), every second while it does not.
 * Each probe is a connection in the server's log, hence the slow pace while
 * all is well.
 *
 * Which upstream: the one a session accepted now would be given. DNS can
 * move it while the proxy runs, so the watch asks for it at every probe
 * and every tick instead of keeping the start-up address; a new address is
 * probed at the next tick, and the line it gets names it. */
#ifndef MG_PROXY_RUNTIME_UPSTREAM_WATCH_H
#define MG_PROXY_RUNTIME_UPSTREAM_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/net/address.h"

typedef struct upstream_watch upstream_watch;

/* What the watch reads, from its own thread and from upstream_watch_probe's
 * callers (so both must be thread-safe). target fills *up with the address
 * to probe now; failures (may be NULL) is a count that grows when sessions
 * cannot connect. arg outlives the watch. */
typedef struct upstream_watch_sources {
	void (*target)(void *arg, net_addr *up);
	uint64_t (*failures)(void *arg);
	void *arg;
} upstream_watch_sources;

/* NULL with err set when the thread cannot start. */
upstream_watch *upstream_watch_start(const upstream_watch_sources *src, char *err, size_t errlen);
/* Joins the thread (within a probe's timeout) and frees. NULL-safe. */
void upstream_watch_stop(upstream_watch *w);

/* Probes the target now, logs a change (of the answer, or of the address
 * probed), and says whether the upstream answered (why not, in why). Any
 * thread. */
bool upstream_watch_probe(upstream_watch *w, char *why, size_t whylen);

/* The probe alone: a TCP connection to up within timeout_ms. */
bool upstream_probe(const net_addr *up, int timeout_ms, char *why, size_t whylen);

#endif
