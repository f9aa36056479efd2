/* The upstream target (see upstream.h). */
#include "proxy/net/upstream.h"

#include <mongoc/mongoc.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "proxy/sinks/log.h"

bool upstream_resolve(const char *uri_str, upstream_target *up, char *err, size_t errlen)
{
	bson_error_t berr;
	mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_str, &berr);
	if (!uri) {
		snprintf(err, errlen, "invalid upstream URI: %s", berr.message);
		return false;
	}
	bool ok = false;
	const mongoc_host_list_t *hosts = mongoc_uri_get_hosts(uri);
	if (!hosts) {
		snprintf(err, errlen,
		         "upstream URI '%s' names no host (mongodb+srv:// is not supported yet)",
		         uri_str);
		goto done;
	}
	if (mongoc_uri_get_tls(uri)) {
		snprintf(
		    err, errlen,
		    "upstream URI asks for TLS, which mongoguard does not speak to the upstream "
		    "yet; refusing to connect in plain text instead");
		goto done;
	}
	if (hosts->next)
		log_reason(LOG_WARNING, "NETWORK", LOGID_CONFIG, NULL,
		           "Upstream URI lists several hosts; every client is paired with the "
		           "first, %s",
		           hosts->host_and_port);
	snprintf(up->name, sizeof(up->name), "%s", hosts->host_and_port);
	if (hosts->family == AF_UNIX) {
		struct sockaddr_un *un = (struct sockaddr_un *)&up->ss;
		memset(un, 0, sizeof(*un));
		un->sun_family = AF_UNIX;
		if (strlen(hosts->host) >= sizeof(un->sun_path)) {
			snprintf(err, errlen, "upstream socket path is too long: %s", hosts->host);
			goto done;
		}
		memcpy(un->sun_path, hosts->host, strlen(hosts->host) + 1);
		up->len = sizeof(*un);
		ok = true;
		goto done;
	}
	char port[16];
	snprintf(port, sizeof(port), "%u", hosts->port);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(hosts->host, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "cannot resolve upstream host %s: %s", hosts->host,
		         gai_strerror(rc));
		goto done;
	}
	memcpy(&up->ss, res->ai_addr, res->ai_addrlen);
	up->len = res->ai_addrlen;
	freeaddrinfo(res);
	ok = true;
done:
	mongoc_uri_destroy(uri);
	return ok;
}
