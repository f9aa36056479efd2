/* The in-flight queue's side of a session (session_int.h): mongoguard's
 * own answers in request order, completions, the reply deadline.
 *
 * The queue (inflight.h) holds one entry per request that will get a
 * reply, in request order. A reply without moreToCome completes the head
 * entry; with moreToCome (exhaust cursors, streaming hello) the head stays,
 * since more replies will follow unasked. A request mongoguard answers
 * itself is queued too, with its answer attached: the answer is written
 * when it reaches the head at a reply boundary, so even a pipelining client
 * gets its replies in order and never half a server reply spliced with
 * ours. Requests with moreToCome get no entry: nothing will answer them. */
#include <stdlib.h>
#include <string.h>

#include "protocol/request.h"
#include "proxy/runtime/clock.h"
#include "proxy/session/session_int.h"

void answers_flush_replies(session *s)
{
	size_t n = evbuffer_get_length(s->env.stage_replies);
	if (n > 0)
		transport_relay(s->env.stage_replies, &s->cl, true, n, NULL);
}

void answers_flush(session *s)
{
	inflight *f;
	while (!reply_framer_mid_reply(&s->framer) && (f = inflight_head(&s->inflight)) &&
	       f->answer) {
		answers_flush_replies(s); /* the replies relayed before it go first */
		evbuffer_add(session_client_out(s), f->answer, f->answer_len);
		inflight_pop(&s->inflight);
	}
}

void answers_queue(session *s, int32_t request_id, reply_form form, uint8_t *msg, size_t len)
{
	/* next_verb (requests.c) checks the queue has room first: only memory fails */
	inflight *f = msg ? inflight_push(&s->inflight, request_id, INFLIGHT_PLAIN, form) : NULL;
	if (!f) {
		free(msg);
		/* The client would wait for an answer that never comes: the
		 * close tells it instead. */
		session_finish(s, LOG_ERROR, "out of memory answering request %d", (int)request_id);
		return;
	}
	f->answer = msg;
	f->answer_len = len;
	answers_flush(s);
}

int32_t answers_next_request_id(session *s)
{
	return (int32_t)(atomic_fetch_add(&s->env.ids->next_request, 1) & 0x7fffffff);
}

uint8_t *answers_make_error(session *s, reply_form form, int32_t request_id, int code,
                            const char *code_name, const char *errmsg, size_t *len)
{
	return reply_error(form, answers_next_request_id(s), request_id, code, code_name, errmsg,
	                   NULL, len);
}

void answers_error(session *s, reply_form form, int32_t request_id, int code, const char *code_name,
                   const char *errmsg)
{
	size_t len = 0;
	uint8_t *msg = answers_make_error(s, form, request_id, code, code_name, errmsg, &len);
	answers_queue(s, request_id, form, msg, len);
}

void answers_fail_all(session *s, const char *why)
{
	if (reply_framer_mid_reply(&s->framer))
		return;
	for (unsigned i = 0; i < inflight_count(&s->inflight); i++) {
		inflight *f = inflight_at(&s->inflight, i);
		if (!f->answer)
			f->answer =
			    answers_make_error(s, f->form, f->request_id, CODE_HOST_UNREACHABLE,
			                       "HostUnreachable", why, &f->answer_len);
	}
	answers_flush(s);
}

/* An upsert's reply passed: its collection exists now, whatever the cache
 * was told of it meanwhile (engine_note_made). */
static void note_upsert_done(session *s, const inflight *f)
{
	engine *e = session_snap(s)->engine;
	if (e && f->kept)
		engine_note_made(e, (const char *)f->kept);
}

/* A DDL command's reply passed: the index cache forgets what it changed.
 * One that failed (ok: 0: a create of a collection that exists, a drop
 * of one that does not) changed nothing, and is no schema change: it
 * would drop the late verdicts owed there, at a moment the report's
 * replay cannot see (it does the same, report/aggregate.c). Nor is a
 * createIndexes of indexes that all exist (numIndexesBefore ==
 * numIndexesAfter), which an ODM sends at every start: it would make the
 * cache fetch the list again and drop the verdicts owed meanwhile. */
static void note_ddl_done(session *s, const inflight *f)
{
	engine *e = session_snap(s)->engine;
	request r;
	wire_error err = {0};
	if (!e || !f->kept || f->ddl_noop)
		return;
	if (request_decode(&r, f->kept, f->kept_len, &err) == REQUEST_COMMAND)
		engine_note_ddl(e, &r.view);
	request_release(&r);
}

void answers_retire_head(session *s)
{
	inflight *f = inflight_head(&s->inflight);
	if (!f)
		return; /* the framer relays only replies to a queued request */
	if (f->kind == INFLIGHT_DDL)
		note_ddl_done(s, f);
	else if (f->kind == INFLIGHT_UPSERT)
		note_upsert_done(s, f);
	inflight_pop(&s->inflight);
}

