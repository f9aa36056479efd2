/* libFuzzer target: the input is a capture file, read as `mongoguard
 * report` reads one (proxy/report/report.c read_file): capture_next record
 * by record, the first checked by capture_check_header, every record
 * through the aggregator's two passes (index snapshots, then requests
 * rebuilt by capture_request_message, decoded and judged, and replies),
 * then the model rendered by the three writers. The bytes are a private
 * heap copy of the input's exact size (the report maps the file, where a
 * read past the end would go unseen), and the JSON report must parse. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/capture.h"
#include "proxy/report/aggregate.h"
#include "proxy/report/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One pass over the records; false when the file is refused. */
static bool pass(aggregator *a, const uint8_t *p, size_t len, int n)
{
	size_t off = 0;
	bson_t rec;
	for (bool first = true;; first = false) {
		size_t at = off;
		capture_next_status st = capture_next(p, len, &off, &rec);
		if (st != CAPTURE_NEXT_OK) {
			if (off != at)
				abort(); /* *off moves only past a whole record */
			return true;
		}
		if (off <= at || off > len || rec.len != off - at)
			abort();
		char err[512];
		if (first && !capture_check_header(&rec, err, sizeof err)) {
			if (strnlen(err, sizeof err) == 0 || strnlen(err, sizeof err) == sizeof err)
				abort();
			return false;
		}
		aggregator_record(a, n, &rec);
	}
}

static void render(const model *m)
{
	static FILE *null;
	if (!null && !(null = fopen("/dev/null", "w")))
		abort();
	if (!report_write_html(m, null) || !report_write_md(m, null))
		abort();
	char *json = NULL;
	size_t json_len = 0;
	FILE *f = open_memstream(&json, &json_len);
	if (!f)
		abort();
	bool ok = report_write_json(m, f);
	if (fclose(f) != 0 || !ok)
		abort();
	bson_t b;
	bson_error_t err;
	if (!bson_init_from_json(&b, json, (ssize_t)json_len, &err)) {
		fprintf(stderr, "report JSON does not parse: %s\n%.*s\n", err.message,
		        (int)(json_len < 4000 ? json_len : 4000), json);
		abort();
	}
	bson_destroy(&b);
	free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size ? size : 1);
	if (!p)
		return 0;
	memcpy(p, data, size);
	model m;
	memset(&m, 0, sizeof m);
	m.inputs = calloc(1, sizeof *m.inputs);
	aggregator *a = m.inputs ? aggregator_new(&m) : NULL;
	if (!a)
		abort();
	m.ninputs = 1;
	m.redacted = true;
	if (pass(a, p, size, 1) && pass(a, p, size, 2)) {
		aggregator_finish(a);
		render(&m);
	}
	aggregator_free(a);
	model_free(&m);
	free(p);
	return 0;
}
