/* A session pairs one client connection with one upstream connection. */
#ifndef MG_PROXY_SESSION_H
#define MG_PROXY_SESSION_H

#include <stdbool.h>
#include <sys/socket.h>

#include "proxy/server.h"

/* Takes ownership of fd (already accepted, non-blocking) and starts
 * connecting upstream. On failure the fd is closed and logged. */
void session_start(worker *w, int fd, const struct sockaddr *addr, socklen_t addrlen);

/* The index cache changed: re-run the request a waiting session holds. */
void session_index_changed(session *s);

/* Shutdown: close the session now if it has nothing in flight, else let it
 * finish its in-flight requests first. */
void session_drain(session *s);

/* Grace period over: close now. */
void session_abort(session *s, const char *reason);

session *session_next(session *s);

#endif
