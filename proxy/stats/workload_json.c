/* GET /workload and the per-collection metrics (see workload_json.h). */
#include "proxy/stats/workload_json.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/rules/rules.h"
#include "proxy/stats/query_string.h"

_Static_assert(RULE_COUNT <= 32, "a rule set per shape is a 32-bit mask");

enum { LIMIT_DEFAULT = 100, LIMIT_MAX = 100000, RULES_SLOTS = 4096, LABELS_MAX = 1000 };

/* ---- which rules fired on which shape ---- */

static struct {
	pthread_mutex_t lock;
	uint64_t hash[RULES_SLOTS]; /* 0: free */
	uint32_t rules[RULES_SLOTS];
} fired = {.lock = PTHREAD_MUTEX_INITIALIZER};

static unsigned fired_slot(uint64_t h)
{
	unsigned i = (unsigned)(h ^ (h >> 31)) & (RULES_SLOTS - 1);
	for (unsigned n = 0; n < RULES_SLOTS; n++, i = (i + 1) & (RULES_SLOTS - 1))
		if (!fired.hash[i] || fired.hash[i] == h)
			return i;
	return RULES_SLOTS;
}

void workload_rules_note(uint64_t shape_hash, unsigned rule)
{
	if (!shape_hash || rule >= RULE_COUNT)
		return;
	pthread_mutex_lock(&fired.lock);
	unsigned i = fired_slot(shape_hash);
	if (i < RULES_SLOTS) {
		fired.hash[i] = shape_hash;
		fired.rules[i] |= 1u << rule;
	}
	pthread_mutex_unlock(&fired.lock);
}

uint32_t workload_rules_of(uint64_t shape_hash)
{
	uint32_t r = 0;
	pthread_mutex_lock(&fired.lock);
	unsigned i = fired_slot(shape_hash);
	if (i < RULES_SLOTS && fired.hash[i] == shape_hash)
		r = fired.rules[i];
	pthread_mutex_unlock(&fired.lock);
	return r;
}

/* ---- the query ---- */

static bool parse_sort(const char *v, wl_sort *out)
{
	static const char *const names[] = {"total", "count", "p99", "errors", "docs", "bytes"};
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(v, names[i])) {
			*out = (wl_sort)i;
			return true;
		}
	return false;
}

static bool one_param(void *arg, const char *key, const char *value, query_store *store, char *err,
                      size_t errlen)
{
	wl_query *q = arg;
	if (!strcmp(key, "ns") || !strcmp(key, "app")) {
		const char *kept = query_keep(store, value);
		if (!kept) {
			snprintf(err, errlen, "%s: too long", key);
			return false;
		}
		*(!strcmp(key, "ns") ? &q->ns : &q->app) = kept;
		return true;
	}
	if (!strcmp(key, "sort")) {
		if (parse_sort(value, &q->sort))
			return true;
		snprintf(err, errlen, "sort: one of total, count, p99, errors, docs, bytes");
		return false;
	}
	if (!strcmp(key, "limit")) {
		if (query_limit(value, LIMIT_MAX, &q->limit))
			return true;
		snprintf(err, errlen, "limit: a number from 1 to %d", LIMIT_MAX);
		return false;
	}
	snprintf(err, errlen, "unknown parameter '%s'; /workload takes ns, app, sort, limit", key);
	return false;
}

bool workload_query_parse(const char *query, wl_query *q, char *store, size_t cap, char *err,
                          size_t errlen)
{
	memset(q, 0, sizeof(*q));
	return query_string_each(query, one_param, q, store, cap, err, errlen);
}

/* ---- merging the workers' tables ---- */

/* One shape over every worker: the first worker's entry, the others'
 * added to a copy. */
typedef struct row {
	wl_shape s;
	int64_t p99;
} row;

static void add_shape(wl_shape *to, const wl_shape *e)
{
	to->count += e->count;
	to->replies += e->replies;
	to->total_ns += e->total_ns;
	to->read_replies += e->read_replies;
	to->docs += e->docs;
	to->bytes += e->bytes;
	to->errors += e->errors;
	to->err_other += e->err_other;
	if (e->first_ns < to->first_ns)
		to->first_ns = e->first_ns;
	for (unsigned b = 0; b < WL_HIST; b++)
		to->hist[b] += e->hist[b];
	for (unsigned i = 0; i < WL_ERRS; i++) {
		if (!e->err[i].n)
			continue;
		unsigned j = 0;
		while (j < WL_ERRS && to->err[j].n && to->err[j].code != e->err[i].code)
			j++;
		if (j == WL_ERRS) {
			to->err_other += e->err[i].n;
			continue;
		}
		to->err[j].code = e->err[i].code;
		to->err[j].n += e->err[i].n;
	}
}

