/* Whether the upstream answers, said in the log at start-up and whenever it
 * changes ("Upstream reachable", "Upstream unreachable: <reason>"), and
 * asked by /readyz, so the log and readiness tell one story.
 *
 * The probe is the one /readyz always made: a TCP connection to the
 * upstream within a second, closed at once. A thread probes every
 * WATCH_UP_SECS while it answers (sooner when sessions start failing to
 * connect: the failures counter grows), every second while it does not.
 * Each probe is a connection in the server's log, hence the slow pace while
 * all is well. */
#ifndef MG_PROXY_RUNTIME_UPSTREAM_WATCH_H
#define MG_PROXY_RUNTIME_UPSTREAM_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/net/address.h"

typedef struct upstream_watch upstream_watch;

/* up outlives the watch. failures (may be NULL): a count that grows when
 * sessions cannot connect, read from the watch's thread. NULL with err set
 * when the thread cannot start. */
upstream_watch *upstream_watch_start(const net_addr *up, uint64_t (*failures)(void *arg), void *arg,
                                     char *err, size_t errlen);
/* Joins the thread (within a probe's timeout) and frees. NULL-safe. */
void upstream_watch_stop(upstream_watch *w);

/* Probes now, logs a change, and says whether the upstream answered (why
 * not, in why). Any thread. */
bool upstream_watch_probe(upstream_watch *w, char *why, size_t whylen);

/* The probe alone: a TCP connection to up within timeout_ms. */
bool upstream_probe(const net_addr *up, int timeout_ms, char *why, size_t whylen);

#endif
