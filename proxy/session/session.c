/* Sessions: one client connection, one upstream connection, and the
 * requests in flight between them. This file is the lifecycle: the state
 * machine (session_int.h names the states), start-up, the sockets' events,
 * the state's timer, and the end. The rest of a session is in four files,
 * one job each (session_int.h): requests.c, client -> upstream; replies.c,
 * upstream -> client; answers.c, the in-flight queue and mongoguard's own
 * answers in order; transport.c, the sockets.
 *
 * The queues. Bytes from the client wait in its input buffer until the
 * request framer says what they are (requests.c); forwarded requests go
 * to the upstream's output buffer, batched per loop turn in the worker's
 * stage. Each request that will get a reply has an entry in the in-flight
 * queue (inflight.h), in request order; replies from the upstream pass
 * through the reply framer to the client's output buffer, each completing
 * the head entry, and an entry mongoguard answers itself carries its
 * answer until it reaches the head (answers.c).
 *
 * The upstream ending: the client connection ends the same way (a close
 * after what arrived, or a reset), never with replies of ours to requests
 * the server had; only a connect that never succeeded is answered with
 * HostUnreachable (upstream_lost says why).
 *
 * Backpressure: a side's output buffer above OUT_HIGH stops reading from the
 * other side until it drains below OUT_LOW. Per connection, memory is bounded
 * by one request (<= 48,000,000 bytes, the protocol maximum) plus about
 * 2 x (OUT_HIGH + READ_CHUNK) of streaming buffers. A large request's bytes
 * queued for a slow upstream are not among those: the output refers to the
 * request's own buffer, which is held until they are written, and the next
 * large request waits for that (requests.c), so a connection holds one. */
/* POLLRDHUP, for a client that closes while its first bytes are peeked */
#define _GNU_SOURCE
#include "proxy/session/session.h"

#include <errno.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/net/proxy_proto.h"
#include "proxy/runtime/clock.h"
#include "proxy/session/session_int.h"

enum {
	FLUSH_TIMEOUT_MS = 5000,
	UNREACHABLE_WAIT_MS = 2000, /* for the first request when the upstream is down */
};

static const char *const state_names[] = {"sniffing",    "connecting", "active",
                                          "unreachable", "flushing",   "closed"};

char *session_reason_buf(session *s)
{
	/* Allocated when the session ends, so an open one does not carry it.
	 * Without memory the words are lost (into a per-thread scratch
	 * buffer) and the log says only "closed". */
	static _Thread_local char lost[END_REASON_LEN];
	if (!s->end_reason)
		s->end_reason = calloc(1, END_REASON_LEN);
	return s->end_reason ? s->end_reason : lost;
}

/* The state's timer, (re)started or stopped; every request that arrives
 * whole stops it, so stopping one that is not running costs nothing. */
void session_set_timer(session *s, uint32_t ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(s->timer, &tv);
	s->timer_on = true;
}

void session_clear_timer(session *s)
{
	if (s->timer_on)
		evtimer_del(s->timer);
	s->timer_on = false;
}

void session_pause_client(session *s)
{
	s->cl.paused = true;
	bufferevent_disable(s->cl.bev, EV_READ);
}

/* Reading from the client resumes once there is room upstream and in the
 * queue, unless a held request or the end of the session keeps it off. */
static void resume_client(session *s)
{
	if (!s->cl.paused || inflight_full(&s->inflight) || !session_relaying(s) ||
	    s->hold == HOLD_WAITING)
		return;
	s->cl.paused = false;
	if (s->hold == HOLD_NONE)
		transport_enable_reads(&s->cl);
	requests_process(s); /* a request whose wait ran out goes on */
}

/* What the upstream sent is relayed; a reply that completed a request
 * may have made room for the client's next ones. */
static void process_upstream(session *s)
{
	replies_process(s);
	resume_client(s);
}

