/* Client -> upstream (session_int.h). The request framer
 * (request_framer.h) reads each request's header and says what to do with
 * its bytes; this file carries the verbs out.
 *
 * A request arrives whole in the client's input buffer (the header's
 * length is checked against the protocol limits first, and the read mark
 * is raised to exactly that request, so a connection never buffers more
 * than one request beyond a read chunk), or, when it is large (CUT_MIN
 * bytes or more) and has not all arrived, into a buffer of its own
 * (s->large: what the input held first, then on a plain socket the rest
 * read straight into it), judged and forwarded from there with no second
 * copy: what the upstream socket does not take at once stays in that
 * buffer, which the upstream's output refers to until it is written
 * (transport_relay_buf). It is then decoded by the request path
 * (protocol/request.h) into a command view, analysed, and one of four
 * things happens to it:
 *   forward  - the original bytes move to the upstream output buffer
 *              (evbuffer_remove_buffer: chains move, nothing is copied), or
 *              are sent from the large request's buffer;
 *   replace  - the handshake with `compression` removed goes instead;
 *   answer   - mongoguard replies itself (block, malformed request, legacy
 *              opcode) and the request is dropped (answers.c keeps the
 *              replies in order);
 *   wait     - the index list a rule needs is being fetched: the request
 *              stays where it is, reading stops, and it is judged again
 *              when the cache changes or the wait times out (HOLD_WAITING).
 *
 * Pipelining. A read of several whole small requests (request_framer_run)
 * is judged in one pass where it lies in the input, and the requests
 * forwarded in a row go in one move of their bytes; the first request
 * that is not forwarded ends the run (judge_run).
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
 * request to its latency. A large request held whole is awaited a read
 * chunk at a time (SO_RCVLOWAT); one cut through is read with no such mark:
 * it goes on as it comes, and making the sender fill a chunk before it is
 * read stalls the client, mongoguard and the server in turn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/engine/shape.h"
#include "protocol/commands.h"
#include "analyzers/catalog/index_cache.h"
#include "protocol/handshake.h"
#include "protocol/request.h"
#include "protocol/request_template.h"
#include "proxy/runtime/clock.h"
#include "proxy/session/late.h"
#include "proxy/session/session_int.h"
#include "proxy/sinks/capture.h"
#include "proxy/stats/workload.h"

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
	bool by_template; /* decoded by the connection's request template */
	/* The clock's last reading in this run of requests (judge_run: they
	 * came in one read, so they share it), or 0: none yet. */
	int64_t now;
	/* The request just handled was judged by both templates and went as
	 * a plain read: what judging the next one the same way needs
	 * (judge_again). Kept across a run only. */
	bool again;
	bool noted; /* the last was judged by judge_again (engine_repeat_again) */
	bool more;  /* set by the caller: another request of the run follows */
	mx_command label;
	request_ctx rc;
} handled;

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

/* Capture: the request goes to the writer's queue as it arrived. */
static void capture_request(session *s, const request *r, const char *outcome, uint64_t judged_at,
                            const engine_counts *counts)
{
	capture_origin o = {capture_now_us(), s->id, s->peer, s->app};
	capture_sink_request(s->env.capture, &o, r->msg, r->len, outcome, judged_at, counts);
}

/* ---- the workload (proxy/stats/workload.h) ---- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* The request's entry, found or made from its shape (the engine's, as
 * findings key on it) and the application's name; gen 0 for what the
 * workload leaves out (drivers' housekeeping: hello, ping, auth, ...). */
static wl_ref workload_shape_of(session *s, const request *r, int64_t now, uint64_t *key,
                                bool *values)
{
	cmd_id id = r->cmd;
	*values = false;
	if (id != CMD_NONE && cmd_rows[id].housekeeping)
		return (wl_ref){0, 0};
	char ns[WL_NS_LEN], command[WL_CMD_LEN], shape[SHAPE_BUF_LEN];
	uint64_t hash = 0;
	if (!engine_shape_values(&r->view, ns, sizeof(ns), command, sizeof(command), shape, &hash,
	                         values)) {
		*values = false;
		snprintf(ns, sizeof(ns), "%s.$cmd", r->view.db ? r->view.db : "");
		snprintf(command, sizeof(command), "%s", r->view.name ? r->view.name : "");
		shape[0] = '\0';
		hash = engine_ns_hash(command) ^ engine_ns_hash(ns);
	}
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a of the application's name */
	for (const char *a = s->app; *a; a++)
		h = (h ^ (unsigned char)*a) * 0x100000001b3ULL;
	*key = hash ^ mix64(h);
	wl_ref ref = workload_find(s->env.workload, *key);
	if (ref.gen)
		return ref;
	cmd_kind k =
	    id == CMD_NONE || !strcmp(command, "explain") ? CMD_KIND_OTHER : cmd_rows[id].kind;
	wl_desc d = {.ns = ns,
	             .command = command,
	             .app = s->app,
	             .shape = shape,
	             .shape_hash = hash,
	             .kind = k == CMD_KIND_READ    ? WL_KIND_READ
	                     : k == CMD_KIND_WRITE ? WL_KIND_WRITE
	                                           : WL_KIND_OTHER};
	return workload_enter(s->env.workload, *key, &d, now);
}

