/* Time and filters. The capture's time range is cut into
 * MODEL_TIME_BUCKETS intervals; for each, the findings of each rule (the
 * engine's tally, at the time of the request that broke it) and the p95
 * latency of the MODEL_TIME_SHAPES shapes with the most total time (by
 * request time), so a change in the middle of a capture shows as a step.
 * Drawn as inline SVG line charts, one series per rule that has findings
 * and per busy shape.
 *
 * The filters (app, namespace, rule) are a form the page's inline script
 * shows and acts on: it hides rows and blocks whose data-apps, data-ns or
 * data-rules do not match. Without scripts the form stays hidden and every
 * row is shown, so the page reads the same. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report/aggregate_parts.h"
#include "report/grow.h"
#include "report/sections.h"
#include "report/sort.h"

void agg_note_latency(model_shape *s, int64_t t_us, int64_t lat_us)
{
	if (s->nlat == s->caplat) {
		s->caplat = s->caplat ? s->caplat * 2 : 16;
		int64_t *nl = realloc(s->lat_us, s->caplat * sizeof *nl);
		if (!nl)
			abort();
		s->lat_us = nl;
		nl = realloc(s->lat_t, s->caplat * sizeof *nl);
		if (!nl)
			abort();
		s->lat_t = nl;
	}
	s->lat_t[s->nlat] = t_us;
	s->lat_us[s->nlat++] = lat_us;
	s->total_us += lat_us;
}

void agg_tally_at(model *m, int64_t t_us, rule_id rule)
{
	if (m->ntl_ev) {
		model_tl_event *e = &m->tl_ev[m->ntl_ev - 1];
		if (e->rule == rule && t_us / 1000000 == e->t_us / 1000000) {
			e->n++;
			return;
		}
	}
	REPORT_GROW(m->tl_ev, m->ntl_ev, m->captl_ev);
	m->tl_ev[m->ntl_ev++] = (model_tl_event){.t_us = t_us, .rule = rule, .n = 1};
}

static size_t bucket_of(const model_timeline *tl, int64_t t)
{
	if (t < tl->start_us)
		return 0;
	size_t b = (size_t)((t - tl->start_us) / tl->width_us);
	return b < tl->nb ? b : tl->nb - 1;
}

/* Shape k's p95 per bucket: its latencies grouped by bucket, each group
 * sorted. */
static void shape_p95(model *m, size_t k)
{
	model_timeline *tl = &m->tl;
	const model_shape *s = &m->shapes[tl->shape[k]];
	size_t count[MODEL_TIME_BUCKETS] = {0}, at[MODEL_TIME_BUCKETS + 1];
	int64_t *v = malloc((s->nlat ? s->nlat : 1) * sizeof *v);
	if (!v)
		abort();
	for (size_t i = 0; i < s->nlat; i++)
		count[bucket_of(tl, s->lat_t[i])]++;
	at[0] = 0;
	for (size_t b = 0; b < tl->nb; b++)
		at[b + 1] = at[b] + count[b];
	size_t fill[MODEL_TIME_BUCKETS];
	memcpy(fill, at, sizeof fill);
	for (size_t i = 0; i < s->nlat; i++)
		v[fill[bucket_of(tl, s->lat_t[i])]++] = s->lat_us[i];
	for (size_t b = 0; b < tl->nb; b++) {
		size_t n = count[b];
		tl->p95[k][b] = -1;
		if (!n)
			continue;
		sort_i64(v + at[b], n);
		tl->p95[k][b] = (double)v[at[b] + (size_t)(0.95 * (double)(n - 1) + 0.5)] / 1000.0;
	}
	free(v);
}

/* Intervals a reader takes in at a glance: whole seconds, minutes, hours
 * or days, never under a second (finer would chart the client's jitter). */
static const int64_t widths_s[] = {1,     2,     5,     10,    15,     30,    60,
                                   120,   300,   600,   900,   1800,   3600,  7200,
                                   10800, 21600, 43200, 86400, 172800, 604800};

/* The smallest round width that fits [t_min, t_max] in at most
 * MODEL_TIME_BUCKETS intervals, starting on a multiple of the width (so
 * 10 s intervals start at :00, :10, ...); past the largest, whole seconds. */
