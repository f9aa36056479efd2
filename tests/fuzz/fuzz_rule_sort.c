/* libFuzzer target: the index-mismatched-sort (analyzers/rules/rule_sort.c, with the index lists of
 * fuzz_common.h) rule alone, at block (fuzz_rule.h). */
#include "fuzz_rule.h"

FZ_RULE_TARGET(RULE_INDEX_MISMATCHED_SORT)
