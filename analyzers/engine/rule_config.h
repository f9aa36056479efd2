/* Rule actions, scopes and parameters, as the YAML config states them.
 * Plain data: the proxy's config loader fills it, the engine reads it. The
 * rules themselves (ids, names, parameter descriptors) are in rules.h. */
#ifndef MG_ANALYZERS_ENGINE_RULE_CONFIG_H
#define MG_ANALYZERS_ENGINE_RULE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzers/rules/rules.h"

/* Ordered: a later action does more. dry-run forwards, and reports the
 * request as "would have been blocked" with the message a block sends. */
typedef enum {
	RULE_OFF,
	RULE_LOG,
	RULE_DRY_RUN,
	RULE_BLOCK,
} rule_action;

/* `sample` of a block: the share of query shapes (in percent) that are
 * really blocked; the others are treated as dry-run. Chosen by the shape's
 * hash, so one shape is always treated the same way. */
#define RULE_SAMPLE_ALL 100

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
	uint8_t sample; /* percent of shapes a block blocks; 0 (unset) or 100: every one */
} rule_scope;

typedef struct rule_config {
	rule_action action; /* when no scope matches */
	uint8_t sample;     /* the same, for `action` (0: unset, every one) */
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
	/* Every statement of a batch read on its own, none matched against the
	 * one before it (protocol/byte_template.h): for tests that compare
	 * the two. Not a configuration key. */
	bool no_templates;
} engine_config;

/* Defaults: every rule `log` with its parameters' defaults, redaction on. */
void rule_config_defaults(engine_config *cfg);

const char *rule_action_name(rule_action a);
int rule_action_from_name(const char *name);

/* The action for a request on ns from app, after scopes; *sample (may be
 * NULL) gets the matching scope's or the rule's sample. */
rule_action rule_effective(const rule_config *rc, const char *ns, const char *app, uint8_t *sample);
rule_action rule_effective_action(const rule_config *rc, const char *ns, const char *app);

/* True when the rule's action or any scope's is block, for some request.
 * The one answer to "could this rule block anything": the engine asks it
 * for engine_may_block and for a query naming its collection by UUID. */
bool rule_can_block(const rule_config *rc);

/* Whether a block of the shape with this hash really blocks under sample. */
static inline bool rule_sampled_in(uint64_t shape_hash, uint8_t sample)
{
	return sample == 0 || sample >= RULE_SAMPLE_ALL || shape_hash % 100 < sample;
}

#endif
