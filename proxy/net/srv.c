/* mongodb+srv:// resolution (see srv.h). */
#include "proxy/net/srv.h"

#include <arpa/nameser.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char SRV_SCHEME[] = "mongodb+srv://";

bool srv_is_srv_uri(const char *uri)
{
	return strncasecmp(uri, SRV_SCHEME, sizeof(SRV_SCHEME) - 1) == 0;
}

static size_t labels(const char *name)
{
	size_t n = 1;
	for (const char *p = name; *p; p++)
		n += *p == '.';
	return n;
}

bool srv_target_allowed(const char *srv_host, const char *target)
{
	size_t nl = labels(srv_host);
	const char *domain = srv_host;
	if (nl >= 3)
		domain = strchr(srv_host, '.') + 1;
	else if (labels(target) <= nl)
		return false;
	size_t dl = strlen(domain), tl = strlen(target);
	/* "x.example.com" shares "example.com"; "xexample.com" does not */
	return tl > dl + 1 && target[tl - dl - 1] == '.' &&
	       strcasecmp(target + tl - dl, domain) == 0;
}

/* The span of key in "key=value" (up to '=' or the end). */
static size_t key_len(const char *opt, size_t len)
{
	const char *eq = memchr(opt, '=', len);
	return eq ? (size_t)(eq - opt) : len;
}

/* opts ("a=1&b=2", may be empty) sets key. */
static bool has_key(const char *opts, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = opts; *p;) {
		size_t len = strcspn(p, "&");
		if (key_len(p, len) == kl && strncasecmp(p, key, kl) == 0)
			return true;
		p += len + (p[len] == '&');
	}
	return false;
}

/* Appends "&"-separated opt to out; false when it does not fit. */
static bool add_opt(char *out, size_t size, size_t *used, bool *first, const char *opt, size_t len)
{
	int w = snprintf(out + *used, size - *used, "%s%.*s", *first ? "?" : "&", (int)len, opt);
	if (w < 0 || (size_t)w >= size - *used)
		return false;
	*used += (size_t)w;
	*first = false;
	return true;
}

/* The TXT record's options: each must be one of the three the spec
 * allows, well formed; those the URI sets itself are skipped. */
static bool add_txt(const char *txt, const char *uri_opts, char *out, size_t size, size_t *used,
                    bool *first, char *err, size_t errlen)
{
	static const char *allowed[] = {"authSource", "replicaSet", "loadBalanced"};
	for (const char *p = txt; *p;) {
		size_t len = strcspn(p, "&");
		size_t kl = key_len(p, len);
		bool ok = false;
		for (size_t i = 0; i < 3; i++)
			ok |= kl == strlen(allowed[i]) && strncasecmp(p, allowed[i], kl) == 0;
		if (!ok || kl == len || kl + 1 == len) {
			snprintf(err, errlen,
			         ok ? "TXT record option '%.*s' has no value"
			            : "TXT record option '%.*s' is not allowed: the seedlist spec "
			              "allows only authSource, replicaSet and loadBalanced",
			         (int)len, p);
			return false;
		}
		char key[32];
		snprintf(key, sizeof(key), "%.*s", (int)kl, p);
		if (!has_key(uri_opts, key) && !add_opt(out, size, used, first, p, len)) {
			snprintf(err, errlen, "upstream URI too long once resolved");
			return false;
		}
		p += len + (p[len] == '&');
	}
	return true;
}

/* after "scheme://": userinfo (may be empty, without '@'), the host
 * list, the path ("/db" or "") and the options ("a=1&b=2" or ""). */
typedef struct uri_parts {
	char userinfo[1024];
	char hosts[1024];
	char path[512];
	char opts[2048];
} uri_parts;