/* A forwarded request counted in its workload entry. One judged by a
 * template (hit) has the template's shape: the entry the template's
 * request had (the memo), with no shape computed. The template changes
 * only on a request that missed it, and every such request passes here:
 * one that made a new template (sets moved) leaves its entry in the memo
 * for the hits that follow. Two templates can say so, never mixed (plain):
 * the engine's, whose spans no shape reads; with analysis off, the
 * decoder's, whose spans are every fixed-size value, so its memo is kept
 * only when the shape showed none (engine_shape_values). always_inline: a
 * call of its own cost a pipelined find 26 instructions (instructions.py). */
static inline __attribute__((always_inline)) wl_ref
workload_memo(session *s, const request *r, bool hit, uint64_t sets, bool plain, int64_t now)
{
	workload *w = s->env.workload;
	wl_shape *e = hit && s->wl_memo.key && s->wl_memo.plain == plain
	                  ? workload_at(w, s->wl_memo.ref)
	                  : NULL;
	if (e) {
		workload_count(w, e);
		return s->wl_memo.ref;
	}
	uint64_t key = 0;
	bool values;
	wl_ref ref = workload_shape_of(s, r, now, &key, &values);
	e = workload_at(w, ref);
	if (hit || sets != s->wl_memo.sets || s->wl_memo.plain != plain) {
		/* folded meanwhile, or a new template */
		s->wl_memo.key = e && !(plain && values) ? key : 0;
		s->wl_memo.ref = ref;
		s->wl_memo.sets = sets;
		s->wl_memo.plain = plain;
	}
	if (!e)
		return (wl_ref){0, 0};
	workload_count(w, e);
	return ref;
}

/* The engine's template (hit: engine_repeat_hits moved), or with no
 * engine the decoder's (handled.by_template), as workload_memo says. */
static wl_ref workload_request(session *s, const request *r, bool engine_on, bool hit,
                               bool by_template, int64_t now)
{
	if (engine_on) /* on a hit, not even the template's count asked */
		return workload_memo(
		    s, r, hit, hit ? s->wl_memo.sets : engine_repeat_sets(s->repeat), false, now);
	uint64_t sets = request_template_sets(s->req_template);
	return workload_memo(s, r, by_template && s->wl_memo.sets == sets, sets, true, now);
}

/* What a forwarded command's reply tells the index cache: a DDL command's
 * that the lists it names changed; an insert's or a delete's (write:
 * engine_write_ns's kind, of ns), worked out before the request is judged,
 * or an upsert's (ENGINE_WRITE_UPSERT, engine_upsert_ns, after it is judged) how
 * many documents moved. */
typedef struct {
	bool ddl;
	int write;
	char ns[256];
} req_class;

static void classify(const request *r, engine *e, req_class *c)
{
	c->ddl = e && engine_is_ddl(&r->view, r->cmd);
	c->write = e ? engine_write_ns(e, &r->view, r->cmd, c->ns, sizeof(c->ns)) : 0;
}

/* A schema change (engine_side_gate) waits while the index cache's side
 * connection has a request out in its database, since an upstream may
 * answer the two running side by side differently from the client's alone
 * (index_cache.h); its claim on the database, taken the first time it is
 * judged, keeps new fetches out meanwhile. True: it waits. A wait that ran
 * out (HOLD_EXPIRED) goes on. */
static bool side_gate(session *s, const request *r, engine *e, const req_class *c)
{
	if (r->more_to_come || (!c->ddl && c->write != ENGINE_WRITE_INSERT))
		return false;
	index_cache *ic = engine_side_gate(e, &r->view, r->cmd);
	if (!ic)
		return false;
	bool busy;
	if (!s->gate) {
		s->gate_ic = ic;
		s->gate = index_cache_client_begin(ic, r->view.db, &busy) + 1;
	} else {
		busy = index_cache_side_busy(ic, r->view.db); /* judged again */
	}
	return s->hold != HOLD_EXPIRED && busy;
}

/* The claim of a request that did not go (blocked, or no room to track
 * its reply) ends with it. */
void requests_gate_end(session *s)
{
	if (s->gate)
		index_cache_client_end(s->gate_ic, s->gate - 1);
	s->gate = 0;
}

