/* Upstream -> client (session_int.h). The reply framer (reply_framer.h)
 * reads each reply's header and flag bits and then says forward, drop or
 * gather N bytes; the body streams through in whatever chunks arrive. Only
 * an OP_COMPRESSED reply is gathered whole, to read its flag bits, and a
 * reply to a hello whose hosts are rewritten (hello_rewrite.h). The replies
 * one read relays go through the worker's stage_replies and out together
 * when the turn ends (answers_flush_replies); one that is all its read held
 * goes at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/opmsg.h"
#include "protocol/value_filter.h"
#include "proxy/runtime/clock.h"
#include "proxy/session/session_int.h"
#include "proxy/sinks/capture.h"
#include "proxy/stats/reply_scan.h"

static void note_dropped_reply(session *s, const frame_header *h)
{
	const int32_t *expect = inflight_expect(&s->inflight);
	if (s->no_reply_owed > 0) { /* session_int.h, no_reply_owed */
		s->no_reply_owed--;
		log_line *l = log_begin(LOG_DEBUG, "NETWORK", LOGID_BAD_REPLY, s->ctx,
		                        "Dropped the upstream's reply to a request sent with "
		                        "moreToCome, which allows none");
		log_attr_int(l, "responseTo", h->response_to);
		log_end(l);
		return;
	}
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

/* A reply's bytes, for the readers of its body below: p when the caller
 * has them contiguous, else pulled up from the front of in when all of
 * them are there (in NULL: they are not), only when a reader asks. */
typedef struct reply_at {
	const uint8_t *p;
	struct evbuffer *in;
	size_t len;
} reply_at;

static const uint8_t *reply_whole(reply_at *r)
{
	if (!r->p && r->in)
		r->p = evbuffer_pullup(r->in, (ev_ssize_t)r->len);
	r->in = NULL;
	return r->p;
}

/* The values sc's first batch's first documents held, into vf: vf, or
 * NULL when they are not known, it is a getMore's, or it held fewer than
 * two documents (no parent of a join). */
static const value_filter *batch_values(const reply_scan *sc, value_filter *vf)
{
	return sc->n >= 2 && reply_scan_values(sc, vf) ? vf : NULL;
}

/* A reply, to the rules that follow the connection's reads (the engine's
 * track, made only when such a rule is on, and asking only after a read
 * that may return more than one document): how many documents it held,
 * and for two or more the values they held. ndocs: what the workload read
 * of it (read: its scan; -1: not read); otherwise read here when it is
 * whole (reply_scan, some 130 instructions), else unknown. */
static void note_track_reply(session *s, int64_t now_ns, int64_t ndocs, const reply_scan *read,
                             reply_at *r)
{
	engine *e = session_snap(s)->engine;
	if (!e)
		return;
	reply_scan sc;
	value_filter vf;
	const value_filter *vals = NULL;
	const uint8_t *whole = NULL;
	if (ndocs >= 0)
		vals = batch_values(read, &vf);
	else if ((whole = reply_whole(r)) && reply_scan_read(whole, r->len, &sc) && sc.ok) {
		ndocs = sc.n;
		vals = batch_values(&sc, &vf);
	}
	if (ndocs < 0 && !whole && s->cap_reply && s->cap_buf) {
		/* streamed, and copied whole for the capture: counted from the
		 * copy at its end (capture_reply_end), as the report counts it */
		s->cap_track = true;
		return;
	}
	engine_note_reply(e, s->track, ndocs, vals, now_ns / 1000000);
}

/* The head request's first reply, to its workload entry and to
 * reply_observed. Its body is read when all of it is here (documents,
 * error code: into sc); else its length alone is known. A read's
 * documents, when they were read (sc then holds its scan), else -1. */
static int64_t note_reply_facts(session *s, inflight *f, int64_t now, reply_at *r, reply_scan *sc)
{
	wl_shape *e = workload_at(s->env.workload, f->wl);
	f->wl.gen = 0;
	if (!e)
		return -1;
	wl_reply wr = {.latency_ns = now - f->read_ns, .bytes = (int64_t)r->len, .ndocs = -1};
	/* Every write's reply is read (its errors: duplicate keys and the
	 * like); of the rest, one in workload.replySample a shape, since
	 * reading every reply of a find by _id would cost some 3 % of its
	 * request's instructions on its own (tests/bench/README.md). */
	bool sample = e->kind == WL_KIND_WRITE || e->unread == 0;
	e->unread = sample ? s->env.workload->sample - 1 : e->unread - 1;
	const uint8_t *whole;
	if (sample && (whole = reply_whole(r)) && reply_scan_read(whole, r->len, sc)) {
		wr.read = true;
		/* a batch's documents, a write's n; a count's n is its answer,
		 * which comes in one document */
		wr.ndocs = e->answer_is_n ? 1 : sc->n;
		wr.code = sc->ok && !sc->write_errors ? 0 : sc->code ? sc->code : -1;
	}
	workload_reply(e, &wr);
	/* a read's documents, for the track (a count's n is no batch; an
	 * error's, none) */
	return wr.read && sc->ok && e->kind == WL_KIND_READ && !e->answer_is_n ? wr.ndocs : -1;
}

