/* --rule RULE.PARAM=VALUE and --rule RULE=off|log (report.h): the
 * report judges a capture with other rule parameters than the capture's
 * header names. Validated as the configuration loader validates a rule's
 * mapping, from the rule table alone (rules.h: names, parameters and
 * their bounds). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/engine/rule_config.h"
#include "report/report.h"

static void rule_names(char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = '\0';
	for (int r = 0; r < RULE_COUNT && n < cap; r++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", r ? ", " : "", rule_table[r]->name);
}

static void param_names(const rule_def *d, char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < d->nparams && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", d->params[i].name);
}

/* A whole number from p->min to p->max, written in decimal. */
static bool param_value(const rule_param *p, const char *s, uint32_t *out)
{
	char *end;
	errno = 0;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return false;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < p->min || v > p->max)
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool action_value(const char *spec, const char *rule, const char *v, model_override *o,
                         char *err, size_t errlen)
{
	int a = rule_action_from_name(v);
	if (a != RULE_OFF && a != RULE_LOG) {
		snprintf(err, errlen,
		         "--rule %s: the action of %s must be off or log (the report blocks "
		         "nothing)",
		         spec, rule);
		return false;
	}
	o->param = -1;
	o->value = (uint32_t)a;
	return true;
}

bool report_rule_parse(const char *spec, model_override *o, char *err, size_t errlen)
{
	char rule[64], names[512];
	const char *eq = strchr(spec, '='), *dot = strchr(spec, '.');
	if (dot && eq && dot > eq)
		dot = NULL;
	size_t rl = dot ? (size_t)(dot - spec) : eq ? (size_t)(eq - spec) : 0;
	if (!eq || !rl || rl >= sizeof rule) {
		snprintf(err, errlen, "--rule %s: expected RULE.PARAMETER=VALUE or RULE=off|log",
		         spec);
		return false;
	}
	memcpy(rule, spec, rl);
	rule[rl] = '\0';
	int id = rule_from_name(rule);
	if (id < 0) {
		rule_names(names, sizeof names);
		snprintf(err, errlen, "--rule %s: unknown rule '%s' (rules: %s)", spec, rule,
		         names);
		return false;
	}
	o->rule = (rule_id)id;
	if (!dot)
		return action_value(spec, rule, eq + 1, o, err, errlen);
	const rule_def *d = rule_table[id];
	char param[64];
	size_t pl = (size_t)(eq - dot - 1);
	snprintf(param, sizeof param, "%.*s", (int)(pl < sizeof param ? pl : sizeof param - 1),
	         dot + 1);
	const rule_param *p = rule_param_find(d, param);
	if (!p) {
		param_names(d, names, sizeof names);
		if (d->nparams)
			snprintf(err, errlen,
			         "--rule %s: %s has no parameter '%s' (parameters: %s)", spec, rule,
			         param, names);
		else
			snprintf(err, errlen, "--rule %s: %s has no parameters (only RULE=off|log)",
			         spec, rule);
		return false;
	}
	if (!param_value(p, eq + 1, &o->value)) {
		snprintf(err, errlen,
		         "--rule %s: %s.%s must be a whole number from %" PRIu32 " to %" PRIu32,
		         spec, rule, param, p->min, p->max);
		return false;
	}
	o->param = (int)(p - d->params);
	return true;
}

/* "collection-scan.minDocuments" or "unbounded-push" (the action). */
static void override_name(text_buf *t, const model_override *o)
{
	text_str(t, rule_name(o->rule));
	if (o->param >= 0)
		text_printf(t, ".%s", rule_table[o->rule]->params[o->param].name);
}

static void override_value(text_buf *t, const model_override *o, uint32_t v)
{
	if (o->param >= 0)
		text_printf(t, "%" PRIu32, v);
	else
		text_str(t, rule_action_name((rule_action)v));
}

size_t report_overrides_words(text_buf *t, const model *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->noverrides; i++) {
		const model_override *o = &m->overrides[i];
		if (o->value == o->capture)
			continue;
		text_str(t, n++ ? ", " : "");
		override_name(t, o);
		text_char(t, '=');
		override_value(t, o, o->value);
		text_str(t, " (the capture's: ");
		override_value(t, o, o->capture);
		text_char(t, ')');
	}
	return n;
}

void report_overrides_json(text_buf *t, const model *m)
{
	size_t n = 0;
	text_str(t, "\"judgedWith\":[");
	for (size_t i = 0; i < m->noverrides; i++) {
		const model_override *o = &m->overrides[i];
		if (o->value == o->capture)
			continue;
		text_printf(t, "%s{\"rule\":\"%s\",\"parameter\":", n++ ? "," : "",
		            rule_name(o->rule));
		if (o->param >= 0)
			text_printf(t, "\"%s\",\"value\":%" PRIu32 ",\"capture\":%" PRIu32 "}",
			            rule_table[o->rule]->params[o->param].name, o->value,
			            o->capture);
		else
			text_printf(t, "null,\"value\":\"%s\",\"capture\":\"%s\"}",
			            rule_action_name((rule_action)o->value),
			            rule_action_name((rule_action)o->capture));
	}
	text_char(t, ']');
}
