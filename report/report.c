/* The report subcommand: arguments, the reader loop over files, the
 * progress bar, the writers (report.h). */
#include "report/report.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/capture.h"
#include "report/aggregate.h"
#include "report/live.h"

typedef struct mapped {
	const uint8_t *p;
	size_t len;
	int fd;
} mapped;

static bool map_file(const char *path, mapped *mf, char *err, size_t errlen)
{
	struct stat sb;
	mf->fd = open(path, O_RDONLY);
	if (mf->fd < 0 || fstat(mf->fd, &sb) != 0) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		if (mf->fd >= 0)
			close(mf->fd);
		return false;
	}
	mf->len = (size_t)sb.st_size;
	mf->p = NULL;
	if (mf->len) {
		void *p = mmap(NULL, mf->len, PROT_READ, MAP_PRIVATE, mf->fd, 0);
		if (p == MAP_FAILED) {
			snprintf(err, errlen, "cannot map %s: %s", path, strerror(errno));
			close(mf->fd);
			return false;
		}
		mf->p = p;
		madvise(p, mf->len, MADV_SEQUENTIAL);
	}
	return true;
}

static void unmap_file(mapped *mf)
{
	if (mf->p)
		munmap((void *)mf->p, mf->len);
	close(mf->fd);
}

typedef struct progress {
	bool on;
	uint64_t total, done;
	int shown; /* percent */
} progress;

