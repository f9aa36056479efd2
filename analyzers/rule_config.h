/* Rule actions, scopes and parameters, as the YAML config states them.
 * Plain data: the proxy's config loader fills it, the engine reads it. The
 * rules themselves (ids, names, parameter descriptors) are in rules.h. */
#ifndef MG_ANALYZERS_RULE_CONFIG_H
#define MG_ANALYZERS_RULE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzers/rules.h"

typedef enum {
	RULE_OFF,
	RULE_LOG,
	RULE_BLOCK,
} rule_action;

#define RULE_MAX_SCOPES   16
#define RULE_MAX_PATTERNS 16
#define RULE_PATTERN_LEN  128

/* A scope overrides a rule's action for matching requests. A request matches
 * when its namespace matches one of `namespaces` (fnmatch-style globs on
 * "db.collection"; none listed = any) and its client application name
 * matches one of `apps` (globs; none listed = any). First match wins. */
typedef struct rule_scope {
	char namespaces[RULE_MAX_PATTERNS][RULE_PATTERN_LEN];
	size_t nnamespaces;
	char apps[RULE_MAX_PATTERNS][RULE_PATTERN_LEN];
	size_t napps;
	rule_action action;
} rule_scope;

typedef struct rule_config {
	rule_action action; /* when no scope matches */
	rule_scope scopes[RULE_MAX_SCOPES];
	size_t nscopes;
	/* The rule's parameters, by slot (rule_param.slot in the rule's table
	 * row); rule_config_defaults() sets each to its default. */
	uint32_t params[RULE_MAX_PARAMS];
} rule_config;

typedef struct engine_config {
	rule_config rules[RULE_COUNT];
	bool redact_literals;   /* default true: no application value reaches a log */
	uint32_t index_wait_ms; /* longest a request waits for an index list */
} engine_config;

/* Defaults: every rule `log` with its parameters' defaults, redaction on. */
void rule_config_defaults(engine_config *cfg);

const char *rule_action_name(rule_action a);
int rule_action_from_name(const char *name);

/* The action for a request on ns from app, after scopes. */
rule_action rule_effective_action(const rule_config *rc, const char *ns, const char *app);

#endif
