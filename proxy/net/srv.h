/* `mongodb+srv://` URIs, by MongoDB's "Initial DNS Seedlist Discovery"
 * spec: the SRV records of `_{srvServiceName}._tcp.{host}` give the hosts,
 * the host's one TXT record may give `authSource`, `replicaSet` and
 * `loadBalanced`, and TLS is on unless the URI says `tls=false`. The
 * result is the plain `mongodb://` URI the spec says to treat the SRV URI
 * as, so everything after (listeners, hello mapping, TLS, the index
 * cache's side connection) handles one kind of URI.
 *
 * srv_compose and srv_target_allowed are pure (tests give them recorded
 * answers); srv_expand does the DNS queries. */
#ifndef MG_PROXY_NET_SRV_H
#define MG_PROXY_NET_SRV_H

#include <stdbool.h>
#include <stddef.h>

#include "proxy/net/dns.h"

/* The URI starts with mongodb+srv:// (case-insensitive). */
bool srv_is_srv_uri(const char *uri);

/* target shares srv_host's {domainname} (srv_host less its first label
 * when it has three or more; the whole of it otherwise, and then target
 * must have more labels): the spec's defence against a DNS answer that
 * points clients at somebody else's hosts. Case-insensitive. */
bool srv_target_allowed(const char *srv_host, const char *target);

/* The plain URI for srv_uri given its SRV records and its TXT record's
 * text (NULL: none): hosts from the records, then the URI's own options,
 * then the TXT's options the URI does not set, then tls=true unless the
 * URI sets tls or ssl. srvServiceName and srvMaxHosts are dropped (they
 * mean nothing in a mongodb:// URI). False with err naming the rule
 * broken: no records, a target outside the domain, a TXT option other
 * than the three, srvMaxHosts > 0. */
bool srv_compose(const char *srv_uri, const dns_srv *recs, size_t n, const char *txt, char *out,
                 size_t size, char *err, size_t errlen) __attribute__((warn_unused_result));

/* srv_uri's SRV and TXT lookups through server ("" = the system's), then
 * srv_compose. */
bool srv_expand(const char *srv_uri, const char *server, char *out, size_t size, char *err,
                size_t errlen) __attribute__((warn_unused_result));

/* uri (mongodb://) with its host list replaced by hosts ("a:1,b:2"),
 * credentials, database and options kept. */
bool srv_with_hosts(const char *uri, const char *hosts, char *out, size_t size)
    __attribute__((warn_unused_result));

#endif
