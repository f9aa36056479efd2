/* The rule table: one row per rule, each row defined by the rule's own file
 * (rule_regex.c, rule_push.c, rule_lookup.c, rule_sort.c, rule_scan.c,
 * rule_doc.c, rule_join.c), which owns its id, its one-line summary, its parameters,
 * its check and its words, the report's included.
 *
 * Everything that lists rules reads this table: the engine (which checks to
 * run), the config loader (rule names, parameters and their bounds), the
 * --help text, the offline report (each rule's fix, profile row, array
 * evidence, index classification and design pattern: the report names no
 * rule; scripts/check_rule_ids.py keeps it so).
 * Adding a rule is one file, one rule_id value here and one row in
 * rules.c.
 *
 * Plain data: no libbson, no libyaml. The checks' side of a row is in
 * analyzers/rules/rule_api.h, which only the engine and the rule files read. */
#ifndef MG_ANALYZERS_RULES_RULES_H
#define MG_ANALYZERS_RULES_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The order is the order checks run in for one part of a request, and the
 * order --help and the start-up log list the rules. */
typedef enum {
	RULE_CASE_INSENSITIVE_REGEX,
	RULE_UNBOUNDED_PUSH,
	RULE_HOT_PATH_LOOKUP,
	RULE_INDEX_MISMATCHED_SORT,
	RULE_COLLECTION_SCAN,
	RULE_LARGE_DOCUMENT,
	RULE_CLIENT_SIDE_JOIN,
	RULE_COUNT,
} rule_id;

/* Parameter slots per rule (rule_config.params). */
#define RULE_MAX_PARAMS 4

typedef enum {
	RULE_PARAM_U32, /* a whole number from min to max */
} rule_param_type;

/* One parameter, as the YAML config states it under the rule's mapping:
 * `hot-path-lookup: {action: log, threshold: 60}`. The generic loader parses
 * it from this descriptor alone. */
typedef struct rule_param {
	const char *name; /* the YAML key, camelCase */
	rule_param_type type;
	uint32_t def, min, max;
	unsigned slot;       /* where stored: rule_config.params[slot] */
	const char *summary; /* for --help: what it means */
} rule_param;

typedef struct rule_checks rule_checks; /* analyzers/rules/rule_api.h */

/* A finding as the offline report holds it, for the rule's report
 * callbacks: plain strings, no report type. */
typedef struct rule_report_finding {
	const char *shape;      /* redacted, as the finding's shapeHash hashes it */
	const char *suggestion; /* the rule's words for it ("" when none) */
	/* grows_arrays: every array the finding appends to was seen in
	 * sampled replies, and each stayed small without growing */
	bool arrays_seen_small;
} rule_report_finding;

typedef struct rule_def {
	rule_id id;
	/* The rule's sort or query checks read the namespace's index list and
	 * document count: the engine looks them up before any check runs, so
	 * a request waits for them whole or is judged late (engine.h). */
	bool needs_indexes;
	/* The same, only for a query run with a collation (its other checks
	 * read no index). */
	bool needs_indexes_collated;
	/* The id: configs, log lines, --fail-on and the report name the rule
	 * by it, so it never changes. */
	const char *name;
	const char *summary; /* one line: --help and the README's rule list */
	/* The offline report's words: the kind of fix, a few words, in the
	 * rule list, the Markdown table and each finding's JSON "fix" (never
	 * empty); and, when the collection profile has a row counting this
	 * rule's findings per namespace, its label (HTML) and key (JSON),
	 * else both NULL. */
	const char *fix_kind;
	const char *profile_row, *profile_key;
	/* The rule's suggestion starts with an ESR createIndex
	 * (analyzers/planner/esr.h): the report classifies its key's fields
	 * (equality, sort, range) from the request that gave it, so the
	 * indexes it merges keep each shape's fields in a serving order. */
	bool fix_esr_index;
	/* The rule's findings are writes that grow arrays: the report reads
	 * the $push / $addToSet targets from each finding's shape, shows the
	 * array lengths sampled replies held, and lists the rule's findings
	 * by how much their arrays grew. */
	bool grows_arrays;
	/* The schema design pattern the report's design change names for a
	 * finding whose suggestion is no createIndex; NULL (or a NULL answer):
	 * a change to the query. */
	const char *(*design_pattern)(const rule_report_finding *f);
	/* The parameter (a collection's estimated document count) under which
	 * the rule stays silent, or NULL: the report asks again with it at 0
	 * and lists what would be reported once data grows. */
	const char *quiet_below;
	const rule_param *params;
	size_t nparams;
	const rule_checks *checks;
} rule_def;

/* Indexed by rule_id; every row is set. */
extern const rule_def *const rule_table[RULE_COUNT];

/* A rule's id string <-> its rule_id (from the table); -1 if unknown. */
const char *rule_name(rule_id id);
int rule_from_name(const char *name);

/* The rule's parameter named name, or NULL. */
const rule_param *rule_param_find(const rule_def *d, const char *name);

#endif