/* An entry in the in-flight queue, with the request's send and read times,
 * its workload entry and its claim on its database; and the reply
 * deadline, if one is to start. NULL when the queue is full. */
static inline __attribute__((always_inline)) inflight *push_entry(session *s, int32_t request_id,
                                                                  inflight_kind kind,
                                                                  reply_form form, wl_ref wl,
                                                                  int64_t read_ns, int64_t now)
{
	inflight *f = inflight_push(&s->inflight, request_id, kind, form);
	if (f) {
		f->sent_ns = now;
		f->wl = wl;
		f->read_ns = read_ns;
		f->gate_ic = s->gate_ic; /* the claim lasts until its reply */
		f->gate = s->gate;
		s->gate = 0;
		f->no_reply_mark = s->no_reply_sent;
	}
	/* A deadline running under a limit stands, and with no limit (0, the
	 * default) none runs: answers_arm_deadline would change nothing. */
	if (!s->reply_due != !session_snap(s)->cfg.reply_timeout_ms)
		answers_arm_deadline(s, false, &now);
	return f;
}

static inflight_kind entry_kind(const request *r, const req_class *c)
{
	int write = c->write;
	return c->ddl                         ? INFLIGHT_DDL
	       : write == ENGINE_WRITE_INSERT ? INFLIGHT_INSERT
	       : write == ENGINE_WRITE_DELETE ? INFLIGHT_DELETE
	       : write == ENGINE_WRITE_UPSERT ? INFLIGHT_UPSERT
	       : r->awaitable_hello           ? INFLIGHT_AWAIT
	       : r->hello                     ? INFLIGHT_HELLO
	                                      : INFLIGHT_PLAIN;
}

/* A forwarded request's entry in the in-flight queue, with what its reply
 * tells the index cache, and its claim on its database (side_gate); a
 * moreToCome one gets no entry: the upstream owes it no reply. */
static void track_reply(session *s, const request *r, const req_class *c, wl_ref wl,
                        int64_t read_ns, int64_t now)
{
	if (!r->more_to_come) {
		int write = c->write;
		inflight_kind kind = entry_kind(r, c);
		inflight *f = push_entry(s, r->h.request_id, kind, r->form, wl, read_ns, now);
		if (f && kind == INFLIGHT_DDL && (f->kept = malloc(r->plain_len))) {
			memcpy(f->kept, r->plain, r->plain_len);
			f->kept_len = r->plain_len;
		}
		if (f && write && (f->kept = (uint8_t *)strdup(c->ns)))
			f->kept_len = strlen(c->ns) + 1;
	} else {
		if (s->no_reply_owed < UINT32_MAX)
			s->no_reply_owed++;
		s->no_reply_sent++;
	}
}

static int64_t clock_now(void)
{
	return mg_now_ns();
}

/* Counts a request judged as its template was, or times one that was read,
 * from where the engine began reading it (block_info.started_ns) or from
 * now: the clock's last reading after it. */
static int64_t time_analysis(session *s, const block_info *block, int64_t now)
{
	if (block->by_template) {
		mx_add(&s->env.mx->repeats, 1);
		return now;
	}
	int64_t t0 = block->started_ns ? block->started_ns : now;
	now = mg_now_ns();
	mx_observe(&s->env.mx->analysis, (uint64_t)(now - t0));
	return now;
}

/* Who sent the request, for the engine: in out, kept there for the next
 * request of the run (judge_again). */
static request_ctx *context(session *s, handled *out, int64_t now)
{
	request_ctx *rc = &out->rc;
	*rc = (request_ctx){
	    .app_name = s->app,
	    .client = s->peer,
	    .conn = s->id,
	    .now_ms = now / 1000000,
	    .no_wait = s->hold == HOLD_EXPIRED,
	    .repeat = &s->repeat,
	    .track = &s->track,
	};
	if (out->by_template) {
		rc->decoded_gen = request_template_sets(s->req_template);
		rc->decoded_spans = request_template_body_spans(s->req_template);
	}
	if (out->now)
		rc->clock_ns = clock_now; /* the analysis's start, if it is read */
	return rc;
}

