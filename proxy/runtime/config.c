/* mongoguard's configuration (config.h): its defaults, and the YAML file
 * read over them (the command line is applied after, by main.c). Each
 * section is a function per key, and each value is checked where it is
 * read, so an error names the key and the file's line. */
#include "proxy/runtime/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "proxy/net/dns.h"
#include "proxy/runtime/check.h"

void config_defaults(mg_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->listen, sizeof(c->listen), "127.0.0.1:27018");
	c->max_connections = 20000;
	c->max_frame_wait_ms = 60000;
	snprintf(c->upstream_uri, sizeof(c->upstream_uri), "mongodb://127.0.0.1:27017/");
	c->connect_timeout_ms = 5000;
	c->dns_refresh_secs = 60;
	c->workers = 0;
	c->shutdown_grace_ms = 10000;
	snprintf(c->log_path, sizeof(c->log_path), "-");
	c->log_verbosity = 0;
	c->log_fmt = LOG_FORMAT_JSON;
	c->log_rot = LOG_ROTATE_REOPEN;
	c->log_connections = true;
	c->findings_ring = 100;
	c->analysis_enabled = true;
	c->index_refresh_secs = 60;
	c->summary_interval_secs = 60;
	rule_config_defaults(&c->engine);
	mongo_sink_defaults(&c->sink_mongodb);
	capture_settings_defaults(&c->capture);
	c->workload.enabled = true;
	c->workload.shapes = 512;
	c->workload.collections = 256;
	c->workload.metrics_collections = 50;
	c->workload.reply_sample = 8;
}

/* ---- a small typed walk over libyaml's document tree ---- */

typedef struct cfg_ctx {
	yaml_document_t *doc;
	char *err;
	size_t errlen;
} cfg_ctx;

__attribute__((format(printf, 3, 4))) static bool fail(cfg_ctx *x, yaml_node_t *n, const char *fmt,
                                                       ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n)
		snprintf(x->err, x->errlen, "line %lu: %s", (unsigned long)n->start_mark.line + 1,
		         msg);
	else
		snprintf(x->err, x->errlen, "%s", msg);
	return false;
}

static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool get_string(cfg_ctx *x, yaml_node_t *n, const char *key, char *out, size_t size)
{
	const char *s = scalar(n);
	if (!s)
		return fail(x, n, "%s must be a string", key);
	if (strlen(s) >= size)
		return fail(x, n, "%s is longer than %zu characters", key, size - 1);
	snprintf(out, size, "%s", s);
	return true;
}

static bool get_u32(cfg_ctx *x, yaml_node_t *n, const char *key, uint32_t min, uint32_t max,
                    uint32_t *out)
{
	const char *s = scalar(n);
	char *end = NULL;
	errno = 0;
	unsigned long long v = s ? strtoull(s, &end, 10) : 0;
	if (!s || !*s || *end || errno || s[0] == '-' || v < min || v > max)
		return fail(x, n, "%s must be a whole number from %u to %u", key, min, max);
	*out = (uint32_t)v;
	return true;
}

/* A listen address, its form and port checked (check.h); "" (off) only
 * where may_be_empty. */
static bool get_listen(cfg_ctx *x, yaml_node_t *n, const char *key, char *out, size_t size,
                       bool may_be_empty)
{
	char why[600];
	if (!get_string(x, n, key, out, size))
		return false;
	if (may_be_empty && !out[0])
		return true;
	return check_listen_spec(out, key, why, sizeof(why)) || fail(x, n, "%s", why);
}

static bool get_bool(cfg_ctx *x, yaml_node_t *n, const char *key, bool *out)
{
	const char *s = scalar(n);
	if (s && (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on"))) {
		*out = true;
		return true;
	}
	if (s && (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off"))) {
		*out = false;
		return true;
	}
	return fail(x, n, "%s must be true or false", key);
}

typedef bool (*section_fn)(cfg_ctx *x, const char *key, yaml_node_t *val, void *arg);

/* Calls fn for every key of a mapping node. */
static bool walk_map(cfg_ctx *x, yaml_node_t *map, const char *what, section_fn fn, void *arg)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return fail(x, map, "%s must be a mapping", what);
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(x->doc, p->value);
		const char *key = scalar(k);
		if (!key)
			return fail(x, k, "keys in %s must be strings", what);
		if (!fn(x, key, v, arg))
			return false;
	}
	return true;
}

