/* The report's per-rule words come from the rule table: every rule has a
 * fix kind, and each writer shows it (an empty one once rendered as
 * "Fix: ." in the HTML rule list and "fix":"" in the JSON). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analyzers/rules/rules.h"
#include "report/model.h"

static void test_every_rule_has_report_words(void **state)
{
	(void)state;
	for (int r = 0; r < RULE_COUNT; r++) {
		const rule_def *d = rule_table[r];
		assert_non_null(d->fix_kind);
		assert_true(strlen(d->fix_kind) > 3);
		/* a profile row has both its label and its JSON key, or neither */
		assert_true((d->profile_row == NULL) == (d->profile_key == NULL));
	}
}

typedef bool (*writer)(const model *m, FILE *f);

/* What w writes for a model with nothing in it (every rule still listed). */
static char *render(writer w)
{
	static model m; /* zeroed: no inputs, shapes or findings */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_true(w(&m, f));
	assert_int_equal(fclose(f), 0);
	return text;
}

static void test_markdown_shows_each_fix(void **state)
{
	(void)state;
	char *md = render(report_write_md);
	for (int r = 0; r < RULE_COUNT; r++) {
		char row[512];
		snprintf(row, sizeof row, "| `%s` | 0 | %s |\n", rule_name((rule_id)r),
		         rule_table[r]->fix_kind);
		assert_non_null(strstr(md, row));
	}
	free(md);
}

static void test_html_shows_each_fix(void **state)
{
	(void)state;
	char *html = render(report_write_html);
	assert_null(strstr(html, "Fix: .<"));
	for (int r = 0; r < RULE_COUNT; r++) {
		char p[512];
		snprintf(p, sizeof p, "%s. Fix: ", rule_table[r]->summary);
		assert_non_null(strstr(html, p));
	}
	free(html);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_rule_has_report_words),
	    cmocka_unit_test(test_markdown_shows_each_fix),
	    cmocka_unit_test(test_html_shows_each_fix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
