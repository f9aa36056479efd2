/* The metrics exposition, the URI mask of /config and the findings ring of
 * /findings, without a server. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "proxy/admin/config_json.h"
#include "proxy/admin/metrics.h"
#include "proxy/sinks/finding_log.h"
#include "proxy/sinks/log.h"

static char out[64 * 1024];

static const char *render(const metrics *m)
{
	text_buf t;
	text_init(&t, out, sizeof(out));
	metrics_render(m, &t);
	assert_false(t.overflow);
	return text_finish(&t);
}

static void assert_has(const char *text, const char *line)
{
	if (!strstr(text, line))
		fail_msg("exposition lacks '%s'", line);
}

static void test_shards_are_summed(void **state)
{
	atomic_uint conns = 3;
	metrics *m = metrics_new(2, &conns, "9.9.9");
	mx_add(&m->shards[0].commands[mx_command_of("find")], 4);
	mx_add(&m->shards[1].commands[mx_command_of("find")], 5);
	mx_add(&m->shards[1].commands[mx_command_of("isMaster")], 1);
	mx_add(&m->shards[0].commands[mx_command_of("someNewCommand")], 2);
	mx_add(&m->shards[1].blocked[RULE_UNBOUNDED_PUSH], 2);
	mx_add_shared(&m->findings[RULE_UNBOUNDED_PUSH][RULE_BLOCK], 7);
	const char *t = render(m);
	assert_has(t, "mongoguard_commands_total{command=\"find\"} 9\n");
	assert_has(t, "mongoguard_commands_total{command=\"hello\"} 1\n");
	assert_has(t, "mongoguard_commands_total{command=\"other\"} 2\n");
	assert_has(t, "mongoguard_blocked_total{rule=\"unbounded-push\"} 2\n");
	assert_has(t, "mongoguard_findings_total{rule=\"unbounded-push\",action=\"block\"} 7\n");
	assert_has(t, "mongoguard_connections 3\n");
	assert_has(t, "mongoguard_build_info{version=\"9.9.9\"} 1\n");
	assert_has(t, "# TYPE mongoguard_request_latency_seconds histogram\n");
	metrics_free(m);
}

static void test_histogram_is_cumulative(void **state)
{
	metrics *m = metrics_new(2, NULL, "x");
	mx_observe(&m->shards[0].latency, 800);         /* <= 1 us */
	mx_observe(&m->shards[1].latency, 30000);       /* <= 50 us */
	mx_observe(&m->shards[1].latency, 20000000000); /* past 10 s: +Inf only */
	const char *t = render(m);
	assert_has(t, "mongoguard_request_latency_seconds_bucket{le=\"1e-06\"} 1\n");
	assert_has(t, "mongoguard_request_latency_seconds_bucket{le=\"2.5e-05\"} 1\n");
	assert_has(t, "mongoguard_request_latency_seconds_bucket{le=\"5e-05\"} 2\n");
	assert_has(t, "mongoguard_request_latency_seconds_bucket{le=\"10\"} 2\n");
	assert_has(t, "mongoguard_request_latency_seconds_bucket{le=\"+Inf\"} 3\n");
	assert_has(t, "mongoguard_request_latency_seconds_count 3\n");
	assert_has(t, "mongoguard_request_latency_seconds_sum 20.000030800\n");
	metrics_free(m);
}

/* One value observed alone lands in the bucket a scan of the bounds one by
 * one would put it in, and in no other. */
static void observe_where_the_bounds_say(uint64_t value)
{
	mx_hist h = {0};
	mx_observe(&h, value);
	int want = 0;
	while (want < MX_HIST_BUCKETS && value > mx_hist_bounds_ns[want])
		want++;
	for (int i = 0; i <= MX_HIST_BUCKETS; i++)
		if (atomic_load(&h.bucket[i]) != (i == want))
			fail_msg("%" PRIu64 " ns: bucket %d holds %" PRIu64 ", bucket %d wanted",
			         value, i, (uint64_t)atomic_load(&h.bucket[i]), want);
}

/* Every bound and its neighbours land where a bucket's `le` says: a value
 * equal to a bound in that bucket, one past it in the next (the last
 * past 10 s in +Inf); and so does each bit length's least and greatest
 * value (mx_observe starts from a bucket per length). */
static void test_histogram_buckets_at_every_bound(void **state)
{
	for (int b = 0; b < MX_HIST_BUCKETS; b++) {
		observe_where_the_bounds_say(mx_hist_bounds_ns[b] - 1);
		observe_where_the_bounds_say(mx_hist_bounds_ns[b]);
		observe_where_the_bounds_say(mx_hist_bounds_ns[b] + 1);
	}
	for (int len = 1; len <= 64; len++) {
		uint64_t least = UINT64_C(1) << (len - 1);
		observe_where_the_bounds_say(least);
		observe_where_the_bounds_say(least | (least - 1));
	}
	mx_hist h = {0};
	mx_observe(&h, 0);
	assert_int_equal(atomic_load(&h.bucket[0]), 1);
	mx_observe(&h, UINT64_MAX);
	assert_int_equal(atomic_load(&h.bucket[MX_HIST_BUCKETS]), 1);
}

