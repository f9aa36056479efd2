/* The capture writer without traffic: rotation by size, the total cap
 * (oldest files go), a full queue (drops counted, a gap record written);
 * and the report's aggregation over a capture made here. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "analyzers/catalog/index_cache.h"
#include "protocol/frame.h"
#include "report/report.h"
#include "proxy/sinks/capture.h"

static uint8_t *find_msg(const char *coll, size_t *len, int32_t rid)
{
	bson_t *b = BCON_NEW("find", coll, "filter", "{", "status", "x", "}", "sort", "{",
	                     "created", BCON_INT32(-1), "}", "$db", "shop");
	size_t n = 21 + b->len;
	uint8_t *m = calloc(1, n);
	wire_write_i32(m, (int32_t)n);
	wire_write_i32(m + 4, rid);
	wire_write_i32(m + 12, OP_MSG);
	memcpy(m + 21, bson_get_data(b), b->len);
	bson_destroy(b);
	*len = n;
	return m;
}

static char dir[256];

/* The path of the (last) capture file in dir. */
static void the_file(char *path, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	path[0] = '\0';
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "capture-", 8))
			snprintf(path, cap, "%s/%s", dir, e->d_name);
	closedir(d);
}

static void make_dir(void)
{
	snprintf(dir, sizeof dir, "/tmp/mg-capture-test-XXXXXX");
	assert_non_null(mkdtemp(dir));
}

/* Files in dir, their total size, and the kinds of record they hold. */
static size_t scan(uint64_t *total, uint64_t *gap_dropped, size_t *headers)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;
	*total = *gap_dropped = 0;
	*headers = 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "capture-", 8))
			continue;
		char p[600];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		FILE *f = fopen(p, "rb");
		fseek(f, 0, SEEK_END);
		long sz = ftell(f);
		rewind(f);
		uint8_t *buf = malloc((size_t)sz + 1);
		assert_int_equal(fread(buf, 1, (size_t)sz, f), (size_t)sz);
		fclose(f);
		size_t off = 0;
		bson_t rec;
		bool first = true;
		while (capture_next(buf, (size_t)sz, &off, &rec) == CAPTURE_NEXT_OK) {
			capture_rec_kind k = capture_kind(&rec);
			if (first)
				assert_int_equal(
				    k, CAPTURE_REC_HEADER); /* every file starts with one */
			first = false;
			*headers += k == CAPTURE_REC_HEADER;
			bson_iter_t it;
			if (k == CAPTURE_REC_GAP && bson_iter_init_find(&it, &rec, "dropped"))
				*gap_dropped += (uint64_t)bson_iter_as_int64(&it);
		}
		assert_int_equal(off, (size_t)sz);
		free(buf);
		*total += (uint64_t)sz;
		n++;
	}
	closedir(d);
	return n;
}

