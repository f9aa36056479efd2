/* Metrics: labels, histograms and the Prometheus text exposition. */
#include "proxy/admin/metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const uint64_t mx_hist_bounds_ns[MX_HIST_BUCKETS] = {
    1000,      5000,      10000,     25000,      50000,      100000,      250000,
    500000,    1000000,   2500000,   5000000,    10000000,   25000000,    50000000,
    100000000, 250000000, 500000000, 1000000000, 2500000000, 10000000000,
};

/* The first bucket a value of each bit length (64 - clz, 0 for 0) can fall
 * in: the first bound at or above the length's least value. Consecutive
 * bounds are at least twice apart, so at most one lies between that value
 * and the next length's: a sample costs a table read and one compare or
 * two, where walking the bounds cost some 30 instructions at a round
 * trip's latency, twice a request (test_proxy_metrics.c checks each bit
 * length against the walk). */
static const uint8_t mx_hist_first[65] = {
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  1,  1,  1,  2,  3,  4,  5,  6,  7,  8,  9,
    9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 18, 19, 19, 20, 20, 20, 20, 20, 20, 20, 20, 20,
    20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20,
};

void mx_observe(mx_hist *h, uint64_t ns)
{
	int i = mx_hist_first[ns ? 64 - __builtin_clzll(ns) : 0];
	while (i < MX_HIST_BUCKETS && ns > mx_hist_bounds_ns[i])
		i++;
	mx_add(&h->bucket[i], 1);
	mx_add(&h->count, 1);
	mx_add(&h->sum_ns, ns);
}

metrics *metrics_new(size_t nshards, const atomic_uint *connections, const char *version)
{
	metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->shards = calloc(nshards ? nshards : 1, sizeof(*m->shards));
	if (!m->shards) {
		free(m);
		return NULL;
	}
	m->nshards = nshards;
	m->connections = connections;
	m->version = version;
	return m;
}

void metrics_free(metrics *m)
{
	if (!m)
		return;
	free(m->shards);
	free(m);
}

size_t metrics_text_size(void)
{
	return 64 * 1024;
}

/* ---- exposition ---- */

#define LOAD(c) atomic_load_explicit(&(c), memory_order_relaxed)

/* The sum of one counter over every shard; off is its offset in a shard. */
static uint64_t sum(const metrics *m, size_t off)
{
	uint64_t n = 0;
	for (size_t i = 0; i < m->nshards; i++)
		n += LOAD(*(const mx_counter *)((const char *)&m->shards[i] + off));
	return n;
}

#define SUM(m, field) sum((m), offsetof(metrics_shard, field))

static void family(text_buf *t, const char *name, const char *type, const char *help)
{
	text_printf(t, "# HELP mongoguard_%s %s\n# TYPE mongoguard_%s %s\n", name, help, name,
	            type);
}

static void sample(text_buf *t, const char *name, const char *labels, uint64_t v)
{
	text_printf(t, "mongoguard_%s%s %" PRIu64 "\n", name, labels, v);
}

static void render_hist(text_buf *t, const metrics *m, size_t off, const char *name,
                        const char *help)
{
	family(t, name, "histogram", help);
	uint64_t cumulative = 0;
	char labels[64];
	for (int b = 0; b <= MX_HIST_BUCKETS; b++) {
		cumulative +=
		    sum(m, off + offsetof(mx_hist, bucket) + (size_t)b * sizeof(mx_counter));
		if (b < MX_HIST_BUCKETS)
			snprintf(labels, sizeof(labels), "_bucket{le=\"%g\"}",
			         (double)mx_hist_bounds_ns[b] / 1e9);
		else
			snprintf(labels, sizeof(labels), "_bucket{le=\"+Inf\"}");
		sample(t, name, labels, cumulative);
	}
	uint64_t sum_ns = sum(m, off + offsetof(mx_hist, sum_ns));
	text_printf(t, "mongoguard_%s_sum %.9f\n", name, (double)sum_ns / 1e9);
	sample(t, name, "_count", sum(m, off + offsetof(mx_hist, count)));
}

static void render_connections(const metrics *m, text_buf *t)
{
	family(t, "connections", "gauge", "Client connections open now.");
	sample(t, "connections", "", m->connections ? atomic_load(m->connections) : 0);
	family(t, "connections_accepted_total", "counter", "Client connections accepted.");
	sample(t, "connections_accepted_total", "", SUM(m, accepted));
	family(t, "connections_refused_total", "counter",
	       "Client connections closed at accept (net.maxConnections, out of memory).");
	sample(t, "connections_refused_total", "", LOAD(m->refused));
	family(t, "accept_pauses_total", "counter",
	       "Times accepting paused because accept() ran out of descriptors or memory.");
	sample(t, "accept_pauses_total", "", LOAD(m->accept_pauses));
}