static bool unknown(cfg_ctx *x, yaml_node_t *v, const char *section, const char *key)
{
	return fail(x, v, "unknown key '%s' in %s (see README.md, \"Configuration\")", key,
	            section);
}

static bool tls_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	tls_client_side_config *t = arg;
	if (!strcmp(key, "mode")) {
		const char *s = scalar(v);
		int m = s ? tls_mode_from_name(s) : -1;
		if (m < 0)
			return fail(x, v,
			            "net.tls.mode must be one of disabled, allowTLS, preferTLS, "
			            "requireTLS");
		t->mode = (tls_mode)m;
		return true;
	}
	if (!strcmp(key, "certificateKeyFile"))
		return get_string(x, v, "net.tls.certificateKeyFile", t->certificate_key_file,
		                  sizeof(t->certificate_key_file));
	if (!strcmp(key, "CAFile"))
		return get_string(x, v, "net.tls.CAFile", t->ca_file, sizeof(t->ca_file));
	if (!strcmp(key, "allowConnectionsWithoutCertificates"))
		return get_bool(x, v, "net.tls.allowConnectionsWithoutCertificates",
		                &t->allow_without_certificates);
	if (!strcmp(key, "disabledProtocols"))
		return get_string(x, v, "net.tls.disabledProtocols", t->disabled_protocols,
		                  sizeof(t->disabled_protocols));
	if (!strcmp(key, "ciphers"))
		return get_string(x, v, "net.tls.ciphers", t->ciphers, sizeof(t->ciphers));
	return unknown(x, v, "net.tls", key);
}

static bool net_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mg_config *c = arg;
	if (!strcmp(key, "tls"))
		return walk_map(x, v, "net.tls", tls_key, &c->tls);
	if (!strcmp(key, "listen"))
		return get_listen(x, v, "net.listen", c->listen, sizeof(c->listen), false);
	if (!strcmp(key, "maxConnections"))
		return get_u32(x, v, "net.maxConnections", 1, 1000000, &c->max_connections);
	if (!strcmp(key, "maxFrameWaitMS"))
		return get_u32(x, v, "net.maxFrameWaitMS", 100, 86400000, &c->max_frame_wait_ms);
	if (!strcmp(key, "proxyProtocol"))
		return get_bool(x, v, "net.proxyProtocol", &c->proxy_protocol);
	return unknown(x, v, "net", key);
}

static bool member_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mg_member *m = arg;
	if (!strcmp(key, "host"))
		return get_string(x, v, "upstream.members host", m->host, sizeof(m->host));
	if (!strcmp(key, "listen"))
		return get_listen(x, v, "upstream.members listen", m->listen, sizeof(m->listen),
		                  false);
	return unknown(x, v, "upstream.members", key);
}

/* upstream.members: [{host, listen}, ...], both required, neither repeated. */
static bool get_members(cfg_ctx *x, yaml_node_t *v, mg_config *c)
{
	if (!v || v->type != YAML_SEQUENCE_NODE)
		return fail(x, v, "upstream.members must be a list of {host, listen}");
	c->nmembers = 0;
	for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top;
	     i++) {
		yaml_node_t *mn = yaml_document_get_node(x->doc, *i);
		if (c->nmembers == MG_MAX_MEMBERS)
			return fail(x, mn, "upstream.members has more than %d members",
			            MG_MAX_MEMBERS);
		mg_member *m = &c->members[c->nmembers];
		memset(m, 0, sizeof(*m));
		if (!walk_map(x, mn, "an upstream.members entry", member_key, m))
			return false;
		if (!m->host[0] || !m->listen[0])
			return fail(x, mn, "an upstream.members entry needs both host and listen");
		for (size_t j = 0; j < c->nmembers; j++)
			if (!strcmp(c->members[j].host, m->host) ||
			    !strcmp(c->members[j].listen, m->listen))
				return fail(x, mn, "upstream.members repeats %s",
				            !strcmp(c->members[j].host, m->host) ? m->host
				                                                 : m->listen);
		c->nmembers++;
	}
	return true;
}

