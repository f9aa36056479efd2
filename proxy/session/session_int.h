/* Inside a session: the struct the five session files share, and what
 * each of them offers the others. Only the session files include it.
 *
 *   session.c    lifecycle: the state machine, start, the sockets' events,
 *                timers, the end; it alone calls into both directions
 *   requests.c   client -> upstream: framing (request_framer.h), judging,
 *                forwarding, large requests held or cut through
 *   replies.c    upstream -> client: framing (reply_framer.h), hello
 *                rewriting, capture of replies
 *   answers.c    the in-flight queue's side: mongoguard's own answers in
 *                order, completions, the reply deadline; both directions
 *                use it
 *   transport.c  sockets: mongoguard's own reads and writes (transport.h)
 *
 * The two directions never call each other: a reply that frees room in
 * the queue is followed by the lifecycle resuming the client side. */
#ifndef MG_PROXY_SESSION_SESSION_INT_H
#define MG_PROXY_SESSION_SESSION_INT_H

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "protocol/reply.h"
#include "protocol/request_template.h"
#include "proxy/session/inflight.h"
#include "proxy/session/reply_framer.h"
#include "proxy/session/request_framer.h"
#include "proxy/session/session.h"
#include "proxy/session/transport.h"
#include "proxy/sinks/log.h"

enum {
	OUT_HIGH = 1024 * 1024, /* a side's output above this stops reading the other */
	OUT_LOW = 256 * 1024,   /* ... until it drains below this */
	END_REASON_LEN = 256,
	/* Error codes for replies mongoguard writes itself. */
	CODE_HOST_UNREACHABLE = 6,
	CODE_BLOCKED = 96, /* OperationFailed: never retried by drivers */
};

/* The session's life (session_enter() is the only place it changes):
 *   SNIFFING -> CONNECTING      the client's first bytes said plain or TLS
 *                               (at once without TLS); the upstream is dialled
 *   CONNECTING -> ACTIVE        the upstream answered the connect
 *   CONNECTING -> UNREACHABLE   it did not, before the client asked anything:
 *                               the first request is answered HostUnreachable
 *   CONNECTING | ACTIVE | UNREACHABLE -> FLUSHING
 *                               ending: the upstream goes at once, what is
 *                               queued for the client is written first
 *                               (bounded by FLUSH_TIMEOUT_MS)
 *   any -> CLOSED               freed at the next loop turn, so no caller up
 *                               the stack ever touches a freed session
 * Requests are read and relayed in CONNECTING, ACTIVE and UNREACHABLE
 * (session_relaying); the upstream's socket is written only in ACTIVE. */
typedef enum {
	SESSION_SNIFFING,
	SESSION_CONNECTING,
	SESSION_ACTIVE,
	SESSION_UNREACHABLE,
	SESSION_FLUSHING,
	SESSION_CLOSED,
} session_state;

/* A request held for an index list (requests_hold() is the only place it
 * changes): NONE -> WAITING -> NONE, or WAITING -> EXPIRED (the wait ran
 * out: judged once more without waiting) -> NONE. While not NONE the
 * client is not read and the state's timer is the wait's. */
typedef enum {
	HOLD_NONE,
	HOLD_WAITING,
	HOLD_EXPIRED,
} session_hold;

/* What the reply path knows of a request's first reply, when its request
 * is counted in the workload (replies.c, reply_observed). */
typedef struct reply_facts {
	const char *ns; /* "db.coll" of the request */
	const char *command;
	wl_kind kind;       /* read, write or other (protocol/commands.h's kind) */
	int64_t ndocs;      /* documents the reply held (its n); -1: unknown */
	int32_t code;       /* 0: ok; the error's code; -1: an error without one */
	bool read;          /* the body was read (every write's, one in workload.replySample of
	                       the others): ndocs and code mean something */
	int64_t bytes;      /* the reply's length */
	int64_t latency_ns; /* the request read to the reply's header read */
	/* The whole reply when it is all here and contiguous (the bytes
	 * bytes), for a reader that needs every reply's facts
	 * (proxy/stats/reply_scan.h); NULL when only its start is. */
	const uint8_t *msg;
} reply_facts;

