/* DNS answers for mongodb+srv:// (proxy/net/dns.c) and the seedlist rules
 * (proxy/net/srv.c), with answers built byte by byte here, as a name
 * server would send them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "proxy/net/dns.h"
#include "proxy/net/srv.h"

/* ---- a small DNS message builder ---- */

typedef struct msg {
	uint8_t b[4096];
	size_t n;
	size_t count_at; /* where ANCOUNT is */
} msg;

static void put8(msg *m, unsigned v)
{
	m->b[m->n++] = (uint8_t)v;
}

static void put16(msg *m, unsigned v)
{
	put8(m, v >> 8);
	put8(m, v & 0xff);
}

static void put_name(msg *m, const char *name)
{
	while (*name) {
		size_t l = strcspn(name, ".");
		put8(m, (unsigned)l);
		memcpy(m->b + m->n, name, l);
		m->n += l;
		name += l + (name[l] == '.');
	}
	put8(m, 0);
}

/* A response to one question (name, type), no answers yet. */
static void begin(msg *m, const char *qname, unsigned qtype)
{
	memset(m, 0, sizeof(*m));
	put16(m, 0x1234); /* id */
	put16(m, 0x8180); /* response, recursion desired and available, NOERROR */
	put16(m, 1);      /* QDCOUNT */
	m->count_at = m->n;
	put16(m, 0); /* ANCOUNT */
	put16(m, 0);
	put16(m, 0);
	put_name(m, qname);
	put16(m, qtype);
	put16(m, 1);
}

/* An answer record for the question's name (a pointer to offset 12);
 * returns where its RDLENGTH goes, filled by end_rr. */
static size_t begin_rr(msg *m, unsigned type)
{
	put16(m, 0xc00c);
	put16(m, type);
	put16(m, 1);
	put16(m, 0);
	put16(m, 300); /* TTL */
	size_t at = m->n;
	put16(m, 0);
	m->b[m->count_at + 1]++;
	return at;
}

static void end_rr(msg *m, size_t at)
{
	size_t len = m->n - at - 2;
	m->b[at] = (uint8_t)(len >> 8);
	m->b[at + 1] = (uint8_t)len;
}

static void add_srv(msg *m, unsigned port, const char *target)
{
	size_t at = begin_rr(m, 33);
	put16(m, 10); /* priority and weight: ignored */
	put16(m, 5);
	put16(m, port);
	put_name(m, target);
	end_rr(m, at);
}

/* TXT with its character-strings given as NULL-terminated arguments. */
static void add_txt(msg *m, ...)
{
	size_t at = begin_rr(m, 16);
	va_list ap;
	va_start(ap, m);
	for (const char *s; (s = va_arg(ap, const char *));) {
		put8(m, (unsigned)strlen(s));
		memcpy(m->b + m->n, s, strlen(s));
		m->n += strlen(s);
	}
	va_end(ap);
	end_rr(m, at);
}

static void add_a(msg *m, const char *ip)
{
	size_t at = begin_rr(m, 1);
	inet_pton(AF_INET, ip, m->b + m->n);
	m->n += 4;
	end_rr(m, at);
}

/* ---- answers ---- */

static void test_srv_records(void **state)
{
	msg m;
	begin(&m, "_mongodb._tcp.rs.example.com", 33);
	add_srv(&m, 27017, "db1.example.com");
	add_srv(&m, 27018, "db2.example.com.");
	/* a compressed target: "db3" then a pointer to "example.com" in the
	 * question (offset 12 + len("\x08_mongodb\x04_tcp\x02rs")) */
	size_t at = begin_rr(&m, 33);
	put16(&m, 0);
	put16(&m, 0);
	put16(&m, 27019);
	put8(&m, 3);
	memcpy(m.b + m.n, "db3", 3);
	m.n += 3;
	put16(&m, 0xc000 | (12 + 1 + 8 + 1 + 4 + 1 + 2));
	end_rr(&m, at);

	dns_srv recs[4];
	size_t n = 0;
	char err[256];
	assert_true(dns_parse_srv(m.b, m.n, recs, 4, &n, err, sizeof(err)));
	assert_int_equal(n, 3);
	assert_string_equal(recs[0].target, "db1.example.com");
	assert_int_equal(recs[0].port, 27017);
	assert_string_equal(recs[1].target, "db2.example.com"); /* trailing dot dropped */
	assert_string_equal(recs[2].target, "db3.example.com");
	assert_int_equal(recs[2].port, 27019);

	/* more records than room */
	assert_false(dns_parse_srv(m.b, m.n, recs, 2, &n, err, sizeof(err)));
	assert_non_null(strstr(err, "more than 2 SRV records"));
}

