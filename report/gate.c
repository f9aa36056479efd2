/* --fail-on (model.h, report_gate): which findings make the report exit 1. */
#include <stdio.h>
#include <string.h>

#include "report/model.h"

bool report_gate_parse(const char *spec, report_gate *g, char *err, size_t errlen)
{
	*g = (report_gate){.on = true};
	if (!strcmp(spec, "any")) {
		g->any = true;
		return true;
	}
	if (!strcmp(spec, "new")) {
		g->only_new = true;
		return true;
	}
	char buf[512];
	if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) {
		/* cut, the list would lose its last ids without a word */
		snprintf(err, errlen, "--fail-on: the list is longer than %zu bytes",
		         sizeof buf - 1);
		return false;
	}
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int r = rule_from_name(t);
		if (r < 0) {
			snprintf(err, errlen,
			         "--fail-on %s: \"%s\" is not new, any or a rule id (see "
			         "mongoguard --help)",
			         spec, t);
			return false;
		}
		g->rules |= 1u << r;
	}
	if (!g->rules) {
		snprintf(err, errlen, "--fail-on needs new, any or a list of rule ids");
		return false;
	}
	return true;
}

bool report_gate_matches(const report_gate *g, const model *m, size_t i)
{
	if (!g->on)
		return false;
	if (g->any)
		return true;
	if (g->rules && !(g->rules & (1u << m->findings[i].rule)))
		return false;
	return model_finding_is_new(m, i);
}
