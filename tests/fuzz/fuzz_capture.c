/* libFuzzer target: the input is a capture file, read as `mongoguard
 * report` reads one (report/report.c read_file): capture_next record
 * by record, the first checked by capture_check_header, every record
 * through the aggregator's two passes (index snapshots, then requests
 * rebuilt by capture_request_message, decoded and judged, and replies),
 * then the model rendered by the three writers. The bytes are a private
 * heap copy of the input's exact size (the report maps the file, where a
 * read past the end would go unseen), and the JSON report must be strict
 * JSON (json_check.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_report.h"
#include "tests/fuzz/json_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void render(const model *m)
{
	static FILE *null;
	if (!null && !(null = fopen("/dev/null", "w")))
		abort();
	if (!report_write_html(m, null) || !report_write_md(m, null))
		abort();
	char *json = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&json, &len);
	if (!f)
		abort();
	bool ok = report_write_json(m, f);
	if (fclose(f) != 0 || !ok)
		abort();
	/* strict JSON, but not read with libbson: its Extended JSON reading
	 * refuses an app named "$regex" among the "apps" keys */
	json_must_check("report JSON", json, len, JC_DUP_KEYS_OK);
	free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	model m;
	if (fzr_model(&m, data, size))
		render(&m);
	model_free(&m);
	return 0;
}
