/* /findings' query string (admin_filter_parse, admin.h). */
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyzers/rules/rules.h"
#include "proxy/admin/admin.h"

enum { LIMIT_MAX = 1000000 };

/* Seconds since the epoch, or an ISO-8601 UTC time as the findings carry
 * it ("2026-12-02T13:53:45Z", fractions of a second ignored). */
static bool parse_since(const char *s, int64_t *out)
{
	char *end;
	long long n = strtoll(s, &end, 10);
	if (*s && !*end && n >= 0) {
		*out = n;
		return true;
	}
	struct tm tm = {0};
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		return false;
	if (*rest == '.')
		for (rest++; *rest >= '0' && *rest <= '9'; rest++)
			;
	if (strcmp(rest, "Z") != 0 && *rest != '\0')
		return false;
	*out = (int64_t)timegm(&tm);
	return true;
}

/* Copies value into the store; NULL when it is full. */
static const char *keep(const char *value, char **store, size_t *left)
{
	size_t n = strlen(value) + 1;
	if (n > *left)
		return NULL;
	memcpy(*store, value, n);
	const char *kept = *store;
	*store += n;
	*left -= n;
	return kept;
}

static bool one_param(const char *key, const char *value, admin_filter *f, char **store,
                      size_t *left, char *err, size_t errlen)
{
	const char **slot = !strcmp(key, "rule")  ? &f->rule
	                    : !strcmp(key, "ns")  ? &f->ns
	                    : !strcmp(key, "app") ? &f->app
	                                          : NULL;
	if (slot) {
		if (!strcmp(key, "rule") && rule_from_name(value) < 0) {
			snprintf(err, errlen, "rule: no rule is called '%s'", value);
			return false;
		}
		*slot = keep(value, store, left);
		if (!*slot)
			snprintf(err, errlen, "%s: too long", key);
		return *slot != NULL;
	}
	if (!strcmp(key, "since")) {
		if (parse_since(value, &f->since))
			return true;
		snprintf(err, errlen,
		         "since: seconds since the epoch, or a UTC time like 2026-12-02T13:53:45Z");
		return false;
	}
	if (!strcmp(key, "limit")) {
		/* decimal digits only (strtol also took "+5" and " 5"), leading
		 * zeros allowed, counted without overflow */
		long n = 0;
		const char *d = value;
		for (; *d >= '0' && *d <= '9'; d++)
			if (n <= LIMIT_MAX)
				n = n * 10 + (*d - '0');
		if (*value && !*d && n >= 1 && n <= LIMIT_MAX) {
			f->limit = (unsigned)n;
			return true;
		}
		snprintf(err, errlen, "limit: a number from 1 to %d", LIMIT_MAX);
		return false;
	}
	snprintf(err, errlen, "unknown parameter '%s'; /findings takes rule, ns, app, since, limit",
	         key);
	return false;
}

bool admin_filter_parse(const char *query, admin_filter *f, char *store, size_t cap, char *err,
                        size_t errlen)
{
	memset(f, 0, sizeof(*f));
	if (!query || !*query)
		return true;
	struct evkeyvalq q;
	q.tqh_first = NULL;
	q.tqh_last = &q.tqh_first;
	if (evhttp_parse_query_str(query, &q) != 0) {
		snprintf(err, errlen, "the query string does not parse");
		evhttp_clear_headers(&q);
		return false;
	}
	bool ok = true;
	size_t left = cap;
	for (struct evkeyval *kv = q.tqh_first; ok && kv; kv = kv->next.tqe_next)
		ok = one_param(kv->key, kv->value, f, &store, &left, err, errlen);
	evhttp_clear_headers(&q);
	return ok;
}
