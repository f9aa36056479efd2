/* bench_report: records per second the report reads, decodes and analyses
 * on one core. Writes a synthetic capture (a header, an index snapshot,
 * then N request/reply pairs over a handful of shapes, some of which break
 * rules) with the capture format's own builders, then times report_run
 * with the JSON writer only.
 *   build/bench_report [N]   (default 500000 pairs = 1,000,002 records) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "protocol/capture.h"
#include "protocol/frame.h"
#include "report/report.h"

static void put(FILE *f, bson_t *b)
{
	fwrite(bson_get_data(b), 1, b->len, f);
	bson_destroy(b);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long pairs = argc > 1 ? atol(argv[1]) : 500000;
	char path[] = "/tmp/mg-bench-capture-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "wb");
	bson_t h, ix;
	capture_build_header(&h, "bench", "bench", true, 1700000000000000, NULL);
	put(f, &h);
	bson_t *spec[2] = {
	    BCON_NEW("v", BCON_INT32(2), "key", "{", "_id", BCON_INT32(1), "}", "name", "_id_"),
	    BCON_NEW("v", BCON_INT32(2), "key", "{", "status", BCON_INT32(1), "}", "name",
	             "status_1")};
	capture_build_indexes(&ix, 1700000000000000, "shop.orders", (const bson_t *const *)spec, 2,
	                      NULL, -1);
	put(f, &ix);
	bson_t *bodies[4] = {
	    BCON_NEW("find", "orders", "filter", "{", "_id", BCON_INT32(0), "}", "$db", "shop"),
	    BCON_NEW("find", "orders", "filter", "{", "status", "?", "}", "sort", "{", "created",
	             BCON_INT32(-1), "}", "$db", "shop"),
	    BCON_NEW("find", "users", "filter", "{", "email", BCON_REGEX("", "i"), "}", "$db",
	             "shop"),
	    BCON_NEW("update", "carts", "updates", "[", "{", "q", "{", "_id", BCON_INT32(0), "}",
	             "u", "{", "$push", "{", "items", "?", "}", "}", "}", "]", "$db", "shop"),
	};
	for (long i = 0; i < pairs; i++) {
		int64_t t = 1700000000000000 + i * 20;
		bson_t rec = BSON_INITIALIZER, rep;
		BSON_APPEND_UTF8(&rec, "k", "req");
		BSON_APPEND_INT64(&rec, "t", t);
		BSON_APPEND_INT64(&rec, "conn", 1 + i % 16);
		BSON_APPEND_UTF8(&rec, "client", "127.0.0.1:5000");
		BSON_APPEND_UTF8(&rec, "app", i % 3 ? "web" : "worker");
		BSON_APPEND_INT32(&rec, "rid", (int32_t)i);
		BSON_APPEND_UTF8(&rec, "db", "shop");
		BSON_APPEND_DOCUMENT(&rec, "body", bodies[i % 4]);
		put(f, &rec);
		capture_origin o = {t + 300, (uint64_t)(1 + i % 16), "", ""};
		capture_reply_facts fa = {.read = true, .ok = true, .n = 1};
		capture_build_reply(&rep, &o, (int32_t)i, 200, &fa);
		put(f, &rep);
	}
	fclose(f);
	const char *inputs[] = {path};
	report_options o = {.inputs = inputs, .ninputs = 1, .json = "/dev/null", .quiet = true};
	unsigned long long records = 0;
	char err[256];
	double t0 = now_s();
	bool ok = report_run(&o, &records, err, sizeof err);
	double dt = now_s() - t0;
	unlink(path);
	if (!ok) {
		fprintf(stderr, "bench_report: %s\n", err);
		return 1;
	}
	printf("bench_report: %llu records in %.2f s: %.0f records/s (one thread)\n", records, dt,
	       (double)records / dt);
	for (int i = 0; i < 4; i++)
		bson_destroy(bodies[i]);
	bson_destroy(spec[0]);
	bson_destroy(spec[1]);
	return 0;
}