/* True when nothing but an awaitable hello is in flight. */
static bool session_idle(session *s)
{
	return s->state == SESSION_SNIFFING ||
	       (inflight_only_awaiting(&s->inflight) && !reply_framer_mid_reply(&s->framer) &&
	        !requests_in_large(s) &&
	        evbuffer_get_length(bufferevent_get_input(s->cl.bev)) == 0);
}

/* ---- states ---- */

static void enter_flushing(session *s)
{
	session_clear_timer(s);
	answers_flush_replies(s);
	if (s->up.bev) {
		/* a reply cut short must not be followed by anything else */
		answers_flush(s);
		bufferevent_free(s->up.bev);
		s->up.bev = NULL;
	}
	bufferevent_disable(s->cl.bev, EV_READ);
	if (evbuffer_get_length(session_client_out(s)) == 0) {
		session_enter(s, SESSION_CLOSED);
		return;
	}
	bufferevent_setwatermark(s->cl.bev, EV_WRITE, 0, 0);
	session_set_timer(s, FLUSH_TIMEOUT_MS);
}

static void enter_closed(session *s)
{
	if (s->cl.bev)
		bufferevent_disable(s->cl.bev, EV_READ | EV_WRITE);
	if (s->up.bev)
		bufferevent_disable(s->up.bev, EV_READ | EV_WRITE);
	if (s->sniff_ev)
		event_del(s->sniff_ev); /* its socket is closed with it, by session_free */
	session_clear_timer(s);
	evtimer_del(s->reply_timer);
	s->reply_due = s->reply_wake = 0;
	event_active(s->timer, EV_TIMEOUT, 0);
}

static bool move_allowed(session_state from, session_state to)
{
	switch (to) {
	case SESSION_SNIFFING:
		return false; /* where every session starts */
	case SESSION_CONNECTING:
		return from == SESSION_SNIFFING;
	case SESSION_ACTIVE:
	case SESSION_UNREACHABLE:
		return from == SESSION_CONNECTING;
	case SESSION_FLUSHING:
		return from >= SESSION_CONNECTING && from <= SESSION_UNREACHABLE;
	case SESSION_CLOSED:
		return from != SESSION_CLOSED;
	}
	return false;
}

/* The only place a session changes state (see the top of this file).
 * Ending a session that is already ending is normal (both sides may go at
 * once) and refused quietly; any other unexpected move is a bug, refused
 * and logged. */
bool session_enter(session *s, session_state to)
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
	if (to == SESSION_FLUSHING)
		enter_flushing(s);
	else if (to == SESSION_CLOSED)
		enter_closed(s);
	return true;
}

void session_finish(session *s, log_severity sev, const char *fmt, ...)
{
	if (s->state == SESSION_FLUSHING || s->state == SESSION_CLOSED)
		return; /* the first reason stands */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(session_reason_buf(s), END_REASON_LEN, fmt, ap);
	va_end(ap);
	s->end_severity = sev;
	session_enter(s, SESSION_FLUSHING);
}

/* ---- lifecycle ---- */

/* log.connections: ordinary accepts and ends at info, or at debug. A
 * session made before any snapshot (start-up failures, unit tests) logs. */
static bool logs_connections(const session *s)
{
	return !s->env.snap || !*s->env.snap || session_snap(s)->cfg.log_connections;
}

