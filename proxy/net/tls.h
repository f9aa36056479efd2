/* TLS on both sides, with OpenSSL under libevent's bufferevent_openssl.
 *
 * Client side, mongod's names: net.tls.mode (disabled, allowTLS, preferTLS,
 * requireTLS), net.tls.certificateKeyFile (certificate and key in one PEM),
 * net.tls.CAFile (when given, client certificates are verified and
 * required unless allowConnectionsWithoutCertificates), a minimum of TLS
 * 1.2 (net.tls.disabledProtocols may raise it), net.tls.ciphers. Plain and
 * TLS clients share a port unless the mode is requireTLS: the first bytes
 * decide (tls_sniff).
 *
 * Upstream side, from the URI: tls=true, tlsCAFile, tlsCertificateKeyFile,
 * tlsAllowInvalidHostnames, tlsAllowInvalidCertificates, tlsInsecure. The
 * server's certificate is verified, and its host name checked, by default.
 *
 * A net_tls is built whole from the configuration and never changed, so a
 * reload (re-reading certificate files) can build a new one and hand it to
 * new sessions while old sessions keep theirs. */
#ifndef MG_PROXY_NET_TLS_H
#define MG_PROXY_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

typedef enum {
	TLS_MODE_DISABLED,
	TLS_MODE_ALLOW,   /* allowTLS: plain and TLS clients */
	TLS_MODE_PREFER,  /* preferTLS: the same, for clients */
	TLS_MODE_REQUIRE, /* requireTLS: plain clients are refused */
} tls_mode;

/* net.tls.* as the configuration holds it. */
typedef struct tls_client_side_config {
	tls_mode mode;
	char certificate_key_file[1024];
	char ca_file[1024];
	bool allow_without_certificates;
	char disabled_protocols[64]; /* "TLS1_0,TLS1_1" (always) or "TLS1_2" too */
	char ciphers[512];           /* OpenSSL cipher list for TLS 1.2, "" = default */
} tls_client_side_config;

/* The upstream URI's TLS options. */
typedef struct tls_upstream_config {
	bool enabled;
	char ca_file[1024];
	char certificate_key_file[1024];
	bool allow_invalid_hostnames;
	bool allow_invalid_certificates; /* tlsInsecure implies both */
} tls_upstream_config;

typedef struct net_tls {
	tls_mode mode;
	SSL_CTX *server;   /* for clients; NULL when mode is disabled */
	SSL_CTX *upstream; /* NULL: plain TCP to the upstream */
	bool check_host;   /* verify the upstream certificate's host name */
} net_tls;

/* Builds both contexts. False with err set (a file that cannot be read,
 * a key that does not match, a bad cipher list...). */
bool tls_build(net_tls *t, const tls_client_side_config *c, const tls_upstream_config *u, char *err,
               size_t errlen) __attribute__((warn_unused_result));

void tls_free(net_tls *t);

/* "allowTLS" etc. to a mode; -1 when unknown. */
int tls_mode_from_name(const char *s);
const char *tls_mode_name(tls_mode m);

typedef enum {
	TLS_SNIFF_NEED_MORE,
	TLS_SNIFF_TLS,   /* a TLS handshake record holding a ClientHello */
	TLS_SNIFF_PLAIN, /* anything else: a MongoDB message */
} tls_sniff_result;

enum { TLS_SNIFF_LEN = 6 };

/* The first n bytes a client sent. A MongoDB message opens with a
 * little-endian length that can begin 0x16 0x03 too, so the record header
 * and the handshake type after it are all checked. */
tls_sniff_result tls_sniff(const uint8_t *p, size_t n);

/* A new SSL for a connection to the upstream host (a name or an address,
 * no port): SNI for names, and the host check when t->check_host. NULL
 * with err set. */
SSL *tls_upstream_ssl(const net_tls *t, const char *host, char *err, size_t errlen);

/* The last OpenSSL error, in words, for logs ("certificate verify failed
 * (unable to get local issuer certificate)"). */
void tls_error_text(unsigned long code, long verify_result, char *buf, size_t size);

#endif
