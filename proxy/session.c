/* Sessions: one client connection, one upstream connection, and the
 * requests in flight between them.
 *
 * Client -> upstream. Bytes wait in the client bufferevent's input buffer
 * until a whole frame is there (the header's length is checked against the
 * protocol limits first, and the read high-watermark is raised to exactly
 * that frame, so a connection never buffers more than one request beyond a
 * read chunk). The frame is then made contiguous, decoded into a command view
 * and analysed, and one of four things happens to it:
 *   forward  - the original bytes move to the upstream output buffer
 *              (evbuffer_remove_buffer: chains move, nothing is copied);
 *   replace  - the handshake with `compression` removed goes instead;
 *   answer   - mongoguard replies itself (block, malformed request, legacy
 *              opcode) and the request is dropped;
 *   wait     - the index list the sort rule needs is being fetched: the
 *              frame stays in the input buffer, reading stops, and the
 *              request is analysed again when the cache changes or the wait
 *              times out.
 *
 * Upstream -> client. Replies are framed but not linearised: after the
 * header (and an OP_MSG's flag bits) the body streams through in whatever
 * chunks arrive. Only an OP_COMPRESSED reply is gathered whole, to read its
 * flag bits.
 *
 * The in-flight queue (s->inflight, a ring) holds one entry per request
 * that will get a reply, in request order. A reply without moreToCome
 * completes the head entry; with moreToCome (exhaust cursors, streaming
 * hello) the head stays, since more replies will follow unasked. A request
 * mongoguard answers itself is queued too, with its answer attached: the
 * answer is written when it reaches the head at a reply boundary, so even a
 * pipelining client gets its replies in order and never half a server
 * reply spliced with ours. Requests with moreToCome get no entry: nothing
 * will answer them.
 *
 * Backpressure: a side's output buffer above OUT_HIGH stops reading from the
 * other side until it drains below OUT_LOW. Per connection, memory is bounded
 * by one request (<= 48,000,000 bytes, the protocol maximum) plus about
 * 2 x (OUT_HIGH + READ_CHUNK) of streaming buffers.
 */
#include "proxy/session.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "protocol/protocol.h"
#include "proxy/log.h"

enum {
	OUT_HIGH = 1024 * 1024,
	OUT_LOW = 256 * 1024,
	READ_CHUNK = 256 * 1024,
	INFLIGHT_MAX = 64, /* a client pipelining more waits for replies */
	FLUSH_TIMEOUT_MS = 5000,
	/* Error codes for replies mongoguard writes itself. */
	CODE_HOST_UNREACHABLE = 6,
	CODE_BLOCKED = 96,        /* OperationFailed: never retried by drivers */
	CODE_LEGACY_OP = 5739101, /* mongod's code for removed legacy opcodes */
};

typedef enum {
	SESSION_ACTIVE,   /* relaying */
	SESSION_WAITING,  /* holding a request until the index cache answers */
	SESSION_FLUSHING, /* closing: only writing what is left to the client */
	SESSION_CLOSED,   /* freed at the next loop turn (close_ev) */
} session_state;

typedef enum {
	REQ_PLAIN,
	REQ_DDL,   /* changes indexes/collections: invalidate the cache on reply */
	REQ_AWAIT, /* awaitable hello: the reply may take seconds; not "work" */
} req_kind;

typedef struct inflight {
	int32_t request_id;
	req_kind kind;
	reply_form form;
	struct evbuffer *answer; /* our own reply, or NULL: upstream answers */
	uint8_t *ddl_copy;       /* REQ_DDL: the request, re-read when it completes */
	size_t ddl_len;
} inflight;

struct session {
	worker *w;
	session *prev, *next;
	session_state state;
	uint64_t id;
	char ctx[32];  /* "conn42" */
	char peer[80]; /* the client's address, "127.0.0.1:51234" */
	char app[128]; /* client.application.name from the handshake */
	bool seen_hello;

	struct bufferevent *client;
	struct bufferevent *upstream;
	bool upstream_connected;
	bool client_paused;   /* reading from the client stopped by backpressure */
	bool upstream_paused; /* reading from upstream stopped by backpressure */

	struct event *frame_timer; /* a started request must finish arriving */
	struct event *wait_timer;  /* SESSION_WAITING deadline; also flush deadline */
	/* Freeing is always deferred to the event loop, so no caller up the
	 * stack ever touches a freed session. */
	struct event *close_ev;
	bool wait_expired;

	/* Reply framing. */
	size_t reply_left;   /* bytes of the current reply still to stream */
	bool reply_more;     /* current reply has moreToCome */
	bool reply_discard;  /* current reply answers nothing in flight: drop it */
	bool streaming;      /* the last relayed reply had moreToCome ... */
	int32_t stream_from; /* ... and this requestID: the next one answers it */
	uint64_t ndiscarded;

	inflight ring[INFLIGHT_MAX];
	unsigned head, count;

	uint64_t nrequests, nblocked;
	char end_reason[256];
	log_severity end_severity; /* of the "Connection ended" line */
};

