/* libFuzzer target: the collection-scan (analyzers/rules/rule_scan.c, with the index lists and
 * document counts of fuzz_common.h) rule alone, at block (fuzz_rule.h). */
#include "fuzz_rule.h"

FZ_RULE_TARGET(RULE_COLLECTION_SCAN)
