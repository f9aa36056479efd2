/* Entry points main() uses to start the proxy. */
#ifndef MG_PROXY_SERVER_RUN_H
#define MG_PROXY_SERVER_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "proxy/server.h"

/* Runs until SIGTERM/SIGINT and a graceful drain. srv->cfg and srv->up must
 * be filled. Returns false with err set when start-up fails. */
bool server_run(server *srv, char *err, size_t errlen);

/* "HOST:PORT" or "[v6]:PORT" to a socket address. */
bool server_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len, char *err,
                         size_t errlen);

/* Resolves the first host of a mongodb:// URI into srv->up. Refuses what
 * the proxy cannot honour yet (TLS to the upstream) rather than ignoring it. */
bool upstream_resolve(const char *uri, upstream_addr *up, char *err, size_t errlen);

/* The engine's sink: one "c":"ANALYZER" log line per finding. */
void server_log_finding(void *arg, const finding *f);

#endif
