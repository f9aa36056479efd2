/* The query string of an admin endpoint (?key=value&...), read the one way
 * /findings (proxy/admin/findings_filter.c) and /workload
 * (workload_json.c) share: libevent's parser, each parameter handed to the
 * endpoint's own reader, values kept in the caller's fixed store, and a
 * `limit` as decimal digits only. */
#ifndef MG_PROXY_STATS_QUERY_STRING_H
#define MG_PROXY_STATS_QUERY_STRING_H

#include <stdbool.h>
#include <stddef.h>

/* Where values are kept: the rest of the caller's buffer. */
typedef struct query_store {
	char *p;
	size_t left;
} query_store;

/* Copies value into the store; NULL when it is full. */
const char *query_keep(query_store *s, const char *value);

/* A `limit`: decimal digits only (strtol also took "+5" and " 5"), leading
 * zeros allowed, counted without overflow; false unless 1..max. */
bool query_limit(const char *value, unsigned max, unsigned *out);

/* One parameter, for the endpoint's reader: false with err written when it
 * refuses it. */
typedef bool (*query_param_fn)(void *arg, const char *key, const char *value, query_store *s,
                               char *err, size_t errlen);

/* Calls each for every parameter of query (NULL or "": none), in order,
 * with store (cap bytes) for the values it keeps; false with err written
 * when the string does not parse or each refuses a parameter. */
bool query_string_each(const char *query, query_param_fn each, void *arg, char *store, size_t cap,
                       char *err, size_t errlen);

#endif
