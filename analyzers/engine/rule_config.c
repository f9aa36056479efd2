/* Rule actions and scopes: the names the YAML config and the log use, and
 * the one function that decides a rule's action for a request. */
#include "analyzers/engine/rule_config.h"

#include <fnmatch.h>
#include <string.h>

static const char *const action_names[] = {
    [RULE_OFF] = "off",
    [RULE_LOG] = "log",
    [RULE_DRY_RUN] = "dry-run",
    [RULE_BLOCK] = "block",
};

void rule_config_defaults(engine_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (int i = 0; i < RULE_COUNT; i++) {
		cfg->rules[i].action = RULE_LOG;
		const rule_def *d = rule_table[i];
		for (size_t p = 0; p < d->nparams; p++)
			cfg->rules[i].params[d->params[p].slot] = d->params[p].def;
	}
	cfg->redact_literals = true;
	cfg->index_wait_ms = 1000;
}

const char *rule_action_name(rule_action a)
{
	if ((int)a < 0 || a > RULE_BLOCK)
		return "unknown-action";
	return action_names[a];
}

int rule_action_from_name(const char *name)
{
	if (!name)
		return -1;
	for (int i = RULE_OFF; i <= RULE_BLOCK; i++)
		if (strcmp(name, action_names[i]) == 0)
			return i;
	return -1;
}

/* An empty list matches anything; otherwise one glob must match. fnmatch
 * without FNM_PERIOD or FNM_PATHNAME: "*" crosses the dot in "db.coll", so
 * "shop.*" and "*.orders" both do what a reader expects. */
static bool any_glob(const char (*patterns)[RULE_PATTERN_LEN], size_t n, const char *s)
{
	if (n == 0)
		return true;
	for (size_t i = 0; i < n && i < RULE_MAX_PATTERNS; i++)
		if (fnmatch(patterns[i], s, 0) == 0)
			return true;
	return false;
}

rule_action rule_effective(const rule_config *rc, const char *ns, const char *app, uint8_t *sample)
{
	if (!ns)
		ns = "";
	if (!app)
		app = "";
	for (size_t i = 0; i < rc->nscopes && i < RULE_MAX_SCOPES; i++) {
		const rule_scope *s = &rc->scopes[i];
		if (any_glob(s->namespaces, s->nnamespaces, ns) &&
		    any_glob(s->apps, s->napps, app)) {
			if (sample)
				*sample = s->sample;
			return s->action;
		}
	}
	if (sample)
		*sample = rc->sample;
	return rc->action;
}

rule_action rule_effective_action(const rule_config *rc, const char *ns, const char *app)
{
	return rule_effective(rc, ns, app, NULL);
}

bool rule_can_block(const rule_config *rc)
{
	if (rc->action == RULE_BLOCK)
		return true;
	for (size_t i = 0; i < rc->nscopes && i < RULE_MAX_SCOPES; i++)
		if (rc->scopes[i].action == RULE_BLOCK)
			return true;
	return false;
}
