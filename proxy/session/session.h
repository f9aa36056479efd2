/* A session pairs one client connection with one upstream connection (see
 * session.c for its queues). It owns only its connection: everything else
 * it needs comes in its environment at start, and it tells its owner when
 * it is gone through on_closed. It never reaches into the server or the
 * worker that runs it. */
#ifndef MG_PROXY_SESSION_SESSION_H
#define MG_PROXY_SESSION_SESSION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/admin/metrics.h"
#include "protocol/hello_rewrite.h"
#include "protocol/text.h"
#include "proxy/net/tls.h"
#include "proxy/net/upstream.h"
#include "proxy/runtime/snapshot.h"

struct event_base;
typedef struct session session;
typedef struct capture_sink capture_sink;

/* Where ids come from: shared by every session of the process. */
typedef struct session_ids {
	atomic_uint_fast64_t next_conn;   /* "conn42" */
	atomic_int_fast32_t next_request; /* requestIDs of replies mongoguard writes */
} session_ids;

/* What a session is given at start. Every pointer outlives the session. */
typedef struct session_env {
	struct event_base *base;
	/* The configuration and engine in force, read anew for each request
	 * (the worker's pointer; it changes only between events). */
	snapshot *const *snap;
	const upstream_target *up; /* the server this listener's clients pair with */
	/* How hello replies name the set's members for this listener's clients
	 * (its own pairing included); NULL: replies pass unchanged. */
	const hello_map *hello;
	/* Both sides' TLS contexts, from the snapshot in force at start; the
	 * session holds its own reference to each SSL_CTX. */
	net_tls tls;
	session_ids *ids;
	const atomic_bool *draining; /* shutdown: end as soon as idle */
	const atomic_uint *nconns;   /* connections open, for the log */
	metrics_shard *mx;           /* this worker's counters (single writer) */
	/* The worker's scratch buffer: the requests one read forwards are
	 * gathered here and written together (requests.c, flush_stage). Empty
	 * between events; shared by the worker's sessions, which run one at a
	 * time. stage_replies does the same for the replies one read relays. */
	struct evbuffer *stage;
	struct evbuffer *stage_replies;
	capture_sink *capture; /* NULL: not capturing (proxy/sinks/capture.h) */
	/* The worker's late verdicts (proxy/session/late.h): requests that
	 * owe verdicts outlive their connection there. NULL: none kept. */
	struct late_queue *late;
	/* The worker's workload statistics (proxy/stats/workload.h), written
	 * on its thread alone. NULL: workload.enabled is off. */
	struct workload *workload;
	/* Called exactly once per session_start(), as the session is freed (or
	 * fails to start), with the token given to session_start(). */
	void (*on_closed)(void *owner, void *token);
	/* Called when the process ran out of descriptors (may be NULL). */
	void (*out_of_fds)(void *owner);
	void *owner;
} session_env;

/* Takes ownership of fd (accepted, non-blocking) and starts connecting
 * upstream. NULL when it could not start (fd closed, logged, on_closed
 * already called). */
session *session_start(const session_env *env, int fd, const struct sockaddr *addr,
                       socklen_t addrlen, void *token);

/* The index cache changed: re-run the request a waiting session holds. */
void session_index_changed(session *s);

/* Shutdown: close the session now if it has nothing in flight, else let it
 * finish its in-flight requests first. */
void session_drain(session *s);

/* Grace period over, or an operator said so: close now, with reason. */
void session_abort(session *s, const char *reason);

/* How many callbacks of its sessions (socket reads, writes and events,
 * timers) this thread has run so far: a test's measure of the work a
 * sequence of bytes and silences caused (tests/unit/session_harness.h). */
uint64_t session_callbacks_run(void);

/* The connection's number ("conn42" is 42). */
uint64_t session_id(const session *s);

/* One JSON object for GET /connections: id, client, app, state, age,
 * requests, blocked, bytes each way, upstream. The worker's thread only. */
void session_describe(const session *s, int64_t now_ms, text_buf *out);

#endif
