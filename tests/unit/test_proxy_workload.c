/* The workload table (proxy/stats/workload.h) and its JSON
 * (workload_json.h): bounded, the lightest folded away, references to a
 * folded entry seen gone, collections bounded, percentiles from the
 * histogram, workers' tables merged, the query parsed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "protocol/capture.h"
#include "proxy/stats/reply_scan.h"
#include "proxy/stats/workload.h"
#include "proxy/stats/workload_json.h"

static wl_ref enter(workload *w, uint64_t key, const char *ns, wl_kind kind)
{
	char shape[32];
	snprintf(shape, sizeof shape, "{\"k\":%llu}", (unsigned long long)key);
	wl_desc d = {.ns = ns,
	             .command = "find",
	             .app = "app",
	             .shape = shape,
	             .shape_hash = key * 7,
	             .kind = kind};
	return workload_enter(w, key, &d, 0);
}

/* n requests of the entry, each answered in latency_ns. */
static void serve(workload *w, wl_ref r, unsigned n, int64_t latency_ns)
{
	wl_shape *e = workload_at(w, r);
	assert_non_null(e);
	for (unsigned i = 0; i < n; i++) {
		workload_count(w, e);
		wl_reply rep = {.latency_ns = latency_ns, .bytes = 100, .read = true, .ndocs = 2};
		workload_reply(e, &rep);
	}
}

static void test_enter_and_find(void **state)
{
	workload *w = workload_new(8, 4, 0);
	wl_ref a = enter(w, 11, "db.a", WL_KIND_READ);
	wl_ref again = enter(w, 11, "db.a", WL_KIND_READ);
	assert_int_equal(a.slot, again.slot);
	assert_int_equal(a.gen, again.gen);
	assert_int_equal(workload_find(w, 11).gen, a.gen);
	assert_int_equal(workload_find(w, 12).gen, 0);
	serve(w, a, 3, 1000);
	wl_shape *e = workload_at(w, a);
	assert_int_equal(e->count, 3);
	assert_int_equal(e->docs, 6);
	assert_int_equal(e->bytes, 300);
	assert_int_equal(w->colls[e->coll].reads, 0); /* summed when settled */
	workload_settle(w);
	assert_int_equal(e->replies, 3);
	assert_int_equal(w->colls[e->coll].reads, 3);
	assert_string_equal(w->colls[e->coll].ns, "db.a");
	workload_free(w);
}

static void test_bounded_and_folds_the_lightest(void **state)
{
	workload *w = workload_new(4, 16, 0);
	wl_ref r[4];
	for (unsigned i = 0; i < 4; i++) {
		r[i] = enter(w, 100 + i, "db.a", WL_KIND_READ);
		serve(w, r[i], 1, (int64_t)(i + 1) * 1000000); /* 100 is the lightest */
	}
	wl_ref n = enter(w, 200, "db.b", WL_KIND_WRITE);
	assert_int_equal(w->n, 4);
	assert_int_equal(w->folded, 1);
	assert_int_equal(w->folded_count, 1);
	assert_int_equal(w->folded_total_ns, 1000000);
	assert_null(workload_at(w, r[0])); /* a reference to it sees it gone */
	assert_int_equal(workload_find(w, 100).gen, 0);
	assert_int_equal(n.slot, r[0].slot);
	for (unsigned i = 1; i < 4; i++) /* the others still found */
		assert_int_equal(workload_find(w, 100 + i).gen, r[i].gen);
	assert_int_equal(workload_find(w, 200).gen, n.gen);
	/* many more shapes: still 4 entries, each found, the index consistent */
	for (unsigned i = 0; i < 1000; i++) {
		wl_ref x = enter(w, 1000 + i, "db.c", WL_KIND_READ);
		serve(w, x, 1, 10);
		assert_int_equal(workload_find(w, 1000 + i).gen, x.gen);
	}
	assert_int_equal(w->n, 4);
	assert_int_equal(w->folded, 1 + 1000); /* each new shape folded one */
	/* a folded shape's requests stay in its collection's counts */
	workload_settle(w);
	uint64_t reads = 0;
	for (unsigned i = 0; i < w->ncoll; i++)
		reads += w->colls[i].reads;
	assert_int_equal(reads, 4 + 1000);
	workload_free(w);
}

