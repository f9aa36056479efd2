/* The restart-only settings (proxy/runtime/restart_only.h): each key is
 * named when, and only when, its own setting changes, and keeping them
 * puts back exactly what a reload must not change. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "proxy/runtime/restart_only.h"

/* The keys as the README and the reload log name them, each with the
 * change that must make it named. */
static const char *const expected[] = {
    "net.listen",
    "net.maxConnections",
    "upstream.uri",
    "upstream.dnsServer",
    "upstream.dnsRefreshSecs",
    "workers",
    "shutdownGraceMS",
    "log.path",
    "analysis.enabled",
    "analysis.indexRefreshSecs",
    "analysis.summaryIntervalSecs",
    "admin.listen",
    "admin.tokenFile",
    "instanceName",
    "sinks.mongodb",
    "capture",
    "upstream.members",
    "upstream.credentialsFile",
    "admin.findingsRing",
    "workload",
};
#define NKEYS (sizeof(expected) / sizeof(expected[0]))

static void change(mg_config *c, size_t i)
{
	switch (i) {
	case 0:
		snprintf(c->listen, sizeof c->listen, "127.0.0.1:1");
		break;
	case 1:
		c->max_connections++;
		break;
	case 2:
		snprintf(c->upstream_uri, sizeof c->upstream_uri, "mongodb://other:1");
		break;
	case 3:
		snprintf(c->dns_server, sizeof c->dns_server, "10.0.0.1");
		break;
	case 4:
		c->dns_refresh_secs++;
		break;
	case 5:
		c->workers++;
		break;
	case 6:
		c->shutdown_grace_ms++;
		break;
	case 7:
		snprintf(c->log_path, sizeof c->log_path, "/tmp/other.log");
		break;
	case 8:
		c->analysis_enabled = !c->analysis_enabled;
		break;
	case 9:
		c->index_refresh_secs++;
		break;
	case 10:
		c->summary_interval_secs++;
		break;
	case 11:
		snprintf(c->admin_listen, sizeof c->admin_listen, "127.0.0.1:2");
		break;
	case 12:
		snprintf(c->admin_token_file, sizeof c->admin_token_file, "/tmp/t");
		break;
	case 13:
		snprintf(c->instance_name, sizeof c->instance_name, "other");
		break;
	case 14:
		c->sink_mongodb.ttl_days++;
		break;
	case 15:
		c->capture.rotate_secs++;
		break;
	case 16:
		c->nmembers++;
		break; /* the count alone is a change */
	case 17:
		snprintf(c->credentials_file, sizeof c->credentials_file, "/tmp/c");
		break;
	case 18:
		c->findings_ring++;
		break;
	case 19:
		c->workload.shapes++;
		break;
	default:
		fail();
	}
}

static mg_config *base(void)
{
	static mg_config c;
	config_defaults(&c);
	return &c;
}

static void test_each_key_names_its_own_setting(void **state)
{
	(void)state;
	assert_int_equal(restart_only_count(), NKEYS);
	for (size_t i = 0; i < NKEYS; i++)
		assert_string_equal(restart_only_key(i), expected[i]);
	mg_config *was = base(), *now = malloc(sizeof *now);
	assert_non_null(now);
	for (size_t i = 0; i < NKEYS; i++) {
		*now = *was;
		change(now, i);
		for (size_t j = 0; j < NKEYS; j++)
			if (restart_only_changed(j, was, now) != (i == j))
				fail_msg("changing %s: %s %s", expected[i], expected[j],
				         i == j ? "not named" : "named");
	}
	free(now);
}

static void test_text_ends_at_its_nul(void **state)
{
	(void)state;
	mg_config *was = base(), *now = malloc(sizeof *now);
	assert_non_null(now);
	*now = *was;
	now->log_path[strlen(now->log_path) + 1] = 'x'; /* after the NUL: the same path */
	for (size_t j = 0; j < NKEYS; j++)
		assert_false(restart_only_changed(j, was, now));
	free(now);
}

static void test_keep_puts_back_every_one(void **state)
{
	(void)state;
	mg_config *running = base(), *next = malloc(sizeof *next);
	assert_non_null(next);
	*next = *running;
	next->engine.redact_literals = !next->engine.redact_literals; /* reloadable */
	for (size_t i = 0; i < NKEYS; i++)
		change(next, i);
	restart_only_keep(next, running);
	for (size_t j = 0; j < NKEYS; j++)
		assert_false(restart_only_changed(j, running, next));
	assert_true(next->engine.redact_literals != running->engine.redact_literals);
	next->engine.redact_literals = running->engine.redact_literals;
	assert_memory_equal(next, running, sizeof *next);
	free(next);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_each_key_names_its_own_setting),
	    cmocka_unit_test(test_text_ends_at_its_nul),
	    cmocka_unit_test(test_keep_puts_back_every_one),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
