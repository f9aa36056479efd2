/* libFuzzer target: the hot-path-lookup (analyzers/rules/rule_lookup.c; it fires from the second
 * execution of a shape) rule alone, at block (fuzz_rule.h). */
#include "fuzz_rule.h"

FZ_RULE_TARGET(RULE_HOT_PATH_LOOKUP)
