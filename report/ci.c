/* The report for CI systems (model.h): --sarif and --junit.
 *
 * SARIF 2.1.0 (OASIS), as GitHub code scanning ingests it: one run whose
 * tool.driver lists every rule of the rule table (rules.h), in its order,
 * so ruleIndex is the rule_id, each with its summary, a full description
 * naming its parameters, and help (text and Markdown) from the row; one
 * result per finding: ruleId the rule id, level warning, the detail as its
 * message, the capture file it was first seen in as its physical location
 * (GitHub shows only results located in a file; a capture has no lines, so
 * no region), the namespace as a logical location, and the shape, its
 * hash, the fix and the count as properties. With --baseline, each result
 * has SARIF's baselineState (new or unchanged), and each finding gone
 * since the baseline is a result too, "absent", located in the baseline's
 * capture file.
 *
 * JUnit XML: one testsuite, one testcase per query shape (classname the
 * namespace, name the command and shape hash), one failure per finding on
 * that shape that --fail-on matches (none without --fail-on). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/model.h"
#include "report/out.h"

#ifndef MG_VERSION
#define MG_VERSION "0"
#endif

/* The rule's parameters in words: "minDocuments (default 10000): ...". */
static void params_words(text_buf *t, const rule_def *d, bool md)
{
	for (size_t i = 0; i < d->nparams; i++) {
		const rule_param *p = &d->params[i];
		text_printf(t,
		            md ? "%s`%s` (default %" PRIu32 ", %" PRIu32 " to %" PRIu32 "): %s"
		               : "%s%s (default %" PRIu32 ", %" PRIu32 " to %" PRIu32 "): %s",
		            i ? (md ? "\n- " : "; ")
		              : (md ? "\n\nParameters:\n\n- " : " Parameters: "),
		            p->name, p->def, p->min, p->max, p->summary);
	}
}

static void sarif_rule(out_t *o, const rule_def *d, bool comma)
{
	char buf[4096];
	text_buf w;
	text_printf(&o->t, "%s{\"id\":\"%s\",\"shortDescription\":{\"text\":", comma ? "," : "",
	            d->name);
	out_json_str(&o->t, d->summary);
	text_init(&w, buf, sizeof buf);
	text_printf(&w, "%s.", d->summary);
	params_words(&w, d, false);
	text_str(&o->t, "},\"fullDescription\":{\"text\":");
	out_json_str(&o->t, text_finish(&w));
	text_init(&w, buf, sizeof buf);
	text_printf(&w, "mongoguard rule %s: %s. Fix: %s.", d->name, d->summary, d->fix_kind);
	params_words(&w, d, false);
	text_str(&o->t, "},\"help\":{\"text\":");
	out_json_str(&o->t, text_finish(&w));
	text_init(&w, buf, sizeof buf);
	text_printf(&w, "**mongoguard rule `%s`**: %s.\n\nFix: %s.", d->name, d->summary,
	            d->fix_kind);
	params_words(&w, d, true);
	text_str(&o->t, ",\"markdown\":");
	out_json_str(&o->t, text_finish(&w));
	text_str(&o->t, "},\"defaultConfiguration\":{\"level\":\"warning\"}}");
	out_flush(o);
}

static void sarif_rules(out_t *o)
{
	text_str(&o->t, "\"rules\":[");
	for (int r = 0; r < RULE_COUNT; r++)
		sarif_rule(o, rule_table[r], r > 0);
	text_str(&o->t, "]");
}

/* A file path as a URI reference: relative as given, absolute as a file:
 * URI; every byte but unreserved ones and '/' percent-encoded. */
static void uri(text_buf *t, const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	char buf[4096];
	text_buf u;
	text_init(&u, buf, sizeof buf);
	if (path[0] == '/')
		text_str(&u, "file://");
	for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || strchr("-._~/", *c)) {
			text_char(&u, (char)*c);
		} else {
			text_char(&u, '%');
			text_char(&u, hex[*c >> 4]);
			text_char(&u, hex[*c & 15]);
		}
	}
	out_json_str(t, text_finish(&u));
}