/* A decoded command: analyse it, then queue it for its reply. */
static req_outcome handle_command(session *s, const request *r, handled *out)
{
	engine *e = session_snap(s)->engine;
	req_class c;
	classify(r, e, &c);
	if (side_gate(s, r, e, &c))
		return REQ_WAIT;
	if (r->hello)
		note_hello(s, r, out);
	/* Two clock reads around the analysis, the second the request's send
	 * time; none for a request judged as its connection's template was,
	 * which takes less time than a reading of the clock (some 25 ns on a
	 * virtual machine) and is counted, not timed, after another of its
	 * run (they came in one read and go in one send): it shares the run's
	 * last reading. */
	int64_t now = out->now ? out->now : mg_now_ns(), read_ns = now;
	bool hit = false;
	uint64_t judged_at = 0; /* block_info.judged_at, for the capture */
	block_info block;
	block.counts.n = 0; /* with no engine, no count was read */
	if (e) {
		request_ctx *rc = context(s, out, now);
		uint64_t repeats = engine_repeat_hits(s->repeat);
		verdict vd = engine_analyze(e, &r->view, rc, &block);
		judged_at = block.judged_at;
		hit = engine_repeat_hits(s->repeat) != repeats;
		now = time_analysis(s, &block, now);
		if (vd != VERDICT_FORWARD) {
			free(out->replacement);
			out->replacement = NULL;
		}
		if (vd == VERDICT_WAIT_INDEXES) {
			requests_gate_end(s); /* its claim would keep that list out */
			return REQ_WAIT;      /* counted when it is judged for good */
		}
		mx_add(&s->env.mx->commands[mx_command_by_id(r->cmd)], 1);
		if ((r->cmd == CMD_UPDATE || r->cmd == CMD_FIND_AND_MODIFY) && !r->more_to_come &&
		    engine_upsert_ns(e, &r->view, r->cmd, block.upsert, c.ns, sizeof(c.ns)))
			c.write = ENGINE_WRITE_UPSERT;
		if (block.skipped)
			late_count_skipped(s->env.mx, block.skipped, MX_SKIP_WAIT_EXPIRED);
		if ((block.late.n || block.late.lost) && s->env.late)
			late_queue_owe(s->env.late, r->plain, r->plain_len, &block.late, s->app,
			               s->peer, s->id, now / 1000000);
		if (vd == VERDICT_BLOCK) {
			if (s->env.capture)
				capture_request(s, r, "block", judged_at, &block.counts);
			answers_block(s, r, &block);
			requests_gate_end(s);
			return REQ_DROP;
		}
	} else {
		mx_add(&s->env.mx->commands[mx_command_by_id(r->cmd)], 1);
	}
	out->now = now;
	if (s->env.capture)
		capture_request(s, r, "forward", judged_at, &block.counts);
	wl_ref wl = {0, 0};
	if (s->env.workload)
		wl = workload_request(s, r, e != NULL, hit, out->by_template, now);
	track_reply(s, r, &c, wl, read_ns, now);
	requests_gate_end(s); /* moved to the entry, unless it could not be */
	/* judged by both templates, and gone as a plain read: the next
	 * request may be judged the same way without being decoded */
	if (out->more) {
		out->again = e && out->by_template && block.by_template && !out->replacement &&
		             !r->more_to_come && entry_kind(r, &c) == INFLIGHT_PLAIN &&
		             cmd_rows[r->cmd].kind == CMD_KIND_READ && !s->env.capture &&
		             (!s->env.workload || wl.gen);
		out->label = mx_command_by_id(r->cmd);
	}
	return out->replacement ? REQ_REPLACE : REQ_FORWARD;
}

/* The next request of a run after one judged by both templates that went
 * as a plain read (handled.again). When it matches the decoder's template
 * and, in the words that may differ, the engine's (engine_repeat_again),
 * handle_command would judge it as that one, count the same and queue the
 * same entry: done so here, with no request decoded, no context made and
 * nothing read of it; true. False, with nothing changed: handle_request
 * judges it. Whatever handle_command comes to read or count for such a
 * request must be read or counted here too (test_admin.py compares the
 * counters of the same requests sent both ways). */
static bool judge_again(session *s, const uint8_t *msg, size_t len, handled *h)
{
	enum { BODY_AT = REQUEST_TEMPLATE_BODY_AT };
	engine *e = session_snap(s)->engine;
	workload *w = s->env.workload;
	wl_shape *we = NULL;
	if (!e || s->env.capture || !request_template_matches(s->req_template, msg, len) ||
	    (w &&
	     !(s->wl_memo.key && !s->wl_memo.plain && (we = workload_at(w, s->wl_memo.ref)))) ||
	    !engine_repeat_again(e, &h->rc, msg + BODY_AT, (uint32_t)(len - BODY_AT), h->noted))
		return false;
	h->noted = true;
	request_template_hit(s->req_template);
	mx_add(&s->env.mx->repeats, 1); /* time_analysis */
	mx_add(&s->env.mx->commands[h->label], 1);
	wl_ref wl = {0, 0};
	if (we) { /* workload_memo's hit */
		workload_count(w, we);
		wl = s->wl_memo.ref;
	}
	push_entry(s, wire_read_i32(msg + 4), INFLIGHT_PLAIN, REPLY_FORM_OPMSG, wl, h->now, h->now);
	if (s->gate)
		requests_gate_end(s);
	h->outcome = REQ_FORWARD;
	return true;
}

