/* The before/after sections of each writer (diff_out.h): what changed
 * from the --baseline capture, as diff.c found it. */
#include <inttypes.h>
#include <string.h>

#include "report/diff_out.h"
#include "report/html_table.h"
#include "report/sections.h"

static void json_shape(out_t *o, const model_shape *s, bool comma)
{
	text_printf(&o->t, "%s{\"shapeHash\":\"%016" PRIx64 "\",\"ns\":", comma ? "," : "",
	            s->hash);
	out_json_str(&o->t, s->ns);
	text_str(&o->t, ",\"command\":");
	out_json_str(&o->t, s->command);
	text_str(&o->t, ",\"shape\":");
	out_json_str(&o->t, s->shape);
	text_printf(&o->t, ",\"count\":%" PRIu64 "}", s->count);
	out_flush(o);
}

static void json_finding(out_t *o, const model_finding *f, bool comma)
{
	text_printf(&o->t,
	            "%s{\"rule\":\"%s\",\"shapeHash\":\"%016" PRIx64 "\",\"ns\":", comma ? "," : "",
	            rule_name(f->rule), f->hash);
	out_json_str(&o->t, f->ns);
	text_printf(&o->t, ",\"count\":%" PRIu64 "}", f->count);
	out_flush(o);
}

void report_diff_json(out_t *o, const model *m)
{
	const model_diff *d = m->diff;
	if (!d) {
		text_str(&o->t, "\"diff\":null,");
		return;
	}
	const model *b = d->before;
	text_str(&o->t, "\"diff\":{\"newShapes\":[");
	for (size_t i = 0; i < d->nnew_shapes; i++)
		json_shape(o, &m->shapes[d->new_shapes[i]], i);
	text_str(&o->t, "],\"goneShapes\":[");
	for (size_t i = 0; i < d->ngone_shapes; i++)
		json_shape(o, &b->shapes[d->gone_shapes[i]], i);
	text_str(&o->t, "],\"newFindings\":[");
	for (size_t i = 0; i < d->nnew_findings; i++)
		json_finding(o, &m->findings[d->new_findings[i]], i);
	text_str(&o->t, "],\"goneFindings\":[");
	for (size_t i = 0; i < d->ngone_findings; i++)
		json_finding(o, &b->findings[d->gone_findings[i]], i);
	text_str(&o->t, "],\"latencyRegressions\":[");
	for (size_t i = 0; i < d->nregressions; i++) {
		const model_regression *r = &d->regressions[i];
		const model_shape *s = &m->shapes[r->shape];
		text_printf(&o->t, "%s{\"shapeHash\":\"%016" PRIx64 "\",\"ns\":", i ? "," : "",
		            s->hash);
		out_json_str(&o->t, s->ns);
		text_str(&o->t, ",\"command\":");
		out_json_str(&o->t, s->command);
		text_printf(&o->t, ",\"beforeP95Ms\":%.3f,\"p95Ms\":%.3f}", r->before_p95, r->p95);
		out_flush(o);
	}
	text_str(&o->t, "]},");
	out_flush(o);
}

static const html_col shape_cols[] = {
    {"namespace", false}, {"command", false}, {"count", true}, {"shape", false}};

static void html_shapes(out_t *o, const char *title, const model *m, const size_t *idx, size_t n)
{
	text_printf(&o->t, "<h3>%s: %zu</h3>", title, n);
	if (!n)
		return;
	html_table_open(&o->t, NULL, shape_cols, sizeof shape_cols / sizeof *shape_cols);
	for (size_t i = 0; i < n; i++) {
		const model_shape *s = &m->shapes[idx[i]];
		text_str(&o->t, "<tr>");
		html_table_td_text(&o->t, s->ns);
		html_table_td_text(&o->t, s->command);
		html_table_td_u64(&o->t, s->count);
		html_table_td_code(&o->t, s->shape);
		text_str(&o->t, "</tr>");
		out_flush(o);
	}
	html_table_close(&o->t);
}

static const html_col finding_cols[] = {
    {"rule", false}, {"namespace", false}, {"count", true}, {"shape", false}};

static void html_findings(out_t *o, const char *title, const model *m, const size_t *idx, size_t n)
{
	text_printf(&o->t, "<h3>%s: %zu</h3>", title, n);
	if (!n)
		return;
	html_table_open(&o->t, NULL, finding_cols, sizeof finding_cols / sizeof *finding_cols);
	for (size_t i = 0; i < n; i++) {
		const model_finding *f = &m->findings[idx[i]];
		text_str(&o->t, "<tr>");
		html_table_td_code(&o->t, rule_name(f->rule));
		html_table_td_text(&o->t, f->ns);
		html_table_td_u64(&o->t, f->count);
		html_table_td_code(&o->t, f->shape);
		text_str(&o->t, "</tr>");
		out_flush(o);
	}
	html_table_close(&o->t);
}

static const html_col regression_cols[] = {{"namespace", false},
                                           {"command", false},
                                           {"p95 before ms", true},
                                           {"p95 ms", true},
                                           {"shape", false}};