static bool split_uri(const char *uri, uri_parts *u)
{
	const char *rest = strstr(uri, "://");
	if (!rest)
		return false;
	rest += 3;
	size_t alen = strcspn(rest, "/?");
	const char *at = NULL;
	for (const char *p = rest; p < rest + alen; p++)
		if (*p == '@')
			at = p;
	const char *h = at ? at + 1 : rest;
	const char *tail = rest + alen;
	const char *q = strchr(tail, '?');
	size_t plen = q ? (size_t)(q - tail) : strlen(tail);
	int a = snprintf(u->userinfo, sizeof(u->userinfo), "%.*s", at ? (int)(at - rest) : 0, rest);
	int b = snprintf(u->hosts, sizeof(u->hosts), "%.*s", (int)(rest + alen - h), h);
	int c = snprintf(u->path, sizeof(u->path), "%.*s", (int)plen, tail);
	int d = snprintf(u->opts, sizeof(u->opts), "%s", q ? q + 1 : "");
	return (size_t)a < sizeof(u->userinfo) && (size_t)b < sizeof(u->hosts) &&
	       (size_t)c < sizeof(u->path) && (size_t)d < sizeof(u->opts);
}

/* "mongodb://[userinfo@]hosts[path]" into out; the length used. */
static bool start_uri(const uri_parts *u, const char *hosts, char *out, size_t size, size_t *used)
{
	int w = snprintf(out, size, "mongodb://%s%s%s%s", u->userinfo, u->userinfo[0] ? "@" : "",
	                 hosts, u->path[0] ? u->path : "/");
	*used = w < 0 ? 0 : (size_t)w;
	return w >= 0 && (size_t)w < size;
}

bool srv_with_hosts(const char *uri, const char *hosts, char *out, size_t size)
{
	uri_parts *u = malloc(sizeof(*u));
	size_t used;
	bool ok = u && split_uri(uri, u) && start_uri(u, hosts, out, size, &used);
	if (ok && u->opts[0]) {
		int w = snprintf(out + used, size - used, "?%s", u->opts);
		ok = w >= 0 && (size_t)w < size - used;
	}
	free(u);
	return ok;
}

/* The host list from the records, each checked against the domain. */
static bool srv_hosts(const char *srv_host, const dns_srv *recs, size_t n, char *out, size_t size,
                      char *err, size_t errlen)
{
	if (n == 0) {
		snprintf(err, errlen, "no SRV records for %s: cannot find the upstream's hosts",
		         srv_host);
		return false;
	}
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		if (!srv_target_allowed(srv_host, recs[i].target)) {
			snprintf(err, errlen,
			         "SRV record for %s names %s, which is not in its parent domain: "
			         "refused (Initial DNS Seedlist Discovery)",
			         srv_host, recs[i].target);
			return false;
		}
		int w = snprintf(out + used, size - used, "%s%s:%u", i ? "," : "", recs[i].target,
		                 recs[i].port);
		if (w < 0 || (size_t)w >= size - used) {
			snprintf(err, errlen, "too many SRV hosts for %s", srv_host);
			return false;
		}
		used += (size_t)w;
	}
	return true;
}

/* srv_uri's SRV host name and service, checked by libmongoc's parser
 * (one host, no port, no directConnection=true). */
static bool srv_parse(const char *srv_uri, char *host, size_t hsize, char *service, size_t ssize,
                      char *err, size_t errlen)
{
	bson_error_t berr;
	mongoc_uri_t *uri = mongoc_uri_new_with_error(srv_uri, &berr);
	if (!uri) {
		snprintf(err, errlen, "invalid upstream URI: %s", berr.message);
		return false;
	}
	const char *h = mongoc_uri_get_srv_hostname(uri);
	const char *svc = mongoc_uri_get_srv_service_name(uri);
	int32_t max_hosts = mongoc_uri_get_option_as_int32(uri, MONGOC_URI_SRVMAXHOSTS, 0);
	snprintf(host, hsize, "%s", h ? h : "");
	snprintf(service, ssize, "%s", svc ? svc : "mongodb");
	mongoc_uri_destroy(uri);
	if (max_hosts > 0) {
		snprintf(err, errlen,
		         "srvMaxHosts=%d is not supported: mongoguard maps every SRV host to a "
		         "listener (leave it out)",
		         (int)max_hosts);
		return false;
	}
	if (!host[0]) {
		snprintf(err, errlen, "upstream URI '%s' has no SRV host name", srv_uri);
		return false;
	}
	return true;
}