static void handle_request(session *s, const uint8_t *msg, size_t len, handled *out)
{
	request r;
	wire_error err;
	session_no_error(&err);
	out->replacement = NULL;
	out->again = out->noted = false;
	request_status st = REQUEST_COMMAND;
	out->by_template = request_decode_repeat(&r, msg, len, s->req_template);
	if (!out->by_template && (st = request_decode(&r, msg, len, &err)) == REQUEST_COMMAND)
		request_template_keep(&s->req_template, &r);
	switch (st) {
	case REQUEST_COMMAND:
		out->outcome = handle_command(s, &r, out);
		break;
	case REQUEST_REJECT:
		out->outcome = answers_reject(s, &r, &err) ? REQ_CLOSE : REQ_DROP;
		break;
	case REQUEST_CLOSE:
		mx_add(&s->env.mx->bad_requests, 1);
		session_finish(s, LOG_WARNING, "%s", err.msg);
		out->outcome = REQ_CLOSE;
		break;
	}
	request_release(&r);
}

/* The requests staged by this turn go upstream, in one write when nothing
 * is queued ahead of them. Called before anything else is added to the
 * upstream's output, so the order is kept. */
static void flush_stage(session *s)
{
	size_t n = evbuffer_get_length(s->env.stage);
	if (n == 0)
		return;
	if (s->up.bev)
		transport_relay(s->env.stage, &s->up, s->state == SESSION_ACTIVE, n, NULL);
	else
		evbuffer_drain(s->env.stage, n); /* the session ended meanwhile */
}

static void count_relayed(session *s, mx_direction d, size_t nmsgs, size_t len)
{
	mx_add(&s->env.mx->messages[d], nmsgs);
	mx_add(&s->env.mx->bytes[d], len);
	s->nbytes[d] += len;
}

/* ---- large requests: read into their own buffer, relayed or held ---- */

/* Bytes at..at+n of a large request (whole bytes long) from its own
 * buffer to the upstream, after what this turn staged. False when the
 * session ended (out of memory). */