static void test_heavy_entries_survive(void **state)
{
	workload *w = workload_new(4, 4, 0);
	wl_ref heavy = enter(w, 1, "db.a", WL_KIND_READ);
	serve(w, heavy, 10, 5000000);
	for (unsigned i = 0; i < 500; i++)
		serve(w, enter(w, 10 + i, "db.a", WL_KIND_READ), 1, 1000);
	assert_non_null(workload_at(w, heavy));
	assert_int_equal(workload_at(w, heavy)->count, 10);
	assert_true(w->folded >= 500 - 3);
	workload_free(w);
}

static void test_collections_bounded(void **state)
{
	workload *w = workload_new(64, 2, 0);
	char ns[16];
	for (unsigned i = 0; i < 5; i++) {
		snprintf(ns, sizeof ns, "db.c%u", i);
		serve(w, enter(w, 50 + i, ns, WL_KIND_WRITE), 1, 1000);
	}
	workload_settle(w);
	assert_int_equal(w->ncoll, 3); /* "other" and two of their own */
	assert_string_equal(w->colls[WL_COLL_OTHER].ns, "other");
	assert_int_equal(w->colls[WL_COLL_OTHER].writes, 3);
	assert_int_equal(w->colls[1].writes, 1);
	workload_free(w);
}

static void test_percentiles(void **state)
{
	workload *w = workload_new(4, 4, 0);
	wl_ref r = enter(w, 9, "db.a", WL_KIND_READ);
	serve(w, r, 90, 1000000);  /* 1 ms */
	serve(w, r, 9, 10000000);  /* 10 ms */
	serve(w, r, 1, 100000000); /* 100 ms */
	const wl_shape *e = workload_at(w, r);
	int64_t p50 = workload_percentile(e, 0.50), p95 = workload_percentile(e, 0.95),
	        p99 = workload_percentile(e, 0.99), p100 = workload_percentile(e, 1.0);
	/* within a bucket's half-width (12.5 %) of the true value */
	assert_true(p50 > 1000000 * 0.875 && p50 < 1000000 * 1.125);
	assert_true(p95 > 10000000 * 0.875 && p95 < 10000000 * 1.125);
	assert_true(p99 > 10000000 * 0.875 && p99 < 10000000 * 1.125);
	assert_true(p100 > 100000000 * 0.875 && p100 < 100000000 * 1.125);
	/* buckets are monotonic and their middles inside them */
	for (int64_t v = 4; v < ((int64_t)1 << 40); v = v * 5 / 4 + 1) {
		unsigned b = workload_bucket(v);
		assert_true(b < WL_HIST);
		assert_true(workload_bucket(workload_bucket_mid(b)) == b);
		assert_true(workload_bucket(v + 1) >= b);
	}
	assert_int_equal(workload_percentile(workload_at(w, enter(w, 10, "x", 0)), 0.5), 0);
	workload_free(w);
}

static void test_errors_by_code(void **state)
{
	workload *w = workload_new(4, 4, 0);
	wl_shape *e = workload_at(w, enter(w, 3, "db.a", WL_KIND_WRITE));
	int32_t codes[] = {11000, 11000, 50, 2, 3, 4, 5, 0};
	for (unsigned i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		wl_reply r = {
		    .latency_ns = 10, .bytes = 1, .read = true, .ndocs = 0, .code = codes[i]};
		workload_reply(e, &r);
	}
	wl_reply unread = {.latency_ns = 10, .bytes = 1, .read = false, .code = 7};
	workload_reply(e, &unread); /* not read: no error known */
	workload_settle(w);
	assert_int_equal(e->errors, 7);
	assert_int_equal(e->err[0].code, 11000);
	assert_int_equal(e->err[0].n, 2);
	assert_int_equal(e->err_other, 2); /* 4 and 5: past WL_ERRS codes */
	assert_int_equal(e->replies, 9);
	assert_int_equal(e->read_replies, 8);
	workload_free(w);
}

