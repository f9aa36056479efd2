/* -o report.html: one self-contained page. No external scripts, fonts,
 * images or requests: styles inline, charts as inline SVG drawn here, and
 * every table already in its useful order (shapes by total time), so the
 * page reads the same without JavaScript and prints. A few lines of inline
 * script only add click-to-sort on table headers. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report/model.h"
#include "report/diff_out.h"
#include "report/housekeeping.h"
#include "report/html_table.h"
#include "report/out.h"
#include "report/report.h"
#include "report/sections.h"
#include "report/sort.h"

static const char css[] =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;"
    "max-width:1200px;padding:16px;color:#1d2433}"
    "h1{font-size:24px;margin:0 0 4px}h2{border-bottom:2px solid #e3e7ee;padding-bottom:4px;"
    "margin-top:32px}h3{margin:20px 0 6px}"
    "table{border-collapse:collapse;width:100%;margin:8px 0 16px;font-size:13px}"
    "th,td{border-bottom:1px solid #e3e7ee;padding:4px 6px;text-align:left;vertical-align:top}"
    "th{background:#f4f6f9;cursor:pointer;white-space:nowrap}td.n,th.n{text-align:right}"
    "td.size{white-space:nowrap}"
    "code,pre{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;background:#f4f6f9}"
    "pre{padding:8px;white-space:pre-wrap;word-break:break-all;border-radius:4px}"
    "code{padding:0 2px;word-break:break-all}"
    ".cards{display:flex;flex-wrap:wrap;gap:8px}.card{border:1px solid #e3e7ee;border-radius:6px;"
    "padding:8px 12px;min-width:130px}.card b{display:block;font-size:20px}"
    ".bad{color:#b42318}.ok{color:#067647}.tag{display:inline-block;background:#fde8e7;"
    "color:#b42318;border-radius:3px;padding:0 4px;margin:1px;font-size:12px}"
    ".muted{color:#667085}.ok-tag{background:#e3f4ea;color:#067647}p.evidence{margin:4px 0}"
    ".muted{color:#667085}svg{max-width:100%;height:auto}"
    "nav a{margin-right:12px}form.filters{margin:10px 0;padding:6px 8px;background:#f4f6f9;"
    "border-radius:6px}form.filters "
    "label{margin-right:10px}li.rec{margin-bottom:14px}ul.served{margin:2px 0 6px;"
    "font-size:12px}.rec-ns h3{margin-top:16px}"
    "@media print{nav,form.filters{display:none}th{cursor:auto}h2{break-before:page}"
    "table,pre,svg{break-inside:avoid}}"
    /* the workload and relationships tables (workload.c, relationships.c) */
    "td.nsc{overflow-wrap:anywhere;min-width:9em}td.top{min-width:24em}td.top div{margin:0 0 "
    "3px}tr.why td{border-bottom:2px solid #e3e7ee;padding-top:0;color:#475467}"
    "tr.pair td{border-bottom:none}tr.pair code{word-break:normal}td.advice{white-space:nowrap}";

static const char js[] =
    "document.querySelectorAll('table.sortable th').forEach(function(th,i){"
    "th.addEventListener('click',function(){var tb=th.closest('table').tBodies[0];"
    "var rows=Array.prototype.slice.call(tb.rows);var d=th.dataset.d==='1'?-1:1;"
    "th.dataset.d=d===1?'1':'0';rows.sort(function(a,b){"
    "var x=a.cells[i].dataset.v||a.cells[i].textContent,"
    "y=b.cells[i].dataset.v||b.cells[i].textContent;var nx=parseFloat(x),ny=parseFloat(y);"
    "if(!isNaN(nx)&&!isNaN(ny))return d*(nx-ny);return d*x.localeCompare(y);});"
    "rows.forEach(function(r){tb.appendChild(r);});});});";

static void h(text_buf *t, const char *s)
{
	text_html(t, s);
}

static void when(text_buf *t, int64_t us)
{
	time_t s = (time_t)(us / 1000000);
	struct tm tm;
	char buf[64];
	gmtime_r(&s, &tm);
	strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
	text_str(t, buf);
}

