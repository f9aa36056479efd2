/* libFuzzer target: how a client's requests are cut into reads changes
 * nothing a session does. The same requests go through two sessions on the
 * deterministic harness (tests/unit/session_harness.h), each with an engine
 * of its own that judges them (an index cache that knows test.c's and
 * test.d's indexes, every rule at log, case-insensitive-regex at block):
 *
 *   A  one request at a time, each answered before the next is written
 *      (a closed-loop client);
 *   B  all of them queued, then written in the chunks the input says, the
 *      loop run after some chunks and not others (a pipelining client, and
 *      the kernel cutting its stream anywhere).
 *
 * Checked: the upstream read the same bytes (count and hash), the client
 * got the same bytes, the worker's counters (messages, bytes, commands,
 * blocks, repeats, analyses timed, reply latencies observed) are equal,
 * the workload tables (on, as a worker keeps them) counted the same, and
 * the engines reported the same findings in the same order. What B
 * takes through the shortcuts of a pipelined read (a run judged as the
 * request before it, requests.c's judge_again; replies framed inline) must
 * therefore count and answer as A's one-by-one path does.
 *
 * The input:
 *   0xfe first: both clients speak TLS (the listener takes it, allowTLS),
 *   and B's chunks cut the ciphertext;
 *   requests, two bytes each (kind, value) until a 0xff kind byte or
 *   MAX_REQS: kind % 14 picks one of the shapes in build(); the value goes
 *   into it (an _id, a name), so runs of one shape differ in a value;
 *   then B's chunks, a byte each: (b & 0x7f) * 3 + 1 bytes written, the
 *   loop run after it when b & 0x80. What the chunks leave is written at
 *   the end, and the loop run. */
#include <bson/bson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/catalog/index_cache.h"
#include "analyzers/engine/engine.h"
#include "analyzers/planner/index_set.h"
#include "protocol/frame.h"
#include "proxy/admin/metrics.h"
#include "proxy/stats/workload.h"
#include "tests/unit/session_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_REQS = 48, MSG_MAX = 512 };

typedef struct msg {
	uint8_t b[MSG_MAX];
	size_t len;
} msg;

typedef struct outcome {
	uint64_t up_seen, up_hash, findings, finding_hash;
	uint8_t *got;
	size_t got_len;
	metrics_shard mx;
	/* the workload table's entries, in slot order: what each counted */
	unsigned nshapes;
	uint64_t wl_hash;
	bool closed;
} outcome;

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* {find: coll, filter: ...}, the filter f left open for the caller */
static void begin_find(bson_t *d, const char *coll, bson_t *f)
{
	BSON_APPEND_UTF8(d, "find", coll);
	BSON_APPEND_DOCUMENT_BEGIN(d, "filter", f);
}

/* An OP_QUERY of d on admin.$cmd, request id id. */
static void build_query(msg *m, const bson_t *d, int32_t id)
{
	static const char ns[] = "admin.$cmd";
	m->len = 16 + 4 + sizeof ns + 8 + d->len;
	put32(m->b, (uint32_t)m->len);
	put32(m->b + 4, (uint32_t)id);
	put32(m->b + 8, 0);
	put32(m->b + 12, OP_QUERY);
	put32(m->b + 16, 0);
	memcpy(m->b + 20, ns, sizeof ns);
	put32(m->b + 20 + sizeof ns, 0);           /* numberToSkip */
	put32(m->b + 24 + sizeof ns, 0xffffffffu); /* numberToReturn: -1 */
	memcpy(m->b + 28 + sizeof ns, bson_get_data(d), d->len);
}

/* One request of kind k with value v, request id id: an OP_MSG, or for
 * the last kind an OP_QUERY. */
