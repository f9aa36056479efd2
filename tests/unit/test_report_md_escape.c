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

/* A suggestion naming a collection and a field that hold backtick runs
 * stays inside its ```js block: the fence is longer than any run inside;
 * the detail and the fix in words are text, not markup or HTML. */
static void test_a_fix_block_outfences_backticks_and_prose_is_escaped(void **state)
{
	(void)state;
	static model m;
	static model_finding finding;
	finding = (model_finding){.rule = RULE_INDEX_MISMATCHED_SORT, .hash = 1, .count = 1};
	snprintf(finding.ns, sizeof finding.ns, "shop.a```b");
	snprintf(finding.suggestion, sizeof finding.suggestion,
	         "db.getSiblingDB(\"shop\").getCollection(\"a```b\").createIndex({\"x````y\": 1}) "
	         "and drop <b>old</b> *now*");
	snprintf(finding.detail, sizeof finding.detail,
	         "sorts on <img src=x> and [link](http://e)");
	m.findings = &finding;
	m.nfindings = 1;
	char *md = fx_markdown(&m);
	assert_non_null(strstr(md, "\n\n`````js\ndb.getSiblingDB(\"shop\").getCollection(\"a```b\")"
	                           ".createIndex({\"x````y\": 1})\n`````"));
	assert_non_null(strstr(md, "Then: drop \\<b\\>old\\</b\\> \\*now\\*\n"));
	assert_non_null(strstr(md, "sorts on \\<img src=x\\> and \\[link\\](http://e)"));
	assert_null(strstr(md, "on <img"));
	free(md);
}

/* The recommendations' block: the createIndex, the drops and their keys
 * (names from the capture) under one fence longer than any backtick run;
 * a newline inside stays out of the block; the design change's words are
 * escaped. */
static void test_a_recommendation_block_outfences_backticks(void **state)
{
	(void)state;
	static model m;
	static model_rec recs[2];
	recs[0] = (model_rec){.index = true, .rule = RULE_INDEX_MISMATCHED_SORT, .nredundant = 1};
	snprintf(recs[0].ns, sizeof recs[0].ns, "shop.orders");
	snprintf(recs[0].command, sizeof recs[0].command,
	         "db.getSiblingDB(\"shop\").getCollection(\"orders\").createIndex({\"a\": 1})");
	snprintf(recs[0].redundant[0], sizeof recs[0].redundant[0], "old```\nidx");
	snprintf(recs[0].redundant_key[0], sizeof recs[0].redundant_key[0], "{\"a````\": 1}");
	recs[1] = (model_rec){.index = false, .rule = RULE_UNBOUNDED_PUSH};
	snprintf(recs[1].ns, sizeof recs[1].ns, "shop.orders");
	snprintf(recs[1].pattern, sizeof recs[1].pattern, "bucket*");
	snprintf(recs[1].change, sizeof recs[1].change, "move <items> out");
	m.recs = recs;
	m.nrecs = 2;
	char *md = fx_markdown(&m);
	assert_non_null(strstr(md,
	                       "  `````js\n  db.getSiblingDB(\"shop\").getCollection(\"orders\")"
	                       ".createIndex({\"a\": 1})\n"));
	assert_non_null(strstr(md, ".dropIndex(\"old```\\nidx\") // redundant: {\"a````\": 1}\n"
	                           "  `````\n"));
	assert_non_null(strstr(md, "- Design change, **bucket\\***"));
	assert_non_null(strstr(md, "): move \\<items\\> out\n"));
	free(md);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_namespace_with_markup_stays_one_code_span),
	    cmocka_unit_test(test_a_backtick_at_an_end_is_padded),
	    cmocka_unit_test(test_a_fix_block_outfences_backticks_and_prose_is_escaped),
	    cmocka_unit_test(test_a_recommendation_block_outfences_backticks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
