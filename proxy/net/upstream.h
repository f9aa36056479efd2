/* Where upstream connections go, taken from a mongodb:// URI with
 * libmongoc's own parser so every URI a driver accepts is accepted here
 * too. Resolved at start-up. */
#ifndef MG_PROXY_NET_UPSTREAM_H
#define MG_PROXY_NET_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "proxy/net/address.h"
#include "proxy/net/tls.h"

/* One server a session connects to: its resolved address, and its name
 * ("host:port" as the URI or upstream.members spells it) for logs, error
 * replies and the hello rewriter. */
typedef net_addr upstream_target;

/* What the upstream URI says beyond its hosts. */
typedef struct upstream_uri_info {
	char first_host[300];  /* "host:port" of the URI's first host */
	char replica_set[128]; /* replicaSet=, "" when absent */
	bool load_balanced;    /* loadBalanced=true */
	unsigned nhosts;
	tls_upstream_config tls; /* tls=true and its options */
} upstream_uri_info;

/* Parses uri and resolves its first host into *up. Refuses what the proxy
 * cannot honour yet (mongodb+srv://, a key file password) rather than
 * ignoring it. info may be NULL. */
bool upstream_resolve(const char *uri, upstream_target *up, upstream_uri_info *info, char *err,
                      size_t errlen) __attribute__((warn_unused_result));

/* Resolves "host:port" (a replica-set member) into *up. */
bool upstream_resolve_host(const char *host_and_port, upstream_target *up, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* The URI the index cache's side connection uses: uri itself, with the
 * credentials from credentials_file (may be NULL or "") when it has a
 * first line "username:password" (the password may hold ':'). Written to
 * out (size bytes); *has_credentials says whether the side connection
 * authenticates. The file keeps the secret out of the command line and
 * `ps`; its content is never logged. */
bool upstream_side_uri(const char *uri, const char *credentials_file, char *out, size_t size,
                       bool *has_credentials, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
