/* Sessions: one client connection, one upstream connection, and the
 * requests in flight between them.
 *
 * Client -> upstream. Bytes wait in the client bufferevent's input buffer
 * until a whole frame is there (the header's length is checked against the
 * protocol limits first, and the read high-watermark is raised to exactly
 * that frame, so a connection never buffers more than one request beyond a
 * read chunk); a large one still arriving goes into a buffer of its own
 * instead (see "Large requests" below). The frame is then made contiguous
 * and decoded by the request path (protocol/request.h) into a command view,
 * analysed, and one of four things happens to it:
 *   forward  - the original bytes move to the upstream output buffer
 *              (evbuffer_remove_buffer: chains move, nothing is copied), or
 *              are sent from the large request's buffer;
 *   replace  - the handshake with `compression` removed goes instead;
 *   answer   - mongoguard replies itself (block, malformed request, legacy
 *              opcode) and the request is dropped;
 *   wait     - the index list the sort rule needs is being fetched: the
 *              frame stays where it is, reading stops, and the
 *              request is analysed again when the cache changes or the wait
 *              times out (SESSION_WAITING).
 *
 * Large requests. A request of CUT_MIN bytes or more that has not all
 * arrived goes into a buffer of its own length (s->large: what the input
 * buffer held first; on a plain socket the rest is read straight into it,
 * up to CUT_READ at a time), which is then judged and forwarded as it is,
 * with no second copy to make it contiguous. It is held there until judged,
 * unless it can be cut through.
 *
 * Cut-through. A large request (an OP_MSG, with nothing else in flight) is
 * relayed while it arrives when the configuration cannot block it
 * (engine_may_block: no rule at block, or for an insert no document rule
 * at block): its bytes go upstream from its buffer as they come, all but
 * the last CUT_HELD; the whole buffer is then decoded and analysed as any
 * request, and only then do those last bytes go, so the findings, the
 * in-flight entry and a wait for an index list come before the server can
 * answer. A request that must not go after all (malformed, or blockable
 * after a reload) ends the upstream connection before the server has all
 * of it, so it never runs; the client gets mongoguard's answer and the
 * close. Store-and-forward would add the whole transfer time of the
 * request to its latency.
 *
 * Reads. On plain sockets mongoguard reads itself (plain_read_cb), not
 * through libevent's bufferevent read: that one asks FIONREAD before every
 * read (a system call per message on each side) and reads at most 4 KiB
 * per call. Small messages are read with one recv into the stack and
 * copied into the input buffer; when that recv comes back full, a readv
 * of up to a read chunk follows straight into the input buffer. The rest
 * of a large request is read straight into its own buffer; for one held
 * whole SO_RCVLOWAT makes the kernel wake us only when a read chunk of it
 * has arrived (await_client_bytes). One cut through is read with no such
 * mark: it goes on as it comes, and making the sender fill a chunk before
 * we read stalled the client, mongoguard and the server in turn (1 MiB
 * inserts: 0.71 of HAProxy's throughput with the mark and a copy aside,
 * 0.95 without). The read high-watermark of such a side is kept without
 * libevent's watermark callback (set_read_need, restart_reads). TLS
 * bufferevents read through OpenSSL, with libevent's watermark, as before.
 *
 * Upstream -> client. The reply framer (reply_framer.h) reads each reply's
 * header and flag bits and then says forward, drop or gather N bytes; the
 * body streams through in whatever chunks arrive. Only an OP_COMPRESSED
 * reply is gathered whole, to read its flag bits.
 *
 * The in-flight queue (inflight.h) holds one entry per request that will
 * get a reply, in request order. A reply without moreToCome completes the
 * head entry; with moreToCome (exhaust cursors, streaming hello) the head
 * stays, since more replies will follow unasked. A request mongoguard
 * answers itself is queued too, with its answer attached: the answer is
 * written when it reaches the head at a reply boundary, so even a pipelining
 * client gets its replies in order and never half a server reply spliced
 * with ours. Requests with moreToCome get no entry: nothing will answer them.
 *
 * The upstream ending: the client connection ends the same way (a close
 * after what arrived, or a reset), never with replies of ours to requests
 * the server had; only a connect that never succeeded is answered with
 * HostUnreachable (upstream_lost says why).
 *
 * Backpressure: a side's output buffer above OUT_HIGH stops reading from the
 * other side until it drains below OUT_LOW. Per connection, memory is bounded
 * by one request (<= 48,000,000 bytes, the protocol maximum) plus about
 * 2 x (OUT_HIGH + READ_CHUNK) of streaming buffers, and, while a large
 * request is relayed to a slow upstream, up to CUT_READ - READ_CHUNK more
 * of it queued there (a read of it lands whole before reading stops).
 *
 * States (session_enter() is the only place one changes):
 *   ACTIVE -> WAITING -> ACTIVE   a request held for an index list;
 *   ACTIVE | WAITING -> FLUSHING  ending: the upstream goes at once, what is
 *                                 queued for the client is written first
 *                                 (bounded by FLUSH_TIMEOUT_MS);
 *   any -> CLOSED                 freed at the next loop turn, so no caller
 *                                 up the stack ever touches a freed session.
 */
#include "proxy/session/session.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h> /* ev_read, ev_write: own_reads(), relay_bytes() */
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "protocol/handshake.h"
#include "protocol/request.h"
#include "proxy/sinks/capture.h"
#include "proxy/sinks/log.h"
#include "proxy/runtime/clock.h"
#include "proxy/session/inflight.h"
#include "proxy/session/reply_framer.h"

enum {
	OUT_HIGH = 1024 * 1024,
	OUT_LOW = 256 * 1024,
	READ_CHUNK = 256 * 1024,
	CUT_MIN = 64 * 1024,    /* smallest request relayed while it arrives */
	CUT_READ = 1024 * 1024, /* most read at once of such a request */
	CUT_HELD = 16,          /* its last bytes, held until it is judged */
	SMALL_READ = 16 * 1024, /* plain_read_cb's recv into the stack */
	SIDE_CLIENT = 1,
	SIDE_UPSTREAM = 2,
	END_REASON_LEN = 256,
	FLUSH_TIMEOUT_MS = 5000,
	UNREACHABLE_WAIT_MS = 2000, /* for the first request when the upstream is down */
	/* Error codes for replies mongoguard writes itself. */
	CODE_HOST_UNREACHABLE = 6,
	CODE_BLOCKED = 96, /* OperationFailed: never retried by drivers */
};

typedef enum {
	SESSION_ACTIVE,   /* relaying */
	SESSION_WAITING,  /* holding a request until the index cache answers */
	SESSION_FLUSHING, /* ending: only writing what is left to the client */
	SESSION_CLOSED,   /* freed at the next loop turn (timer made active) */
} session_state;

static const char *const state_names[] = {"active", "waiting", "flushing", "closed"};

struct session {
	session_env env;
	void *token; /* the owner's, handed back by on_closed */
	session_state state;
	uint64_t id;
	char ctx[32];  /* "conn42" */
	char peer[80]; /* the client's address, "127.0.0.1:51234" */
	/* client.application.name from the handshake, "" until then (or
	 * without one): malloc'd, since most connections are idle pool members. */
	const char *app;
	char *app_owned;
	bool seen_hello;
	bool warned_unmapped; /* the hello bypass warning, once per connection */
	bool warned_lb;       /* the load-balancer bypass warning, once per connection */

	struct bufferevent *client; /* NULL while the first bytes are sniffed */
	bool client_tls;
	struct event *sniff_ev;       /* net.tls.mode != disabled: plain or TLS? */
	struct bufferevent *upstream; /* NULL from FLUSHING on */
	bool upstream_connected;
	/* The upstream could not be reached before the client asked anything:
	 * its first request is answered with HostUnreachable (why), then the
	 * connection closes; the timer bounds the wait for that request. */
	bool unreachable;
	char *unreachable_why; /* malloc'd: rare, and idle sessions stay small */
	bool client_paused;    /* reading from the client stopped by backpressure */
	int client_lowat;      /* SO_RCVLOWAT set on the client socket (0: the default) */
	bool upstream_paused;  /* reading from upstream stopped by backpressure */
	/* Sides whose reads are mongoguard's own (reads_owned) and whose read
	 * event is off because the input holds the read high-watermark
	 * (plain_read_cb): bits SIDE_CLIENT, SIDE_UPSTREAM. */
	uint8_t stopped_reads;

	/* One timer for the state's deadline, as the states never need two:
	 * ACTIVE, a started request must finish arriving (net.maxFrameWaitMS);
	 * WAITING, the index list; FLUSHING, the client reading the rest;
	 * CLOSED, made active to free the session at the next loop turn. One
	 * event instead of four keeps idle sessions small (state_timer_cb). */
	struct event *timer;
	bool timer_on; /* timer is pending: kept here, as asking libevent takes its lock */
	struct event *reply_timer; /* upstream.replyTimeoutMS: see arm_reply_timer */
	int64_t reply_due;         /* the head request's deadline (ns); 0: none */
	int64_t reply_wake;        /* when reply_timer fires (ns); 0: not added */
	bool wait_expired;         /* the held request goes on without a sort verdict */

	reply_framer framer;
	inflight_ring inflight;

	/* A large request arriving (see "Large requests" at the top of this
	 * file): read into buf as it comes, judged when whole; relayed while it
	 * arrives (cut-through) or held until judged. */
	struct {
		uint8_t *buf;
		size_t len;  /* the request's length; 0: none in progress */
		size_t got;  /* bytes of it in buf */
		size_t sent; /* bytes of those already forwarded */
		bool relay;  /* cut through: forwarded as it arrives */
	} large;

	/* The reply being captured (env.capture set): its bytes, copied as
	 * they are forwarded, when it is small enough to be read. */
	bool cap_reply;
	uint8_t *cap_buf;
	size_t cap_len, cap_off;
	int32_t cap_rt;

	uint64_t nrequests, nblocked, ndiscarded;
	char *end_reason;          /* END_REASON_LEN bytes once the session ends (reason_buf) */
	log_severity end_severity; /* of the "Connection ended" line */
};

