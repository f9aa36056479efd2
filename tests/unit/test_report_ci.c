/* The report's CI outputs (report/ci.c) and --fail-on (gate.c), on
 * models written here: what fuzz_report_diff found. A finding's shape with
 * no row of its own is one testcase however many rules found it; U+FFFE
 * and U+FFFF never reach the XML; a --fail-on list too long to read whole
 * is refused, not cut. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "report/model.h"

static model_shape shapes[2];
static model_finding findings[3];

/* One shape row (hash 1), and findings: regex on it, then regex and push
 * on the second statement of a batch (hash 7: no row). */
static void two_rules_on_a_later_statement(model *m)
{
	memset(m, 0, sizeof *m);
	memset(shapes, 0, sizeof shapes);
	memset(findings, 0, sizeof findings);
	shapes[0] = (model_shape){.hash = 1, .count = 1};
	snprintf(shapes[0].ns, sizeof shapes[0].ns, "shop.users");
	snprintf(shapes[0].command, sizeof shapes[0].command, "update");
	const rule_id rules[3] = {RULE_CASE_INSENSITIVE_REGEX, RULE_CASE_INSENSITIVE_REGEX,
	                          RULE_UNBOUNDED_PUSH};
	const uint64_t hashes[3] = {1, 7, 7};
	for (int i = 0; i < 3; i++) {
		findings[i] = (model_finding){.rule = rules[i], .hash = hashes[i], .count = 1};
		snprintf(findings[i].ns, sizeof findings[i].ns, "shop.users");
		snprintf(findings[i].command, sizeof findings[i].command, "update");
		snprintf(findings[i].detail, sizeof findings[i].detail, "detail %d", i);
	}
	m->shapes = shapes;
	m->nshapes = 1;
	m->findings = findings;
	m->nfindings = 3;
}

static char *junit(const model *m, const char *spec, size_t *len)
{
	report_gate g;
	char err[256];
	assert_true(report_gate_parse(spec, &g, err, sizeof err));
	char *out = NULL;
	FILE *f = open_memstream(&out, len);
	assert_non_null(f);
	assert_true(report_write_junit(m, &g, f));
	assert_int_equal(fclose(f), 0);
	return out;
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static void test_later_statement_is_one_testcase(void **state)
{
	model m;
	two_rules_on_a_later_statement(&m);
	size_t len;
	char *x = junit(&m, "any", &len);
	/* the row's testcase and one for hash 7, holding both of its findings once */
	assert_int_equal(count(x, "<testcase "), 2);
	assert_int_equal(count(x, "<failure "), 3);
	assert_non_null(strstr(x, "<testsuites name=\"mongoguard\" tests=\"2\" failures=\"2\">"));
	assert_non_null(strstr(x, "tests=\"2\" failures=\"2\" errors=\"0\""));
	free(x);
	x = junit(&m, "unbounded-push", &len);
	assert_int_equal(count(x, "<failure "), 1);
	assert_non_null(strstr(x, "tests=\"2\" failures=\"1\" errors=\"0\""));
	free(x);
}

static void test_noncharacters_never_reach_the_xml(void **state)
{
	model m;
	two_rules_on_a_later_statement(&m);
	snprintf(shapes[0].ns, sizeof shapes[0].ns, "shop.\xef\xbf\xbf<\xef\xbf\xbe\xef\xbf\xbd");
	snprintf(findings[0].detail, sizeof findings[0].detail, "x\xef\xbf\xbey");
	size_t len;
	char *x = junit(&m, "any", &len);
	assert_null(memmem(x, len, "\xef\xbf\xbf", 3));
	assert_null(memmem(x, len, "\xef\xbf\xbe", 3));
	assert_non_null(strstr(x, "classname=\"shop.\xef\xbf\xbd&lt;\xef\xbf\xbd\xef\xbf\xbd\""));
	assert_non_null(strstr(x, "message=\"x\xef\xbf\xbdy\""));
	free(x);
}

static void test_fail_on_list_too_long_is_refused(void **state)
{
	char spec[700] = ",";
	for (int i = 0; i < 34; i++)
		strcat(spec, "unbounded-push,");
	report_gate g;
	char err[256] = "";
	/* 511 bytes: read whole */
	assert_true(report_gate_parse(spec, &g, err, sizeof err));
	assert_int_equal(g.rules, 1u << RULE_UNBOUNDED_PUSH);
	/* one id more: it used to be cut off without a word */
	strcat(spec, "large-document");
	assert_false(report_gate_parse(spec, &g, err, sizeof err));
	assert_non_null(strstr(err, "longer than 511 bytes"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_later_statement_is_one_testcase),
	    cmocka_unit_test(test_noncharacters_never_reach_the_xml),
	    cmocka_unit_test(test_fail_on_list_too_long_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