void answers_complete_head(session *s, int64_t *now)
{
	if (!inflight_head(&s->inflight))
		return;
	answers_retire_head(s);
	answers_flush(s);
	answers_arm_deadline(s, true, now);
}

/* The reply timer fires at reply_due, or earlier: it is added only when
 * nothing would wake it by then (answers_reply_timeout_cb looks again). */
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
 * added and deleted per request would cost both under the event base's
 * lock. */
void answers_arm_deadline(session *s, bool restart, int64_t *now)
{
	uint32_t ms = session_snap(s)->cfg.reply_timeout_ms;
	/* A deadline runs, so the head was wanted when it was set, and only a
	 * reply or a restart changes the head that was: a request queued
	 * behind it leaves it as it is. */
	if (!restart && ms && s->reply_due)
		return;
	const inflight *f = inflight_head(&s->inflight);
	bool wanted = ms && f && !f->answer && f->kind != INFLIGHT_AWAIT && session_relaying(s);
	if (!wanted) {
		s->reply_due = 0;
		return;
	}
	if (!restart && s->reply_due)
		return;
	int64_t t = now && *now ? *now : mg_now_ns();
	if (now)
		*now = t;
	s->reply_due = t + (int64_t)ms * 1000000;
	wake_reply_timer(s, t);
}

/* The upstream took longer than upstream.replyTimeoutMS to begin a reply:
 * end the client connection, as a network error the driver retries or
 * reports (an error reply would claim the command failed, when it may have
 * run). */
void answers_reply_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	session *s = arg;
	session_ncallbacks++;
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
	               s->env.up->name, session_snap(s)->cfg.reply_timeout_ms);
}

/* ---- requests answered here: malformed, refused, blocked ---- */

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
 * allowed, else close the connection (true). */
bool answers_reject(session *s, const request *r, const wire_error *err)
{
	if (r->legacy_opcode)
		log_reason(LOG_WARNING, "NETWORK", LOGID_LEGACY_OPCODE, s->ctx,
		           "Legacy %s refused with an error reply", frame_opcode_name(r->h.opcode));
	if (r->more_to_come) {
		log_bad_request(s, &r->h, err, "connection closed (no reply allowed)");
		session_finish(s, LOG_WARNING, "malformed request with moreToCome: %s", err->msg);
		return true;
	}
	log_bad_request(s, &r->h, err, "error reply");
	answers_error(s, r->form, r->h.request_id, err->code,
	              err->code_name ? err->code_name : "ProtocolError", err->msg);
	return false;
}

void answers_block(session *s, const request *r, const block_info *block)
{
	s->nblocked++;
	if ((unsigned)block->rule < RULE_COUNT)
		mx_add(&s->env.mx->blocked[block->rule], 1);
	if (r->more_to_come)
		return; /* nothing may answer it: dropped, and the finding says so */
	size_t len = 0;
	bson_t extra = BSON_INITIALIZER;
	BSON_APPEND_UTF8(&extra, "mongoguardRule", rule_name(block->rule));
	uint8_t *msg = reply_error(r->form, answers_next_request_id(s), r->h.request_id,
	                           CODE_BLOCKED, "OperationFailed", block->errmsg, &extra, &len);
	bson_destroy(&extra);
	answers_queue(s, r->h.request_id, r->form, msg, len);
}

/* The stream cannot be resynchronised after a bad length: answer if the
 * opcode says how, then close. */
void answers_refuse_frame(session *s, const frame_header *h, const wire_error *err)
{
	log_bad_request(s, h, err, "error reply and close");
	if ((h->opcode == OP_MSG || h->opcode == OP_QUERY) && inflight_count(&s->inflight) == 0 &&
	    !reply_framer_mid_reply(&s->framer)) {
		size_t len = 0;
		uint8_t *msg = answers_make_error(
		    s, h->opcode == OP_MSG ? REPLY_FORM_OPMSG : REPLY_FORM_OPREPLY, h->request_id,
		    err->code, err->code_name, err->msg, &len);
		answers_flush_replies(s);
		if (msg)
			evbuffer_add(session_client_out(s), msg, len);
		free(msg);
	}
	const char *saw = frame_foreign_protocol(h);
	if (saw)
		session_finish(s, LOG_WARNING, "not a MongoDB message: the client sent %s%s (%s)",
		               saw,
		               !strcmp(saw, "a TLS handshake") ? ", and this listener takes plain "
		                                                 "connections (net.tls.mode)"
		                                               : "",
		               err->msg);
	else
		session_finish(s, LOG_WARNING, "bad message length from client: %s", err->msg);
}