static void process_client(session *s);
static void process_upstream(session *s);
static void session_close(session *s);
static void session_finish(session *s, log_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

session *session_next(session *s)
{
	return s->next;
}

/* ---- small helpers ---- */

static struct evbuffer *client_out(session *s)
{
	return bufferevent_get_output(s->client);
}

static size_t upstream_out_len(session *s)
{
	return s->upstream ? evbuffer_get_length(bufferevent_get_output(s->upstream)) : 0;
}

static void set_read_need(struct bufferevent *bev, size_t need)
{
	bufferevent_setwatermark(bev, EV_READ, 0, need > READ_CHUNK ? need : READ_CHUNK);
}

static void format_addr(const struct sockaddr *sa, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, size, "unix");
	}
}

static int32_t next_request_id(session *s)
{
	return (int32_t)(atomic_fetch_add(&s->w->srv->next_request_id, 1) & 0x7fffffff);
}

/* Builds our own error reply to request `request_id` into a new evbuffer. */
static struct evbuffer *make_error(session *s, reply_form form, int32_t request_id, int code,
                                   const char *code_name, const char *errmsg)
{
	size_t len = 0;
	uint8_t *msg =
	    reply_error(form, next_request_id(s), request_id, code, code_name, errmsg, NULL, &len);
	struct evbuffer *b = evbuffer_new();
	if (msg && b)
		evbuffer_add(b, msg, len);
	free(msg);
	return b;
}

/* ---- the in-flight queue ---- */

static inflight *ring_at(session *s, unsigned i)
{
	return &s->ring[(s->head + i) % INFLIGHT_MAX];
}

static void inflight_clear(inflight *f)
{
	if (f->answer)
		evbuffer_free(f->answer);
	free(f->ddl_copy);
	memset(f, 0, sizeof(*f));
}

/* True when nothing but an awaitable hello is in flight. */
static bool session_idle(session *s)
{
	for (unsigned i = 0; i < s->count; i++)
		if (ring_at(s, i)->kind != REQ_AWAIT)
			return false;
	return s->reply_left == 0 && evbuffer_get_length(bufferevent_get_input(s->client)) == 0;
}

/* Writes every answer of ours that has reached the head of the queue, at a
 * reply boundary. */
static void flush_answers(session *s)
{
	while (s->count > 0 && s->reply_left == 0) {
		inflight *f = ring_at(s, 0);
		if (!f->answer)
			break;
		evbuffer_add_buffer(client_out(s), f->answer);
		inflight_clear(f);
		s->head = (s->head + 1) % INFLIGHT_MAX;
		s->count--;
	}
}

static void note_ddl_done(session *s, inflight *f)
{
	engine *e = s->w->srv->engine;
	opmsg m;
	cmdview v;
	wire_error err;
	if (e && f->ddl_copy && opmsg_parse(f->ddl_copy, f->ddl_len, &m, &err) &&
	    cmdview_from_opmsg(&m, &v, &err))
		engine_note_ddl(e, &v);
}

/* A reply without moreToCome arrived: its request is complete. */
static void complete_head(session *s)
{
	if (s->count == 0) {
		log_reason(LOG_DEBUG, "NETWORK", LOGID_BAD_REPLY, s->ctx,
		           "Reply from upstream with no request in flight; forwarded as is");
		return;
	}
	inflight *f = ring_at(s, 0);
	if (f->kind == REQ_DDL)
		note_ddl_done(s, f);
	inflight_clear(f);
	s->head = (s->head + 1) % INFLIGHT_MAX;
	s->count--;
	flush_answers(s);
	if (s->client_paused && s->count < INFLIGHT_MAX && s->state == SESSION_ACTIVE) {
		s->client_paused = false;
		bufferevent_enable(s->client, EV_READ);
		process_client(s);
	}
}

static bool enqueue(session *s, int32_t request_id, req_kind kind, reply_form form,
                    struct evbuffer *answer, const uint8_t *msg, size_t len)
{
	if (s->count == INFLIGHT_MAX) {
		if (answer)
			evbuffer_free(answer);
		return false;
	}
	inflight *f = ring_at(s, s->count);
	memset(f, 0, sizeof(*f));
	f->request_id = request_id;
	f->kind = kind;
	f->form = form;
	f->answer = answer;
	if (kind == REQ_DDL && msg) {
		f->ddl_copy = malloc(len);
		if (f->ddl_copy) {
			memcpy(f->ddl_copy, msg, len);
			f->ddl_len = len;
		}
	}
	s->count++;
	flush_answers(s);
	return true;
}

/* Our own answer to a request, delivered in order. */
static void answer(session *s, reply_form form, int32_t request_id, int code, const char *code_name,
                   const char *errmsg)
{
	struct evbuffer *b = make_error(s, form, request_id, code, code_name, errmsg);
	if (b)
		enqueue(s, request_id, REQ_PLAIN, form, b, NULL, 0);
}

