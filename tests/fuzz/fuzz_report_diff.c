/* libFuzzer target: the report's before/after and CI outputs
 * (`mongoguard report --baseline B --fail-on SPEC --sarif F --junit F
 * --json F`): two models, the diff between them (report/diff.c),
 * the --fail-on gate (gate.c) and the SARIF, JUnit and JSON writers (ci.c,
 * json.c with diff_out.c); the Markdown and HTML writers run too, to
 * /dev/null.
 *
 * The input's first byte says where the models come from and which gate:
 *
 *   bit 0      0: models written straight from the input (below), fast,
 *              with shape hashes from a small pool so the two sides
 *              share some, strings of any bytes, latencies that cross the
 *              regression thresholds; 1: two capture files, read as
 *              fuzz_capture reads one (fuzz_report.h): a u32 length and
 *              the current capture, a u32 length and the baseline, then
 *              the gate's string if any. Captures are realistic but cost
 *              an aggregator each (a few ms).
 *   bits 1-3   the gate: 0 none, 1 any, 2 new, 3 the rules of the second
 *              byte's bits, 4-7 a spec string from the input.
 *   bit 4      a baseline (without it, no diff: every finding is new).
 *
 * Checked, each against a computation of its own here:
 *   - the diff: new and gone shapes and findings (by hash, and rule), the
 *     latency regressions (MODEL_REGRESSION_* thresholds);
 *   - the gate: a spec is accepted exactly when it is any, new, or a list
 *     of rule ids; what it matches: any every finding, new the diff's new
 *     ones, RULE,... the findings of those rules (new ones with a
 *     baseline); so the exit status (1 iff something matched) follows;
 *   - SARIF: strict JSON (json_check.h), version 2.1.0, one result per
 *     finding (and per gone finding with a baseline) with its rule id,
 *     rule index, hash, count, a file location, and with a baseline its
 *     baselineState;
 *   - JUnit: well-formed XML (xml_check.h); one testcase per shape row and
 *     per finding hash with no row; one <failure> per finding the gate
 *     matches, no more; the suites' tests and failures attributes count
 *     testcases and failed testcases;
 *   - the JSON report: strict JSON; its diff lists as long as the diff's,
 *     each finding's "new" as the diff says (read back with json_at: its
 *     "apps" keys are data, which libbson may read as Extended JSON). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_report.h"
#include "tests/fuzz/json_check.h"
#include "tests/fuzz/xml_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ROWS 8

/* Shape hashes the written models draw from: the two sides share some. */
static const uint64_t pool[8] = {
    0,
    1,
    0x8000000000000000ull,
    UINT64_MAX,
    0x0123456789abcdefull,
    0xfedcba9876543210ull,
    42,
    0x00000000ffffffffull,
};

/* ---- reading the input ---- */

typedef struct reader {
	const uint8_t *p, *e;
} reader;

static unsigned u8(reader *r)
{
	return r->p < r->e ? *r->p++ : 0;
}

static unsigned u16(reader *r)
{
	unsigned lo = u8(r);
	return lo | u8(r) << 8;
}

/* A u32 length, cut to what is left. */
static size_t u32_len(reader *r)
{
	uint32_t n = 0;
	for (int i = 0; i < 4; i++)
		n |= (uint32_t)u8(r) << (8 * i);
	size_t avail = (size_t)(r->e - r->p);
	return n < avail ? n : avail;
}

/* A string field of cap bytes: a length (one byte; 255: two more), then
 * that many bytes of anything, cut to fit; a NUL among them ends it. */
static void str(reader *r, char *out, size_t cap)
{
	size_t n = u8(r);
	if (n == 255)
		n = u16(r);
	size_t avail = (size_t)(r->e - r->p);
	if (n > avail)
		n = avail;
	size_t k = n < cap - 1 ? n : cap - 1;
	memcpy(out, r->p, k);
	out[k] = '\0';
	r->p += n;
}

/* ---- a model written from the input ---- */

static model_shape *shape_of(model *m, uint64_t hash)
{
	for (size_t i = 0; i < m->nshapes; i++)
		if (m->shapes[i].hash == hash)
			return &m->shapes[i];
	return NULL;
}