static void build(msg *m, uint8_t k, uint8_t v, int32_t id)
{
	bson_t d = BSON_INITIALIZER, f, s, st;
	char name[8];
	snprintf(name, sizeof name, "n%u", v % 8);
	uint32_t flags = 0;
	switch (k % 14) {
	case 0: /* find by _id: the shape a pipelining app repeats */
	case 1:
		begin_find(&d, "c", &f);
		BSON_APPEND_INT32(&f, "_id", v);
		bson_append_document_end(&d, &f);
		break;
	case 2: /* the same on the other collection */
		begin_find(&d, "d", &f);
		BSON_APPEND_INT32(&f, "_id", v);
		bson_append_document_end(&d, &f);
		break;
	case 3: /* an unindexed field: collection-scan */
		begin_find(&d, "c", &f);
		BSON_APPEND_UTF8(&f, "other", name);
		bson_append_document_end(&d, &f);
		break;
	case 4: /* case-insensitive regex: blocked */
		begin_find(&d, "c", &f);
		BSON_APPEND_REGEX(&f, "name", name, "i");
		bson_append_document_end(&d, &f);
		break;
	case 5: /* a sort an index gives, then one none does */
	case 6:
		begin_find(&d, "c", &f);
		BSON_APPEND_INT32(&f, "a", v);
		bson_append_document_end(&d, &f);
		BSON_APPEND_DOCUMENT_BEGIN(&d, "sort", &s);
		BSON_APPEND_INT32(&s, k % 14 == 5 ? "b" : "zz", -1);
		bson_append_document_end(&d, &s);
		break;
	case 7: /* an insert nobody waits for (moreToCome) */
		flags = 2;
		/* fall through */
	case 8: /* ... and one that is answered */
		BSON_APPEND_UTF8(&d, "insert", "c");
		BSON_APPEND_ARRAY_BEGIN(&d, "documents", &f);
		BSON_APPEND_DOCUMENT_BEGIN(&f, "0", &s);
		BSON_APPEND_INT32(&s, "_id", 1000 + v);
		bson_append_document_end(&f, &s);
		bson_append_array_end(&d, &f);
		break;
	case 9: /* not a read */
		BSON_APPEND_INT32(&d, "ping", 1);
		break;
	case 10: /* a pipeline: its $match and $sort */
		BSON_APPEND_UTF8(&d, "aggregate", "c");
		BSON_APPEND_ARRAY_BEGIN(&d, "pipeline", &f);
		BSON_APPEND_DOCUMENT_BEGIN(&f, "0", &s);
		BSON_APPEND_DOCUMENT_BEGIN(&s, "$match", &st);
		BSON_APPEND_INT32(&st, "a", v);
		bson_append_document_end(&s, &st);
		bson_append_document_end(&f, &s);
		BSON_APPEND_DOCUMENT_BEGIN(&f, "1", &s);
		BSON_APPEND_DOCUMENT_BEGIN(&s, "$sort", &st);
		BSON_APPEND_INT32(&st, "b", 1);
		bson_append_document_end(&s, &st);
		bson_append_document_end(&f, &s);
		bson_append_array_end(&d, &f);
		BSON_APPEND_DOCUMENT_BEGIN(&d, "cursor", &f);
		bson_append_document_end(&d, &f);
		break;
	case 11: /* the next batch of a cursor */
		BSON_APPEND_INT64(&d, "getMore", 1 + v);
		BSON_APPEND_UTF8(&d, "collection", "c");
		break;
	case 12: /* a count over an unindexed field */
		BSON_APPEND_UTF8(&d, "count", "c");
		BSON_APPEND_DOCUMENT_BEGIN(&d, "query", &f);
		BSON_APPEND_UTF8(&f, "other", name);
		bson_append_document_end(&d, &f);
		break;
	default: /* the legacy handshake, OP_QUERY on admin.$cmd */
		BSON_APPEND_INT32(&d, "isMaster", 1);
		build_query(m, &d, id);
		bson_destroy(&d);
		return;
	}
	BSON_APPEND_UTF8(&d, "$db", "test");
	m->len = 21 + d.len;
	put32(m->b, (uint32_t)m->len);
	put32(m->b + 4, (uint32_t)id);
	put32(m->b + 8, 0);
	put32(m->b + 12, OP_MSG);
	put32(m->b + 16, flags);
	m->b[20] = 0;
	memcpy(m->b + 21, bson_get_data(&d), d.len);
	bson_destroy(&d);
}

/* FNV-1a, continued from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
	return h;
}

static void on_finding(void *arg, const finding *f)
{
	outcome *o = arg;
	o->findings++;
	const char *parts[] = {f->ns, f->command, f->shape};
	uint64_t rule = (uint64_t)f->rule;
	o->finding_hash = fnv(o->finding_hash, &rule, sizeof rule);
	for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
		o->finding_hash = fnv(o->finding_hash, parts[i], strlen(parts[i]) + 1);
}

static void put_indexes(index_cache *ic, const char *coll)
{
	char err[256];
	index_set *s = index_set_from_json("[{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"},"
	                                   " {\"v\": 2, \"key\": {\"a\": 1, \"b\": -1}, \"name\": "
	                                   "\"a_1_b_-1\"}]",
	                                   err, sizeof err);
	if (!s)
		abort();
	index_set_set_doc_count(s, 50000); /* over minDocuments: collection-scan judges */
	index_cache_put(ic, "test", coll, s);
	index_set_release(s);
}

/* What the workload table counted: every used entry's key and figures
 * (the clock stands still, so its latencies are equal too). */