/* One result; state: its baselineState, or NULL without a baseline. */
static void sarif_result(out_t *o, const model *m, size_t i, const char *state, bool comma)
{
	const model_finding *f = &m->findings[i];
	char hex[17];
	snprintf(hex, sizeof hex, "%016" PRIx64, f->hash);
	text_printf(&o->t,
	            "%s{\"ruleId\":\"%s\",\"ruleIndex\":%d,\"level\":\"warning\","
	            "\"message\":{\"text\":",
	            comma ? "," : "", rule_name(f->rule), (int)f->rule);
	out_json_str(&o->t, f->detail[0] ? f->detail : rule_table[f->rule]->summary);
	text_str(&o->t, "},\"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":");
	/* a model made without files (tests) has no path: a URI is never empty */
	const char *path = f->input < m->ninputs ? m->inputs[f->input].path : "";
	uri(&o->t, path[0] ? path : "capture.bson");
	text_str(&o->t, "}},\"logicalLocations\":[{\"name\":");
	out_json_str(&o->t, f->ns);
	text_str(&o->t, ",\"kind\":\"namespace\"}]}],\"partialFingerprints\":{\"shapeHash/v1\":");
	text_printf(&o->t, "\"%s/%s\"}", rule_name(f->rule), hex);
	if (state)
		text_printf(&o->t, ",\"baselineState\":\"%s\"", state);
	text_str(&o->t, ",\"properties\":{\"namespace\":");
	out_json_str(&o->t, f->ns);
	text_str(&o->t, ",\"command\":");
	out_json_str(&o->t, f->command);
	text_printf(&o->t, ",\"shapeHash\":\"%s\",\"shape\":", hex);
	out_json_str(&o->t, f->shape);
	text_str(&o->t, ",\"fix\":");
	out_json_str(&o->t, f->suggestion[0] ? f->suggestion : rule_table[f->rule]->fix_kind);
	text_printf(&o->t, ",\"count\":%" PRIu64 "}}", f->count);
	out_flush(o);
}

bool report_write_sarif(const model *m, FILE *f)
{
	static out_t o;
	out_init(&o, f);
	text_str(&o.t, "{\"$schema\":\"https://json.schemastore.org/sarif-2.1.0.json\","
	               "\"version\":\"2.1.0\",\"runs\":[{\"tool\":{\"driver\":{\"name\":"
	               "\"mongoguard\",\"version\":\"" MG_VERSION "\",\"informationUri\":"
	               "\"https://github.com/mongoguard/mongoguard\",");
	sarif_rules(&o);
	text_str(&o.t, "}},\"results\":[");
	for (size_t i = 0; i < m->nfindings; i++)
		sarif_result(&o, m, i,
		             !m->diff                     ? NULL
		             : model_finding_is_new(m, i) ? "new"
		                                          : "unchanged",
		             i > 0);
	for (size_t i = 0; m->diff && i < m->diff->ngone_findings; i++)
		sarif_result(&o, m->diff->before, m->diff->gone_findings[i], "absent",
		             m->nfindings + i > 0);
	text_str(&o.t, "]}]}\n");
	return out_done(&o);
}

/* XML text or an attribute value: text_html's escapes (& < > " ' as
 * entities, controls dropped, invalid UTF-8 as U+FFFD), and U+FFFE and
 * U+FFFF, valid UTF-8 but no XML characters (a parser refuses the whole
 * document), as U+FFFD too. EF only ever leads a sequence, so the text
 * between two is escaped as it would be whole. */
static void xml(text_buf *t, const char *s)
{
	const char *p = s, *q = s;
	while ((q = strstr(q, "\xef\xbf"))) {
		unsigned char c = (unsigned char)q[2];
		if (c != 0xbe && c != 0xbf) {
			q += 2;
			continue;
		}
		text_html_str(t, p, (size_t)(q - p));
		text_put(t, "\xef\xbf\xbd", 3);
		p = q = q + 3;
	}
	text_html(t, p);
}

/* The findings by shape hash (then row, so a shape's failures come in the
 * model's order) and the shapes' hashes sorted: each testcase finds its
 * findings, and each finding whether a shape row has its hash, by binary
 * search, so the suite is n log n in shapes and findings. */
typedef struct junit_index {
	size_t *by_hash; /* into m->findings */
	uint64_t *shape_hashes;
} junit_index;

static const model *sort_model; /* qsort has no context argument */

static int finding_cmp(const void *pa, const void *pb)
{
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
	uint64_t ha = sort_model->findings[a].hash, hb = sort_model->findings[b].hash;
	if (ha != hb)
		return ha < hb ? -1 : 1;
	return a < b ? -1 : a > b;
}

static int hash_cmp(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
	return a < b ? -1 : a > b;
}

static void junit_index_build(junit_index *x, const model *m)
{
	x->by_hash = calloc(m->nfindings ? m->nfindings : 1, sizeof *x->by_hash);
	x->shape_hashes = calloc(m->nshapes ? m->nshapes : 1, sizeof *x->shape_hashes);
	if (!x->by_hash || !x->shape_hashes)
		abort(); /* as the aggregator: nothing sensible to do */
	for (size_t i = 0; i < m->nfindings; i++)
		x->by_hash[i] = i;
	sort_model = m;
	qsort(x->by_hash, m->nfindings, sizeof *x->by_hash, finding_cmp);
	sort_model = NULL;
	for (size_t i = 0; i < m->nshapes; i++)
		x->shape_hashes[i] = m->shapes[i].hash;
	qsort(x->shape_hashes, m->nshapes, sizeof *x->shape_hashes, hash_cmp);
}

/* The findings of hash: x->by_hash[*first .. return). */
static size_t findings_of(const junit_index *x, const model *m, uint64_t hash, size_t *first)
{
	size_t lo = 0, hi = m->nfindings;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->findings[x->by_hash[mid]].hash < hash)
			lo = mid + 1;
		else
			hi = mid;
	}
	*first = lo;
	while (hi < m->nfindings && m->findings[x->by_hash[hi]].hash == hash)
		hi++;
	return hi;
}

