/* The engine's findings sink: a log line per finding, a count per rule and
 * action for the metrics, and the most recent findings for the admin
 * endpoint's /findings. */
#ifndef MG_PROXY_SINKS_FINDING_LOG_H
#define MG_PROXY_SINKS_FINDING_LOG_H

#include "analyzers/engine/engine.h"
#include "protocol/text.h"
#include "proxy/admin/metrics.h"
#include "proxy/sinks/mongo_sink.h"

typedef struct finding_sink finding_sink;

/* m may be NULL (no counting), fleet may be NULL (no findings collection;
 * not owned). ring_size: how many recent findings /findings keeps
 * (admin.findingsRing). NULL when out of memory. */
finding_sink *finding_sink_new(metrics *m, mongo_sink *fleet, unsigned ring_size);
void finding_sink_free(finding_sink *s);

/* The engine_sink_fn: one "c":"ANALYZER" log line per finding
 * (docs/operations.md, "The log"), counted, and kept among the recent ones. arg: a finding_sink, or
 * NULL for the log line alone. Any thread. */
void server_log_finding(void *arg, const finding *f);
/* The engine's tally (engine_set_tally): mongoguard_findings_total counts
 * each finding when it happens; the log's summaries only shorten the log. */
void server_count_finding(void *arg, rule_id rule, rule_action action);

/* Which recent findings: NULL or 0 where any will do. rule is a rule id,
 * ns and app are globs (fnmatch), since is seconds since the epoch, limit
 * keeps the newest. */
typedef struct finding_query {
	const char *rule, *ns, *app;
	int64_t since;
	unsigned limit;
} finding_query;

/* The recent findings q asks for (NULL: all), newest last, as a JSON array
 * of objects with the log line's attributes (redacted as the log is). When
 * they do not all fit in out, the newest that do. Any thread. */
void finding_sink_recent_json(finding_sink *s, const finding_query *q, text_buf *out);

#endif
