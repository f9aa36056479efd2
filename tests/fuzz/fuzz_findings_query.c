/* libFuzzer target: the admin endpoint's /findings query string
 * (?rule=&ns=&app=&since=&limit=; admin_filter_parse in
 * proxy/admin/findings_filter.c) and what the filter then selects from the
 * recent findings (finding_sink_recent_json, proxy/sinks/finding_log.c).
 *
 * The input: one byte choosing the size of the store the parsed strings
 * are kept in (admin.c's 1024 bytes, or 1 to 255), then the query string,
 * up to a NUL. The query, the store and the error buffer are exact-size
 * heap copies, so a read or write past any of them is an ASan error.
 *
 * Checked:
 *   - a refusal says why (a terminated, non-empty message);
 *   - what is accepted is in bounds: rule a rule id, ns and app strings
 *     inside the store, limit 0 (none) or 1 to 1,000,000;
 *   - accepted values round-trip: the filter written back as a query
 *     (every byte percent-encoded, since as a UTC time or a number) parses
 *     to the same filter;
 *   - a query of plain pairs (letters, digits, ._*:- only) is accepted or
 *     refused as a reading of its own here says, with the same values;
 *   - the filter on a ring of 8 recent findings (12 written): a strict JSON
 *     array (json_check.h) of exactly the findings it matches, at most
 *     limit of them, the newest, newest last. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyzers/rules/rules.h"
#include "proxy/admin/admin.h"
#include "proxy/sinks/finding_log.h"
#include "tests/fuzz/json_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { LIMIT_MAX = 1000000, RING = 8, WRITTEN = 12, OUT_CAP = 256 * 1024 };

/* ---- the ring /findings reads ---- */

static const char *const ring_ns[] = {"shop.users", "shop.orders", "crm.people"};
static const char *const ring_app[] = {"web", "batch-7"};

typedef struct recent_row {
	rule_id rule;
	const char *ns, *app;
	char detail[16];
} recent_row;

static finding_sink *sink;
static recent_row rows[WRITTEN];
static int64_t written_from, written_to; /* time() around the writing */

static void setup(void)
{
	if (sink)
		return;
	sink = finding_sink_new(NULL, NULL, RING);
	if (!sink)
		abort();
	written_from = (int64_t)time(NULL);
	for (int i = 0; i < WRITTEN; i++) {
		recent_row *r = &rows[i];
		r->rule = (rule_id)(i % 3 == 2 ? RULE_COLLECTION_SCAN : i % 3);
		r->ns = ring_ns[i % 3];
		r->app = ring_app[i % 2];
		snprintf(r->detail, sizeof r->detail, "d%02d", i);
		finding f = {.rule = r->rule,
		             .action = RULE_LOG,
		             .ns = r->ns,
		             .command = "find",
		             .shape_hash = (uint64_t)i,
		             .shape = "{\"filter\":{\"a\":\"?\"}}",
		             .suggestion = "an index",
		             .detail = r->detail,
		             .app_name = r->app,
		             .client = "127.0.0.1:1"};
		server_log_finding(sink, &f); /* no log open: the ring alone */
	}
	written_to = (int64_t)time(NULL);
}

static bool matches(const recent_row *r, const admin_filter *f, int64_t t)
{
	return (!f->rule || !strcmp(f->rule, rule_name(r->rule))) &&
	       (!f->ns || fnmatch(f->ns, r->ns, 0) == 0) &&
	       (!f->app || fnmatch(f->app, r->app, 0) == 0) && t >= f->since;
}