static void process_client(session *s);
static void process_upstream(session *s);
static bool session_enter(session *s, session_state to);
static void session_finish(session *s, log_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- small helpers ---- */

static const snapshot *snap(const session *s)
{
	return *s->env.snap;
}

static struct evbuffer *client_out(session *s)
{
	return bufferevent_get_output(s->client);
}

static size_t upstream_out_len(session *s)
{
	return s->upstream ? evbuffer_get_length(bufferevent_get_output(s->upstream)) : 0;
}

static void plain_read_cb(evutil_socket_t fd, short what, void *arg);

/* Whether a side's reads are mongoguard's own (own_reads). */
static bool reads_owned(const struct bufferevent *bev)
{
	return event_get_callback(&bev->ev_read) == plain_read_cb;
}

static unsigned side_of(const session *s, const struct bufferevent *bev)
{
	return bev == s->client ? SIDE_CLIENT : SIDE_UPSTREAM;
}

/* A side whose reads stopped at the read high-watermark reads again once
 * its input is below it. Called where input is consumed (the end of
 * process_client and process_upstream) and where the watermark rises. */
static void restart_reads(session *s, struct bufferevent *bev)
{
	unsigned side = side_of(s, bev);
	if (!(s->stopped_reads & side) ||
	    evbuffer_get_length(bufferevent_get_input(bev)) >= bev->wm_read.high)
		return;
	s->stopped_reads &= (uint8_t)~side;
	if (bufferevent_get_enabled(bev) & EV_READ)
		event_add(&bev->ev_read,
		          evutil_timerisset(&bev->timeout_read) ? &bev->timeout_read : NULL);
}

/* The read high-watermark: reading a side stops while its input holds
 * this much (a request or reply being gathered whole raises it to that
 * message's length). On a side whose reads are ours it lives in wm_read
 * without libevent's watermark callback, which runs on every change of the
 * input buffer and re-adds the read event under the base lock each time
 * (a fifth of the user time per small request); plain_read_cb stops and
 * restart_reads restarts. TLS sides keep libevent's. Unchanged marks cost
 * nothing either way. */
static void set_read_need(session *s, struct bufferevent *bev, size_t need)
{
	size_t high = need > READ_CHUNK ? need : READ_CHUNK;
	if (bev->wm_read.high == high)
		return;
	if (!reads_owned(bev)) {
		bufferevent_setwatermark(bev, EV_READ, 0, high);
		return;
	}
	bev->wm_read.high = high;
	restart_reads(s, bev);
}

/* The rest of a large request is awaited without a wake-up per packet: the
 * kernel reports the socket readable once `remaining` bytes (at most a read
 * chunk) are queued, or at its end. Plain sockets only (TLS records do not
 * map to request bytes); 0 puts the default back. */
static void await_client_bytes(session *s, size_t remaining)
{
	int lowat = remaining > READ_CHUNK ? READ_CHUNK : (int)remaining;
	if (s->client_tls || lowat == s->client_lowat || (lowat <= 1 && s->client_lowat <= 1))
		return;
	int v = lowat > 1 ? lowat : 1;
	if (setsockopt(bufferevent_getfd(s->client), SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0)
		s->client_lowat = lowat;
}

/* Moves len bytes from the front of src to dst's output. When dst's output
 * is empty, the bytes are all src holds, and dst is a connected plain
 * socket, they are written at once instead, and only what the socket does
 * not take is queued: through the output buffer a small message costs an
 * epoll_ctl to watch for writability, a loop turn, and an epoll_ctl to stop
 * watching. Batches (pipelined requests, a reply with more behind it) go
 * through the buffer whole, one writev later. A write error is left for
 * the bufferevent's own write to meet and report. */
static void relay_bytes(struct evbuffer *src, struct bufferevent *dst, bool connected, size_t len)
{
	struct evbuffer *out = bufferevent_get_output(dst);
	struct evbuffer_iovec v[8];
	struct iovec io[8];
	int n;
	if (connected && len > 0 && len == evbuffer_get_length(src) &&
	    evbuffer_get_length(out) == 0 && !bufferevent_openssl_get_ssl(dst) &&
	    (n = evbuffer_peek(src, (ev_ssize_t)len, NULL, v, 8)) > 0 && n <= 8) {
		for (int i = 0; i < n; i++)
			io[i] = (struct iovec){v[i].iov_base, v[i].iov_len};
		/* send or sendmsg, not writev: the socket calls skip the file
		 * layer, and send copies no iovec in */
		struct msghdr m = {.msg_iov = io, .msg_iovlen = (size_t)n};
		/* a socket bufferevent's events hold its fd; bufferevent_getfd
		 * asks through its ctrl call, under its lock (60 instructions) */
		int fd = event_get_fd(&dst->ev_write);
		ssize_t w = n == 1 ? send(fd, io[0].iov_base, io[0].iov_len, MSG_NOSIGNAL)
		                   : sendmsg(fd, &m, MSG_NOSIGNAL);
		if (w > 0) {
			evbuffer_drain(src, (size_t)w);
			len -= (size_t)w;
		}
	}
	if (len > 0)
		evbuffer_remove_buffer(src, out, len);
}

/* len bytes at p on their way to dst, as relay_bytes: written at once when
 * dst is a connected plain socket with nothing queued, and whatever the
 * socket does not take copied into dst's output. False when that copy
 * could not be made (out of memory). */
static bool relay_mem(struct bufferevent *dst, bool connected, const uint8_t *p, size_t len)
{
	struct evbuffer *out = bufferevent_get_output(dst);
	if (connected && len > 0 && evbuffer_get_length(out) == 0 &&
	    !bufferevent_openssl_get_ssl(dst)) {
		ssize_t w = send(event_get_fd(&dst->ev_write), p, len, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
		}
	}
	return len == 0 || evbuffer_add(out, p, len) == 0;
}

/* One message's len bytes, at the front of src, on their way to dst: into
 * the worker's stage, to go out with the others of this turn, or, when
 * they are all src holds (`all`, which the callers know without asking
 * src) and nothing is staged, to dst at once (relay_bytes), as the stage
 * would have sent them alone at the turn's end anyway. A read of one
 * request, or of one reply, is the common case; this saves it the move
 * into the stage. */
static void stage_or_relay(struct evbuffer *src, size_t len, bool all, struct evbuffer *stage,
                           struct bufferevent *dst, bool connected)
{
	if (all && dst && evbuffer_get_length(stage) == 0)
		relay_bytes(src, dst, connected, len);
	else
		evbuffer_remove_buffer(src, stage, len);
}

/* The requests staged by this turn of process_client go upstream, in one
 * write when nothing is queued ahead of them. Called before anything else
 * is added to the upstream's output, so the order is kept. */
static void flush_stage(session *s)
{
	size_t n = evbuffer_get_length(s->env.stage);
	if (n == 0)
		return;
	if (s->upstream)
		relay_bytes(s->env.stage, s->upstream, s->upstream_connected, n);
	else
		evbuffer_drain(s->env.stage, n); /* the session ended meanwhile */
}

/* Why the session ended, written once it ends: allocated then, so an open
 * session does not carry it. Without memory the words are lost (into a
 * per-thread scratch buffer) and the log says only "closed". */
static char *reason_buf(session *s)
{
	static _Thread_local char lost[END_REASON_LEN];
	if (!s->end_reason)
		s->end_reason = calloc(1, END_REASON_LEN);
	return s->end_reason ? s->end_reason : lost;
}

/* The same for the replies this turn of process_upstream relayed; called
 * before anything else is written to the client. */
static void flush_replies(session *s)
{
	size_t n = evbuffer_get_length(s->env.stage_replies);
	if (n > 0)
		relay_bytes(s->env.stage_replies, s->client, true, n);
}

static const char *unreachable_why(const session *s)
{
	return s->unreachable_why ? s->unreachable_why : "upstream unreachable";
}

/* The state's timer, (re)started or stopped; every request that arrives
 * whole stops it, so stopping one that is not running costs nothing. */
static void set_timer(session *s, uint32_t ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(s->timer, &tv);
	s->timer_on = true;
}

static void clear_timer(session *s)
{
	if (s->timer_on)
		evtimer_del(s->timer);
	s->timer_on = false;
}

static void pause_client(session *s)
{
	s->client_paused = true;
	bufferevent_disable(s->client, EV_READ);
}

/* Reading from the client resumes once there is room upstream and in the
 * queue, unless a held request or the end of the session keeps it off. */
static void resume_client(session *s)
{
	if (!s->client_paused || inflight_full(&s->inflight) || s->state != SESSION_ACTIVE)
		return;
	s->client_paused = false;
	bufferevent_enable(s->client, EV_READ);
	process_client(s);
}

static int32_t next_request_id(session *s)
{
	return (int32_t)(atomic_fetch_add(&s->env.ids->next_request, 1) & 0x7fffffff);
}

/* True when nothing but an awaitable hello is in flight. */
static bool session_idle(session *s)
{
	return !s->client ||
	       (inflight_only_awaiting(&s->inflight) && !reply_framer_mid_reply(&s->framer) &&
	        s->large.len == 0 && evbuffer_get_length(bufferevent_get_input(s->client)) == 0);
}

/* ---- answers in order ---- */

/* Writes every answer of ours that has reached the head of the queue, at a
 * reply boundary. */
static void flush_answers(session *s)
{
	inflight *f;
	while (!reply_framer_mid_reply(&s->framer) && (f = inflight_head(&s->inflight)) &&
	       f->answer) {
		flush_replies(s); /* the replies relayed before it go first */
		evbuffer_add(client_out(s), f->answer, f->answer_len);
		inflight_pop(&s->inflight);
	}
}

/* Queues our own reply (a malloc'd message, owned from here on) behind the
 * requests already in flight. */
static void queue_answer(session *s, int32_t request_id, reply_form form, uint8_t *msg, size_t len)
{
	inflight *f = msg ? inflight_push(&s->inflight, request_id, INFLIGHT_PLAIN, form) : NULL;
	if (!f) {
		free(msg); /* cannot happen: process_client checks room first */
		return;
	}
	f->answer = msg;
	f->answer_len = len;
	flush_answers(s);
}

static uint8_t *make_error(session *s, reply_form form, int32_t request_id, int code,
                           const char *code_name, const char *errmsg, size_t *len)
{
	return reply_error(form, next_request_id(s), request_id, code, code_name, errmsg, NULL,
	                   len);
}

static void answer_error(session *s, reply_form form, int32_t request_id, int code,
                         const char *code_name, const char *errmsg)
{
	size_t len = 0;
	uint8_t *msg = make_error(s, form, request_id, code, code_name, errmsg, &len);
	queue_answer(s, request_id, form, msg, len);
}

/* A DDL command's reply passed: the index cache forgets what it changed. */
static void note_ddl_done(session *s, const inflight *f)
{
	engine *e = snap(s)->engine;
	request r;
	wire_error err = {0};
	if (!e || !f->ddl_copy)
		return;
	if (request_decode(&r, f->ddl_copy, f->ddl_len, &err) == REQUEST_COMMAND)
		engine_note_ddl(e, &r.view);
	request_release(&r);
}

/* The reply timer fires at reply_due, or earlier: it is added only when
 * nothing would wake it by then (reply_timeout_cb looks again). */
static void wake_reply_timer(session *s, int64_t now)
{
	if (s->reply_wake && s->reply_wake <= s->reply_due)
		return;
	int64_t us = (s->reply_due - now) / 1000;
	struct timeval tv = {us > 0 ? us / 1000000 : 0, us > 0 ? us % 1000000 : 0};
	evtimer_add(s->reply_timer, &tv);
	s->reply_wake = s->reply_due;
}

/* upstream.replyTimeoutMS: the oldest request waiting for the upstream
 * must see its reply begin within the limit, counted from when it became
 * the oldest. Awaitable hellos wait by design and are left out, and so is
 * a stream of moreToCome replies once it has begun. The deadline is a
 * number, moved on every request and reply; the timer is added only when
 * it would wake too late, and looks at the deadline when it fires: a timer
 * added and deleted per request cost both under the event base's lock. */
static void arm_reply_timer(session *s, bool restart, int64_t now)
{
	uint32_t ms = snap(s)->cfg.reply_timeout_ms;
	const inflight *f = inflight_head(&s->inflight);
	bool wanted = ms && f && !f->answer && f->kind != INFLIGHT_AWAIT &&
	              s->state != SESSION_FLUSHING && s->state != SESSION_CLOSED;
	if (!wanted) {
		s->reply_due = 0;
		return;
	}
	if (!restart && s->reply_due)
		return;
	if (!now) /* 0: the caller has not read the clock */
		now = mg_now_ns();
	s->reply_due = now + (int64_t)ms * 1000000;
	wake_reply_timer(s, now);
}

/* A reply without moreToCome was relayed: its request is complete. */
static void complete_head(session *s)
{
	inflight *f = inflight_head(&s->inflight);
	if (!f)
		return; /* the framer relays only replies to a queued request */
	if (f->kind == INFLIGHT_DDL)
		note_ddl_done(s, f);
	inflight_pop(&s->inflight);
	flush_answers(s);
	arm_reply_timer(s, true, 0);
	resume_client(s);
}

/* The upstream could not be reached at all: every request still waiting
 * (none of which reached a server) gets an error, as far as the reply
 * stream allows. A connection that was up and then ended gets no replies of
 * ours: see upstream_lost. */
static void fail_inflight(session *s, const char *why)
{
	if (reply_framer_mid_reply(&s->framer))
		return;
	for (unsigned i = 0; i < inflight_count(&s->inflight); i++) {
		inflight *f = inflight_at(&s->inflight, i);
		if (!f->answer)
			f->answer = make_error(s, f->form, f->request_id, CODE_HOST_UNREACHABLE,
			                       "HostUnreachable", why, &f->answer_len);
	}
	flush_answers(s);
}

/* ---- requests ---- */

typedef enum {
	REQ_FORWARD,
	REQ_REPLACE, /* forward the replacement instead */
	REQ_DROP,    /* answered (or dropped) by us */
	REQ_WAIT,
	REQ_CLOSE,
} req_outcome;

/* What handling a request produced for the bytes to send upstream. */
typedef struct handled {
	req_outcome outcome;
	uint8_t *replacement; /* REQ_REPLACE: owned */
	size_t replacement_len;
} handled;

static void log_bad_request(session *s, const frame_header *h, const wire_error *err,
                            const char *action)
{
	mx_add(&s->env.mx->bad_requests, 1);
	log_line *l =
	    log_begin(LOG_WARNING, "NETWORK", LOGID_BAD_REQUEST, s->ctx, "Malformed request");
	log_attr_str(l, "opcode", frame_opcode_name(h->opcode));
	log_attr_int(l, "requestID", h->request_id);
	log_attr_int(l, "code", err->code);
	log_attr_str(l, "reason", err->msg);
	log_attr_str(l, "action", action);
	log_end(l);
}

/* A request we do not forward: answer it with the error when a reply is
 * allowed, else close the connection. */
static req_outcome reject(session *s, const request *r, const wire_error *err)
{
	if (r->legacy_opcode)
		log_reason(LOG_WARNING, "NETWORK", LOGID_LEGACY_OPCODE, s->ctx,
		           "Legacy %s refused with an error reply", frame_opcode_name(r->h.opcode));
	if (r->more_to_come) {
		log_bad_request(s, &r->h, err, "connection closed (no reply allowed)");
		session_finish(s, LOG_WARNING, "malformed request with moreToCome: %s", err->msg);
		return REQ_CLOSE;
	}
	log_bad_request(s, &r->h, err, "error reply");
	answer_error(s, r->form, r->h.request_id, err->code,
	             err->code_name ? err->code_name : "ProtocolError", err->msg);
	return REQ_DROP;
}

/* The handshake: remember the client's app name, and strip compression so
 * every later message stays readable. */
static void note_hello(session *s, const request *r, handled *out)
{
	char app[128];
	if (!s->seen_hello && handshake_app_name(&r->view, app, sizeof(app)) &&
	    (s->app_owned = strdup(app))) {
		s->app = s->app_owned;
		log_line *l =
		    log_begin(LOG_DEBUG, "NETWORK", LOGID_CONN_ACCEPTED, s->ctx, "Client metadata");
		log_attr_str(l, "appName", s->app);
		log_end(l);
	}
	s->seen_hello = true;
	out->replacement = request_strip_compression(r, &out->replacement_len);
	if (out->replacement)
		log_reason(LOG_DEBUG, "NETWORK", LOGID_COMPRESSION_STRIPPED, s->ctx,
		           "Removed compression from the handshake so requests stay readable");
}

static void answer_block(session *s, const request *r, const block_info *block)
{
	s->nblocked++;
	if ((unsigned)block->rule < RULE_COUNT)
		mx_add(&s->env.mx->blocked[block->rule], 1);
	if (r->more_to_come)
		return; /* nothing may answer it: dropped, and the finding says so */
	size_t len = 0;
	bson_t extra = BSON_INITIALIZER;
	BSON_APPEND_UTF8(&extra, "mongoguardRule", rule_name(block->rule));
	uint8_t *msg = reply_error(r->form, next_request_id(s), r->h.request_id, CODE_BLOCKED,
	                           "OperationFailed", block->errmsg, &extra, &len);
	bson_destroy(&extra);
	queue_answer(s, r->h.request_id, r->form, msg, len);
}

/* Capture: the request goes to the writer's queue as it arrived. */
static void capture_request(session *s, const request *r, const char *outcome)
{
	capture_origin o = {capture_now_us(), s->id, s->peer, s->app};
	capture_sink_request(s->env.capture, &o, r->msg, r->len, outcome);
}

/* A decoded command: analyse it, then queue it for its reply. */
static req_outcome handle_command(session *s, const request *r, handled *out)
{
	engine *e = snap(s)->engine;
	mx_add(&s->env.mx->commands[mx_command_of(r->view.name)], 1);
	if (r->hello)
		note_hello(s, r, out);
	/* Two clock reads per request: around the analysis, the second one
	 * also the time the request is sent (its reply's latency). */
	int64_t now = mg_now_ns();
	if (e) {
		request_ctx rc = {
		    .app_name = s->app,
		    .client = s->peer,
		    .now_ms = now / 1000000,
		    .no_wait = s->wait_expired,
		};
		block_info block;
		int64_t t0 = now;
		verdict vd = engine_analyze(e, &r->view, &rc, &block);
		now = mg_now_ns();
		mx_observe(&s->env.mx->analysis, (uint64_t)(now - t0));
		if (vd != VERDICT_FORWARD) {
			free(out->replacement);
			out->replacement = NULL;
		}
		if (vd == VERDICT_WAIT_INDEXES)
			return REQ_WAIT;
		if (vd == VERDICT_BLOCK) {
			if (s->env.capture)
				capture_request(s, r, "block");
			answer_block(s, r, &block);
			return REQ_DROP;
		}
	}
	if (s->env.capture)
		capture_request(s, r, "forward");
	if (!r->more_to_come) {
		inflight_kind kind = e && engine_is_ddl(&r->view) ? INFLIGHT_DDL
		                     : r->awaitable_hello         ? INFLIGHT_AWAIT
		                     : r->hello                   ? INFLIGHT_HELLO
		                                                  : INFLIGHT_PLAIN;
		inflight *f = inflight_push(&s->inflight, r->h.request_id, kind, r->form);
		if (f)
			f->sent_ns = now;
		arm_reply_timer(s, false, now);
		if (f && kind == INFLIGHT_DDL && (f->ddl_copy = malloc(r->plain_len))) {
			memcpy(f->ddl_copy, r->plain, r->plain_len);
			f->ddl_len = r->plain_len;
		}
	}
	return out->replacement ? REQ_REPLACE : REQ_FORWARD;
}

static void handle_request(session *s, const uint8_t *msg, size_t len, handled *out)
{
	request r;
	wire_error err = {0};
	out->replacement = NULL;
	switch (request_decode(&r, msg, len, &err)) {
	case REQUEST_COMMAND:
		out->outcome = handle_command(s, &r, out);
		break;
	case REQUEST_REJECT:
		out->outcome = reject(s, &r, &err);
		break;
	case REQUEST_CLOSE:
		mx_add(&s->env.mx->bad_requests, 1);
		session_finish(s, LOG_WARNING, "%s", err.msg);
		out->outcome = REQ_CLOSE;
		break;
	}
	request_release(&r);
}

/* A request has started arriving: it must be complete within
 * net.maxFrameWaitMS, counted from its first bytes. */
static void arm_frame_timer(session *s)
{
	if (!s->timer_on)
		set_timer(s, snap(s)->cfg.max_frame_wait_ms);
}

/* The stream cannot be resynchronised after a bad length: answer if the
 * opcode says how, then close. */
static void refuse_frame(session *s, const uint8_t *hdr, const wire_error *err)
{
	frame_header h = {.request_id = wire_read_i32(hdr + 4), .opcode = wire_read_i32(hdr + 12)};
	log_bad_request(s, &h, err, "error reply and close");
	if ((h.opcode == OP_MSG || h.opcode == OP_QUERY) && inflight_count(&s->inflight) == 0 &&
	    !reply_framer_mid_reply(&s->framer)) {
		size_t len = 0;
		uint8_t *msg =
		    make_error(s, h.opcode == OP_MSG ? REPLY_FORM_OPMSG : REPLY_FORM_OPREPLY,
		               h.request_id, err->code, err->code_name, err->msg, &len);
		flush_replies(s);
		if (msg)
			evbuffer_add(client_out(s), msg, len);
		free(msg);
	}
	session_finish(s, LOG_WARNING, "bad message length from client: %s", err->msg);
}

/* ---- large requests: read into their own buffer, relayed or held ---- */

static void count_relayed(session *s, mx_direction d, size_t len)
{
	mx_add(&s->env.mx->messages[d], 1);
	mx_add(&s->env.mx->bytes[d], len);
}

/* n bytes at p of a large request (whole bytes long) from its own buffer
 * to the upstream, after what this turn staged. False when the session
 * ended (out of memory). */
static bool large_send(session *s, const uint8_t *p, size_t n, size_t whole)
{
	flush_stage(s);
	if (relay_mem(s->upstream, s->upstream_connected, p, n))
		return true;
	session_finish(s, LOG_ERROR, "out of memory relaying a %zu-byte request", whole);
	return false;
}

/* The command's name, when the first section is the body and its first key
 * has arrived; else NULL. head holds the copied bytes. */
static const char *peek_command(struct evbuffer *in, size_t avail, char *head, size_t size)
{
	enum { KIND_AT = WIRE_HEADER_LEN + 4, NAME_AT = KIND_AT + 1 + 4 + 1 };
	size_t n = avail < size ? avail : size;
	if (n <= NAME_AT)
		return NULL;
	evbuffer_copyout(in, head, n);
	if (head[KIND_AT] != 0 || !memchr(head + NAME_AT, '\0', n - NAME_AT))
		return NULL;
	return head + NAME_AT;
}

/* May this request, not all here yet, go upstream while it arrives? Only an
 * uncompressed OP_MSG of CUT_MIN bytes or more, with nothing else in flight
 * (so our answer, if one is needed after all, comes next), and only when
 * the configuration cannot block it: a block must be decided before the
 * server has anything. */
static bool cut_allowed(session *s, struct evbuffer *in, size_t avail, const frame_header *h)
{
	if (h->opcode != OP_MSG || (size_t)h->length < CUT_MIN || s->unreachable || !s->upstream ||
	    s->state != SESSION_ACTIVE || inflight_count(&s->inflight) != 0)
		return false;
	const engine *e = snap(s)->engine;
	char head[WIRE_HEADER_LEN + 64];
	return !e || !engine_may_block(e, peek_command(in, avail, head, sizeof(head)));
}

static void large_end(session *s)
{
	free(s->large.buf);
	s->large.buf = NULL;
	s->large.len = s->large.got = s->large.sent = 0;
}

/* The whole request is here; all but its last CUT_HELD bytes are upstream.
 * Judged like any other. Only "forward" can still be honoured as asked:
 * anything else (a block after a reload made one possible, a malformed
 * request, a handshake to rewrite) ends the upstream connection before the
 * server has the whole message, so it never runs, and the client gets our
 * answer, then the close. */
static bool cut_finish(session *s)
{
	size_t rest = s->large.len - s->large.sent;
	handled h;
	handle_request(s, s->large.buf, s->large.len, &h);
	switch (h.outcome) {
	case REQ_WAIT:
		if (s->state == SESSION_ACTIVE)
			session_enter(s, SESSION_WAITING);
		return false; /* the tail stays in large.buf; judged again later */
	case REQ_CLOSE:
		large_end(s);
		return false; /* session_finish already ran */
	case REQ_FORWARD:
		if (!large_send(s, s->large.buf + s->large.sent, rest, s->large.len)) {
			large_end(s);
			return false;
		}
		count_relayed(s, MX_DIR_REQUEST, s->large.len);
		break;
	case REQ_REPLACE:
	case REQ_DROP:
		free(h.replacement);
		session_finish(
		    s, LOG_WARNING,
		    "a %zu-byte request relayed while it arrived could not be sent as it "
		    "was (%s); the upstream connection ended before the server had all of it",
		    s->large.len,
		    h.outcome == REQ_REPLACE ? "a handshake to rewrite" : "answered by mongoguard");
		large_end(s);
		return false;
	}
	large_end(s);
	s->nrequests++;
	if (s->state == SESSION_WAITING) /* the held request went through */
		session_enter(s, SESSION_ACTIVE);
	return true;
}

/* n more bytes of the large request are in its buffer. One held whole is
 * awaited a read chunk at a time (SO_RCVLOWAT); one relayed goes on as it
 * comes. The frame timer, armed when it started, ends once it is whole. */
static void large_took(session *s, size_t n)
{
	s->large.got += n;
	await_client_bytes(s, s->large.relay ? 0 : s->large.len - s->large.got);
	if (s->large.got == s->large.len)
		clear_timer(s);
}

static bool judge(session *s, struct evbuffer *in, const uint8_t *msg, size_t len, bool all,
                  handled *h);

/* Takes what the input buffer holds of the large request into its buffer
 * (on a plain socket plain_read_cb reads the rest straight there). One
 * relayed goes upstream as it arrives, all but the last bytes until the
 * whole has been judged; one held is judged once whole, as any request.
 * False when the loop must stop. */
static bool large_step(session *s, struct evbuffer *in)
{
	size_t n = s->large.len - s->large.got, avail = evbuffer_get_length(in);
	if (n > avail)
		n = avail;
	if (n > 0 && evbuffer_remove(in, s->large.buf + s->large.got, n) == (int)n)
		large_took(s, n);
	if (s->large.relay) {
		/* all of it but the last CUT_HELD bytes, as they come: the
		 * server cannot run it before the verdict lets those go */
		size_t upto =
		    s->large.got < s->large.len - CUT_HELD ? s->large.got : s->large.len - CUT_HELD;
		if (upto > s->large.sent) {
			if (!large_send(s, s->large.buf + s->large.sent, upto - s->large.sent,
			                s->large.len))
				return false;
			s->large.sent = upto;
		}
		return s->large.got < s->large.len || cut_finish(s);
	}
	if (s->large.got == s->large.len) {
		handled h;
		bool go = judge(s, NULL, s->large.buf, s->large.len, true, &h);
		if (h.outcome != REQ_WAIT)
			large_end(s); /* else it stays, judged again later */
		return go;
	}
	return true;
}

/* The length of the next whole request in the client's buffer, or 0 when
 * it has not all arrived yet (or the stream was refused, or a large one
 * started arriving into its own buffer: s->large.len). */
static size_t next_frame(session *s, struct evbuffer *in, size_t avail)
{
	uint8_t hdr[WIRE_HEADER_LEN];
	frame_header h;
	wire_error err = {0};
	if (avail < WIRE_HEADER_LEN) {
		arm_frame_timer(s);
		return 0;
	}
	evbuffer_copyout(in, hdr, sizeof(hdr));
	if (frame_header_parse(hdr, sizeof(hdr), &h, &err) != FRAME_OK) {
		refuse_frame(s, hdr, &err);
		return 0;
	}
	if (avail < (size_t)h.length) {
		arm_frame_timer(s);
		if ((size_t)h.length >= CUT_MIN && (s->large.buf = malloc((size_t)h.length))) {
			s->large.len = (size_t)h.length;
			s->large.relay = cut_allowed(s, in, avail, &h);
			set_read_need(s, s->client, READ_CHUNK);
		} else {
			/* small, or no memory for a buffer of its own: gathered
			 * in the input buffer and made contiguous there */
			set_read_need(s, s->client, (size_t)h.length);
		}
		return 0;
	}
	clear_timer(s);
	await_client_bytes(s, 0);
	set_read_need(s, s->client, READ_CHUNK);
	return (size_t)h.length;
}

/* Does to the request's bytes what handling decided. They are at the front
 * of `in` (`all`: they are all it holds), or, with `in` NULL, at msg, a
 * large request's own buffer. False when the loop must stop (waiting, or
 * the session ended). */
static bool apply(session *s, struct evbuffer *in, const uint8_t *msg, size_t len, bool all,
                  handled *h)
{
	switch (h->outcome) {
	case REQ_WAIT:
		if (s->state == SESSION_ACTIVE)
			session_enter(s, SESSION_WAITING);
		return false;
	case REQ_CLOSE:
		return false; /* session_finish already ran */
	case REQ_FORWARD:
		if (in)
			stage_or_relay(in, len, all, s->env.stage, s->upstream,
			               s->upstream_connected);
		else if (!large_send(s, msg, len, len))
			return false;
		count_relayed(s, MX_DIR_REQUEST, len);
		break;
	case REQ_REPLACE:
		if (in)
			evbuffer_drain(in, len);
		evbuffer_add(s->env.stage, h->replacement, h->replacement_len);
		count_relayed(s, MX_DIR_REQUEST, h->replacement_len);
		free(h->replacement);
		break;
	case REQ_DROP:
		if (in)
			evbuffer_drain(in, len);
		break;
	}
	s->nrequests++;
	if (s->state == SESSION_WAITING) /* the held request went through */
		session_enter(s, SESSION_ACTIVE);
	return true;
}

/* Judges one whole request and does what handling decided (apply; `in` and
 * `all` as there). False when the loop must stop. */
static bool judge(session *s, struct evbuffer *in, const uint8_t *msg, size_t len, bool all,
                  handled *h)
{
	handle_request(s, msg, len, h);
	if (s->unreachable && (h->outcome == REQ_FORWARD || h->outcome == REQ_REPLACE)) {
		/* no upstream to forward to: answered (it is queued) */
		if (h->outcome == REQ_REPLACE)
			free(h->replacement);
		if (in)
			evbuffer_drain(in, len);
		fail_inflight(s, unreachable_why(s));
		session_finish(s, LOG_WARNING, "%s", unreachable_why(s));
		return false;
	}
	return apply(s, in, msg, len, all, h);
}

/* Called when the client side may have work: new bytes, room upstream, the
 * index cache answering, or a wait timing out. The requests forwarded are
 * staged and written together when it returns (flush_stage); one that is
 * all its read held goes at once (stage_or_relay). */
static void process_client_requests(session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->client);
	while (s->state == SESSION_ACTIVE || s->state == SESSION_WAITING) {
		size_t avail = evbuffer_get_length(in);
		if (avail == 0 && !s->large.len)
			break; /* a large request may have arrived in its own buffer */
		/* Stop while the upstream has not taken what we sent, or the
		 * pipeline is full: the client waits, our memory does not grow. */
		if (upstream_out_len(s) >= OUT_HIGH || inflight_full(&s->inflight)) {
			pause_client(s);
			break;
		}
		if (s->large.len) {
			if (!large_step(s, in))
				return;
			if (s->large.len)
				break; /* the rest of it has not arrived */
			continue;
		}
		size_t len = next_frame(s, in, avail);
		if (len == 0) {
			if (s->large.len)
				continue; /* a large request started: take what is here */
			break;
		}
		const uint8_t *msg = evbuffer_pullup(in, (ev_ssize_t)len);
		if (!msg) {
			session_finish(s, LOG_ERROR, "out of memory reading a %zu-byte request",
			               len);
			return;
		}
		handled h;
		if (!judge(s, in, msg, len, len == avail, &h))
			return;
	}
}

static void process_client(session *s)
{
	process_client_requests(s);
	flush_stage(s);
	restart_reads(s, s->client);
}

/* ---- replies ---- */

static void note_dropped_reply(session *s, const frame_header *h)
{
	const int32_t *expect = inflight_expect(&s->inflight);
	s->ndiscarded++;
	log_line *l =
	    log_begin(s->ndiscarded == 1 ? LOG_WARNING : LOG_DEBUG, "NETWORK", LOGID_BAD_REPLY,
	              s->ctx, "Dropped a reply that answers no request in flight");
	log_attr_int(l, "responseTo", h->response_to);
	log_attr_int(l, "expected", expect ? *expect : -1);
	log_attr_str(l, "why",
	             "the upstream answered a request that allowed no reply (moreToCome), or an "
	             "unknown one");
	log_end(l);
}

/* A relayed reply begins: count it, and time its request's first one. */
static void note_reply_start(session *s)
{
	mx_add(&s->env.mx->messages[MX_DIR_REPLY], 1);
	/* The upstream answers: no deadline while the reply streams (a slow
	 * client may hold it back); the next request's starts when it ends. */
	s->reply_due = 0;
	inflight *f = inflight_head(&s->inflight);
	if (f && f->sent_ns) {
		mx_observe(&s->env.mx->latency, (uint64_t)(mg_now_ns() - f->sent_ns));
		f->sent_ns = 0;
	}
}

/* The first bytes of the upstream's buffer that the framer wants to see,
 * contiguous: copied when they fit the stack, pulled up otherwise. */
static const uint8_t *peek_upstream(struct evbuffer *in, size_t have, uint8_t *buf, size_t bufsize)
{
	if (have <= bufsize) {
		evbuffer_copyout(in, buf, have);
		return buf;
	}
	return evbuffer_pullup(in, (ev_ssize_t)have);
}

/* Capture: a relayed reply's bytes are copied as they pass (the framer
 * forwards a reply in as many pieces as arrive), and handed to the writer
 * when it ends. */
static void capture_reply_step(session *s, struct evbuffer *in, const framer_step *st)
{
	if (st->starts) {
		s->cap_reply = true;
		s->cap_len = (size_t)st->peek.h.length;
		s->cap_off = 0;
		s->cap_rt = st->peek.h.response_to;
		s->cap_buf = capture_sink_reply_buffer(s->env.capture, s->cap_len);
	}
	if (s->cap_buf && st->n <= s->cap_len - s->cap_off) {
		evbuffer_copyout(in, s->cap_buf + s->cap_off, st->n);
		s->cap_off += st->n;
	}
}

static void capture_reply_end(session *s)
{
	capture_origin o = {capture_now_us(), s->id, s->peer, s->app};
	if (s->cap_buf && s->cap_off != s->cap_len) {
		free(s->cap_buf);
		s->cap_buf = NULL;
	}
	capture_sink_reply(s->env.capture, &o, s->cap_rt, s->cap_len, s->cap_buf);
	s->cap_buf = NULL;
	s->cap_reply = false;
}

/* The hosts a hello reply named that no listener serves: left out of the
 * reply (hello_rewrite.h), and said loudly, since a driver that needs that
 * member cannot reach it through mongoguard. */
static void warn_unmapped(session *s, const hello_rewrite_result *r)
{
	char hosts[512] = "";
	size_t used = 0;
	for (unsigned i = 0; i < r->nunmapped && i < HELLO_MAX_UNMAPPED; i++)
		used +=
		    (size_t)snprintf(hosts + used, used < sizeof(hosts) ? sizeof(hosts) - used : 0,
		                     "%s%s", i ? ", " : "", r->unmapped[i]);
	log_line *l = log_begin(s->warned_unmapped ? LOG_DEBUG : LOG_WARNING, "NETWORK",
	                        LOGID_HELLO_REWRITE, s->ctx,
	                        "Replica-set members without a mongoguard listener left out of "
	                        "hello, so drivers cannot bypass mongoguard");
	log_attr_str(l, "members", hosts);
	log_attr_bool(l, "primaryRemoved", r->primary_dropped);
	log_attr_str(l, "fix", "add each member to upstream.members with a listen address");
	log_end(l);
	s->warned_unmapped = true;
}

/* A hello reply with serviceId comes from a load balancer (or a server
 * behind one): the driver is in load-balanced mode and pins its cursors
 * and transactions to a serviceId, which mongoguard neither adds nor
 * checks, and the hosts behind the balancer are not mongoguard's to map.
 * Said once per connection: the mode works only as far as the balancer
 * itself is reached through mongoguard. */
static void warn_load_balanced(session *s)
{
	if (s->warned_lb)
		return;
	s->warned_lb = true;
	log_line *l = log_begin(LOG_WARNING, "NETWORK", LOGID_HELLO_REWRITE, s->ctx,
	                        "Upstream answers as a load balancer (serviceId in hello): "
	                        "load-balanced mode passes through unchecked");
	log_attr_str(l, "upstream", s->env.up->name);
	log_attr_str(l, "reason",
	             "load-balanced mode: each client connection is paired with one connection "
	             "to the balancer and serviceId passes unchecked, so the balancer, not "
	             "mongoguard, picks the server behind it; mongoguard cannot map or watch "
	             "those servers");
	log_end(l);
}

/* A whole reply to a hello: rewritten so the set's members are named by
 * their listeners, or passed as it was when there is nothing to change. */
static void relay_hello(session *s, struct evbuffer *in, struct evbuffer *out, const uint8_t *p,
                        size_t n)
{
	hello_rewrite_result r;
	wire_error err = {0};
	switch (hello_rewrite(p, n, s->env.hello, &r, &err)) {
	case HELLO_REWRITTEN:
		evbuffer_drain(in, n);
		evbuffer_add(out, r.msg, r.len);
		free(r.msg);
		break;
	case HELLO_INVALID:
		log_reason(LOG_WARNING, "NETWORK", LOGID_HELLO_REWRITE, s->ctx,
		           "Cannot read a hello reply to rewrite its hosts; passed on as it is: %s",
		           err.msg);
		/* fall through */
	case HELLO_UNCHANGED:
		evbuffer_remove_buffer(in, out, n);
		break;
	}
	if (r.nunmapped)
		warn_unmapped(s, &r);
	if (r.load_balanced)
		warn_load_balanced(s);
}

/* Relays what the upstream sent. The replies go through the worker's
 * stage_replies and out together when it returns (flush_replies); one
 * that is all its read held goes at once (stage_or_relay). */
static void process_upstream_replies(session *s)
{
	struct evbuffer *out = s->env.stage_replies;
	/* complete_head() may resume the client side, which may end the
	 * session: look again before every step. */
	while (s->upstream &&
	       (s->state == SESSION_ACTIVE || s->state == SESSION_WAITING ||
	        (s->state == SESSION_FLUSHING && reply_framer_mid_reply(&s->framer)))) {
		struct evbuffer *in = bufferevent_get_input(s->upstream);
		if (evbuffer_get_length(out) + evbuffer_get_length(client_out(s)) >= OUT_HIGH) {
			s->upstream_paused = true;
			bufferevent_disable(s->upstream, EV_READ);
			return;
		}
		size_t avail = evbuffer_get_length(in);
		if (avail == 0) {
			/* What the framer would say with nothing here: gather a
			 * header, or one more byte of the reply it is in, which
			 * is a read chunk's mark either way. Every reply read
			 * ends here, so it is said without asking. */
			set_read_need(s, s->upstream, READ_CHUNK);
			return;
		}
		size_t want = reply_framer_want(&s->framer);
		size_t have = avail < want ? avail : want;
		uint8_t buf[REPLY_PEEK_LEN];
		const uint8_t *p = peek_upstream(in, have, buf, sizeof(buf));
		framer_step st;
		wire_error err = {0};
		const inflight *head = inflight_head(&s->inflight);
		reply_framer_set_whole(&s->framer, s->env.hello && head && !head->answer &&
		                                       inflight_is_hello(head->kind));
		if (!p) {
			session_finish(s, LOG_ERROR, "out of memory reading a %zu-byte reply",
			               have);
			return;
		}
		switch (reply_framer_next(&s->framer, p, have, avail, inflight_expect(&s->inflight),
		                          &st, &err)) {
		case FRAMER_GATHER:
			if (st.n > avail) {
				set_read_need(s, s->upstream, st.n);
				return;
			}
			continue;
		case FRAMER_INVALID: {
			log_line *l = log_begin(LOG_WARNING, "NETWORK", LOGID_BAD_REPLY, s->ctx,
			                        "Malformed reply from upstream");
			log_attr_str(l, "reason", err.msg);
			log_end(l);
			session_finish(s, LOG_WARNING, "upstream sent a malformed reply: %s",
			               err.msg);
			return;
		}
		case FRAMER_DROP:
			if (st.starts)
				note_dropped_reply(s, &st.peek.h);
			evbuffer_drain(in, st.n);
			break;
		case FRAMER_FORWARD:
			if (st.starts)
				note_reply_start(s);
			if (s->env.capture)
				capture_reply_step(s, in, &st);
			stage_or_relay(in, st.n, st.n == avail, out, s->client, true);
			mx_add(&s->env.mx->bytes[MX_DIR_REPLY], st.n);
			break;
		case FRAMER_WHOLE:
			note_reply_start(s);
			if (s->env.capture)
				capture_reply_step(s, in, &st);
			mx_add(&s->env.mx->bytes[MX_DIR_REPLY], st.n);
			relay_hello(s, in, out, p, st.n);
			break;
		}
		if (!reply_framer_mid_reply(&s->framer))
			set_read_need(s, s->upstream, READ_CHUNK);
		if (s->cap_reply && !reply_framer_mid_reply(&s->framer))
			capture_reply_end(s);
		if (st.completes)
			complete_head(s);
	}
}

static void process_upstream(session *s)
{
	process_upstream_replies(s);
	if (s->client)
		flush_replies(s);
	if (s->upstream)
		restart_reads(s, s->upstream);
}

/* ---- states ---- */

static void enter_flushing(session *s)
{
	clear_timer(s);
	flush_replies(s);
	if (s->upstream) {
		/* a reply cut short must not be followed by anything else */
		flush_answers(s);
		bufferevent_free(s->upstream);
		s->upstream = NULL;
	}
	bufferevent_disable(s->client, EV_READ);
	if (evbuffer_get_length(client_out(s)) == 0) {
		session_enter(s, SESSION_CLOSED);
		return;
	}
	bufferevent_setwatermark(s->client, EV_WRITE, 0, 0);
	set_timer(s, FLUSH_TIMEOUT_MS);
}

static void enter_closed(session *s)
{
	if (s->client)
		bufferevent_disable(s->client, EV_READ | EV_WRITE);
	if (s->upstream)
		bufferevent_disable(s->upstream, EV_READ | EV_WRITE);
	clear_timer(s);
	evtimer_del(s->reply_timer);
	s->reply_due = s->reply_wake = 0;
	event_active(s->timer, EV_TIMEOUT, 0);
}

static bool move_allowed(session_state from, session_state to)
{
	switch (to) {
	case SESSION_WAITING:
		return from == SESSION_ACTIVE;
	case SESSION_ACTIVE:
		return from == SESSION_WAITING;
	case SESSION_FLUSHING:
		return from == SESSION_ACTIVE || from == SESSION_WAITING;
	case SESSION_CLOSED:
		return from != SESSION_CLOSED;
	}
	return false;
}

/* The only place a session changes state (see the top of this file).
 * Ending a session that is already ending is normal (both sides may go at
 * once) and refused quietly; any other unexpected move is a bug, refused
 * and logged. */
static bool session_enter(session *s, session_state to)
{
	session_state from = s->state;
	if (!move_allowed(from, to)) {
		bool ending = from >= SESSION_FLUSHING && to >= SESSION_FLUSHING;
		if (!ending)
			log_reason(LOG_ERROR, "NETWORK", LOGID_INTERNAL, s->ctx,
			           "Internal error: refused session state change %s -> %s",
			           state_names[from], state_names[to]);
		return false;
	}
	s->state = to;
	switch (to) {
	case SESSION_WAITING:
		bufferevent_disable(s->client, EV_READ);
		set_timer(s, snap(s)->cfg.engine.index_wait_ms);
		log_reason(LOG_DEBUG, "ANALYZER", LOGID_INDEX_WAIT, s->ctx,
		           "Holding a request until the index list arrives");
		break;
	case SESSION_ACTIVE:
		s->wait_expired = false;
		clear_timer(s);
		if (!s->client_paused)
			bufferevent_enable(s->client, EV_READ);
		break;
	case SESSION_FLUSHING:
		enter_flushing(s);
		break;
	case SESSION_CLOSED:
		enter_closed(s);
		break;
	}
	return true;
}

/* Ends the session: the upstream goes now; what is already queued for the
 * client is written first, then the client connection closes. */
static void session_finish(session *s, log_severity sev, const char *fmt, ...)
{
	if (s->state == SESSION_FLUSHING || s->state == SESSION_CLOSED)
		return; /* the first reason stands */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason_buf(s), END_REASON_LEN, fmt, ap);
	va_end(ap);
	s->end_severity = sev;
	session_enter(s, SESSION_FLUSHING);
}

