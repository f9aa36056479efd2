/* The upstream target (see upstream.h). */
#include "proxy/net/upstream.h"

#include <mongoc/mongoc.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "proxy/net/dns.h"

static void host_from(const mongoc_host_list_t *h, upstream_host *out)
{
	snprintf(out->name, sizeof(out->name), "%s", h->host_and_port);
	snprintf(out->host, sizeof(out->host), "%s", h->host);
	out->port = h->port;
	out->unix_socket = h->family == AF_UNIX;
}

bool upstream_lookup(const upstream_host *h, const char *dns_server, upstream_target *up, char *err,
                     size_t errlen)
{
	snprintf(up->name, sizeof(up->name), "%s", h->name);
	if (!h->unix_socket)
		return dns_lookup_host(dns_server, h->host, h->port, up, err, errlen);
	struct sockaddr_un *un = (struct sockaddr_un *)&up->ss;
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	if (strlen(h->host) >= sizeof(un->sun_path)) {
		snprintf(err, errlen, "upstream socket path is too long: %s", h->host);
		return false;
	}
	memcpy(un->sun_path, h->host, strlen(h->host) + 1);
	up->len = sizeof(*un);
	return true;
}

bool upstream_parse_host(const char *host_and_port, upstream_host *out, char *err, size_t errlen)
{
	/* libmongoc's host parser is private; its URI parser reads the same */
	char text[400];
	bson_error_t berr;
	snprintf(text, sizeof(text), "mongodb://%s/", host_and_port);
	mongoc_uri_t *uri = mongoc_uri_new_with_error(text, &berr);
	const mongoc_host_list_t *h = uri ? mongoc_uri_get_hosts(uri) : NULL;
	if (!h || h->next) {
		snprintf(err, errlen, "invalid member address '%s': %s", host_and_port,
		         uri ? "not one host:port" : berr.message);
		mongoc_uri_destroy(uri);
		return false;
	}
	host_from(h, out);
	mongoc_uri_destroy(uri);
	return true;
}

static void tls_from(const mongoc_uri_t *uri, tls_upstream_config *t)
{
	t->enabled = mongoc_uri_get_tls(uri);
	const char *ca = mongoc_uri_get_option_as_utf8(uri, MONGOC_URI_TLSCAFILE, NULL);
	const char *ck = mongoc_uri_get_option_as_utf8(uri, MONGOC_URI_TLSCERTIFICATEKEYFILE, NULL);
	snprintf(t->ca_file, sizeof(t->ca_file), "%s", ca ? ca : "");
	snprintf(t->certificate_key_file, sizeof(t->certificate_key_file), "%s", ck ? ck : "");
	bool insecure = mongoc_uri_get_option_as_bool(uri, MONGOC_URI_TLSINSECURE, false);
	t->allow_invalid_hostnames =
	    insecure ||
	    mongoc_uri_get_option_as_bool(uri, MONGOC_URI_TLSALLOWINVALIDHOSTNAMES, false);
	t->allow_invalid_certificates =
	    insecure ||
	    mongoc_uri_get_option_as_bool(uri, MONGOC_URI_TLSALLOWINVALIDCERTIFICATES, false);
}