/* A model from the input (after the two first bytes, and the gate's string
 * if any; the baseline's follows the current's), str() for each string:
 *
 *   redacted, nshapes (mod 9), each: hash (pool index), ns, command,
 *   shape, count - 1, nlat (low 4 bits) | mostly_fails (bit 4), p95 in
 *   1/8 ms (u16), total ms (u16);
 *   nfindings (mod 9), each: rule, hash (pool index), ns, command, shape,
 *   suggestion, detail, count - 1, napps (mod 3), each app's name.
 *
 * Keeps what the aggregator keeps true: one row per shape hash, one
 * finding per rule and hash, counts from 1, latencies from the clamped
 * range, a shape's rules bits and the per-rule totals from its findings. */
static void write_model(model *m, reader *r)
{
	memset(m, 0, sizeof *m);
	m->inputs = calloc(1, sizeof *m->inputs);
	m->shapes = calloc(MAX_ROWS, sizeof *m->shapes);
	m->findings = calloc(MAX_ROWS, sizeof *m->findings);
	if (!m->inputs || !m->shapes || !m->findings)
		abort();
	m->ninputs = 1;
	m->capshapes = m->capfindings = MAX_ROWS;
	m->redacted = u8(r) & 1;
	snprintf(m->inputs[0].path, sizeof m->inputs[0].path, "fz.bson");
	unsigned nshapes = u8(r) % (MAX_ROWS + 1);
	for (unsigned i = 0; i < nshapes; i++) {
		uint64_t hash = pool[u8(r) % 8];
		model_shape *s = shape_of(m, hash) ? NULL : &m->shapes[m->nshapes];
		model_shape scratch;
		if (!s)
			s = &scratch; /* read, then dropped: a second row of one hash */
		memset(s, 0, sizeof *s);
		s->hash = hash;
		str(r, s->ns, sizeof s->ns);
		str(r, s->command, sizeof s->command);
		str(r, s->shape, sizeof s->shape);
		s->count = u8(r) + 1;
		unsigned flags = u8(r);
		s->nlat = flags % 16; /* MODEL_REGRESSION_MIN_REPLIES is 5 */
		s->mostly_fails = flags & 16;
		s->p95 = u16(r) / 8.0;
		s->p50 = s->p95 / 2;
		s->p99 = s->p95 * 1.25;
		s->total_us = (int64_t)u16(r) * 1000;
		s->errors = s->mostly_fails ? s->nlat : 0;
		if (s->nlat) {
			s->lat_us = calloc(s->nlat, sizeof *s->lat_us);
			if (!s->lat_us)
				abort();
			s->caplat = s->nlat;
			for (size_t k = 0; k < s->nlat; k++)
				s->lat_us[k] =
				    (int64_t)(s->p95 * 1000) * (int64_t)(k + 1) / (int64_t)s->nlat;
		}
		if (s == &scratch)
			free(s->lat_us);
		else
			m->nshapes++;
	}
	unsigned nfindings = u8(r) % (MAX_ROWS + 1);
	for (unsigned i = 0; i < nfindings; i++) {
		model_finding *f = &m->findings[m->nfindings];
		memset(f, 0, sizeof *f);
		f->rule = (rule_id)(u8(r) % RULE_COUNT);
		f->hash = pool[u8(r) % 8];
		str(r, f->ns, sizeof f->ns);
		str(r, f->command, sizeof f->command);
		str(r, f->shape, sizeof f->shape);
		str(r, f->suggestion, sizeof f->suggestion);
		str(r, f->detail, sizeof f->detail);
		f->count = u8(r) + 1;
		size_t napps = u8(r) % 3;
		for (size_t a = 0; a < napps; a++) {
			char app[sizeof f->apps[0]];
			str(r, app, sizeof app);
			bool known = false;
			for (size_t k = 0; k < f->napps; k++)
				known |= !strcmp(f->apps[k], app);
			if (known)
				continue; /* the aggregator keeps each name once */
			memcpy(f->apps[f->napps], app, sizeof app);
			f->app_counts[f->napps++] = a + 1;
		}
		f->esr_neq = f->esr_nsort = -1;
		bool dup = false;
		for (size_t k = 0; k < m->nfindings; k++)
			dup |= m->findings[k].rule == f->rule && m->findings[k].hash == f->hash;
		if (dup)
			continue;
		m->nfindings++;
		m->rule_totals[f->rule] += f->count;
		model_shape *s = shape_of(m, f->hash);
		if (s)
			s->rules |= 1u << f->rule;
	}
	for (size_t i = 0; i < m->nshapes; i++)
		m->requests += m->shapes[i].count;
}

/* ---- the diff, computed again ---- */