/* Operations per second as bars, at most 120 of them (seconds merged). */
static void ops_chart(out_t *o, const model *m)
{
	enum { W = 1000, H = 180, BARS = 120 };
	size_t per = m->nsec > BARS ? (m->nsec + BARS - 1) / BARS : 1;
	size_t nb = m->nsec ? (m->nsec + per - 1) / per : 0;
	double maxv = 1;
	for (size_t b = 0; b < nb; b++) {
		double v = 0;
		for (size_t i = b * per; i < (b + 1) * per && i < m->nsec; i++)
			v += (double)m->per_sec[i];
		v /= (double)per;
		if (v > maxv)
			maxv = v;
	}
	text_printf(
	    &o->t,
	    "<svg id=\"ops-chart\" role=\"img\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
	    "xmlns=\"http://www.w3.org/2000/svg\"><title>Operations per second</title>"
	    "<line x1=\"50\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#98a2b3\"/>"
	    "<text x=\"4\" y=\"14\" font-size=\"12\">%.0f/s</text>"
	    "<text x=\"4\" y=\"%d\" font-size=\"12\">0</text>",
	    W, H + 30, W, H + 30, H, W, H, maxv, H);
	double bw = nb ? (double)(W - 60) / (double)nb : 0;
	for (size_t b = 0; b < nb; b++) {
		double v = 0;
		for (size_t i = b * per; i < (b + 1) * per && i < m->nsec; i++)
			v += (double)m->per_sec[i];
		v /= (double)per;
		double bh = v / maxv * (H - 20);
		text_printf(
		    &o->t,
		    "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
		    "fill=\"#2e90fa\"><title>%.1f ops/s</title></rect>",
		    55 + (double)b * bw, (double)H - bh, bw > 2 ? bw - 1 : bw, bh, v);
		out_flush(o);
	}
	text_printf(&o->t, "<text x=\"55\" y=\"%d\" font-size=\"12\">", H + 20);
	when(&o->t, (int64_t)m->per_sec_base * 1000000);
	text_printf(&o->t,
	            "</text><text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"end\">+%zu s"
	            "</text></svg>",
	            W - 5, H + 20, m->nsec);
	out_flush(o);
}

/* Horizontal bars, one per label. */
static void bar_chart(out_t *o, const char *id, const char *title, const char *const *labels,
                      const uint64_t *values, size_t n)
{
	uint64_t maxv = 1;
	for (size_t i = 0; i < n; i++)
		if (values[i] > maxv)
			maxv = values[i];
	int rowh = 24, H = (int)n * rowh + 10;
	text_printf(
	    &o->t,
	    "<svg id=\"%s\" role=\"img\" viewBox=\"0 0 700 %d\" width=\"700\" height=\"%d\" "
	    "xmlns=\"http://www.w3.org/2000/svg\"><title>",
	    id, H, H);
	h(&o->t, title);
	text_str(&o->t, "</title>");
	for (size_t i = 0; i < n; i++) {
		double w = (double)values[i] / (double)maxv * 400;
		int y = (int)i * rowh + 4;
		text_printf(&o->t, "<text x=\"0\" y=\"%d\" font-size=\"12\">", y + 14);
		h(&o->t, labels[i]);
		text_printf(
		    &o->t,
		    "</text><rect class=\"bar\" x=\"220\" y=\"%d\" width=\"%.1f\" height=\"18\" "
		    "fill=\"%s\"/><text x=\"%.1f\" y=\"%d\" font-size=\"12\">%" PRIu64 "</text>",
		    y, w < 1 && values[i] ? 1 : w, values[i] ? "#f04438" : "#d0d5dd", 226 + w,
		    y + 14, values[i]);
		out_flush(o);
	}
	text_str(&o->t, "</svg>");
	out_flush(o);
}

/* A figure and its label, singular for one. */
static void card(text_buf *t, const char *one, const char *many, const char *fmt, double v)
{
	text_str(t, "<div class=\"card\"><b>");
	text_printf(t, fmt, v);
	text_str(t, "</b>");
	h(t, v == 1 ? one : many);
	text_str(t, "</div>");
}