static bool matches(const wl_shape *e, const wl_query *q)
{
	return (!q->ns || fnmatch(q->ns, e->ns, 0) == 0) &&
	       (!q->app || fnmatch(q->app, e->app, 0) == 0);
}

static int by_key(const void *a, const void *b)
{
	const row *x = a, *y = b;
	return x->s.key < y->s.key ? -1 : x->s.key > y->s.key;
}

/* Documents returned: those of the replies read, scaled to every reply
 * (one in workload.replySample of a read's replies is read). */
static uint64_t docs_est(const wl_shape *e)
{
	if (!e->read_replies || e->read_replies >= e->replies)
		return e->docs;
	return (uint64_t)((double)e->docs * (double)e->replies / (double)e->read_replies + 0.5);
}

static wl_sort sort_by;

static uint64_t sort_value(const row *r)
{
	switch (sort_by) {
	case WL_SORT_COUNT:
		return r->s.count;
	case WL_SORT_P99:
		return (uint64_t)r->p99;
	case WL_SORT_ERRORS:
		return r->s.errors;
	case WL_SORT_DOCS:
		return docs_est(&r->s);
	case WL_SORT_BYTES:
		return r->s.bytes;
	case WL_SORT_TOTAL:
		break;
	}
	return r->s.total_ns;
}

/* Heaviest first; ties by key, so the order is stable across calls. */
static int by_sort(const void *a, const void *b)
{
	uint64_t x = sort_value(a), y = sort_value(b);
	if (x != y)
		return x > y ? -1 : 1;
	return by_key(a, b);
}

/* The rows q asks for, one per key, in q's order; *nrows set. NULL when out
 * of memory. Admin thread only (sort_by). */
static row *merged_rows(const workload *const *tabs, size_t n, const wl_query *q, size_t *nrows)
{
	size_t cap = 0, k = 0;
	for (size_t t = 0; t < n; t++)
		cap += tabs[t]->n;
	row *rows = calloc(cap ? cap : 1, sizeof(*rows));
	if (!rows)
		return NULL;
	for (size_t t = 0; t < n; t++)
		for (unsigned i = 0; i < tabs[t]->n; i++)
			if (tabs[t]->shapes[i].key && matches(&tabs[t]->shapes[i], q))
				rows[k++].s = tabs[t]->shapes[i];
	qsort(rows, k, sizeof(*rows), by_key);
	size_t m = 0;
	for (size_t i = 0; i < k; i++) {
		if (m && rows[m - 1].s.key == rows[i].s.key)
			add_shape(&rows[m - 1].s, &rows[i].s);
		else if (m != i)
			rows[m++] = rows[i];
		else
			m++;
	}
	for (size_t i = 0; i < m; i++)
		rows[i].p99 = workload_percentile(&rows[i].s, 0.99);
	sort_by = q->sort;
	qsort(rows, m, sizeof(*rows), by_sort);
	*nrows = m;
	return rows;
}

/* ---- JSON ---- */

static double ms(int64_t ns)
{
	return (double)ns / 1e6;
}

static double per_sec(uint64_t count, int64_t since_ns, int64_t now_ns)
{
	double secs = (double)(now_ns - since_ns) / 1e9;
	return secs >= 1 ? (double)count / secs : (double)count;
}

static void json_rules(text_buf *t, uint64_t shape_hash)
{
	uint32_t rules = workload_rules_of(shape_hash);
	text_str(t, ",\"rules\":[");
	bool first = true;
	for (unsigned r = 0; r < RULE_COUNT; r++)
		if (rules & (1u << r)) {
			text_str(t, first ? "" : ",");
			text_json(t, rule_name((rule_id)r));
			first = false;
		}
	text_str(t, "]");
}