static void test_srv_malformed(void **state)
{
	msg m;
	begin(&m, "_mongodb._tcp.rs.example.com", 33);
	add_srv(&m, 27017, "db1.example.com");
	dns_srv recs[4];
	size_t n;
	char err[256];
	/* cut inside the record */
	assert_false(dns_parse_srv(m.b, m.n - 5, recs, 4, &n, err, sizeof(err)));
	assert_non_null(strstr(err, "malformed"));
	/* shorter than a header */
	assert_false(dns_parse_srv(m.b, 7, recs, 4, &n, err, sizeof(err)));
	assert_non_null(strstr(err, "malformed DNS answer"));
	/* port 0 */
	begin(&m, "_mongodb._tcp.rs.example.com", 33);
	add_srv(&m, 0, "db1.example.com");
	assert_false(dns_parse_srv(m.b, m.n, recs, 4, &n, err, sizeof(err)));
	assert_non_null(strstr(err, "port 0"));
}

static void test_txt(void **state)
{
	msg m;
	char out[256], err[256];
	bool found;
	/* several strings in one record are one string */
	begin(&m, "rs.example.com", 16);
	add_txt(&m, "replicaSet=rs0", "&authSource=adm", "in", NULL);
	assert_true(dns_parse_txt(m.b, m.n, out, sizeof(out), &found, err, sizeof(err)));
	assert_true(found);
	assert_string_equal(out, "replicaSet=rs0&authSource=admin");
	/* two records: refused */
	add_txt(&m, "loadBalanced=true", NULL);
	assert_false(dns_parse_txt(m.b, m.n, out, sizeof(out), &found, err, sizeof(err)));
	assert_non_null(strstr(err, "more than one TXT record"));
	/* none */
	begin(&m, "rs.example.com", 16);
	assert_true(dns_parse_txt(m.b, m.n, out, sizeof(out), &found, err, sizeof(err)));
	assert_false(found);
	assert_string_equal(out, "");
	/* a string length past the record's end */
	begin(&m, "rs.example.com", 16);
	size_t at = begin_rr(&m, 16);
	put8(&m, 40);
	put8(&m, 'x');
	end_rr(&m, at);
	assert_false(dns_parse_txt(m.b, m.n, out, sizeof(out), &found, err, sizeof(err)));
	assert_non_null(strstr(err, "malformed TXT"));
	/* too long for the caller */
	begin(&m, "rs.example.com", 16);
	add_txt(&m, "replicaSet=a-rather-long-name", NULL);
	assert_false(dns_parse_txt(m.b, m.n, out, 10, &found, err, sizeof(err)));
	assert_non_null(strstr(err, "longer than 9 bytes"));
}

static void test_addr(void **state)
{
	msg m;
	begin(&m, "db1.example.com", 1);
	add_a(&m, "127.0.0.9");
	add_a(&m, "127.0.0.10");
	net_addr a;
	bool found;
	char err[256];
	assert_true(dns_parse_addr(m.b, m.n, 27017, &a, &found, err, sizeof(err)));
	assert_true(found);
	const struct sockaddr_in *in = (const struct sockaddr_in *)&a.ss;
	assert_int_equal(in->sin_family, AF_INET);
	assert_int_equal(ntohs(in->sin_port), 27017);
	assert_int_equal(ntohl(in->sin_addr.s_addr), 0x7f000009); /* the first record */
	begin(&m, "db1.example.com", 1);
	assert_true(dns_parse_addr(m.b, m.n, 27017, &a, &found, err, sizeof(err)));
	assert_false(found);
}

static void test_dns_server_spec(void **state)
{
	char err[256];
	assert_true(dns_server_valid("", err, sizeof(err)));
	assert_true(dns_server_valid("127.0.0.1", err, sizeof(err)));
	assert_true(dns_server_valid("127.0.0.1:5353", err, sizeof(err)));
	assert_false(dns_server_valid("localhost:53", err, sizeof(err)));
	assert_non_null(strstr(err, "IPv4 address"));
	assert_false(dns_server_valid("127.0.0.1:0", err, sizeof(err)));
	assert_false(dns_server_valid("127.0.0.1:", err, sizeof(err)));
	assert_false(dns_server_valid("127.0.0.1:99999", err, sizeof(err)));
}

/* ---- the seedlist rules ---- */

static void test_parent_domain(void **state)
{
	/* three labels or more: the parent domain */
	assert_true(srv_target_allowed("rs.example.com", "db1.example.com"));
	assert_true(srv_target_allowed("rs.example.com", "a.b.EXAMPLE.com"));
	assert_false(srv_target_allowed("rs.example.com", "db1.evil.com"));
	assert_false(srv_target_allowed("rs.example.com", "db1example.com"));
	assert_false(srv_target_allowed("rs.example.com", "example.com"));
	/* fewer: the host itself, and one more label at least */
	assert_true(srv_target_allowed("mongoguard.test", "db.mongoguard.test"));
	assert_false(srv_target_allowed("mongoguard.test", "mongoguard.test"));
	assert_false(srv_target_allowed("mongoguard.test", "other.test"));
	assert_true(srv_target_allowed("localhost", "db.localhost"));
	assert_false(srv_target_allowed("localhost", "localhost"));
}

