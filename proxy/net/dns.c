/* DNS through libresolv (see dns.h). */
#include "proxy/net/dns.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses msg and reports the number of answer records; false with err. */
static bool init_parse(const uint8_t *msg, size_t len, ns_msg *m, char *err, size_t errlen)
{
	if (len > 65535 || ns_initparse(msg, (int)len, m) < 0) {
		snprintf(err, errlen, "malformed DNS answer (%zu bytes)", len);
		return false;
	}
	return true;
}

static bool answer_rr(ns_msg *m, int i, ns_rr *rr, char *err, size_t errlen)
{
	if (ns_parserr(m, ns_s_an, i, rr) < 0) {
		snprintf(err, errlen, "malformed DNS answer: record %d does not parse", i);
		return false;
	}
	return true;
}

bool dns_parse_srv(const uint8_t *msg, size_t len, dns_srv *out, size_t max, size_t *n, char *err,
                   size_t errlen)
{
	ns_msg m;
	*n = 0;
	if (!init_parse(msg, len, &m, err, errlen))
		return false;
	for (int i = 0; i < ns_msg_count(m, ns_s_an); i++) {
		ns_rr rr;
		if (!answer_rr(&m, i, &rr, err, errlen))
			return false;
		if (ns_rr_type(rr) != ns_t_srv)
			continue; /* a CNAME on the way, say */
		const uint8_t *rd = ns_rr_rdata(rr);
		/* priority, weight, port (16 bits each), then the target name */
		if (ns_rr_rdlen(rr) < 7) {
			snprintf(err, errlen, "malformed SRV record (%u bytes of data)",
			         (unsigned)ns_rr_rdlen(rr));
			return false;
		}
		if (*n == max) {
			snprintf(err, errlen, "more than %zu SRV records", max);
			return false;
		}
		dns_srv *s = &out[*n];
		s->port = ns_get16(rd + 4);
		if (ns_name_uncompress(ns_msg_base(m), ns_msg_end(m), rd + 6, s->target,
		                       sizeof(s->target)) < 0) {
			snprintf(err, errlen, "malformed SRV record: its target does not parse");
			return false;
		}
		size_t tl = strlen(s->target);
		if (tl && s->target[tl - 1] == '.')
			s->target[tl - 1] = '\0';
		if (!s->target[0] || !s->port) {
			snprintf(err, errlen, "SRV record with an empty target or port 0");
			return false;
		}
		(*n)++;
	}
	return true;
}

bool dns_parse_txt(const uint8_t *msg, size_t len, char *out, size_t size, bool *found, char *err,
                   size_t errlen)
{
	ns_msg m;
	*found = false;
	out[0] = '\0';
	if (!init_parse(msg, len, &m, err, errlen))
		return false;
	size_t used = 0;
	for (int i = 0; i < ns_msg_count(m, ns_s_an); i++) {
		ns_rr rr;
		if (!answer_rr(&m, i, &rr, err, errlen))
			return false;
		if (ns_rr_type(rr) != ns_t_txt)
			continue;
		if (*found) {
			snprintf(err, errlen,
			         "more than one TXT record (the seedlist spec allows one)");
			return false;
		}
		*found = true;
		/* character-strings: a length byte, then that many bytes */
		const uint8_t *p = ns_rr_rdata(rr), *end = p + ns_rr_rdlen(rr);
		while (p < end) {
			size_t sl = *p++;
			if (sl > (size_t)(end - p)) {
				snprintf(err, errlen, "malformed TXT record");
				return false;
			}
			if (used + sl >= size) {
				snprintf(err, errlen, "TXT record longer than %zu bytes", size - 1);
				return false;
			}
			memcpy(out + used, p, sl);
			used += sl;
			p += sl;
		}
		out[used] = '\0';
		if (strlen(out) != used) {
			snprintf(err, errlen, "TXT record holds a NUL byte");
			return false;
		}
	}
	return true;
}

bool dns_parse_addr(const uint8_t *msg, size_t len, unsigned port, net_addr *out, bool *found,
                    char *err, size_t errlen)
{
	ns_msg m;
	*found = false;
	if (!init_parse(msg, len, &m, err, errlen))
		return false;
	for (int i = 0; i < ns_msg_count(m, ns_s_an); i++) {
		ns_rr rr;
		if (!answer_rr(&m, i, &rr, err, errlen))
			return false;
		if (ns_rr_type(rr) == ns_t_a && ns_rr_rdlen(rr) == 4) {
			struct sockaddr_in *in = (struct sockaddr_in *)&out->ss;
			memset(in, 0, sizeof(*in));
			in->sin_family = AF_INET;
			in->sin_port = htons((uint16_t)port);
			memcpy(&in->sin_addr, ns_rr_rdata(rr), 4);
			out->len = sizeof(*in);
		} else if (ns_rr_type(rr) == ns_t_aaaa && ns_rr_rdlen(rr) == 16) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->ss;
			memset(in6, 0, sizeof(*in6));
			in6->sin6_family = AF_INET6;
			in6->sin6_port = htons((uint16_t)port);
			memcpy(&in6->sin6_addr, ns_rr_rdata(rr), 16);
			out->len = sizeof(*in6);
		} else {
			continue;
		}
		*found = true;
		return true;
	}
	return true;
}