/* ---- lifecycle ---- */

static void session_free(session *s)
{
	log_line *l =
	    log_begin(s->end_severity, "NETWORK", LOGID_CONN_ENDED, s->ctx, "Connection ended");
	log_attr_str(l, "remote", s->peer);
	log_attr_str(l, "appName", s->app);
	log_attr_str(l, "reason", s->end_reason && s->end_reason[0] ? s->end_reason : "closed");
	log_attr_int(l, "requests", (int64_t)s->nrequests);
	log_attr_int(l, "blocked", (int64_t)s->nblocked);
	if (s->ndiscarded)
		log_attr_int(l, "unexpectedRepliesDropped", (int64_t)s->ndiscarded);
	log_end(l);

	inflight_clear(&s->inflight);
	free(s->large.buf); /* a request cut short by the end of the session */
	free(s->unreachable_why);
	free(s->end_reason);
	free(s->app_owned);
	free(s->cap_buf); /* a reply cut short by the end of the session */
	if (s->sniff_ev)
		close(event_get_fd(s->sniff_ev)); /* still ours: no buffer took it */
	struct event *evs[] = {s->timer, s->reply_timer, s->sniff_ev};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i])
			event_free(evs[i]);
	if (s->upstream)
		bufferevent_free(s->upstream);
	if (s->client)
		bufferevent_free(s->client);
	session_env env = s->env;
	void *token = s->token;
	tls_free(&s->env.tls); /* this session's references */
	free(s);
	env.on_closed(env.owner, token);
}

