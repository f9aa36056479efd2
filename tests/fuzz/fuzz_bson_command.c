/* libFuzzer target: the input is a BSON command body, optionally followed by
 * raw OP_MSG sections (kind-1 sequences), made into an OP_MSG by
 * fz_body_view (fuzz_common.h) and put through the same parse + analysis as
 * a real request. Starting from a document instead of a frame gets the
 * fuzzer to the analyzers' deep paths (filters, updates, pipelines, sorts)
 * much sooner. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Differential: an engine that matches a batch's statements against a
 * template (analysers.c) and a query against the connection's repeat
 * (engine.h; one slot kept across inputs, as a connection keeps it across
 * its requests), and one that reads every statement and every query
 * (no_templates, no slot), both every rule at block with the index cache,
 * must give every request the same verdict and send the same findings. */
static engine *fz_tmpl[2];
static size_t fz_tmpl_total[2];
static engine_repeat *fz_repeat;

static void fz_templates_same(const cmdview *v)
{
	if (!fz_tmpl[0]) {
		engine_config cfg;
		fz_config(&cfg, -1);
		fz_setup_cache();
		for (int i = 0; i < 2; i++) {
			cfg.no_templates = i == 1;
			fz_tmpl[i] = engine_new(&cfg, fz_ic, fz_sink, &fz_tmpl_total[i]);
		}
	}
	request_ctx rc = {
	    .app_name = "", .client = "127.0.0.1:1", .now_ms = fz_clock, .no_wait = true};
	block_info b[2];
	verdict r[2];
	for (int i = 0; i < 2; i++) {
		rc.repeat = i == 0 ? &fz_repeat : NULL;
		r[i] = engine_analyze(fz_tmpl[i], v, &rc, &b[i]);
	}
	if (r[0] != r[1] || fz_tmpl_total[0] != fz_tmpl_total[1] ||
	    (r[0] == VERDICT_BLOCK && b[0].rule != b[1].rule))
		abort(); /* a template changed what the engine decided */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	opmsg m;
	cmdview v;
	uint8_t *msg = fz_body_view(data, size, &m, &v);
	if (msg) {
		fz_walk_docs(&v);
		fz_analyze(&v);
		fz_templates_same(&v);
	}
	free(msg);
	return 0;
}