static bool has_finding(const model *m, rule_id rule, uint64_t hash)
{
	for (size_t i = 0; i < m->nfindings; i++)
		if (m->findings[i].rule == rule && m->findings[i].hash == hash)
			return true;
	return false;
}

static void same_list(const char *what, const size_t *got, size_t ngot, const size_t *want,
                      size_t nwant)
{
	if (ngot == nwant && (!ngot || memcmp(got, want, ngot * sizeof *got) == 0))
		return;
	fprintf(stderr, "diff: %s: %zu entries, expected %zu\n", what, ngot, nwant);
	abort();
}

static void check_diff(const model *now, const model *before, const model_diff *d)
{
	size_t want[MAX_ROWS * 64], n = 0;
	if (d->before != before)
		abort();
	for (size_t i = 0; i < now->nshapes; i++)
		if (!shape_of((model *)before, now->shapes[i].hash))
			want[n++] = i;
	same_list("new shapes", d->new_shapes, d->nnew_shapes, want, n);
	n = 0;
	for (size_t i = 0; i < before->nshapes; i++)
		if (!shape_of((model *)now, before->shapes[i].hash))
			want[n++] = i;
	same_list("gone shapes", d->gone_shapes, d->ngone_shapes, want, n);
	n = 0;
	for (size_t i = 0; i < now->nfindings; i++)
		if (!has_finding(before, now->findings[i].rule, now->findings[i].hash))
			want[n++] = i;
	same_list("new findings", d->new_findings, d->nnew_findings, want, n);
	n = 0;
	for (size_t i = 0; i < before->nfindings; i++)
		if (!has_finding(now, before->findings[i].rule, before->findings[i].hash))
			want[n++] = i;
	same_list("gone findings", d->gone_findings, d->ngone_findings, want, n);
	size_t k = 0;
	for (size_t i = 0; i < now->nshapes; i++) {
		const model_shape *s = &now->shapes[i];
		const model_shape *b = shape_of((model *)before, s->hash);
		bool slower = b && s->nlat >= MODEL_REGRESSION_MIN_REPLIES &&
		              b->nlat >= MODEL_REGRESSION_MIN_REPLIES && !s->mostly_fails &&
		              s->p95 >= b->p95 * MODEL_REGRESSION_FACTOR &&
		              s->p95 - b->p95 >= MODEL_REGRESSION_MIN_MS;
		if (!slower)
			continue;
		if (k >= d->nregressions || d->regressions[k].shape != i ||
		    d->regressions[k].p95 != s->p95 || d->regressions[k].before_p95 != b->p95) {
			fprintf(stderr, "diff: regression %zu is not shape %zu\n", k, i);
			abort();
		}
		k++;
	}
	if (k != d->nregressions)
		abort();
	for (size_t i = 0; i < now->nfindings; i++) {
		bool listed = false;
		for (size_t j = 0; j < d->nnew_findings; j++)
			listed |= d->new_findings[j] == i;
		if (model_finding_is_new(now, i) != listed)
			abort(); /* the writers' "new" and the diff's list disagree */
	}
}

/* ---- the gate ---- */

typedef struct gate_case {
	char spec[2048];
	bool set;
} gate_case;

/* The spec's meaning, read here without strtok or a copy: any, new, or
 * rule ids separated by commas (empty ones skipped); longer than 511 bytes,
 * refused (gate.c's buffer: cut, a list would lose its last ids). False:
 * refused. */
static bool gate_meaning(const char *spec, report_gate *g)
{
	*g = (report_gate){.on = true};
	if (strlen(spec) > 511)
		return false;
	g->any = !strcmp(spec, "any");
	g->only_new = !strcmp(spec, "new");
	if (g->any || g->only_new)
		return true;
	const char *p = spec;
	while (*p) {
		size_t n = strcspn(p, ",");
		if (n) {
			int r = -1;
			for (int i = 0; i < RULE_COUNT; i++)
				if (strlen(rule_name((rule_id)i)) == n &&
				    !memcmp(rule_name((rule_id)i), p, n))
					r = i;
			if (r < 0)
				return false;
			g->rules |= 1u << r;
		}
		p += n + (p[n] == ',');
	}
	return g->rules != 0;
}