/* A relayed reply begins: count it, and time its request's first one.
 * r: its length, and its bytes where they are (reply_at). *now: when its
 * read came, 0 until the clock is read (then set): the replies of one read
 * share a reading, since a clock read costs as much as the rest of a
 * small reply's accounting (tests/bench/README.md, stop 47). */
static void note_reply_start(session *s, reply_at *r, int64_t *now_ns)
{
	mx_add(&s->env.mx->messages[MX_DIR_REPLY], 1);
	/* The upstream answers: no deadline while the reply streams (a slow
	 * client may hold it back); the next request's starts when it ends. */
	s->reply_due = 0;
	inflight *f = inflight_head(&s->inflight);
	if (!f)
		return;
	/* in order: the moreToCome requests before f get no answer now */
	uint32_t after = s->no_reply_sent - f->no_reply_mark;
	if (s->no_reply_owed > after)
		s->no_reply_owed = after;
	bool track = engine_track_wants_count(s->track);
	if (!f->sent_ns && !f->wl.gen && !track)
		return;
	if (!*now_ns)
		*now_ns = mg_now_ns();
	int64_t now = *now_ns, ndocs = -1;
	if (f->sent_ns) {
		mx_observe(&s->env.mx->latency, (uint64_t)(now - f->sent_ns));
		f->sent_ns = 0;
	}
	reply_scan sc;
	if (f->wl.gen)
		ndocs = note_reply_facts(s, f, now, r, &sc);
	if (track)
		note_track_reply(s, now, ndocs, &sc, r);
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
	engine *e = session_snap(s)->engine;
	if (s->cap_track && e) {
		reply_scan sc;
		value_filter vf;
		bool ok = s->cap_buf && reply_scan_read(s->cap_buf, s->cap_len, &sc) && sc.ok;
		engine_note_reply(e, s->track, ok ? sc.n : -1, ok ? batch_values(&sc, &vf) : NULL,
		                  mg_now_ns() / 1000000);
	}
	s->cap_track = false;
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

/* The documents an upsert's reply says it inserted: an update's
 * `upserted` (one entry per statement that inserted), a findAndModify's
 * `lastErrorObject.upserted` (one). */
static int64_t upserted(const bson_t *body)
{
	bson_iter_t it, in;
	int64_t n = 0;
	if (bson_iter_init_find(&it, body, "upserted") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &in))
		while (bson_iter_next(&in))
			n++;
	else if (bson_iter_init_find(&it, body, "lastErrorObject") &&
	         BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &in) &&
	         bson_iter_find(&in, "upserted"))
		n = 1;
	return n;
}

/* A write's reply, whole: the documents it says it inserted (an upsert's:
 * upserted) or deleted move the index cache's count of that collection.
 * An insert that inserted nothing (a write error, ok: 0) may still have
 * made its collection, as the server creates it before the documents go
 * in: a list that says it does not exist is forgotten (engine_note_made;
 * an upsert's completion does so whatever its reply, answers.c). */
static void note_write_reply(session *s, const inflight *f, const uint8_t *p, size_t n)
{
	engine *e = session_snap(s)->engine;
	opmsg m;
	wire_error err = {0};
	bson_t body;
	bson_iter_t it;
	if (!e || !opmsg_parse(p, n, &m, &err) || !bson_init_static(&body, m.body, m.body_len))
		return;
	int64_t docs = 0;
	if (f->kind == INFLIGHT_UPSERT)
		docs = upserted(&body);
	else if (bson_iter_init_find(&it, &body, "n") && BSON_ITER_HOLDS_NUMBER(&it))
		docs = bson_iter_as_int64(&it);
	if (docs > 0)
		engine_note_docs(e, (const char *)f->kept,
		                 f->kind == INFLIGHT_DELETE ? -docs : docs);
	else if (f->kind == INFLIGHT_INSERT)
		engine_note_made(e, (const char *)f->kept);
}

