/* libFuzzer target: late verdicts (proxy/session/late.c and the engine's
 * engine_late): requests forwarded before the index lists some rule reads
 * were known, judged again when the lists come.
 *
 * The harness plays what proxy/session/requests.c and the worker do, with
 * no event base: each request is judged on time by engine L, whose index
 * cache (never connected) answers only when the input says; a request
 * that must wait (VERDICT_WAIT_INDEXES: a rule at dry-run or block) is
 * held, judged again when lists come, or with no_wait once its hold runs
 * out; what is owed goes to a late_queue (one worker's), which is judged
 * whenever lists come or the input says so. A second engine R then judges
 * every request once, on time, with every list L's cache ever got: the
 * verdicts late ones must add up to.
 *
 * The input:
 *   byte 0   actions: bits 0-1 case-insensitive-regex, 2-3
 *            index-mismatched-sort, 4-5 collection-scan (off, log, dry-run,
 *            block); unbounded-push and large-document at log when bit 6;
 *            hot-path-lookup off (it counts executions, which a held
 *            request's second analysis repeats: not this target's question)
 *   byte 1   bit 0: at the end the queue is judged with no engine (analysis
 *            turned off), which empties it
 *   then operations, one byte each (and what follows for a request):
 *     0 mod 4  a request: a flags byte (bit 0: padded past LATE_COPY_MAX;
 *              bits 1-3: sent 1, 1, 2, 4, 16, 64, 200 or 300 times), a u16
 *              length and a command body (fz_body_view, fuzz_common.h)
 *     1 mod 4  lists come: every fetch L's cache waits for is answered
 *              (bit 2: only the first), the queue is judged, held requests
 *              are judged again
 *     2 mod 4  the queue is judged (another namespace's list came)
 *     3 mod 4  time passes: (op >> 2) seconds; holds that ran out end
 *   Every operation also takes 1 ms. A namespace's answer is fixed: the
 *   index lists of fuzz_common.h for test.c, shop.orders and db.coll (and
 *   a view), and for any other by its hash: a missing collection, or
 *   (one in four) a failed listIndexes.
 *
 * Checked:
 *   - a finding is late exactly when the queue's judging reported it, and
 *     a late one never blocks;
 *   - no finding twice: for each request (every request has an app name
 *     of its own, so the engine's dedupe and summaries count per request)
 *     and each rule, namespace and shape, L reports at most as often as R;
 *   - what L did not report is counted: for each rule, the skipped
 *     verdicts counted (every reason) cover the requests R found it for
 *     and L did not, and those R could not judge either;
 *   - without pressure (nothing counted for want of room, no hold running
 *     out before its list, under LATE_WAIT_MS in all) L reports exactly
 *     what R does, and the verdicts never given are those R owes too;
 *   - the queue's bounds: never over LATE_QUEUE_MAX; a request owed is
 *     kept exactly when there is room and it is at most LATE_COPY_MAX,
 *     else counted; nothing is kept past LATE_WAIT_MS once judged. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "protocol/request.h"
#include "proxy/session/late.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
	HOLD_MS = 100,        /* analysis.indexWaitMS, as a deployment might set it */
	MAX_REQUESTS = 600,   /* per input */
	MAX_REPORTS = 32,     /* analyzers/engine/engine_int.h MAX_REPORTS_PER_REQUEST */
	PAD_LEN = 66 * 1024,  /* past LATE_COPY_MAX */
	MAX_ANSWERED = 256,   /* namespaces answered per input */
	MAX_SEEN = 64 * 1024, /* findings recorded per engine */
};

/* ---- what the engines report ---- */

typedef struct seen {
	unsigned req;
	rule_id rule;
	uint64_t ns, shape; /* engine_ns_hash of f->ns; the shape hash */
	uint64_t n;         /* 1, or a summary's repeats */
} seen;

typedef struct side {
	seen *v;
	size_t n;
	bool judging; /* inside late_queue_judge: findings are late */
	bool flushing;
} side;

static side sl, sr;

