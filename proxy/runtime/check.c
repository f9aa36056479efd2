/* Start-up checks (see check.h). */
#include "proxy/runtime/check.h"

#include <errno.h>
#include <mongoc/mongoc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/runtime/server.h"

enum { CHECK_UPSTREAM_MS = 2000 }; /* --check-config waits this long for the upstream */

/* getaddrinfo() takes any number as a service and keeps its low 16 bits:
 * "99999" listened on 34463. So the port is read here, digits only. */
static bool port_ok(const char *port)
{
	if (!*port || strlen(port) > 5)
		return false;
	for (const char *p = port; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	long n = strtol(port, NULL, 10);
	return n >= 1 && n <= 65535;
}

bool check_listen_spec(const char *spec, const char *what, char *err, size_t errlen)
{
	const char *port;
	if (spec[0] == '[') {
		const char *close_br = strchr(spec, ']');
		if (!close_br || close_br == spec + 1 || close_br[1] != ':') {
			snprintf(err, errlen, "%s '%s' must look like [::1]:27018", what, spec);
			return false;
		}
		port = close_br + 2;
	} else {
		const char *colon = strrchr(spec, ':');
		if (!colon || memchr(spec, ':', (size_t)(colon - spec))) {
			snprintf(err, errlen,
			         "%s '%s' must look like HOST:PORT (an IPv6 address in brackets: "
			         "[::1]:27018)",
			         what, spec);
			return false;
		}
		port = colon + 1;
	}
	if (!port_ok(port)) {
		snprintf(err, errlen, "%s '%s': the port must be a number from 1 to 65535", what,
		         spec);
		return false;
	}
	return true;
}

/* Binds a listening socket to a, then closes it. */
static bool try_bind(const net_addr *a, char *why, size_t whylen)
{
	int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
	          bind(fd, (const struct sockaddr *)&a->ss, a->len) == 0;
	if (!ok)
		snprintf(why, whylen, "%s", strerror(errno));
	if (fd >= 0)
		close(fd);
	return ok;
}

/* A ping over the side connection's URI (its credentials too). */
static bool ping_upstream(const char *uri_text, char *why, size_t whylen)
{
	bson_error_t error;
	mongoc_uri_t *uri = mongoc_uri_new_with_error(uri_text, &error);
	if (!uri) {
		snprintf(why, whylen, "%s", error.message);
		return false;
	}
	mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, CHECK_UPSTREAM_MS);
	mongoc_uri_set_option_as_int32(uri, MONGOC_URI_CONNECTTIMEOUTMS, CHECK_UPSTREAM_MS);
	mongoc_uri_set_appname(uri, "mongoguard-check");
	mongoc_client_t *c = mongoc_client_new_from_uri_with_error(uri, &error);
	bool ok = false;
	if (c) {
		bson_t *ping = BCON_NEW("ping", BCON_INT32(1));
		bson_t reply;
		ok = mongoc_client_command_simple(c, "admin", ping, NULL, &reply, &error);
		bson_destroy(&reply);
		bson_destroy(ping);
		mongoc_client_destroy(c);
	}
	if (!ok)
		snprintf(why, whylen, "%s", error.message);
	mongoc_uri_destroy(uri);
	return ok;
}

int check_live(const server_plan *p, FILE *out)
{
	int warnings = 0;
	char why[512];
	for (size_t i = 0; i < p->nlisteners; i++) {
		const net_addr *a = &p->listeners[i].listen;
		if (try_bind(a, why, sizeof(why))) {
			fprintf(out, "mongoguard: listen %s: can bind\n", a->name);
		} else {
			fprintf(out, "mongoguard: warning: listen %s: cannot bind: %s\n", a->name,
			        why);
			warnings++;
		}
	}
	if (p->admin && !try_bind(&p->admin_listen, why, sizeof(why))) {
		fprintf(out, "mongoguard: warning: admin.listen %s: cannot bind: %s\n",
		        p->admin_listen.name, why);
		warnings++;
	}
	if (ping_upstream(p->side_uri, why, sizeof(why))) {
		fprintf(out, "mongoguard: upstream %s: answers ping\n", p->listeners[0].up.name);
	} else {
		fprintf(out, "mongoguard: warning: upstream %s: no answer within %d ms: %s\n",
		        p->listeners[0].up.name, CHECK_UPSTREAM_MS, why);
		warnings++;
	}
	return warnings;
}
