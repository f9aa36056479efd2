/* What a new user following the README met in the report (issue 34), on
 * captures built here with the capture's own builders and read by the
 * report's aggregator: driver and shell housekeeping counted apart from
 * the application's shapes; --rule judging with other parameters; a
 * collection-scan kept quiet by minDocuments on a shape that returned a
 * lot, listed; the words the Markdown uses. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fixtures/report_fixture.h"

#include "fixtures/analyzer_fixture.h"
#include "protocol/capture.h"
#include "protocol/request.h"
#include "report/aggregate.h"
#include "report/report.h"
#include "report/sections.h"

#define T0 1700000000000000LL /* µs */

typedef struct feed {
	model m;
	aggregator *a;
	uint64_t conn;
} feed;

static void feed_open(feed *f, const model_override *ov, size_t nov)
{
	memset(f, 0, sizeof *f);
	f->m.inputs = calloc(1, sizeof *f->m.inputs);
	assert_non_null(f->m.inputs);
	f->m.ninputs = 1;
	snprintf(f->m.inputs[0].path, sizeof f->m.inputs[0].path, "cap/capture-1.bson");
	for (size_t i = 0; i < nov; i++)
		f->m.overrides[f->m.noverrides++] = ov[i];
	f->a = aggregator_new(&f->m);
	assert_non_null(f->a);
	bson_t h;
	bson_t *rules = fx_json("{'collection-scan':{'action':'log','minDocuments':10000}}");
	capture_build_header(&h, "0.1.0", "i1", true, T0, rules);
	aggregator_record(f->a, 1, &h);
	aggregator_record(f->a, 2, &h);
	bson_destroy(&h);
	bson_destroy(rules);
	/* 500 documents: under minDocuments, over 100 */
	bson_t *id = fx_json("{'v':2,'key':{'_id':1},'name':'_id_'}"), ix;
	const bson_t *specs[] = {id};
	capture_build_indexes(&ix, T0, "shop.orders", specs, 1, NULL, 500);
	aggregator_record(f->a, 1, &ix);
	bson_destroy(&ix);
	bson_destroy(id);
}

/* One request on a connection of its own, and its reply returning n
 * documents. */
static void send(feed *f, const char *db, const char *body, int64_t n)
{
	fx_req q;
	request r;
	wire_error err = {0};
	capture_origin o = {.t_us = T0 + (int64_t)f->conn * 1000,
	                    .conn = ++f->conn,
	                    .client = "c",
	                    .app = "shop-web"};
	assert_true(fx_req_build(&q, db, body, NULL, 0));
	assert_int_equal(request_decode(&r, q.msg, q.len, &err), REQUEST_COMMAND);
	bson_t rec, rep;
	capture_build_request(&rec, &o, &r, true, NULL);
	aggregator_record(f->a, 2, &rec);
	capture_reply_facts rf = {.read = true, .ok = true, .n = n};
	o.t_us += 100;
	capture_build_reply(&rep, &o, 7, (size_t)n * 1000 + 100, &rf);
	aggregator_record(f->a, 2, &rep);
	bson_destroy(&rec);
	bson_destroy(&rep);
	request_release(&r);
	fx_req_free(&q);
}

/* What drivers and mongosh send before the application's first query,
 * and the application's one shape, read ten times. */
static void workload(feed *f)
{
	send(f, "admin", "{'hello':1}", 1);
	send(f, "admin", "{'isMaster':1}", 1);
	send(f, "admin", "{'buildInfo':1}", 1);
	send(f, "admin", "{'atlasVersion':1}", 0);
	send(f, "admin", "{'getParameter':1,'featureCompatibilityVersion':1}", 1);
	send(f, "admin", "{'ping':1}", 1);
	send(f, "admin", "{'find':'atlascli','filter':{'managedClusterType':'x'},'limit':1}", 0);
	for (int i = 0; i < 10; i++)
		send(f, "shop", "{'find':'orders','filter':{'status':'open'}}", 200);
}

static void feed_close(feed *f)
{
	aggregator_free(f->a);
	model_free(&f->m);
}