static void on_finding(void *arg, const finding *f)
{
	side *s = arg;
	unsigned req;
	if (sscanf(f->app_name, "r%u", &req) != 1)
		abort(); /* every request has an app name of its own */
	if (!s->flushing) {
		if (f->late != s->judging) {
			fprintf(stderr, "a finding %s late outside of the queue's judging\n",
			        f->late ? "marked" : "not marked");
			abort();
		}
		if (f->late && f->action == RULE_BLOCK)
			abort(); /* the request went on: a late verdict blocks nothing */
	}
	if (s->n == MAX_SEEN)
		return;
	s->v[s->n++] =
	    (seen){req, f->rule, engine_ns_hash(f->ns), f->shape_hash, f->repeats ? f->repeats : 1};
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_seen(const void *a, const void *b)
{
	const seen *x = a, *y = b;
	int c = cmp_u64(x->req, y->req);
	if (!c)
		c = cmp_u64(x->rule, y->rule);
	if (!c)
		c = cmp_u64(x->ns, y->ns);
	return c ? c : cmp_u64(x->shape, y->shape);
}

/* Same keys summed: one entry per (request, rule, namespace, shape). */
static void settle(side *s)
{
	qsort(s->v, s->n, sizeof *s->v, cmp_seen);
	size_t k = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (k && !cmp_seen(&s->v[k - 1], &s->v[i]))
			s->v[k - 1].n += s->v[i].n;
		else
			s->v[k++] = s->v[i];
	}
	s->n = k;
}

/* ---- the index lists, as the metadata thread would answer ---- */

static index_set *list_idx, *list_id, *list_view, *list_missing;

static index_set *made(const char *json)
{
	char err[256];
	index_set *s = index_set_from_json(json, err, sizeof err);
	if (!s)
		abort();
	index_set_set_doc_count(s, 50000);
	return s;
}

static void lists_setup(void)
{
	if (list_idx)
		return;
	/* fz_fill's lists (fuzz_common.h), made once and shared */
	list_idx = made(
	    "[{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"},"
	    " {\"v\": 2, \"key\": {\"a\": 1, \"b\": -1}, \"name\": \"a_1_b_-1\"},"
	    " {\"v\": 2, \"key\": {\"status\": 1, \"created\": -1}, \"name\": \"s_c\"},"
	    " {\"v\": 2, \"key\": {\"name\": 1}, \"name\": \"name_ci\","
	    "  \"collation\": {\"locale\": \"en\", \"strength\": 2}},"
	    " {\"v\": 2, \"key\": {\"x.y\": 1, \"z\": 1}, \"name\": \"xy_z\", \"sparse\": true},"
	    " {\"v\": 2, \"key\": {\"t\": \"text\"}, \"name\": \"t_text\"},"
	    " {\"v\": 2, \"key\": {\"h\": \"hashed\"}, \"name\": \"h_hashed\"},"
	    " {\"v\": 2, \"key\": {\"$**\": 1}, \"name\": \"wild\", \"hidden\": false},"
	    " {\"v\": 2, \"key\": {\"p\": 1}, \"name\": \"p_partial\","
	    "  \"partialFilterExpression\": {\"p\": {\"$gt\": 5}}}]");
	list_id = made("[{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"}]");
	list_view = index_set_new_opaque("a view");
	list_missing = index_set_new_opaque("no such collection");
}

/* The answer for ns: a set the caller gets a reference to, or NULL for a
 * failed listIndexes. */
static index_set *answer(const char *ns)
{
	index_set *s = !strcmp(ns, "test.c") || !strcmp(ns, "shop.orders") ? list_idx
	               : !strcmp(ns, "db.coll")                            ? list_id
	               : !strcmp(ns, "test.view")                          ? list_view
	               : engine_ns_hash(ns) % 4 == 3                       ? NULL
	                                                                   : list_missing;
	return s ? index_set_retain(s) : NULL;
}

static int64_t frozen_clock(void *arg)
{
	return 0; /* a failed fetch stays failed: both caches agree */
}

/* ---- one input's run ---- */

typedef struct req {
	uint8_t *msg;
	size_t len;
	int64_t t; /* sent at */
	bool held;
	int64_t held_since;
	uint32_t r_owed, r_skipped; /* R's verdicts not given: owed, no_wait */
	uint64_t r_total;           /* R's findings on it */
} req;