/* A whole reply (FRAMER_WHOLE) to the head request f: a write's reply is
 * read for its n and passed as it is; a hello's is rewritten. */
static void relay_whole(session *s, inflight *f, struct evbuffer *in, struct evbuffer *out,
                        const uint8_t *p, const framer_step *st)
{
	reply_at r = {p, NULL, st->n};
	int64_t now = 0;
	note_reply_start(s, &r, &now);
	if (s->env.capture)
		capture_reply_step(s, in, st);
	mx_add(&s->env.mx->bytes[MX_DIR_REPLY], st->n);
	s->nbytes[MX_DIR_REPLY] += st->n;
	reply_scan sc;
	if (f && f->kind == INFLIGHT_DDL) /* the capture's reader says the same */
		f->ddl_noop = (reply_scan_read(p, st->n, &sc) && !sc.ok) ||
		              reply_scan_indexes_unchanged(p, st->n);
	if (f && (inflight_is_write(f->kind) || f->kind == INFLIGHT_UPSERT)) {
		note_write_reply(s, f, p, st->n);
		evbuffer_remove_buffer(in, out, st->n);
	} else if (s->env.hello && f && inflight_is_hello(f->kind)) {
		relay_hello(s, in, out, p, st->n);
	} else { /* a DDL command's, or one gathered for its count */
		evbuffer_remove_buffer(in, out, st->n);
	}
}

/* Replies to the head request gathered whole: a hello's, to rewrite its
 * hosts, a write's, to read how many documents it wrote, and a DDL
 * command's, to read whether it failed. */
static bool wanted_whole(const session *s, const inflight *f)
{
	return f && !f->answer &&
	       ((s->env.hello && inflight_is_hello(f->kind)) ||
	        (f->kept && (inflight_is_write(f->kind) || f->kind == INFLIGHT_DDL)));
}

/* The largest reply gathered whole for its document count alone. */
#define COUNTED_WHOLE_MAX (256 * 1024)

/* An upsert's reply is gathered whole, to count what it inserted, when it
 * is no larger than COUNTED_WHOLE_MAX: a findAndModify's holds the
 * document it returns, up to 16 MB, and a larger one streams, its upsert
 * not counted (as none was before). p/have: the front of the input, at a
 * reply's start. Inline: asked of every reply, and a call cost 8
 * instructions a request of pipelined finds. */
static inline __attribute__((always_inline)) bool upsert_whole(const session *s, const inflight *f,
                                                               const uint8_t *p, size_t have)
{
	return f && f->kind == INFLIGHT_UPSERT && !f->answer && f->kept && have >= 4 &&
	       !reply_framer_mid_reply(&s->framer) &&
	       (uint32_t)wire_read_i32(p) <= COUNTED_WHOLE_MAX;
}

/* A reply whose documents the connection's track counts (client-side-join:
 * a read that may be a parent, or its getMore) is gathered whole when it
 * is no larger than COUNTED_WHOLE_MAX and did not arrive whole: its count
 * was otherwise unknown whenever the kernel handed it over in pieces, and
 * a parent was lost at random. p/have: the front of the input, at a
 * reply's start. A larger reply streams, its count unknown. */
static bool counted_whole(const session *s, const inflight *f, const uint8_t *p, size_t have,
                          size_t avail)
{
	if (!f || f->answer || have < 4 || reply_framer_mid_reply(&s->framer) ||
	    !engine_track_wants_count(s->track))
		return false;
	uint32_t len = (uint32_t)wire_read_i32(p);
	return len > avail && len <= COUNTED_WHOLE_MAX;
}

/* A run of whole replies at the front of the upstream's input (its first
 * chain), relayed together: each goes through the framer where it lies,
 * with no header copied out, and those relayed in a row go in one move of
 * their bytes, as a read of pipelined requests does the other way. The
 * run is only replies the framer forwards untouched: it ends at the first
 * that is not all here, is wanted whole, or is dropped (drained here, as
 * the framer counted it gone), while capturing, and before a reply that
 * would take the queued output past OUT_HIGH. A completed request whose
 * successor carries an answer of ours ends it too: the replies before
 * that answer must be out first. queued: what the two outputs held before
 * it (below OUT_HIGH), as the caller measured them. RELAY_NONE when it did
 * nothing (the loop's own step then says what the front of the input
 * is); RELAY_EMPTIED when it relayed all avail bytes and queued nothing of
 * its own, so the outputs hold at most queued + avail, still below
 * OUT_HIGH, and the loop has nothing left to look at. */
