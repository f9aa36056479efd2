/* Routes: which upstream server each listener's clients are paired with,
 * and how hello replies name the set's members, as one immutable object
 * per DNS answer. The resolver (resolver.h) makes a new one when DNS
 * changes and publishes it in a routes_slot; the accepting thread takes a
 * reference for each connection it hands to a worker, and the worker
 * drops it when that session ends. So a session keeps the target it
 * started with for its whole life, sessions accepted later get the new
 * one, and nothing is freed while a session still points into it. */
#ifndef MG_PROXY_NET_ROUTES_H
#define MG_PROXY_NET_ROUTES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "protocol/hello_rewrite.h"
#include "proxy/net/upstream.h"
#include "proxy/ref_slot.h"

enum { ROUTES_MAX = 24 };

/* What the configuration asks for; fixed for the run. */
typedef struct routes_spec {
	char uri[2048];      /* upstream.uri: mongodb:// or mongodb+srv:// */
	char dns_server[64]; /* upstream.dnsServer, "" = the system's */
	size_t n;            /* listeners */
	struct {
		char advertise[HELLO_HOST_LEN]; /* what hello replies call the listener */
		char listen[256];               /* its address, for the log */
		char member[256]; /* "" (net.listen): the URI's first host; else this host */
	} l[ROUTES_MAX];
} routes_spec;

typedef struct upstream_routes {
	atomic_uint refs;
	bool srv;       /* the URI was mongodb+srv:// */
	char uri[4096]; /* the plain mongodb:// URI (SRV expanded); holds credentials: never logged
	                 */
	upstream_uri_info info;
	upstream_host hosts[UPSTREAM_MAX_HOSTS]; /* the URI's hosts, as DNS gave them */
	size_t nhosts;
	size_t n;
	upstream_target target[ROUTES_MAX]; /* listener i's server */
	/* Each listener under its server's name, then under the address that
	 * name resolved to: a member whose set configuration names it by
	 * address (as a one-member FerretDB does) is the same server. */
	hello_map_entry map[2 * ROUTES_MAX];
	size_t nmap;
	hello_map
	    hello[ROUTES_MAX]; /* listener i's view of map (points into this object and spec) */
} upstream_routes;

/* Resolves spec (SRV and TXT when mongodb+srv://, then every host name)
 * into a new object with one reference. prev (may be NULL) keeps
 * net.listen on the SRV host it had while that host is still in the
 * answer, so a DNS server that rotates its records does not move it.
 * NULL with err set when anything fails: the caller keeps what it had. */
upstream_routes *routes_resolve(const routes_spec *spec, const upstream_routes *prev, char *err,
                                size_t errlen) __attribute__((warn_unused_result));

upstream_routes *routes_ref(upstream_routes *r);
void routes_unref(upstream_routes *r); /* NULL-safe */

/* Same hosts (as a set) and every listener on the same name and address. */
bool routes_same(const upstream_routes *a, const upstream_routes *b);

/* Log lines for what changed from was to now: the host set, each
 * listener's new target, and a warning for each host of now that no
 * listener serves and was did not have (was NULL: every such host).
 * trigger: what made the resolver look (NULL at start-up). */
void routes_log_change(const routes_spec *spec, const upstream_routes *was,
                       const upstream_routes *now, const char *trigger);

/* Where the routes in force are published (proxy/ref_slot.h). Taken once per
 * accepted connection and replaced once per DNS change. */
typedef struct routes_slot {
	ref_slot s;
} routes_slot;

void routes_slot_init(routes_slot *slot, upstream_routes *first); /* takes first's reference */
void routes_slot_destroy(routes_slot *slot);
upstream_routes *routes_slot_get(routes_slot *slot);             /* a new reference */
void routes_slot_publish(routes_slot *slot, upstream_routes *r); /* takes r's reference */

#endif
