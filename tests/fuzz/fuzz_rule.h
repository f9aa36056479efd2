/* The per-rule targets (fuzz_rule_*.c): one rule alone, at block, judging
 * command bodies (fz_body_view's input) through the engine, with the fuzz
 * index cache (fuzz_common.h) so the index-aware rules (sort,
 * collection-scan) have facts to judge with. Alone, a rule gets every
 * execution, and the sink and verdict checks prove that no other rule runs
 * while it is the only one on. Each target is FZ_RULE_TARGET(id). */
#ifndef MG_TESTS_FUZZ_RULE_H
#define MG_TESTS_FUZZ_RULE_H

#include <stdint.h>
#include <stdlib.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fz_rule_one(rule_id rule, const uint8_t *data, size_t size)
{
	static engine *e;
	if (!e) {
		engine_config cfg;
		fz_config(&cfg, (int)rule);
		fz_only_rule = (int)rule;
		fz_setup_cache();
		e = engine_new(&cfg, fz_ic, fz_sink, &fz_sink_total);
	}
	opmsg m;
	cmdview v;
	uint8_t *msg = fz_body_view(data, size, &m, &v);
	if (msg)
		fz_run(&e, 1, &v);
	free(msg);
	return 0;
}

#define FZ_RULE_TARGET(rule)                                                                       \
	int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)                               \
	{                                                                                          \
		return fz_rule_one(rule, data, size);                                              \
	}

#endif