static void test_json_merges_workers(void **state)
{
	workload *a = workload_new(8, 8, 0), *b = workload_new(8, 8, 0);
	serve(a, enter(a, 5, "db.x", WL_KIND_READ), 3, 2000000);
	serve(b, enter(b, 5, "db.x", WL_KIND_READ), 4, 2000000);
	serve(b, enter(b, 6, "db.y", WL_KIND_WRITE), 1, 1000);
	workload_rules_note(5 * 7, 1);
	workload_settle(a);
	workload_settle(b);
	const workload *tabs[] = {a, b};
	static char buf[1 << 16];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	wl_query q = {0};
	workload_json(tabs, 2, &q, 5000000000LL, &t);
	text_finish(&t);
	assert_non_null(strstr(buf, "\"shapesMatched\":2"));
	const char *x = strstr(buf, "\"ns\":\"db.x\"");
	assert_non_null(x);
	assert_non_null(strstr(x, "\"count\":7"));
	assert_true(strstr(buf, "\"ns\":\"db.x\"") < strstr(buf, "\"ns\":\"db.y\"")); /* by total */
	assert_non_null(strstr(buf, "{\"ns\":\"db.x\",\"reads\":7,\"writes\":0"));
	assert_non_null(strstr(buf, "{\"ns\":\"db.y\",\"reads\":0,\"writes\":1"));
	/* ns filter and limit */
	text_init(&t, buf, sizeof buf);
	q.ns = "db.y";
	workload_json(tabs, 2, &q, 5000000000LL, &t);
	text_finish(&t);
	assert_null(strstr(buf, "\"ns\":\"db.x\""));
	assert_non_null(strstr(buf, "\"ns\":\"db.y\""));
	/* Prometheus: one labelled collection, the rest "other" */
	text_init(&t, buf, sizeof buf);
	workload_prometheus(tabs, 2, 1, &t);
	text_finish(&t);
	assert_non_null(strstr(buf, "mongoguard_collection_reads_total{ns=\"db.x\"} 7\n"));
	assert_non_null(strstr(buf, "mongoguard_collection_writes_total{ns=\"other\"} 1\n"));
	workload_free(a);
	workload_free(b);
}

static void test_query_parse(void **state)
{
	wl_query q;
	char store[256], err[200];
	assert_true(workload_query_parse("ns=db.*&app=web&sort=p99&limit=5", &q, store,
	                                 sizeof store, err, sizeof err));
	assert_string_equal(q.ns, "db.*");
	assert_string_equal(q.app, "web");
	assert_int_equal(q.sort, WL_SORT_P99);
	assert_int_equal(q.limit, 5);
	assert_false(workload_query_parse("sort=fast", &q, store, sizeof store, err, sizeof err));
	assert_false(workload_query_parse("limit=0", &q, store, sizeof store, err, sizeof err));
	assert_false(workload_query_parse("x=1", &q, store, sizeof store, err, sizeof err));
}

/* ---- the reply reader against the capture's ---- */

/* An OP_MSG reply of body (its bytes malloc'd, *len set). */
static uint8_t *opmsg_of(const bson_t *body, uint32_t flags, size_t *len)
{
	*len = 16 + 4 + 1 + body->len + ((flags & 1) ? 4 : 0);
	uint8_t *m = calloc(1, *len);
	int32_t l = (int32_t)*len, op = 2013;
	memcpy(m, &l, 4);
	memcpy(m + 12, &op, 4);
	memcpy(m + 16, &flags, 4);
	memcpy(m + 21, bson_get_data(body), body->len);
	return m;
}

static void same_as_capture(const uint8_t *m, size_t len)
{
	capture_reply_facts cf;
	reply_scan sc;
	capture_reply_inspect(m, len, false, &cf);
	bool read = reply_scan_read(m, len, &sc);
	assert_int_equal(read, cf.read);
	if (read) {
		assert_int_equal(sc.ok, cf.ok);
		assert_int_equal(sc.code, cf.code);
		assert_int_equal(sc.write_errors, cf.write_errors);
		assert_int_equal(sc.n, cf.n);
	}
	capture_reply_facts_free(&cf);
}