static bool has_shape_row(const junit_index *x, const model *m, uint64_t hash)
{
	return bsearch(&hash, x->shape_hashes, m->nshapes, sizeof hash, hash_cmp) != NULL;
}

static size_t matched_on(const junit_index *x, const model *m, const report_gate *g, uint64_t hash)
{
	size_t n = 0, k, end = findings_of(x, m, hash, &k);
	for (; k < end; k++)
		n += report_gate_matches(g, m, x->by_hash[k]);
	return n;
}

static void junit_case(out_t *o, const junit_index *x, const model *m, const report_gate *g,
                       const model_shape *s)
{
	char hex[17];
	snprintf(hex, sizeof hex, "%016" PRIx64, s->hash);
	text_str(&o->t, "<testcase classname=\"");
	xml(&o->t, s->ns);
	text_str(&o->t, "\" name=\"");
	xml(&o->t, s->command);
	text_printf(&o->t, " %s\" time=\"%.3f\">", hex, (double)s->total_us / 1e6);
	size_t k, end = findings_of(x, m, s->hash, &k);
	for (; k < end; k++) {
		size_t i = x->by_hash[k];
		const model_finding *f = &m->findings[i];
		if (!report_gate_matches(g, m, i))
			continue;
		text_printf(&o->t, "<failure type=\"%s\" message=\"", rule_name(f->rule));
		xml(&o->t, f->detail);
		text_str(&o->t, "\">");
		xml(&o->t, f->shape);
		text_str(&o->t, "\nFix: ");
		xml(&o->t, f->suggestion);
		text_str(&o->t, "</failure>");
		out_flush(o);
	}
	text_str(&o->t, "</testcase>\n");
	out_flush(o);
}

/* Whether finding i opens a testcase of its own: the first finding of a
 * shape hash no shape row has (a rule may report under a shape of its
 * own, one that names the field; a batch's later statements have shapes
 * no row shows). Its testcase holds
 * every finding of that hash, so a second finding there (another rule on
 * the same statement) opens none: each failure is written once. */
static bool orphan_case(const junit_index *x, const model *m, size_t i)
{
	uint64_t hash = m->findings[i].hash;
	size_t first;
	if (has_shape_row(x, m, hash))
		return false;
	(void)findings_of(x, m, hash, &first);
	return x->by_hash[first] == i;
}

bool report_write_junit(const model *m, const report_gate *g, FILE *f)
{
	static out_t o;
	out_init(&o, f);
	size_t failures = 0;
	double secs = 0;
	junit_index x;
	junit_index_build(&x, m);
	for (size_t i = 0; i < m->nshapes; i++) {
		failures += matched_on(&x, m, g, m->shapes[i].hash) > 0;
		secs += (double)m->shapes[i].total_us / 1e6;
	}
	size_t orphans = 0;
	for (size_t i = 0; i < m->nfindings; i++)
		if (orphan_case(&x, m, i)) {
			orphans++;
			failures += matched_on(&x, m, g, m->findings[i].hash) > 0;
		}
	text_printf(&o.t,
	            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"mongoguard\" "
	            "tests=\"%zu\" failures=\"%zu\"><testsuite name=\"mongoguard design review\" "
	            "tests=\"%zu\" failures=\"%zu\" errors=\"0\" time=\"%.3f\">\n",
	            m->nshapes + orphans, failures, m->nshapes + orphans, failures, secs);
	out_flush(&o);
	for (size_t i = 0; i < m->nshapes; i++)
		junit_case(&o, &x, m, g, &m->shapes[i]);
	for (size_t i = 0; i < m->nfindings; i++) {
		const model_finding *fd = &m->findings[i];
		if (!orphan_case(&x, m, i))
			continue;
		model_shape s = {.hash = fd->hash};
		snprintf(s.ns, sizeof s.ns, "%s", fd->ns);
		snprintf(s.command, sizeof s.command, "%s", fd->command);
		junit_case(&o, &x, m, g, &s);
	}
	free(x.by_hash);
	free(x.shape_hashes);
	text_str(&o.t, "</testsuite></testsuites>\n");
	return out_done(&o);
}
