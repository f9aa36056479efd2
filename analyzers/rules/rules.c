/* The rule table (rules.h). One row per rule file. */
#include "analyzers/rules/rules.h"

#include <string.h>

extern const rule_def rule_regex_def;
extern const rule_def rule_push_def;
extern const rule_def rule_lookup_def;
extern const rule_def rule_sort_def;
extern const rule_def rule_scan_def;
extern const rule_def rule_doc_def;
extern const rule_def rule_join_def;

const rule_def *const rule_table[RULE_COUNT] = {
    [RULE_CASE_INSENSITIVE_REGEX] = &rule_regex_def, [RULE_UNBOUNDED_PUSH] = &rule_push_def,
    [RULE_HOT_PATH_LOOKUP] = &rule_lookup_def,       [RULE_INDEX_MISMATCHED_SORT] = &rule_sort_def,
    [RULE_COLLECTION_SCAN] = &rule_scan_def,         [RULE_LARGE_DOCUMENT] = &rule_doc_def,
    [RULE_CLIENT_SIDE_JOIN] = &rule_join_def,
};

const char *rule_name(rule_id id)
{
	if ((int)id < 0 || id >= RULE_COUNT)
		return "unknown-rule";
	return rule_table[id]->name;
}

int rule_from_name(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < RULE_COUNT; i++)
		if (strcmp(name, rule_table[i]->name) == 0)
			return i;
	return -1;
}

const rule_param *rule_param_find(const rule_def *d, const char *name)
{
	for (size_t i = 0; i < d->nparams; i++)
		if (strcmp(d->params[i].name, name) == 0)
			return &d->params[i];
	return NULL;
}
