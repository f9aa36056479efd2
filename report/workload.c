/* The workload, as MongoDB's data-modelling method lists it: per
 * collection, reads and writes per second and their ratio, the most
 * frequent shapes with their rates, document counts and sizes; per read
 * shape, the fields it reads (its projection, or the whole document)
 * against the collection's average document size (bloated documents); and
 * the arrays writes grow ($push and $addToSet) with what sampled replies
 * showed of them.
 *
 * Rates are over the capture's covered time: the union of each instance's
 * time range (its first record to its last, requests and replies), so captures of a fleet read
 * together give the fleet's rates, and two captures an hour apart do not
 * count the hour between them. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/commands.h"
#include "report/aggregate_parts.h"
#include "report/grow.h"
#include "report/html_table.h"
#include "report/relationships.h"
#include "report/sections.h"
#include "report/sort.h"

/* A read of documents at least this large on average that names few
 * fields (or none: the whole document) is a bloated document's sign. */
#define WL_LARGE_DOC   (16u << 10)
#define WL_TOP_SHAPES  3  /* per collection in the workload table */
#define WL_READ_SHAPES 30 /* rows of the fields-read table, most frequent first */

/* The projection of a find, or the first $project stage of an aggregate:
 * the fields it includes (an exclusion is the whole document less some). */
static void note_projection(model_shape *s, const cmdview *v)
{
	bson_iter_t it, p, st, c;
	bool found = false;
	if (bson_iter_init_find(&it, &v->body, "projection") && BSON_ITER_HOLDS_DOCUMENT(&it))
		found = bson_iter_recurse(&it, &p);
	else if (bson_iter_init_find(&it, &v->body, "pipeline") && bson_iter_recurse(&it, &st))
		while (!found && bson_iter_next(&st))
			if (BSON_ITER_HOLDS_DOCUMENT(&st) && bson_iter_recurse(&st, &c) &&
			    bson_iter_next(&c) && !strcmp(bson_iter_key(&c), "$project") &&
			    BSON_ITER_HOLDS_DOCUMENT(&c))
				found = bson_iter_recurse(&c, &p);
	s->proj_fields = -1;
	s->proj[0] = '\0';
	if (!found)
		return;
	size_t len = 0;
	int n = 0;
	while (bson_iter_next(&p)) {
		bool excl = (BSON_ITER_HOLDS_NUMBER(&p) && bson_iter_as_int64(&p) == 0) ||
		            (BSON_ITER_HOLDS_BOOL(&p) && !bson_iter_bool(&p));
		if (excl || !strcmp(bson_iter_key(&p), "_id"))
			continue; /* _id comes by default; an exclusion keeps the rest */
		int w = snprintf(s->proj + len, sizeof s->proj - len, "%s%s", n ? ", " : "",
		                 bson_iter_key(&p));
		n++;
		if (w < 0 || (size_t)w >= sizeof s->proj - len)
			len = sizeof s->proj - 1; /* cut: the count still says how many */
		else
			len += (size_t)w;
	}
	if (n)
		s->proj_fields = n;
}

void workload_span(model *m, uint64_t instance, int64_t t)
{
	for (size_t i = 0; i < m->nspans; i++)
		if (m->spans[i].instance == instance) {
			if (t < m->spans[i].first)
				m->spans[i].first = t;
			if (t > m->spans[i].last)
				m->spans[i].last = t;
			return;
		}
	REPORT_GROW(m->spans, m->nspans, m->capspans);
	m->spans[m->nspans++] = (model_span){instance, t, t};
}

void workload_note(model *m, uint64_t instance, int64_t t, const cmdview *v, const char *cmd,
                   size_t shape, size_t ns)
{
	int kind = cmd_rows[cmd_find(cmd)].kind;
	workload_span(m, instance, t);
	if (shape) {
		model_shape *s = &m->shapes[shape - 1];
		if (s->count == 1) { /* its first request: the shape is the same after */
			s->kind = kind;
			note_projection(s, v);
		}
	}
	if (ns && kind == CMD_KIND_WRITE)
		m->nss[ns - 1].writes++;
}

static int cmp_span(const void *a, const void *b)
{
	const model_span *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first;
}

