/* Worker threads: each runs its own event base and owns its sessions for
 * their whole life, so a session is only ever touched by one thread. Other
 * threads reach a worker only through worker_hand() (a locked inbox of
 * accepted sockets) and worker_notify() (atomic flags), both of which wake
 * its loop through an eventfd. Since nothing else crosses, the worker's
 * event base is made without libevent's locks. */
#ifndef MG_PROXY_RUNTIME_WORKER_H
#define MG_PROXY_RUNTIME_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "protocol/text.h"
#include "proxy/admin/metrics.h"
#include "proxy/net/routes.h"
#include "proxy/runtime/snapshot.h"
#include "proxy/session/session.h"

struct event_base;
struct event;

/* A connection accepted on the main thread, waiting for its worker. */
typedef struct accepted_conn {
	int fd;
	upstream_routes *routes; /* a reference: the answer in force at accept */
	size_t listener;         /* which of routes' listeners it came in on */
	struct sockaddr_storage addr;
	socklen_t addrlen;
} accepted_conn;

/* The worker's list entry for one of its sessions. */
typedef struct session_node {
	session *s;
	upstream_routes *routes; /* the session's env.up and env.hello point into it */
	struct session_node *prev, *next;
} session_node;

/* What every worker shares with the server; outlives the workers. */
typedef struct worker_shared {
	session_ids *ids;
	atomic_uint *nconns; /* open connections: the listener counts them in */
	snapshot_slot *config;
	metrics *metrics;      /* worker i writes shard i */
	capture_sink *capture; /* NULL: not capturing */
	/* From a worker thread: descriptors ran out (pause accepting). */
	void (*out_of_fds)(void *arg);
	void *out_of_fds_arg;
} worker_shared;

typedef enum {
	WORKER_INDEX_CHANGED = 1 << 0,  /* re-run requests held for an index list */
	WORKER_CONFIG_CHANGED = 1 << 1, /* take the newly published snapshot */
	WORKER_DRAIN = 1 << 2,          /* shutdown: close idle sessions, finish the rest */
	WORKER_STOP = 1 << 3,           /* grace period over: close everything and exit */
	WORKER_QUERY = 1 << 4,          /* answer the queries waiting (worker_ask) */
} worker_flag;

/* A question another thread (the admin endpoint) asks about a worker's
 * sessions, answered on the worker's thread between events, since only
 * that thread may touch them. */
typedef struct worker_query {
	/* WORKER_SYNC: nothing to answer but that the worker has acted on every
	 * flag set before it was asked (a reload waits for it, below). */
	enum { WORKER_LIST, WORKER_CLOSE, WORKER_WORKLOAD, WORKER_SYNC } kind;
	uint64_t conn; /* WORKER_CLOSE: the connection's number */
	text_buf *out; /* WORKER_LIST: each session's JSON object, comma-separated */
	size_t listed; /* WORKER_LIST: objects written so far (a comma before the next) */
	bool found;    /* WORKER_CLOSE: the worker had it, and closed it; WORKER_WORKLOAD: copied */
	/* WORKER_WORKLOAD: a table of the worker's sizes (workload_new), which
	 * the worker copies its statistics into */
	struct workload *workload;
	bool done; /* answered (under the worker's lock) */
	struct worker_query *next;
} worker_query;

typedef struct worker {
	int index;
	const worker_shared *shared;
	pthread_t thread;
	struct event_base *base;
	int wakeup_fd;        /* an eventfd: other threads write it to wake the loop */
	struct event *wakeup; /* reads wakeup_fd */
	/* A persistent timer, once a second: the maintenance step that
	 * applies the deadlines no event reaches (late verdicts' expiry). */
	struct event *maintenance;
	struct evbuffer *stage, *stage_replies; /* its sessions' env.stage* */

	pthread_mutex_t lock; /* guards the inbox and the queries */
	accepted_conn *inbox;
	size_t ninbox, capinbox;
	worker_query *queries;   /* asked, not yet taken */
	pthread_cond_t answered; /* a query's done became true */

	atomic_uint pending;  /* worker_flag bits not yet acted on */
	atomic_bool draining; /* sessions read it: end when idle */

	/* Owned by the worker thread alone. */
	snapshot *snap;            /* the snapshot its sessions read (their env.snap) */
	struct late_queue *late;   /* its sessions' env.late */
	struct workload *workload; /* its sessions' env.workload; NULL: off */
	session_env env;           /* handed to every session it starts */
	session_node *sessions;
	size_t nsessions;
} worker;

/* Sets up w (not yet running). False with err set when it cannot. */
bool worker_init(worker *w, int index, const worker_shared *shared, char *err, size_t errlen)
    __attribute__((warn_unused_result));

bool worker_start(worker *w, char *err, size_t errlen) __attribute__((warn_unused_result));

/* From the accepting thread: w takes fd and the routes reference over
 * (the session pairs with routes' listener `listener`). False (fd closed,
 * reference dropped, logged) when out of memory. */
bool worker_hand(worker *w, int fd, const struct sockaddr *addr, socklen_t addrlen,
                 upstream_routes *routes, size_t listener);

/* From any thread: raise flags and wake w. */
void worker_notify(worker *w, worker_flag flags);

/* From any thread but w's: q answered by w's thread. False when w did not
 * take it within timeout_ms (a worker that has stopped): q is withdrawn. */
bool worker_ask(worker *w, worker_query *q, int timeout_ms) __attribute__((warn_unused_result));

/* From any thread but the workers': each worker's workload table, copied
 * on its thread into a table of ws's sizes; *got: how many answered (a
 * stopped worker is left out after a second). NULL when the statistics are
 * off or memory is short. Free with workers_workload_free. */
struct workload **workers_workload(worker *workers, size_t n, const workload_settings *ws,
                                   size_t *got);
void workers_workload_free(struct workload **tabs, size_t n);

/* Waits for w's thread to end, then frees what worker_init made. */
void worker_join(worker *w);

#endif
