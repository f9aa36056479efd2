/* Findings become log lines with "c":"ANALYZER" (DESIGN.md, "Log"). */
#include <inttypes.h>
#include <stdio.h>

#include "proxy/sinks/log.h"
#include "proxy/sinks/finding_log.h"

void server_log_finding(void *arg, const finding *f)
{
	bool summary = f->repeats > 0;
	log_line *l =
	    log_begin(LOG_WARNING, "ANALYZER", summary ? LOGID_FINDING_SUMMARY : LOGID_FINDING,
	              NULL, summary ? "Query anti-pattern repeated" : "Query anti-pattern");
	char hash[17];
	snprintf(hash, sizeof(hash), "%016" PRIx64, f->shape_hash);
	log_attr_str(l, "rule", rule_name(f->rule));
	log_attr_str(l, "action", rule_action_name(f->action));
	log_attr_str(l, "ns", f->ns);
	log_attr_str(l, "command", f->command);
	log_attr_str(l, "shapeHash", hash);
	if (f->shape && f->shape[0] == '{')
		log_attr_raw(l, "shape", f->shape);
	else
		log_attr_str(l, "shape", f->shape);
	log_attr_str(l, "suggestion", f->suggestion);
	log_attr_str(l, "detail", f->detail);
	log_attr_str(l, "client", f->client);
	log_attr_str(l, "appName", f->app_name);
	log_attr_int(l, "repeats", (int64_t)f->repeats);
	log_end(l);
}