static void cleanup(void)
{
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_rotation_and_cap(void **st)
{
	make_dir();
	capture_settings s;
	capture_settings_defaults(&s);
	snprintf(s.dir, sizeof s.dir, "%s", dir);
	s.max_file_bytes = 4096;
	s.max_total_bytes = 20000;
	char err[256];
	capture_sink *c = capture_sink_new(&s, "test", NULL, NULL, err, sizeof err);
	assert_non_null(c);
	assert_true(capture_sink_start(c, err, sizeof err));
	for (int i = 0; i < 400; i++) {
		size_t len;
		uint8_t *m = find_msg("orders", &len, i);
		capture_origin o = {capture_now_us(), 1, "127.0.0.1:1", "t"};
		capture_sink_request(c, &o, m, len, "forward", 0, NULL);
		free(m);
		if (i % 50 == 0)
			usleep(2000);
	}
	capture_stats fin;
	capture_sink_free(c, &fin);
	uint64_t total, dropped;
	size_t headers;
	size_t files = scan(&total, &dropped, &headers);
	assert_true(fin.files >= 5);   /* 400 records of ~250 bytes in 4 KiB files */
	assert_true(fin.deleted >= 1); /* the cap removed the oldest */
	assert_int_equal(files, fin.files - fin.deleted);
	assert_true(total <= 20000 + 4096 + 512); /* the cap, plus the file being written */
	assert_int_equal(headers, files);
	assert_int_equal(fin.dropped, 0);
	cleanup();
}

static void test_full_queue_counts_and_gap(void **st)
{
	make_dir();
	capture_settings s;
	capture_settings_defaults(&s);
	snprintf(s.dir, sizeof s.dir, "%s", dir);
	s.queue_bytes = 4000; /* about ten requests */
	char err[256];
	capture_sink *c = capture_sink_new(&s, "test", NULL, NULL, err, sizeof err);
	assert_non_null(c);
	/* Not started: nothing drains the queue, so it fills and drops. */
	for (int i = 0; i < 100; i++) {
		size_t len;
		uint8_t *m = find_msg("orders", &len, i);
		capture_origin o = {capture_now_us(), 1, "127.0.0.1:1", "t"};
		capture_sink_request(c, &o, m, len, "forward", 0, NULL);
		free(m);
	}
	capture_stats now;
	capture_sink_get_stats(c, &now);
	assert_true(now.dropped > 50 && now.dropped < 100);
	assert_true(capture_sink_start(c, err, sizeof err));
	capture_stats fin;
	capture_sink_free(c, &fin);
	uint64_t total, dropped;
	size_t headers;
	scan(&total, &dropped, &headers);
	assert_int_equal(dropped, now.dropped);
	assert_int_equal(fin.records, 1 + (100 - now.dropped) + 1); /* header, kept, the gap */
	cleanup();
}

/* A capture made with the writer, read by the report: counts, a finding of
 * the sort rule against the index snapshot-less cache (no verdict), and a
 * finding of the regex rule the engine makes from the redacted request. */
static void test_report_aggregation(void **st)
{
	make_dir();
	capture_settings s;
	capture_settings_defaults(&s);
	snprintf(s.dir, sizeof s.dir, "%s", dir);
	char err[512];
	capture_sink *c = capture_sink_new(&s, "test", NULL, NULL, err, sizeof err);
	assert_true(c && capture_sink_start(c, err, sizeof err));
	for (int i = 0; i < 10; i++) {
		size_t len;
		uint8_t *m = find_msg("orders", &len, 100 + i);
		capture_origin o = {1700000000000000 + i * 1000, 3, "127.0.0.1:2", "web"};
		capture_sink_request(c, &o, m, len, "forward", 0, NULL);
		free(m);
		bson_t *rb =
		    BCON_NEW("cursor", "{", "firstBatch", "[", "{", "a", BCON_INT32(1), "}", "]",
		             "id", BCON_INT64(0), "ns", "shop.orders", "}", "ok", BCON_DOUBLE(1));
		size_t rl = 21 + rb->len;
		uint8_t *r = capture_sink_reply_buffer(c, rl);
		assert_non_null(r);
		memset(r, 0, rl);
		wire_write_i32(r, (int32_t)rl);
		wire_write_i32(r + 8, 100 + i);
		wire_write_i32(r + 12, OP_MSG);
		memcpy(r + 21, bson_get_data(rb), rb->len);
		bson_destroy(rb);
		o.t_us += 500; /* 0.5 ms later */
		capture_sink_reply(c, &o, 100 + i, rl, r);
	}
	capture_sink_free(c, NULL);
	char path[600];
	the_file(path, sizeof path);
	char json[600];
	snprintf(json, sizeof json, "%s/r.json", dir);
	const char *inputs[] = {path};
	report_options o = {.inputs = inputs, .ninputs = 1, .json = json, .quiet = true};
	unsigned long long records = 0;
	assert_true(report_run(&o, &records, err, sizeof err));
	assert_int_equal(records, 21);
	bson_error_t be;
	FILE *f = fopen(json, "rb");
	char buf[65536];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	bson_t *rep = bson_new_from_json((const uint8_t *)buf, (ssize_t)n, &be);
	assert_non_null(rep);
	bson_iter_t it;
	assert_true(bson_iter_init(&it, rep) &&
	            bson_iter_find_descendant(&it, "shapes.0.count", &it));
	assert_int_equal(bson_iter_as_int64(&it), 10);
	assert_true(bson_iter_init(&it, rep) &&
	            bson_iter_find_descendant(&it, "shapes.0.p50Ms", &it));
	assert_true(bson_iter_as_double(&it) > 0.49 && bson_iter_as_double(&it) < 0.51);
	assert_true(bson_iter_init(&it, rep) &&
	            bson_iter_find_descendant(&it, "shapes.0.docsReturned", &it));
	assert_int_equal(bson_iter_as_int64(&it), 10);
	assert_true(bson_iter_init(&it, rep) &&
	            bson_iter_find_descendant(&it, "overview.paired", &it));
	assert_int_equal(bson_iter_as_int64(&it), 10);
	/* no index list in the capture: the sort rule gives no verdict, as live */
	assert_true(
	    bson_iter_init(&it, rep) &&
	    bson_iter_find_descendant(&it, "overview.findingsPerRule.index-mismatched-sort", &it));
	assert_int_equal(bson_iter_as_int64(&it), 0);
	bson_destroy(rep);
	cleanup();
}

/* The capture file's bytes (its first 64 KiB) into buf. */
static size_t capture_bytes(uint8_t *buf, size_t cap)
{
	char path[600];
	the_file(path, sizeof path);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	size_t n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

/* The records of the one capture file in dir, in order, as "S:db.coll"
 * (a forget record; "S:db" for a whole database) or "R:coll" (a request
 * naming coll), comma-separated into out. */
static void record_order(char *out, size_t cap)
{
	static uint8_t buf[1 << 16];
	size_t n = capture_bytes(buf, sizeof buf), off = 0;
	bson_t rec;
	out[0] = '\0';
	while (capture_next(buf, n, &off, &rec) == CAPTURE_NEXT_OK) {
		bson_iter_t it;
		char one[200] = "";
		if (capture_kind(&rec) == CAPTURE_REC_FORGET) {
			bson_iter_init_find(&it, &rec, "db");
			snprintf(one, sizeof one, "S:%s", bson_iter_utf8(&it, NULL));
			if (bson_iter_init_find(&it, &rec, "coll"))
				snprintf(one + strlen(one), sizeof one - strlen(one), ".%s",
				         bson_iter_utf8(&it, NULL));
		} else if (capture_kind(&rec) == CAPTURE_REC_REQUEST &&
		           bson_iter_init_find(&it, &rec, "ns")) {
			snprintf(one, sizeof one, "R:%s", bson_iter_utf8(&it, NULL));
		}
		if (one[0])
			snprintf(out + strlen(out), cap - strlen(out), "%s%s", out[0] ? "," : "",
			         one);
	}
}

static void send_find(capture_sink *c, const char *coll, int32_t rid, uint64_t judged_at)
{
	size_t len;
	uint8_t *m = find_msg(coll, &len, rid);
	capture_origin o = {capture_now_us(), 3, "127.0.0.1:2", "web"};
	capture_sink_request(c, &o, m, len, "forward", judged_at, NULL);
	free(m);
}

/* A writer into a fresh dir, with its own index cache (*ic), whose held
 * events only a request or the stop lets out. */
static capture_sink *held_sink(index_cache **ic)
{
	make_dir();
	capture_settings s;
	capture_settings_defaults(&s);
	snprintf(s.dir, sizeof s.dir, "%s", dir);
	char err[512];
	s.event_hold_us = 600000000; /* only a request, or the stop, lets an event out */
	*ic = index_cache_new(NULL, 60, NULL, NULL, NULL, 0);
	capture_sink *c = capture_sink_new(&s, "test", NULL, *ic, err, sizeof err);
	assert_true(c && capture_sink_start(c, err, sizeof err));
	return c;
}

/* The index cache's schema changes are written where the proxy's verdicts
 * met them, not where their items fell in the queue: a request judged
 * before a change (its judged_at below the change's stamp) but queued
 * after it by its worker is written before it, so the report's replay
 * judges it with the list it was judged with and counts only the changes
 * after it against a verdict it owed. A request judged with no list
 * (judged_at 0) stays where it was queued, and a change no request
 * follows is written when the writer stops. Before stop 41 the capture
 * had no forget records: the report forgot lists at a DDL's reply,
 * queued before the cache forgot. */
static void test_schema_changes_in_judgement_order(void **st)
{
	index_cache *ic;
	capture_sink *c = held_sink(&ic);
	index_cache_invalidate(ic, "shop", "other"); /* stamp 1 */
	uint64_t before = index_cache_changes(ic);
	index_cache_invalidate(ic, "shop", "orders"); /* another worker's, stamp 2 */
	send_find(c, "a", 1, before);                 /* judged before it, queued after */
	send_find(c, "b", 2, index_cache_changes(ic));
	send_find(c, "c", 3, 0);
	index_cache_invalidate(ic, "shop", NULL); /* nothing judged after it */
	send_find(c, "d", 4, before);
	capture_sink_free(c, NULL);
	index_cache_free(ic);
	char order[1024];
	record_order(order, sizeof order);
	assert_string_equal(
	    order, "S:shop.other,R:shop.a,S:shop.orders,R:shop.b,R:shop.c,R:shop.d,S:shop");
	cleanup();
}

/* Format 4: a request's record keeps the document counts its verdict read
 * (block_info.counts), and a list's snapshot the count it landed with,
 * written once: the writes relayed after it move the proxy's estimate at
 * moments no record's place stands for (stop 43: a snapshot written with
 * the estimate of its writing held moves whose reply records came after
 * it, and the report counted them twice). */
static void test_counts_with_requests(void **st)
{
	index_cache *ic;
	capture_sink *c = held_sink(&ic);
	char err[128];
	index_set *set =
	    index_set_from_json("[{\"key\":{\"_id\":1},\"name\":\"_id_\"}]", err, sizeof err);
	assert_non_null(set);
	index_set_set_doc_count(set, 10);
	index_cache_put(ic, "shop", "orders", set);
	index_set_release(set);
	engine_counts read = {.n = 1};
	snprintf(read.at[0].ns, sizeof read.at[0].ns, "shop.orders");
	read.at[0].docs = 10;
	size_t len;
	uint8_t *m = find_msg("orders", &len, 1);
	capture_origin o = {capture_now_us(), 3, "127.0.0.1:2", "web"};
	capture_sink_request(c, &o, m, len, "forward", index_cache_changes(ic), &read);
	index_cache_note_docs(ic, "shop", "orders", 3);
	index_cache_invalidate(ic, "shop", "other"); /* the writer looks at the list again */
	read.at[0].docs = 13;
	o.t_us = capture_now_us();
	capture_sink_request(c, &o, m, len, "forward", index_cache_changes(ic), &read);
	capture_sink_request(c, &o, m, len, "forward", index_cache_changes(ic), NULL);
	free(m);
	capture_sink_free(c, NULL);
	index_cache_free(ic);

	static uint8_t buf[1 << 16];
	size_t n = capture_bytes(buf, sizeof buf), off = 0;
	bson_t rec;
	char seen[256] = "";
	while (capture_next(buf, n, &off, &rec) == CAPTURE_NEXT_OK) {
		bson_iter_t it;
		size_t at = strlen(seen);
		if (capture_kind(&rec) == CAPTURE_REC_INDEXES) {
			assert_true(bson_iter_init_find(&it, &rec, "count"));
			snprintf(seen + at, sizeof seen - at, "I%d,", (int)bson_iter_as_int64(&it));
		} else if (capture_kind(&rec) == CAPTURE_REC_REQUEST) {
			bson_iter_t ns;
			if (bson_iter_init_find(&it, &rec, "counts") &&
			    bson_iter_recurse(&it, &ns) &&
			    bson_iter_find(&ns, "shop.orders")) /* a key with a dot: not a path */
				snprintf(seen + at, sizeof seen - at, "R%d,",
				         (int)bson_iter_as_int64(&ns));
			else
				snprintf(seen + at, sizeof seen - at, "R,");
		}
	}
	assert_string_equal(seen, "I10,R10,R13,R,");
	cleanup();
}

/* An OP_MSG of body, requestID (or responseTo) id. */
static uint8_t *opmsg_of(bson_t *body, int32_t id, bool reply, size_t *len)
{
	size_t n = 21 + body->len;
	uint8_t *m = calloc(1, n);
	wire_write_i32(m, (int32_t)n);
	wire_write_i32(m + (reply ? 8 : 4), id);
	wire_write_i32(m + 12, OP_MSG);
	memcpy(m + 21, bson_get_data(body), body->len);
	bson_destroy(body);
	*len = n;
	return m;
}

/* capture.valueHashes: by default a keyed read's record keeps its values'
 * salted hashes (vh) and a parent reply's its first values' (vals); with
 * false neither is written, the header says valueHashes: false, and the
 * rest of both records is as before. */
static void test_value_hashes_left_out(void **st)
{
	for (int kept = 1; kept >= 0; kept--) {
		make_dir();
		capture_settings s;
		capture_settings_defaults(&s);
		assert_true(s.value_hashes);
		snprintf(s.dir, sizeof s.dir, "%s", dir);
		s.value_hashes = kept;
		char err[512];
		capture_sink *c = capture_sink_new(&s, "test", NULL, NULL, err, sizeof err);
		assert_true(c && capture_sink_start(c, err, sizeof err));
		capture_origin o = {capture_now_us(), 3, "127.0.0.1:2", "web"};
		size_t len;
		uint8_t *m = opmsg_of(BCON_NEW("find", "customers", "filter", "{", "_id",
		                               BCON_INT32(7), "}", "$db", "shop"),
		                      1, false, &len);
		capture_sink_request(c, &o, m, len, "forward", 0, NULL);
		free(m);
		bson_t *rb =
		    BCON_NEW("cursor", "{", "firstBatch", "[", "{", "_id", BCON_INT32(1), "cust",
		             BCON_INT32(7), "}", "{", "_id", BCON_INT32(2), "cust", BCON_INT32(8),
		             "}", "{", "_id", BCON_INT32(3), "cust", BCON_INT32(9), "}", "]", "id",
		             BCON_INT64(0), "ns", "shop.orders", "}", "ok", BCON_DOUBLE(1));
		uint8_t *tmp = opmsg_of(rb, 2, true, &len);
		uint8_t *r = capture_sink_reply_buffer(c, len);
		assert_non_null(r);
		memcpy(r, tmp, len);
		free(tmp);
		capture_sink_reply(c, &o, 2, len, r);
		capture_sink_free(c, NULL);

		static uint8_t buf[1 << 16];
		size_t n = capture_bytes(buf, sizeof buf), off = 0;
		bson_t rec;
		int headers = 0, requests = 0, replies = 0;
		while (capture_next(buf, n, &off, &rec) == CAPTURE_NEXT_OK) {
			bson_iter_t it;
			switch (capture_kind(&rec)) {
			case CAPTURE_REC_HEADER:
				headers++;
				assert_true(bson_iter_init_find(&it, &rec, "valueHashes") &&
				            BSON_ITER_HOLDS_BOOL(&it));
				assert_int_equal(bson_iter_bool(&it), kept);
				assert_int_equal(capture_header_hashes_left_out(&rec), !kept);
				break;
			case CAPTURE_REC_REQUEST:
				requests++;
				assert_int_equal(bson_iter_init_find(&it, &rec, "vh"), kept);
				assert_true(bson_iter_init_find(&it, &rec, "body"));
				break;
			case CAPTURE_REC_REPLY:
				replies++;
				assert_int_equal(bson_iter_init_find(&it, &rec, "vals"), kept);
				assert_true(bson_iter_init_find(&it, &rec, "n") &&
				            bson_iter_as_int64(&it) == 3);
				break;
			default:
				break;
			}
		}
		assert_int_equal(headers, 1);
		assert_int_equal(requests, 1);
		assert_int_equal(replies, 1);

		/* the report reads it, and names the limit when they were left out */
		char path[600], json[600], md[600];
		the_file(path, sizeof path);
		snprintf(json, sizeof json, "%s/r.json", dir);
		snprintf(md, sizeof md, "%s/r.md", dir);
		const char *inputs[] = {path};
		report_options ro = {
		    .inputs = inputs, .ninputs = 1, .json = json, .md = md, .quiet = true};
		unsigned long long records = 0;
		assert_true(report_run(&ro, &records, err, sizeof err));
		FILE *f = fopen(json, "rb");
		static char text[1 << 16];
		size_t tn = fread(text, 1, sizeof text - 1, f);
		fclose(f);
		text[tn] = '\0';
		assert_non_null(strstr(text, kept ? "\"redacted\":true,\"valueHashes\":true"
		                                  : "\"redacted\":true,\"valueHashes\":false"));
		f = fopen(md, "rb");
		tn = fread(text, 1, sizeof text - 1, f);
		fclose(f);
		text[tn] = '\0';
		assert_int_equal(strstr(text, "judged without the values") != NULL, !kept);
		cleanup();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rotation_and_cap),
	    cmocka_unit_test(test_full_queue_counts_and_gap),
	    cmocka_unit_test(test_report_aggregation),
	    cmocka_unit_test(test_schema_changes_in_judgement_order),
	    cmocka_unit_test(test_counts_with_requests),
	    cmocka_unit_test(test_value_hashes_left_out),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