void workload_finish(model *m)
{
	int64_t covered = 0, end = INT64_MIN;
	if (m->nspans > 1)
		qsort(m->spans, m->nspans, sizeof *m->spans, cmp_span);
	for (size_t i = 0; i < m->nspans; i++) {
		const model_span *s = &m->spans[i];
		int64_t from = s->first > end ? s->first : end;
		if (s->last > from)
			covered += s->last - from;
		if (s->last > end)
			end = s->last;
	}
	m->covered_s = (double)covered / 1e6;
}

/* ---- what the writers share ---- */

static double per_s(const model *m, uint64_t n)
{
	return m->covered_s > 0 ? (double)n / m->covered_s : 0;
}

static int64_t avg_doc(const model_ns *n)
{
	return n->docs ? (int64_t)(n->doc_bytes / n->docs) : -1;
}

static bool ns_listed(const model_ns *n)
{
	return n->ops || n->docs || n->doc_count >= 0;
}

/* The shapes of ns, most frequent first (at most max; kind -1: any). */
static size_t top_shapes(const model *m, const char *ns, int kind, size_t *out, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < m->nshapes; i++) {
		const model_shape *s = &m->shapes[i];
		if ((ns && strcmp(s->ns, ns)) || (kind >= 0 && s->kind != kind))
			continue;
		size_t k = n < max ? n++ : max;
		if (k == max && m->shapes[out[max - 1]].count >= s->count)
			continue;
		if (k == max)
			k = max - 1;
		while (k > 0 && m->shapes[out[k - 1]].count < s->count) {
			out[k] = out[k - 1];
			k--;
		}
		out[k] = i;
	}
	return n;
}

/* What a read shape's fields say against its documents' size. */
static const char *bloat_words(const model_shape *s, int64_t avg)
{
	if (avg < (int64_t)WL_LARGE_DOC)
		return "";
	if (s->proj_fields < 0)
		return "whole large documents returned: project the fields used, or move the "
		       "rarely "
		       "used ones to a collection of their own (subset pattern)";
	if (s->proj_fields <= REL_FEW_FIELDS)
		return "a few fields of large documents: the server still reads whole documents "
		       "into its cache; move the rarely used fields out (subset pattern)";
	return "";
}

static const model_field *array_seen(const model_ns *n, const char *path)
{
	for (size_t k = 0; k < n->narrays; k++)
		if (!strcmp(n->arrays[k].path, path))
			return &n->arrays[k];
	return NULL;
}

static uint64_t add_to_set_count(const model_ns *n, const char *path)
{
	for (size_t k = 0; k < n->nadd_to_set; k++)
		if (!strcmp(n->add_to_set[k].path, path))
			return n->add_to_set[k].count;
	return 0;
}

static const char *array_ops(const model_ns *n, const model_field *f)
{
	uint64_t a = add_to_set_count(n, f->path);
	return a == 0 ? "$push" : a >= f->count ? "$addToSet" : "$push, $addToSet";
}

/* ---- Markdown ---- */

static void ns_md(out_t *o, const model *m, const model_ns *n)
{
	size_t top[WL_TOP_SHAPES];
	size_t nt = top_shapes(m, n->ns, -1, top, WL_TOP_SHAPES);
	text_str(&o->t, "| ");
	out_md_code(&o->t, n->ns, 100, true);
	text_printf(&o->t, " | %" PRIu64 " | %.2f | %" PRIu64 " | %.2f | ", n->reads,
	            per_s(m, n->reads), n->writes, per_s(m, n->writes));
	if (n->writes)
		text_printf(&o->t, "%.1f", (double)n->reads / (double)n->writes);
	else
		text_str(&o->t, n->reads ? "reads only" : "");
	text_str(&o->t, " | ");
	if (n->doc_count >= 0)
		text_printf(&o->t, "%" PRId64, n->doc_count);
	text_str(&o->t, " | ");
	if (avg_doc(n) >= 0) {
		out_size(&o->t, (uint64_t)avg_doc(n));
		text_str(&o->t, " (largest ");
		out_size(&o->t, (uint64_t)n->doc_max);
		text_str(&o->t, ")");
	}
	text_str(&o->t, " | ");
	for (size_t k = 0; k < nt; k++) {
		const model_shape *s = &m->shapes[top[k]];
		text_str(&o->t, k ? "; " : "");
		out_md_text(&o->t, s->command);
		text_printf(&o->t, " %.2f/s ", per_s(m, s->count));
		out_md_code(&o->t, s->shape, 120, true);
	}
	text_str(&o->t, " |\n");
	out_flush(o);
}

