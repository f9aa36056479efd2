/* What validating a document costs: the structural check
 * (wire_doc_validate) against the path it replaced (an explicit-stack
 * depth walk with bson_iter_*, then bson_validate(BSON_VALIDATE_NONE)),
 * on four documents:
 *
 *   (a) 1 MiB of many short strings (an insert of small fields),
 *   (b) 1 MiB holding one big string,
 *   (c) a 16 MB document of sub-documents (a maximal insert),
 *   (d) a typical small command body (find with filter, sort, lsid, $db).
 *
 * Each figure is the median over 9 runs of the mean time per call over a
 * run of at least ~50 ms. No pass/fail: the figures go into reports.
 *
 *   bench_validate */
#include <bson/bson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "protocol/wire_doc.h"

/* The old path, as protocol/wire_doc.c had it. */
typedef struct level {
	bson_iter_t it;
} level;

static bool depth_ok(const uint8_t *p, size_t len)
{
	level stack[WIRE_MAX_BSON_DEPTH + 1];
	int top = 0;
	if (!bson_iter_init_from_data(&stack[0].it, p, len))
		return true;
	for (;;) {
		bson_iter_t *it = &stack[top].it;
		if (!bson_iter_next(it)) {
			if (top == 0)
				return true;
			top--;
			continue;
		}
		bson_type_t t = bson_iter_type(it);
		if (t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_ARRAY && t != BSON_TYPE_CODEWSCOPE)
			continue;
		if (top == WIRE_MAX_BSON_DEPTH)
			return false;
		bool entered;
		if (t == BSON_TYPE_CODEWSCOPE) {
			uint32_t code_len, scope_len;
			const uint8_t *scope;
			bson_iter_codewscope(it, &code_len, &scope_len, &scope);
			entered = bson_iter_init_from_data(&stack[top + 1].it, scope, scope_len);
		} else {
			entered = bson_iter_recurse(it, &stack[top + 1].it);
		}
		if (entered)
			top++;
	}
}

static bool old_validate(const uint8_t *p, size_t len)
{
	bson_t b;
	size_t off;
	return depth_ok(p, len) && bson_init_static(&b, p, len) &&
	       bson_validate(&b, BSON_VALIDATE_NONE, &off);
}

static bool new_validate(const uint8_t *p, size_t len)
{
	wire_error err;
	return wire_doc_validate(p, len, &err, "bench document");
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median of 9 runs of ns per call. */
static double time_ns(bool (*fn)(const uint8_t *, size_t), const bson_t *d)
{
	const uint8_t *p = bson_get_data(d);
	size_t len = d->len;
	long iters = 1;
	for (;;) { /* calibrate to ~50 ms per run */
		double t0 = now();
		for (long i = 0; i < iters; i++)
			if (!fn(p, len))
				abort();
		if (now() - t0 > 0.05)
			break;
		iters *= 2;
	}
	double runs[9];
	for (int r = 0; r < 9; r++) {
		double t0 = now();
		for (long i = 0; i < iters; i++)
			if (!fn(p, len))
				abort();
		runs[r] = (now() - t0) * 1e9 / (double)iters;
	}
	qsort(runs, 9, sizeof runs[0], cmp);
	return runs[4];
}

static bson_t *short_strings(size_t target)
{
	bson_t *d = bson_new();
	char key[16];
	for (int i = 0; d->len < target - 32; i++) {
		snprintf(key, sizeof key, "f%d", i % 1000);
		BSON_APPEND_UTF8(d, key, "abcdefgh");
	}
	return d;
}

static bson_t *one_string(size_t target)
{
	bson_t *d = bson_new();
	size_t n = target - 32;
	char *s = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		s[i] = (char)('a' + i % 26);
	s[n] = 0;
	bson_append_utf8(d, "s", 1, s, (int)n);
	free(s);
	return d;
}

/* {documents: [{_id, name, qty, tags: [..], addr: {..}}, ...]} */
static bson_t *big_insert(size_t target)
{
	bson_t *d = bson_new(), arr, sub, tags, addr;
	char key[16];
	BSON_APPEND_UTF8(d, "insert", "orders");
	BSON_APPEND_ARRAY_BEGIN(d, "documents", &arr);
	/* an open child's length is not in d->len until it closes */
	for (int i = 0; arr.len < target - 512; i++) {
		snprintf(key, sizeof key, "%d", i);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &sub);
		BSON_APPEND_INT32(&sub, "_id", i);
		BSON_APPEND_UTF8(&sub, "name", "customer name here");
		BSON_APPEND_DOUBLE(&sub, "qty", 3.5);
		BSON_APPEND_ARRAY_BEGIN(&sub, "tags", &tags);
		BSON_APPEND_UTF8(&tags, "0", "red");
		BSON_APPEND_UTF8(&tags, "1", "blue");
		bson_append_array_end(&sub, &tags);
		BSON_APPEND_DOCUMENT_BEGIN(&sub, "addr", &addr);
		BSON_APPEND_UTF8(&addr, "city", "Springfield");
		BSON_APPEND_INT32(&addr, "zip", 12345);
		bson_append_document_end(&sub, &addr);
		bson_append_document_end(&arr, &sub);
	}
	bson_append_array_end(d, &arr);
	BSON_APPEND_UTF8(d, "$db", "shop");
	return d;
}

static bson_t *small_command(void)
{
	bson_error_t e;
	bson_t *d = bson_new_from_json(
	    (const uint8_t
	         *)"{\"find\":\"orders\",\"filter\":{\"status\":\"A\",\"qty\":{\"$gt\":5}},"
	           "\"sort\":{\"created\":-1},\"limit\":20,\"lsid\":{\"id\":{\"$binary\":{"
	           "\"base64\":\"AAAAAAAAAAAAAAAAAAAAAA==\",\"subType\":\"04\"}}},"
	           "\"$clusterTime\":{\"clusterTime\":{\"$timestamp\":{\"t\":1,\"i\":1}}},"
	           "\"$db\":\"shop\"}",
	    -1, &e);
	if (!d)
		abort();
	return d;
}

int main(void)
{
	struct {
		const char *name;
		bson_t *doc;
	} cases[] = {
	    {"(a) 1 MiB, short strings", short_strings(1 << 20)},
	    {"(b) 1 MiB, one string", one_string(1 << 20)},
	    {"(c) 16 MB insert", big_insert(16 * 1000 * 1000)},
	    {"(d) small find body", small_command()},
	};
	printf("%-26s %10s %14s %10s %14s %10s %8s\n", "document", "bytes", "old ns/call",
	       "old MB/s", "new ns/call", "new MB/s", "speedup");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const bson_t *d = cases[i].doc;
		double o = time_ns(old_validate, d), n = time_ns(new_validate, d);
		printf("%-26s %10u %14.0f %10.0f %14.0f %10.0f %7.1fx\n", cases[i].name, d->len, o,
		       (double)d->len / o * 1e3, n, (double)d->len / n * 1e3, o / n);
		bson_destroy(cases[i].doc);
	}
	return 0;
}