static void test_mask_uri(void **state)
{
	char buf[256];
	config_mask_uri("mongodb://u:secret@h1:1,h2:2/db?authSource=admin", buf, sizeof(buf));
	assert_string_equal(buf, "mongodb://u:****@h1:1,h2:2/db?authSource=admin");
	config_mask_uri("mongodb://u:p@ss@host/", buf, sizeof(buf)); /* last @ ends userinfo */
	assert_string_equal(buf, "mongodb://u:****@host/");
	config_mask_uri("mongodb://onlyuser@host/", buf, sizeof(buf));
	assert_string_equal(buf, "mongodb://onlyuser@host/");
	config_mask_uri("mongodb://host:27017/?x=a@b", buf, sizeof(buf));
	assert_string_equal(buf, "mongodb://host:27017/?x=a@b");
}

/* How many objects the JSON array in buf holds. */
static unsigned array_len(const char *buf)
{
	unsigned n = 0;
	for (const char *p = buf; (p = strstr(p, "\"shapeHash\"")); p++)
		n++;
	return n;
}

static void test_recent_findings_filters(void **state)
{
	assert_true(log_open("/dev/null", LOG_INFO));
	finding_sink *s = finding_sink_new(NULL, NULL, 5);
	finding f = {.rule = RULE_CASE_INSENSITIVE_REGEX,
	             .action = RULE_LOG,
	             .command = "find",
	             .shape = "{}",
	             .app_name = "shop",
	             .client = "c"};
	const char *ns[] = {"a.x", "a.y", "b.x", "a.x", "b.y", "a.x", "b.x"};
	for (int i = 0; i < 7; i++) {
		f.ns = ns[i];
		f.shape_hash = (uint64_t)i;
		f.rule = i == 6 ? RULE_UNBOUNDED_PUSH : RULE_CASE_INSENSITIVE_REGEX;
		f.app_name = i == 5 ? "admin" : "shop";
		server_log_finding(s, &f);
	}
	static char buf[64 * 1024];
	text_buf t;
	struct {
		finding_query q;
		unsigned n;
		const char *first;
	} cases[] = {
	    {{0}, 5, "0000000000000002"}, /* the ring keeps 5 */
	    {{.ns = "a.*"}, 2, "0000000000000003"},
	    {{.rule = "unbounded-push"}, 1, "0000000000000006"},
	    {{.app = "adm*"}, 1, "0000000000000005"},
	    {{.limit = 2}, 2, "0000000000000005"}, /* the newest two */
	    {{.since = (int64_t)time(NULL) + 60}, 0, NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		text_init_reserve(&t, buf, sizeof(buf), 16);
		finding_sink_recent_json(s, &cases[i].q, &t);
		assert_int_equal(array_len(buf), cases[i].n);
		if (cases[i].first) /* oldest first */
			assert_ptr_equal(strstr(buf, cases[i].first),
			                 strstr(buf, "\"shapeHash\"") + 13);
	}
	finding_sink_free(s);
	log_close();
}

static void test_recent_findings_ring(void **state)
{
	assert_true(log_open("/dev/null", LOG_INFO));
	metrics *m = metrics_new(1, NULL, "x");
	finding_sink *s = finding_sink_new(m, NULL, 100);
	finding f = {.rule = RULE_CASE_INSENSITIVE_REGEX,
	             .action = RULE_LOG,
	             .ns = "d.c",
	             .command = "find",
	             .shape = "{\"find\":\"c\",\"filter\":{\"n\":\"?\"}}",
	             .suggestion = "s",
	             .detail = "d\xff", /* not UTF-8: must come out valid */
	             .app_name = "",
	             .client = "127.0.0.1:1"};
	for (int i = 0; i < 150; i++) {
		f.shape_hash = (uint64_t)i;
		f.repeats = i == 149 ? 5 : 0;
		server_log_finding(s, &f);
	}
	static char buf[1024 * 1024];
	text_buf t;
	text_init_reserve(&t, buf, sizeof(buf), 16);
	finding_sink_recent_json(s, NULL, &t);
	bson_error_t err;
	char wrapped[sizeof(buf) + 16];
	snprintf(wrapped, sizeof(wrapped), "{\"a\":%s}", buf);
	bson_t *doc = bson_new_from_json((const uint8_t *)wrapped, -1, &err);
	if (!doc)
		fail_msg("not JSON: %s", err.message);
	bson_iter_t it, arr;
	assert_true(bson_iter_init_find(&it, doc, "a") && bson_iter_recurse(&it, &arr));
	unsigned n = 0;
	while (bson_iter_next(&arr))
		n++;
	assert_int_equal(n, 100);                                           /* the newest 100 */
	assert_non_null(strstr(buf, "\"shapeHash\":\"0000000000000032\"")); /* #50 kept */
	assert_null(strstr(buf, "\"shapeHash\":\"0000000000000031\""));     /* #49 gone */
	/* the counter follows the engine's tally, one per finding as it
	 * happens; the log's lines (a summary of 5 included) add nothing */
	assert_int_equal(atomic_load(&m->findings[RULE_CASE_INSENSITIVE_REGEX][RULE_LOG]), 0);
	for (int i = 0; i < 154; i++)
		server_count_finding(s, RULE_CASE_INSENSITIVE_REGEX, RULE_LOG);
	assert_int_equal(atomic_load(&m->findings[RULE_CASE_INSENSITIVE_REGEX][RULE_LOG]), 154);
	bson_destroy(doc);
	finding_sink_free(s);
	metrics_free(m);
	log_close();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shards_are_summed),
	    cmocka_unit_test(test_histogram_is_cumulative),
	    cmocka_unit_test(test_histogram_buckets_at_every_bound),
	    cmocka_unit_test(test_mask_uri),
	    cmocka_unit_test(test_recent_findings_ring),
	    cmocka_unit_test(test_recent_findings_filters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