static bool upstream_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mg_config *c = arg;
	if (!strcmp(key, "uri"))
		return get_string(x, v, "upstream.uri", c->upstream_uri, sizeof(c->upstream_uri));
	if (!strcmp(key, "connectTimeoutMS"))
		return get_u32(x, v, "upstream.connectTimeoutMS", 1, 600000,
		               &c->connect_timeout_ms);
	if (!strcmp(key, "replyTimeoutMS"))
		return get_u32(x, v, "upstream.replyTimeoutMS", 0, 86400000, &c->reply_timeout_ms);
	if (!strcmp(key, "members"))
		return get_members(x, v, c);
	if (!strcmp(key, "credentialsFile"))
		return get_string(x, v, "upstream.credentialsFile", c->credentials_file,
		                  sizeof(c->credentials_file));
	if (!strcmp(key, "dnsRefreshSecs"))
		return get_u32(x, v, "upstream.dnsRefreshSecs", 0, 86400, &c->dns_refresh_secs);
	if (!strcmp(key, "dnsServer")) {
		char why[256];
		if (!get_string(x, v, "upstream.dnsServer", c->dns_server, sizeof(c->dns_server)))
			return false;
		return dns_server_valid(c->dns_server, why, sizeof(why)) || fail(x, v, "%s", why);
	}
	return unknown(x, v, "upstream", key);
}

static bool log_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mg_config *c = arg;
	if (!strcmp(key, "path"))
		return get_string(x, v, "log.path", c->log_path, sizeof(c->log_path));
	if (!strcmp(key, "verbosity")) {
		uint32_t vb;
		if (!get_u32(x, v, "log.verbosity", 0, 1, &vb))
			return false;
		c->log_verbosity = (int)vb;
		return true;
	}
	if (!strcmp(key, "format")) {
		const char *s = scalar(v);
		int f = s ? log_format_from_name(s) : -1;
		if (f < 0)
			return fail(x, v, "log.format must be json or text");
		c->log_fmt = (log_format)f;
		return true;
	}
	if (!strcmp(key, "rotate")) {
		const char *s = scalar(v);
		int r = s ? log_rotate_from_name(s) : -1;
		if (r < 0)
			return fail(x, v, "log.rotate must be reopen or rename");
		c->log_rot = (log_rotate)r;
		return true;
	}
	if (!strcmp(key, "connections"))
		return get_bool(x, v, "log.connections", &c->log_connections);
	return unknown(x, v, "log", key);
}

static bool analysis_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mg_config *c = arg;
	if (!strcmp(key, "enabled"))
		return get_bool(x, v, "analysis.enabled", &c->analysis_enabled);
	if (!strcmp(key, "redactLiterals"))
		return get_bool(x, v, "analysis.redactLiterals", &c->engine.redact_literals);
	if (!strcmp(key, "indexRefreshSecs"))
		return get_u32(x, v, "analysis.indexRefreshSecs", 1, 86400, &c->index_refresh_secs);
	if (!strcmp(key, "indexWaitMS"))
		return get_u32(x, v, "analysis.indexWaitMS", 0, 60000, &c->engine.index_wait_ms);
	if (!strcmp(key, "summaryIntervalSecs"))
		return get_u32(x, v, "analysis.summaryIntervalSecs", 1, 86400,
		               &c->summary_interval_secs);
	return unknown(x, v, "analysis", key);
}

static bool admin_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mg_config *c = arg;
	if (!strcmp(key, "listen"))
		return get_listen(x, v, "admin.listen", c->admin_listen, sizeof(c->admin_listen),
		                  true);
	if (!strcmp(key, "findingsRing"))
		return get_u32(x, v, "admin.findingsRing", 1, 10000, &c->findings_ring);
	if (!strcmp(key, "tokenFile"))
		return get_string(x, v, "admin.tokenFile", c->admin_token_file,
		                  sizeof(c->admin_token_file));
	return unknown(x, v, "admin", key);
}