/* One readv of up to want bytes straight into the end of in: the return
 * of readv, or -2 without memory for the space. */
static ssize_t read_into(struct evbuffer *in, int fd, size_t want)
{
	struct evbuffer_iovec v[2];
	struct iovec io[2];
	int n = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2);
	if (n <= 0)
		return -2;
	for (int i = 0; i < n; i++)
		io[i] = (struct iovec){v[i].iov_base, v[i].iov_len};
	ssize_t got = readv(fd, io, n);
	size_t left = got > 0 ? (size_t)got : 0;
	for (int i = 0; i < n; i++) {
		v[i].iov_len = v[i].iov_len < left ? v[i].iov_len : left;
		left -= v[i].iov_len;
	}
	evbuffer_commit_space(in, v, n);
	return got;
}

/* A read that got nothing (n: its result; -2 when the input buffer could
 * not grow): nothing to do when the socket is merely empty, else the end
 * of the stream or the error, reported as libevent reports it. */
static void read_failed(struct bufferevent *bev, ssize_t n)
{
	if (n < 0 && n != -2 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n == -2)
		errno = ENOMEM;
	bufferevent_disable(bev, EV_READ);
	bev->errorcb(bev, BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR),
	             bev->cbarg);
}

/* Reading a plain socket ourselves (see the top of this file). libevent's
 * read callback for a socket bufferevent asks FIONREAD, reads at most 4 KiB
 * with readv, and calls the read callback; this reads up to the read
 * high-watermark without asking: one recv into the stack, copied into the
 * input buffer, which is all a small message costs; when that recv comes
 * back full, more is waiting (a large message, cut through or held), and
 * one readv of up to a read chunk follows straight into the input buffer,
 * as it does at once when SMALL_READ bytes of a large message already wait
 * there. At the watermark the read event goes off (set_read_need,
 * restart_reads). The bufferevent's enabling and disabling work on its
 * ev_read, whatever callback that event has, so they are unchanged; an
 * enable while stopped wakes this once, which stops again. Bytes read are
 * handed on before an end of stream or an error met after them (the
 * socket stays readable, the next call meets it again), which is reported
 * as libevent reports it: reading disabled, then the event callback. */