static void reads_md(out_t *o, const model *m)
{
	size_t top[WL_READ_SHAPES];
	size_t nt = top_shapes(m, NULL, CMD_KIND_READ, top, WL_READ_SHAPES);
	if (!nt)
		return;
	text_str(&o->t, "\n### Fields each read shape returns\n\n| ns | command | reads/s | fields "
	                "| bytes per read | average document | | shape |\n"
	                "|---|---|---:|---|---:|---:|---|---|\n");
	for (size_t k = 0; k < nt; k++) {
		const model_shape *s = &m->shapes[top[k]];
		const model_ns *n = NULL;
		for (size_t i = 0; i < m->nnss && !n; i++)
			if (!strcmp(m->nss[i].ns, s->ns))
				n = &m->nss[i];
		int64_t avg = n ? avg_doc(n) : -1;
		text_str(&o->t, "| ");
		out_md_code(&o->t, s->ns, 100, true);
		text_str(&o->t, " | ");
		out_md_text(&o->t, s->command);
		text_printf(&o->t, " | %.2f | ", per_s(m, s->count));
		if (s->proj_fields < 0)
			text_str(&o->t, "whole document");
		else
			out_md_text(&o->t, s->proj);
		text_str(&o->t, " | ");
		out_size(&o->t, s->nlat ? s->bytes / s->nlat : 0);
		text_str(&o->t, " | ");
		if (avg >= 0)
			out_size(&o->t, (uint64_t)avg);
		text_printf(&o->t, " | %s | ", bloat_words(s, avg));
		out_md_code(&o->t, s->shape, 200, true);
		text_str(&o->t, " |\n");
		out_flush(o);
	}
}

static void arrays_md(out_t *o, const model *m)
{
	bool head = false;
	for (size_t i = 0; i < m->nnss; i++) {
		const model_ns *n = &m->nss[i];
		for (size_t k = 0; k < n->npush; k++) {
			const model_field *f = &n->push[k];
			const model_field *seen = array_seen(n, f->path);
			model_array_evidence e;
			if (!head)
				text_str(
				    &o->t,
				    "\n### Arrays written\n\n| ns | array | operator | writes | "
				    "samples | largest | p95 | growth | |\n"
				    "|---|---|---|---:|---:|---:|---:|---:|---|\n");
			head = true;
			text_str(&o->t, "| ");
			out_md_code(&o->t, n->ns, 100, true);
			text_str(&o->t, " | ");
			out_md_code(&o->t, f->path, 100, true);
			text_printf(&o->t, " | %s | %" PRIu64 " | ", array_ops(n, f), f->count);
			if (!seen || !seen->nsamples) {
				text_str(&o->t, "0 | | | | none sampled |\n");
				continue;
			}
			report_array_evidence(m, seen, &e);
			text_printf(
			    &o->t,
			    "%" PRIu64 " | %" PRId64 " | %" PRId64 " | %+" PRId64 " | %s |\n",
			    e.samples, e.largest, e.p95, e.growth,
			    e.largest <= MODEL_ARRAY_SMALL && e.growth <= 0 ? "seen only small"
			    : e.growth > 0                                  ? "grows"
			                                                    : "");
			out_flush(o);
		}
	}
	out_flush(o);
}

void report_workload_md(out_t *o, const model *m)
{
	text_printf(&o->t,
	            "\n## Workload\n\nRates per second over %.1f s of covered time (%zu "
	            "instance%s).\n\n| ns | reads | reads/s | writes | writes/s | reads per write "
	            "| documents (estimated) | average document (sampled) | top shapes |\n"
	            "|---|---:|---:|---:|---:|---:|---:|---|---|\n",
	            m->covered_s, m->nspans, m->nspans == 1 ? "" : "s");
	for (size_t i = 0; i < m->nnss; i++)
		if (ns_listed(&m->nss[i]))
			ns_md(o, m, &m->nss[i]);
	reads_md(o, m);
	report_legend_md(&o->t);
	arrays_md(o, m);
	out_flush(o);
}

/* ---- HTML ---- */

