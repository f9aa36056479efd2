/* libFuzzer target: the case-insensitive-regex (analyzers/rules/rule_regex.c) rule alone, at block
 * (fuzz_rule.h). */
#include "fuzz_rule.h"

FZ_RULE_TARGET(RULE_CASE_INSENSITIVE_REGEX)
