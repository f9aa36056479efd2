/* The PROXY protocol header parser (see proxy_proto.h). */
#include "proxy/net/proxy_proto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t V2_SIG[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                   0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};

static proxy_proto_status invalid(char *why, size_t whylen, const char *text)
{
	snprintf(why, whylen, "%s", text);
	return PROXY_PROTO_INVALID;
}

/* A port of v1's text: 0..65535, digits only. */
static bool v1_port(const char *s, uint16_t *out)
{
	char *end;
	if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 5)
		return false;
	unsigned long v = strtoul(s, &end, 10);
	if (v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

static proxy_proto_status parse_v1(const uint8_t *p, size_t n, proxy_proto *out, char *why,
                                   size_t whylen)
{
	const uint8_t *crlf = NULL;
	for (size_t i = 0; i + 1 < n && i + 1 < 107; i++)
		if (p[i] == '\r' && p[i + 1] == '\n') {
			crlf = p + i;
			break;
		}
	if (!crlf)
		return n >= 107 ? invalid(why, whylen, "a PROXY v1 line longer than 107 bytes")
		                : PROXY_PROTO_NEED_MORE;
	char line[108];
	size_t len = (size_t)(crlf - p);
	memcpy(line, p, len);
	line[len] = '\0';
	out->len = len + 2;
	out->version = 1;
	char *save = NULL, *tok[6];
	int nt = 0;
	for (char *t = strtok_r(line, " ", &save); t && nt < 6; t = strtok_r(NULL, " ", &save))
		tok[nt++] = t;
	if (nt >= 2 && !strcmp(tok[1], "UNKNOWN")) {
		out->has_source = false;
		return PROXY_PROTO_OK;
	}
	if (nt != 6 || (strcmp(tok[1], "TCP4") && strcmp(tok[1], "TCP6")))
		return invalid(why, whylen,
		               "a PROXY v1 line that is not TCP4, TCP6 or UNKNOWN "
		               "with two addresses and two ports");
	uint16_t sport, dport;
	if (!v1_port(tok[4], &sport) || !v1_port(tok[5], &dport))
		return invalid(why, whylen, "a PROXY v1 line with a port that is not 0..65535");
	memset(&out->source, 0, sizeof out->source);
	if (!strcmp(tok[1], "TCP4")) {
		struct sockaddr_in *a = (struct sockaddr_in *)&out->source;
		a->sin_family = AF_INET;
		a->sin_port = htons(sport);
		if (inet_pton(AF_INET, tok[2], &a->sin_addr) != 1)
			return invalid(why, whylen,
			               "a PROXY v1 TCP4 line with a bad source address");
		out->source_len = sizeof *a;
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->source;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(sport);
		if (inet_pton(AF_INET6, tok[2], &a->sin6_addr) != 1)
			return invalid(why, whylen,
			               "a PROXY v1 TCP6 line with a bad source address");
		out->source_len = sizeof *a;
	}
	out->has_source = true;
	return PROXY_PROTO_OK;
}

static proxy_proto_status parse_v2(const uint8_t *p, size_t n, proxy_proto *out, char *why,
                                   size_t whylen)
{
	if (n < 16)
		return PROXY_PROTO_NEED_MORE;
	if ((p[12] >> 4) != 2)
		return invalid(why, whylen, "a PROXY v2 signature with another version");
	size_t body = (size_t)p[14] << 8 | p[15];
	if (16 + body > PROXY_PROTO_MAX)
		return invalid(why, whylen, "a PROXY v2 header longer than 536 bytes");
	if (n < 16 + body)
		return PROXY_PROTO_NEED_MORE;
	out->len = 16 + body;
	out->version = 2;
	out->has_source = false;
	unsigned cmd = p[12] & 0x0f, fam = p[13] >> 4, proto = p[13] & 0x0f;
	if (cmd == 0) /* LOCAL: the balancer's own connection (a health check) */
		return PROXY_PROTO_OK;
	if (cmd != 1)
		return invalid(why, whylen,
		               "a PROXY v2 header with a command other than LOCAL or PROXY");
	if (proto != 1 || (fam != 1 && fam != 2)) /* not TCP over IPv4/IPv6: keep ours */
		return PROXY_PROTO_OK;
	memset(&out->source, 0, sizeof out->source);
	const uint8_t *a = p + 16;
	if (fam == 1) {
		if (body < 12)
			return invalid(why, whylen,
			               "a PROXY v2 IPv4 header too short for its addresses");
		struct sockaddr_in *s4 = (struct sockaddr_in *)&out->source;
		s4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, a, 4);
		memcpy(&s4->sin_port, a + 8, 2);
		out->source_len = sizeof *s4;
	} else {
		if (body < 36)
			return invalid(why, whylen,
			               "a PROXY v2 IPv6 header too short for its addresses");
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->source;
		s6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, a, 16);
		memcpy(&s6->sin6_port, a + 32, 2);
		out->source_len = sizeof *s6;
	}
	out->has_source = true;
	return PROXY_PROTO_OK;
}

proxy_proto_status proxy_proto_parse(const uint8_t *p, size_t n, proxy_proto *out, char *why,
                                     size_t whylen)
{
	memset(out, 0, sizeof *out);
	/* Which version: decided by the first bytes, a prefix of either
	 * signature waits for more. */
	size_t k = n < 12 ? n : 12;
	if (!memcmp(p, V2_SIG, k))
		return n < 12 ? PROXY_PROTO_NEED_MORE : parse_v2(p, n, out, why, whylen);
	k = n < 6 ? n : 6;
	if (!memcmp(p, "PROXY ", k))
		return n < 6 ? PROXY_PROTO_NEED_MORE : parse_v1(p, n, out, why, whylen);
	return invalid(why, whylen,
	               "no PROXY protocol header (net.proxyProtocol is on: every "
	               "connection must come through the load balancer)");
}
