/* analyzers/: the rule engine, one file per rule, query shapes, the index
 * cache and ESR index suggestions. Depends on protocol/ and libbson; the
 * index cache adds libmongoc. No globals: every piece takes its context. */
#ifndef MG_ANALYZERS_ANALYZERS_H
#define MG_ANALYZERS_ANALYZERS_H
#include "analyzers/engine.h"
#include "analyzers/index_cache.h"
#include "analyzers/rule_config.h"
#include "analyzers/rule_sort.h"
#endif