static void plain_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bufferevent *bev = arg;
	session *s = bev->cbarg;
	if (what == EV_TIMEOUT) { /* no read timeouts are set; as libevent would */
		bufferevent_disable(bev, EV_READ);
		bev->errorcb(bev, BEV_EVENT_READING | BEV_EVENT_TIMEOUT, bev->cbarg);
		return;
	}
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t have = evbuffer_get_length(in), high = bev->wm_read.high;
	ssize_t n = 0; /* the last call's result */
	if (bev == s->client && s->large.got < s->large.len && have == 0) {
		/* The rest of a large request: straight into its own buffer,
		 * judged and forwarded from there (large_step). */
		size_t want = s->large.len - s->large.got;
		n = recv(fd, s->large.buf + s->large.got, want < CUT_READ ? want : CUT_READ, 0);
		if (n > 0) {
			large_took(s, (size_t)n);
			bev->readcb(bev, bev->cbarg); /* last: it may end the session */
			return;
		}
		read_failed(bev, n);
		return;
	}
	if (high == 0)
		high = have + READ_CHUNK; /* no limit set (init_reads always sets one) */
	if (high <= have) {
		/* Not reached as processing stands (it leaves less than the mark
		 * buffered, or reading disabled), and no test reaches it: the
		 * guard that keeps a full buffer from spinning the loop. */
		event_del(&bev->ev_read);
		s->stopped_reads |= (uint8_t)side_of(s, bev);
		return;
	}
	size_t room = high - have, got = 0;
	bool large = have >= SMALL_READ && room >= SMALL_READ;
	/* A bufferevent keeps its input's end frozen except while it reads. */
	evbuffer_unfreeze(in, 0);
	if (!large) {
		uint8_t buf[SMALL_READ];
		n = recv(fd, buf, room < sizeof(buf) ? room : sizeof(buf), 0);
		if (n > 0 && evbuffer_add(in, buf, (size_t)n) != 0)
			n = -2;
		if (n > 0) {
			got = (size_t)n;
			room -= got;
			large = got == sizeof(buf) && room > 0;
		}
	}
	if (large) {
		n = read_into(in, fd, room < READ_CHUNK ? room : READ_CHUNK);
		if (n > 0)
			got += (size_t)n;
	}
	evbuffer_freeze(in, 0);
	if (got > 0) {
		bev->readcb(bev, bev->cbarg); /* last: it may end the session */
		return;
	}
	read_failed(bev, n);
}