static void cursor_reply(bson_t *b, const char *batch, int ndocs, bool tail)
{
	bson_t cur, arr, d;
	bson_init(b);
	BSON_APPEND_DOCUMENT_BEGIN(b, "cursor", &cur);
	BSON_APPEND_ARRAY_BEGIN(&cur, batch, &arr);
	for (int i = 0; i < ndocs; i++) {
		char k[16];
		snprintf(k, sizeof k, "%d", i);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &d);
		BSON_APPEND_INT32(&d, "_id", i);
		BSON_APPEND_UTF8(&d, "s", "x");
		bson_append_document_end(&arr, &d);
	}
	bson_append_array_end(&cur, &arr);
	BSON_APPEND_INT64(&cur, "id", 0);
	BSON_APPEND_UTF8(&cur, "ns", "db.c");
	bson_append_document_end(b, &cur);
	BSON_APPEND_DOUBLE(b, "ok", 1.0);
	if (tail)
		BSON_APPEND_INT64(b, "operationTime", 5);
}

/* A createIndexes reply: the two counts (a negative one left out), the
 * note, ok. */
static bool unchanged_of(int before, int after, bool as_double, bool checksum)
{
	bson_t b = BSON_INITIALIZER;
	if (before >= 0 && as_double)
		BSON_APPEND_DOUBLE(&b, "numIndexesBefore", before);
	else if (before >= 0)
		BSON_APPEND_INT32(&b, "numIndexesBefore", before);
	if (after >= 0)
		BSON_APPEND_INT64(&b, "numIndexesAfter", after);
	if (before == after)
		BSON_APPEND_UTF8(&b, "note", "all indexes already exist");
	BSON_APPEND_DOUBLE(&b, "ok", 1.0);
	size_t len;
	uint8_t *m = opmsg_of(&b, checksum ? 1 : 0, &len);
	bool got = reply_scan_indexes_unchanged(m, len);
	/* cut short, it is no reply */
	assert_false(reply_scan_indexes_unchanged(m, len - 1));
	free(m);
	bson_destroy(&b);
	return got;
}

/* A createIndexes whose indexes all existed changed nothing; any other
 * reply is not taken as unchanged. */
static void test_reply_scan_indexes_unchanged(void **state)
{
	assert_true(unchanged_of(2, 2, false, false));
	assert_true(unchanged_of(3, 3, true, true)); /* a double, a checksum */
	assert_false(unchanged_of(1, 2, false, false));
	assert_false(unchanged_of(0, 2, false, false)); /* the collection made too */
	assert_false(unchanged_of(-1, 2, false, false));
	assert_false(unchanged_of(2, -1, false, false));
	/* mongos: the counts under raw, per shard */
	bson_t b = BSON_INITIALIZER, raw, sh;
	BSON_APPEND_DOCUMENT_BEGIN(&b, "raw", &raw);
	BSON_APPEND_DOCUMENT_BEGIN(&raw, "shard0/h:1", &sh);
	BSON_APPEND_INT32(&sh, "numIndexesBefore", 2);
	BSON_APPEND_INT32(&sh, "numIndexesAfter", 2);
	bson_append_document_end(&raw, &sh);
	bson_append_document_end(&b, &raw);
	BSON_APPEND_DOUBLE(&b, "ok", 1.0);
	size_t len;
	uint8_t *m = opmsg_of(&b, 0, &len);
	assert_false(reply_scan_indexes_unchanged(m, len));
	free(m);
	bson_destroy(&b);
}