typedef enum { RELAY_NONE, RELAY_MORE, RELAY_EMPTIED } relay_result;

/* One reply of a run, all here (len bytes at p, have from p in the chain),
 * through the framer: the common case decided inline (reply_framer_plain:
 * to the head request, no moreToCome), anything else by
 * reply_framer_next. */
static framer_verb run_step(session *s, const uint8_t *p, size_t have, size_t len, framer_step *st)
{
	const int32_t *expect = inflight_expect(&s->inflight);
	reply_framer_set_whole(&s->framer, false);
	if (reply_framer_plain(&s->framer, p, len, expect)) {
		st->verb = FRAMER_FORWARD;
		st->n = len;
		st->starts = st->completes = true;
		return st->verb;
	}
	wire_error err;
	session_no_error(&err);
	return reply_framer_next(&s->framer, p, have, len, expect, st, &err);
}

/* The run's replies completed requests: the next one's deadline, moved
 * once (they share one clock reading, so each move would have set the
 * same), unless a reply began after the last completion. */
static void run_deadline(session *s, bool rearm, int64_t *now)
{
	if (rearm)
		answers_arm_deadline(s, true, now);
}

static relay_result relay_run(session *s, struct evbuffer *in, struct evbuffer *out, size_t avail,
                              size_t queued)
{
	struct evbuffer_iovec v;
	if (s->env.capture || reply_framer_mid_reply(&s->framer) ||
	    evbuffer_peek(in, -1, NULL, &v, 1) < 1)
		return RELAY_NONE;
	const uint8_t *p = v.iov_base;
	size_t have = v.iov_len, off = 0, nrun = 0, bytes = 0;
	bool more = true, rearm = false;
	int64_t now = 0; /* the run's replies came in one read */
	while (more && have - off >= REPLY_PEEK_LEN) {
		const inflight *head = inflight_head(&s->inflight);
		size_t len = (size_t)(uint32_t)wire_read_i32(p + off);
		if (!head || head->answer || wanted_whole(s, head) ||
		    upsert_whole(s, head, p + off, have - off) || len < REPLY_PEEK_LEN ||
		    len > have - off || queued + off + len >= OUT_HIGH)
			break;
		framer_step st;
		framer_verb verb = run_step(s, p + off, have - off, len, &st);
		if (verb == FRAMER_DROP) {
			/* counted gone by the framer: the run's bytes go first */
			note_dropped_reply(s, &st.peek.h);
			if (off > 0)
				transport_stage_or_relay(in, off, false, out, &s->cl, true, p);
			evbuffer_drain(in, st.n);
			mx_add(&s->env.mx->bytes[MX_DIR_REPLY], bytes);
			s->nbytes[MX_DIR_REPLY] += bytes;
			run_deadline(s, rearm, &now);
			return RELAY_MORE;
		}
		if (verb != FRAMER_FORWARD)
			break;   /* nothing consumed: the loop's own step says what it is */
		if (st.starts) { /* all of it is here: len <= have - off */
			reply_at r = {p + off, NULL, len};
			note_reply_start(s, &r, &now);
			rearm = false;
		}
		off += st.n;
		bytes += st.n;
		nrun++;
		if (st.completes) {
			const inflight *next =
			    inflight_count(&s->inflight) > 1 ? inflight_at(&s->inflight, 1) : NULL;
			more = !(next && next->answer);
			if (!more) { /* answers_flush writes it */
				transport_stage_or_relay(in, off, off == avail, out, &s->cl, true,
				                         p);
				off = 0;
			}
			answers_retire_head(s);
			if (!more)
				answers_flush(s);
			rearm = true;
		}
	}
	if (off > 0)
		transport_stage_or_relay(in, off, off == avail, out, &s->cl, true, p);
	run_deadline(s, rearm, &now);
	if (nrun == 0)
		return RELAY_NONE;
	mx_add(&s->env.mx->bytes[MX_DIR_REPLY], bytes);
	s->nbytes[MX_DIR_REPLY] += bytes;
	transport_set_read_need(&s->up, READ_CHUNK);
	return more && off == avail ? RELAY_EMPTIED : RELAY_MORE;
}

/* A piece of a reply the framer forwards untouched (all of it, or as much
 * as is here): its body is read at its start only when all of it is
 * here. avail: the bytes in in. */
