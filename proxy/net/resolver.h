/* The resolver thread: resolves the upstream's names again (SRV and TXT
 * for mongodb+srv://, and every host name) every refresh_secs, and soon
 * after connecting upstream fails, and publishes new routes when the
 * answer changed (routes.h). DNS can be slow, so it runs on its own
 * thread, never on the accepting or a worker thread. A failed lookup
 * keeps the last good answer, with a warning. */
#ifndef MG_PROXY_NET_RESOLVER_H
#define MG_PROXY_NET_RESOLVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/net/routes.h"

/* A count that grows whenever connecting upstream fails (the workers'
 * upstream_connect_failures counters, summed). */
typedef uint64_t (*resolver_failures_fn)(void *arg);

typedef struct resolver resolver;

/* refresh_secs 0: only after connect failures. spec and slot outlive the
 * resolver. NULL with err set when the thread cannot start. */
resolver *resolver_start(const routes_spec *spec, routes_slot *slot, unsigned refresh_secs,
                         resolver_failures_fn failures, void *arg, char *err, size_t errlen);

/* Ends the thread (waits for a lookup under way). NULL-safe. */
void resolver_stop(resolver *r);

#endif