static void test_reply_scan_matches_capture(void **state)
{
	bson_t b;
	size_t len;
	uint8_t *m;
	for (int n = 0; n < 5; n++)
		for (int tail = 0; tail < 2; tail++) {
			cursor_reply(&b, n % 2 ? "nextBatch" : "firstBatch", n, tail);
			m = opmsg_of(&b, 0, &len);
			same_as_capture(m, len);
			free(m);
			/* with a checksum (not checked here: the capture's reader
			 * checks it and reads no reply whose sum is wrong) */
			reply_scan plain, summed;
			m = opmsg_of(&b, 0, &len);
			assert_true(reply_scan_read(m, len, &plain));
			free(m);
			m = opmsg_of(&b, 1, &len);
			assert_true(reply_scan_read(m, len, &summed));
			assert_int_equal(summed.n, plain.n);
			assert_int_equal(summed.ok, plain.ok);
			free(m);
			bson_destroy(&b);
		}
	/* writes, counts, errors, in several layouts */
	const char *bodies[] = {
	    "{\"n\": 1, \"ok\": 1.0}",
	    "{\"n\": 3, \"nModified\": 2, \"ok\": 1.0}",
	    "{\"n\": {\"$numberLong\": \"7\"}, \"ok\": 1}",
	    "{\"n\": 0, \"writeErrors\": [{\"index\": 0, \"code\": 11000, \"errmsg\": \"dup\"},"
	    " {\"index\": 1, \"code\": 11000}], \"ok\": 1.0}",
	    "{\"ok\": 0.0, \"errmsg\": \"bad\", \"code\": 2, \"codeName\": \"BadValue\"}",
	    "{\"ok\": 0, \"errmsg\": \"no code\"}",
	    "{\"code\": 0, \"writeErrors\": [{\"code\": 121}], \"ok\": 1}",
	    "{\"ok\": true}",
	    "{\"values\": [1, 2, 3], \"ok\": 1.0}",
	    "{\"cursor\": 5, \"n\": 4, \"ok\": 1.0}",
	    "{\"cursor\": {\"firstBatch\": [1, \"a\", {}], \"id\": 0}, \"ok\": 1.0}",
	    "{\"ok\": 1.0, \"cursor\": {\"firstBatch\": [{}, {}]}}",
	    "{\"cursor\": {\"id\": 9, \"nextBatch\": [{}]}, \"ok\": 1.0}",
	    "{\"cursor\": {\"firstBatch\": [{}]}, \"ok\": 0.0, \"code\": 43}",
	    "{\"n\": 2, \"ok\": 1.0, \"writeErrors\": [{\"code\": 11000}]}",
	};
	for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
		bson_error_t err;
		assert_true(bson_init_from_json(&b, bodies[i], -1, &err));
		m = opmsg_of(&b, 0, &len);
		same_as_capture(m, len);
		/* every prefix and every single-byte change: the same answer as
		 * the capture's reader where both read it, and never past the
		 * bytes (ASan) */
		for (size_t cut = 0; cut < len; cut++) {
			uint8_t *c = malloc(cut ? cut : 1);
			memcpy(c, m, cut);
			reply_scan sc;
			(void)reply_scan_read(c, cut, &sc);
			free(c);
		}
		for (size_t at = 16; at < len; at++) {
			uint8_t *c = malloc(len);
			memcpy(c, m, len);
			c[at] ^= (uint8_t)(0x5a + at);
			reply_scan sc;
			(void)reply_scan_read(c, len, &sc);
			free(c);
		}
		free(m);
		bson_destroy(&b);
	}
	/* OP_REPLY: numberReturned */
	bson_t one = BSON_INITIALIZER;
	BSON_APPEND_DOUBLE(&one, "ok", 1.0);
	len = 16 + 20 + one.len;
	m = calloc(1, len);
	int32_t l = (int32_t)len, op = 1, nret = 3;
	memcpy(m, &l, 4);
	memcpy(m + 12, &op, 4);
	memcpy(m + 16 + 16, &nret, 4);
	memcpy(m + 36, bson_get_data(&one), one.len);
	same_as_capture(m, len);
	free(m);
	bson_destroy(&one);
}

/* Label values escaped as the text format wants: backslash, quote and
 * newline, and UTF-8 left as it is (JSON's \u escapes are not the text
 * format's). */
static void test_prometheus_label_escapes(void **state)
{
	workload *w = workload_new(8, 8, 0);
	serve(w, enter(w, 1, "db.a\"b\\c\ncaf\xc3\xa9", WL_KIND_READ), 2, 10);
	workload_settle(w);
	const workload *tabs[] = {w};
	static char buf[1 << 14];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	workload_prometheus(tabs, 1, 1000, &t);
	text_finish(&t);
	assert_non_null(strstr(
	    buf, "mongoguard_collection_reads_total{ns=\"db.a\\\"b\\\\c\\ncaf\xc3\xa9\"} 2\n"));
	workload_free(w);
}