static void session_free(session *s)
{
	log_severity sev = s->end_severity;
	if (sev == LOG_INFO && !logs_connections(s))
		sev = LOG_DEBUG;
	log_line *l = log_begin(sev, "NETWORK", LOGID_CONN_ENDED, s->ctx, "Connection ended");
	log_attr_str(l, "remote", s->peer);
	log_attr_str(l, "appName", s->app);
	log_attr_str(l, "reason", s->end_reason && s->end_reason[0] ? s->end_reason : "closed");
	log_attr_int(l, "requests", (int64_t)s->nrequests);
	log_attr_int(l, "blocked", (int64_t)s->nblocked);
	if (s->ndiscarded)
		log_attr_int(l, "unexpectedRepliesDropped", (int64_t)s->ndiscarded);
	log_end(l);

	inflight_clear(&s->inflight);
	requests_gate_end(s); /* a schema change held when the session ended */
	requests_release(s);  /* a request cut short by the end of the session */
	replies_release(s);   /* a reply cut short the same way */
	free(s->unreachable_why);
	free(s->end_reason);
	free(s->app_owned);
	engine_repeat_free(s->repeat);
	engine_conn_track_free(s->track);
	request_template_free(s->req_template);
	if (s->sniff_ev)
		close(event_get_fd(s->sniff_ev)); /* still ours: no buffer took it */
	struct event *evs[] = {s->timer, s->reply_timer, s->sniff_ev};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i])
			event_free(evs[i]);
	if (s->up.bev)
		bufferevent_free(s->up.bev);
	if (s->cl.bev)
		bufferevent_free(s->cl.bev);
	session_env env = s->env;
	void *token = s->token;
	tls_free(&s->env.tls); /* this session's references */
	free(s);
	env.on_closed(env.owner, token);
}

/* The sockets' callbacks get the side (transport.h); the session holds it. */
static session *of_client(void *side)
{
	return (session *)((char *)side - offsetof(session, cl));
}

static session *of_upstream(void *side)
{
	return (session *)((char *)side - offsetof(session, up));
}

static void client_read_cb(struct bufferevent *bev, void *arg)
{
	session_ncallbacks++;
	requests_process(of_client(arg));
}

