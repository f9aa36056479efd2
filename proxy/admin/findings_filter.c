/* /findings' query string (admin_filter_parse, admin.h). */
#define _GNU_SOURCE /* strptime, timegm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyzers/rules/rules.h"
#include "proxy/admin/admin.h"
#include "proxy/stats/query_string.h"

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

static bool one_param(void *arg, const char *key, const char *value, query_store *store, char *err,
                      size_t errlen)
{
	admin_filter *f = arg;
	const char **slot = !strcmp(key, "rule")  ? &f->rule
	                    : !strcmp(key, "ns")  ? &f->ns
	                    : !strcmp(key, "app") ? &f->app
	                                          : NULL;
	if (slot) {
		if (!strcmp(key, "rule") && rule_from_name(value) < 0) {
			snprintf(err, errlen, "rule: no rule is called '%s'", value);
			return false;
		}
		*slot = query_keep(store, value);
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
		if (query_limit(value, LIMIT_MAX, &f->limit))
			return true;
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
	return query_string_each(query, one_param, f, store, cap, err, errlen);
}