static void bucket_width(model_timeline *tl, int64_t t_min, int64_t t_max)
{
	for (size_t i = 0; i < sizeof widths_s / sizeof *widths_s; i++) {
		int64_t w = widths_s[i] * 1000000;
		int64_t start = t_min - t_min % w;
		int64_t nb = (t_max - start) / w + 1;
		if (nb <= MODEL_TIME_BUCKETS) {
			tl->start_us = start;
			tl->width_us = w;
			tl->nb = (size_t)nb;
			return;
		}
	}
	int64_t w = ((t_max - t_min) / MODEL_TIME_BUCKETS / 1000000 + 1) * 1000000;
	tl->start_us = t_min;
	tl->width_us = w;
	tl->nb = (size_t)((t_max - t_min) / w + 1);
}

/* "5 s", "2 min", "1 h", "2 d". */
static void width_words(text_buf *t, int64_t us)
{
	int64_t s = us / 1000000;
	if (s % 86400 == 0)
		text_printf(t, "%" PRId64 " d", s / 86400);
	else if (s % 3600 == 0)
		text_printf(t, "%" PRId64 " h", s / 3600);
	else if (s % 60 == 0)
		text_printf(t, "%" PRId64 " min", s / 60);
	else
		text_printf(t, "%" PRId64 " s", s);
}

void report_timeline_build(model *m)
{
	model_timeline *tl = &m->tl;
	memset(tl, 0, sizeof *tl);
	if (!m->requests)
		return;
	bucket_width(tl, m->t_min, m->t_max);
	for (size_t i = 0; i < m->ntl_ev; i++)
		tl->rule[m->tl_ev[i].rule][bucket_of(tl, m->tl_ev[i].t_us)] += m->tl_ev[i].n;
	/* the busiest shapes: most total time, of those a reply timed */
	for (size_t i = 0; i < m->nshapes; i++) {
		if (!m->shapes[i].nlat)
			continue;
		size_t k = tl->nshapes < MODEL_TIME_SHAPES ? tl->nshapes++ : MODEL_TIME_SHAPES;
		if (k == MODEL_TIME_SHAPES) {
			if (m->shapes[i].total_us <= m->shapes[tl->shape[k - 1]].total_us)
				continue;
			k--;
		}
		tl->shape[k] = i;
		for (; k > 0 &&
		       m->shapes[tl->shape[k]].total_us > m->shapes[tl->shape[k - 1]].total_us;
		     k--) {
			size_t t = tl->shape[k];
			tl->shape[k] = tl->shape[k - 1];
			tl->shape[k - 1] = t;
		}
	}
	for (size_t k = 0; k < tl->nshapes; k++)
		shape_p95(m, k);
}

/* ---- the charts ---- */

static const char *const colors[] = {"#2e90fa", "#f04438", "#12b76a", "#f79009",
                                     "#7a5af8", "#ee46bc", "#667085"};

enum { CW = 1000, CH = 200, CX = 60, LEGEND = 18 };

static double x_of(size_t b, size_t nb)
{
	return CX + (nb > 1 ? (double)b * (CW - CX - 10) / (double)(nb - 1) : 0);
}

static void chart_open(out_t *o, const model *m, const char *id, const char *title, double maxv,
                       const char *unit, size_t nseries)
{
	int h = CH + 30 + (int)nseries * LEGEND;
	text_printf(&o->t,
	            "<svg id=\"%s\" role=\"img\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
	            "xmlns=\"http://www.w3.org/2000/svg\"><title>%s</title>"
	            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#98a2b3\"/>"
	            "<text x=\"4\" y=\"14\" font-size=\"12\">%.4g %s</text>"
	            "<text x=\"4\" y=\"%d\" font-size=\"12\">0</text>"
	            "<text x=\"%d\" y=\"%d\" font-size=\"12\">",
	            id, CW, h, CW, h, title, CX, CH, CW, CH, maxv, unit, CH, CX, CH + 18);
	time_t s = (time_t)(m->tl.start_us / 1000000);
	struct tm tm;
	char buf[64];
	gmtime_r(&s, &tm);
	strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
	text_str(&o->t, buf);
	text_printf(&o->t,
	            "</text><text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"end\">+%.1f s "
	            "(",
	            CW - 5, CH + 18, (double)(m->t_max - m->t_min) / 1e6);
	out_count(&o->t, m->tl.nb, "interval", "intervals");
	text_str(&o->t, " of ");
	width_words(&o->t, m->tl.width_us);
	text_str(&o->t, ")</text>");
	out_flush(o);
}