static void gate_spec(unsigned kind, unsigned bits, reader *r, gate_case *c)
{
	c->set = kind != 0;
	c->spec[0] = '\0';
	if (kind == 1 || kind == 2) {
		snprintf(c->spec, sizeof c->spec, "%s", kind == 1 ? "any" : "new");
	} else if (kind == 3) {
		size_t len = 0;
		for (int i = 0; i < RULE_COUNT; i++)
			if (bits >> i & 1)
				len += (size_t)snprintf(c->spec + len, sizeof c->spec - len, "%s%s",
				                        len ? "," : "", rule_name((rule_id)i));
	} else if (kind >= 4) {
		str(r, c->spec, sizeof c->spec);
	}
}

/* The gate, checked against the spec's meaning, and what it matches on m
 * (*matched). False when the spec is refused: the report then exits 2 and
 * writes nothing. */
static bool check_gate(const gate_case *c, report_gate *g, const model *m, size_t *matched)
{
	memset(g, 0, sizeof *g);
	if (c->set) {
		char err[512] = "";
		report_gate want;
		bool ok = report_gate_parse(c->spec, g, err, sizeof err);
		if (ok != gate_meaning(c->spec, &want)) {
			fprintf(stderr, "--fail-on \"%s\": %s, expected %s\n", c->spec,
			        ok ? "accepted" : "refused", ok ? "refused" : "accepted");
			abort();
		}
		if (!ok && (!err[0] || strnlen(err, sizeof err) == sizeof err))
			abort(); /* a refusal says why */
		if (!ok)
			return false;
		if (g->on != want.on || g->any != want.any || g->only_new != want.only_new ||
		    g->rules != want.rules) {
			fprintf(stderr, "--fail-on \"%s\": rules %#x, expected %#x\n", c->spec,
			        g->rules, want.rules);
			abort();
		}
	}
	size_t nnew = 0;
	*matched = 0;
	for (size_t i = 0; i < m->nfindings; i++) {
		bool is_new = !m->diff || !has_finding(m->diff->before, m->findings[i].rule,
		                                       m->findings[i].hash);
		bool want =
		    g->on &&
		    (g->any || ((!g->rules || (g->rules >> m->findings[i].rule & 1)) && is_new));
		if (report_gate_matches(g, m, i) != want)
			abort();
		*matched += want;
		nnew += is_new;
	}
	/* the exit status (1 iff something matched), as the README states it */
	if (g->any && *matched != m->nfindings)
		abort(); /* any: fails iff there is a finding */
	if (g->only_new && *matched != (m->diff ? m->diff->nnew_findings : m->nfindings))
		abort(); /* new: fails iff the diff has new ones */
	if (g->only_new && *matched != nnew)
		abort();
	if (!c->set && *matched)
		abort(); /* no --fail-on: never fails */
	return true;
}

/* ---- the writers ---- */

static char *written(bool (*fn)(const model *, FILE *), const model *m, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	if (!f)
		abort();
	bool ok = fn(m, f);
	if (fclose(f) != 0 || !ok) {
		fprintf(stderr, "a writer failed on a model within the aggregator's bounds\n");
		abort();
	}
	return buf;
}

/* SARIF's keys are the writer's own, so libbson reads its structure. */
static void parse(const char *what, const char *json, size_t len, unsigned flags, bson_t *b)
{
	json_must_check(what, json, len, flags);
	bson_error_t err;
	if (!bson_init_from_json(b, json, (ssize_t)len, &err)) {
		fprintf(stderr, "%s does not parse: %s\n", what, err.message);
		abort();
	}
}

static const char *get_utf8(const bson_t *b, const char *path)
{
	bson_iter_t it, f;
	if (!bson_iter_init(&it, b) || !bson_iter_find_descendant(&it, path, &f) ||
	    !BSON_ITER_HOLDS_UTF8(&f)) {
		fprintf(stderr, "no string at %s\n", path);
		abort();
	}
	return bson_iter_utf8(&f, NULL);
}

static int64_t get_int(const bson_t *b, const char *path)
{
	bson_iter_t it, f;
	if (!bson_iter_init(&it, b) || !bson_iter_find_descendant(&it, path, &f) ||
	    !(BSON_ITER_HOLDS_NUMBER(&f) || BSON_ITER_HOLDS_BOOL(&f))) {
		fprintf(stderr, "no number at %s\n", path);
		abort();
	}
	return BSON_ITER_HOLDS_BOOL(&f) ? bson_iter_bool(&f) : bson_iter_as_int64(&f);
}

