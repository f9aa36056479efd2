/* The engine's sink that writes findings to the log. */
#ifndef MG_PROXY_SINKS_FINDING_LOG_H
#define MG_PROXY_SINKS_FINDING_LOG_H

#include "analyzers/engine.h"

/* One "c":"ANALYZER" log line per finding (DESIGN.md, "Log"). arg unused. */
void server_log_finding(void *arg, const finding *f);

#endif