/* The client drained below OUT_LOW (or, while flushing, to nothing). */
static void client_write_cb(struct bufferevent *bev, void *arg)
{
	session_ncallbacks++;
	session *s = of_client(arg);
	if (s->state == SESSION_FLUSHING) {
		if (evbuffer_get_length(session_client_out(s)) == 0)
			session_enter(s, SESSION_CLOSED);
		return;
	}
	if (s->up.paused && s->up.bev) {
		s->up.paused = false;
		transport_enable_reads(&s->up); /* an end held behind replies comes after them */
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
		snprintf(session_reason_buf(s), END_REASON_LEN, "TLS with the client failed: %s",
		         text);
	return true;
}

/* The client's TLS handshake finished: the frame wait that ran from
 * accept ends, unless the timer is another wait's now (the unreachable
 * one, an index list) or a request has started arriving. */
static void client_handshake_done(session *s)
{
	log_reason(LOG_DEBUG, "NETWORK", LOGID_TLS, s->ctx, "TLS with client established");
	transport_tls_open(&s->cl);
	if ((s->state == SESSION_CONNECTING || s->state == SESSION_ACTIVE) &&
	    s->hold == HOLD_NONE && !requests_in_large(s) &&
	    evbuffer_get_length(bufferevent_get_input(s->cl.bev)) == 0)
		session_clear_timer(s);
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session_ncallbacks++;
	session *s = of_client(arg);
	if (what & BEV_EVENT_CONNECTED) { /* a TLS handshake finished */
		client_handshake_done(s);
		return;
	}
	if (s->state != SESSION_FLUSHING) {
		if (what & BEV_EVENT_EOF)
			snprintf(session_reason_buf(s), END_REASON_LEN,
			         "client closed the connection");
		else if (s->cl.tls && (what & BEV_EVENT_ERROR) && tls_failure(s, bev, false))
			s->end_severity = LOG_WARNING;
		else
			snprintf(session_reason_buf(s), END_REASON_LEN,
			         "client connection error: %s",
			         evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	}
	session_enter(s, SESSION_CLOSED);
}

static void upstream_read_cb(struct bufferevent *bev, void *arg)
{
	session_ncallbacks++;
	session *s = of_upstream(arg);
	process_upstream(s);
	session_drain(s);
}

/* The upstream drained below OUT_LOW: resume reading from the client. */
static void upstream_write_cb(struct bufferevent *bev, void *arg)
{
	session_ncallbacks++;
	session *s = of_upstream(arg);
	requests_large_written(s);
	resume_client(s);
}

/* The connect finished; for a TLS upstream the handshake too (libevent
 * reports BEV_EVENT_CONNECTED only then), and from here a wake-up reads
 * every record the socket holds: replies back to back, or the 64 records
 * of a 1 MiB reply, are not a wake-up each (transport_tls_open). */
static void upstream_connected(session *s, struct bufferevent *bev)
{
	session_enter(s, SESSION_ACTIVE);
	bufferevent_set_timeouts(bev, NULL, NULL);
	transport_tls_open(&s->up);
	int one = 1;
	setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	log_reason(LOG_DEBUG, "NETWORK", LOGID_UPSTREAM_CONNECTED, s->ctx, "Connected to upstream");
}

/* During an outage every new client fails to connect: the first failure
 * in UNREACHABLE_QUIET_MS is a warning, the others (counted all the same in
 * mongoguard_upstream_connect_failures_total) are debug lines, so one
 * outage is one warning here (and one from the upstream watch) instead of
 * one per client. Process-wide: the clients of every worker share it. */
enum { UNREACHABLE_QUIET_MS = 10000 };

static log_severity unreachable_severity(void)
{
	static _Atomic int64_t last_warned_ms;
	int64_t now = mg_now_ms(), last = atomic_load(&last_warned_ms);
	if (last && now - last < UNREACHABLE_QUIET_MS)
		return LOG_DEBUG;
	return atomic_compare_exchange_strong(&last_warned_ms, &last, now) ? LOG_WARNING
	                                                                   : LOG_DEBUG;
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
	setsockopt(bufferevent_getfd(s->cl.bev), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	s->end_severity = LOG_WARNING;
	snprintf(session_reason_buf(s), END_REASON_LEN, "%s (client connection reset too)", why);
	session_enter(s, SESSION_CLOSED);
}

static void upstream_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session_ncallbacks++;
	session *s = of_upstream(arg);
	const char *up = s->env.up->name;
	if (what & BEV_EVENT_CONNECTED) {
		/* libevent can report a connect that already failed as made
		 * once reading is enabled: the first word stands */
		if (s->state == SESSION_CONNECTING)
			upstream_connected(s, bev);
		return;
	}
	/* A connect refused at once (a unix socket upstream with no listener)
	 * is reported twice, on the write side and the read side: the first
	 * report stands, as a second would end the UNREACHABLE wait early */
	if (s->state == SESSION_UNREACHABLE)
		return;
	char why[512];
	if (s->state != SESSION_ACTIVE) { /* the connect failed */
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
		log_line *l = log_begin(unreachable_severity(), "NETWORK", LOGID_UPSTREAM_FAILED,
		                        s->ctx, "Upstream unreachable");
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
	if (inflight_count(&s->inflight) == 0 && session_enter(s, SESSION_UNREACHABLE)) {
		s->unreachable_why = strdup(why);
		session_set_timer(s, UNREACHABLE_WAIT_MS); /* replaces the frame wait, if any */
		requests_process(s);
		return;
	}
	answers_fail_all(s, why);
	session_finish(s, LOG_WARNING, "%s", why);
}

static void frame_timeout(session *s)
{
	size_t have = evbuffer_get_length(bufferevent_get_input(s->cl.bev));
	if (s->state == SESSION_UNREACHABLE) {
		session_finish(s, LOG_WARNING, "%s",
		               s->unreachable_why ? s->unreachable_why : "upstream unreachable");
		return;
	}
	uint32_t ms = session_snap(s)->cfg.max_frame_wait_ms;
	if (s->cl.tls && !SSL_is_init_finished(bufferevent_openssl_get_ssl(s->cl.bev))) {
		session_finish(s, LOG_WARNING,
		               "TLS handshake not finished within %u ms (net.maxFrameWaitMS)", ms);
		return;
	}
	session_finish(
	    s, LOG_WARNING,
	    "incomplete request: only %zu bytes arrived within %u ms (net.maxFrameWaitMS)", have,
	    ms);
}

static void wait_timeout(session *s)
{
	/* A claim held while waiting: a schema change waiting for the side
	 * connection (requests.c, side_gate), not for an index list. */
	log_reason(LOG_INFO, "ANALYZER", LOGID_INDEX_WAIT, s->ctx,
	           s->gate ? "The side connection was still busy in the database; schema change "
	                     "forwarded beside it"
	                   : "Index list did not arrive in time; request forwarded without a sort "
	                     "verdict");
	requests_hold(s, HOLD_EXPIRED);
	requests_process(s);
}

static void flush_timeout(session *s)
{
	char *r = session_reason_buf(s);
	size_t used = strlen(r);
	snprintf(r + used, END_REASON_LEN - used, " (client did not read the last %zu bytes)",
	         evbuffer_get_length(session_client_out(s)));
	session_enter(s, SESSION_CLOSED);
}

/* The session ends before relaying began: session_free closes the socket
 * through the sniff event. */
static void sniff_end(session *s, log_severity sev, const char *why)
{
	s->end_severity = sev;
	snprintf(session_reason_buf(s), END_REASON_LEN, "%s", why);
	session_enter(s, SESSION_CLOSED);
}

/* The client shut its side while the bytes it sent were too few to say:
 * no more can come, and the peeked bytes alone keep the socket readable. */
static bool sniff_peer_gone(evutil_socket_t fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* net.maxFrameWaitMS ran out before the first bytes said plain or TLS
 * (or, with net.proxyProtocol, before the PROXY header was whole). */
static void sniff_timeout(session *s)
{
	uint8_t head[PROXY_PROTO_MAX];
	ssize_t n = recv(event_get_fd(s->sniff_ev), head,
	                 s->awaiting_proxy ? sizeof(head) : TLS_SNIFF_LEN, MSG_PEEK);
	char why[160];
	uint32_t ms = session_snap(s)->cfg.max_frame_wait_ms;
	if (n > 0 && s->awaiting_proxy)
		snprintf(why, sizeof(why),
		         "client sent only %zd bytes of a PROXY header within %u ms "
		         "(net.maxFrameWaitMS)",
		         n, ms);
	else if (n > 0)
		snprintf(why, sizeof(why),
		         "client sent only %zd bytes within %u ms, too few to tell plain from "
		         "TLS (net.maxFrameWaitMS)",
		         n, ms);
	else
		snprintf(why, sizeof(why), "client sent nothing within %u ms (net.maxFrameWaitMS)",
		         ms);
	sniff_end(s, LOG_WARNING, why);
}

static void state_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	session_ncallbacks++;
	session *s = arg;
	s->timer_on = false; /* it fired (or was made active to free the session) */
	if (s->state == SESSION_CLOSED)
		session_free(s);
	else if (s->state == SESSION_FLUSHING)
		flush_timeout(s);
	else if (s->state == SESSION_SNIFFING)
		sniff_timeout(s);
	else if (s->hold == HOLD_WAITING)
		wait_timeout(s);
	else if (session_relaying(s))
		frame_timeout(s);
}

void session_index_changed(session *s)
{
	if (s->hold == HOLD_WAITING && session_relaying(s))
		requests_process(s);
}

void session_drain(session *s)
{
	if (atomic_load(s->env.draining) && s->state == SESSION_SNIFFING) {
		session_abort(s, "shutting down"); /* it has not said anything yet */
		return;
	}
	if (atomic_load(s->env.draining) && session_relaying(s) && s->hold == HOLD_NONE &&
	    session_idle(s))
		session_finish(s, LOG_INFO, "shutting down");
}

uint64_t session_callbacks_run(void)
{
	return session_ncallbacks;
}

uint64_t session_id(const session *s)
{
	return s->id;
}

void session_describe(const session *s, int64_t now_ms, text_buf *out)
{
	text_printf(out, "{\"id\":%llu,\"ctx\":", (unsigned long long)s->id);
	text_json(out, s->ctx);
	text_str(out, ",\"client\":");
	text_json(out, s->peer);
	text_str(out, ",\"appName\":");
	text_json(out, s->app);
	text_str(out, ",\"state\":");
	/* a session with requests in flight is busy, one without is idle */
	bool busy = s->state == SESSION_ACTIVE && inflight_count(&s->inflight) > 0;
	text_json(out,
	          s->state == SESSION_ACTIVE ? (busy ? "busy" : "idle") : state_names[s->state]);
	text_printf(out,
	            ",\"ageSecs\":%.1f,\"requests\":%llu,\"blocked\":%llu,\"bytesIn\":%llu,"
	            "\"bytesOut\":%llu,\"tls\":%s,\"upstream\":",
	            (double)(now_ms - s->accepted_ms) / 1000.0, (unsigned long long)s->nrequests,
	            (unsigned long long)s->nblocked, (unsigned long long)s->nbytes[MX_DIR_REQUEST],
	            (unsigned long long)s->nbytes[MX_DIR_REPLY], s->cl.tls ? "true" : "false");
	text_json(out, s->env.up ? s->env.up->name : "");
	text_str(out, "}");
}

void session_abort(session *s, const char *reason)
{
	if (s->state == SESSION_CLOSED)
		return;
	snprintf(session_reason_buf(s), END_REASON_LEN, "%s", reason);
	session_enter(s, SESSION_CLOSED);
}

/* The session's timers; false when one could not be made (what was made
 * is freed by session_free). */
static bool session_timers(session *s)
{
	struct event_base *base = s->env.base;
	s->timer = evtimer_new(base, state_timer_cb, s);
	s->reply_timer = evtimer_new(base, answers_reply_timeout_cb, s);
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
		/* libevent frees the SSL when it cannot make the buffer
		 * (BEV_OPT_CLOSE_ON_FREE), so it is never freed here */
		SSL *ssl = SSL_new(tls->server);
		s->cl.bev =
		    ssl ? bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
		                                         BEV_OPT_CLOSE_ON_FREE)
		        : NULL;
		s->cl.tls = s->cl.bev != NULL;
	} else {
		s->cl.bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	}
	if (!s->cl.bev) {
		close(fd);
		snprintf(session_reason_buf(s), END_REASON_LEN, "out of memory");
		return false;
	}
	if (tls->upstream) {
		char host[300], err[256];
		host_of(s->env.up->name, host, sizeof(host));
		SSL *ssl = tls_upstream_ssl(tls, host, err, sizeof(err));
		if (!ssl) {
			snprintf(session_reason_buf(s), END_REASON_LEN, "%s", err);
			return false;
		}
		s->up.bev =
		    bufferevent_openssl_socket_new(/* frees ssl if it fails */
		                                   base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
		                                   BEV_OPT_CLOSE_ON_FREE);
		s->up.tls = s->up.bev != NULL;
	} else {
		s->up.bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (!s->up.bev) {
		snprintf(session_reason_buf(s), END_REASON_LEN, "out of memory");
		return false;
	}
	/* a peer that closes without close_notify has closed, not failed */
	if (s->cl.tls)
		bufferevent_openssl_set_allow_dirty_shutdown(s->cl.bev, 1);
	if (s->up.tls)
		bufferevent_openssl_set_allow_dirty_shutdown(s->up.bev, 1);
	bufferevent_setcb(s->cl.bev, client_read_cb, client_write_cb, client_event_cb, &s->cl);
	bufferevent_setcb(s->up.bev, upstream_read_cb, upstream_write_cb, upstream_event_cb,
	                  &s->up);
	bufferevent_setwatermark(s->cl.bev, EV_WRITE, OUT_LOW, 0);
	bufferevent_setwatermark(s->up.bev, EV_WRITE, OUT_LOW, 0);
	transport_init_reads(&s->cl); /* the upstream's: session_relay */
	/* libevent writes (and, for TLS, reads) at most 16 KiB per call by
	 * default: a 1 MiB message then costs 64 calls and as many loop
	 * turns. A read chunk per call keeps large messages to a few system
	 * calls; small ones are unaffected. Plain sockets are read by
	 * plain_read_cb, with the same chunk. */
	struct bufferevent *both[] = {s->cl.bev, s->up.bev};
	for (int i = 0; i < 2; i++) {
		bufferevent_set_max_single_read(both[i], READ_CHUNK);
		bufferevent_set_max_single_write(both[i], READ_CHUNK);
	}
	return true;
}

/* Relaying starts: the buffers exist and the upstream is being dialled. */
static void session_relay(session *s, int fd, bool client_tls)
{
	session_enter(s, SESSION_CONNECTING);
	if (!session_wire(s, fd, client_tls)) {
		s->end_severity = LOG_ERROR;
		session_enter(s, SESSION_CLOSED);
		return;
	}
	uint32_t ms = session_snap(s)->cfg.connect_timeout_ms;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	bufferevent_set_timeouts(s->up.bev, NULL, &tv);
	if (bufferevent_socket_connect(s->up.bev, (struct sockaddr *)&s->env.up->ss,
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
	transport_init_reads(&s->up); /* the connect assigned its read event */
	bufferevent_enable(s->cl.bev, EV_READ);
	bufferevent_enable(s->up.bev, EV_READ);
}

/* ---- the sniff: a PROXY header (net.proxyProtocol), then plain or TLS
 * (net.tls.mode other than disabled) ---- */

/* The client's first bytes decide, peeked, not read, so whichever layer
 * takes the socket sees them. The read event is edge-triggered and
 * persistent: bytes too few to decide are left in the socket, which a
 * level-triggered event would report readable on every loop turn, so
 * "need more" waits for the next arrival (or the peer's close) instead,
 * costing nothing. The deadline is the state's timer, armed at accept
 * (sniff_timeout). */
/* net.proxyProtocol: the load balancer's header, peeked until whole, then
 * consumed; the client is who it names from here on. True when it was read
 * (the sniff goes on); false to wait for more, or when the session ended. */
static bool read_proxy_header(session *s, evutil_socket_t fd)
{
	uint8_t head[PROXY_PROTO_MAX];
	ssize_t n;
	do
		n = recv(fd, head, sizeof(head), MSG_PEEK);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return false;
	if (n <= 0) {
		sniff_end(s, LOG_INFO, "client closed the connection");
		return false;
	}
	proxy_proto pp;
	char why[256], msg[300];
	switch (proxy_proto_parse(head, (size_t)n, &pp, why, sizeof why)) {
	case PROXY_PROTO_NEED_MORE:
		if (sniff_peer_gone(fd))
			sniff_end(s, LOG_INFO, "client closed the connection");
		return false;
	case PROXY_PROTO_INVALID:
		snprintf(msg, sizeof msg, "PROXY protocol: %s", why);
		sniff_end(s, LOG_WARNING, msg);
		return false;
	case PROXY_PROTO_OK:
		break;
	}
	ssize_t got; /* the bytes peeked are there: this takes exactly them */
	do
		got = recv(fd, head, pp.len, 0);
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)pp.len) {
		sniff_end(s, LOG_WARNING, "PROXY protocol: the header could not be read");
		return false;
	}
	s->awaiting_proxy = false;
	if (pp.has_source) {
		char via[sizeof s->peer];
		memcpy(via, s->peer, sizeof via);
		net_format_addr((const struct sockaddr *)&pp.source, s->peer, sizeof s->peer);
		log_line *l =
		    log_begin(logs_connections(s) ? LOG_INFO : LOG_DEBUG, "NETWORK",
		              LOGID_PROXY_HEADER, s->ctx, "Client named by a PROXY header");
		log_attr_str(l, "remote", s->peer);
		log_attr_str(l, "via", via);
		log_attr_int(l, "version", pp.version);
		log_end(l);
	}
	return true;
}

static void sniff_cb(evutil_socket_t fd, short what, void *arg)
{
	session_ncallbacks++;
	session *s = arg;
	if (s->awaiting_proxy) {
		if (!read_proxy_header(s, fd))
			return;
		if (!s->env.tls.server) { /* no TLS to tell apart: plain from here */
			event_free(s->sniff_ev);
			s->sniff_ev = NULL;
			session_relay(s, fd, false);
			return;
		}
	}
	uint8_t head[TLS_SNIFF_LEN];
	ssize_t n;
	do
		n = recv(fd, head, sizeof(head), MSG_PEEK);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return; /* nothing after all: the next edge */
	tls_sniff_result r = n > 0 ? tls_sniff(head, (size_t)n) : TLS_SNIFF_PLAIN;
	if (n > 0 && r == TLS_SNIFF_NEED_MORE) {
		if (sniff_peer_gone(fd))
			sniff_end(s, LOG_INFO, "client closed the connection");
		return;
	}
	if (n <= 0) {
		sniff_end(s, LOG_INFO, "client closed the connection");
		return;
	}
	if (r == TLS_SNIFF_PLAIN && s->env.tls.mode == TLS_MODE_REQUIRE) {
		log_reason(LOG_WARNING, "NETWORK", LOGID_TLS, s->ctx,
		           "Plain-text client refused: net.tls.mode is requireTLS");
		sniff_end(s, LOG_WARNING,
		          "plain-text connection refused (net.tls.mode requireTLS)");
		return;
	}
	event_free(s->sniff_ev); /* the socket is the buffer's from here */
	s->sniff_ev = NULL;
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
	s->accepted_ms = mg_now_ms();
	s->app = "";
	snprintf(s->ctx, sizeof(s->ctx), "conn%llu", (unsigned long long)s->id);
	net_format_addr(addr, s->peer, sizeof(s->peer));
	reply_framer_init(&s->framer);
	request_framer_init(&s->reqf);
	inflight_init(&s->inflight);

	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->awaiting_proxy = env->snap && *env->snap && (*env->snap)->cfg.proxy_protocol;
	bool sniff = env->tls.server || s->awaiting_proxy;
	if (sniff)
		s->sniff_ev = event_new(env->base, fd, EV_READ | EV_ET | EV_PERSIST, sniff_cb, s);
	if (!session_timers(s) || (sniff && !s->sniff_ev)) {
		if (!s->sniff_ev)
			close(fd); /* else session_free closes it, once, through the event */
		snprintf(session_reason_buf(s), END_REASON_LEN, "out of memory");
		session_free(s);
		return NULL;
	}
	log_line *l = log_begin(logs_connections(s) ? LOG_INFO : LOG_DEBUG, "NETWORK",
	                        LOGID_CONN_ACCEPTED, s->ctx, "Connection accepted");
	log_attr_str(l, "remote", s->peer);
	log_attr_int(l, "connectionCount", (int64_t)atomic_load(env->nconns));
	log_end(l);
	mx_add(&env->mx->accepted, 1);
	if (s->sniff_ev) {
		/* the frame wait runs from accept, through the sniff and a TLS
		 * handshake, until the first request is whole */
		session_set_timer(s, session_snap(s)->cfg.max_frame_wait_ms);
		event_add(s->sniff_ev, NULL);
		return s;
	}
	session_relay(s, fd, false);
	return s;
}