static void relay_forward(session *s, struct evbuffer *in, struct evbuffer *out, size_t avail,
                          const framer_step *st)
{
	if (s->env.capture) /* first: its copy may count the reply (note_track_reply) */
		capture_reply_step(s, in, st);
	if (st->starts) {
		size_t len = (size_t)st->peek.h.length;
		reply_at r = {NULL, avail >= len ? in : NULL, len};
		int64_t now = 0;
		note_reply_start(s, &r, &now);
	}
	transport_stage_or_relay(in, st->n, st->n == avail, out, &s->cl, true, NULL);
	mx_add(&s->env.mx->bytes[MX_DIR_REPLY], st->n);
	s->nbytes[MX_DIR_REPLY] += st->n;
}

/* The reply stream cannot be trusted past a malformed reply: logged, and
 * the client's connection ends. */
static void malformed_reply(session *s, const wire_error *err)
{
	log_line *l = log_begin(LOG_WARNING, "NETWORK", LOGID_BAD_REPLY, s->ctx,
	                        "Malformed reply from upstream");
	log_attr_str(l, "reason", err->msg);
	log_end(l);
	session_finish(s, LOG_WARNING, "upstream sent a malformed reply: %s", err->msg);
}

static void process_upstream_replies(session *s)
{
	struct evbuffer *out = s->env.stage_replies;
	/* A step may end the session (a malformed reply, out of memory):
	 * look again before every one. */
	while (s->up.bev && session_relaying(s)) {
		struct evbuffer *in = bufferevent_get_input(s->up.bev);
		size_t queued =
		    evbuffer_get_length(out) + evbuffer_get_length(session_client_out(s));
		if (queued >= OUT_HIGH) {
			s->up.paused = true;
			bufferevent_disable(s->up.bev, EV_READ);
			return;
		}
		size_t avail = evbuffer_get_length(in);
		relay_result run = avail > 0 ? relay_run(s, in, out, avail, queued) : RELAY_NONE;
		if (run == RELAY_EMPTIED)
			return; /* what the next turn would find: no pause, an empty input */
		if (run == RELAY_MORE)
			continue;
		if (avail == 0) {
			/* What the framer would say with nothing here: gather a
			 * header, or one more byte of the reply it is in, which
			 * is a read chunk's mark either way. Every reply read
			 * ends here, so it is said without asking. */
			transport_set_read_need(&s->up, READ_CHUNK);
			return;
		}
		size_t want = reply_framer_want(&s->framer);
		size_t have = avail < want ? avail : want;
		uint8_t buf[REPLY_PEEK_LEN];
		const uint8_t *p = peek_upstream(in, have, buf, sizeof(buf));
		framer_step st;
		wire_error err;
		session_no_error(&err);
		inflight *head = inflight_head(&s->inflight);
		if (!p) {
			session_finish(s, LOG_ERROR, "out of memory reading a %zu-byte reply",
			               have);
			return;
		}
		reply_framer_set_whole(&s->framer, wanted_whole(s, head) ||
		                                       counted_whole(s, head, p, have, avail) ||
		                                       upsert_whole(s, head, p, have));
		switch (reply_framer_next(&s->framer, p, have, avail, inflight_expect(&s->inflight),
		                          &st, &err)) {
		case FRAMER_GATHER:
			if (st.begun) /* a reply gathered whole has begun: as one streaming */
				s->reply_due = 0;
			if (st.n > avail) {
				transport_set_read_need(&s->up, st.n);
				return;
			}
			continue;
		case FRAMER_INVALID:
			malformed_reply(s, &err);
			return;
		case FRAMER_DROP:
			if (st.starts)
				note_dropped_reply(s, &st.peek.h);
			evbuffer_drain(in, st.n);
			break;
		case FRAMER_FORWARD:
			relay_forward(s, in, out, avail, &st);
			break;
		case FRAMER_WHOLE:
			relay_whole(s, head, in, out, p, &st);
			break;
		}
		if (!reply_framer_mid_reply(&s->framer))
			transport_set_read_need(&s->up, READ_CHUNK);
		if (s->cap_reply && !reply_framer_mid_reply(&s->framer))
			capture_reply_end(s);
		if (st.completes)
			answers_complete_head(s, NULL);
	}
}

/* Relays what the upstream sent. The replies go through the worker's
 * stage_replies and out together when it returns (answers_flush_replies); one
 * that is all its read held goes at once. */
void replies_process(session *s)
{
	process_upstream_replies(s);
	if (s->cl.bev)
		answers_flush_replies(s);
	if (s->up.bev)
		transport_restart_reads(&s->up);
}

void replies_release(session *s)
{
	free(s->cap_buf);
	s->cap_buf = NULL;
}
