/* The running proxy: the listener and signals on the main thread, worker
 * threads each with their own event base, and what they share (config,
 * engine, index cache, upstream address). Types live here so session.c and
 * worker code can read them without pulling in the whole program. */
#ifndef MG_PROXY_SERVER_H
#define MG_PROXY_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "analyzers/engine.h"
#include "analyzers/index_cache.h"
#include "proxy/config.h"

struct event_base;
struct event;
struct evconnlistener;
typedef struct session session;
typedef struct server server;

/* Where upstream connections go: resolved once at start-up. */
typedef struct upstream_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	char name[300]; /* "host:port" for logs and error replies */
} upstream_addr;

/* A connection accepted on the main thread, waiting for its worker. */
typedef struct accepted_conn {
	int fd;
	struct sockaddr_storage addr;
	socklen_t addrlen;
} accepted_conn;

typedef struct worker {
	server *srv;
	int index;
	pthread_t thread;
	struct event_base *base;
	struct event *wakeup; /* activated from other threads; see worker_wakeup() */

	pthread_mutex_t lock; /* guards the inbox only */
	accepted_conn *inbox;
	size_t ninbox, capinbox;

	atomic_bool index_changed; /* the index cache learned something */
	atomic_bool draining;      /* shutdown: close idle sessions, finish the rest */
	atomic_bool stop;          /* grace period over: close everything and exit */

	session *sessions; /* every live session of this worker (intrusive list) */
	size_t nsessions;
} worker;

struct server {
	mg_config cfg;
	upstream_addr up;
	engine *engine;  /* NULL when analysis is disabled */
	index_cache *ic; /* NULL when analysis is disabled */
	struct event_base *base;
	struct evconnlistener *listener;
	worker *workers;
	size_t nworkers;
	size_t next_worker;
	atomic_uint_fast64_t next_conn_id;
	atomic_int_fast32_t next_request_id; /* for replies mongoguard writes itself */
	atomic_uint nconns;
	bool shutting_down;
	struct event *grace_timer;
};

/* Wakes w's event loop from any thread to look at its inbox and flags. */
void worker_wakeup(worker *w);

int64_t mg_now_ms(void);

#endif
