/* The before/after sections (diff_out.h). */
#include <inttypes.h>
#include <string.h>

#include "report/diff_out.h"

static void jstr(text_buf *t, const char *s)
{
	text_json_str(t, s, strlen(s), TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
}

static void json_shape(out_t *o, const model_shape *s, bool comma)
{
	text_printf(&o->t, "%s{\"shapeHash\":\"%016" PRIx64 "\",\"ns\":", comma ? "," : "",
	            s->hash);
	jstr(&o->t, s->ns);
	text_str(&o->t, ",\"command\":");
	jstr(&o->t, s->command);
	text_str(&o->t, ",\"shape\":");
	jstr(&o->t, s->shape);
	text_printf(&o->t, ",\"count\":%" PRIu64 "}", s->count);
	out_flush(o);
}

static void json_finding(out_t *o, const model_finding *f, bool comma)
{
	text_printf(&o->t,
	            "%s{\"rule\":\"%s\",\"shapeHash\":\"%016" PRIx64 "\",\"ns\":", comma ? "," : "",
	            rule_name(f->rule), f->hash);
	jstr(&o->t, f->ns);
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
		jstr(&o->t, s->ns);
		text_str(&o->t, ",\"command\":");
		jstr(&o->t, s->command);
		text_printf(&o->t, ",\"beforeP95Ms\":%.3f,\"p95Ms\":%.3f}", r->before_p95, r->p95);
		out_flush(o);
	}
	text_str(&o->t, "]},");
	out_flush(o);
}

static void html_shapes(out_t *o, const char *title, const model *m, const size_t *idx, size_t n)
{
	text_printf(&o->t, "<h3>%s: %zu</h3>", title, n);
	if (!n)
		return;
	text_str(&o->t, "<table><thead><tr><th>namespace</th><th>command</th><th class=\"n\">"
	                "count</th><th>shape</th></tr></thead><tbody>");
	for (size_t i = 0; i < n; i++) {
		const model_shape *s = &m->shapes[idx[i]];
		text_str(&o->t, "<tr><td>");
		text_html(&o->t, s->ns);
		text_str(&o->t, "</td><td>");
		text_html(&o->t, s->command);
		text_printf(&o->t, "</td><td class=\"n\">%" PRIu64 "</td><td><code>", s->count);
		text_html(&o->t, s->shape);
		text_str(&o->t, "</code></td></tr>");
		out_flush(o);
	}
	text_str(&o->t, "</tbody></table>");
}

static void html_findings(out_t *o, const char *title, const model *m, const size_t *idx, size_t n)
{
	text_printf(&o->t, "<h3>%s: %zu</h3>", title, n);
	if (!n)
		return;
	text_str(&o->t, "<table><thead><tr><th>rule</th><th>namespace</th><th class=\"n\">count"
	                "</th><th>shape</th></tr></thead><tbody>");
	for (size_t i = 0; i < n; i++) {
		const model_finding *f = &m->findings[idx[i]];
		text_printf(&o->t, "<tr><td><code>%s</code></td><td>", rule_name(f->rule));
		text_html(&o->t, f->ns);
		text_printf(&o->t, "</td><td class=\"n\">%" PRIu64 "</td><td><code>", f->count);
		text_html(&o->t, f->shape);
		text_str(&o->t, "</code></td></tr>");
		out_flush(o);
	}
	text_str(&o->t, "</tbody></table>");
}

void report_diff_html(out_t *o, const model *m)
{
	const model_diff *d = m->diff;
	if (!d)
		return;
	text_str(&o->t, "<section id=\"diff\"><h2>Before and after</h2><p class=\"muted\">Against "
	                "the --baseline capture. Shapes and findings match by shape hash (and "
	                "rule); a latency regression is a shape whose p95 grew by half and by a "
	                "millisecond or more, with five timed replies on each side.</p>");
	html_findings(o, "New findings", m, d->new_findings, d->nnew_findings);
	html_findings(o, "Gone findings", d->before, d->gone_findings, d->ngone_findings);
	text_printf(&o->t, "<h3>Latency regressions: %zu</h3>", d->nregressions);
	if (d->nregressions)
		text_str(&o->t,
		         "<table><thead><tr><th>namespace</th><th>command</th><th class=\"n\">"
		         "p95 before ms</th><th class=\"n\">p95 ms</th><th>shape</th></tr>"
		         "</thead><tbody>");
	for (size_t i = 0; i < d->nregressions; i++) {
		const model_regression *r = &d->regressions[i];
		const model_shape *s = &m->shapes[r->shape];
		text_str(&o->t, "<tr><td>");
		text_html(&o->t, s->ns);
		text_str(&o->t, "</td><td>");
		text_html(&o->t, s->command);
		text_printf(&o->t,
		            "</td><td class=\"n\">%.2f</td><td class=\"n bad\">%.2f</td><td><code>",
		            r->before_p95, r->p95);
		text_html(&o->t, s->shape);
		text_str(&o->t, "</code></td></tr>");
		out_flush(o);
	}
	if (d->nregressions)
		text_str(&o->t, "</tbody></table>");
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
		text_printf(&o->t, "- `%s` on `%s` (%" PRIu64 "×, shape `%016" PRIx64 "`)\n",
		            rule_name(f->rule), f->ns, f->count, f->hash);
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
		text_printf(&o->t, "- `%s` %s: p95 %.2f ms → %.2f ms\n", s->ns, s->command,
		            d->regressions[i].before_p95, d->regressions[i].p95);
		out_flush(o);
	}
	text_printf(&o->t, "\n**Shapes: %zu new, %zu gone**\n", d->nnew_shapes, d->ngone_shapes);
	out_flush(o);
}