/* The upstream is gone: every request still waiting for it gets an error,
 * as far as the reply stream allows (not in the middle of a reply). */
static void fail_inflight(session *s, const char *why)
{
	if (s->reply_left > 0)
		return;
	for (unsigned i = 0; i < s->count; i++) {
		inflight *f = ring_at(s, i);
		if (!f->answer)
			f->answer = make_error(s, f->form, f->request_id, CODE_HOST_UNREACHABLE,
			                       "HostUnreachable", why);
	}
	flush_answers(s);
}

/* ---- requests ---- */

static bool is_awaitable_hello(const cmdview *v)
{
	return cmdview_is_hello(v) && bson_has_field(&v->body, "maxAwaitTimeMS");
}

/* OP_QUERY commands a 5.1+ server still accepts. */
static bool opquery_allowed(const cmdview *v)
{
	static const char *const names[] = {
	    "hello",        "isMaster",  "ismaster",  "saslStart", "saslContinue", "getnonce",
	    "authenticate", "buildinfo", "buildInfo", "ping",      NULL,
	};
	for (int i = 0; names[i]; i++)
		if (!strcmp(v->name, names[i]))
			return true;
	return false;
}

typedef enum {
	REQ_FORWARD,
	REQ_REPLACE, /* forward *replacement instead */
	REQ_DROP,    /* answered (or dropped) by us */
	REQ_WAIT,
	REQ_CLOSE,
} req_outcome;

/* What one decoded request needs, whatever opcode carried it. */
typedef struct request {
	const frame_header *h;
	const uint8_t *msg; /* as received (possibly OP_COMPRESSED) */
	size_t len;
	reply_form form;
	bool more_to_come;
	uint8_t *replacement;
	size_t replacement_len;
} request;

static req_outcome analyse(session *s, request *r, const cmdview *v, const uint8_t *plain,
                           size_t plain_len)
{
	server *srv = s->w->srv;
	if (cmdview_is_hello(v)) {
		if (!s->seen_hello && handshake_app_name(v, s->app, sizeof(s->app))) {
			log_line *l = log_begin(LOG_DEBUG, "NETWORK", LOGID_CONN_ACCEPTED, s->ctx,
			                        "Client metadata");
			log_attr_str(l, "appName", s->app);
			log_end(l);
		}
		s->seen_hello = true;
		if (plain == r->msg) { /* never rewrite bytes we did not decode ourselves */
			r->replacement =
			    handshake_strip_compression(plain, plain_len, v, &r->replacement_len);
			if (r->replacement)
				log_reason(LOG_DEBUG, "NETWORK", LOGID_COMPRESSION_STRIPPED, s->ctx,
				           "Removed compression from the handshake so requests "
				           "stay readable");
		}
	}
	if (srv->engine) {
		request_ctx rc = {
		    .app_name = s->app,
		    .client = s->peer,
		    .now_ms = mg_now_ms(),
		    .no_wait = s->wait_expired,
		};
		block_info block;
		switch (engine_analyze(srv->engine, v, &rc, &block)) {
		case VERDICT_FORWARD:
			break;
		case VERDICT_WAIT_INDEXES:
			free(r->replacement);
			r->replacement = NULL;
			return REQ_WAIT;
		case VERDICT_BLOCK:
			free(r->replacement);
			r->replacement = NULL;
			s->nblocked++;
			if (!r->more_to_come) {
				struct evbuffer *b = evbuffer_new();
				size_t len = 0;
				bson_t extra = BSON_INITIALIZER;
				BSON_APPEND_UTF8(&extra, "mongoguardRule", rule_name(block.rule));
				uint8_t *m = reply_error(
				    r->form, next_request_id(s), r->h->request_id, CODE_BLOCKED,
				    "OperationFailed", block.errmsg, &extra, &len);
				bson_destroy(&extra);
				if (b && m)
					evbuffer_add(b, m, len);
				free(m);
				if (b)
					enqueue(s, r->h->request_id, REQ_PLAIN, r->form, b, NULL,
					        0);
			}
			return REQ_DROP;
		}
	}
	req_kind kind = srv->engine && engine_is_ddl(v) ? REQ_DDL
	                : is_awaitable_hello(v)         ? REQ_AWAIT
	                                                : REQ_PLAIN;
	if (!r->more_to_come &&
	    !enqueue(s, r->h->request_id, kind, r->form, NULL, plain, plain_len)) {
		free(r->replacement);
		r->replacement = NULL;
		return REQ_WAIT; /* cannot happen: process_client checks room first */
	}
	return r->replacement ? REQ_REPLACE : REQ_FORWARD;
}

static void log_bad_request(session *s, const frame_header *h, const wire_error *err,
                            const char *action)
{
	log_line *l =
	    log_begin(LOG_WARNING, "NETWORK", LOGID_BAD_REQUEST, s->ctx, "Malformed request");
	log_attr_str(l, "opcode", frame_opcode_name(h->opcode));
	log_attr_int(l, "requestID", h->request_id);
	log_attr_int(l, "code", err->code);
	log_attr_str(l, "reason", err->msg);
	log_attr_str(l, "action", action);
	log_end(l);
}

