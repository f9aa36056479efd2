/* Scans kept quiet by a rule's size parameter (rules.h, quiet_below):
 * shapes a rule did not report because their collection was small, that
 * it would report with the parameter at 0, and that returned a lot
 * (model.h, MODEL_QUIET_MIN_DOCS / MODEL_QUIET_MIN_BYTES). Staging-sized
 * data then still shows what will scan in production. aggregate.c finds
 * them; each writer lists them here. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/html_table.h"
#include "report/sections.h"
#include "report/sort.h"

bool model_shape_quiet(const model_shape *s, rule_id r)
{
	unsigned bit = 1u << r;
	return !(s->rules & bit) && (s->quiet_rules & bit) &&
	       (s->docs >= MODEL_QUIET_MIN_DOCS || s->bytes >= MODEL_QUIET_MIN_BYTES);
}

/* The collection's estimated document count, -1 when unknown. */
static int64_t ns_docs(const model *m, const char *ns)
{
	for (size_t i = 0; i < m->nnss; i++)
		if (!strcmp(m->nss[i].ns, ns))
			return m->nss[i].doc_count;
	return -1;
}

/* The shapes of rule r to list, costliest first; *n of them (malloc'd). */
static size_t *quiet_shapes(const model *m, rule_id r, size_t *n)
{
	size_t *order = model_shapes_by_time(m), k = 0;
	for (size_t i = 0; order && i < m->nshapes; i++)
		if (model_shape_quiet(&m->shapes[order[i]], r))
			order[k++] = order[i];
	*n = k;
	return order;
}

static const html_col cols[] = {
    {"namespace", false},    {"command", false}, {"count", true},  {"collection docs", true},
    {"docs returned", true}, {"returned", true}, {"shape", false},
};

static void html_rule(out_t *o, const model *m, rule_id r)
{
	size_t n, *v = quiet_shapes(m, r, &n);
	const char *param = rule_table[r]->quiet_below;
	text_printf(&o->t, "<h3>Scans below %s (%" PRIu32 ")</h3><p class=\"muted\">", param,
	            m->quiet_below[r]);
	text_printf(&o->t,
	            "<code>%s</code> stayed silent on these shapes because their collection "
	            "held fewer than %s (%" PRIu32 ") documents; with %s at 0 it reports them, "
	            "and each returned at least %u documents or ",
	            rule_name(r), param, m->quiet_below[r], param, MODEL_QUIET_MIN_DOCS);
	out_size(&o->t, MODEL_QUIET_MIN_BYTES);
	text_str(&o->t, " over the capture: they will scan once the data grows.</p>");
	if (!n)
		text_str(&o->t, "<p>None.</p>");
	else
		html_table_open(&o->t, "class=\"sortable quiet\"", cols,
		                sizeof cols / sizeof *cols);
	out_flush(o);
	for (size_t k = 0; k < n; k++) {
		const model_shape *s = &m->shapes[v[k]];
		text_str(&o->t, "<tr data-ns=\"");
		text_html(&o->t, s->ns);
		text_str(&o->t, "\">");
		html_table_td_text(&o->t, s->ns);
		html_table_td_text(&o->t, s->command);
		html_table_td_u64(&o->t, s->count);
		html_table_td_fixed(&o->t, (double)ns_docs(m, s->ns), 0);
		html_table_td_u64(&o->t, s->docs);
		text_printf(&o->t, "<td class=\"n size\" data-v=\"%" PRIu64 "\">", s->bytes);
		out_size(&o->t, s->bytes);
		html_table_td_end(&o->t);
		html_table_td_code(&o->t, s->shape);
		text_str(&o->t, "</tr>");
		out_flush(o);
	}
	if (n)
		html_table_close(&o->t);
	free(v);
}

void report_quiet_html(out_t *o, const model *m)
{
	for (int r = 0; r < RULE_COUNT; r++)
		if (m->quiet_below[r])
			html_rule(o, m, (rule_id)r);
	out_flush(o);
}

void report_quiet_md(out_t *o, const model *m)
{
	for (int r = 0; r < RULE_COUNT; r++) {
		size_t n, *v;
		if (!m->quiet_below[r])
			continue;
		v = quiet_shapes(m, (rule_id)r, &n);
		const char *param = rule_table[r]->quiet_below;
		text_printf(&o->t,
		            "\n## Scans below %s (%" PRIu32 ")\n\n`%s` stayed silent: the "
		            "collection held fewer than %s documents. With %s at 0 it reports "
		            "these, each of which returned at least %u documents or ",
		            param, m->quiet_below[r], rule_name((rule_id)r), param, param,
		            MODEL_QUIET_MIN_DOCS);
		out_size(&o->t, MODEL_QUIET_MIN_BYTES);
		text_str(&o->t,
		         n ? ".\n\n| ns | command | count | collection docs | docs returned | "
		             "returned | shape |\n|---|---|---:|---:|---:|---:|---|\n"
		           : ": none.\n");
		for (size_t k = 0; k < n; k++) {
			const model_shape *s = &m->shapes[v[k]];
			text_printf(&o->t,
			            "| `%s` | %s | %" PRIu64 " | %" PRId64 " | %" PRIu64 " | ",
			            s->ns, s->command, s->count, ns_docs(m, s->ns), s->docs);
			out_size(&o->t, s->bytes);
			text_str(&o->t, " | `");
			for (const char *c = s->shape; *c && c - s->shape < 300; c++)
				text_char(&o->t, *c == '`' ? '\'' : *c == '|' ? '/' : *c);
			text_str(&o->t, "` |\n");
			out_flush(o);
		}
		free(v);
	}
}

void report_quiet_json(out_t *o, const model *m)
{
	bool first = true;
	text_str(&o->t, "\"quietFindings\":[");
	for (int r = 0; r < RULE_COUNT; r++) {
		size_t n, *v;
		if (!m->quiet_below[r])
			continue;
		v = quiet_shapes(m, (rule_id)r, &n);
		for (size_t k = 0; k < n; k++) {
			const model_shape *s = &m->shapes[v[k]];
			text_printf(
			    &o->t,
			    "%s{\"rule\":\"%s\",\"parameter\":\"%s\",\"judgedWith\":%" PRIu32
			    ",\"shapeHash\":\"%016" PRIx64 "\",\"ns\":",
			    first ? "" : ",", rule_name((rule_id)r), rule_table[r]->quiet_below,
			    m->quiet_below[r], s->hash);
			first = false;
			out_json_str(&o->t, s->ns);
			text_str(&o->t, ",\"command\":");
			out_json_str(&o->t, s->command);
			text_printf(&o->t,
			            ",\"count\":%" PRIu64 ",\"estimatedDocuments\":%" PRId64
			            ",\"docsReturned\":%" PRIu64 ",\"bytesReturned\":%" PRIu64 "}",
			            s->count, ns_docs(m, s->ns), s->docs, s->bytes);
			out_flush(o);
		}
		free(v);
	}
	text_str(&o->t, "],");
}
