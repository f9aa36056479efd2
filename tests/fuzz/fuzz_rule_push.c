/* libFuzzer target: the unbounded-push (analyzers/rules/rule_push.c) rule alone, at block
 * (fuzz_rule.h).
 */
#include "fuzz_rule.h"

FZ_RULE_TARGET(RULE_UNBOUNDED_PUSH)