/* A request we cannot decode: answer it with the error when a reply is
 * allowed, else close the connection. */
static req_outcome reject(session *s, request *r, const wire_error *err)
{
	if (r->more_to_come) {
		log_bad_request(s, r->h, err, "connection closed (no reply allowed)");
		session_finish(s, LOG_WARNING, "malformed request with moreToCome: %s", err->msg);
		return REQ_CLOSE;
	}
	log_bad_request(s, r->h, err, "error reply");
	answer(s, r->form, r->h->request_id, err->code,
	       err->code_name ? err->code_name : "ProtocolError", err->msg);
	return REQ_DROP;
}

static req_outcome handle_opmsg(session *s, request *r, const uint8_t *msg, size_t len)
{
	opmsg m;
	cmdview v;
	wire_error err = {0};
	if (len >= 20)
		r->more_to_come = opmsg_peek_flags(msg) & OPMSG_MORE_TO_COME;
	if (!opmsg_parse(msg, len, &m, &err) || !cmdview_from_opmsg(&m, &v, &err))
		return reject(s, r, &err);
	return analyse(s, r, &v, msg, len);
}

static req_outcome handle_opquery(session *s, request *r, const uint8_t *msg, size_t len)
{
	opquery q;
	cmdview v;
	wire_error err = {0};
	r->form = REPLY_FORM_OPREPLY;
	if (!opquery_parse(msg, len, &q, &err))
		return reject(s, r, &err);
	/* A 5.1+ server takes OP_QUERY only for a few commands on <db>.$cmd. */
	const char *refused = !opquery_is_command(&q) ? q.full_collection : NULL;
	if (!refused) {
		if (!cmdview_from_opquery(&q, &v, &err))
			return reject(s, r, &err); /* e.g. invalid BSON: say exactly that */
		if (!opquery_allowed(&v))
			refused = v.name;
	}
	if (refused) {
		wire_error_set(&err, WIRE_ERR_UNSUPPORTED_OPQUERY, "UnsupportedOpQueryCommand",
		               "Unsupported OP_QUERY command: %s. The client driver may require "
		               "an upgrade. For more details see "
		               "https://dochub.mongodb.org/core/legacy-opcode-removal",
		               refused);
		return reject(s, r, &err);
	}
	return analyse(s, r, &v, msg, len);
}

static req_outcome handle_compressed(session *s, request *r)
{
	compressed_msg c;
	wire_error err = {0};
	uint8_t *plain = NULL;
	size_t plain_len = 0;
	if (!compress_parse(r->msg, r->len, &c, &err) ||
	    !compress_inflate(&c, &plain, &plain_len, &err))
		return reject(s, r, &err);
	req_outcome out;
	if (c.original_opcode == OP_MSG) {
		out = handle_opmsg(s, r, plain, plain_len);
	} else if (c.original_opcode == OP_QUERY) {
		out = handle_opquery(s, r, plain, plain_len);
	} else {
		wire_error_set(&err, WIRE_ERR_PROTOCOL, "ProtocolError",
		               "OP_COMPRESSED wraps opcode %d, which mongoguard does not accept",
		               c.original_opcode);
		out = reject(s, r, &err);
	}
	free(plain);
	return out;
}

static req_outcome handle_request(session *s, request *r)
{
	const frame_header *h = r->h;
	wire_error err = {0};
	switch (h->opcode) {
	case OP_MSG:
		return handle_opmsg(s, r, r->msg, r->len);
	case OP_QUERY:
		return handle_opquery(s, r, r->msg, r->len);
	case OP_COMPRESSED:
		return handle_compressed(s, r);
	case OP_GET_MORE:
		r->form = REPLY_FORM_OPREPLY;
		wire_error_set(&err, CODE_LEGACY_OP, "Location5739101",
		               "OP_GET_MORE is no longer supported (removed in MongoDB 5.1); "
		               "use the getMore command");
		log_reason(LOG_WARNING, "NETWORK", LOGID_LEGACY_OPCODE, s->ctx,
		           "Legacy OP_GET_MORE refused with an error reply");
		return reject(s, r, &err);
	case OP_INSERT:
	case OP_UPDATE:
	case OP_DELETE:
	case OP_KILL_CURSORS:
		/* These never get a reply, so the only clear answer is closing. */
		session_finish(s, LOG_WARNING,
		               "legacy opcode %s is not supported (removed in MongoDB 5.1); "
		               "it allows no reply, so the connection is closed",
		               frame_opcode_name(h->opcode));
		return REQ_CLOSE;
	default:
		session_finish(s, LOG_WARNING, "unknown opcode %d from client", h->opcode);
		return REQ_CLOSE;
	}
}

static void add_timer_ms(struct event *ev, uint32_t ms)
{
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(ev, &tv);
}

/* A request has started arriving: it must be complete within
 * net.maxFrameWaitMS, counted from its first bytes. */