static void progress_show(progress *pg, uint64_t done)
{
	if (!pg->on)
		return;
	int pct = pg->total ? (int)(done * 100 / pg->total) : 100;
	if (pct == pg->shown)
		return;
	pg->shown = pct;
	char bar[41];
	int fill = pct * 40 / 100;
	for (int i = 0; i < 40; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[40] = '\0';
	fprintf(stderr, "\rmongoguard report: [%s] %3d%% of %.1f MiB", bar, pct,
	        (double)pg->total / (1 << 20));
	if (pct == 100)
		fputc('\n', stderr);
}

/* One file, one pass. The header must come first and be a version this
 * reader knows; a record cut short ends the file, and where is noted. */
static void read_file(aggregator *a, model_input *in, int pass, progress *pg, uint64_t base,
                      live_ctx *live)
{
	mapped mf;
	char err[512];
	if (in->refused)
		return;
	if (!map_file(in->path, &mf, err, sizeof err)) {
		in->refused = true;
		snprintf(in->problem, sizeof in->problem, "%s", err);
		return;
	}
	size_t off = 0;
	bson_t rec;
	bool first = true;
	for (;;) {
		size_t at = off;
		capture_next_status st = capture_next(mf.p, mf.len, &off, &rec);
		if (st == CAPTURE_NEXT_END)
			break;
		if (st != CAPTURE_NEXT_OK) {
			in->truncated = true;
			in->stopped_at = at;
			snprintf(in->problem, sizeof in->problem,
			         "%s at byte %zu of %zu: read the %llu records before it",
			         st == CAPTURE_NEXT_TRUNCATED ? "last record cut short"
			                                      : "not a BSON document",
			         at, mf.len, (unsigned long long)in->records);
			break;
		}
		if (first) {
			first = false;
			if (!capture_check_header(&rec, err, sizeof err)) {
				in->refused = true;
				snprintf(in->problem, sizeof in->problem, "%s", err);
				break;
			}
			if (pass == 1) {
				bson_iter_t it;
				if (bson_iter_init_find(&it, &rec, "mongoguard") &&
				    BSON_ITER_HOLDS_UTF8(&it))
					snprintf(in->mongoguard, sizeof in->mongoguard, "%s",
					         bson_iter_utf8(&it, NULL));
				if (bson_iter_init_find(&it, &rec, "redaction") &&
				    BSON_ITER_HOLDS_UTF8(&it))
					snprintf(in->redaction, sizeof in->redaction, "%s",
					         bson_iter_utf8(&it, NULL));
				in->no_value_hashes = capture_header_hashes_left_out(&rec);
				if (bson_iter_init_find(&it, &rec, "startUs"))
					in->start_us = bson_iter_as_int64(&it);
			}
		}
		if (pass == 2)
			in->records++;
		if (pass == 1 && live)
			live_note_record(live, &rec);
		aggregator_record(a, pass, &rec);
		if (pass == 2 && (in->records & 4095) == 0)
			progress_show(pg, base + off);
	}
	unmap_file(&mf);
}

static int cmp_inputs(const void *x, const void *y)
{
	const model_input *a = x, *b = y;
	if (a->start_us != b->start_us)
		return a->start_us < b->start_us ? -1 : 1;
	return strcmp(a->path, b->path);
}

static bool write_out(const char *path, const model *m, bool (*fn)(const model *, FILE *),
                      char *err, size_t errlen)
{
	FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
	if (!f) {
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
		return false;
	}
	bool ok = fn(m, f);
	if (f != stdout)
		ok = fclose(f) == 0 && ok;
	if (!ok)
		snprintf(err, errlen, "writing %s failed", path);
	return ok;
}

/* Reads inputs (both passes) into m. False with err set when nothing
 * could be read at all; *bad: inputs refused. */
static bool build_model(const report_options *o, const char *const *inputs, size_t n,
                        const char *indexes_from, bool show_progress, model *m,
                        unsigned long long *records, size_t *bad, char *err, size_t errlen)
{
	memset(m, 0, sizeof *m);
	m->noverrides = o->noverrides < MODEL_OVERRIDES ? o->noverrides : MODEL_OVERRIDES;
	for (size_t i = 0; i < m->noverrides; i++)
		m->overrides[i] = o->overrides[i];
	m->inputs = calloc(n ? n : 1, sizeof *m->inputs);
	aggregator *a = m->inputs ? aggregator_new(m) : NULL;
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	m->ninputs = n;
	progress pg = {.on = show_progress, .shown = -1};
	for (size_t i = 0; i < n; i++) {
		struct stat sb;
		snprintf(m->inputs[i].path, sizeof m->inputs[i].path, "%s", inputs[i]);
		if (stat(inputs[i], &sb) == 0)
			pg.total += (uint64_t)sb.st_size;
	}
	live_ctx *live = NULL;
	if (indexes_from) {
		m->indexes_live = true;
		snprintf(m->indexes_from, sizeof m->indexes_from, "%s", indexes_from);
		if (!(live = live_new(indexes_from, err, errlen))) {
			aggregator_free(a);
			return false;
		}
	}
	for (size_t i = 0; i < m->ninputs; i++) {
		aggregator_set_input(a, i);
		read_file(a, &m->inputs[i], 1, &pg, 0, live);
	}
	qsort(m->inputs, m->ninputs, sizeof *m->inputs, cmp_inputs);
	if (live && !live_fetch(live, a, err, errlen)) {
		live_free(live);
		aggregator_free(a);
		return false;
	}
	uint64_t base = 0;
	m->redacted = true;
	for (size_t i = 0; i < m->ninputs; i++) {
		struct stat sb;
		aggregator_set_input(a, i);
		read_file(a, &m->inputs[i], 2, &pg, base, NULL);
		if (stat(m->inputs[i].path, &sb) == 0)
			base += (uint64_t)sb.st_size;
		if (!m->inputs[i].refused && strcmp(m->inputs[i].redaction, "shapes") != 0)
			m->redacted = false;
		m->no_value_hashes |= !m->inputs[i].refused && m->inputs[i].no_value_hashes;
		*records += m->inputs[i].records;
	}
	progress_show(&pg, pg.total);
	aggregator_finish(a);
	if (live)
		live_apply(live, m);
	*bad = 0;
	for (size_t i = 0; i < m->ninputs; i++) {
		const model_input *in = &m->inputs[i];
		if (in->refused || in->truncated)
			fprintf(stderr, "mongoguard report: %s: %s\n", in->path, in->problem);
		*bad += in->refused;
	}
	live_free(live);
	aggregator_free(a);
	return true;
}

static bool junit_out(const model *m, FILE *f);
static const report_gate *junit_gate; /* for junit_out: one report per process */

/* Every output named, in turn; false with err at the first that fails. */
static bool write_all(const report_options *o, const model *m, const report_gate *g, char *err,
                      size_t errlen)
{
	junit_gate = g;
	bool ok = true;
	if (o->html)
		ok = write_out(o->html, m, report_write_html, err, errlen);
	if (ok && o->json)
		ok = write_out(o->json, m, report_write_json, err, errlen);
	if (ok && o->md)
		ok = write_out(o->md, m, report_write_md, err, errlen);
	if (ok && o->sarif)
		ok = write_out(o->sarif, m, report_write_sarif, err, errlen);
	if (ok && o->junit)
		ok = write_out(o->junit, m, junit_out, err, errlen);
	return ok;
}

static bool junit_out(const model *m, FILE *f)
{
	return report_write_junit(m, junit_gate, f);
}

/* One line on stderr: what was read and found, in the report's words (a
 * finding is a rule on a shape; its occurrences, the requests). */
static void summary_line(const model *m, unsigned long long records, bool baseline)
{
	uint64_t occurrences = 0;
	for (int r = 0; r < RULE_COUNT; r++)
		occurrences += m->rule_totals[r];
	fprintf(stderr,
	        "mongoguard report: %llu record%s, %llu request%s (%llu driver and shell "
	        "housekeeping), %zu query shape%s, %zu finding%s (rule and shape) in %llu "
	        "occurrence%s%s\n",
	        records, records == 1 ? "" : "s", (unsigned long long)m->requests,
	        m->requests == 1 ? "" : "s", (unsigned long long)m->housekeeping_requests,
	        m->nshapes, m->nshapes == 1 ? "" : "s", m->nfindings, m->nfindings == 1 ? "" : "s",
	        (unsigned long long)occurrences, occurrences == 1 ? "" : "s",
	        baseline ? " (and a baseline)" : "");
}

bool report_run_gated(const report_options *o, unsigned long long *records, size_t *matched,
                      char *err, size_t errlen)
{
	model m, before;
	model_diff d = {0};
	report_gate g = {0};
	size_t bad = 0, bad_before = 0;
	unsigned long long before_records = 0;
	*matched = 0;
	if (o->fail_on && !report_gate_parse(o->fail_on, &g, err, errlen))
		return false;
	if (!build_model(o, o->inputs, o->ninputs, o->indexes_from, o->progress, &m, records, &bad,
	                 err, errlen))
		return false;
	memset(&before, 0, sizeof before);
	if (o->nbaseline) {
		if (!build_model(o, o->baseline, o->nbaseline, NULL, false, &before,
		                 &before_records, &bad_before, err, errlen)) {
			model_free(&m);
			return false;
		}
		model_diff_build(&m, &before, &d);
		m.diff = &d;
	}
	for (size_t i = 0; i < m.nfindings; i++)
		*matched += report_gate_matches(&g, &m, i);
	bool ok = write_all(o, &m, &g, err, errlen);
	bad += bad_before;
	if (ok && bad)
		snprintf(err, errlen, "%zu of %zu inputs refused", bad, m.ninputs + before.ninputs);
	if (!o->quiet)
		summary_line(&m, *records, o->nbaseline > 0);
	if (!o->quiet && m.no_value_hashes)
		fprintf(stderr, "mongoguard report: " REPORT_NO_VALUE_HASHES "\n");
	model_diff_free(&d);
	model_free(&before);
	model_free(&m);
	return ok && !bad;
}

bool report_run(const report_options *o, unsigned long long *records, char *err, size_t errlen)
{
	size_t matched;
	return report_run_gated(o, records, &matched, err, errlen);
}

static void report_usage(FILE *f)
{
	fputs("Usage: mongoguard report CAPTURE... [--baseline CAPTURE]... [--fail-on SPEC]\n"
	      "                         [--rule RULE.PARAMETER=VALUE|RULE=off|log]...\n"
	      "                         [--indexes-from URI] [-o report.html] [--json FILE]\n"
	      "                         [--md FILE] [--sarif FILE] [--junit FILE]\n"
	      "                         [--progress|--no-progress]\n"
	      "\n"
	      "Reads captures (capture files, or capture directories: capture.dir, --capture\n"
	      "DIR), reruns the analyzers over every captured request and writes a\n"
	      "design-review report. With no output named, writes report.html in the\n"
	      "current directory. '-' is stdout.\n"
	      "  --baseline CAPTURE  (repeatable) compare with an earlier capture: new and\n"
	      "                      gone shapes and findings, p95 latency regressions\n"
	      "  --fail-on SPEC      exit 1 when a finding matches: new (not in the baseline),\n"
	      "                      any, or RULE[,RULE] (new ones with a baseline); else 0\n"
	      "  --sarif FILE        SARIF 2.1.0, one result per finding\n"
	      "  --junit FILE        JUnit XML, a testcase per shape, a failure per matched\n"
	      "                      finding\n"
	      "  --rule RULE.PARAMETER=VALUE  (repeatable) judge with this parameter instead\n"
	      "                      of the capture's (the rules and their parameters:\n"
	      "                      mongoguard --help); RULE=off or RULE=log turns a rule\n"
	      "                      off or on\n"
	      "  --indexes-from URI  judge against the live indexes (and $indexStats) of URI\n"
	      "                      instead of the index lists recorded in the capture\n"
	      "Exit status: 0; 1 when an input cannot be read (missing, unreadable, cut\n"
	      "short, a format version this mongoguard does not know) or --fail-on matched;\n"
	      "2 for a bad command line: an unknown flag, a bad --fail-on or --rule, or a\n"
	      "name that is not a capture.\n",
	      f);
}

typedef struct cli {
	report_options o;
	const char **baseline;
	size_t nbaseline;
	model_override overrides[MODEL_OVERRIDES];
	int force; /* --progress / --no-progress, -1: neither */
} cli;

/* One --rule: a later one for the same rule and parameter replaces it. */
static bool add_override(cli *c, const char *spec)
{
	model_override o;
	char err[1024];
	if (!report_rule_parse(spec, &o, err, sizeof err)) {
		fprintf(stderr, "mongoguard report: %s\n", err);
		return false;
	}
	size_t i = 0;
	while (i < c->o.noverrides &&
	       (c->overrides[i].rule != o.rule || c->overrides[i].param != o.param))
		i++;
	if (i == MODEL_OVERRIDES) {
		fprintf(stderr, "mongoguard report: --rule: at most %d of them\n", MODEL_OVERRIDES);
		return false;
	}
	c->overrides[i] = o;
	if (i == c->o.noverrides)
		c->o.noverrides++;
	c->o.overrides = c->overrides;
	return true;
}

/* The options; -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, cli *c)
{
	static const struct option opts[] = {
	    {"indexes-from", required_argument, NULL, 'I'},
	    {"output", required_argument, NULL, 'o'},
	    {"json", required_argument, NULL, 'j'},
	    {"md", required_argument, NULL, 'm'},
	    {"sarif", required_argument, NULL, 's'},
	    {"junit", required_argument, NULL, 'u'},
	    {"baseline", required_argument, NULL, 'b'},
	    {"fail-on", required_argument, NULL, 'f'},
	    {"rule", required_argument, NULL, 'r'},
	    {"progress", no_argument, NULL, 'p'},
	    {"no-progress", no_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int ch;
	c->force = -1;
	c->baseline = calloc((size_t)argc, sizeof *c->baseline);
	if (!c->baseline)
		return 1;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'I':
			c->o.indexes_from = optarg;
			break;
		case 'o':
			c->o.html = optarg;
			break;
		case 'j':
			c->o.json = optarg;
			break;
		case 'm':
			c->o.md = optarg;
			break;
		case 's':
			c->o.sarif = optarg;
			break;
		case 'u':
			c->o.junit = optarg;
			break;
		case 'b':
			c->baseline[c->nbaseline++] = optarg;
			break;
		case 'f':
			c->o.fail_on = optarg;
			break;
		case 'r':
			if (!add_override(c, optarg))
				return 2;
			break;
		case 'p':
			c->force = 1;
			break;
		case 'P':
			c->force = 0;
			break;
		case 'h':
			report_usage(stdout);
			return 0;
		default:
			report_usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "mongoguard report: name at least one capture file or directory\n");
		report_usage(stderr);
		return 2;
	}
	report_gate g;
	char err[512];
	if (c->o.fail_on && !report_gate_parse(c->o.fail_on, &g, err, sizeof err)) {
		fprintf(stderr, "mongoguard report: %s\n", err);
		return 2;
	}
	return -1;
}

int report_main(int argc, char **argv)
{
	cli c = {0};
	int st = parse_args(argc, argv, &c);
	char **in = NULL, **base = NULL;
	size_t nin = 0, nbase = 0;
	char err[1024] = "";
	bool unreadable = false;
	if (st < 0 &&
	    (!report_inputs_expand((const char *const *)argv + optind, (size_t)(argc - optind), &in,
	                           &nin, &unreadable, err, sizeof err) ||
	     !report_inputs_expand(c.baseline, c.nbaseline, &base, &nbase, &unreadable, err,
	                           sizeof err))) {
		fprintf(stderr, "mongoguard report: %s\n", err);
		/* an input that cannot be read is a failed input, as one cut short
		 * is; a name that is no capture is a mistake on the command line */
		st = unreadable ? 1 : 2;
	}
	if (st >= 0) {
		report_inputs_free(in, nin);
		free(c.baseline);
		return st;
	}
	report_options *o = &c.o;
	o->inputs = (const char *const *)in;
	o->ninputs = nin;
	o->baseline = (const char *const *)base;
	o->nbaseline = nbase;
	if (!o->html && !o->json && !o->md && !o->sarif && !o->junit)
		o->html = "report.html";
	uint64_t total = 0;
	for (size_t i = 0; i < o->ninputs; i++) {
		struct stat sb;
		if (stat(o->inputs[i], &sb) == 0)
			total += (uint64_t)sb.st_size;
	}
	/* A bar is worth drawing for inputs that take a moment. */
	o->progress = c.force >= 0 ? c.force == 1 : isatty(2) && total > (8u << 20);
	unsigned long long records = 0;
	size_t matched = 0;
	st = 0;
	if (!report_run_gated(o, &records, &matched, err, sizeof err)) {
		fprintf(stderr, "mongoguard report: %s\n", err);
		st = 1;
	} else if (matched) {
		fprintf(stderr, "mongoguard report: --fail-on %s matched %zu finding%s\n",
		        o->fail_on, matched, matched == 1 ? "" : "s");
		st = 1;
	}
	report_inputs_free(in, nin);
	report_inputs_free(base, nbase);
	free(c.baseline);
	return st;
}