/* Points a plain socket bufferevent's read event at plain_read_cb. The
 * event is the one libevent assigned (after bufferevent_socket_new, or
 * bufferevent_socket_connect for the upstream, which assigns it again);
 * it must not be added yet. If it does not look like that one (another
 * libevent, another layout), libevent's own read stays. */
static void own_reads(struct bufferevent *bev)
{
	struct event *rd = &bev->ev_read;
	evutil_socket_t fd = bufferevent_getfd(bev);
	short evs = EV_READ | EV_PERSIST | EV_FINALIZE;
	if (bufferevent_openssl_get_ssl(bev) || fd < 0 || event_get_fd(rd) != fd ||
	    event_get_base(rd) != bufferevent_get_base(bev) || event_get_events(rd) != evs ||
	    event_get_callback_arg(rd) != bev || event_pending(rd, EV_READ, NULL))
		return;
	event_assign(rd, bufferevent_get_base(bev), fd, evs, plain_read_cb, bev);
}

/* A side's reads, once its read event is final (the client's when it is
 * created, the upstream's after the connect): ours where they can be, and
 * the first read high-watermark. */
static void init_reads(session *s, struct bufferevent *bev)
{
	own_reads(bev);
	set_read_need(s, bev, READ_CHUNK);
}

static void client_read_cb(struct bufferevent *bev, void *arg)
{
	process_client(arg);
}