typedef struct run {
	engine *l, *r;
	index_cache *lc, *rc;
	late_queue *q;
	metrics_shard *mx;
	req *reqs;
	unsigned nreqs;
	int64_t now, start;
	char answered[MAX_ANSWERED][512];
	unsigned nanswered;
	int64_t *owed_at; /* times of the owes the queue accepted */
	unsigned nowed;
} run;

static uint64_t skipped(const metrics_shard *mx, int r, mx_skip_reason why)
{
	return mx->skipped[r][why];
}

static uint64_t skipped_all(const metrics_shard *mx, mx_skip_reason why)
{
	uint64_t n = 0;
	for (int r = 0; r < RULE_COUNT; r++)
		n += skipped(mx, r, why);
	return n;
}

static unsigned bits(uint32_t v)
{
	return (unsigned)__builtin_popcount(v);
}

static uint32_t owed_rules(const engine_late *l)
{
	uint32_t rules = 0;
	for (unsigned i = 0; i < l->n; i++)
		rules |= l->at[i].rules;
	return rules;
}

/* What requests.c does after an analysis that did not wait. */
static void after_verdict(run *u, unsigned i, const block_info *b)
{
	req *rq = &u->reqs[i];
	if (b->skipped)
		late_count_skipped(u->mx, b->skipped, MX_SKIP_WAIT_EXPIRED);
	if (!b->late.n && !b->late.lost)
		return;
	unsigned before = late_queue_size(u->q);
	uint64_t no_room = skipped_all(u->mx, MX_SKIP_NO_ROOM);
	char app[16];
	snprintf(app, sizeof app, "r%u", i);
	late_queue_owe(u->q, rq->msg, rq->len, &b->late, app, "127.0.0.1:1", 1, u->now);
	unsigned after = late_queue_size(u->q);
	bool room = before < LATE_QUEUE_MAX && rq->len <= LATE_COPY_MAX;
	uint64_t counted = skipped_all(u->mx, MX_SKIP_NO_ROOM) - no_room;
	uint64_t want = bits(b->late.lost) + (b->late.n && !room ? bits(owed_rules(&b->late)) : 0);
	if (after > LATE_QUEUE_MAX || after != before + (b->late.n && room) || counted != want) {
		fprintf(stderr,
		        "late_queue_owe: %u -> %u entries (room: %d), %llu counted, %llu due\n",
		        before, after, room, (unsigned long long)counted, (unsigned long long)want);
		abort();
	}
	if (b->late.n && room)
		u->owed_at[u->nowed++] = u->now;
}

/* One on-time analysis by L, as requests.c's handle_command. */
static void judge_on_time(run *u, unsigned i, bool no_wait)
{
	req *rq = &u->reqs[i];
	request r;
	wire_error err = {0};
	if (request_decode(&r, rq->msg, rq->len, &err) != REQUEST_COMMAND) {
		request_release(&r);
		rq->held = false;
		return;
	}
	char app[16];
	snprintf(app, sizeof app, "r%u", i);
	request_ctx rc = {
	    .app_name = app, .client = "127.0.0.1:1", .now_ms = u->now, .no_wait = no_wait};
	block_info b;
	verdict vd = engine_analyze(u->l, &r.view, &rc, &b);
	request_release(&r);
	if (vd == VERDICT_WAIT_INDEXES) {
		if (no_wait)
			abort(); /* no_wait never waits */
		if (!rq->held) {
			rq->held = true;
			rq->held_since = u->now;
		}
		return;
	}
	rq->held = false;
	after_verdict(u, i, &b);
}

static void judge_queue(run *u)
{
	unsigned before = late_queue_size(u->q);
	sl.judging = true;
	late_queue_judge(u->q, u->l, u->now);
	sl.judging = false;
	unsigned after = late_queue_size(u->q), live = 0;
	for (unsigned k = 0; k < u->nowed; k++)
		live += u->owed_at[k] + LATE_WAIT_MS > u->now;
	if (after > before || after > live) {
		fprintf(stderr,
		        "late_queue_judge at %lld: %u -> %u entries, %u owed within %d ms\n",
		        (long long)u->now, before, after, live, LATE_WAIT_MS);
		abort();
	}
}