static const html_col wl_cols[] = {
    {"namespace", false},       {"reads", true},        {"reads/s", true},
    {"writes", true},           {"writes/s", true},     {"reads per write", true},
    {"documents (est.)", true}, {"avg document", true}, {"largest", true},
    {"top shapes", false},
};

static void size_td(text_buf *t, int64_t v)
{
	text_printf(t, "<td class=\"n size\" data-v=\"%" PRId64 "\">", v);
	if (v >= 0)
		out_size(t, (uint64_t)v);
	html_table_td_end(t);
}

static void ns_html(out_t *o, const model *m, const model_ns *n)
{
	size_t top[WL_TOP_SHAPES];
	size_t nt = top_shapes(m, n->ns, -1, top, WL_TOP_SHAPES);
	text_str(&o->t, "<tr class=\"wl\" data-ns=\"");
	text_html(&o->t, n->ns);
	text_str(&o->t, "\"><td class=\"nsc\">");
	text_html(&o->t, n->ns);
	html_table_td_end(&o->t);
	html_table_td_u64(&o->t, n->reads);
	html_table_td_fixed(&o->t, per_s(m, n->reads), 2);
	html_table_td_u64(&o->t, n->writes);
	html_table_td_fixed(&o->t, per_s(m, n->writes), 2);
	if (n->writes)
		html_table_td_fixed(&o->t, (double)n->reads / (double)n->writes, 1);
	else
		html_table_td_text(&o->t, n->reads ? "reads only" : "");
	if (n->doc_count >= 0)
		html_table_td_u64(&o->t, (uint64_t)n->doc_count);
	else
		html_table_td_text(&o->t, "");
	size_td(&o->t, avg_doc(n));
	size_td(&o->t, n->docs ? n->doc_max : -1);
	html_table_td(&o->t, "top");
	for (size_t k = 0; k < nt; k++) {
		const model_shape *s = &m->shapes[top[k]];
		text_str(&o->t, "<div>");
		text_html(&o->t, s->command);
		text_printf(&o->t, " <b>%.2f/s</b> <code>", per_s(m, s->count));
		text_html_str(&o->t, s->shape, strnlen(s->shape, 160));
		text_str(&o->t, strlen(s->shape) > 160 ? "...</code></div>" : "</code></div>");
	}
	html_table_td_end(&o->t);
	text_str(&o->t, "</tr>");
	out_flush(o);
}

static const html_col read_cols[] = {
    {"namespace", false},     {"command", false},     {"reads/s", true}, {"fields", false},
    {"bytes per read", true}, {"avg document", true}, {"", false},       {"shape", false},
};

static void reads_html(out_t *o, const model *m)
{
	size_t top[WL_READ_SHAPES];
	size_t nt = top_shapes(m, NULL, CMD_KIND_READ, top, WL_READ_SHAPES);
	if (!nt)
		return;
	text_str(&o->t, "<h3>Fields each read shape returns</h3><p class=\"muted\">The fields a "
	                "projection names (or the whole document), against the collection's "
	                "average document in sampled replies. Most frequent first.</p>");
	html_table_open(&o->t, "id=\"read-table\" class=\"sortable\"", read_cols,
	                sizeof read_cols / sizeof *read_cols);
	for (size_t k = 0; k < nt; k++) {
		const model_shape *s = &m->shapes[top[k]];
		const model_ns *n = NULL;
		for (size_t i = 0; i < m->nnss && !n; i++)
			if (!strcmp(m->nss[i].ns, s->ns))
				n = &m->nss[i];
		int64_t avg = n ? avg_doc(n) : -1;
		text_str(&o->t, "<tr class=\"wl\" data-ns=\"");
		text_html(&o->t, s->ns);
		text_str(&o->t, "\"><td class=\"nsc\">");
		text_html(&o->t, s->ns);
		html_table_td_end(&o->t);
		html_table_td_text(&o->t, s->command);
		html_table_td_fixed(&o->t, per_s(m, s->count), 2);
		if (s->proj_fields < 0)
			html_table_td_text(&o->t, "whole document");
		else
			html_table_td_code(&o->t, s->proj);
		size_td(&o->t, s->nlat ? (int64_t)(s->bytes / s->nlat) : -1);
		size_td(&o->t, avg);
		const char *w = bloat_words(s, avg);
		html_table_td(&o->t, *w ? "bad" : NULL);
		text_html(&o->t, w);
		html_table_td_end(&o->t);
		html_table_td_code(&o->t, s->shape);
		text_str(&o->t, "</tr>");
		out_flush(o);
	}
	html_table_close(&o->t);
}