/* The client drained below OUT_LOW (or, while flushing, to nothing). */
static void client_write_cb(struct bufferevent *bev, void *arg)
{
	session *s = arg;
	if (s->state == SESSION_FLUSHING) {
		if (evbuffer_get_length(client_out(s)) == 0)
			session_enter(s, SESSION_CLOSED);
		return;
	}
	if (s->upstream_paused && s->upstream) {
		s->upstream_paused = false;
		bufferevent_enable(s->upstream, EV_READ);
		process_upstream(s);
	}
}

/* A TLS error on either side, in words, into end_reason (the client's
 * side) or why (the upstream's), and logged. False when OpenSSL has
 * nothing to say (a plain socket error then). */
static bool tls_failure_text(struct bufferevent *bev, char *buf, size_t size)
{
	/* libevent queues the SSL_get_error() code (a small number) first,
	 * then OpenSSL's own errors: the first of those is the cause */
	unsigned long e, cause = 0, kind = 0;
	while ((e = bufferevent_get_openssl_error(bev))) {
		if (ERR_GET_LIB(e) == 0 && e < 256)
			kind = kind ? kind : e;
		else if (!cause)
			cause = e;
	}
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	if (!cause && !kind && vr == X509_V_OK)
		return false;
	if (!cause && vr == X509_V_OK)
		snprintf(buf, size, "%s",
		         kind == SSL_ERROR_SYSCALL ? "connection closed during the TLS exchange"
		                                   : "TLS protocol error");
	else
		tls_error_text(cause, vr, buf, size);
	return true;
}

static bool tls_failure(session *s, struct bufferevent *bev, bool upstream)
{
	char text[300];
	if (!tls_failure_text(bev, text, sizeof(text)))
		return false;
	log_line *l = log_begin(LOG_WARNING, "NETWORK", LOGID_TLS, s->ctx,
	                        upstream ? "TLS with upstream failed" : "TLS with client failed");
	log_attr_str(l, upstream ? "upstream" : "remote", upstream ? s->env.up->name : s->peer);
	log_attr_str(l, "reason", text);
	log_end(l);
	if (!upstream)
		snprintf(reason_buf(s), END_REASON_LEN, "TLS with the client failed: %s", text);
	return true;
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session *s = arg;
	if (what & BEV_EVENT_CONNECTED) { /* a TLS handshake finished */
		log_reason(LOG_DEBUG, "NETWORK", LOGID_TLS, s->ctx, "TLS with client established");
		return;
	}
	if (s->state != SESSION_FLUSHING) {
		if (what & BEV_EVENT_EOF)
			snprintf(reason_buf(s), END_REASON_LEN, "client closed the connection");
		else if (s->client_tls && (what & BEV_EVENT_ERROR) && tls_failure(s, bev, false))
			s->end_severity = LOG_WARNING;
		else
			snprintf(reason_buf(s), END_REASON_LEN, "client connection error: %s",
			         evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	}
	session_enter(s, SESSION_CLOSED);
}

static void upstream_read_cb(struct bufferevent *bev, void *arg)
{
	session *s = arg;
	process_upstream(s);
	session_drain(s);
}

/* The upstream drained below OUT_LOW: resume reading from the client. */
static void upstream_write_cb(struct bufferevent *bev, void *arg)
{
	resume_client(arg);
}

static void upstream_connected(session *s, struct bufferevent *bev)
{
	s->upstream_connected = true;
	bufferevent_set_timeouts(bev, NULL, NULL);
	int one = 1;
	setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	log_reason(LOG_DEBUG, "NETWORK", LOGID_UPSTREAM_CONNECTED, s->ctx, "Connected to upstream");
}

/* The upstream connection ended after it was up. The client connection
 * ends the same way, with no reply of ours for what was forwarded: a driver
 * must see a network error as a network error (it then clears its pool,
 * marks the server unknown and retries what is retryable), while a
 * synthesized command error would make it keep a pool whose socket we are
 * about to close. A reset is passed on as a reset (SO_LINGER 0), at once;
 * a close lets what already arrived reach the client first.
 *
 * The one place mongoguard still answers is a connect that never succeeded
 * (upstream_event_cb): nothing reached the server, the request is the
 * handshake, and a HostUnreachable reply naming the upstream tells the user
 * why, where a close would say only "connection closed". */
static void upstream_lost(session *s, bool reset, const char *why)
{
	if (!reset) {
		session_finish(s, LOG_WARNING, "%s", why);
		return;
	}
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	setsockopt(bufferevent_getfd(s->client), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	s->end_severity = LOG_WARNING;
	snprintf(reason_buf(s), END_REASON_LEN, "%s (client connection reset too)", why);
	session_enter(s, SESSION_CLOSED);
}

static void upstream_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session *s = arg;
	const char *up = s->env.up->name;
	if (what & BEV_EVENT_CONNECTED) {
		upstream_connected(s, bev);
		return;
	}
	char why[512];
	if (!s->upstream_connected) {
		char tls_text[300], tls_why[340];
		const char *e;
		if (what & BEV_EVENT_TIMEOUT) {
			e = "connect timed out";
		} else if (s->env.tls.upstream &&
		           tls_failure_text(bev, tls_text, sizeof(tls_text))) {
			snprintf(tls_why, sizeof(tls_why), "TLS handshake failed: %s", tls_text);
			e = tls_why;
		} else {
			e = evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR());
		}
		snprintf(why, sizeof(why), "mongoguard could not connect to upstream %s: %s", up,
		         e);
		mx_add(&s->env.mx->upstream_connect_failures, 1);
		log_line *l = log_begin(LOG_WARNING, "NETWORK", LOGID_UPSTREAM_FAILED, s->ctx,
		                        "Upstream unreachable");
		log_attr_str(l, "upstream", up);
		log_attr_str(l, "reason", e);
		log_end(l);
	} else {
		int e = EVUTIL_SOCKET_ERROR();
		process_upstream(s); /* deliver whatever complete replies arrived */
		snprintf(why, sizeof(why), "mongoguard lost its connection to upstream %s: %s", up,
		         (what & BEV_EVENT_EOF) ? "closed by the server"
		                                : evutil_socket_error_to_string(e));
		if (s->state == SESSION_FLUSHING || s->state == SESSION_CLOSED)
			return;
		upstream_lost(s, !(what & BEV_EVENT_EOF) && e == ECONNRESET, why);
		return;
	}
	if (s->state == SESSION_FLUSHING || s->state == SESSION_CLOSED)
		return;
	/* Nothing ever reached the server: an error reply naming the upstream
	 * serves drivers better than a bare close (see upstream_lost). A client
	 * that has not sent its handshake yet gets it in answer to that. */
	if (inflight_count(&s->inflight) == 0 && !s->unreachable) {
		s->unreachable = true;
		s->unreachable_why = strdup(why);
		set_timer(s, UNREACHABLE_WAIT_MS); /* replaces the frame wait, if any */
		process_client(s);
		return;
	}
	fail_inflight(s, why);
	session_finish(s, LOG_WARNING, "%s", why);
}

static void frame_timeout(session *s)
{
	size_t have = evbuffer_get_length(bufferevent_get_input(s->client));
	if (s->unreachable) {
		session_finish(s, LOG_WARNING, "%s", unreachable_why(s));
		return;
	}
	session_finish(
	    s, LOG_WARNING,
	    "incomplete request: only %zu bytes arrived within %u ms (net.maxFrameWaitMS)", have,
	    snap(s)->cfg.max_frame_wait_ms);
}

static void wait_timeout(session *s)
{
	log_reason(LOG_INFO, "ANALYZER", LOGID_INDEX_WAIT, s->ctx,
	           "Index list did not arrive in time; request forwarded without a sort verdict");
	s->wait_expired = true;
	process_client(s);
}

static void flush_timeout(session *s)
{
	char *r = reason_buf(s);
	size_t used = strlen(r);
	snprintf(r + used, END_REASON_LEN - used, " (client did not read the last %zu bytes)",
	         evbuffer_get_length(client_out(s)));
	session_enter(s, SESSION_CLOSED);
}

static void state_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	session *s = arg;
	s->timer_on = false; /* it fired (or was made active to free the session) */
	switch (s->state) {
	case SESSION_ACTIVE:
		frame_timeout(s);
		break;
	case SESSION_WAITING:
		wait_timeout(s);
		break;
	case SESSION_FLUSHING:
		flush_timeout(s);
		break;
	case SESSION_CLOSED:
		session_free(s);
		break;
	}
}

void session_index_changed(session *s)
{
	if (s->state == SESSION_WAITING)
		process_client(s);
}

