/* DNS lookups for the upstream: SRV, TXT, A and AAAA through libresolv,
 * so mongoguard can resolve `mongodb+srv://` names and re-resolve host
 * names on a timer. Blocking: callers run them off the request path (at
 * start-up, and on the resolver thread).
 *
 * The answer parsers take the bytes of one DNS message and are pure, so
 * tests feed them recorded answers. */
#ifndef MG_PROXY_NET_DNS_H
#define MG_PROXY_NET_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/net/address.h"

enum { DNS_NAME_LEN = 256, DNS_MAX_SRV = 32, DNS_TXT_LEN = 2048 };

/* One SRV record: where a member is. Priority and weight are read past
 * (the seedlist spec says to ignore them). */
typedef struct dns_srv {
	char target[DNS_NAME_LEN]; /* without the trailing dot */
	unsigned port;
} dns_srv;

/* The SRV records of one answer into out (at most max). False with err
 * set when the message does not parse or holds more than max. */
bool dns_parse_srv(const uint8_t *msg, size_t len, dns_srv *out, size_t max, size_t *n, char *err,
                   size_t errlen) __attribute__((warn_unused_result));

/* The one TXT record of an answer, its strings concatenated in order
 * into out. *found false (and out "") when the answer has none; false
 * with err set when it does not parse, holds two TXT records (the spec
 * forbids it) or does not fit. */
bool dns_parse_txt(const uint8_t *msg, size_t len, char *out, size_t size, bool *found, char *err,
                   size_t errlen) __attribute__((warn_unused_result));

/* The first A or AAAA record of an answer, with port, into *out (its
 * name is left alone). *found false when the answer has none. */
bool dns_parse_addr(const uint8_t *msg, size_t len, unsigned port, net_addr *out, bool *found,
                    char *err, size_t errlen) __attribute__((warn_unused_result));

/* Which name server to ask: "" = the system's (/etc/resolv.conf), else
 * "IPv4[:PORT]" (port 53 when left out), for tests and special
 * resolvers (upstream.dnsServer). */
bool dns_server_valid(const char *server, char *err, size_t errlen)
    __attribute__((warn_unused_result));

typedef enum {
	DNS_OK,
	DNS_NO_RECORD, /* the name does not exist, or has no record of that type */
	DNS_FAILED,    /* no usable answer: timeout, server failure, refused */
} dns_status;

/* Asks server (see dns_server_valid) for name's records of type (ns_t_*
 * values: 33 SRV, 16 TXT, 1 A, 28 AAAA); the answer's bytes into buf.
 * err says why for anything but DNS_OK. */
dns_status dns_query(const char *server, const char *name, int type, uint8_t *buf, size_t size,
                     size_t *len, char *err, size_t errlen) __attribute__((warn_unused_result));

/* host (a name or an address literal) and port to an address: through
 * server when one is given (A, then AAAA), else getaddrinfo(), which
 * also reads /etc/hosts. out->name is left alone. */
bool dns_lookup_host(const char *server, const char *host, unsigned port, net_addr *out, char *err,
                     size_t errlen) __attribute__((warn_unused_result));

#endif