bool upstream_parse(const char *uri_str, upstream_uri_info *info, upstream_host *hosts,
                    size_t *nhosts, char *err, size_t errlen)
{
	bson_error_t berr;
	mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_str, &berr);
	if (!uri) {
		snprintf(err, errlen, "invalid upstream URI: %s", berr.message);
		return false;
	}
	bool ok = false;
	const mongoc_host_list_t *list = mongoc_uri_get_hosts(uri);
	*nhosts = 0;
	if (!list) {
		snprintf(err, errlen, "upstream URI '%s' names no host", uri_str);
		goto done;
	}
	if (mongoc_uri_get_option_as_utf8(uri, MONGOC_URI_TLSCERTIFICATEKEYFILEPASSWORD, NULL)) {
		snprintf(
		    err, errlen,
		    "upstream URI has tlsCertificateKeyFilePassword, which mongoguard does not "
		    "support: use an unencrypted key file readable only by mongoguard");
		goto done;
	}
	memset(info, 0, sizeof(*info));
	snprintf(info->first_host, sizeof(info->first_host), "%s", list->host_and_port);
	const char *rs = mongoc_uri_get_replica_set(uri);
	snprintf(info->replica_set, sizeof(info->replica_set), "%s", rs ? rs : "");
	info->load_balanced = mongoc_uri_get_option_as_bool(uri, MONGOC_URI_LOADBALANCED, false);
	for (const mongoc_host_list_t *h = list; h; h = h->next) {
		if (*nhosts == UPSTREAM_MAX_HOSTS) {
			snprintf(err, errlen, "upstream URI names more than %d hosts",
			         UPSTREAM_MAX_HOSTS);
			goto done;
		}
		host_from(h, &hosts[(*nhosts)++]);
	}
	info->nhosts = (unsigned)*nhosts;
	tls_from(uri, &info->tls);
	ok = true;
done:
	mongoc_uri_destroy(uri);
	return ok;
}

/* "username:password" from the file's first line into user/pass. */
static bool read_credentials(const char *path, char *user, size_t ulen, char *pass, size_t plen,
                             char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "cannot read upstream.credentialsFile %s: %s", path,
		         strerror(errno));
		return false;
	}
	char line[1024] = "";
	bool got = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	char *colon = strchr(line, ':');
	bool ok = got && colon && colon > line && colon[1] && (size_t)(colon - line) < ulen &&
	          strlen(colon + 1) < plen;
	if (ok) {
		*colon = '\0';
		snprintf(user, ulen, "%s", line);
		snprintf(pass, plen, "%s", colon + 1);
	} else {
		snprintf(err, errlen,
		         "upstream.credentialsFile %s: the first line must be username:password",
		         path);
	}
	explicit_bzero(line, sizeof(line));
	return ok;
}

/* Appends s percent-encoded (RFC 3986 unreserved characters kept). */
static size_t append_encoded(char *out, size_t used, size_t size, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s && used + 4 < size; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
			out[used++] = (char)c;
		} else {
			out[used++] = '%';
			out[used++] = hex[c >> 4];
			out[used++] = hex[c & 15];
		}
	}
	out[used] = '\0';
	return used;
}

bool upstream_side_uri(const char *uri_str, const char *credentials_file, char *out, size_t size,
                       bool *has_credentials, char *err, size_t errlen)
{
	bson_error_t berr;
	mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_str, &berr);
	if (!uri) {
		snprintf(err, errlen, "invalid upstream URI: %s", berr.message);
		return false;
	}
	*has_credentials = mongoc_uri_get_username(uri) != NULL;
	mongoc_uri_destroy(uri);
	if (!credentials_file || !*credentials_file) {
		snprintf(out, size, "%s", uri_str);
		return strlen(uri_str) < size;
	}
	if (*has_credentials) {
		snprintf(
		    err, errlen,
		    "credentials both in upstream.uri and in upstream.credentialsFile: keep one");
		return false;
	}
	char user[256], pass[512];
	if (!read_credentials(credentials_file, user, sizeof(user), pass, sizeof(pass), err,
	                      errlen))
		return false;
	/* scheme://user:pass@rest */
	const char *rest = strstr(uri_str, "://");
	size_t used = (size_t)(rest + 3 - uri_str);
	bool ok = used + 1 < size;
	if (ok) {
		memcpy(out, uri_str, used);
		used = append_encoded(out, used, size, user);
		used += (size_t)snprintf(out + used, size - used, ":");
		used = append_encoded(out, used, size, pass);
		used += (size_t)snprintf(out + used, size - used, "@%s", rest + 3);
		ok = used < size;
	}
	explicit_bzero(pass, sizeof(pass));
	if (!ok) {
		snprintf(err, errlen, "upstream URI with credentials is too long");
		explicit_bzero(out, size);
		return false;
	}
	*has_credentials = true;
	return true;
}