static void check_selection(const admin_filter *f)
{
	if (f->since > written_from && f->since <= written_to)
		return; /* the second they were written in is not known here */
	static char out[OUT_CAP];
	text_buf t;
	text_init_reserve(&t, out, sizeof out, 16); /* as admin.c's reply_rendered */
	finding_query q = {f->rule, f->ns, f->app, f->since, f->limit};
	finding_sink_recent_json(sink, &q, &t);
	json_must_check("/findings", out, t.len, 0);
	/* the newest that match, up to limit, newest last */
	const char *want[RING];
	size_t n = 0;
	for (int i = WRITTEN - 1; i >= WRITTEN - RING && (!f->limit || n < f->limit); i--)
		if (matches(&rows[i], f, written_from))
			want[n++] = rows[i].detail;
	const char *p = out;
	size_t got = 0;
	for (char key[40]; (p = strstr(p, "{\"t\":\"")); p++, got++) {
		if (got >= n)
			abort(); /* more than it matches, or than limit */
		snprintf(key, sizeof key, "\"detail\":\"%s\"", want[n - 1 - got]);
		const char *next = strstr(p + 1, "{\"t\":\"");
		const char *d = strstr(p, key);
		if (!d || (next && d > next)) {
			fprintf(stderr, "/findings: entry %zu is not %s\n%s\n", got, key, out);
			abort();
		}
	}
	if (got != n) {
		fprintf(stderr, "/findings: %zu entries, %zu match\n%s\n", got, n, out);
		abort();
	}
}

/* ---- the filter written back ---- */

static void pct(char *out, size_t cap, size_t *len, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*len + 4 < cap)
			*len += (size_t)snprintf(out + *len, cap - *len, "%%%c%c", hex[*p >> 4],
			                         hex[*p & 15]);
}

static size_t encode(const admin_filter *f, char *out, size_t cap)
{
	size_t len = 0;
	const char *names[3] = {"rule", "ns", "app"};
	const char *vals[3] = {f->rule, f->ns, f->app};
	out[0] = '\0';
	for (int i = 0; i < 3; i++) {
		if (!vals[i])
			continue;
		len += (size_t)snprintf(out + len, cap - len, "%s%s=", len ? "&" : "", names[i]);
		pct(out, cap, &len, vals[i]);
	}
	if (f->since) {
		struct tm tm;
		time_t s = (time_t)f->since;
		char when[64];
		if (f->since < 0 && gmtime_r(&s, &tm) && tm.tm_year + 1900 >= 0 &&
		    tm.tm_year + 1900 <= 9999)
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
		else
			snprintf(when, sizeof when, "%lld", (long long)f->since);
		len += (size_t)snprintf(out + len, cap - len, "%ssince=%s", len ? "&" : "", when);
	}
	if (f->limit)
		len +=
		    (size_t)snprintf(out + len, cap - len, "%slimit=%u", len ? "&" : "", f->limit);
	return len;
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool same(const admin_filter *a, const admin_filter *b)
{
	return same_str(a->rule, b->rule) && same_str(a->ns, b->ns) && same_str(a->app, b->app) &&
	       a->since == b->since && a->limit == b->limit;
}

/* ---- plain pairs, read here ---- */

/* -1: not plain pairs (or a since other than digits): no opinion; 0:
 * refused; 1: accepted as *f says (strings into store). */
static int plain_reading(const char *q, admin_filter *f, char *store, size_t cap)
{
	memset(f, 0, sizeof *f);
	if (!*q)
		return 1;
	for (const char *p = q; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._*:-&=",
		            *p))
			return -1;
	size_t used = 0;
	int answer = 1;
	for (const char *p = q; *p;) {
		size_t n = strcspn(p, "&");
		const char *eq = memchr(p, '=', n);
		if (!n || !eq || eq == p || memchr(eq + 1, '=', n - (size_t)(eq + 1 - p)))
			return -1; /* empty pieces, a key alone: libevent's call */
		size_t kn = (size_t)(eq - p), vn = n - kn - 1;
		char key[16] = "", val[2048];
		if (kn < sizeof key)
			memcpy(key, p, kn);
		if (vn >= sizeof val)
			return -1;
		memcpy(val, eq + 1, vn);
		val[vn] = '\0';
		p += n + (p[n] == '&');
		if (answer == 0)
			continue; /* refused already; the rest may still be no opinion */
		const char **slot = !strcmp(key, "rule")  ? &f->rule
		                    : !strcmp(key, "ns")  ? &f->ns
		                    : !strcmp(key, "app") ? &f->app
		                                          : NULL;
		if (slot) {
			if (slot == &f->rule && rule_from_name(val) < 0) {
				answer = 0;
				continue;
			}
			if (used + vn + 1 > cap) {
				answer = 0;
				continue;
			}
			memcpy(store + used, val, vn + 1);
			*slot = store + used;
			used += vn + 1;
		} else if (!strcmp(key, "since")) {
			if (!vn || strspn(val, "0123456789") != vn || vn > 18)
				return -1;
			f->since = strtoll(val, NULL, 10);
		} else if (!strcmp(key, "limit")) {
			/* digits only, leading zeros allowed (the value, not its length,
			 * is bounded) */
			long n2 = vn && strspn(val, "0123456789") == vn ? 0 : -1;
			for (size_t i = 0; n2 >= 0 && i < vn && n2 <= LIMIT_MAX; i++)
				n2 = n2 * 10 + (val[i] - '0');
			if (n2 < 1 || n2 > LIMIT_MAX)
				answer = 0;
			else
				f->limit = (unsigned)n2;
		} else {
			answer = 0;
		}
	}
	return answer;
}