static const html_col arr_cols[] = {
    {"namespace", false}, {"array", false},  {"operator", false},
    {"writes", true},     {"samples", true}, {"largest", true},
    {"p95", true},        {"growth", true},  {"", false},
};

static void arrays_html(out_t *o, const model *m)
{
	bool head = false;
	for (size_t i = 0; i < m->nnss; i++) {
		const model_ns *n = &m->nss[i];
		for (size_t k = 0; k < n->npush; k++) {
			const model_field *f = &n->push[k];
			const model_field *seen = array_seen(n, f->path);
			model_array_evidence e;
			if (!head) {
				text_str(
				    &o->t,
				    "<h3>Arrays written</h3><p class=\"muted\">Every array a $push "
				    "or $addToSet grows, with the lengths sampled replies showed: "
				    "growth is the largest in the second half of the capture minus "
				    "the largest in the first.</p>");
				html_table_open(&o->t, "id=\"array-table\"", arr_cols,
				                sizeof arr_cols / sizeof *arr_cols);
			}
			head = true;
			text_str(&o->t, "<tr><td class=\"nsc\">");
			text_html(&o->t, n->ns);
			html_table_td_end(&o->t);
			html_table_td_code(&o->t, f->path);
			html_table_td_code(&o->t, array_ops(n, f));
			html_table_td_u64(&o->t, f->count);
			if (!seen || !seen->nsamples) {
				text_str(&o->t, "<td class=\"n\">0</td><td></td><td></td><td></td>"
				                "<td class=\"muted\">none sampled</td></tr>");
				out_flush(o);
				continue;
			}
			report_array_evidence(m, seen, &e);
			html_table_td_u64(&o->t, e.samples);
			html_table_td_u64(&o->t, (uint64_t)e.largest);
			html_table_td_u64(&o->t, (uint64_t)e.p95);
			text_printf(&o->t, "<td class=\"n\">%+" PRId64 "</td>", e.growth);
			html_table_td_text(&o->t, e.largest <= MODEL_ARRAY_SMALL && e.growth <= 0
			                              ? "seen only small"
			                          : e.growth > 0 ? "grows"
			                                         : "");
			text_str(&o->t, "</tr>");
			out_flush(o);
		}
	}
	if (head)
		html_table_close(&o->t);
	out_flush(o);
}

void report_workload_html(out_t *o, const model *m)
{
	text_printf(&o->t,
	            "<section id=\"workload\"><h2>Workload</h2><p class=\"muted\">Per collection, "
	            "as the data-modelling method lists it: reads and writes per second over "
	            "%.1f s of covered time (the union of %zu instance%s' time ranges), documents "
	            "(estimated, from the index snapshots) and their sizes (sampled replies), "
	            "and the most frequent shapes.</p>",
	            m->covered_s, m->nspans, m->nspans == 1 ? "'s" : "s");
	report_legend_html(&o->t);
	html_table_open(&o->t, "id=\"workload-table\" class=\"sortable\"", wl_cols,
	                sizeof wl_cols / sizeof *wl_cols);
	out_flush(o);
	for (size_t i = 0; i < m->nnss; i++)
		if (ns_listed(&m->nss[i]))
			ns_html(o, m, &m->nss[i]);
	html_table_close(&o->t);
	out_flush(o);
	reads_html(o, m);
	arrays_html(o, m);
	report_rels_html(o, m);
	text_str(&o->t, "</section>");
	out_flush(o);
}

/* ---- JSON ---- */

