/* Findings become log lines with "c":"ANALYZER" (docs/operations.md, "The
 * log"), counts for the metrics, and entries in a small ring for
 * /findings. */
#include "proxy/sinks/finding_log.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proxy/sinks/log.h"
#include "proxy/stats/workload_json.h"

enum {
	RECENT_LEN = 8 * 1024, /* bytes of one entry's JSON, at most */
};

/* One of the recent findings: its JSON and what /findings filters on.
 * json, ns and app share one allocation (json's). */
typedef struct recent {
	char *json; /* NULL: an empty slot */
	const char *ns, *app;
	int rule;
	int64_t t; /* seconds since the epoch */
	size_t len;
} recent;

struct finding_sink {
	metrics *m;
	mongo_sink *fleet;
	pthread_mutex_t lock; /* guards the ring */
	recent *ring;
	unsigned size, head, count;
};

finding_sink *finding_sink_new(metrics *m, mongo_sink *fleet, unsigned ring_size)
{
	finding_sink *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->size = ring_size ? ring_size : 1;
	s->ring = calloc(s->size, sizeof(*s->ring));
	if (!s->ring) {
		free(s);
		return NULL;
	}
	s->m = m;
	s->fleet = fleet;
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

void finding_sink_free(finding_sink *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	for (unsigned i = 0; i < s->size; i++)
		free(s->ring[i].json);
	free(s->ring);
	free(s);
}

static void log_finding(const finding *f, const char *hash)
{
	bool summary = f->repeats > 0;
	/* A first finding came from one connection, whose lines say "connN";
	 * a summary counts repeats from any, so it is the process's ("main"). */
	char ctx[32];
	snprintf(ctx, sizeof ctx, "conn%llu", (unsigned long long)f->conn);
	log_line *l =
	    log_begin(LOG_WARNING, "ANALYZER", summary ? LOGID_FINDING_SUMMARY : LOGID_FINDING,
	              summary || !f->conn ? NULL : ctx,
	              summary ? "Query anti-pattern repeated" : "Query anti-pattern");
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
	if (f->would_block) /* dry-run: what a block would have told the client */
		log_attr_str(l, "wouldBlock", f->would_block);
	if (f->sampled_out)
		log_attr_str(l, "decidedBy", "sample");
	if (f->late) /* judged after the request went on, once its facts came */
		log_attr_bool(l, "late", true);
	log_end(l);
}

static void json_field(text_buf *t, const char *key, const char *value)
{
	text_printf(t, ",\"%s\":", key);
	text_json_str(t, value ? value : "", value ? strlen(value) : 0,
	              TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
}

/* The finding as the log line's attr object, plus its time. */
static void finding_json(text_buf *t, const finding *f, const char *hash, time_t now)
{
	char when[32];
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	text_printf(t, "{\"t\":\"%s\"", when);
	json_field(t, "rule", rule_name(f->rule));
	json_field(t, "action", rule_action_name(f->action));
	json_field(t, "ns", f->ns);
	json_field(t, "command", f->command);
	json_field(t, "shapeHash", hash);
	if (f->shape && f->shape[0] == '{' && text_utf8_valid(f->shape)) {
		text_str(t, ",\"shape\":");
		text_str(t, f->shape);
	} else {
		json_field(t, "shape", f->shape);
	}
	json_field(t, "suggestion", f->suggestion);
	json_field(t, "detail", f->detail);
	json_field(t, "client", f->client);
	json_field(t, "appName", f->app_name);
	text_printf(t, ",\"repeats\":%" PRIu64, f->repeats);
	if (f->would_block)
		json_field(t, "wouldBlock", f->would_block);
	if (f->sampled_out)
		json_field(t, "decidedBy", "sample");
	if (f->late)
		text_printf(t, ",\"late\":true");
	text_char(t, '}');
}

static const char *nz(const char *s)
{
	return s ? s : "";
}

/* The entry for f: its JSON, then ns and app, in one allocation. */
static bool recent_make(recent *r, const finding *f, const char *hash)
{
	char entry[RECENT_LEN];
	text_buf t;
	text_init(&t, entry, sizeof(entry));
	time_t now = time(NULL);
	finding_json(&t, f, hash, now);
	if (t.overflow)
		return false; /* a partial object would break the array: keep it out */
	size_t ns = strlen(nz(f->ns)) + 1, app = strlen(nz(f->app_name)) + 1;
	char *p = malloc(t.len + 1 + ns + app);
	if (!p)
		return false;
	memcpy(p, entry, t.len);
	p[t.len] = '\0';
	memcpy(p + t.len + 1, nz(f->ns), ns);
	memcpy(p + t.len + 1 + ns, nz(f->app_name), app);
	*r = (recent){.json = p,
	              .ns = p + t.len + 1,
	              .app = p + t.len + 1 + ns,
	              .rule = (int)f->rule,
	              .t = (int64_t)now,
	              .len = t.len};
	return true;
}

static void remember(finding_sink *s, const finding *f, const char *hash)
{
	recent r;
	if (!recent_make(&r, f, hash))
		return;
	pthread_mutex_lock(&s->lock);
	unsigned slot = (s->head + s->count) % s->size;
	if (s->count == s->size)
		s->head = (s->head + 1) % s->size;
	else
		s->count++;
	char *old = s->ring[slot].json;
	s->ring[slot] = r;
	pthread_mutex_unlock(&s->lock);
	free(old);
}

void server_log_finding(void *arg, const finding *f)
{
	finding_sink *s = arg;
	char hash[17];
	snprintf(hash, sizeof(hash), "%016" PRIx64, f->shape_hash);
	log_finding(f, hash);
	/* GET /workload's rules, on the shape of the request it came at */
	workload_rules_note(f->request_hash ? f->request_hash : f->shape_hash, (unsigned)f->rule);
	if (!s)
		return;
	remember(s, f, hash);
	if (s->fleet)
		mongo_sink_push(s->fleet, f);
}

void server_count_finding(void *arg, rule_id rule, rule_action action)
{
	finding_sink *s = arg;
	if (s && s->m && (unsigned)rule < RULE_COUNT && (unsigned)action < MX_ACTIONS)
		mx_add_shared(&s->m->findings[rule][action], 1);
}

static bool wanted(const recent *r, const finding_query *q)
{
	return (!q->rule || !strcmp(q->rule, rule_name((rule_id)r->rule))) &&
	       (!q->ns || fnmatch(q->ns, r->ns, 0) == 0) &&
	       (!q->app || fnmatch(q->app, r->app, 0) == 0) && r->t >= q->since;
}

void finding_sink_recent_json(finding_sink *s, const finding_query *q, text_buf *out)
{
	static const finding_query all = {0};
	q = q ? q : &all;
	text_char(out, '[');
	pthread_mutex_lock(&s->lock);
	/* newest first, as many as are asked for and fit; then written oldest
	 * first (newest last, like the log) */
	unsigned *pick = malloc((s->count ? s->count : 1) * sizeof(*pick)), n = 0;
	size_t room = out->limit > out->len + 2 ? out->limit - out->len - 2 : 0, used = 0;
	for (unsigned i = s->count; pick && i-- > 0 && (!q->limit || n < q->limit);) {
		const recent *r = &s->ring[(s->head + i) % s->size];
		if (!wanted(r, q))
			continue;
		if (used + r->len + 1 > room)
			break; /* keep the array whole: the older ones do not fit */
		used += r->len + 1;
		pick[n++] = (s->head + i) % s->size;
	}
	for (unsigned i = n; i-- > 0;) {
		if (i != n - 1)
			text_char(out, ',');
		text_str(out, s->ring[pick[i]].json);
	}
	pthread_mutex_unlock(&s->lock);
	free(pick);
	text_close(out, "]");
	text_finish(out);
}