/* What the counts leave out or were judged with: housekeeping, --rule. */
static void overview_notes(out_t *o, const model *m)
{
	text_str(&o->t, "<p id=\"housekeeping\">Driver and shell housekeeping: ");
	report_housekeeping_words(&o->t, m, 12);
	text_str(&o->t, ". <span class=\"muted\">The handshake, authentication, server facts and "
	                "sessions that drivers and shells send on their own: counted here, not "
	                "as query shapes.</span></p>");
	if (m->no_value_hashes)
		text_str(&o->t,
		         "<p id=\"value-hashes\" class=\"bad\">Limit: " REPORT_NO_VALUE_HASHES
		         ".</p>");
	size_t mark = text_mark(&o->t);
	text_str(&o->t, "<p id=\"judged-with\" class=\"bad\">Judged with other rule settings "
	                "than the capture's (--rule): ");
	if (!report_overrides_words(&o->t, m))
		text_rewind(&o->t, mark);
	else
		text_str(&o->t, ".</p>");
	out_flush(o);
}

static void overview(out_t *o, const model *m)
{
	double secs = m->t_max > m->t_min ? (double)(m->t_max - m->t_min) / 1e6 : 0;
	text_str(&o->t, "<section id=\"overview\"><h2>Overview</h2><p>");
	if (m->requests) {
		when(&o->t, m->t_min);
		text_str(&o->t, " to ");
		when(&o->t, m->t_max);
	} else {
		text_str(&o->t, "No requests in the capture.");
	}
	text_printf(&o->t, " (%.1f s). Index lists: %s.", secs,
	            m->indexes_live ? "live, from --indexes-from" : "as the capture recorded them");
	text_str(&o->t, m->redacted ? " Requests were captured as redacted shapes: no application "
	                              "value is in the capture or in this page."
	                            : " <b class=\"bad\">Some inputs hold whole requests "
	                              "(capture.redactLiterals: false).</b>");
	text_str(&o->t, "</p><div class=\"cards\">");
	card(&o->t, "operation", "operations", "%.0f", (double)m->requests);
	card(&o->t, "ops per second", "ops per second", "%.1f",
	     m->covered_s > 0 ? (double)m->requests / m->covered_s : 0);
	card(&o->t, "query shape", "query shapes", "%.0f", (double)m->nshapes);
	card(&o->t, "app", "apps", "%.0f", (double)m->napps);
	card(&o->t, "namespace", "namespaces", "%.0f", (double)m->nnss);
	uint64_t nf = 0;
	for (int r = 0; r < RULE_COUNT; r++)
		nf += m->rule_totals[r];
	card(&o->t, "finding (rule and shape)", "findings (rule and shape)", "%.0f",
	     (double)m->nfindings);
	/* a request breaking two rules counts twice, a batch once a statement:
	 * more than the operations, often */
	card(&o->t, "occurrence (a rule broken once)", "occurrences (times rules were broken)",
	     "%.0f", (double)nf);
	card(&o->t, "record lost (queue full)", "records lost (queue full)", "%.0f",
	     (double)m->dropped);
	text_str(&o->t, "</div>");
	overview_notes(o, m);
	for (size_t i = 0; i < m->ninputs; i++)
		if (m->inputs[i].refused || m->inputs[i].truncated) {
			text_str(&o->t, "<p class=\"bad\">");
			text_str(&o->t, m->inputs[i].refused ? "Refused " : "Read in part: ");
			h(&o->t, m->inputs[i].path);
			text_str(&o->t, ": ");
			h(&o->t, m->inputs[i].problem);
			text_str(&o->t, "</p>");
		}
	text_str(&o->t, "<h3>Operations per second</h3>");
	out_flush(o);
	ops_chart(o, m);
	const char *labels[RULE_COUNT];
	for (int r = 0; r < RULE_COUNT; r++)
		labels[r] = rule_name((rule_id)r);
	text_str(&o->t, "<h3>Occurrences per rule</h3>");
	bar_chart(o, "rules-chart", "Occurrences per rule", labels, m->rule_totals, RULE_COUNT);
	report_timeline_html(o, m);
	text_str(&o->t, "</section>");
	out_flush(o);
}

static void rule_tags(text_buf *t, unsigned rules)
{
	for (int r = 0; r < RULE_COUNT; r++)
		if (rules & (1u << r)) {
			text_printf(t, "<a class=\"tag\" href=\"#rule-%s\">%s</a>",
			            rule_name((rule_id)r), rule_name((rule_id)r));
		}
}

/* The failed replies, their share and codes; a shape that mostly fails
 * is marked, so its quick replies do not read as a fast query. */