void session_drain(session *s)
{
	if (atomic_load(s->env.draining) && !s->client) {
		session_abort(s, "shutting down"); /* it has not said anything yet */
		return;
	}
	if (atomic_load(s->env.draining) && s->state == SESSION_ACTIVE && session_idle(s))
		session_finish(s, LOG_INFO, "shutting down");
}

void session_abort(session *s, const char *reason)
{
	if (s->state == SESSION_CLOSED)
		return;
	snprintf(reason_buf(s), END_REASON_LEN, "%s", reason);
	session_enter(s, SESSION_CLOSED);
}

/* The upstream took longer than upstream.replyTimeoutMS to begin a reply:
 * end the client connection, as a network error the driver retries or
 * reports (an error reply would claim the command failed, when it may have
 * run). */
static void reply_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	session *s = arg;
	s->reply_wake = 0;
	if (!s->reply_due)
		return; /* no request is waiting any more */
	int64_t now = mg_now_ns();
	if (now < s->reply_due) { /* the deadline moved on */
		wake_reply_timer(s, now);
		return;
	}
	session_finish(s, LOG_WARNING,
	               "upstream %s sent no reply within %u ms (upstream.replyTimeoutMS); "
	               "connection closed",
	               s->env.up->name, snap(s)->cfg.reply_timeout_ms);
}

/* The session's timers; false when one could not be made (what was made
 * is freed by session_free). */
static bool session_timers(session *s)
{
	struct event_base *base = s->env.base;
	s->timer = evtimer_new(base, state_timer_cb, s);
	s->reply_timer = evtimer_new(base, reply_timeout_cb, s);
	return s->timer && s->reply_timer;
}

/* The host part of "host:port" / "[v6]:port", for TLS name checks. */
static void host_of(const char *name, char *out, size_t size)
{
	const char *colon = strrchr(name, ':');
	size_t n = colon ? (size_t)(colon - name) : strlen(name);
	if (n >= 2 && name[0] == '[' && name[n - 1] == ']') {
		name++;
		n -= 2;
	}
	snprintf(out, size, "%.*s", (int)n, name);
}

/* The two buffers: the client's (TLS when the sniff said so) and the
 * upstream's (TLS when the URI says so). False when one could not be
 * made; why is in end_reason. */
static bool session_wire(session *s, int fd, bool client_tls)
{
	struct event_base *base = s->env.base;
	const net_tls *tls = &s->env.tls;
	if (client_tls) {
		SSL *ssl = SSL_new(tls->server);
		s->client =
		    ssl ? bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
		                                         BEV_OPT_CLOSE_ON_FREE)
		        : NULL;
		if (ssl && !s->client)
			SSL_free(ssl);
		s->client_tls = s->client != NULL;
	} else {
		s->client = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	}
	if (!s->client) {
		close(fd);
		snprintf(reason_buf(s), END_REASON_LEN, "out of memory");
		return false;
	}
	if (tls->upstream) {
		char host[300], err[256];
		host_of(s->env.up->name, host, sizeof(host));
		SSL *ssl = tls_upstream_ssl(tls, host, err, sizeof(err));
		if (!ssl) {
			snprintf(reason_buf(s), END_REASON_LEN, "%s", err);
			return false;
		}
		s->upstream = bufferevent_openssl_socket_new(
		    base, -1, ssl, BUFFEREVENT_SSL_CONNECTING, BEV_OPT_CLOSE_ON_FREE);
		if (!s->upstream)
			SSL_free(ssl);
	} else {
		s->upstream = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (!s->upstream) {
		snprintf(reason_buf(s), END_REASON_LEN, "out of memory");
		return false;
	}
	/* a peer that closes without close_notify has closed, not failed */
	if (s->client_tls)
		bufferevent_openssl_set_allow_dirty_shutdown(s->client, 1);
	if (tls->upstream)
		bufferevent_openssl_set_allow_dirty_shutdown(s->upstream, 1);
	bufferevent_setcb(s->client, client_read_cb, client_write_cb, client_event_cb, s);
	bufferevent_setcb(s->upstream, upstream_read_cb, upstream_write_cb, upstream_event_cb, s);
	bufferevent_setwatermark(s->client, EV_WRITE, OUT_LOW, 0);
	bufferevent_setwatermark(s->upstream, EV_WRITE, OUT_LOW, 0);
	init_reads(s, s->client); /* the upstream's: session_relay */
	/* libevent writes (and, for TLS, reads) at most 16 KiB per call by
	 * default: a 1 MiB message then costs 64 calls and as many loop
	 * turns. A read chunk per call keeps large messages to a few system
	 * calls; small ones are unaffected. Plain sockets are read by
	 * plain_read_cb, with the same chunk. */
	struct bufferevent *both[] = {s->client, s->upstream};
	for (int i = 0; i < 2; i++) {
		bufferevent_set_max_single_read(both[i], READ_CHUNK);
		bufferevent_set_max_single_write(both[i], READ_CHUNK);
	}
	return true;
}

/* Relaying starts: the buffers exist and the upstream is being dialled. */
static void session_relay(session *s, int fd, bool client_tls)
{
	if (!session_wire(s, fd, client_tls)) {
		s->end_severity = LOG_ERROR;
		session_enter(s, SESSION_CLOSED);
		return;
	}
	uint32_t ms = snap(s)->cfg.connect_timeout_ms;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	bufferevent_set_timeouts(s->upstream, NULL, &tv);
	if (bufferevent_socket_connect(s->upstream, (struct sockaddr *)&s->env.up->ss,
	                               (int)s->env.up->len) < 0) {
		/* A refused connect is reported later through upstream_event_cb;
		 * only a socket that could not even be created lands here. Out
		 * of descriptors, accepting more clients would only close them
		 * again: the owner pauses accepting. */
		int e = EVUTIL_SOCKET_ERROR();
		if ((e == EMFILE || e == ENFILE) && s->env.out_of_fds)
			s->env.out_of_fds(s->env.owner);
		session_finish(s, LOG_WARNING, "cannot create a socket to upstream %s: %s",
		               s->env.up->name,
		               evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		return;
	}
	init_reads(s, s->upstream); /* the connect assigned its read event */
	bufferevent_enable(s->client, EV_READ);
	bufferevent_enable(s->upstream, EV_READ);
}

/* Plain or TLS, decided by the client's first bytes (net.tls.mode other
 * than disabled): peeked, not read, so whichever layer takes the socket
 * sees them. Bounded by net.maxFrameWaitMS. */
static void sniff_cb(evutil_socket_t fd, short what, void *arg)
{
	session *s = arg;
	uint8_t head[TLS_SNIFF_LEN];
	if (what & EV_TIMEOUT) {
		event_free(s->sniff_ev);
		s->sniff_ev = NULL;
		close(fd);
		s->end_severity = LOG_WARNING;
		snprintf(reason_buf(s), END_REASON_LEN,
		         "client sent nothing within %u ms (net.maxFrameWaitMS)",
		         snap(s)->cfg.max_frame_wait_ms);
		session_enter(s, SESSION_CLOSED);
		return;
	}
	ssize_t n = recv(fd, head, sizeof(head), MSG_PEEK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		event_add(s->sniff_ev, NULL);
		return;
	}
	tls_sniff_result r = n > 0 ? tls_sniff(head, (size_t)n) : TLS_SNIFF_PLAIN;
	if (n > 0 && r == TLS_SNIFF_NEED_MORE) {
		event_add(s->sniff_ev, NULL); /* the same deadline goes on */
		return;
	}
	event_free(s->sniff_ev);
	s->sniff_ev = NULL;
	if (n <= 0 || (r == TLS_SNIFF_PLAIN && s->env.tls.mode == TLS_MODE_REQUIRE)) {
		close(fd);
		if (n > 0) {
			s->end_severity = LOG_WARNING;
			log_reason(LOG_WARNING, "NETWORK", LOGID_TLS, s->ctx,
			           "Plain-text client refused: net.tls.mode is requireTLS");
		}
		snprintf(reason_buf(s), END_REASON_LEN, "%s",
		         n > 0 ? "plain-text connection refused (net.tls.mode requireTLS)"
		               : "client closed the connection");
		session_enter(s, SESSION_CLOSED);
		return;
	}
	session_relay(s, fd, r == TLS_SNIFF_TLS);
}

session *session_start(const session_env *env, int fd, const struct sockaddr *addr,
                       socklen_t addrlen, void *token)
{
	session *s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		log_reason(LOG_ERROR, "NETWORK", LOGID_CONN_REFUSED, NULL,
		           "Out of memory accepting a connection");
		env->on_closed(env->owner, token);
		return NULL;
	}
	s->env = *env;
	/* ours until the session goes, whatever a reload does to the snapshot */
	if (s->env.tls.server)
		SSL_CTX_up_ref(s->env.tls.server);
	if (s->env.tls.upstream)
		SSL_CTX_up_ref(s->env.tls.upstream);
	s->token = token;
	s->end_severity = LOG_INFO;
	s->id = atomic_fetch_add(&env->ids->next_conn, 1);
	s->app = "";
	snprintf(s->ctx, sizeof(s->ctx), "conn%llu", (unsigned long long)s->id);
	net_format_addr(addr, s->peer, sizeof(s->peer));
	reply_framer_init(&s->framer);
	inflight_init(&s->inflight);

	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (env->tls.server)
		s->sniff_ev = event_new(env->base, fd, EV_READ, sniff_cb, s);
	if (!session_timers(s) || (env->tls.server && !s->sniff_ev)) {
		close(fd);
		snprintf(reason_buf(s), END_REASON_LEN, "out of memory");
		session_free(s);
		return NULL;
	}
	log_line *l =
	    log_begin(LOG_INFO, "NETWORK", LOGID_CONN_ACCEPTED, s->ctx, "Connection accepted");
	log_attr_str(l, "remote", s->peer);
	log_attr_int(l, "connectionCount", (int64_t)atomic_load(env->nconns));
	log_end(l);
	mx_add(&env->mx->accepted, 1);
	if (s->sniff_ev) {
		uint32_t ms = snap(s)->cfg.max_frame_wait_ms;
		struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
		event_add(s->sniff_ev, &tv);
		return s;
	}
	session_relay(s, fd, false);
	return s;
}
