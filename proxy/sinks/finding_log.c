/* Findings become log lines with "c":"ANALYZER" (DESIGN.md, "Log"), counts
 * for the metrics, and entries in a small ring for /findings. */
#include "proxy/sinks/finding_log.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "proxy/sinks/log.h"

enum {
	RECENT_MAX = 100,      /* findings /findings keeps */
	RECENT_LEN = 8 * 1024, /* bytes of one entry's JSON */
};

struct finding_sink {
	metrics *m;
	mongo_sink *fleet;
	pthread_mutex_t lock; /* guards the ring */
	char (*ring)[RECENT_LEN];
	unsigned head, count;
};

finding_sink *finding_sink_new(metrics *m, mongo_sink *fleet)
{
	finding_sink *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->ring = calloc(RECENT_MAX, RECENT_LEN);
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
	free(s->ring);
	free(s);
}

static void log_finding(const finding *f, const char *hash)
{
	bool summary = f->repeats > 0;
	log_line *l =
	    log_begin(LOG_WARNING, "ANALYZER", summary ? LOGID_FINDING_SUMMARY : LOGID_FINDING,
	              NULL, summary ? "Query anti-pattern repeated" : "Query anti-pattern");
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
static void finding_json(text_buf *t, const finding *f, const char *hash)
{
	char when[32];
	time_t now = time(NULL);
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

static void remember(finding_sink *s, const finding *f, const char *hash)
{
	char entry[RECENT_LEN];
	text_buf t;
	text_init(&t, entry, sizeof(entry));
	finding_json(&t, f, hash);
	if (t.overflow)
		return; /* a partial object would break the array: keep it out */
	text_finish(&t);
	pthread_mutex_lock(&s->lock);
	unsigned slot = (s->head + s->count) % RECENT_MAX;
	if (s->count == RECENT_MAX)
		s->head = (s->head + 1) % RECENT_MAX;
	else
		s->count++;
	memcpy(s->ring[slot], entry, t.len + 1);
	pthread_mutex_unlock(&s->lock);
}

void server_log_finding(void *arg, const finding *f)
{
	finding_sink *s = arg;
	char hash[17];
	snprintf(hash, sizeof(hash), "%016" PRIx64, f->shape_hash);
	log_finding(f, hash);
	if (!s)
		return;
	if (s->m && (unsigned)f->rule < RULE_COUNT && (unsigned)f->action < MX_ACTIONS)
		mx_add_shared(&s->m->findings[f->rule][f->action], f->repeats ? f->repeats : 1);
	remember(s, f, hash);
	if (s->fleet)
		mongo_sink_push(s->fleet, f);
}

void finding_sink_recent_json(finding_sink *s, text_buf *out)
{
	text_char(out, '[');
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->count; i++) {
		size_t mark = text_mark(out);
		if (i)
			text_char(out, ',');
		text_str(out, s->ring[(s->head + i) % RECENT_MAX]);
		if (out->overflow) { /* keep the array whole: drop what does not fit */
			text_rewind(out, mark);
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	text_close(out, "]");
	text_finish(out);
}
