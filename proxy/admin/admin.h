/* The admin endpoint: HTTP on its own thread and event base, off the
 * request path (admin.listen; loopback by default, off when unset).
 *
 *   GET  /metrics   Prometheus text (metrics.h)
 *   GET  /healthz   200 while the process runs
 *   GET  /readyz    200 when the upstream accepts a TCP connection, else 503
 *                   (the probe that logs "Upstream reachable/unreachable")
 *   GET  /findings  the most recent findings, JSON, redacted as the log;
 *                   ?rule=&ns=&app=&since=&limit= narrow them (admin_filter),
 *                   400 for a parameter that does not parse
 *   GET  /config    the configuration in force, secrets masked
 *   GET  /connections              the open client connections, JSON
 *   POST /connections/ID/close     close one (the log says an operator did)
 *   GET  /workload  live statistics per query shape and collection, JSON;
 *                   ?ns=&app=&sort=&limit= (workload_json.h), 400 for a
 *                   parameter that does not parse, 404 when workload.enabled
 *                   is off
 *   POST /reload    re-read the configuration file, as SIGHUP does; the
 *                   answer names the changes that wait for a restart
 *
 * With admin.tokenFile, every request but the probes (/healthz, /readyz)
 * must carry `Authorization: Bearer <token>` (401 otherwise). Anything else is 404 (an
 * unknown path) or 405 (another method); malformed HTTP is answered 400 by
 * libevent's parser, and request heads and bodies are bounded. */
#ifndef MG_PROXY_ADMIN_ADMIN_H
#define MG_PROXY_ADMIN_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/text.h"
#include "proxy/admin/metrics.h"
#include "proxy/net/address.h"
#include "proxy/stats/workload_json.h"

typedef struct admin admin;

/* /findings' query: NULL or 0 where the query says nothing. ns and app are
 * globs (fnmatch), as rule scopes are; since is seconds since the epoch
 * (the query takes those or an ISO-8601 UTC time); limit keeps the newest. */
typedef struct admin_filter {
	const char *rule, *ns, *app;
	int64_t since;
	unsigned limit;
} admin_filter;

/* Parses the query part of a /findings URI into f, whose strings point into
 * store (cap bytes). False with err set for an unknown parameter or a bad
 * value. Pure. */
bool admin_filter_parse(const char *query, admin_filter *f, char *store, size_t cap, char *err,
                        size_t errlen) __attribute__((warn_unused_result));

/* What the endpoint reads; every pointer outlives the admin. Callbacks run
 * on the admin thread. */
typedef struct admin_sources {
	const metrics *metrics;
	/* /readyz: does the upstream answer (why not, in why)? */
	bool (*ready)(void *arg, char *why, size_t whylen);
	void (*findings_json)(void *arg, const admin_filter *f, text_buf *out);
	void (*config_json)(void *arg, text_buf *out);
	/* POST /reload: on success err holds the changed settings that wait
	 * for a restart ("" for none); on failure, why. */
	bool (*reload)(void *arg, char *err, size_t errlen);
	/* GET /connections: a JSON array of the open client connections. */
	void (*connections_json)(void *arg, text_buf *out);
	/* POST /connections/ID/close: close connection ID; false when no
	 * worker has it. */
	bool (*close_connection)(void *arg, uint64_t id);
	/* GET /workload: false when the statistics are off. */
	bool (*workload_json)(void *arg, const wl_query *q, text_buf *out);
	/* /metrics' per-collection lines, after the rest (may be NULL). */
	void (*workload_metrics)(void *arg, text_buf *out);
	void *arg;
} admin_sources;

/* Binds listen ("HOST:PORT") and starts the thread. token: required bearer
 * token, or NULL. NULL with err set on failure. */
admin *admin_start(const net_addr *listen, const char *token, const admin_sources *src, char *err,
                   size_t errlen);

/* Stops the thread and frees everything. NULL-safe. */
void admin_stop(admin *a);

/* Reads a token file: the first line, surrounding white space removed.
 * False with err set when it cannot be read or is empty. */
bool admin_read_token(const char *path, char *out, size_t size, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