static void arm_frame_timer(session *s)
{
	if (!evtimer_pending(s->frame_timer, NULL))
		add_timer_ms(s->frame_timer, s->w->srv->cfg.max_frame_wait_ms);
}

/* Called when the client side may have work: new bytes, room upstream, the
 * index cache answering, or a wait timing out. */
static void process_client(session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->client);
	while (s->state == SESSION_ACTIVE || s->state == SESSION_WAITING) {
		size_t avail = evbuffer_get_length(in);
		if (avail == 0)
			break;
		/* Stop while the upstream has not taken what we sent, or the
		 * pipeline is full: the client waits, our memory does not grow. */
		if (upstream_out_len(s) >= OUT_HIGH || s->count == INFLIGHT_MAX) {
			s->client_paused = true;
			bufferevent_disable(s->client, EV_READ);
			break;
		}
		uint8_t hdr[WIRE_HEADER_LEN];
		frame_header h;
		wire_error err = {0};
		if (avail < WIRE_HEADER_LEN) {
			arm_frame_timer(s);
			break;
		}
		evbuffer_copyout(in, hdr, sizeof(hdr));
		if (frame_header_parse(hdr, sizeof(hdr), &h, &err) != FRAME_OK) {
			/* The stream cannot be resynchronised: answer if the opcode
			 * says how, then close. */
			h.request_id = wire_read_i32(hdr + 4);
			h.opcode = wire_read_i32(hdr + 12);
			log_bad_request(s, &h, &err, "error reply and close");
			if (h.opcode == OP_MSG || h.opcode == OP_QUERY) {
				struct evbuffer *b = make_error(
				    s, h.opcode == OP_MSG ? REPLY_FORM_OPMSG : REPLY_FORM_OPREPLY,
				    h.request_id, err.code, err.code_name, err.msg);
				if (b && s->count == 0 && s->reply_left == 0)
					evbuffer_add_buffer(client_out(s), b);
				if (b)
					evbuffer_free(b);
			}
			session_finish(s, LOG_WARNING, "bad message length from client: %s",
			               err.msg);
			return;
		}
		if (avail < (size_t)h.length) {
			set_read_need(s->client, (size_t)h.length);
			arm_frame_timer(s);
			break;
		}
		evtimer_del(s->frame_timer);
		set_read_need(s->client, READ_CHUNK);

		request r = {
		    .h = &h,
		    .len = (size_t)h.length,
		    .form = REPLY_FORM_OPMSG,
		};
		r.msg = evbuffer_pullup(in, (ev_ssize_t)h.length);
		if (!r.msg) {
			session_finish(s, LOG_ERROR, "out of memory reading a %d-byte request",
			               h.length);
			return;
		}
		req_outcome out = handle_request(s, &r);
		switch (out) {
		case REQ_WAIT:
			if (s->state != SESSION_WAITING) {
				s->state = SESSION_WAITING;
				bufferevent_disable(s->client, EV_READ);
				add_timer_ms(s->wait_timer, s->w->srv->cfg.engine.index_wait_ms);
				log_reason(LOG_DEBUG, "ANALYZER", LOGID_INDEX_WAIT, s->ctx,
				           "Holding a request until the index list arrives");
			}
			return;
		case REQ_CLOSE:
			return; /* session_finish already ran */
		case REQ_FORWARD:
			evbuffer_remove_buffer(in, bufferevent_get_output(s->upstream),
			                       (size_t)h.length);
			break;
		case REQ_REPLACE:
			evbuffer_drain(in, (size_t)h.length);
			evbuffer_add(bufferevent_get_output(s->upstream), r.replacement,
			             r.replacement_len);
			free(r.replacement);
			break;
		case REQ_DROP:
			evbuffer_drain(in, (size_t)h.length);
			break;
		}
		s->nrequests++;
		if (s->state == SESSION_WAITING) { /* the held request went through */
			s->state = SESSION_ACTIVE;
			s->wait_expired = false;
			evtimer_del(s->wait_timer);
			if (!s->client_paused)
				bufferevent_enable(s->client, EV_READ);
		}
	}
}

/* ---- replies ---- */

