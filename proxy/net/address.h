/* Socket addresses as mongoguard's config and logs spell them. */
#ifndef MG_PROXY_NET_ADDRESS_H
#define MG_PROXY_NET_ADDRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* A resolved address and the text it came from. */
typedef struct net_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	char name[300]; /* "host:port" for logs and error replies */
} net_addr;

/* "HOST:PORT" or "[v6]:PORT" (HOST may be empty: every interface) to a
 * passive socket address. False with err set when it does not parse or
 * resolve. */
bool net_parse_listen(const char *spec, net_addr *out, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* "127.0.0.1:51234", "[::1]:51234" or "unix". */
void net_format_addr(const struct sockaddr *sa, char *buf, size_t size);

#endif