struct session {
	session_env env;
	void *token; /* the owner's, handed back by on_closed */
	session_state state;
	session_hold hold;
	/* A held schema change's claim on its database (inflight.h, gate):
	 * taken when it first waits for the side connection, so no new fetch
	 * starts there meanwhile; moved to its in-flight entry when it goes. */
	struct index_cache *gate_ic;
	int gate;
	uint64_t id;
	char ctx[32];  /* "conn42" */
	char peer[80]; /* the client's address, "127.0.0.1:51234" */
	/* client.application.name from the handshake, "" until then (or
	 * without one): malloc'd, since most connections are idle pool members. */
	const char *app;
	char *app_owned;
	bool seen_hello;
	/* The engine's template of this connection's last query judged
	 * without a check (analyzers/engine/engine.h): made on first use, since most
	 * connections are idle pool members. */
	engine_repeat *repeat;
	/* The engine's record of this connection's reads, for the rules that
	 * follow a connection (engine.h, engine_conn_track): made on first use
	 * when such a rule is on; told how many documents each reply held. */
	engine_conn_track *track;
	/* The decoder's template of this connection's last command
	 * (protocol/request_template.h): made on first use too. */
	request_template *req_template;
	/* The workload entry of the request that made the engine's template
	 * (repeat): the requests the template then judges have its shape, so
	 * they are counted there without computing a shape (requests.c). */
	struct {
		uint64_t key;
		wl_ref ref;
		uint64_t sets; /* engine_repeat_sets when it was taken, or */
		bool plain;    /* request_template_sets (analysis off) */
	} wl_memo;
	bool warned_unmapped; /* the hello bypass warning, once per connection */
	bool awaiting_proxy;  /* net.proxyProtocol: its header not read yet (sniff_cb) */
	bool warned_lb;       /* the load-balancer bypass warning, once per connection */

	transport_side cl;      /* the client; cl.bev NULL while SNIFFING */
	struct event *sniff_ev; /* SNIFFING: edge-triggered read, plain or TLS? */
	transport_side up;      /* the upstream; up.bev NULL from FLUSHING on */
	char *unreachable_why;  /* UNREACHABLE: why (malloc'd: rare) */

	/* One timer for the state's deadline, as the states never need two:
	 * a started request must finish arriving (net.maxFrameWaitMS; with
	 * TLS on, counted from accept, through SNIFFING and the client's
	 * handshake; in UNREACHABLE, the wait for the first request); a held
	 * request, the
	 * index list; FLUSHING, the client reading the rest; CLOSED, made
	 * active to free the session at the next loop turn. One event instead
	 * of four keeps idle sessions small. */
	struct event *timer;
	bool timer_on; /* timer is pending: kept here, as asking libevent takes its lock */
	struct event *reply_timer; /* upstream.replyTimeoutMS: see answers_arm_deadline */
	int64_t reply_due;         /* the head request's deadline (ns); 0: none */
	int64_t reply_wake;        /* when reply_timer fires (ns); 0: not added */

	request_framer reqf;
	transport_buf *large; /* the large request's own buffer (reqf.len bytes), or NULL */
	/* A large request done with whose bytes the upstream's output still
	 * refers to: held, so the next large request waits for it to go and
	 * a connection never holds two (requests_large_written). */
	transport_buf *large_sent;
	reply_framer framer;
	inflight_ring inflight;

	/* The reply being captured (env.capture set): its bytes, copied as
	 * they are forwarded, when it is small enough to be read. */
	bool cap_reply;
	/* the track's count of the reply being captured is told at its end,
	 * from the capture's copy: it streamed, too large to gather */
	bool cap_track;
	uint8_t *cap_buf;
	size_t cap_len, cap_off;
	int32_t cap_rt;

	/* Requests sent with moreToCome that no reply has been dropped for
	 * yet. A server may answer them all the same (FerretDB answers the
	 * endSessions drivers send so, and w:0 writes): while any is owed, a
	 * reply that answers nothing in flight is taken for one of those
	 * answers, dropped as expected traffic, not as a fault. A burst of w:0
	 * writes may be answered long after later ones were sent, so a count,
	 * not a list of ids. It decays in request order: the upstream answers a
	 * connection's requests in turn, so once a reply to an in-flight request
	 * begins, no answer is owed any more for those sent before it, only
	 * for those sent after (no_reply_sent - its no_reply_mark, inflight.h):
	 * else one burst of them would excuse every stray reply for the rest of
	 * the session. no_reply_sent counts them all (wrapping). */
	uint32_t no_reply_owed;
	uint32_t no_reply_sent;

	uint64_t nrequests, nblocked, ndiscarded;
	/* Bytes relayed each way (mx_direction), and when the client came: for
	 * GET /connections (session_describe). */
	uint64_t nbytes[2];
	int64_t accepted_ms;
	char *end_reason;          /* END_REASON_LEN bytes once the session ends (reason_buf) */
	log_severity end_severity; /* of the "Connection ended" line */
};