static const dns_srv two[] = {{"db1.example.com", 27017}, {"db2.example.com", 27018}};

static void test_compose(void **state)
{
	char out[1024], err[256];
	assert_true(srv_compose("mongodb+srv://rs.example.com/", two, 2, NULL, out, sizeof(out),
	                        err, sizeof(err)));
	assert_string_equal(out, "mongodb://db1.example.com:27017,db2.example.com:27018/?tls=true");
	/* the spec's example: TXT options after the URI's, the URI's win */
	assert_true(srv_compose("mongodb+srv://u:p%40ss@rs.example.com/app?authSource=otherDB", two,
	                        2, "replicaSet=replProduction&authSource=authDB", out, sizeof(out),
	                        err, sizeof(err)));
	assert_string_equal(out, "mongodb://u:p%40ss@db1.example.com:27017,db2.example.com:27018/"
	                         "app?authSource=otherDB&replicaSet=replProduction&tls=true");
	/* tls=false in the URI stays; srvServiceName goes */
	assert_true(srv_compose("mongodb+srv://rs.example.com/?srvServiceName=customname&tls=false",
	                        two, 1, "loadBalanced=true", out, sizeof(out), err, sizeof(err)));
	assert_string_equal(out, "mongodb://db1.example.com:27017/?tls=false&loadBalanced=true");
	/* ssl= counts as tls= */
	assert_true(srv_compose("mongodb+srv://rs.example.com/?ssl=false", two, 1, "", out,
	                        sizeof(out), err, sizeof(err)));
	assert_string_equal(out, "mongodb://db1.example.com:27017/?ssl=false");
}

static void test_compose_refusals(void **state)
{
	char out[1024], err[256];
	const dns_srv outside[] = {{"db1.example.com", 27017}, {"db2.attacker.com", 27017}};
	assert_false(srv_compose("mongodb+srv://rs.example.com/", outside, 2, NULL, out,
	                         sizeof(out), err, sizeof(err)));
	assert_non_null(strstr(err, "db2.attacker.com, which is not in its parent domain"));
	assert_false(srv_compose("mongodb+srv://rs.example.com/", two, 0, NULL, out, sizeof(out),
	                         err, sizeof(err)));
	assert_non_null(strstr(err, "no SRV records for rs.example.com"));
	assert_false(srv_compose("mongodb+srv://rs.example.com/", two, 2, "ssl=true", out,
	                         sizeof(out), err, sizeof(err)));
	assert_non_null(strstr(err, "TXT record option 'ssl=true' is not allowed"));
	assert_false(srv_compose("mongodb+srv://rs.example.com/", two, 2, "replicaSet", out,
	                         sizeof(out), err, sizeof(err)));
	assert_non_null(strstr(err, "has no value"));
	assert_false(srv_compose("mongodb+srv://rs.example.com/?srvMaxHosts=1", two, 2, NULL, out,
	                         sizeof(out), err, sizeof(err)));
	assert_non_null(strstr(err, "srvMaxHosts=1 is not supported"));
	/* libmongoc's parser: a port, or two hosts, in an SRV URI */
	assert_false(srv_compose("mongodb+srv://rs.example.com:27017/", two, 2, NULL, out,
	                         sizeof(out), err, sizeof(err)));
	assert_non_null(strstr(err, "invalid upstream URI"));
	assert_false(srv_compose("mongodb+srv://a.example.com,b.example.com/", two, 2, NULL, out,
	                         sizeof(out), err, sizeof(err)));
	assert_non_null(strstr(err, "invalid upstream URI"));
}

static void test_with_hosts(void **state)
{
	char out[512];
	assert_true(srv_with_hosts("mongodb://u:p@db1.example.com:27017,db2:1/app?replicaSet=rs0",
	                           "10.0.0.1:27017,10.0.0.2:1", out, sizeof(out)));
	assert_string_equal(out, "mongodb://u:p@10.0.0.1:27017,10.0.0.2:1/app?replicaSet=rs0");
	assert_true(srv_with_hosts("mongodb://db1", "10.0.0.1:27017", out, sizeof(out)));
	assert_string_equal(out, "mongodb://10.0.0.1:27017/");
	assert_false(srv_with_hosts("mongodb://db1/", "10.0.0.1:27017", out, 10));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_srv_records),
	    cmocka_unit_test(test_srv_malformed),
	    cmocka_unit_test(test_txt),
	    cmocka_unit_test(test_addr),
	    cmocka_unit_test(test_dns_server_spec),
	    cmocka_unit_test(test_parent_domain),
	    cmocka_unit_test(test_compose),
	    cmocka_unit_test(test_compose_refusals),
	    cmocka_unit_test(test_with_hosts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