static void process_upstream(session *s)
{
	if (!s->upstream)
		return;
	struct evbuffer *in = bufferevent_get_input(s->upstream);
	struct evbuffer *out = client_out(s);
	/* complete_head() may resume the client side, which may end the
	 * session: look again before every step. */
	while (s->upstream && s->state != SESSION_CLOSED &&
	       (s->state != SESSION_FLUSHING || s->reply_left > 0)) {
		if (evbuffer_get_length(out) >= OUT_HIGH) {
			s->upstream_paused = true;
			bufferevent_disable(s->upstream, EV_READ);
			return;
		}
		size_t avail = evbuffer_get_length(in);
		if (s->reply_left > 0) {
			if (avail == 0)
				return;
			size_t n = avail < s->reply_left ? avail : s->reply_left;
			if (s->reply_discard)
				evbuffer_drain(in, n);
			else
				evbuffer_remove_buffer(in, out, n);
			s->reply_left -= n;
			if (s->reply_left == 0) {
				set_read_need(s->upstream, READ_CHUNK);
				if (s->reply_discard)
					s->reply_discard = false;
				else if (!s->reply_more)
					complete_head(s);
			}
			continue;
		}
		if (avail < WIRE_HEADER_LEN)
			return;
		uint8_t hdr[WIRE_HEADER_LEN + 4];
		evbuffer_copyout(in, hdr, avail < sizeof(hdr) ? avail : sizeof(hdr));
		frame_header h;
		wire_error err = {0};
		if (frame_header_parse(hdr, WIRE_HEADER_LEN, &h, &err) != FRAME_OK) {
			log_line *l = log_begin(LOG_WARNING, "NETWORK", LOGID_BAD_REPLY, s->ctx,
			                        "Malformed reply from upstream");
			log_attr_str(l, "reason", err.msg);
			log_end(l);
			session_finish(s, LOG_WARNING, "upstream sent a malformed reply: %s",
			               err.msg);
			return;
		}
		bool more = false;
		if (h.opcode == OP_MSG) {
			if (avail < WIRE_HEADER_LEN + 4 || h.length < WIRE_HEADER_LEN + 4) {
				if (h.length < WIRE_HEADER_LEN + 4) {
					session_finish(s, LOG_WARNING,
					               "upstream sent a %d-byte OP_MSG, too short "
					               "for its flag bits",
					               h.length);
				}
				return;
			}
			more = wire_read_u32(hdr + WIRE_HEADER_LEN) & OPMSG_MORE_TO_COME;
		} else if (h.opcode == OP_COMPRESSED) {
			/* The flag bits are compressed: gather the reply and inflate a
			 * copy to read them. Only clients that compress without
			 * negotiating get here. */
			if (avail < (size_t)h.length) {
				set_read_need(s->upstream, (size_t)h.length);
				return;
			}
			compressed_msg c;
			uint8_t *plain = NULL;
			size_t plain_len = 0;
			const uint8_t *msg = evbuffer_pullup(in, h.length);
			if (!msg || !compress_parse(msg, (size_t)h.length, &c, &err) ||
			    !compress_inflate(&c, &plain, &plain_len, &err)) {
				session_finish(
				    s, LOG_WARNING,
				    "upstream sent an unreadable OP_COMPRESSED reply: %s", err.msg);
				return;
			}
			if (c.original_opcode == OP_MSG && plain_len >= WIRE_HEADER_LEN + 4)
				more = wire_read_u32(plain + WIRE_HEADER_LEN) & OPMSG_MORE_TO_COME;
			free(plain);
		} else if (h.opcode != OP_REPLY) {
			session_finish(s, LOG_WARNING, "upstream sent opcode %d, not a reply",
			               h.opcode);
			return;
		}
		s->reply_left = (size_t)h.length;
		s->reply_more = more;
		/* A reply answers the oldest request in flight, or continues an
		 * exhaust stream. Anything else answers a request that allowed no
		 * reply (some servers answer moreToCome writes anyway); relaying it
		 * would hand the client's next request a stale answer. */
		const inflight *head = s->count > 0 ? ring_at(s, 0) : NULL;
		bool wanted = head && !head->answer &&
		              (h.response_to == head->request_id ||
		               (s->streaming && h.response_to == s->stream_from));
		if (!wanted) {
			s->reply_discard = true;
			s->ndiscarded++;
			log_line *l =
			    log_begin(s->ndiscarded == 1 ? LOG_WARNING : LOG_DEBUG, "NETWORK",
			              LOGID_BAD_REPLY, s->ctx,
			              "Dropped a reply that answers no request in flight");
			log_attr_int(l, "responseTo", h.response_to);
			log_attr_int(l, "expected", head ? head->request_id : -1);
			log_attr_str(l, "why",
			             "the upstream answered a request that allowed no "
			             "reply (moreToCome), or an unknown one");
			log_end(l);
			continue;
		}
		s->streaming = more;
		s->stream_from = h.request_id;
	}
}

/* ---- lifecycle ---- */

static void session_free(session *s)
{
	worker *w = s->w;
	if (s->prev)
		s->prev->next = s->next;
	else
		w->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	w->nsessions--;
	atomic_fetch_sub(&w->srv->nconns, 1);

	log_line *l =
	    log_begin(s->end_severity, "NETWORK", LOGID_CONN_ENDED, s->ctx, "Connection ended");
	log_attr_str(l, "remote", s->peer);
	log_attr_str(l, "appName", s->app);
	log_attr_str(l, "reason", s->end_reason[0] ? s->end_reason : "closed");
	log_attr_int(l, "requests", (int64_t)s->nrequests);
	log_attr_int(l, "blocked", (int64_t)s->nblocked);
	if (s->ndiscarded)
		log_attr_int(l, "unexpectedRepliesDropped", (int64_t)s->ndiscarded);
	log_end(l);

	for (unsigned i = 0; i < s->count; i++)
		inflight_clear(ring_at(s, i));
	if (s->frame_timer)
		event_free(s->frame_timer);
	if (s->wait_timer)
		event_free(s->wait_timer);
	if (s->close_ev)
		event_free(s->close_ev);
	if (s->upstream)
		bufferevent_free(s->upstream);
	if (s->client)
		bufferevent_free(s->client);
	free(s);
	if (atomic_load(&w->draining) && w->nsessions == 0)
		event_base_loopexit(w->base, NULL);
}