/* "IPv4[:PORT]" into *sin. */
static bool parse_server(const char *server, struct sockaddr_in *sin)
{
	char host[64];
	const char *colon = strchr(server, ':');
	size_t hl = colon ? (size_t)(colon - server) : strlen(server);
	if (hl == 0 || hl >= sizeof(host))
		return false;
	memcpy(host, server, hl);
	host[hl] = '\0';
	unsigned long port = 53;
	if (colon) {
		char *end;
		port = strtoul(colon + 1, &end, 10);
		if (!colon[1] || *end || port == 0 || port > 65535)
			return false;
	}
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, host, &sin->sin_addr) == 1;
}

bool dns_server_valid(const char *server, char *err, size_t errlen)
{
	struct sockaddr_in sin;
	if (!server[0] || parse_server(server, &sin))
		return true;
	snprintf(err, errlen, "upstream.dnsServer '%s' must be an IPv4 address, optionally :PORT",
	         server);
	return false;
}

dns_status dns_query(const char *server, const char *name, int type, uint8_t *buf, size_t size,
                     size_t *len, char *err, size_t errlen)
{
	struct __res_state st;
	memset(&st, 0, sizeof(st));
	if (res_ninit(&st) != 0) {
		snprintf(err, errlen, "cannot initialise the DNS resolver");
		return DNS_FAILED;
	}
	if (server[0]) {
		struct sockaddr_in sin;
		if (!parse_server(server, &sin)) {
			res_nclose(&st);
			snprintf(err, errlen, "invalid DNS server '%s'", server);
			return DNS_FAILED;
		}
		st.nscount = 1;
		st.nsaddr_list[0] = sin;
		/* a dedicated server answers at once or not at all */
		st.retrans = 1;
		st.retry = 2;
	}
	int n = res_nquery(&st, name, ns_c_in, type, buf, (int)size);
	int herr = st.res_h_errno;
	res_nclose(&st);
	if (n >= 0) {
		*len = (size_t)n;
		return DNS_OK;
	}
	const char *via = server[0] ? server : "the system's name servers";
	switch (herr) {
	case HOST_NOT_FOUND:
		snprintf(err, errlen, "%s does not exist (NXDOMAIN from %s)", name, via);
		return DNS_NO_RECORD;
	case NO_DATA:
		snprintf(err, errlen, "%s has no %s record (asked %s)", name,
		         type == ns_t_srv   ? "SRV"
		         : type == ns_t_txt ? "TXT"
		                            : "address",
		         via);
		return DNS_NO_RECORD;
	case TRY_AGAIN:
		snprintf(err, errlen, "no answer for %s from %s (timeout or server failure)", name,
		         via);
		return DNS_FAILED;
	default:
		snprintf(err, errlen, "DNS query for %s failed at %s (refused or unreachable)",
		         name, via);
		return DNS_FAILED;
	}
}

/* An address literal needs no DNS at all. */
static bool numeric(const char *host, unsigned port, net_addr *out)
{
	struct sockaddr_in *in = (struct sockaddr_in *)&out->ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->ss;
	memset(&out->ss, 0, sizeof(out->ss));
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		out->len = sizeof(*in);
		return true;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		out->len = sizeof(*in6);
		return true;
	}
	return false;
}

bool dns_lookup_host(const char *server, const char *host, unsigned port, net_addr *out, char *err,
                     size_t errlen)
{
	if (numeric(host, port, out))
		return true;
	if (!server[0]) {
		char portstr[16];
		snprintf(portstr, sizeof(portstr), "%u", port);
		struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
		struct addrinfo *res = NULL;
		int rc = getaddrinfo(host, portstr, &hints, &res);
		if (rc != 0) {
			snprintf(err, errlen, "cannot resolve upstream host %s: %s", host,
			         gai_strerror(rc));
			return false;
		}
		memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
		out->len = res->ai_addrlen;
		freeaddrinfo(res);
		return true;
	}
	static const int types[] = {ns_t_a, ns_t_aaaa};
	char why[512] = "";
	for (size_t i = 0; i < 2; i++) {
		uint8_t buf[4096];
		size_t len;
		bool found;
		dns_status st =
		    dns_query(server, host, types[i], buf, sizeof(buf), &len, why, sizeof(why));
		if (st == DNS_FAILED)
			break;
		if (st == DNS_OK && !dns_parse_addr(buf, len, port, out, &found, why, sizeof(why)))
			break;
		if (st == DNS_OK && found)
			return true;
	}
	snprintf(err, errlen, "cannot resolve upstream host %s: %s", host,
	         why[0] ? why : "no address record");
	return false;
}