static bool large_send(session *s, size_t at, size_t n, size_t whole)
{
	flush_stage(s);
	if (transport_relay_buf(&s->up, s->state == SESSION_ACTIVE, s->large, at, n))
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

/* May this large request, not all here yet, go upstream while it arrives?
 * Only an uncompressed OP_MSG, with nothing else in flight (so our answer,
 * if one is needed after all, comes next), to an upstream being reached,
 * and only when the configuration cannot block it: a block must be
 * decided before the server has anything. */
static bool cut_allowed(session *s, struct evbuffer *in, size_t avail, const frame_header *h)
{
	if (h->opcode != OP_MSG || (s->state != SESSION_CONNECTING && s->state != SESSION_ACTIVE) ||
	    s->hold != HOLD_NONE || !s->up.bev || inflight_count(&s->inflight) != 0)
		return false;
	const engine *e = session_snap(s)->engine;
	char head[WIRE_HEADER_LEN + 64];
	return !e || !engine_may_block(e, peek_command(in, avail, head, sizeof(head)));
}

/* A large request has begun: a buffer of its own, which reads on a plain
 * socket go straight into. False without memory for it: it gathers in
 * the input buffer then, and is made contiguous there. */
static bool large_begin(session *s, struct evbuffer *in, size_t avail, const reqf_step *st)
{
	if (!(s->large = transport_buf_new(st->n)))
		return false;
	request_framer_large(&s->reqf, st->n, cut_allowed(s, in, avail, &st->head));
	transport_direct(&s->cl, s->large->data, st->n);
	transport_set_read_need(&s->cl, READ_CHUNK);
	return true;
}

/* n more bytes of the large request are in its buffer. One held whole is
 * awaited a read chunk at a time (SO_RCVLOWAT); one relayed goes on as it
 * comes. The frame timer, armed when it started, ends once it is whole. */
static void large_took(session *s, size_t n)
{
	const request_framer *f = &s->reqf;
	request_framer_took(&s->reqf, n);
	transport_direct(&s->cl, s->large->data + f->got, request_framer_room(f));
	transport_await(&s->cl, f->mode == REQF_RELAYED ? 0 : request_framer_room(f));
	if (request_framer_room(f) == 0)
		session_clear_timer(s);
}

/* Done with the large request. Its buffer goes once the upstream's output
 * no longer refers to any of it; until then the session holds it. */
static void large_end(session *s)
{
	if (s->large && transport_buf_queued(s->large) && !s->large_sent)
		s->large_sent = s->large;
	else
		transport_buf_release(s->large);
	s->large = NULL;
	request_framer_done(&s->reqf);
	transport_direct(&s->cl, NULL, 0);
}

void requests_release(session *s)
{
	transport_buf_release(s->large);
	s->large = NULL;
	transport_buf_release(s->large_sent);
	s->large_sent = NULL;
}

void requests_large_written(session *s)
{
	if (s->large_sent && !transport_buf_queued(s->large_sent)) {
		transport_buf_release(s->large_sent);
		s->large_sent = NULL;
	}
}

/* A new large request waits while the last one's bytes are queued: one
 * large buffer a connection. The upstream's write callback wakes it. */
static bool large_waits(session *s)
{
	requests_large_written(s);
	return s->large_sent != NULL;
}

/* ---- judging, and what is done with the bytes ---- */

/* A request that went (or was answered): counted, and a held one lets go. */
static void request_done(session *s)
{
	s->nrequests++;
	if (s->hold != HOLD_NONE)
		requests_hold(s, HOLD_NONE);
}

/* The request waits for the index list: held, unless the session ended. */
static void request_wait(session *s)
{
	if (session_relaying(s) && s->hold == HOLD_NONE)
		requests_hold(s, HOLD_WAITING);
}

/* Judges a whole large request cut through: all but its last CUT_HELD
 * bytes are upstream. Only "forward" can still be honoured as asked:
 * anything else (a block after a reload made one possible, a malformed
 * request, a handshake to rewrite) ends the upstream connection before the
 * server has the whole message, so it never runs, and the client gets our
 * answer, then the close. */
static bool cut_finish(session *s, const reqf_step *st, handled *h)
{
	size_t len = s->reqf.len;
	switch (h->outcome) {
	case REQ_WAIT:
		request_wait(s);
		return false; /* the tail stays in its buffer; judged again later */
	case REQ_CLOSE:
		large_end(s);
		return false; /* session_finish already ran */
	case REQ_FORWARD:
		if (!large_send(s, st->at, st->n, len)) {
			large_end(s);
			return false;
		}
		count_relayed(s, MX_DIR_REQUEST, 1, len);
		break;
	case REQ_REPLACE:
	case REQ_DROP:
		free(h->replacement);
		session_finish(
		    s, LOG_WARNING,
		    "a %zu-byte request relayed while it arrived could not be sent as it "
		    "was (%s); the upstream connection ended before the server had all of "
		    "it",
		    len,
		    h->outcome == REQ_REPLACE ? "a handshake to rewrite"
		                              : "answered by mongoguard");
		large_end(s);
		return false;
	}
	large_end(s);
	request_done(s);
	return true;
}

/* Does to a request's bytes what handling decided. They are at the front
 * of `in` (`all`: they are all it holds), or, with `in` NULL, at msg, a
 * large request's own buffer. False when the loop must stop (waiting, or
 * the session ended). */
static bool act_on_outcome(session *s, struct evbuffer *in, const uint8_t *msg, size_t len,
                           bool all, handled *h)
{
	switch (h->outcome) {
	case REQ_WAIT:
		request_wait(s);
		return false;
	case REQ_CLOSE:
		return false; /* session_finish already ran */
	case REQ_FORWARD:
		if (in)
			transport_stage_or_relay(in, len, all, s->env.stage, &s->up,
			                         s->state == SESSION_ACTIVE, msg);
		else if (!large_send(s, 0, len, len))
			return false;
		count_relayed(s, MX_DIR_REQUEST, 1, len);
		break;
	case REQ_REPLACE:
		if (in)
			evbuffer_drain(in, len);
		evbuffer_add(s->env.stage, h->replacement, h->replacement_len);
		count_relayed(s, MX_DIR_REQUEST, 1, h->replacement_len);
		free(h->replacement);
		break;
	case REQ_DROP:
		if (in)
			evbuffer_drain(in, len);
		break;
	}
	request_done(s);
	return true;
}

/* Judges one whole request and does what handling decided: from the front
 * of `in`, or (in NULL) a large request from its buffer, cut through or
 * held. False when the loop must stop. */
static bool judge_whole_request(session *s, struct evbuffer *in, const uint8_t *msg, size_t len,
                                bool all, const reqf_step *st)
{
	handled h; /* field by field: its request_ctx is written before it is read */
	h.now = 0;
	h.more = false;
	handle_request(s, msg, len, &h);
	if (s->state == SESSION_UNREACHABLE &&
	    (h.outcome == REQ_FORWARD || h.outcome == REQ_REPLACE)) {
		/* no upstream to forward to: answered (it is queued) */
		if (h.outcome == REQ_REPLACE)
			free(h.replacement);
		if (in)
			evbuffer_drain(in, len);
		else
			large_end(s);
		const char *why = s->unreachable_why ? s->unreachable_why : "upstream unreachable";
		answers_fail_all(s, why);
		session_finish(s, LOG_WARNING, "%s", why);
		return false;
	}
	if (!in && s->reqf.mode == REQF_RELAYED)
		return cut_finish(s, st, &h);
	bool go = act_on_outcome(s, in, msg, len, all, &h);
	if (!in && h.outcome != REQ_WAIT)
		large_end(s); /* else it stays, judged again later */
	return go;
}

/* ---- runs: a read of pipelined requests, judged together ---- */

/* The requests of a run (request_framer_run: count whole small ones, at p,
 * the front of `in`, avail bytes in all) judged one after another where
 * they lie, in one pass: no header copied out, no bytes made contiguous,
 * no loop turn each. Those forwarded in a row go in one move of their
 * bytes. The first that is not forwarded (answered, rewritten, waiting,
 * or ending the session) ends the run: the bytes before it move first, so
 * the order holds, then it is dealt with alone, as act_on_outcome() does, and
 * whatever follows it waits for the loop's next turn (a held request
 * stops reading until it is judged). False when the loop must stop. */
static bool judge_run(session *s, struct evbuffer *in, const uint8_t *p, size_t count, size_t avail)
{
	size_t off = 0, fwd = 0, len = 0;
	handled h; /* as judge_whole_request's */
	h.outcome = REQ_FORWARD;
	h.now = 0;
	h.again = h.noted = false;
	while (fwd < count) {
		len = (size_t)wire_read_i32(p + off); /* the framer checked it */
		h.more = fwd + 1 < count;
		if (!(h.again && judge_again(s, p + off, len, &h)))
			handle_request(s, p + off, len, &h);
		if (h.outcome != REQ_FORWARD)
			break;
		off += len;
		fwd++;
		if (!session_relaying(s))
			count = fwd; /* ended meanwhile: what was judged is dealt with */
	}
	if (off > 0) {
		if (s->up.bev)
			transport_stage_or_relay(in, off, off == avail, s->env.stage, &s->up,
			                         s->state == SESSION_ACTIVE, p);
		else
			evbuffer_drain(in, off);
		count_relayed(s, MX_DIR_REQUEST, fwd, off);
		s->nrequests += fwd; /* request_done: a run holds no held request */
	}
	if (fwd == count)
		return session_relaying(s);
	return act_on_outcome(s, in, NULL, len, off + len == avail, &h);
}

/* What a run may be looked for in: the input's first chain, when the
 * session is at a boundary with no request held and an upstream to
 * forward to (being reached or reached: an unreachable one answers each
 * request alone). NULL otherwise. */
static const uint8_t *run_bytes(session *s, struct evbuffer *in, size_t avail, size_t *have)
{
	struct evbuffer_iovec v;
	if (avail < WIRE_HEADER_LEN || requests_in_large(s) || s->hold != HOLD_NONE ||
	    (s->state != SESSION_CONNECTING && s->state != SESSION_ACTIVE) ||
	    evbuffer_peek(in, -1, NULL, &v, 1) < 1)
		return NULL;
	*have = v.iov_len;
	return v.iov_base;
}

/* ---- the loop ---- */

/* A request has started arriving: it must be complete within
 * net.maxFrameWaitMS, counted from its first bytes. */
static void arm_frame_timer(session *s)
{
	if (!s->timer_on)
		session_set_timer(s, session_snap(s)->cfg.max_frame_wait_ms);
}

static size_t upstream_out_len(session *s)
{
	return s->up.bev ? evbuffer_get_length(bufferevent_get_output(s->up.bev)) : 0;
}

/* One verb of the request framer carried out. False when the loop must
 * stop: the framer waits for bytes, or the session waits or ended. */
static bool carry_out_verb(session *s, struct evbuffer *in, size_t avail, const reqf_step *st)
{
	switch (st->verb) {
	case REQF_NEED:
		if (st->started)
			arm_frame_timer(s);
		if (!requests_in_large(s))
			transport_set_read_need(&s->cl, st->n);
		return false;
	case REQF_REFUSE:
		return false; /* answers_refuse_frame ran in next_verb */
	case REQF_LARGE:
		arm_frame_timer(s);
		if (large_begin(s, in, avail, st))
			return true; /* take what is here */
		/* no memory for a buffer of its own: gathered in the input */
		transport_set_read_need(&s->cl, st->n);
		return false;
	case REQF_TAKE:
		if (evbuffer_remove(in, s->large->data + st->at, st->n) == (int)st->n)
			large_took(s, st->n);
		return true;
	case REQF_SEND:
		if (!large_send(s, st->at, st->n, s->reqf.len))
			return false;
		request_framer_sent(&s->reqf, st->n);
		return true;
	case REQF_JUDGE:
		return judge_whole_request(s, NULL, s->large->data, s->reqf.len, true, st);
	case REQF_WHOLE:
		break;
	}
	session_clear_timer(s);
	transport_await(&s->cl, 0);
	transport_set_read_need(&s->cl, READ_CHUNK);
	const uint8_t *msg = evbuffer_pullup(in, (ev_ssize_t)st->n);
	if (!msg) {
		session_finish(s, LOG_ERROR, "out of memory reading a %zu-byte request", st->n);
		return false;
	}
	return judge_whole_request(s, in, msg, st->n, st->n == avail, st);
}

typedef enum {
	RUN_NONE, /* no run here: the framer's next verb says what is */
	RUN_DONE, /* a run judged: look again */
	RUN_STOP, /* the loop must stop (backpressure, a wait, the end) */
} run_result;

/* A run of whole small requests (a pipelining client's read) at the front
 * of the input, judged together. Its length is bounded by the room in
 * flight, so only the output's backpressure is left to ask about. */
static run_result take_run(session *s, struct evbuffer *in, size_t avail)
{
	size_t have = 0, bytes = 0, count = 0;
	const uint8_t *p = run_bytes(s, in, avail, &have);
	if (p)
		count = request_framer_run(&s->reqf, p, have,
		                           INFLIGHT_MAX - inflight_count(&s->inflight), &bytes);
	if (count == 0)
		return RUN_NONE;
	if (upstream_out_len(s) >= OUT_HIGH) {
		session_pause_client(s);
		return RUN_STOP;
	}
	session_clear_timer(s);
	transport_await(&s->cl, 0);
	transport_set_read_need(&s->cl, READ_CHUNK);
	return judge_run(s, in, p, count, avail) ? RUN_DONE : RUN_STOP;
}

/* The request framer's next verb, asked and carried out. False when the
 * loop must stop. */
static bool next_verb(session *s, struct evbuffer *in, size_t avail)
{
	uint8_t hdr[WIRE_HEADER_LEN] = {0};
	reqf_step st;
	wire_error err = {0};
	if (avail >= WIRE_HEADER_LEN && !requests_in_large(s))
		evbuffer_copyout(in, hdr, sizeof(hdr));
	request_framer_next(&s->reqf, hdr, avail, &st, &err);
	/* Stop while the upstream has not taken what we sent, or the
	 * pipeline is full, or the last large request's buffer is still
	 * queued: the client waits, our memory does not grow. A large
	 * request judged once whole is not stopped: its bytes are here, and
	 * its room in the pipeline was there when it began. */
	if (st.verb != REQF_JUDGE &&
	    (upstream_out_len(s) >= OUT_HIGH || inflight_full(&s->inflight) ||
	     (st.verb == REQF_LARGE && large_waits(s)))) {
		session_pause_client(s);
		return false;
	}
	if (st.verb == REQF_REFUSE) {
		answers_refuse_frame(s, &st.head, &err);
		return false;
	}
	return carry_out_verb(s, in, avail, &st);
}

/* Called when the client side may have work: new bytes, room upstream, the
 * index cache answering, or a wait timing out. The requests forwarded are
 * staged and written together when it returns (flush_stage); those that
 * are all their read held go at once (transport_stage_or_relay). */
static void process_requests(session *s)
{
	struct evbuffer *in = bufferevent_get_input(s->cl.bev);
	size_t direct = transport_claim(&s->cl);
	if (direct)
		large_took(s, direct); /* read straight into the large request's buffer */
	while (session_relaying(s)) {
		size_t avail = evbuffer_get_length(in);
		if (avail == 0 && !requests_in_large(s))
			break;
		run_result r = take_run(s, in, avail);
		if (r == RUN_STOP || (r == RUN_NONE && !next_verb(s, in, avail)))
			break;
	}
}

void requests_process(session *s)
{
	process_requests(s);
	flush_stage(s);
	transport_restart_reads(&s->cl);
}

void requests_hold(session *s, session_hold to)
{
	session_hold from = s->hold;
	s->hold = to;
	if (to == HOLD_WAITING && from == HOLD_NONE) {
		bufferevent_disable(s->cl.bev, EV_READ);
		session_set_timer(s, session_snap(s)->cfg.engine.index_wait_ms);
		log_reason(LOG_DEBUG, "ANALYZER", LOGID_INDEX_WAIT, s->ctx,
		           s->gate ? "Holding a schema change until the side connection is done"
		                   : "Holding a request until the index list arrives");
	} else if (to == HOLD_NONE) {
		session_clear_timer(s);
		if (!s->cl.paused)
			transport_enable_reads(&s->cl);
	}
}