static void close_cb(evutil_socket_t fd, short what, void *arg)
{
	session_free(arg);
}

/* Schedules the free; from here on every callback ignores the session. */
static void session_close(session *s)
{
	if (s->state == SESSION_CLOSED)
		return;
	s->state = SESSION_CLOSED;
	bufferevent_disable(s->client, EV_READ | EV_WRITE);
	if (s->upstream)
		bufferevent_disable(s->upstream, EV_READ | EV_WRITE);
	evtimer_del(s->frame_timer);
	evtimer_del(s->wait_timer);
	event_active(s->close_ev, 0, 0);
}

static void flushed_cb(struct bufferevent *bev, void *arg)
{
	session *s = arg;
	if (evbuffer_get_length(client_out(s)) == 0)
		session_close(s);
}

static void flush_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session_close(arg);
}

static void flush_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	session *s = arg;
	snprintf(s->end_reason + strlen(s->end_reason),
	         sizeof(s->end_reason) - strlen(s->end_reason),
	         " (client did not read the last %zu bytes)", evbuffer_get_length(client_out(s)));
	session_close(s);
}

/* Ends the session: the upstream goes now; what is already queued for the
 * client is written first (bounded by FLUSH_TIMEOUT_MS), then the client
 * connection closes. */
static void session_finish(session *s, log_severity sev, const char *fmt, ...)
{
	if (s->state == SESSION_FLUSHING || s->state == SESSION_CLOSED)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->end_reason, sizeof(s->end_reason), fmt, ap);
	va_end(ap);
	s->end_severity = sev;
	s->state = SESSION_FLUSHING;
	evtimer_del(s->frame_timer);
	if (s->upstream) {
		/* a reply cut short must not be followed by anything else */
		if (s->reply_left == 0)
			flush_answers(s);
		bufferevent_free(s->upstream);
		s->upstream = NULL;
	}
	bufferevent_disable(s->client, EV_READ);
	if (evbuffer_get_length(client_out(s)) == 0) {
		session_close(s);
		return;
	}
	bufferevent_setwatermark(s->client, EV_WRITE, 0, 0);
	bufferevent_setcb(s->client, NULL, flushed_cb, flush_event_cb, s);
	evtimer_del(s->wait_timer);
	event_assign(s->wait_timer, s->w->base, -1, 0, flush_timeout_cb, s);
	add_timer_ms(s->wait_timer, FLUSH_TIMEOUT_MS);
}

static void client_read_cb(struct bufferevent *bev, void *arg)
{
	process_client(arg);
}

/* The client drained below OUT_LOW: resume reading from upstream. */
static void client_write_cb(struct bufferevent *bev, void *arg)
{
	session *s = arg;
	if (s->upstream_paused && s->upstream) {
		s->upstream_paused = false;
		bufferevent_enable(s->upstream, EV_READ);
		process_upstream(s);
	}
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session *s = arg;
	if (what & BEV_EVENT_EOF) {
		snprintf(s->end_reason, sizeof(s->end_reason), "client closed the connection");
	} else {
		snprintf(s->end_reason, sizeof(s->end_reason), "client connection error: %s",
		         evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	}
	session_close(s);
}

static void upstream_read_cb(struct bufferevent *bev, void *arg)
{
	session *s = arg;
	process_upstream(s);
	if (atomic_load(&s->w->draining) && s->state == SESSION_ACTIVE && session_idle(s))
		session_finish(s, LOG_INFO, "shutting down");
}

/* The upstream drained below OUT_LOW: resume reading from the client. */
static void upstream_write_cb(struct bufferevent *bev, void *arg)
{
	session *s = arg;
	if (s->client_paused && s->count < INFLIGHT_MAX && s->state == SESSION_ACTIVE) {
		s->client_paused = false;
		bufferevent_enable(s->client, EV_READ);
		process_client(s);
	}
}

static void upstream_event_cb(struct bufferevent *bev, short what, void *arg)
{
	session *s = arg;
	const char *up = s->w->srv->up.name;
	if (what & BEV_EVENT_CONNECTED) {
		s->upstream_connected = true;
		bufferevent_set_timeouts(bev, NULL, NULL);
		int one = 1;
		setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		log_reason(LOG_DEBUG, "NETWORK", LOGID_UPSTREAM_CONNECTED, s->ctx,
		           "Connected to upstream");
		return;
	}
	char why[512];
	if (!s->upstream_connected) {
		const char *e = (what & BEV_EVENT_TIMEOUT)
		                    ? "connect timed out"
		                    : evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR());
		snprintf(why, sizeof(why), "mongoguard could not connect to upstream %s: %s", up,
		         e);
		log_line *l = log_begin(LOG_WARNING, "NETWORK", LOGID_UPSTREAM_FAILED, s->ctx,
		                        "Upstream unreachable");
		log_attr_str(l, "upstream", up);
		log_attr_str(l, "reason", e);
		log_end(l);
	} else {
		process_upstream(s); /* deliver whatever complete replies arrived */
		snprintf(why, sizeof(why), "mongoguard lost its connection to upstream %s: %s", up,
		         (what & BEV_EVENT_EOF)
		             ? "closed by the server"
		             : evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	}
	if (s->state == SESSION_FLUSHING || s->state == SESSION_CLOSED)
		return;
	fail_inflight(s, why);
	session_finish(s, LOG_WARNING, "%s", why);
}

static void frame_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	session *s = arg;
	size_t have = evbuffer_get_length(bufferevent_get_input(s->client));
	session_finish(
	    s, LOG_WARNING,
	    "incomplete request: only %zu bytes arrived within %u ms (net.maxFrameWaitMS)", have,
	    s->w->srv->cfg.max_frame_wait_ms);
}

