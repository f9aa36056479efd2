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
#include "report/aggregate.h"
#include "report/model.h"
#include "report/recommend.h"

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
		snprintf(row, sizeof row, "| `%s` | 0 | 0 | %s |\n", rule_name((rule_id)r),
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

/* A model with one finding of each rule, whose fix is words (no
 * createIndex), so each asks for a design change. */
static void one_finding_per_rule(model *m, bool arrays_small)
{
	memset(m, 0, sizeof *m);
	m->findings = calloc(RULE_COUNT, sizeof *m->findings);
	assert_non_null(m->findings);
	for (int r = 0; r < RULE_COUNT; r++) {
		model_finding *f = &m->findings[m->nfindings++];
		f->rule = (rule_id)r;
		f->hash = 100 + (uint64_t)r;
		f->count = 1;
		f->esr_neq = f->esr_nsort = -1;
		snprintf(f->ns, sizeof f->ns, "db.c%d", r);
		snprintf(f->shape, sizeof f->shape, "{\"update\": \"c\"}");
		snprintf(f->suggestion, sizeof f->suggestion, "change the write");
		f->has_evidence = arrays_small;
		f->array_bounded = arrays_small;
	}
}

/* The pattern a design change names is the one the rule's row gives
 * (rules.h, design_pattern), from what the finding saw; a rule without
 * one asks for a query change. */
static void test_design_pattern_comes_from_the_rule_row(void **state)
{
	(void)state;
	size_t with_pattern = 0;
	for (int small = 0; small < 2; small++) {
		model m;
		one_finding_per_rule(&m, small);
		report_recommend_build(&m);
		assert_int_equal(m.nrecs, RULE_COUNT);
		for (size_t i = 0; i < m.nrecs; i++) {
			const model_rec *r = &m.recs[i];
			const rule_def *d = rule_table[r->rule];
			rule_report_finding rf = {.shape = "{\"update\": \"c\"}",
			                          .suggestion = "change the write",
			                          .arrays_seen_small = small};
			const char *want = d->design_pattern ? d->design_pattern(&rf) : NULL;
			with_pattern += want != NULL;
			assert_false(r->index);
			assert_string_equal(r->pattern, want ? want : "query change");
		}
		model_free(&m);
	}
	assert_true(with_pattern > 0); /* else the rows were not read at all */
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Array evidence is shown, in each writer, for the findings of the rules
 * whose row says they grow arrays, and only for them. */
static void test_array_evidence_follows_grows_arrays(void **state)
{
	(void)state;
	size_t growing = 0;
	for (int r = 0; r < RULE_COUNT; r++)
		growing += rule_table[r]->grows_arrays;
	assert_true(growing > 0);
	model m;
	one_finding_per_rule(&m, false);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_true(report_write_json(&m, f));
	assert_int_equal(fclose(f), 0);
	assert_int_equal(count_of(text, "\"arrayEvidence\":null"), RULE_COUNT - growing);
	assert_int_equal(count_of(text, "\"arrayEvidence\":{"), growing);
	free(text);
	f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_true(report_write_md(&m, f));
	assert_int_equal(fclose(f), 0);
	assert_int_equal(count_of(text, "Array lengths: no sampled reply held it."), growing);
	free(text);
	f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_true(report_write_html(&m, f));
	assert_int_equal(fclose(f), 0);
	assert_int_equal(count_of(text, "<p class=\"evidence muted\">"), growing);
	free(text);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_rule_has_report_words),
	    cmocka_unit_test(test_markdown_shows_each_fix),
	    cmocka_unit_test(test_html_shows_each_fix),
	    cmocka_unit_test(test_design_pattern_comes_from_the_rule_row),
	    cmocka_unit_test(test_array_evidence_follows_grows_arrays),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