static void json_shape(text_buf *t, const row *r, int64_t now_ns)
{
	const wl_shape *e = &r->s;
	text_str(t, "{\"ns\":");
	text_json(t, e->ns);
	text_str(t, ",\"command\":");
	text_json(t, e->command);
	text_str(t, ",\"app\":");
	text_json(t, e->app);
	text_printf(t, ",\"shapeHash\":\"%016llx\",\"shape\":", (unsigned long long)e->shape_hash);
	text_json(t, e->shape);
	text_printf(t,
	            ",\"count\":%llu,\"rate\":%.3f,\"replies\":%llu,\"totalMS\":%.3f,"
	            "\"meanMS\":%.3f,\"p50MS\":%.3f,\"p95MS\":%.3f,\"p99MS\":%.3f",
	            (unsigned long long)e->count, per_sec(e->count, e->first_ns, now_ns),
	            (unsigned long long)e->replies, ms((int64_t)e->total_ns),
	            e->replies ? ms((int64_t)(e->total_ns / e->replies)) : 0.0,
	            ms(workload_percentile(e, 0.50)), ms(workload_percentile(e, 0.95)), ms(r->p99));
	text_printf(t,
	            ",\"repliesRead\":%llu,\"docs\":%llu,\"docsRead\":%llu,\"bytes\":%llu,"
	            "\"errors\":%llu",
	            (unsigned long long)e->read_replies, (unsigned long long)docs_est(e),
	            (unsigned long long)e->docs, (unsigned long long)e->bytes,
	            (unsigned long long)e->errors);
	text_str(t, ",\"errorsByCode\":{");
	bool first = true;
	for (unsigned i = 0; i < WL_ERRS; i++)
		if (e->err[i].n) {
			text_printf(t, "%s\"%d\":%u", first ? "" : ",", e->err[i].code,
			            e->err[i].n);
			first = false;
		}
	if (e->err_other)
		text_printf(t, "%s\"other\":%llu", first ? "" : ",",
		            (unsigned long long)e->err_other);
	text_str(t, "}");
	json_rules(t, e->shape_hash);
	text_str(t, "}");
}

/* The collections over every worker, merged by name, those q's ns glob
 * takes. */
static void json_collections(text_buf *t, const workload *const *tabs, size_t n, const wl_query *q,
                             int64_t started, int64_t now_ns)
{
	text_str(t, ",\"collections\":[");
	bool first = true;
	for (size_t a = 0; a < n; a++)
		for (unsigned i = 0; i < tabs[a]->ncoll; i++) {
			const wl_coll *c = &tabs[a]->colls[i];
			bool seen = false; /* merged at its first worker */
			for (size_t b = 0; b < a && !seen; b++)
				for (unsigned j = 0; j < tabs[b]->ncoll && !seen; j++)
					seen = !strcmp(tabs[b]->colls[j].ns, c->ns);
			if (seen || (q->ns && fnmatch(q->ns, c->ns, 0) != 0))
				continue;
			wl_coll sum = *c;
			for (size_t b = a + 1; b < n; b++)
				for (unsigned j = 0; j < tabs[b]->ncoll; j++)
					if (!strcmp(tabs[b]->colls[j].ns, c->ns)) {
						sum.reads += tabs[b]->colls[j].reads;
						sum.writes += tabs[b]->colls[j].writes;
						sum.other += tabs[b]->colls[j].other;
					}
			if (!sum.reads && !sum.writes && !sum.other)
				continue;
			text_str(t, first ? "{\"ns\":" : ",{\"ns\":");
			text_json(t, sum.ns);
			text_printf(t,
			            ",\"reads\":%llu,\"writes\":%llu,\"other\":%llu,"
			            "\"readsPerSec\":%.3f,\"writesPerSec\":%.3f}",
			            (unsigned long long)sum.reads, (unsigned long long)sum.writes,
			            (unsigned long long)sum.other,
			            per_sec(sum.reads, started, now_ns),
			            per_sec(sum.writes, started, now_ns));
			first = false;
		}
	text_str(t, "]");
}