static void note_workload(const workload *wl, outcome *o)
{
	o->nshapes = wl->n;
	o->wl_hash = 0xcbf29ce484222325ull;
	for (unsigned i = 0; i < wl->cap; i++) {
		const wl_shape *e = &wl->shapes[i];
		if (!e->key)
			continue;
		uint64_t f[] = {e->key,  e->count, e->total_ns, e->read_replies,
		                e->docs, e->bytes, e->errors};
		o->wl_hash = fnv(fnv(o->wl_hash, f, sizeof f), e->hist, sizeof e->hist);
	}
}

static void die(const char *why, size_t nreqs)
{
	fprintf(stderr, "fuzz_session_chunks: %s (%zu requests)\n", why, nreqs);
	abort();
}

/* The request's bytes to the client's queue: as they are, or through its
 * TLS (one record each). */
static void queue(hx_conn *c, bool tls, const msg *m)
{
	if (tls)
		hx_queue_app(c, m->b, m->len);
	else
		hx_queue_raw(c, m->b, m->len);
}

/* The requests through a fresh world; chunks NULL: one at a time (A). */
static void play(bool tls, const msg *reqs, size_t n, const uint8_t *chunks, size_t nchunks,
                 outcome *o)
{
	memset(o, 0, sizeof *o);
	o->finding_hash = 0xcbf29ce484222325ull;
	hx_world *w = hx_world_new(tls, NULL);
	index_cache *ic = index_cache_new(NULL, 0, NULL, NULL, NULL, 0);
	put_indexes(ic, "c");
	put_indexes(ic, "d");
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int i = 0; i < RULE_COUNT; i++)
		cfg.rules[i].action = RULE_LOG;
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = RULE_BLOCK;
	hx_world_engine(w, engine_new(&cfg, ic, on_finding, o));
	hx_world_workload(w, workload_new(WL_DEFAULT_SHAPES, WL_DEFAULT_COLLS, 0));
	hx_conn *c = hx_conn_start(w);
	if (tls && !hx_tls_handshake(c))
		die("the TLS handshake did not finish", n);
	if (!chunks) {
		for (size_t i = 0; i < n; i++) {
			queue(c, tls, &reqs[i]);
			if (!hx_flush(c))
				die("A: the loop never got quiet", n);
		}
	} else {
		for (size_t i = 0; i < n; i++)
			queue(c, tls, &reqs[i]);
		for (size_t i = 0; i < nchunks && c->out_len; i++) {
			hx_deliver(c, (size_t)(chunks[i] & 0x7f) * 3 + 1);
			if ((chunks[i] & 0x80) && !hx_run(c))
				die("B: the loop never got quiet", n);
		}
		if (!hx_flush(c))
			die("B: the loop never got quiet", n);
	}
	o->up_seen = c->up_seen;
	o->up_hash = c->up_hash;
	o->got = malloc(c->got_len + 1);
	if (!o->got)
		abort();
	memcpy(o->got, c->got, c->got_len);
	o->got_len = c->got_len;
	o->closed = c->closed;
	hx_conn_free(c);
	o->mx = *hx_metrics(w);
	note_workload(hx_workload(w), o);
	hx_world_free(w); /* frees the engine */
	index_cache_free(ic);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static msg reqs[MAX_REQS];
	size_t n = 0, at = 0;
	bool tls = size > 0 && data[0] == 0xfe;
	if (tls)
		at++;
	while (n < MAX_REQS && at + 1 < size && data[at] != 0xff) {
		build(&reqs[n], data[at], data[at + 1], (int32_t)n + 1);
		n++;
		at += 2;
	}
	if (at < size && data[at] == 0xff)
		at++;
	if (n == 0)
		return 0;
	outcome a, b;
	play(tls, reqs, n, NULL, 0, &a);
	play(tls, reqs, n, data + at, size - at, &b);
	if (a.closed || b.closed)
		die("a session closed on well-formed requests", n);
	if (a.up_seen != b.up_seen || a.up_hash != b.up_hash)
		die("the upstream read other bytes", n);
	if (a.got_len != b.got_len || memcmp(a.got, b.got, a.got_len) != 0)
		die("the client got other bytes", n);
	if (a.findings != b.findings || a.finding_hash != b.finding_hash)
		die("the engines reported other findings", n);
	if (memcmp(&a.mx, &b.mx, sizeof a.mx) != 0)
		die("the counters differ", n);
	if (a.nshapes != b.nshapes || a.wl_hash != b.wl_hash)
		die("the workload tables differ", n);
	free(a.got);
	free(b.got);
	return 0;
}