static void wait_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	session *s = arg;
	if (s->state != SESSION_WAITING)
		return;
	log_reason(LOG_INFO, "ANALYZER", LOGID_INDEX_WAIT, s->ctx,
	           "Index list did not arrive in time; request forwarded without a sort verdict");
	s->wait_expired = true;
	process_client(s);
}

void session_index_changed(session *s)
{
	if (s->state == SESSION_WAITING)
		process_client(s);
}

void session_drain(session *s)
{
	if (s->state == SESSION_ACTIVE && session_idle(s))
		session_finish(s, LOG_INFO, "shutting down");
}

void session_abort(session *s, const char *reason)
{
	if (s->state == SESSION_CLOSED)
		return;
	snprintf(s->end_reason, sizeof(s->end_reason), "%s", reason);
	session_close(s);
}

void session_start(worker *w, int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	server *srv = w->srv;
	session *s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		log_reason(LOG_ERROR, "NETWORK", LOGID_CONN_REFUSED, NULL,
		           "Out of memory accepting a connection");
		atomic_fetch_sub(&srv->nconns, 1);
		return;
	}
	s->w = w;
	s->end_severity = LOG_INFO;
	s->id = atomic_fetch_add(&srv->next_conn_id, 1);
	snprintf(s->ctx, sizeof(s->ctx), "conn%llu", (unsigned long long)s->id);
	format_addr(addr, s->peer, sizeof(s->peer));
	s->next = w->sessions;
	if (w->sessions)
		w->sessions->prev = s;
	w->sessions = s;
	w->nsessions++;

	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->client = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
	s->upstream = bufferevent_socket_new(w->base, -1, BEV_OPT_CLOSE_ON_FREE);
	s->frame_timer = evtimer_new(w->base, frame_timeout_cb, s);
	s->wait_timer = evtimer_new(w->base, wait_timeout_cb, s);
	s->close_ev = event_new(w->base, -1, 0, close_cb, s);
	if (!s->client || !s->upstream || !s->frame_timer || !s->wait_timer || !s->close_ev) {
		if (!s->client)
			close(fd);
		snprintf(s->end_reason, sizeof(s->end_reason), "out of memory");
		session_free(s);
		return;
	}
	bufferevent_setcb(s->client, client_read_cb, client_write_cb, client_event_cb, s);
	bufferevent_setcb(s->upstream, upstream_read_cb, upstream_write_cb, upstream_event_cb, s);
	bufferevent_setwatermark(s->client, EV_WRITE, OUT_LOW, 0);
	bufferevent_setwatermark(s->upstream, EV_WRITE, OUT_LOW, 0);
	set_read_need(s->client, READ_CHUNK);
	set_read_need(s->upstream, READ_CHUNK);

	log_line *l =
	    log_begin(LOG_INFO, "NETWORK", LOGID_CONN_ACCEPTED, s->ctx, "Connection accepted");
	log_attr_str(l, "remote", s->peer);
	log_attr_int(l, "connectionCount", (int64_t)atomic_load(&srv->nconns));
	log_end(l);

	uint32_t ms = srv->cfg.connect_timeout_ms;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	bufferevent_set_timeouts(s->upstream, NULL, &tv);
	if (bufferevent_socket_connect(s->upstream, (struct sockaddr *)&srv->up.ss,
	                               (int)srv->up.len) < 0) {
		/* A refused connect is reported later through upstream_event_cb;
		 * only a socket that could not even be created lands here. */
		session_finish(s, LOG_WARNING, "cannot create a socket to upstream %s: %s",
		               srv->up.name, evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		return;
	}
	bufferevent_enable(s->client, EV_READ);
	bufferevent_enable(s->upstream, EV_READ);
}