/* ---- the target ---- */

static void check_accepted(const admin_filter *f, const char *store, size_t cap)
{
	if (f->rule && rule_from_name(f->rule) < 0)
		abort();
	const char *strs[2] = {f->ns, f->app};
	for (int i = 0; i < 2; i++) {
		const char *s = strs[i];
		if (!s)
			continue;
		if (s < store || s >= store + cap ||
		    strnlen(s, (size_t)(store + cap - s)) == (size_t)(store + cap - s))
			abort(); /* a string outside the store, or not terminated in it */
	}
	if (f->limit > LIMIT_MAX)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	setup();
	size_t cap = data[0] ? data[0] : 1024; /* 0: admin.c's store */
	size_t qn = strnlen((const char *)data + 1, size - 1);
	char *query = malloc(qn + 1), *store = malloc(cap), *err = malloc(300);
	if (!query || !store || !err)
		abort();
	memcpy(query, data + 1, qn);
	query[qn] = '\0';
	memset(err, 'x', 300);
	admin_filter f;
	bool ok = admin_filter_parse(query, &f, store, cap, err, 300);
	if (!ok && (err[0] == '\0' || strnlen(err, 300) == 300)) {
		fprintf(stderr, "refused without a reason: \"%s\"\n", query);
		abort();
	}
	admin_filter mine;
	char *mine_store = malloc(cap);
	if (!mine_store)
		abort();
	int plain = plain_reading(query, &mine, mine_store, cap);
	if (plain >= 0 && (plain == 1) != ok) {
		fprintf(stderr, "\"%s\": %s, expected %s (%s)\n", query,
		        ok ? "accepted" : "refused", ok ? "refused" : "accepted", ok ? "" : err);
		abort();
	}
	if (ok) {
		check_accepted(&f, store, cap);
		if (plain == 1 && !same(&f, &mine)) {
			fprintf(stderr, "\"%s\": read differently\n", query);
			abort();
		}
		/* written back, it reads the same (into a store as large as the
		 * query needs: percent-encoding grows the query, not the values) */
		static char again[4 * 1024 * 3 + 256];
		encode(&f, again, sizeof again);
		admin_filter g;
		char *store2 = malloc(cap), err2[300];
		if (!store2)
			abort();
		if (!admin_filter_parse(again, &g, store2, cap, err2, sizeof err2) ||
		    !same(&f, &g)) {
			fprintf(stderr,
			        "\"%s\" accepted, but written back as \"%s\" it is not the same\n",
			        query, again);
			abort();
		}
		free(store2);
		check_selection(&f);
	}
	free(mine_store);
	free(query);
	free(store);
	free(err);
	return 0;
}