/* One series: a polyline through its buckets (a gap where v < 0) and a
 * dot per value, with its legend line. */
static void series(out_t *o, const char *name, const double *v, size_t nb, double maxv, size_t i)
{
	const char *c = colors[i % (sizeof colors / sizeof *colors)];
	text_str(&o->t, "<g class=\"series\" data-series=\"");
	text_html(&o->t, name);
	text_printf(&o->t, "\" stroke=\"%s\" fill=\"%s\"><title>", c, c);
	text_html(&o->t, name);
	text_str(&o->t, "</title>");
	bool open = false;
	for (size_t b = 0; b < nb; b++) {
		if (v[b] < 0) {
			text_str(&o->t, open ? "\"/>" : "");
			open = false;
			continue;
		}
		double y = CH - v[b] / (maxv > 0 ? maxv : 1) * (CH - 20);
		text_printf(&o->t, "%s%.1f,%.1f",
		            open ? " " : "<polyline fill=\"none\" stroke-width=\"2\" points=\"",
		            x_of(b, nb), y);
		open = true;
	}
	text_str(&o->t, open ? "\"/>" : "");
	for (size_t b = 0; b < nb; b++)
		if (v[b] >= 0)
			text_printf(&o->t, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"/>",
			            x_of(b, nb), CH - v[b] / (maxv > 0 ? maxv : 1) * (CH - 20));
	int ly = CH + 34 + (int)i * LEGEND;
	text_printf(&o->t,
	            "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\"/><text x=\"%d\" y=\"%d\" "
	            "font-size=\"12\" stroke=\"none\" fill=\"#1d2433\">",
	            CX, ly - 10, CX + 18, ly);
	text_html(&o->t, name);
	text_str(&o->t, "</text></g>");
	out_flush(o);
}

static void rules_chart(out_t *o, const model *m)
{
	const model_timeline *tl = &m->tl;
	double v[MODEL_TIME_BUCKETS], maxv = 1;
	size_t n = 0;
	for (int r = 0; r < RULE_COUNT; r++)
		for (size_t b = 0; b < tl->nb; b++)
			if ((double)tl->rule[r][b] > maxv)
				maxv = (double)tl->rule[r][b];
	for (int r = 0; r < RULE_COUNT; r++)
		n += m->rule_totals[r] > 0;
	chart_open(o, m, "rules-time-chart", "Occurrences per rule over time", maxv,
	           maxv == 1 ? "occurrence" : "occurrences", n);
	n = 0;
	for (int r = 0; r < RULE_COUNT; r++) {
		if (!m->rule_totals[r])
			continue;
		for (size_t b = 0; b < tl->nb; b++)
			v[b] = (double)tl->rule[r][b];
		series(o, rule_name((rule_id)r), v, tl->nb, maxv, n++);
	}
	text_str(&o->t, "</svg>");
	out_flush(o);
}

static void p95_chart(out_t *o, const model *m)
{
	const model_timeline *tl = &m->tl;
	double maxv = 0;
	for (size_t k = 0; k < tl->nshapes; k++)
		for (size_t b = 0; b < tl->nb; b++)
			if (tl->p95[k][b] > maxv)
				maxv = tl->p95[k][b];
	chart_open(o, m, "p95-time-chart", "p95 latency of the busiest shapes over time", maxv,
	           "ms", tl->nshapes);
	for (size_t k = 0; k < tl->nshapes; k++) {
		const model_shape *s = &m->shapes[tl->shape[k]];
		char name[200];
		snprintf(name, sizeof name, "%s %s %016" PRIx64, s->ns, s->command, s->hash);
		series(o, name, tl->p95[k], tl->nb, maxv, k);
	}
	text_str(&o->t, "</svg>");
	out_flush(o);
}

