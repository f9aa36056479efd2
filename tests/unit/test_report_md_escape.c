/* The Markdown summary (report/md.c, diff_out.c) of names a client chose:
 * a namespace holding a backtick, a '|' and a newline stays one code span
 * in one table row or heading, with every character it had but the
 * newline. */
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

#include "report/model.h"

#define ODD_NS "shop.a`b|c\nd"

static void test_a_namespace_with_markup_stays_one_code_span(void **state)
{
	(void)state;
	static model m;
	static model before;
	static model_shape shape;
	static model_finding finding;
	static model_diff d;
	static size_t gone;
	shape = (model_shape){.hash = 1, .count = 1};
	snprintf(shape.ns, sizeof shape.ns, "%s", ODD_NS);
	snprintf(shape.command, sizeof shape.command, "find|x");
	snprintf(shape.shape, sizeof shape.shape, "{\"a|b\": 1}");
	finding = (model_finding){.rule = RULE_CASE_INSENSITIVE_REGEX, .hash = 1, .count = 1};
	snprintf(finding.ns, sizeof finding.ns, "%s", ODD_NS);
	snprintf(finding.shape, sizeof finding.shape, "{\"a|b\": 1}");
	m.shapes = &shape;
	m.nshapes = 1;
	m.findings = &finding;
	m.nfindings = 1;
	before.findings = &finding;
	before.nfindings = 1;
	gone = 0;
	d = (model_diff){.before = &before, .gone_findings = &gone, .ngone_findings = 1};
	m.diff = &d;
	char *md = fx_markdown(&m);
	/* the table row: '|' escaped, the newline a space, a longer fence */
	assert_non_null(strstr(md, "| ``shop.a`b\\|c d`` | find\\|x | 1 |"));
	assert_non_null(strstr(md, "| `{\"a\\|b\": 1}` |\n"));
	/* the heading and the diff's list item: one line, '|' as it was */
	assert_non_null(strstr(md, " on ``shop.a`b|c d`` (1 occurrence)\n"));
	assert_non_null(strstr(md, "- `case-insensitive-regex` on ``shop.a`b|c d`` (1×"));
	assert_null(strstr(md, "c\nd"));
	free(md);
}

static void test_a_backtick_at_an_end_is_padded(void **state)
{
	(void)state;
	static model m;
	static model_finding finding;
	finding = (model_finding){.rule = RULE_CASE_INSENSITIVE_REGEX, .hash = 1, .count = 1};
	snprintf(finding.ns, sizeof finding.ns, "shop.x`");
	m.findings = &finding;
	m.nfindings = 1;
	char *md = fx_markdown(&m);
	assert_non_null(strstr(md, " on `` shop.x` `` ("));
	free(md);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_namespace_with_markup_stays_one_code_span),
	    cmocka_unit_test(test_a_backtick_at_an_end_is_padded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