static void failures_cell(text_buf *t, const model_shape *s)
{
	text_printf(t, "<td class=\"n\" data-v=\"%" PRIu64 "\">%" PRIu64, s->errors, s->errors);
	if (s->errors) {
		text_printf(t, " (%.0f%%)", model_failed_share(s) * 100);
		for (size_t c = 0; c < s->ncodes; c++)
			text_printf(t, "%s%" PRId32 "&nbsp;×%" PRIu64, c ? ", " : "<br>codes ",
			            s->codes[c], s->code_counts[c]);
		if (s->other_codes)
			text_printf(t, ", others ×%" PRIu64, s->other_codes);
	}
	if (s->mostly_fails)
		text_str(t, "<br><span class=\"tag\">mostly fails</span>");
	text_str(t, "</td>");
}

static const html_col shape_cols[] = {
    {"namespace", false}, {"command", false}, {"count", true},  {"rate/s", true},
    {"p50 ms", true},     {"p95 ms", true},   {"p99 ms", true}, {"total ms", true},
    {"docs", true},       {"bytes", true},    {"failed", true}, {"rules", false},
    {"shape", false},
};

/* A shape's row; its data- attributes are what the filters match. */
static void shape_row(out_t *o, const model_shape *s, double secs)
{
	text_str(&o->t, "<tr data-ns=\"");
	h(&o->t, s->ns);
	text_str(&o->t, "\" data-apps=\"|");
	h(&o->t, s->app);
	text_str(&o->t, "|\" data-rules=\" ");
	for (int r = 0; r < RULE_COUNT; r++)
		if (s->rules & (1u << r))
			text_printf(&o->t, "%s ", rule_name((rule_id)r));
	text_str(&o->t, "\">");
	html_table_td_text(&o->t, s->ns);
	html_table_td_text(&o->t, s->command);
	html_table_td_u64(&o->t, s->count);
	html_table_td_fixed(&o->t, secs > 0 ? (double)s->count / secs : 0, 2);
	html_table_td_fixed(&o->t, s->p50, 2);
	html_table_td_fixed(&o->t, s->p95, 2);
	html_table_td_fixed(&o->t, s->p99, 2);
	html_table_td_fixed(&o->t, (double)s->total_us / 1000.0, 1);
	html_table_td_u64(&o->t, s->docs);
	text_printf(&o->t, "<td class=\"n size\" data-v=\"%" PRIu64 "\">", s->bytes);
	out_size(&o->t, s->bytes);
	html_table_td_end(&o->t);
	failures_cell(&o->t, s);
	html_table_td(&o->t, NULL);
	rule_tags(&o->t, s->rules);
	html_table_td_end(&o->t);
	html_table_td_code(&o->t, s->shape);
	text_str(&o->t, "</tr>");
	out_flush(o);
}

static void shapes(out_t *o, const model *m)
{
	double secs = m->covered_s; /* the instances' time ranges (workload.c) */
	text_str(&o->t,
	         "<section id=\"shapes\"><h2>Query shapes</h2><p class=\"muted\">Sorted by total "
	         "time (latency as mongoguard measured it: request forwarded to reply relayed). "
	         "Click a heading to sort by it.</p>");
	report_legend_html(&o->t);
	html_table_open(&o->t, "id=\"shape-table\" class=\"sortable\"", shape_cols,
	                sizeof shape_cols / sizeof *shape_cols);
	out_flush(o);
	size_t *order = model_shapes_by_time(m);
	for (size_t k = 0; order && k < m->nshapes; k++)
		shape_row(o, &m->shapes[order[k]], secs);
	free(order);
	html_table_close(&o->t);
	out_flush(o);
	report_quiet_html(o, m);
	text_str(&o->t, "</section>");
	out_flush(o);
}

/* A runnable command in a code block (and the words after it as words);
 * a fix in words as a paragraph, never in a code block. */
static void fix_html(text_buf *t, const char *fix)
{
	size_t n = model_fix_command_len(fix);
	if (n) {
		text_str(t, "<pre class=\"fix\">");
		text_html_str(t, fix, n);
		text_str(t, "</pre>");
		fix += n;
		while (*fix == ' ')
			fix++;
		if (!strncmp(fix, "and ", 4))
			fix += 4;
	}
	if (*fix) {
		text_str(t, n ? "<p class=\"fix-words\">Then: " : "<p class=\"fix-words\">");
		h(t, fix);
		text_str(t, "</p>");
	}
}

