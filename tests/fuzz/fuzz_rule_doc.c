/* libFuzzer target: the large-document (analyzers/rules/rule_doc.c, at 4 KiB and arrays of 4) rule
 * alone, at block (fuzz_rule.h). */
#include "fuzz_rule.h"

FZ_RULE_TARGET(RULE_LARGE_DOCUMENT)