static bool mongodb_sink_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mongo_sink_config *m = arg;
	if (!strcmp(key, "uri"))
		return get_string(x, v, "sinks.mongodb.uri", m->uri, sizeof(m->uri));
	if (!strcmp(key, "database"))
		return get_string(x, v, "sinks.mongodb.database", m->database, sizeof(m->database));
	if (!strcmp(key, "collection"))
		return get_string(x, v, "sinks.mongodb.collection", m->collection,
		                  sizeof(m->collection));
	if (!strcmp(key, "ttlDays"))
		return get_u32(x, v, "sinks.mongodb.ttlDays", 1, 3650, &m->ttl_days);
	if (!strcmp(key, "queueSize"))
		return get_u32(x, v, "sinks.mongodb.queueSize", 1, 1000000, &m->queue_size);
	if (!strcmp(key, "batchSize"))
		return get_u32(x, v, "sinks.mongodb.batchSize", 1, 10000, &m->batch_size);
	if (!strcmp(key, "flushMS"))
		return get_u32(x, v, "sinks.mongodb.flushMS", 10, 600000, &m->flush_ms);
	return unknown(x, v, "sinks.mongodb", key);
}

static bool sinks_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mg_config *c = arg;
	if (!strcmp(key, "mongodb"))
		return walk_map(x, v, "sinks.mongodb", mongodb_sink_key, &c->sink_mongodb);
	return unknown(x, v, "sinks", key);
}

static bool capture_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	capture_settings *c = arg;
	if (!strcmp(key, "dir"))
		return get_string(x, v, "capture.dir", c->dir, sizeof(c->dir));
	if (!strcmp(key, "redactLiterals"))
		return get_bool(x, v, "capture.redactLiterals", &c->redact_literals);
	if (!strcmp(key, "valueHashes"))
		return get_bool(x, v, "capture.valueHashes", &c->value_hashes);
	if (!strcmp(key, "maxFileSizeMB"))
		return get_u32(x, v, "capture.maxFileSizeMB", 1, 65536, &c->max_file_mb);
	if (!strcmp(key, "rotateSecs"))
		return get_u32(x, v, "capture.rotateSecs", 0, 604800, &c->rotate_secs);
	if (!strcmp(key, "maxTotalSizeMB"))
		return get_u32(x, v, "capture.maxTotalSizeMB", 1, 16777216, &c->max_total_mb);
	if (!strcmp(key, "queueSizeMB"))
		return get_u32(x, v, "capture.queueSizeMB", 1, 4096, &c->queue_mb);
	if (!strcmp(key, "maxReplyKB"))
		return get_u32(x, v, "capture.maxReplyKB", 0, 49152, &c->max_reply_kb);
	if (!strcmp(key, "replySampleRate"))
		return get_u32(x, v, "capture.replySampleRate", 1, 1000000, &c->reply_sample);
	return unknown(x, v, "capture", key);
}

static bool workload_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	workload_settings *w = arg;
	if (!strcmp(key, "enabled"))
		return get_bool(x, v, "workload.enabled", &w->enabled);
	if (!strcmp(key, "shapes"))
		return get_u32(x, v, "workload.shapes", 16, 65536, &w->shapes);
	if (!strcmp(key, "collections"))
		return get_u32(x, v, "workload.collections", 1, 10000, &w->collections);
	if (!strcmp(key, "metricsCollections"))
		return get_u32(x, v, "workload.metricsCollections", 0, 1000,
		               &w->metrics_collections);
	if (!strcmp(key, "replySample"))
		return get_u32(x, v, "workload.replySample", 1, 1000000, &w->reply_sample);
	return unknown(x, v, "workload", key);
}

static bool get_action(cfg_ctx *x, yaml_node_t *v, const char *what, rule_action *out)
{
	const char *s = scalar(v);
	int a = s ? rule_action_from_name(s) : -1;
	if (a < 0)
		return fail(x, v, "%s must be one of off, log, dry-run, block", what);
	*out = (rule_action)a;
	return true;
}

/* sample: the percentage of query shapes a block blocks, 1 to 100. */
static bool get_sample(cfg_ctx *x, yaml_node_t *v, const char *what, uint8_t *out)
{
	uint32_t n;
	if (!get_u32(x, v, what, 1, 100, &n))
		return false;
	*out = (uint8_t)n;
	return true;
}