static void finding_html(out_t *o, const model_finding *f)
{
	text_str(&o->t, "<div class=\"finding\" data-ns=\"");
	h(&o->t, f->ns);
	text_printf(&o->t, "\" data-rules=\" %s \" data-apps=\"|", rule_name(f->rule));
	for (size_t a = 0; a < f->napps; a++) {
		h(&o->t, f->apps[a]);
		text_char(&o->t, '|');
	}
	text_str(&o->t, "\"><p><b>");
	h(&o->t, f->ns);
	text_str(&o->t, "</b> ");
	h(&o->t, f->command);
	text_str(&o->t, ", ");
	out_count(&o->t, f->count, "occurrence", "occurrences");
	for (size_t a = 0; a < f->napps; a++) {
		text_str(&o->t, a ? ", " : " (apps: ");
		h(&o->t, f->apps[a][0] ? f->apps[a] : "(none)");
		text_printf(&o->t, " %" PRIu64, f->app_counts[a]);
	}
	text_str(&o->t, f->napps ? ")</p><p>" : "</p><p>");
	if (f->count > 1) /* one occurrence's figures, not every one's */
		text_printf(&o->t,
		            "<span class=\"muted\">First of %" PRIu64 " occurrences:</span> ",
		            f->count);
	h(&o->t, f->detail);
	text_str(&o->t, "</p>");
	if (rule_table[f->rule]->grows_arrays)
		report_arrays_html(&o->t, f);
	text_str(&o->t, "<p>Shape (literals replaced):</p><pre>");
	h(&o->t, f->shape);
	text_str(&o->t, "</pre><p>Fix:</p>");
	fix_html(&o->t, f->suggestion);
	text_str(&o->t, "</div>");
	out_flush(o);
}

/* The findings of rule r: a rule that grows arrays has them ranked by how
 * much their arrays grew (grown: model_array_findings_by_growth, ngrown of
 * them), the others in the order first seen. */
static void rule_findings(out_t *o, const model *m, rule_id r, const size_t *grown, size_t ngrown)
{
	if (rule_table[r]->grows_arrays && grown) {
		for (size_t k = 0; k < ngrown; k++)
			if (m->findings[grown[k]].rule == r)
				finding_html(o, &m->findings[grown[k]]);
		return;
	}
	for (size_t i = 0; i < m->nfindings; i++)
		if (m->findings[i].rule == r)
			finding_html(o, &m->findings[i]);
}

/* Per rule: its id, summary and kind of fix, then its findings. */
static void rules(out_t *o, const model *m)
{
	size_t ngrown = 0;
	size_t *grown = model_array_findings_by_growth(m, &ngrown);
	text_str(&o->t, "<section id=\"rules\"><h2>Rules</h2><p class=\"muted\">A finding is a "
	                "rule broken by one query shape; its occurrences are the requests that "
	                "broke it.</p>");
	report_legend_html(&o->t);
	for (int r = 0; r < RULE_COUNT; r++) {
		size_t n = 0;
		for (size_t i = 0; i < m->nfindings; i++)
			n += m->findings[i].rule == (rule_id)r;
		text_printf(&o->t, "<h3 id=\"rule-%s\"><code>%s</code>: ", rule_name((rule_id)r),
		            rule_name((rule_id)r));
		out_count(&o->t, n, "finding", "findings");
		text_str(&o->t, ", ");
		out_count(&o->t, m->rule_totals[r], "occurrence", "occurrences");
		text_printf(&o->t, "</h3><p class=\"muted\">%s. Fix: ", rule_table[r]->summary);
		h(&o->t, rule_table[r]->fix_kind);
		text_str(&o->t, ".</p>");
		size_t mine = 0;
		for (size_t k = 0; grown && k < ngrown; k++)
			mine += m->findings[grown[k]].rule == (rule_id)r;
		if (rule_table[r]->grows_arrays && mine)
			text_str(&o->t,
			         "<p class=\"muted\">Ranked by growth: the largest array "
			         "length seen in the second half of the capture's time range "
			         "minus the largest seen in the first half.</p>");
		out_flush(o);
		rule_findings(o, m, (rule_id)r, grown, ngrown);
	}
	free(grown);
	text_str(&o->t, "</section>");
	out_flush(o);
}

static void fields_list(text_buf *t, const model_field *f, size_t n, bool lens, size_t max)
{
	if (!n) {
		text_str(t, "<span class=\"muted\">none seen</span>");
		return;
	}
	for (size_t i = 0; i < n && i < max; i++) {
		text_str(t, i ? ", <code>" : "<code>");
		h(t, f[i].path);
		if (lens)
			text_printf(t, "</code> up to %" PRId64, f[i].max_len);
		else
			text_printf(t, "</code> ×%" PRIu64, f[i].count);
	}
}