/* Housekeeping is counted, never a shape, a schema block or a failure. */
static void test_housekeeping_apart(void **state)
{
	(void)state;
	feed f;
	feed_open(&f, NULL, 0);
	workload(&f);
	aggregator_finish(f.a);
	assert_int_equal(f.m.requests, 17);
	assert_int_equal(f.m.housekeeping_requests, 7);
	assert_int_equal(f.m.nshapes, 1);
	assert_string_equal(f.m.shapes[0].ns, "shop.orders");
	assert_int_equal(f.m.paired, 17); /* their replies paired, and dropped */
	for (size_t i = 0; i < f.m.nnss; i++)
		assert_true(strncmp(f.m.nss[i].ns, "admin.", 6) != 0);
	assert_string_equal(f.m.housekeeping[0].what, "hello"); /* isMaster counts as hello */
	assert_int_equal(f.m.housekeeping[0].count, 2);
	char *md = fx_markdown(&f.m);
	assert_non_null(strstr(md, "- Driver and shell housekeeping: 7 requests (hello 2, "));
	assert_non_null(strstr(md, "admin.atlascli 1"));
	assert_null(strstr(md, "atlasVersion` |"));
	assert_non_null(strstr(md, "(1 query shape, 1 app, 1 collection)"));
	free(md);
	feed_close(&f);
}

/* minDocuments kept collection-scan quiet on 500 documents; the shape
 * returned 2,000 of them, so it is listed; with --rule at 100 it is a
 * finding instead, and the report says what it judged with. */
static void test_scans_below_min_documents(void **state)
{
	(void)state;
	feed f;
	feed_open(&f, NULL, 0);
	workload(&f);
	aggregator_finish(f.a);
	assert_int_equal(f.m.nfindings, 0);
	int r = rule_from_name("collection-scan");
	assert_true(model_shape_quiet(&f.m.shapes[0], (rule_id)r));
	assert_int_equal(f.m.quiet_below[r], 10000);
	char *md = fx_markdown(&f.m);
	assert_non_null(strstr(md, "## Scans below minDocuments (10000)"));
	assert_non_null(strstr(md, "| `shop.orders` | find | 10 | 500 | 2000 | "));
	assert_null(strstr(md, "Judged with"));
	free(md);
	feed_close(&f);

	model_override ov;
	char err[512];
	assert_true(report_rule_parse("collection-scan.minDocuments=100", &ov, err, sizeof err));
	feed_open(&f, &ov, 1);
	workload(&f);
	aggregator_finish(f.a);
	assert_int_equal(f.m.nfindings, 1);
	assert_int_equal(f.m.findings[0].rule, r);
	assert_false(model_shape_quiet(&f.m.shapes[0], (rule_id)r));
	md = fx_markdown(&f.m);
	assert_non_null(strstr(md, "- Judged with (--rule): collection-scan.minDocuments=100 (the "
	                           "capture's: 10000)\n"));
	assert_non_null(strstr(md, "## Scans below minDocuments (100)"));
	assert_non_null(strstr(md, "(10 occurrences)"));
	free(md);
	feed_close(&f);
}

/* --rule is validated from the rule table, each message naming what is
 * allowed. */
static void test_rule_argument(void **state)
{
	(void)state;
	model_override o;
	char err[512];
	static const struct {
		const char *spec, *says;
	} bad[] = {
	    {"collection-scan.minDocuments", "expected RULE.PARAMETER=VALUE"},
	    {"no-such-rule.x=1", "unknown rule 'no-such-rule' (rules: case-insensitive-regex,"},
	    {"collection-scan.minDocs=1", "has no parameter 'minDocs' (parameters: minDocuments)"},
	    {"collection-scan.minDocuments=-1", "must be a whole number from 0 to 4000000000"},
	    {"collection-scan.minDocuments=4000000001", "from 0 to 4000000000"},
	    {"collection-scan.minDocuments=1e3", "whole number"},
	    {"unbounded-push.x=1", "unbounded-push has no parameters"},
	    {"unbounded-push=block", "must be off or log"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		assert_false(report_rule_parse(bad[i].spec, &o, err, sizeof err));
		if (!strstr(err, bad[i].says))
			fail_msg("%s: %s", bad[i].spec, err);
	}
	assert_true(report_rule_parse("unbounded-push=off", &o, err, sizeof err));
	assert_int_equal(o.param, -1);
	assert_int_equal(o.value, 0);
	assert_true(report_rule_parse("hot-path-lookup.threshold=5", &o, err, sizeof err));
	assert_int_equal(o.value, 5);
}

/* Sizes for people, and a count's noun in the singular for one. */
static void test_words(void **state)
{
	(void)state;
	char buf[256];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	out_size(&t, 512);
	text_str(&t, ", ");
	out_size(&t, 1536);
	text_str(&t, ", ");
	out_size(&t, 3u << 20);
	text_str(&t, ", ");
	out_count(&t, 1, "app", "apps");
	text_str(&t, ", ");
	out_count(&t, 2, "app", "apps");
	assert_string_equal(text_finish(&t), "512 B, 1.5 KiB, 3.0 MiB, 1 app, 2 apps");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_housekeeping_apart),
	    cmocka_unit_test(test_scans_below_min_documents),
	    cmocka_unit_test(test_rule_argument),
	    cmocka_unit_test(test_words),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