/* A list of glob patterns, or a single pattern. */
static bool get_patterns(cfg_ctx *x, yaml_node_t *v, const char *what,
                         char (*out)[RULE_PATTERN_LEN], size_t *n)
{
	*n = 0;
	if (v && v->type == YAML_SCALAR_NODE)
		return get_string(x, v, what, out[(*n)++], RULE_PATTERN_LEN);
	if (!v || v->type != YAML_SEQUENCE_NODE)
		return fail(x, v, "%s must be a pattern or a list of patterns", what);
	for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top;
	     i++) {
		if (*n == RULE_MAX_PATTERNS)
			return fail(x, v, "%s has more than %d patterns", what, RULE_MAX_PATTERNS);
		if (!get_string(x, yaml_document_get_node(x->doc, *i), what, out[*n],
		                RULE_PATTERN_LEN))
			return false;
		(*n)++;
	}
	return true;
}

static bool scope_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	rule_scope *s = arg;
	if (!strcmp(key, "namespaces"))
		return get_patterns(x, v, "scope namespaces", s->namespaces, &s->nnamespaces);
	if (!strcmp(key, "apps"))
		return get_patterns(x, v, "scope apps", s->apps, &s->napps);
	if (!strcmp(key, "action"))
		return get_action(x, v, "scope action", &s->action);
	if (!strcmp(key, "sample"))
		return get_sample(x, v, "scope sample", &s->sample);
	return unknown(x, v, "a rule scope", key);
}

/* A parameter from its descriptor in the rule's table row. */
static bool get_param(cfg_ctx *x, yaml_node_t *v, const char *rule, const rule_param *p,
                      rule_config *rc)
{
	char what[128];
	snprintf(what, sizeof(what), "%s %s", rule, p->name);
	switch (p->type) {
	case RULE_PARAM_U32:
		return get_u32(x, v, what, p->min, p->max, &rc->params[p->slot]);
	}
	return fail(x, v, "%s has a type this loader does not know", what);
}

typedef struct rule_arg {
	rule_id id;
	rule_config *rc;
} rule_arg;

static bool rule_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	rule_arg *ra = arg;
	rule_config *rc = ra->rc;
	if (!strcmp(key, "action"))
		return get_action(x, v, "rule action", &rc->action);
	if (!strcmp(key, "sample"))
		return get_sample(x, v, "rule sample", &rc->sample);
	if (!strcmp(key, "scopes")) {
		if (!v || v->type != YAML_SEQUENCE_NODE)
			return fail(x, v, "scopes must be a list");
		rc->nscopes = 0;
		for (yaml_node_item_t *i = v->data.sequence.items.start;
		     i < v->data.sequence.items.top; i++) {
			if (rc->nscopes == RULE_MAX_SCOPES)
				return fail(x, v, "more than %d scopes", RULE_MAX_SCOPES);
			rule_scope *s = &rc->scopes[rc->nscopes];
			memset(s, 0, sizeof(*s));
			s->action = rc->action;
			yaml_node_t *sn = yaml_document_get_node(x->doc, *i);
			if (!walk_map(x, sn, "a rule scope", scope_key, s))
				return false;
			bool has_action = false;
			for (yaml_node_pair_t *p = sn->data.mapping.pairs.start;
			     p < sn->data.mapping.pairs.top; p++)
				has_action |= !strcmp(
				    scalar(yaml_document_get_node(x->doc, p->key)), "action");
			if (!has_action)
				return fail(x, sn, "a rule scope needs an action");
			rc->nscopes++;
		}
		return true;
	}
	const rule_param *p = rule_param_find(rule_table[ra->id], key);
	if (p)
		return get_param(x, v, rule_name(ra->id), p, rc);
	char section[96];
	snprintf(section, sizeof(section), "rule %s", rule_name(ra->id));
	return unknown(x, v, section, key);
}