static void html_regressions(out_t *o, const model *m, const model_diff *d)
{
	text_printf(&o->t, "<h3>Latency regressions: %zu</h3>", d->nregressions);
	if (!d->nregressions)
		return;
	html_table_open(&o->t, NULL, regression_cols,
	                sizeof regression_cols / sizeof *regression_cols);
	for (size_t i = 0; i < d->nregressions; i++) {
		const model_regression *r = &d->regressions[i];
		const model_shape *s = &m->shapes[r->shape];
		text_str(&o->t, "<tr>");
		html_table_td_text(&o->t, s->ns);
		html_table_td_text(&o->t, s->command);
		html_table_td_fixed(&o->t, r->before_p95, 2);
		html_table_td(&o->t, "n bad");
		text_printf(&o->t, "%.2f", r->p95);
		html_table_td_end(&o->t);
		html_table_td_code(&o->t, s->shape);
		text_str(&o->t, "</tr>");
		out_flush(o);
	}
	html_table_close(&o->t);
}

/* A small count in words ("five"), as prose says it; a figure past ten. */
static void count_words(text_buf *t, unsigned n)
{
	static const char *const words[] = {"no",  "one",   "two",   "three", "four", "five",
	                                    "six", "seven", "eight", "nine",  "ten"};
	if (n < sizeof words / sizeof *words)
		text_str(t, words[n]);
	else
		text_printf(t, "%u", n);
}

/* What a latency regression is, in words from the thresholds (model.h):
 * "grew by half and by a millisecond or more, with five timed replies on
 * each side". */
static void regression_words(text_buf *t)
{
	double grew = MODEL_REGRESSION_FACTOR - 1;
	text_str(t, "a latency regression is a shape whose p95 grew by ");
	if (grew == 0.5)
		text_str(t, "half");
	else
		text_printf(t, "%g%%", grew * 100);
	if (MODEL_REGRESSION_MIN_MS == 1.0)
		text_str(t, " and by a millisecond or more");
	else
		text_printf(t, " and by %g ms or more", MODEL_REGRESSION_MIN_MS);
	text_str(t, ", with ");
	count_words(t, MODEL_REGRESSION_MIN_REPLIES);
	text_printf(t, " timed repl%s on each side",
	            MODEL_REGRESSION_MIN_REPLIES == 1 ? "y" : "ies");
}

void report_diff_html(out_t *o, const model *m)
{
	const model_diff *d = m->diff;
	if (!d)
		return;
	text_str(&o->t, "<section id=\"diff\"><h2>Before and after</h2><p class=\"muted\">Against "
	                "the --baseline capture. Shapes and findings match by shape hash (and "
	                "rule); ");
	regression_words(&o->t);
	text_str(&o->t, ".</p>");
	report_legend_html(&o->t);
	html_findings(o, "New findings", m, d->new_findings, d->nnew_findings);
	html_findings(o, "Gone findings", d->before, d->gone_findings, d->ngone_findings);
	html_regressions(o, m, d);
	html_shapes(o, "New shapes", m, d->new_shapes, d->nnew_shapes);
	html_shapes(o, "Gone shapes", d->before, d->gone_shapes, d->ngone_shapes);
	text_str(&o->t, "</section>");
	out_flush(o);
}

static void md_findings(out_t *o, const char *title, const model *m, const size_t *idx, size_t n)
{
	text_printf(&o->t, "\n**%s: %zu**\n", title, n);
	for (size_t i = 0; i < n; i++) {
		const model_finding *f = &m->findings[idx[i]];
		text_printf(&o->t, "- `%s` on ", rule_name(f->rule));
		out_md_code(&o->t, f->ns, sizeof f->ns, false);
		text_printf(&o->t, " (%" PRIu64 "×, shape `%016" PRIx64 "`)\n", f->count, f->hash);
		out_flush(o);
	}
}

void report_diff_md(out_t *o, const model *m)
{
	const model_diff *d = m->diff;
	if (!d)
		return;
	text_str(&o->t, "\n## Before and after (--baseline)\n");
	md_findings(o, "New findings", m, d->new_findings, d->nnew_findings);
	md_findings(o, "Gone findings", d->before, d->gone_findings, d->ngone_findings);
	text_printf(&o->t, "\n**Latency regressions: %zu**\n", d->nregressions);
	for (size_t i = 0; i < d->nregressions; i++) {
		const model_shape *s = &m->shapes[d->regressions[i].shape];
		text_str(&o->t, "- ");
		out_md_code(&o->t, s->ns, sizeof s->ns, false);
		text_char(&o->t, ' ');
		out_md_text(&o->t, s->command);
		text_printf(&o->t, ": p95 %.2f ms → %.2f ms\n", d->regressions[i].before_p95,
		            d->regressions[i].p95);
		out_flush(o);
	}
	text_printf(&o->t, "\n**Shapes: %zu new, %zu gone**\n", d->nnew_shapes, d->ngone_shapes);
	out_flush(o);
}