static size_t count_of(const bson_t *b, const char *path)
{
	bson_iter_t it, f, sub;
	if (!bson_iter_init(&it, b) || !bson_iter_find_descendant(&it, path, &f) ||
	    !BSON_ITER_HOLDS_ARRAY(&f) || !bson_iter_recurse(&f, &sub)) {
		fprintf(stderr, "no array at %s\n", path);
		abort();
	}
	size_t n = 0;
	while (bson_iter_next(&sub))
		n++;
	return n;
}

static void check_sarif(const model *m)
{
	size_t len;
	char *json = written(report_write_sarif, m, &len);
	bson_t b;
	parse("SARIF", json, len, 0, &b);
	if (strcmp(get_utf8(&b, "version"), "2.1.0") != 0 || count_of(&b, "runs") != 1 ||
	    count_of(&b, "runs.0.tool.driver.rules") != RULE_COUNT ||
	    count_of(&b, "runs.0.results") !=
	        m->nfindings + (m->diff ? m->diff->ngone_findings : 0))
		abort();
	for (size_t i = 0; i < m->nfindings; i++) {
		const model_finding *f = &m->findings[i];
		char path[128], hex[17];
		snprintf(hex, sizeof hex, "%016" PRIx64, f->hash);
#define AT(key) (snprintf(path, sizeof path, "runs.0.results.%zu.%s", i, key), path)
		if (strcmp(get_utf8(&b, AT("ruleId")), rule_name(f->rule)) != 0 ||
		    get_int(&b, AT("ruleIndex")) != (int64_t)f->rule ||
		    strcmp(get_utf8(&b, AT("properties.shapeHash")), hex) != 0 ||
		    get_int(&b, AT("properties.count")) != (int64_t)f->count ||
		    !get_utf8(&b, AT("message.text"))[0] ||
		    !get_utf8(&b, AT("locations.0.physicalLocation.artifactLocation.uri"))[0])
			abort();
		/* with a baseline, SARIF's own baselineState says whether it is new */
		if (m->diff && strcmp(get_utf8(&b, AT("baselineState")),
		                      model_finding_is_new(m, i) ? "new" : "unchanged") != 0)
			abort();
#undef AT
	}
	bson_destroy(&b);
	free(json);
}

/* What the JUnit document holds, from its start tags. */
typedef struct junit_seen {
	const model *m;
	size_t testcases, failed_cases, failures;
	bool open_failed;        /* the current testcase has a failure */
	long suites_failures[2]; /* testsuites, testsuite */
	long suites_tests[2];
	char cur_name[160]; /* the current testcase's name attribute */
} junit_seen;

static long attr_long(const xml_attr *a, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].name_len == strlen(name) && !memcmp(a[i].name, name, a[i].name_len)) {
			char v[32];
			size_t k = a[i].value_len < sizeof v - 1 ? a[i].value_len : sizeof v - 1;
			memcpy(v, a[i].value, k);
			v[k] = '\0';
			return strtol(v, NULL, 10);
		}
	return -1;
}

static void junit_tag(void *arg, const char *parent, const char *name, const xml_attr *a, size_t n)
{
	junit_seen *s = arg;
	if (!strcmp(name, "testsuites") || !strcmp(name, "testsuite")) {
		int k = name[9] == 's' ? 0 : 1;
		s->suites_failures[k] = attr_long(a, n, "failures");
		s->suites_tests[k] = attr_long(a, n, "tests");
	} else if (!strcmp(name, "testcase")) {
		if (strcmp(parent, "testsuite") != 0)
			abort();
		s->testcases++;
		s->open_failed = false;
		s->cur_name[0] = '\0';
		for (size_t i = 0; i < n; i++)
			if (a[i].name_len == 4 && !memcmp(a[i].name, "name", 4)) {
				size_t k = a[i].value_len < sizeof s->cur_name - 1
				               ? a[i].value_len
				               : sizeof s->cur_name - 1;
				memcpy(s->cur_name, a[i].value, k);
				s->cur_name[k] = '\0';
			}
	} else if (!strcmp(name, "failure")) {
		if (strcmp(parent, "testcase") != 0)
			abort();
		s->failures++;
		if (!s->open_failed)
			s->failed_cases++;
		s->open_failed = true;
	}
}