/* Held requests: judged again (lists came), or for good (hold ran out). */
static void held_again(run *u, bool only_expired)
{
	for (unsigned i = 0; i < u->nreqs; i++) {
		req *rq = &u->reqs[i];
		if (!rq->held)
			continue;
		bool expired = u->now - rq->held_since >= HOLD_MS;
		if (only_expired && !expired)
			continue;
		judge_on_time(u, i, expired);
	}
}

static void split(const char *ns, char *db, size_t cap, const char **coll)
{
	const char *dot = strchr(ns, '.');
	size_t n = dot ? (size_t)(dot - ns) : strlen(ns);
	if (n >= cap)
		n = cap - 1;
	memcpy(db, ns, n);
	db[n] = '\0';
	*coll = dot ? dot + 1 : "";
}

/* L's metadata thread: the waiting fetches answered. */
static void lists_come(run *u, bool only_one)
{
	char ns[512];
	uint64_t gen;
	while (index_cache_fetch_begin(u->lc, ns, sizeof ns, &gen)) {
		bool known = false;
		for (unsigned k = 0; k < u->nanswered && !known; k++)
			known = !strcmp(u->answered[k], ns);
		if (!known && u->nanswered < MAX_ANSWERED)
			snprintf(u->answered[u->nanswered++], sizeof u->answered[0], "%s", ns);
		else if (!known)
			abort(); /* more namespaces than a run keeps: raise MAX_ANSWERED */
		(void)index_cache_fetch_end(u->lc, ns, gen, answer(ns));
		if (only_one)
			break;
	}
	judge_queue(u);
	held_again(u, false);
}

/* A request body from the input, wrapped as the proxy would see it. */
static bool add_request(run *u, const uint8_t *body, size_t len, bool pad, unsigned times)
{
	opmsg m;
	cmdview v;
	uint8_t *msg = NULL;
	size_t mlen = 0;
	if (pad && len >= 5 && wire_read_u32(body) <= len && wire_read_u32(body) >= 5) {
		bson_t in, *b;
		if (!bson_init_static(&in, body, wire_read_u32(body)) || !(b = bson_copy(&in)))
			return false;
		char *filler = malloc(PAD_LEN + 1);
		if (!filler)
			abort();
		memset(filler, 'x', PAD_LEN);
		filler[PAD_LEN] = '\0';
		BSON_APPEND_UTF8(b, "comment", filler);
		free(filler);
		uint8_t *m2 = fz_body_view(bson_get_data(b), b->len, &m, &v);
		if (m2)
			mlen = (size_t)wire_read_u32(m2);
		msg = m2;
		bson_destroy(b);
	} else {
		msg = fz_body_view(body, len, &m, &v);
		if (msg)
			mlen = (size_t)wire_read_u32(msg);
	}
	if (!msg)
		return false;
	for (unsigned k = 0; k < times && u->nreqs < MAX_REQUESTS; k++) {
		req *rq = &u->reqs[u->nreqs];
		memset(rq, 0, sizeof *rq);
		if (!(rq->msg = malloc(mlen)))
			abort();
		memcpy(rq->msg, msg, mlen);
		rq->len = mlen;
		rq->t = u->now;
		judge_on_time(u, u->nreqs++, false);
	}
	free(msg);
	return true;
}

/* R: every request once, on time, with every list L's cache got. */
static void reference(run *u)
{
	char ns[512], db[512];
	uint64_t gen;
	for (unsigned k = 0; k < u->nanswered; k++) {
		const char *coll;
		index_set *ignored = NULL;
		split(u->answered[k], db, sizeof db, &coll);
		(void)index_cache_get(u->rc, db, coll, &ignored);
		index_set_release(ignored);
	}
	while (index_cache_fetch_begin(u->rc, ns, sizeof ns, &gen))
		(void)index_cache_fetch_end(u->rc, ns, gen, answer(ns));
	for (unsigned i = 0; i < u->nreqs; i++) {
		req *rq = &u->reqs[i];
		request r;
		wire_error err = {0};
		if (request_decode(&r, rq->msg, rq->len, &err) == REQUEST_COMMAND) {
			char app[16];
			snprintf(app, sizeof app, "r%u", i);
			request_ctx rc = {
			    .app_name = app, .client = "127.0.0.1:1", .now_ms = rq->t};
			block_info b;
			if (engine_analyze(u->r, &r.view, &rc, &b) == VERDICT_WAIT_INDEXES) {
				rc.no_wait = true; /* its list never came */
				if (engine_analyze(u->r, &r.view, &rc, &b) == VERDICT_WAIT_INDEXES)
					abort();
			}
			rq->r_owed = owed_rules(&b.late) | b.late.lost;
			rq->r_skipped = b.skipped;
		}
		request_release(&r);
		/* R's cache never gets another list: whatever it fetches now is
		 * a namespace L never asked for, and stays unknown */
	}
	sr.flushing = true;
	engine_flush_summaries(u->r);
	sr.flushing = false;
}