static void render_traffic(const metrics *m, text_buf *t)
{
	static const char *const dir[MX_DIRS] = {"request", "reply"};
	char labels[96];
	family(t, "messages_total", "counter", "Wire messages relayed, by direction.");
	for (int d = 0; d < MX_DIRS; d++) {
		snprintf(labels, sizeof(labels), "{direction=\"%s\"}", dir[d]);
		sample(t, "messages_total", labels,
		       sum(m, offsetof(metrics_shard, messages) + (size_t)d * sizeof(mx_counter)));
	}
	family(t, "bytes_total", "counter", "Wire bytes relayed, by direction.");
	for (int d = 0; d < MX_DIRS; d++) {
		snprintf(labels, sizeof(labels), "{direction=\"%s\"}", dir[d]);
		sample(t, "bytes_total", labels,
		       sum(m, offsetof(metrics_shard, bytes) + (size_t)d * sizeof(mx_counter)));
	}
	family(t, "commands_total", "counter", "Commands received, by command.");
	/* "other" (label 0) last, after the commands it is not */
	for (int i = 1; i <= MX_CMD_LABELS; i++) {
		int c = i % MX_CMD_LABELS;
		snprintf(labels, sizeof(labels), "{command=\"%s\"}", mx_command_name(c));
		sample(t, "commands_total", labels,
		       sum(m, offsetof(metrics_shard, commands) + (size_t)c * sizeof(mx_counter)));
	}
	family(t, "bad_requests_total", "counter",
	       "Requests refused as malformed or unsupported (error reply or close).");
	sample(t, "bad_requests_total", "", SUM(m, bad_requests));
	family(t, "upstream_connect_failures_total", "counter",
	       "Upstream connections that could not be made.");
	sample(t, "upstream_connect_failures_total", "", SUM(m, upstream_connect_failures));
	family(t, "analysis_repeats_total", "counter",
	       "Queries judged by their connection's template of an earlier one, unread.");
	sample(t, "analysis_repeats_total", "", SUM(m, repeats));
}

static void render_rules(const metrics *m, text_buf *t)
{
	char labels[160];
	family(t, "findings_total", "counter",
	       "Findings, by rule and the action that applied (repeats counted when "
	       "summarised).");
	for (int r = 0; r < RULE_COUNT; r++)
		for (int a = RULE_LOG; a < MX_ACTIONS; a++) {
			snprintf(labels, sizeof(labels), "{rule=\"%s\",action=\"%s\"}",
			         rule_name((rule_id)r), rule_action_name((rule_action)a));
			sample(t, "findings_total", labels, LOAD(m->findings[r][a]));
		}
	family(t, "blocked_total", "counter", "Requests answered with a block error, by rule.");
	for (int r = 0; r < RULE_COUNT; r++) {
		snprintf(labels, sizeof(labels), "{rule=\"%s\"}", rule_name((rule_id)r));
		sample(t, "blocked_total", labels,
		       sum(m, offsetof(metrics_shard, blocked) + (size_t)r * sizeof(mx_counter)));
	}
	static const char *const reasons[MX_SKIP_REASONS] = {"wait_expired", "facts_never_came",
	                                                     "no_room", "schema_changed"};
	family(t, "verdicts_skipped_total", "counter",
	       "Requests a rule gave no verdict on, its facts (index list, document count) "
	       "unknown, by rule and reason.");
	for (int r = 0; r < RULE_COUNT; r++)
		for (int why = 0; why < MX_SKIP_REASONS; why++) {
			snprintf(labels, sizeof(labels), "{rule=\"%s\",reason=\"%s\"}",
			         rule_name((rule_id)r), reasons[why]);
			sample(t, "verdicts_skipped_total", labels,
			       sum(m, offsetof(metrics_shard, skipped) +
			                  ((size_t)r * MX_SKIP_REASONS + (size_t)why) *
			                      sizeof(mx_counter)));
		}
}

void metrics_render(const metrics *m, text_buf *out)
{
	char labels[128];
	family(out, "build_info", "gauge", "Always 1; the version as a label.");
	snprintf(labels, sizeof(labels), "{version=\"%s\"}", m->version ? m->version : "");
	sample(out, "build_info", labels, 1);
	render_connections(m, out);
	render_traffic(m, out);
	render_rules(m, out);
	render_hist(out, m, offsetof(metrics_shard, latency), "request_latency_seconds",
	            "Time from forwarding a request to the first byte of its reply.");
	render_hist(out, m, offsetof(metrics_shard, analysis), "analysis_seconds",
	            "Time spent analysing a request (those judged by their connection's "
	            "template are counted in analysis_repeats_total instead).");
	family(out, "index_lists_learned_total", "counter",
	       "Times the index cache learned or refreshed a collection's index list.");
	sample(out, "index_lists_learned_total", "", LOAD(m->index_lists_learned));
	family(out, "index_fetch_failures_total", "counter",
	       "listIndexes calls of the index cache that failed.");
	sample(out, "index_fetch_failures_total", "", LOAD(m->index_fetch_failures));
	family(out, "sink_records_total", "counter",
	       "Findings records of the findings collection sink, written or dropped.");
	sample(out, "sink_records_total", "{sink=\"mongodb\",result=\"written\"}",
	       LOAD(m->sink_written));
	sample(out, "sink_records_total", "{sink=\"mongodb\",result=\"dropped\"}",
	       LOAD(m->sink_dropped));
	family(out, "config_reloads_total", "counter", "Configuration reloads, by result.");
	sample(out, "config_reloads_total", "{result=\"ok\"}", LOAD(m->reloads_ok));
	sample(out, "config_reloads_total", "{result=\"failed\"}", LOAD(m->reloads_failed));
}
