/* Where upstream connections go, taken from a mongodb:// URI with
 * libmongoc's own parser so every URI a driver accepts is accepted here
 * too. Resolved once at start-up. */
#ifndef MG_PROXY_NET_UPSTREAM_H
#define MG_PROXY_NET_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "proxy/net/address.h"

typedef net_addr upstream_target;

/* Resolves the first host of uri into *up. Refuses what the proxy cannot
 * honour yet (TLS to the upstream, mongodb+srv://) rather than ignoring it;
 * warns when the URI lists several hosts. */
bool upstream_resolve(const char *uri, upstream_target *up, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
