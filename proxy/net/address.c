/* Parsing listen addresses and printing peers. */
#include "proxy/net/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

bool net_parse_listen(const char *spec, net_addr *out, char *err, size_t errlen)
{
	char host[256];
	const char *port;
	if (spec[0] == '[') {
		const char *close_br = strchr(spec, ']');
		if (!close_br || close_br[1] != ':') {
			snprintf(err, errlen, "listen address '%s' must look like [::1]:27018",
			         spec);
			return false;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(close_br - spec - 1), spec + 1);
		port = close_br + 2;
	} else {
		const char *colon = strrchr(spec, ':');
		if (!colon) {
			snprintf(err, errlen, "listen address '%s' must look like HOST:PORT", spec);
			return false;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
		port = colon + 1;
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "cannot resolve listen address '%s': %s", spec,
		         gai_strerror(rc));
		return false;
	}
	memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
	out->len = res->ai_addrlen;
	snprintf(out->name, sizeof(out->name), "%s", spec);
	freeaddrinfo(res);
	return true;
}

void net_format_addr(const struct sockaddr *sa, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN] = "?";
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, size, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, size, "unix");
	}
}