/* The rows of the schema view that count this namespace's findings of
 * a rule (rules.h, profile_row). */
static void profile_rows(out_t *o, const model_ns *n)
{
	for (int r = 0; r < RULE_COUNT; r++) {
		const char *row = rule_table[r]->profile_row;
		uint64_t k = n->findings[r];
		if (!row)
			continue;
		html_table_row_head(&o->t, row);
		text_printf(&o->t, "%s%" PRIu64 "%s queries", k ? "<b class=\"bad\">" : "", k,
		            k ? "</b>" : "");
		html_table_row_end(&o->t);
	}
}

static void bloat_cell(out_t *o, const model_ns *n)
{
	static const char *const buckets[MODEL_BLOAT_BUCKETS] = {
	    "&lt;1 KiB", "&lt;16 KiB", "&lt;128 KiB", "&lt;1 MiB",
	    "&lt;4 MiB", "&lt;16 MiB", "&ge;16 MiB"};
	if (!n->docs) {
		text_str(&o->t, "<span class=\"muted\">no reply sampled</span>");
		return;
	}
	out_count(&o->t, n->docs, "document", "documents");
	text_str(&o->t, " sampled, mean ");
	out_size(&o->t, n->doc_bytes / n->docs);
	text_str(&o->t, ", largest ");
	out_size(&o->t, n->doc_max > 0 ? (uint64_t)n->doc_max : 0);
	text_printf(&o->t, " (%.3f%% of the 16 MiB limit)<br>",
	            (double)n->doc_max * 100.0 / 16777216.0);
	for (int b = 0; b < MODEL_BLOAT_BUCKETS; b++)
		if (n->bloat[b])
			text_printf(&o->t, "%s: %" PRIu64 " &nbsp; ", buckets[b], n->bloat[b]);
}

static void indexes_cell(out_t *o, const model_ns *n)
{
	if (!n->have_indexes)
		text_str(&o->t, "<span class=\"muted\">index list not known</span>");
	for (size_t k = 0; k < n->nindexes; k++) {
		const model_index *x = &n->indexes[k];
		text_str(&o->t, k ? "<br>" : "");
		text_str(&o->t, x->used ? "<span class=\"ok\">used</span> "
		                        : "<b class=\"bad\">no captured "
		                          "shape can use</b> ");
		h(&o->t, x->name);
		text_str(&o->t, " <code>");
		h(&o->t, x->key);
		text_str(&o->t, "</code>");
		if (x->ops >= 0)
			text_printf(&o->t, " ($indexStats ops: %" PRId64 ")", x->ops);
	}
}

static void schema_ns(out_t *o, const model_ns *n)
{
	text_str(&o->t, "<h3>");
	h(&o->t, n->ns);
	text_str(&o->t, " <span class=\"muted\">");
	out_count(&o->t, n->ops, "operation", "operations");
	text_str(&o->t, "</span></h3>");
	html_table_open(&o->t, NULL, NULL, 0);
	html_table_row_head(&o->t, "Arrays that grow");
	text_printf(
	    &o->t,
	    "%" PRIu64 " <code>$push</code>/<code>$addToSet</code> writes; targets: ", n->pushes);
	fields_list(&o->t, n->push, n->npush, false, 12);
	text_str(&o->t, "<br>longest arrays seen in replies: ");
	fields_list(&o->t, n->arrays, n->narrays, true, 12);
	html_table_row_end(&o->t);
	html_table_row_head(&o->t, "Bloated documents");
	bloat_cell(o, n);
	html_table_row_end(&o->t);
	html_table_row_head(&o->t, "Separated data");
	text_printf(&o->t, "%" PRIu64 " of %" PRIu64 " reads join (%.1f%%)", n->lookups, n->reads,
	            n->reads ? (double)n->lookups * 100.0 / (double)n->reads : 0.0);
	for (size_t j = 0; j < n->njoined; j++) {
		text_str(&o->t, j ? ", " : "; joined: ");
		h(&o->t, n->joined[j]);
	}
	html_table_row_end(&o->t);
	profile_rows(o, n);
	html_table_row_head(&o->t, "Unnecessary indexes");
	indexes_cell(o, n);
	html_table_row_end(&o->t);
	html_table_close(&o->t);
	out_flush(o);
}

