/* An admin endpoint's query string (query_string.h). */
#include "proxy/stats/query_string.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

const char *query_keep(query_store *s, const char *value)
{
	size_t n = strlen(value) + 1;
	if (n > s->left)
		return NULL;
	memcpy(s->p, value, n);
	const char *kept = s->p;
	s->p += n;
	s->left -= n;
	return kept;
}

bool query_limit(const char *value, unsigned max, unsigned *out)
{
	unsigned long n = 0;
	const char *d = value;
	for (; *d >= '0' && *d <= '9'; d++)
		if (n <= max)
			n = n * 10 + (unsigned long)(*d - '0');
	if (!*value || *d || n < 1 || n > max)
		return false;
	*out = (unsigned)n;
	return true;
}

bool query_string_each(const char *query, query_param_fn each, void *arg, char *store, size_t cap,
                       char *err, size_t errlen)
{
	if (!query || !*query)
		return true;
	struct evkeyvalq kvs;
	kvs.tqh_first = NULL;
	kvs.tqh_last = &kvs.tqh_first;
	if (evhttp_parse_query_str(query, &kvs) != 0) {
		snprintf(err, errlen, "the query string does not parse");
		evhttp_clear_headers(&kvs);
		return false;
	}
	bool ok = true;
	query_store s = {store, cap};
	for (struct evkeyval *kv = kvs.tqh_first; ok && kv; kv = kv->next.tqe_next)
		ok = each(arg, kv->key, kv->value, &s, err, errlen);
	evhttp_clear_headers(&kvs);
	return ok;
}
