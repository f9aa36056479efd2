/* The rules a capture ran with (its header), as the report's engines
 * judge with them: every action at most `log` (the report blocks
 * nothing), --rule's overrides applied (model.overrides keeps the
 * capture's value), and the quiet engine's rules (aggregate.c). Split
 * from aggregate.c. */
#include <string.h>

#include "analyzers/engine/engine.h"
#include "analyzers/rules/rules.h"
#include "report/aggregate_parts.h"

/* --rule (model.overrides): each in place of the capture's, whose value
 * is kept for the report's header. */
static void apply_overrides(model *m, engine_config *cfg)
{
	for (size_t i = 0; i < m->noverrides; i++) {
		model_override *o = &m->overrides[i];
		rule_config *rc = &cfg->rules[o->rule];
		if (o->param < 0) {
			o->capture = rc->action;
			rc->action = (rule_action)o->value;
		} else {
			unsigned slot = rule_table[o->rule]->params[o->param].slot;
			o->capture = rc->params[slot];
			rc->params[slot] = o->value;
		}
	}
}

/* The quiet engine's rules: those with a quiet_below parameter above 0,
 * at log with it at 0; every other rule off. */
static void quiet_rules(model *m, const engine_config *cfg, engine_config *quiet,
                        uint32_t *quiet_max)
{
	*quiet = *cfg;
	*quiet_max = 0;
	for (int r = 0; r < RULE_COUNT; r++) {
		const rule_def *d = rule_table[r];
		const rule_param *p = d->quiet_below ? rule_param_find(d, d->quiet_below) : NULL;
		rule_config *rc = &quiet->rules[r];
		uint32_t v = p ? cfg->rules[r].params[p->slot] : 0;
		if (!p || cfg->rules[r].action == RULE_OFF || v == 0) {
			rc->action = RULE_OFF;
			continue;
		}
		m->quiet_below[r] = v;
		rc->action = RULE_LOG;
		rc->nscopes = 0;
		rc->params[p->slot] = 0;
		if (v > *quiet_max)
			*quiet_max = v;
	}
}

/* The rules the capture ran with (its header), every action at most
 * `log`: the report judges, it blocks nothing. */
void agg_rules_from_header(model *m, const bson_t *h, engine_config *cfg, engine_config *quiet,
                           uint32_t *quiet_max)
{
	bson_iter_t it, r, p;
	rule_config_defaults(cfg);
	cfg->redact_literals = true;
	if (bson_iter_init_find(&it, h, "rules") && bson_iter_recurse(&it, &r))
		while (bson_iter_next(&r)) {
			int id = rule_from_name(bson_iter_key(&r));
			if (id < 0 || !bson_iter_recurse(&r, &p))
				continue;
			rule_config *rc = &cfg->rules[id];
			while (bson_iter_next(&p)) {
				const char *k = bson_iter_key(&p);
				if (!strcmp(k, "action") && BSON_ITER_HOLDS_UTF8(&p)) {
					int act = rule_action_from_name(bson_iter_utf8(&p, NULL));
					if (act >= 0)
						rc->action = act == RULE_OFF ? RULE_OFF : RULE_LOG;
				} else {
					const rule_param *pd = rule_param_find(rule_table[id], k);
					if (pd && BSON_ITER_HOLDS_NUMBER(&p))
						rc->params[pd->slot] =
						    (uint32_t)bson_iter_as_int64(&p);
				}
			}
		}
	apply_overrides(m, cfg);
	quiet_rules(m, cfg, quiet, quiet_max);
}
