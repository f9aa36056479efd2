/* The PROXY protocol header parser (proxy/net/proxy_proto.h), v1 and v2,
 * whole and in every prefix. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "proxy/net/proxy_proto.h"

static proxy_proto_status parse(const void *p, size_t n, proxy_proto *out)
{
	char why[256];
	return proxy_proto_parse(p, n, out, why, sizeof why);
}

/* Every proper prefix needs more; the whole header parses to len bytes. */
static void whole_and_prefixes(const uint8_t *p, size_t n, size_t header_len, proxy_proto *out)
{
	for (size_t i = 1; i < header_len; i++)
		assert_int_equal(parse(p, i, out), PROXY_PROTO_NEED_MORE);
	assert_int_equal(parse(p, n, out), PROXY_PROTO_OK);
	assert_int_equal(out->len, header_len);
}

static void test_v1(void **state)
{
	const char *h = "PROXY TCP4 192.0.2.7 198.51.100.1 56324 27018\r\n";
	char buf[128];
	snprintf(buf, sizeof buf, "%s%s", h, "\x3a\x00\x00\x00");
	proxy_proto pp;
	whole_and_prefixes((const uint8_t *)buf, strlen(buf), strlen(h), &pp);
	assert_int_equal(pp.version, 1);
	assert_true(pp.has_source);
	const struct sockaddr_in *a = (const struct sockaddr_in *)&pp.source;
	assert_int_equal(a->sin_family, AF_INET);
	assert_int_equal(ntohs(a->sin_port), 56324);
	char ip[64];
	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
	assert_string_equal(ip, "192.0.2.7");

	const char *h6 = "PROXY TCP6 2001:db8::5 2001:db8::1 4000 27018\r\n";
	assert_int_equal(parse(h6, strlen(h6), &pp), PROXY_PROTO_OK);
	assert_int_equal(((const struct sockaddr_in6 *)&pp.source)->sin6_family, AF_INET6);

	const char *unk = "PROXY UNKNOWN\r\n";
	assert_int_equal(parse(unk, strlen(unk), &pp), PROXY_PROTO_OK);
	assert_false(pp.has_source);
	assert_int_equal(pp.len, strlen(unk));
}

static void test_v2(void **state)
{
	uint8_t h[16 + 12 + 8] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51,
	                          0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, 0x00, 12 + 8};
	const uint8_t addrs[12] = {203, 0, 113, 9, 10, 0, 0, 1, 0x1f, 0x90, 0x69, 0x7a};
	memcpy(h + 16, addrs, 12);
	memset(h + 28, 0x04, 8); /* a TLV (skipped) */
	proxy_proto pp;
	whole_and_prefixes(h, sizeof h, sizeof h, &pp);
	assert_int_equal(pp.version, 2);
	assert_true(pp.has_source);
	const struct sockaddr_in *a = (const struct sockaddr_in *)&pp.source;
	assert_int_equal(ntohs(a->sin_port), 8080);
	assert_int_equal(((const uint8_t *)&a->sin_addr)[0], 203);
	/* LOCAL: a health check of the balancer's own; our address stands */
	h[12] = 0x20;
	assert_int_equal(parse(h, sizeof h, &pp), PROXY_PROTO_OK);
	assert_false(pp.has_source);
}

static void test_refused(void **state)
{
	proxy_proto pp;
	const char *cases[] = {
	    "\x3a\x00\x00\x00\x01\x00\x00\x00", /* a MongoDB header: no PROXY line */
	    "GET / HTTP/1.1\r\n",
	    "PROXY TCP4 192.0.2.7 198.51.100.1 56324\r\n",       /* a port missing */
	    "PROXY TCP4 192.0.2.7 198.51.100.1 56324 99999\r\n", /* out of range */
	    "PROXY TCP4 not.an.ip 198.51.100.1 56324 27018\r\n", /* not an address */
	    "PROXY UDP4 192.0.2.7 198.51.100.1 56324 27018\r\n", /* not TCP */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		assert_int_equal(parse(cases[i], strlen(cases[i]), &pp), PROXY_PROTO_INVALID);
	char longline[200];
	memset(longline, 'a', sizeof longline);
	memcpy(longline, "PROXY ", 6);
	assert_int_equal(parse(longline, sizeof longline, &pp), PROXY_PROTO_INVALID);
	uint8_t v2[16] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51,
	                  0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, 0x03, 0x00};
	assert_int_equal(parse(v2, sizeof v2, &pp), PROXY_PROTO_INVALID); /* 16 + 768 > 536 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_v1),
	    cmocka_unit_test(test_v2),
	    cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