static engine *engine_for(unsigned a0, unsigned a1, index_cache *ic, side *s)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	static const rule_action acts[4] = {RULE_OFF, RULE_LOG, RULE_DRY_RUN, RULE_BLOCK};
	for (int i = 0; i < RULE_COUNT; i++)
		cfg.rules[i].action = RULE_OFF;
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = acts[a0 & 3];
	cfg.rules[RULE_INDEX_MISMATCHED_SORT].action = acts[a0 >> 2 & 3];
	cfg.rules[RULE_COLLECTION_SCAN].action = acts[a0 >> 4 & 3];
	if (a0 & 64) {
		cfg.rules[RULE_UNBOUNDED_PUSH].action = RULE_LOG;
		cfg.rules[RULE_LARGE_DOCUMENT].action = RULE_LOG;
		cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_BYTES] = 4096;
		cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_ARRAY_LENGTH] = 4;
	}
	(void)a1;
	cfg.redact_literals = true;
	engine *e = engine_new(&cfg, ic, on_finding, s);
	if (!e)
		abort();
	return e;
}

static void check(run *u)
{
	settle(&sl);
	settle(&sr);
	for (unsigned i = 0; i < u->nreqs; i++)
		u->reqs[i].r_total = 0;
	for (size_t k = 0; k < sr.n; k++)
		u->reqs[sr.v[k].req].r_total += sr.v[k].n;
	/* per request, the rules L reported less often than R */
	static uint32_t missing[MAX_REQUESTS];
	memset(missing, 0, sizeof missing);
	size_t a = 0, b = 0;
	while (a < sl.n || b < sr.n) {
		int c = a == sl.n ? 1 : b == sr.n ? -1 : cmp_seen(&sl.v[a], &sr.v[b]);
		const seen *x = c <= 0 ? &sl.v[a] : NULL, *y = c >= 0 ? &sr.v[b] : NULL;
		uint64_t nl = x ? x->n : 0, nr = y ? y->n : 0;
		const seen *key = x ? x : y;
		bool capped = u->reqs[key->req].r_total >= MAX_REPORTS;
		if (nl > nr && !capped) {
			fprintf(
			    stderr,
			    "request %u: rule %s reported %llu times at one namespace and shape; "
			    "judged once, on time, it is reported %llu times\n",
			    key->req, rule_name(key->rule), (unsigned long long)nl,
			    (unsigned long long)nr);
			abort();
		}
		if (nl < nr)
			missing[key->req] |= 1u << key->rule;
		a += c <= 0;
		b += c >= 0;
	}
	/* every verdict not given is counted */
	uint64_t due[RULE_COUNT] = {0}, owed[RULE_COUNT] = {0}, r_skips = 0;
	for (unsigned i = 0; i < u->nreqs; i++) {
		const req *rq = &u->reqs[i];
		if (rq->r_total >= MAX_REPORTS)
			continue;
		uint32_t gone = missing[i] | rq->r_owed | rq->r_skipped;
		for (int r = 0; r < RULE_COUNT; r++) {
			due[r] += gone >> r & 1;
			owed[r] += rq->r_owed >> r & 1;
		}
		r_skips += bits(rq->r_skipped);
	}
	uint64_t wait_expired = skipped_all(u->mx, MX_SKIP_WAIT_EXPIRED);
	bool calm = skipped_all(u->mx, MX_SKIP_NO_ROOM) == 0 && wait_expired == r_skips &&
	            u->now - u->start < LATE_WAIT_MS;
	for (int r = 0; r < RULE_COUNT; r++) {
		uint64_t counted = 0;
		for (int why = 0; why < MX_SKIP_REASONS; why++)
			counted += skipped(u->mx, r, (mx_skip_reason)why);
		if (counted < due[r]) {
			fprintf(stderr, "rule %s: %llu verdicts not given, %llu counted\n",
			        rule_name((rule_id)r), (unsigned long long)due[r],
			        (unsigned long long)counted);
			abort();
		}
		if (calm && skipped(u->mx, r, MX_SKIP_NEVER_CAME) != owed[r]) {
			fprintf(stderr, "rule %s: %llu never given, %llu owed by the reference\n",
			        rule_name((rule_id)r),
			        (unsigned long long)skipped(u->mx, r, MX_SKIP_NEVER_CAME),
			        (unsigned long long)owed[r]);
			abort();
		}
	}
	for (unsigned i = 0; calm && i < u->nreqs; i++)
		if (missing[i] && u->reqs[i].r_total < MAX_REPORTS) {
			fprintf(stderr, "request %u: late verdicts missing with nothing dropped\n",
			        i);
			abort();
		}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	lists_setup();
	static run u;
	static req reqs[MAX_REQUESTS];
	static int64_t owed_at[MAX_REQUESTS];
	static seen vl[MAX_SEEN], vr[MAX_SEEN];
	memset(&u, 0, sizeof u);
	sl = (side){.v = vl};
	sr = (side){.v = vr};
	u.reqs = reqs;
	u.owed_at = owed_at;
	u.now = u.start = 1000000;
	u.lc = index_cache_new(NULL, 0, NULL, NULL, NULL, 0);
	u.rc = index_cache_new(NULL, 0, NULL, NULL, NULL, 0);
	u.mx = calloc(1, sizeof *u.mx);
	if (!u.lc || !u.rc || !u.mx)
		abort();
	index_cache_set_clock(u.lc, frozen_clock, NULL);
	index_cache_set_clock(u.rc, frozen_clock, NULL);
	u.l = engine_for(data[0], data[1], u.lc, &sl);
	u.r = engine_for(data[0], data[1], u.rc, &sr);
	u.q = late_queue_new(late_count_lost, u.mx);
	if (!u.q)
		abort();
	static const unsigned times[8] = {1, 1, 2, 4, 16, 64, 200, 300};
	const uint8_t *p = data + 2, *e = data + size;
	while (p < e && u.nreqs < MAX_REQUESTS) {
		unsigned op = *p++;
		u.now += 1;
		switch (op & 3) {
		case 0: {
			if (e - p < 3) {
				p = e;
				break;
			}
			unsigned flags = p[0];
			size_t len = (size_t)(p[1] | p[2] << 8);
			p += 3;
			if (len > (size_t)(e - p))
				len = (size_t)(e - p);
			(void)add_request(&u, p, len, flags & 1, times[flags >> 1 & 7]);
			p += len;
			break;
		}
		case 1:
			lists_come(&u, op & 4);
			break;
		case 2:
			judge_queue(&u);
			break;
		default:
			u.now += (int64_t)(op >> 2) * 1000;
			held_again(&u, true);
			break;
		}
	}
	/* the end: holds run out, the queue goes (what it owes, never given) */
	u.now += HOLD_MS;
	held_again(&u, true);
	sl.flushing = true;
	engine_flush_summaries(u.l);
	sl.flushing = false;
	if (data[1] & 1) {
		late_queue_judge(u.q, NULL, u.now);
		if (late_queue_size(u.q) != 0)
			abort(); /* analysis off: nothing is owed any more */
	} else {
		reference(&u);
		late_queue_free(u.q);
		u.q = NULL;
		check(&u);
	}
	late_queue_free(u.q);
	engine_free(u.l);
	engine_free(u.r);
	index_cache_free(u.lc);
	index_cache_free(u.rc);
	free(u.mx);
	for (unsigned i = 0; i < u.nreqs; i++)
		free(u.reqs[i].msg);
	return 0;
}