static void check_junit(const model *m, const report_gate *g, size_t matched)
{
	char *xmlbuf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&xmlbuf, &len);
	if (!f)
		abort();
	bool ok = report_write_junit(m, g, f);
	if (fclose(f) != 0 || !ok)
		abort();
	junit_seen s = {.m = m};
	char why[200];
	if (!xml_check(xmlbuf, len, junit_tag, &s, why, sizeof why)) {
		fprintf(stderr, "JUnit is not well-formed XML: %s\n%.*s\n", why,
		        (int)(len < 4000 ? len : 4000), xmlbuf);
		abort();
	}
	/* one testcase per shape row, and one per finding hash with no row */
	size_t cases = m->nshapes;
	for (size_t i = 0; i < m->nfindings; i++) {
		bool seen = shape_of((model *)m, m->findings[i].hash) != NULL;
		for (size_t k = 0; k < i && !seen; k++)
			seen = m->findings[k].hash == m->findings[i].hash;
		cases += !seen;
	}
	if (s.testcases != cases || s.failures != matched) {
		fprintf(stderr, "JUnit: %zu testcases, %zu failures; expected %zu and %zu\n",
		        s.testcases, s.failures, cases, matched);
		abort();
	}
	for (int k = 0; k < 2; k++)
		if (s.suites_tests[k] != (long)s.testcases ||
		    s.suites_failures[k] != (long)s.failed_cases) {
			fprintf(stderr,
			        "JUnit: tests=%ld failures=%ld, but %zu testcases of which %zu "
			        "failed\n",
			        s.suites_tests[k], s.suites_failures[k], s.testcases,
			        s.failed_cases);
			abort();
		}
	free(xmlbuf);
}

/* The JSON report, read back with json_at (json_check.h), not libbson: its
 * "apps" objects are keyed by application names, and libbson reads an
 * object keyed "$regex" as Extended JSON. */
static void check_json(const model *m)
{
	size_t len;
	char *json = written(report_write_json, m, &len);
	json_must_check("the JSON report", json, len, JC_DUP_KEYS_OK);
	if (json_len(json_at(json, len, "findings")) != m->nfindings ||
	    json_len(json_at(json, len, "shapes")) != m->nshapes)
		abort();
	for (size_t i = 0; i < m->nfindings; i++) {
		char path[64];
		snprintf(path, sizeof path, "findings.%zu.new", i);
		if (!json_is(json_at(json, len, path),
		             model_finding_is_new(m, i) ? "true" : "false"))
			abort();
	}
	const model_diff *d = m->diff;
	json_slice diff = json_at(json, len, "diff");
	if (!diff.p || json_is(diff, "null") != !d)
		abort();
	if (d && (json_len(json_at(json, len, "diff.newShapes")) != d->nnew_shapes ||
	          json_len(json_at(json, len, "diff.goneShapes")) != d->ngone_shapes ||
	          json_len(json_at(json, len, "diff.newFindings")) != d->nnew_findings ||
	          json_len(json_at(json, len, "diff.goneFindings")) != d->ngone_findings ||
	          json_len(json_at(json, len, "diff.latencyRegressions")) != d->nregressions))
		abort();
	free(json);
}

static void check_all(model *now, model *before, const gate_case *gc)
{
	model_diff d = {0};
	if (before) {
		model_diff_build(now, before, &d);
		now->diff = &d;
		check_diff(now, before, &d);
	}
	report_gate g;
	size_t matched;
	if (check_gate(gc, &g, now, &matched)) {
		check_sarif(now);
		check_junit(now, &g, matched);
		check_json(now);
		static FILE *null;
		if (!null && !(null = fopen("/dev/null", "w")))
			abort();
		if (!report_write_md(now, null) || !report_write_html(now, null))
			abort();
	}
	now->diff = NULL;
	model_diff_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	unsigned mode = data[0], rule_bits = data[1];
	bool captures = mode & 1, baseline = mode & 16;
	reader r = {data + 2, data + size};
	gate_case gc;
	model now, before;
	bool ok = true;
	if (captures) {
		size_t cur = u32_len(&r);
		const uint8_t *cur_p = r.p;
		r.p += cur;
		size_t base = u32_len(&r);
		const uint8_t *base_p = r.p;
		r.p += base;
		gate_spec(mode >> 1 & 7, rule_bits, &r, &gc);
		ok = fzr_model(&now, cur_p, cur);
		if (baseline)
			ok = fzr_model(&before, base_p, base) && ok;
	} else {
		gate_spec(mode >> 1 & 7, rule_bits, &r, &gc);
		write_model(&now, &r);
		if (baseline)
			write_model(&before, &r);
	}
	if (ok)
		check_all(&now, baseline ? &before : NULL, &gc);
	if (baseline)
		model_free(&before);
	model_free(&now);
	return 0;
}