static bool rules_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mg_config *c = arg;
	int id = rule_from_name(key);
	if (id < 0) {
		char names[512] = "";
		size_t n = 0;
		for (int r = 0; r < RULE_COUNT && n < sizeof(names); r++)
			n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", r ? ", " : "",
			                      rule_table[r]->name);
		return fail(x, v, "unknown rule '%s' (rules: %s)", key, names);
	}
	rule_config *rc = &c->engine.rules[id];
	if (v && v->type == YAML_SCALAR_NODE)
		return get_action(x, v, key, &rc->action);
	rule_arg ra = {(rule_id)id, rc};
	return walk_map(x, v, key, rule_key, &ra);
}

/* True when nothing but white space or comments follows the first YAML
 * document; else err says where the rest begins. */
static bool config_rest_is_empty(yaml_parser_t *parser, const char *path, char *err, size_t errlen)
{
	yaml_document_t next;
	if (!yaml_parser_load(parser, &next)) {
		snprintf(err, errlen, "%s: line %lu: %s (after the first YAML document)", path,
		         (unsigned long)parser->problem_mark.line + 1,
		         parser->problem ? parser->problem : "invalid YAML");
		return false;
	}
	yaml_node_t *root = yaml_document_get_root_node(&next);
	unsigned long line = (unsigned long)next.start_mark.line + 1;
	yaml_document_delete(&next);
	if (root) {
		snprintf(err, errlen,
		         "%s: line %lu: a second YAML document; put every setting in one", path,
		         line);
		return false;
	}
	return true;
}

static bool top_key(cfg_ctx *x, const char *key, yaml_node_t *v, void *arg)
{
	mg_config *c = arg;
	if (!strcmp(key, "net"))
		return walk_map(x, v, "net", net_key, c);
	if (!strcmp(key, "upstream"))
		return walk_map(x, v, "upstream", upstream_key, c);
	if (!strcmp(key, "log"))
		return walk_map(x, v, "log", log_key, c);
	if (!strcmp(key, "analysis"))
		return walk_map(x, v, "analysis", analysis_key, c);
	if (!strcmp(key, "admin"))
		return walk_map(x, v, "admin", admin_key, c);
	if (!strcmp(key, "sinks"))
		return walk_map(x, v, "sinks", sinks_key, c);
	if (!strcmp(key, "instanceName"))
		return get_string(x, v, "instanceName", c->instance_name, sizeof(c->instance_name));
	if (!strcmp(key, "rules"))
		return walk_map(x, v, "rules", rules_key, c);
	if (!strcmp(key, "capture"))
		return walk_map(x, v, "capture", capture_key, &c->capture);
	if (!strcmp(key, "workload"))
		return walk_map(x, v, "workload", workload_key, &c->workload);
	if (!strcmp(key, "workers"))
		return get_u32(x, v, "workers", 0, 256, &c->workers);
	if (!strcmp(key, "shutdownGraceMS"))
		return get_u32(x, v, "shutdownGraceMS", 0, 3600000, &c->shutdown_grace_ms);
	return unknown(x, v, "the top level", key);
}

bool config_load_file(mg_config *c, const char *path, char *err, size_t errlen)
{
	/* fopen() opens a directory, and libyaml then says "input error" */
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "cannot read %s: it is a directory, not a configuration file",
		         path);
		return false;
	}
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return false;
	}
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_parser_initialize(&parser);
	yaml_parser_set_input_file(&parser, f);
	bool ok = yaml_parser_load(&parser, &doc);
	if (!ok) {
		snprintf(err, errlen, "%s: line %lu: %s", path,
		         (unsigned long)parser.problem_mark.line + 1,
		         parser.problem ? parser.problem : "invalid YAML");
		yaml_parser_delete(&parser);
		fclose(f);
		return false;
	}
	char inner[900] = "";
	cfg_ctx x = {&doc, inner, sizeof(inner)};
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (root) /* an empty file is a valid, empty configuration */
		ok = walk_map(&x, root, "the file", top_key, c);
	if (!ok)
		snprintf(err, errlen, "%s: %s", path, inner);
	yaml_document_delete(&doc);
	/* What follows the first document is not silently dropped: a second
	 * document, or text libyaml could not read as one (a block mapping after
	 * a flow one), would be settings the file seems to set and does not. */
	if (ok && !config_rest_is_empty(&parser, path, err, errlen))
		ok = false;
	yaml_parser_delete(&parser);
	fclose(f);
	return ok;
}
