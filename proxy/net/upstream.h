/* Where upstream connections go, taken from a mongodb:// URI with
 * libmongoc's own parser so every URI a driver accepts is accepted here
 * too (a mongodb+srv:// URI is first turned into one: srv.h). Host names
 * are resolved at start-up and again by the resolver (routes.h). */
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

/* One host of the URI or of upstream.members, parsed, not resolved. */
typedef struct upstream_host {
	char name[300]; /* "host:port" (a socket path for a Unix socket) */
	char host[256];
	unsigned port;
	bool unix_socket;
} upstream_host;

enum { UPSTREAM_MAX_HOSTS = 32 };

/* Parses a mongodb:// uri (srv_expand has already turned mongodb+srv://
 * into one) into *info and its hosts (at most UPSTREAM_MAX_HOSTS).
 * Refuses what the proxy cannot honour (a key file password) rather than
 * ignoring it. */
bool upstream_parse(const char *uri, upstream_uri_info *info, upstream_host *hosts, size_t *nhosts,
                    char *err, size_t errlen) __attribute__((warn_unused_result));

/* "host:port" (a replica-set member) into *h. */
bool upstream_parse_host(const char *host_and_port, upstream_host *h, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* h's address into *up (and its name), through dns_server ("" = the
 * system's resolver, dns.h). */
bool upstream_lookup(const upstream_host *h, const char *dns_server, upstream_target *up, char *err,
                     size_t errlen) __attribute__((warn_unused_result));

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