/* ---- the values a batch holds (client-side-join's parents) ---- */

/* Whether vf may hold the value of json ({"v": <json>}), as a request's
 * filter gives it (analyzers/engine/conn_track.c, read_value). */
static bool holds(const value_filter *vf, const char *json)
{
	char doc[512];
	bson_error_t err;
	bson_iter_t it;
	snprintf(doc, sizeof doc, "{\"v\": %s}", json);
	bson_t *b = bson_new_from_json((const uint8_t *)doc, -1, &err);
	assert_non_null(b);
	assert_true(bson_iter_init_find(&it, b, "v"));
	uint8_t t = it.raw[it.type];
	size_t n = it.next_off - it.d1;
	assert_true(value_checkable(t, n));
	bool has = value_filter_has(vf, value_hash(t, it.raw + it.d1, n));
	bson_destroy(b);
	return has;
}

/* The values of a reply whose body is json: false when not known. */
static bool values_of_reply(const char *json, uint32_t flags, value_filter *vf)
{
	bson_error_t err;
	bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &err);
	assert_non_null(b);
	size_t len;
	uint8_t *m = opmsg_of(b, flags, &len);
	reply_scan sc;
	bool ok = reply_scan_read(m, len, &sc) && reply_scan_values(&sc, vf);
	free(m);
	bson_destroy(b);
	return ok;
}

static const char BATCH[] =
    "[{\"_id\": {\"$oid\": \"65a000000000000000000001\"},"
    "  \"author\": {\"$ref\": \"users\", \"$id\": {\"$oid\": \"65a0000000000000000000b1\"}},"
    "  \"tags\": [1, \"x\"], \"comments\": [{\"by\": \"u9\", \"text\": \"%s\"}],"
    "  \"deep\": {\"a\": {\"b\": {\"c\": \"too deep\", \"d\": \"and this one too\"}}},"
    "  \"done\": true},"
    " {\"_id\": 2, \"price\": 5.0, \"big\": {\"$numberLong\": \"9007199254740993\"},"
    "  \"sref\": \"65A0000000000000000000C2\"}]";