static inline const snapshot *session_snap(const session *s)
{
	return *s->env.snap;
}

/* Requests are read and relayed (see session_state). */
static inline bool session_relaying(const session *s)
{
	return s->state >= SESSION_CONNECTING && s->state <= SESSION_UNREACHABLE;
}

/* No error yet, for a wire_error a step may fill. Not `= {0}`: that clears
 * all 272 bytes, once a message on the request path; readers only ever
 * read msg as a string. */
static inline void session_no_error(wire_error *err)
{
	err->code = 0;
	err->code_name = NULL;
	err->msg[0] = '\0';
}

static inline struct evbuffer *session_client_out(session *s)
{
	return bufferevent_get_output(s->cl.bev);
}

/* ---- session.c: lifecycle ---- */
bool session_enter(session *s, session_state to);
/* Ends the session: the upstream goes now; what is already queued for the
 * client is written first, then the client connection closes. */
void session_finish(session *s, log_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Why the session ended: END_REASON_LEN bytes, allocated when first asked. */
char *session_reason_buf(session *s);
void session_set_timer(session *s, uint32_t ms);
void session_clear_timer(session *s);
/* Backpressure: the client is not read until there is room again. */
void session_pause_client(session *s);

/* ---- requests.c: client -> upstream ---- */
/* Reads, judges and forwards what the client sent, as far as it can. */
void requests_process(session *s);
/* Held for an index list, or not (the only place s->hold changes). */
void requests_gate_end(session *s);
void requests_hold(session *s, session_hold to);
/* Frees a large request cut short by the end of the session. */
void requests_release(session *s);
/* The upstream's output drained below OUT_LOW: the buffer of a large
 * request sent from it goes once none of it is queued. */
void requests_large_written(session *s);
/* A large request arriving: nothing else is read until it is whole. */
static inline bool requests_in_large(const session *s)
{
	return request_framer_in_large(&s->reqf);
}

/* ---- replies.c: upstream -> client ---- */
/* Relays what the upstream sent, as far as the client takes it. */
void replies_process(session *s);
/* Frees a reply capture cut short by the end of the session. */
void replies_release(session *s);

/* ---- answers.c: the in-flight queue ---- */
/* The replies staged this turn go to the client (before anything else). */
void answers_flush_replies(session *s);
/* Writes every answer of ours that has reached the head, at a reply boundary. */
void answers_flush(session *s);
/* Queues our own reply (a malloc'd message, owned from here on; NULL:
 * it could not be built, and the session ends) behind the requests in
 * flight. */
void answers_queue(session *s, int32_t request_id, reply_form form, uint8_t *msg, size_t len);
uint8_t *answers_make_error(session *s, reply_form form, int32_t request_id, int code,
                            const char *code_name, const char *errmsg, size_t *len);
void answers_error(session *s, reply_form form, int32_t request_id, int code, const char *code_name,
                   const char *errmsg);
int32_t answers_next_request_id(session *s);
/* The upstream could not be reached at all: every request waiting gets an error. */
void answers_fail_all(session *s, const char *why);
/* A reply without moreToCome was relayed: its request is complete. now:
 * the clock when the reply came (0: not read yet, then set), or NULL to
 * read it here if the next request's deadline needs it. */
void answers_complete_head(session *s, int64_t *now);
/* Its first part alone: what the reply tells the index cache, and the
 * entry goes. A run of replies (replies.c, relay_run) does the rest once:
 * our answers that follow wait for the replies before them, and the
 * deadline moves once for replies that share one clock reading. */
void answers_retire_head(session *s);
/* upstream.replyTimeoutMS for the oldest request (restart: it changed).
 * now: the clock, if not 0, else read here and set; NULL: read here. */
void answers_arm_deadline(session *s, bool restart, int64_t *now);
void answers_reply_timeout_cb(evutil_socket_t fd, short what, void *arg);
/* A request that is not forwarded: answered with the error when a reply
 * is allowed, else the connection closes (true). Logged either way. */
bool answers_reject(session *s, const request *r, const wire_error *err);
/* A request a rule blocks: counted, and answered with the rule's error
 * (a moreToCome one is dropped: nothing may answer it). */
void answers_block(session *s, const request *r, const block_info *block);
/* A frame whose length cannot be trusted: answered if its opcode says how
 * and nothing is in flight, then the connection ends, saying why. */
void answers_refuse_frame(session *s, const frame_header *h, const wire_error *err);

#endif
