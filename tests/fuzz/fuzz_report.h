/* Shared by the offline report's fuzz targets (fuzz_capture,
 * fuzz_report_diff): a capture file read as `mongoguard report` reads one
 * (report/report.c read_file), into a model. */
#ifndef MG_TESTS_FUZZ_REPORT_H
#define MG_TESTS_FUZZ_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/capture.h"
#include "report/aggregate.h"
#include "report/model.h"

/* One pass over the records: capture_next record by record, the first
 * checked by capture_check_header, each given to the aggregator. False
 * when the file is refused. */
static inline bool fzr_pass(aggregator *a, const uint8_t *p, size_t len, int n)
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

/* The model of one capture file's bytes: both passes over a private heap
 * copy of exactly len bytes (the report maps the file, where a read past
 * the end would go unseen), then aggregator_finish. False when the file is
 * refused (m is then only to be freed). Free m with model_free. */
static inline bool fzr_model(model *m, const uint8_t *data, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);
	if (!p)
		abort();
	memcpy(p, data, len);
	memset(m, 0, sizeof *m);
	m->inputs = calloc(1, sizeof *m->inputs);
	aggregator *a = m->inputs ? aggregator_new(m) : NULL;
	if (!a)
		abort();
	m->ninputs = 1;
	m->redacted = true;
	bool ok = fzr_pass(a, p, len, 1) && fzr_pass(a, p, len, 2);
	if (ok)
		aggregator_finish(a);
	aggregator_free(a);
	free(p);
	return ok;
}

#endif