void workload_json(const workload *const *tabs, size_t n, const wl_query *q, int64_t now_ns,
                   text_buf *out)
{
	size_t nrows = 0;
	row *rows = merged_rows(tabs, n, q, &nrows);
	int64_t started = now_ns;
	uint64_t folded = 0, fcount = 0, ftotal = 0;
	for (size_t t = 0; t < n; t++) {
		if (tabs[t]->started_ns < started)
			started = tabs[t]->started_ns;
		folded += tabs[t]->folded;
		fcount += tabs[t]->folded_count;
		ftotal += tabs[t]->folded_total_ns;
	}
	unsigned limit = q->limit ? q->limit : LIMIT_DEFAULT;
	text_printf(out,
	            "{\"secs\":%.3f,\"shapesPerWorker\":%u,\"workers\":%zu,\"shapesListed\":%zu,"
	            "\"shapesMatched\":%zu,\"folded\":{\"shapes\":%llu,\"count\":%llu,"
	            "\"totalMS\":%.3f},\"shapes\":[",
	            (double)(now_ns - started) / 1e9, n ? tabs[0]->cap : 0, n,
	            nrows < limit ? nrows : (size_t)limit, nrows, (unsigned long long)folded,
	            (unsigned long long)fcount, ms((int64_t)ftotal));
	for (size_t i = 0; rows && i < nrows && i < limit; i++) {
		size_t mark = text_mark(out);
		if (i)
			text_str(out, ",");
		json_shape(out, &rows[i], now_ns);
		if (out->len + 4096 > out->cap) { /* no room for the rest: cut here */
			text_rewind(out, mark);
			break;
		}
	}
	text_str(out, "]");
	json_collections(out, tabs, n, q, started, now_ns);
	text_str(out, "}\n");
	free(rows);
}

/* ---- Prometheus ---- */

/* The collections with a label of their own, in the order they got it.
 * Admin thread only. */
static char labelled[LABELS_MAX][WL_NS_LEN];
static unsigned nlabelled;

/* A label value as the text format escapes it: backslash, quote and
 * newline; every other byte as it is (a name is UTF-8). */
static void prom_label(text_buf *t, const char *v)
{
	text_char(t, '"');
	for (; *v; v++)
		if (*v == '\\' || *v == '"')
			text_printf(t, "\\%c", *v);
		else if (*v == '\n')
			text_str(t, "\\n");
		else
			text_char(t, *v);
	text_char(t, '"');
}

static int label_of(const char *ns, unsigned labels)
{
	for (unsigned i = 0; i < nlabelled; i++)
		if (!strcmp(labelled[i], ns))
			return (int)i;
	if (nlabelled >= labels || nlabelled >= LABELS_MAX || !strcmp(ns, "other"))
		return -1;
	snprintf(labelled[nlabelled], WL_NS_LEN, "%s", ns);
	return (int)nlabelled++;
}

void workload_prometheus(const workload *const *tabs, size_t n, unsigned labels, text_buf *out)
{
	static uint64_t reads[LABELS_MAX + 1], writes[LABELS_MAX + 1];
	memset(reads, 0, sizeof(reads));
	memset(writes, 0, sizeof(writes));
	for (size_t t = 0; t < n; t++)
		for (unsigned i = 0; i < tabs[t]->ncoll; i++) {
			const wl_coll *c = &tabs[t]->colls[i];
			if (!c->reads && !c->writes)
				continue;
			int l = i == WL_COLL_OTHER ? -1 : label_of(c->ns, labels);
			unsigned at = l < 0 ? LABELS_MAX : (unsigned)l;
			reads[at] += c->reads;
			writes[at] += c->writes;
		}
	static const char *const names[2] = {"reads", "writes"};
	for (int k = 0; k < 2; k++) {
		const uint64_t *v = k ? writes : reads;
		text_printf(out,
		            "# HELP mongoguard_collection_%s_total %s seen per collection "
		            "(the first %u collections by name, the rest as ns=\"other\")\n"
		            "# TYPE mongoguard_collection_%s_total counter\n",
		            names[k], k ? "Writes" : "Reads", labels, names[k]);
		for (unsigned i = 0; i < nlabelled; i++) {
			text_printf(out, "mongoguard_collection_%s_total{ns=", names[k]);
			prom_label(out, labelled[i]);
			text_printf(out, "} %llu\n", (unsigned long long)v[i]);
		}
		text_printf(out, "mongoguard_collection_%s_total{ns=\"other\"} %llu\n", names[k],
		            (unsigned long long)v[LABELS_MAX]);
	}
}