void report_timeline_html(out_t *o, const model *m)
{
	if (!m->tl.nb)
		return;
	text_str(&o->t, "<h3>Occurrences per rule over time</h3>");
	rules_chart(o, m);
	text_printf(&o->t,
	            "<h3>p95 latency of the busiest shapes over time</h3><p class=\"muted\">The "
	            "five shapes with the most total time; each point is the p95 of the "
	            "replies to requests sent in that interval (none: no point). Intervals are "
	            "a round length (1 s at least) that cuts the capture into at most %d.</p>",
	            MODEL_TIME_BUCKETS);
	p95_chart(o, m);
}

void report_timeline_json(out_t *o, const model *m)
{
	const model_timeline *tl = &m->tl;
	text_printf(&o->t,
	            "\"timeline\":{\"start\":%" PRId64 ",\"bucketUs\":%" PRId64
	            ",\"buckets\":%zu,\"findingsPerRule\":{",
	            tl->start_us, tl->width_us, tl->nb);
	for (int r = 0; r < RULE_COUNT; r++) {
		text_printf(&o->t, "%s\"%s\":[", r ? "," : "", rule_name((rule_id)r));
		for (size_t b = 0; b < tl->nb; b++)
			text_printf(&o->t, "%s%" PRIu64, b ? "," : "", tl->rule[r][b]);
		text_char(&o->t, ']');
	}
	text_str(&o->t, "},\"busiestShapes\":[");
	for (size_t k = 0; k < tl->nshapes; k++) {
		text_printf(&o->t, "%s{\"shapeHash\":\"%016" PRIx64 "\",\"p95Ms\":[", k ? "," : "",
		            m->shapes[tl->shape[k]].hash);
		for (size_t b = 0; b < tl->nb; b++) {
			if (tl->p95[k][b] < 0)
				text_str(&o->t, b ? ",null" : "null");
			else
				text_printf(&o->t, "%s%.3f", b ? "," : "", tl->p95[k][b]);
		}
		text_str(&o->t, "]}");
	}
	text_str(&o->t, "]},");
	out_flush(o);
}

/* ---- filters ---- */

static void option(text_buf *t, const char *v)
{
	text_str(t, "<option value=\"");
	text_html(t, v);
	text_str(t, "\">");
	text_html(t, v[0] ? v : "(none)");
	text_str(t, "</option>");
}

void report_filters_html(out_t *o, const model *m)
{
	text_str(&o->t, "<form id=\"filters\" class=\"filters\" hidden><label>app <select "
	                "data-filter=\"apps\"><option value=\"*\">all</option>");
	for (size_t i = 0; i < m->napps; i++)
		option(&o->t, m->apps[i].app);
	out_flush(o);
	text_str(&o->t, "</select></label> <label>namespace <select data-filter=\"ns\">"
	                "<option value=\"*\">all</option>");
	for (size_t i = 0; i < m->nnss; i++) {
		option(&o->t, m->nss[i].ns);
		out_flush(o);
	}
	text_str(&o->t, "</select></label> <label>rule <select data-filter=\"rules\">"
	                "<option value=\"*\">all</option>");
	for (int r = 0; r < RULE_COUNT; r++)
		option(&o->t, rule_name((rule_id)r));
	text_str(&o->t,
	         "</select></label> <span class=\"muted\" id=\"filter-count\"></span></form>");
	out_flush(o);
}

/* Shows the form, and on each change hides what does not match. An
 * element is judged only on the attributes it has. */
const char report_filter_js[] =
    "(function(){var f=document.getElementById('filters');if(!f)return;f.hidden=false;"
    "var sel=f.querySelectorAll('select');function ok(el,k,v){if(v==='*')return true;"
    "var d=el.dataset[k];if(d===undefined)return true;"
    "if(k==='ns')return d===v;if(k==='apps')return d.indexOf('|'+v+'|')>=0;"
    "return (' '+d+' ').indexOf(' '+v+' ')>=0;}"
    "function run(){var els=document.querySelectorAll('[data-ns],[data-apps],[data-rules]'),"
    "shown=0;els.forEach(function(el){var s=true;sel.forEach(function(x){"
    "s=s&&ok(el,x.dataset.filter,x.value);});el.style.display=s?'':'none';if(s)shown++;});"
    "document.getElementById('filter-count').textContent=shown+' of '+els.length+' shown';}"
    "sel.forEach(function(x){x.addEventListener('change',run);});})();";
