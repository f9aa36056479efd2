/* GET /config (see config_json.h). */
#include "proxy/admin/config_json.h"

#include <stdio.h>
#include <string.h>

#include "analyzers/rules/rules.h"

void config_mask_uri(const char *uri, char *out, size_t size)
{
	const char *scheme = strstr(uri, "://");
	const char *hosts = scheme ? scheme + 3 : uri;
	const char *end = hosts + strcspn(hosts, "/?");
	const char *at = NULL;
	for (const char *p = hosts; p < end; p++)
		if (*p == '@')
			at = p; /* the last '@' ends the user info */
	const char *colon = at ? memchr(hosts, ':', (size_t)(at - hosts)) : NULL;
	if (!colon) {
		snprintf(out, size, "%s", uri);
		return;
	}
	snprintf(out, size, "%.*s****%s", (int)(colon + 1 - uri), uri, at);
}

static void field(text_buf *t, const char *key, const char *value, bool comma)
{
	text_printf(t, "%s\"%s\":", comma ? "," : "", key);
	text_json_str(t, value, strlen(value), TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
}

static void number(text_buf *t, const char *key, unsigned long long v, bool comma)
{
	text_printf(t, "%s\"%s\":%llu", comma ? "," : "", key, v);
}

static void boolean(text_buf *t, const char *key, bool v, bool comma)
{
	text_printf(t, "%s\"%s\":%s", comma ? "," : "", key, v ? "true" : "false");
}

static void patterns(text_buf *t, const char *key, const char (*p)[RULE_PATTERN_LEN], size_t n)
{
	text_printf(t, ",\"%s\":[", key);
	for (size_t i = 0; i < n; i++) {
		if (i)
			text_char(t, ',');
		text_json_str(t, p[i], strlen(p[i]), TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
	}
	text_char(t, ']');
}

static void rule_json(text_buf *t, const rule_def *d, const rule_config *rc)
{
	field(t, "action", rule_action_name(rc->action), false);
	if (rc->sample)
		number(t, "sample", rc->sample, true);
	for (size_t i = 0; i < d->nparams; i++)
		number(t, d->params[i].name, rc->params[d->params[i].slot], true);
	text_str(t, ",\"scopes\":[");
	for (size_t i = 0; i < rc->nscopes && i < RULE_MAX_SCOPES; i++) {
		const rule_scope *s = &rc->scopes[i];
		text_str(t, i ? ",{" : "{");
		field(t, "action", rule_action_name(s->action), false);
		if (s->sample)
			number(t, "sample", s->sample, true);
		patterns(t, "namespaces", s->namespaces, s->nnamespaces);
		patterns(t, "apps", s->apps, s->napps);
		text_char(t, '}');
	}
	text_char(t, ']');
}

void config_json(const mg_config *c, unsigned workers_running, text_buf *t)
{
	char uri[sizeof(c->upstream_uri)];
	config_mask_uri(c->upstream_uri, uri, sizeof(uri));
	text_str(t, "{\"net\":{");
	field(t, "listen", c->listen, false);
	number(t, "maxConnections", c->max_connections, true);
	number(t, "maxFrameWaitMS", c->max_frame_wait_ms, true);
	text_str(t, "},\"upstream\":{");
	field(t, "uri", uri, false);
	number(t, "connectTimeoutMS", c->connect_timeout_ms, true);
	number(t, "replyTimeoutMS", c->reply_timeout_ms, true);
	field(t, "dnsServer", c->dns_server, true);
	number(t, "dnsRefreshSecs", c->dns_refresh_secs, true);
	text_str(t, "}");
	number(t, "workers", workers_running, true);
	number(t, "shutdownGraceMS", c->shutdown_grace_ms, true);
	text_str(t, ",\"log\":{");
	field(t, "path", c->log_path, false);
	number(t, "verbosity", (unsigned long long)c->log_verbosity, true);
	field(t, "format", log_format_name(c->log_fmt), true);
	field(t, "rotate", log_rotate_name(c->log_rot), true);
	text_str(t, "},\"analysis\":{");
	boolean(t, "enabled", c->analysis_enabled, false);
	boolean(t, "redactLiterals", c->engine.redact_literals, true);
	number(t, "indexRefreshSecs", c->index_refresh_secs, true);
	number(t, "indexWaitMS", c->engine.index_wait_ms, true);
	number(t, "summaryIntervalSecs", c->summary_interval_secs, true);
	text_str(t, "},\"admin\":{");
	field(t, "listen", c->admin_listen, false);
	field(t, "tokenFile", c->admin_token_file, true);
	number(t, "findingsRing", c->findings_ring, true);
	text_str(t, "}");
	field(t, "instanceName", c->instance_name, true);
	const mongo_sink_config *m = &c->sink_mongodb;
	config_mask_uri(m->uri, uri, sizeof(uri));
	text_str(t, ",\"sinks\":{\"mongodb\":{");
	field(t, "uri", uri, false);
	field(t, "database", m->database, true);
	field(t, "collection", m->collection, true);
	number(t, "ttlDays", m->ttl_days, true);
	number(t, "queueSize", m->queue_size, true);
	number(t, "batchSize", m->batch_size, true);
	number(t, "flushMS", m->flush_ms, true);
	text_str(t, "}},\"workload\":{");
	boolean(t, "enabled", c->workload.enabled, false);
	number(t, "shapes", c->workload.shapes, true);
	number(t, "collections", c->workload.collections, true);
	number(t, "metricsCollections", c->workload.metrics_collections, true);
	number(t, "replySample", c->workload.reply_sample, true);
	text_str(t, "},\"rules\":{");
	for (int r = 0; r < RULE_COUNT; r++) {
		text_printf(t, "%s\"%s\":{", r ? "," : "", rule_name((rule_id)r));
		rule_json(t, rule_table[r], &c->engine.rules[r]);
		text_char(t, '}');
	}
	text_close(t, "}}");
	text_finish(t);
}
