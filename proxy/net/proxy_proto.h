/* The PROXY protocol (HAProxy's, versions 1 and 2): the header an L4 load
 * balancer puts before a client's bytes to say who the client really is.
 * With net.proxyProtocol on, every connection must begin with one; the
 * session reads it before anything else and logs and judges the client by
 * the address it names.
 *
 *   v1  "PROXY TCP4 192.0.2.1 198.51.100.1 56324 27018\r\n" (at most 107
 *       bytes; "PROXY UNKNOWN ...\r\n" keeps the connection's own address)
 *   v2  a 12-byte signature, version/command, family/protocol, a 2-byte
 *       length, then the addresses (and TLVs, skipped); the LOCAL command
 *       (a balancer's health check) keeps the connection's own address
 *
 * Pure: bytes in (the socket's first bytes, peeked), a result out. */
#ifndef MG_PROXY_NET_PROXY_PROTO_H
#define MG_PROXY_NET_PROXY_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The most a header may take: v1's 107, v2's 16 plus addresses and TLVs,
 * bounded as HAProxy bounds what it reads. */
#define PROXY_PROTO_MAX 536

typedef enum {
	PROXY_PROTO_NEED_MORE, /* a prefix of a header: wait for more bytes */
	PROXY_PROTO_INVALID,   /* not a header, or a broken one: why says which */
	PROXY_PROTO_OK,        /* a header of out->len bytes */
} proxy_proto_status;

typedef struct proxy_proto {
	size_t len;      /* the header's bytes, to consume before the client's */
	int version;     /* 1 or 2 */
	bool has_source; /* false: LOCAL or UNKNOWN, the connection's own address stands */
	struct sockaddr_storage source;
	socklen_t source_len;
} proxy_proto;

proxy_proto_status proxy_proto_parse(const uint8_t *p, size_t n, proxy_proto *out, char *why,
                                     size_t whylen) __attribute__((warn_unused_result));

#endif