static const html_col db_cols[] = {{"database", false}, {"collections seen", true}};

static void schema(out_t *o, const model *m)
{
	text_str(&o->t,
	         "<section id=\"schema\"><h2>Schema view</h2><p class=\"muted\">The six "
	         "anti-patterns of MongoDB's schema design guidance, per collection. Document "
	         "sizes and array lengths come from a sample of replies "
	         "(capture.replySampleRate). An index is counted as usable when a captured "
	         "filter, sort or hint starts on its first key (the planner scans an index from "
	         "its first key).</p><h3>Too many collections</h3>");
	html_table_open(&o->t, NULL, db_cols, sizeof db_cols / sizeof *db_cols);
	for (size_t i = 0; i < m->ndbs; i++) {
		text_str(&o->t, "<tr>");
		html_table_td_text(&o->t, m->dbs[i].db);
		html_table_td(&o->t, "n");
		text_printf(&o->t, "%" PRIu64 "%s", m->dbs[i].collections,
		            m->dbs[i].collections > 10000 ? " <b class=\"bad\">(over 10,000)</b>"
		                                          : "");
		html_table_td_end(&o->t);
		text_str(&o->t, "</tr>");
		out_flush(o);
	}
	html_table_close(&o->t);
	out_flush(o);
	for (size_t i = 0; i < m->nnss; i++)
		schema_ns(o, &m->nss[i]);
	text_str(&o->t, "</section>");
	out_flush(o);
}

static void apps(out_t *o, const model *m)
{
	html_col cols[4 + RULE_COUNT] = {
	    {"app", false}, {"operations", true}, {"total ms", true}, {"shapes", true}};
	for (int r = 0; r < RULE_COUNT; r++)
		cols[4 + r] = (html_col){rule_name((rule_id)r), true};
	text_str(&o->t, "<section id=\"apps\"><h2>Per app</h2>");
	html_table_open(&o->t, "id=\"app-table\" class=\"sortable\"", cols, 4 + RULE_COUNT);
	for (size_t i = 0; i < m->napps; i++) {
		const model_app *a = &m->apps[i];
		text_str(&o->t, "<tr data-apps=\"|");
		h(&o->t, a->app);
		text_str(&o->t, "|\">");
		html_table_td_text(&o->t, a->app[0] ? a->app : "(none)");
		html_table_td_u64(&o->t, a->ops);
		html_table_td_fixed(&o->t, (double)a->total_us / 1000.0, 1);
		html_table_td_u64(&o->t, a->shapes);
		for (int r = 0; r < RULE_COUNT; r++)
			html_table_td_u64(&o->t, a->findings[r]);
		text_str(&o->t, "</tr>");
		out_flush(o);
	}
	html_table_close(&o->t);
	text_str(&o->t, "</section>");
	out_flush(o);
}

bool report_write_html(const model *m, FILE *f)
{
	static out_t o;
	out_init(&o, f);
	text_str(&o.t, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
	               "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
	               "<title>mongoguard design review</title><style>");
	text_str(&o.t, css);
	text_str(&o.t, "</style></head><body><h1>mongoguard design review</h1>"
	               "<nav><a href=\"#overview\">Overview</a>"
	               "<a href=\"#recommendations\">Recommendations</a>");
	if (m->diff)
		text_str(&o.t, "<a href=\"#diff\">Before and after</a>");
	text_str(&o.t, "<a href=\"#shapes\">Query shapes</a>"
	               "<a href=\"#workload\">Workload</a><a href=\"#relationships\">"
	               "Relationships</a><a href=\"#rules\">Rules</a><a href=\"#schema\">Schema</a>"
	               "<a href=\"#apps\">Apps</a></nav>");
	out_flush(&o);
	report_filters_html(&o, m);
	out_flush(&o);
	overview(&o, m);
	report_recs_html(&o, m);
	report_diff_html(&o, m);
	shapes(&o, m);
	report_workload_html(&o, m);
	rules(&o, m);
	schema(&o, m);
	apps(&o, m);
	text_str(&o.t, "<script>");
	text_str(&o.t, js);
	text_str(&o.t, report_filter_js);
	text_str(&o.t, "</script></body></html>\n");
	return out_done(&o);
}