bool srv_compose(const char *srv_uri, const dns_srv *recs, size_t n, const char *txt, char *out,
                 size_t size, char *err, size_t errlen)
{
	char host[DNS_NAME_LEN], service[64], hosts[1024];
	if (!srv_parse(srv_uri, host, sizeof(host), service, sizeof(service), err, errlen) ||
	    !srv_hosts(host, recs, n, hosts, sizeof(hosts), err, errlen))
		return false;
	uri_parts *u = malloc(sizeof(*u));
	size_t used = 0;
	bool first = true, ok = u && split_uri(srv_uri, u) && start_uri(u, hosts, out, size, &used);
	if (!ok)
		snprintf(err, errlen, "upstream URI too long once resolved");
	for (const char *p = u && ok ? u->opts : ""; ok && *p;) {
		size_t len = strcspn(p, "&");
		size_t kl = key_len(p, len);
		bool srv_only = (kl == 14 && !strncasecmp(p, "srvServiceName", kl)) ||
		                (kl == 11 && !strncasecmp(p, "srvMaxHosts", kl));
		if (len && !srv_only && !add_opt(out, size, &used, &first, p, len)) {
			snprintf(err, errlen, "upstream URI too long once resolved");
			ok = false;
		}
		p += len + (p[len] == '&');
	}
	ok = ok && add_txt(txt ? txt : "", u->opts, out, size, &used, &first, err, errlen);
	if (ok && !has_key(u->opts, "tls") && !has_key(u->opts, "ssl") &&
	    !add_opt(out, size, &used, &first, "tls=true", 8)) {
		snprintf(err, errlen, "upstream URI too long once resolved");
		ok = false;
	}
	free(u);
	return ok;
}

bool srv_expand(const char *srv_uri, const char *server, char *out, size_t size, char *err,
                size_t errlen)
{
	char host[DNS_NAME_LEN], service[64], name[DNS_NAME_LEN + 80], why[512];
	if (!srv_parse(srv_uri, host, sizeof(host), service, sizeof(service), err, errlen))
		return false;
	uint8_t *buf = malloc(65536);
	dns_srv *recs = malloc(DNS_MAX_SRV * sizeof(*recs));
	char *txt = malloc(DNS_TXT_LEN);
	bool ok = buf && recs && txt, found = false;
	size_t len = 0, n = 0;
	snprintf(name, sizeof(name), "_%s._tcp.%s", service, host);
	if (!ok) {
		snprintf(err, errlen, "out of memory");
	} else if (dns_query(server, name, ns_t_srv, buf, 65536, &len, why, sizeof(why)) !=
	           DNS_OK) {
		snprintf(err, errlen, "cannot find the upstream's hosts: SRV lookup of %s: %s",
		         name, why);
		ok = false;
	} else if (!dns_parse_srv(buf, len, recs, DNS_MAX_SRV, &n, why, sizeof(why))) {
		snprintf(err, errlen, "SRV lookup of %s: %s", name, why);
		ok = false;
	}
	/* no TXT record (or no such name) is normal; a failure is not */
	dns_status ts =
	    ok ? dns_query(server, host, ns_t_txt, buf, 65536, &len, why, sizeof(why)) : DNS_FAILED;
	if (ok && ts == DNS_FAILED) {
		snprintf(err, errlen, "TXT lookup of %s: %s", host, why);
		ok = false;
	} else if (ok && ts == DNS_OK &&
	           !dns_parse_txt(buf, len, txt, DNS_TXT_LEN, &found, why, sizeof(why))) {
		snprintf(err, errlen, "TXT lookup of %s: %s", host, why);
		ok = false;
	}
	ok = ok && srv_compose(srv_uri, recs, n, found ? txt : NULL, out, size, err, errlen);
	free(buf);
	free(recs);
	free(txt);
	return ok;
}
