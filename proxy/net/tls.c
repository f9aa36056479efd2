/* TLS contexts and the first-bytes sniff (see tls.h). */
#include "proxy/net/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

static const char *const mode_names[] = {"disabled", "allowTLS", "preferTLS", "requireTLS"};

int tls_mode_from_name(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(s, mode_names[i]))
			return i;
	return -1;
}

const char *tls_mode_name(tls_mode m)
{
	return mode_names[m];
}

tls_sniff_result tls_sniff(const uint8_t *p, size_t n)
{
	/* content type 22 (handshake), major version 3, a minor version of
	 * SSL 3.0 .. TLS 1.3, a record length, then handshake type 1 */
	static const uint8_t head[2] = {0x16, 0x03};
	for (size_t i = 0; i < n && i < 2; i++)
		if (p[i] != head[i])
			return TLS_SNIFF_PLAIN;
	if (n >= 3 && p[2] > 0x04)
		return TLS_SNIFF_PLAIN;
	if (n < TLS_SNIFF_LEN)
		return TLS_SNIFF_NEED_MORE;
	return p[5] == 0x01 ? TLS_SNIFF_TLS : TLS_SNIFF_PLAIN;
}

void tls_error_text(unsigned long code, long verify_result, char *buf, size_t size)
{
	char e[256] = "";
	if (code)
		ERR_error_string_n(code, e, sizeof(e));
	const char *reason = code ? ERR_reason_error_string(code) : NULL;
	if (verify_result != X509_V_OK)
		snprintf(buf, size, "%s (%s)", reason ? reason : "certificate verify failed",
		         X509_verify_cert_error_string(verify_result));
	else
		snprintf(buf, size, "%s", reason ? reason : code ? e : "TLS handshake failed");
}

static bool ssl_fail(char *err, size_t errlen, const char *what, const char *file)
{
	char e[256];
	tls_error_text(ERR_get_error(), X509_V_OK, e, sizeof(e));
	ERR_clear_error();
	snprintf(err, errlen, "%s%s%s: %s", what, file ? " " : "", file ? file : "", e);
	return false;
}

/* TLS 1.2 at least; net.tls.disabledProtocols naming TLS1_2 raises it to
 * 1.3. Older protocols are never offered whatever it says. */
static bool set_versions(SSL_CTX *ctx, const char *disabled, char *err, size_t errlen)
{
	int min = TLS1_2_VERSION;
	if (disabled && strstr(disabled, "TLS1_2"))
		min = TLS1_3_VERSION;
	if (disabled && strstr(disabled, "TLS1_3") && min == TLS1_3_VERSION) {
		snprintf(err, errlen,
		         "net.tls.disabledProtocols leaves no protocol (TLS 1.2 is the "
		         "oldest mongoguard speaks)");
		return false;
	}
	if (disabled && strstr(disabled, "TLS1_3"))
		SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_min_proto_version(ctx, min);
	return true;
}

static bool load_cert_key(SSL_CTX *ctx, const char *file, const char *what, char *err,
                          size_t errlen)
{
	if (SSL_CTX_use_certificate_chain_file(ctx, file) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, file, SSL_FILETYPE_PEM) != 1)
		return ssl_fail(err, errlen, what, file);
	if (SSL_CTX_check_private_key(ctx) != 1)
		return ssl_fail(err, errlen, "the key does not match the certificate in", file);
	return true;
}

static SSL_CTX *server_ctx(const tls_client_side_config *c, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		ssl_fail(err, errlen, "cannot create a TLS context", NULL);
		return NULL;
	}
	/* a client that closes without close_notify has closed, not failed */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	bool ok = set_versions(ctx, c->disabled_protocols, err, errlen);
	if (ok && !c->certificate_key_file[0]) {
		snprintf(err, errlen, "net.tls.mode %s needs net.tls.certificateKeyFile",
		         tls_mode_name(c->mode));
		ok = false;
	}
	ok = ok &&
	     load_cert_key(ctx, c->certificate_key_file, "net.tls.certificateKeyFile", err, errlen);
	if (ok && c->ciphers[0] && SSL_CTX_set_cipher_list(ctx, c->ciphers) != 1)
		ok = ssl_fail(err, errlen, "net.tls.ciphers", c->ciphers);
	if (ok && c->ca_file[0]) {
		if (SSL_CTX_load_verify_locations(ctx, c->ca_file, NULL) != 1)
			ok = ssl_fail(err, errlen, "net.tls.CAFile", c->ca_file);
		int mode = SSL_VERIFY_PEER;
		if (!c->allow_without_certificates)
			mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
		SSL_CTX_set_verify(ctx, mode, NULL);
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(c->ca_file);
		if (names)
			SSL_CTX_set_client_CA_list(ctx, names);
	}
	if (!ok) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static SSL_CTX *upstream_ctx(const tls_upstream_config *u, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx) {
		ssl_fail(err, errlen, "cannot create a TLS context", NULL);
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	bool ok = set_versions(ctx, NULL, err, errlen);
	if (ok && u->ca_file[0] && SSL_CTX_load_verify_locations(ctx, u->ca_file, NULL) != 1)
		ok = ssl_fail(err, errlen, "tlsCAFile", u->ca_file);
	if (ok && !u->ca_file[0] && SSL_CTX_set_default_verify_paths(ctx) != 1)
		ok = ssl_fail(err, errlen, "the system's CA certificates", NULL);
	if (ok && u->certificate_key_file[0])
		ok = load_cert_key(ctx, u->certificate_key_file, "tlsCertificateKeyFile", err,
		                   errlen);
	SSL_CTX_set_verify(ctx, u->allow_invalid_certificates ? SSL_VERIFY_NONE : SSL_VERIFY_PEER,
	                   NULL);
	if (!ok) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

bool tls_build(net_tls *t, const tls_client_side_config *c, const tls_upstream_config *u, char *err,
               size_t errlen)
{
	memset(t, 0, sizeof(*t));
	t->mode = c->mode;
	if (c->mode != TLS_MODE_DISABLED && !(t->server = server_ctx(c, err, errlen)))
		return false;
	if (u->enabled && !(t->upstream = upstream_ctx(u, err, errlen))) {
		tls_free(t);
		return false;
	}
	t->check_host = u->enabled && !u->allow_invalid_hostnames && !u->allow_invalid_certificates;
	return true;
}

void tls_free(net_tls *t)
{
	SSL_CTX_free(t->server);
	SSL_CTX_free(t->upstream);
	t->server = t->upstream = NULL;
}

SSL *tls_upstream_ssl(const net_tls *t, const char *host, char *err, size_t errlen)
{
	SSL *ssl = SSL_new(t->upstream);
	if (!ssl) {
		ssl_fail(err, errlen, "cannot create a TLS connection", NULL);
		return NULL;
	}
	unsigned char addr[16];
	bool is_ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
	if (!is_ip)
		SSL_set_tlsext_host_name(ssl, host);
	if (t->check_host) {
		X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
		int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, host)
		               : X509_VERIFY_PARAM_set1_host(vp, host, 0);
		if (ok != 1) {
			SSL_free(ssl);
			ssl_fail(err, errlen, "cannot set the host name to check", host);
			return NULL;
		}
	}
	return ssl;
}