static void test_reply_scan_values(void **state)
{
	char longtext[200], batch[1024], json[1400];
	memset(longtext, 'z', sizeof longtext - 1);
	longtext[sizeof longtext - 1] = '\0';
	snprintf(batch, sizeof batch, BATCH, longtext);
	value_filter usual, other;
	/* the layout servers write (cursor first, ok after) and another */
	snprintf(json, sizeof json,
	         "{\"cursor\": {\"firstBatch\": %s, \"id\": 0, \"ns\": \"db.c\"}, \"ok\": 1.0}",
	         batch);
	assert_true(values_of_reply(json, 0, &usual));
	assert_true(usual.all);
	snprintf(json, sizeof json,
	         "{\"ok\": 1, \"cursor\": {\"id\": 0, \"firstBatch\": %s}, \"$clusterTime\": {}}",
	         batch);
	assert_true(values_of_reply(json, 1, &other));
	assert_memory_equal(usual.w, other.w, sizeof usual.w);
	assert_int_equal(usual.n, other.n);
	assert_true(other.all);
	/* a getMore's batch: not read (a parent's first documents only) */
	snprintf(json, sizeof json, "{\"cursor\": {\"nextBatch\": %s, \"id\": 0}, \"ok\": 1.0}",
	         batch);
	assert_false(values_of_reply(json, 0, &other));
	/* top-level values, a DBRef's $id, an array's elements, a field of an
	 * array's documents; numbers by value */
	assert_true(holds(&usual, "{\"$oid\": \"65a000000000000000000001\"}"));
	assert_true(holds(&usual, "{\"$oid\": \"65a0000000000000000000b1\"}"));
	assert_true(holds(&usual, "1"));
	assert_true(holds(&usual, "{\"$numberLong\": \"1\"}"));
	assert_true(holds(&usual, "\"x\""));
	assert_true(holds(&usual, "\"u9\""));
	assert_true(holds(&usual, "{\"$numberInt\": \"2\"}"));
	assert_true(holds(&usual, "5"));
	assert_true(holds(&usual, "{\"$numberLong\": \"9007199254740993\"}"));
	/* an ObjectId's hex string, and a hex string's ObjectId (either case) */
	assert_true(holds(&usual, "\"65a000000000000000000001\""));
	assert_true(holds(&usual, "{\"$oid\": \"65a0000000000000000000c2\"}"));
	/* not there: another value; three levels down; a string over 128
	 * bytes is neither kept nor asked about (value_checkable) */
	assert_false(holds(&usual, "\"u8\""));
	assert_false(holds(&usual, "5.5"));
	assert_false(holds(&usual, "\"too deep\""));
	assert_false(holds(&usual, "{\"$oid\": \"65a000000000000000000002\"}"));
	assert_false(holds(&usual, "\"65a000000000000000000002\""));
	/* an int64 past 2^53 by its exact value */
	assert_false(holds(&usual, "{\"$numberLong\": \"9007199254740992\"}"));

	/* the first VALUE_FILTER_DOCS documents; at most VALUE_FILTER_MAX
	 * values, the first document's first ones */
	char many[4096];
	size_t at = 0;
	at += (size_t)snprintf(many + at, sizeof many - at, "{\"cursor\": {\"firstBatch\": [");
	for (int i = 0; i <= VALUE_FILTER_DOCS; i++)
		at += (size_t)snprintf(many + at, sizeof many - at, "%s{\"_id\": %d}", i ? "," : "",
		                       100 + i);
	snprintf(many + at, sizeof many - at, "], \"id\": 0}, \"ok\": 1}");
	assert_true(values_of_reply(many, 0, &other));
	assert_false(other.all);
	assert_int_equal(other.n, VALUE_FILTER_DOCS);
	char last[16], past[16]; /* the last document read, and the first not read */
	snprintf(last, sizeof last, "%d", 100 + VALUE_FILTER_DOCS - 1);
	snprintf(past, sizeof past, "%d", 100 + VALUE_FILTER_DOCS);
	assert_true(holds(&other, last));
	assert_false(holds(&other, past));
	for (int first = 0; first < 2; first++) {
		/* a document of more values than a filter holds: second, its
		 * first ones kept; first, not known (its reference may be past
		 * them) */
		at = (size_t)snprintf(many, sizeof many,
		                      "{\"cursor\": {\"firstBatch\": [%s{\"a\": [",
		                      first ? "" : "{\"_id\": 1}, ");
		for (int i = 0; i <= VALUE_FILTER_MAX; i++)
			at +=
			    (size_t)snprintf(many + at, sizeof many - at, "%s%d", i ? "," : "", i);
		snprintf(many + at, sizeof many - at, "]}, {}], \"id\": 0}, \"ok\": 1}");
		assert_int_equal(values_of_reply(many, 0, &other), !first);
		assert_false(other.all);
		assert_int_equal(other.n, VALUE_FILTER_MAX);
	}
	/* not known: an element that is no document, no cursor */
	assert_false(values_of_reply(
	    "{\"cursor\": {\"firstBatch\": [{}, 3], \"id\": 0}, \"ok\": 1}", 0, &other));
	assert_false(values_of_reply("{\"n\": 2, \"ok\": 1}", 0, &other));
	assert_true(values_of_reply(
	    "{\"cursor\": {\"firstBatch\": [{}, {}], \"id\": 0}, \"ok\": 1}", 0, &other));
	assert_int_equal(other.n, 0);
	assert_true(other.all);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_enter_and_find),
	    cmocka_unit_test(test_bounded_and_folds_the_lightest),
	    cmocka_unit_test(test_heavy_entries_survive),
	    cmocka_unit_test(test_collections_bounded),
	    cmocka_unit_test(test_percentiles),
	    cmocka_unit_test(test_errors_by_code),
	    cmocka_unit_test(test_json_merges_workers),
	    cmocka_unit_test(test_query_parse),
	    cmocka_unit_test(test_reply_scan_matches_capture),
	    cmocka_unit_test(test_reply_scan_indexes_unchanged),
	    cmocka_unit_test(test_reply_scan_values),
	    cmocka_unit_test(test_prometheus_label_escapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