static void ns_json(out_t *o, const model *m, const model_ns *n, bool first)
{
	size_t top[WL_TOP_SHAPES];
	size_t nt = top_shapes(m, n->ns, -1, top, WL_TOP_SHAPES);
	text_str(&o->t, first ? "{\"ns\":" : ",{\"ns\":");
	out_json_str(&o->t, n->ns);
	text_printf(&o->t,
	            ",\"reads\":%" PRIu64 ",\"writes\":%" PRIu64
	            ",\"readsPerSecond\":%.3f,\"writesPerSecond\":%.3f,\"readsPerWrite\":",
	            n->reads, n->writes, per_s(m, n->reads), per_s(m, n->writes));
	if (n->writes)
		text_printf(&o->t, "%.3f", (double)n->reads / (double)n->writes);
	else
		text_str(&o->t, "null");
	text_printf(&o->t,
	            ",\"estimatedDocuments\":%" PRId64 ",\"documentsSampled\":%" PRIu64
	            ",\"averageDocumentBytes\":%" PRId64 ",\"largestDocumentBytes\":%" PRId64
	            ",\"topShapes\":[",
	            n->doc_count, n->docs, avg_doc(n), n->docs ? n->doc_max : -1);
	for (size_t k = 0; k < nt; k++) {
		const model_shape *s = &m->shapes[top[k]];
		text_printf(&o->t, "%s{\"shapeHash\":\"%016" PRIx64 "\",\"command\":", k ? "," : "",
		            s->hash);
		out_json_str(&o->t, s->command);
		text_printf(&o->t, ",\"count\":%" PRIu64 ",\"perSecond\":%.3f}", s->count,
		            per_s(m, s->count));
	}
	text_str(&o->t, "],\"arrays\":[");
	for (size_t k = 0; k < n->npush; k++) {
		const model_field *f = &n->push[k];
		const model_field *seen = array_seen(n, f->path);
		model_array_evidence e;
		text_str(&o->t, k ? ",{\"path\":" : "{\"path\":");
		out_json_str(&o->t, f->path);
		text_printf(&o->t, ",\"operators\":\"%s\",\"writes\":%" PRIu64, array_ops(n, f),
		            f->count);
		if (!seen || !seen->nsamples) {
			text_str(&o->t, ",\"samples\":0}");
			continue;
		}
		report_array_evidence(m, seen, &e);
		text_printf(&o->t,
		            ",\"samples\":%" PRIu64 ",\"largest\":%" PRId64 ",\"p95\":%" PRId64
		            ",\"firstHalfLargest\":%" PRId64 ",\"secondHalfLargest\":%" PRId64
		            ",\"growth\":%" PRId64 ",\"seenOnlySmall\":%s}",
		            e.samples, e.largest, e.p95, e.first_half, e.second_half, e.growth,
		            e.largest <= MODEL_ARRAY_SMALL && e.growth <= 0 ? "true" : "false");
	}
	text_str(&o->t, "]}");
	out_flush(o);
}

static void reads_json(out_t *o, const model *m)
{
	size_t top[WL_READ_SHAPES];
	size_t nt = top_shapes(m, NULL, CMD_KIND_READ, top, WL_READ_SHAPES);
	text_str(&o->t, "],\"readShapes\":[");
	for (size_t k = 0; k < nt; k++) {
		const model_shape *s = &m->shapes[top[k]];
		int64_t avg = -1;
		for (size_t i = 0; i < m->nnss; i++)
			if (!strcmp(m->nss[i].ns, s->ns))
				avg = avg_doc(&m->nss[i]);
		text_printf(&o->t, "%s{\"shapeHash\":\"%016" PRIx64 "\",\"ns\":", k ? "," : "",
		            s->hash);
		out_json_str(&o->t, s->ns);
		text_printf(&o->t, ",\"perSecond\":%.3f,\"projection\":", per_s(m, s->count));
		if (s->proj_fields < 0)
			text_str(&o->t, "null");
		else
			out_json_str(&o->t, s->proj);
		text_printf(&o->t,
		            ",\"fieldsRead\":%d,\"bytesPerRead\":%" PRId64
		            ",\"averageDocumentBytes\":%" PRId64 ",\"bloated\":%s}",
		            s->proj_fields, s->nlat ? (int64_t)(s->bytes / s->nlat) : -1, avg,
		            *bloat_words(s, avg) ? "true" : "false");
		out_flush(o);
	}
}

void report_workload_json(out_t *o, const model *m)
{
	text_printf(&o->t,
	            "\"workload\":{\"coveredSeconds\":%.3f,\"instances\":%zu,\"collections\":[",
	            m->covered_s, m->nspans);
	bool first = true;
	for (size_t i = 0; i < m->nnss; i++)
		if (ns_listed(&m->nss[i])) {
			ns_json(o, m, &m->nss[i], first);
			first = false;
		}
	reads_json(o, m);
	text_str(&o->t, "]},");
	out_flush(o);
}
