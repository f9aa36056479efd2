/* The deterministic session harness (session_harness.h says what it is). */
#define _GNU_SOURCE
#include "session_harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "analyzers/engine/engine.h"
#include "proxy/admin/metrics.h"
#include "proxy/runtime/snapshot.h"
#include "proxy/stats/workload.h"
#include "proxy/sinks/log.h"

/* OP_MSG, OP_QUERY and OP_REPLY come with the session's headers (protocol/). */
enum {
	MSG_MORE_TO_COME = 1 << 1,
	MAX_WIRE = 48000000,
};

/* ---- the virtual clock and the epoll count ---- */

static bool virt_on;                         /* a world exists */
static int64_t virt_ns = 1000000000000000LL; /* monotonic "now" while on: never goes back */
static uint64_t epoll_ready;                 /* readiness reported by epoll_wait */

static bool is_monotonic(clockid_t id)
{
	return id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_COARSE || id == CLOCK_MONOTONIC_RAW ||
	       id == CLOCK_BOOTTIME;
}

/* libevent (a shared library) and mg_now_ms() both resolve to this one. */
int clock_gettime(clockid_t id, struct timespec *ts)
{
	if (virt_on && is_monotonic(id)) {
		ts->tv_sec = virt_ns / 1000000000;
		ts->tv_nsec = virt_ns % 1000000000;
		return 0;
	}
	return (int)syscall(SYS_clock_gettime, id, ts);
}

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	static int (*real)(int, struct epoll_event *, int, int);
	if (!real)
		real = (int (*)(int, struct epoll_event *, int, int))dlsym(RTLD_NEXT, "epoll_wait");
	int n = real(epfd, events, maxevents, timeout);
	if (n > 0)
		epoll_ready += (uint64_t)n;
	return n;
}

int64_t hx_now_ms(void)
{
	return virt_ns / 1000000;
}

/* ---- the world ---- */

struct hx_world {
	struct event_base *base;
	snapshot snap;
	snapshot *snapp;
	upstream_target up;
	int lfd; /* the upstream's listener */
	session_ids ids;
	atomic_bool draining;
	atomic_uint nconns;
	metrics_shard mx;
	workload *wl;
	struct evbuffer *stage, *stage_replies;
	SSL_CTX *server, *client;
	net_tls up_tls; /* .upstream: the sessions' TLS to the upstream, or NULL */
	char log_path[256];
};

/* A throwaway P-256 key and a self-signed certificate for "localhost" and
 * the upstream's name ("harness-upstream"), which are both sides' TLS
 * servers'; made once, as a key per world would cost more than the
 * session. */
static SSL_CTX *tls_server;
static X509 *tls_cert;

static void make_server_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	if (!ctx || !pk || !x)
		abort();
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, pk);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1,
	                           -1, 0);
	X509_set_issuer_name(x, name);
	X509_EXTENSION *san = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name,
	                                          "DNS:localhost,DNS:harness-upstream");
	if (!san || !X509_add_ext(x, san, -1) || !X509_sign(x, pk, EVP_sha256()) ||
	    SSL_CTX_use_certificate(ctx, x) != 1 || SSL_CTX_use_PrivateKey(ctx, pk) != 1)
		abort();
	X509_EXTENSION_free(san);
	EVP_PKEY_free(pk);
	tls_server = ctx;
	tls_cert = x;
}

static SSL_CTX *server_ctx(void)
{
	if (!tls_server)
		make_server_ctx();
	return tls_server;
}

static int upstream_listener(upstream_target *up)
{
	static unsigned n;
	struct sockaddr_un *sun = (struct sockaddr_un *)&up->ss;
	memset(up, 0, sizeof(*up));
	sun->sun_family = AF_UNIX;
	/* abstract: nothing on disk, gone with the socket */
	int len = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "mg-hx-%d-%u",
	                   (int)getpid(), n++);
	up->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
	snprintf(up->name, sizeof(up->name), "harness-upstream:1");
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)sun, up->len) < 0 || listen(fd, 64) < 0)
		abort();
	return fd;
}

hx_world *hx_world_new(bool tls, const char *log_path)
{
	hx_world *w = calloc(1, sizeof(*w));
	if (!w)
		abort();
	virt_on = true;
	signal(SIGPIPE, SIG_IGN); /* as the server does (server.c) */
	snprintf(w->log_path, sizeof(w->log_path), "%s", log_path ? log_path : "/dev/null");
	if (!log_open(w->log_path, LOG_INFO))
		abort();
	w->base = event_base_new();
	w->stage = evbuffer_new();
	w->stage_replies = evbuffer_new();
	if (!w->base || !w->stage || !w->stage_replies)
		abort();
	config_defaults(&w->snap.cfg);
	w->snap.cfg.max_frame_wait_ms = HX_FRAME_WAIT_MS;
	w->snap.cfg.reply_timeout_ms = HX_REPLY_TIMEOUT_MS;
	w->snapp = &w->snap;
	w->lfd = upstream_listener(&w->up);
	atomic_init(&w->draining, false);
	atomic_init(&w->nconns, 1);
	if (tls) {
		static SSL_CTX *client; /* made once, as the server's */
		if (!client) {
			client = SSL_CTX_new(TLS_client_method());
			if (!client)
				abort();
			SSL_CTX_set_verify(client, SSL_VERIFY_NONE, NULL);
		}
		w->server = server_ctx();
		w->client = client;
	}
	return w;
}

void hx_world_tls_upstream(hx_world *w)
{
	server_ctx();
	tls_client_side_config cs = {.mode = TLS_MODE_DISABLED};
	tls_upstream_config u = {.enabled = true};
	snprintf(u.ca_file, sizeof(u.ca_file), "/tmp/mg-hx-ca.XXXXXX");
	int fd = mkstemp(u.ca_file);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || PEM_write_X509(f, tls_cert) != 1 || fclose(f) != 0)
		abort();
	char err[256];
	tls_free(&w->up_tls);
	bool built = tls_build(&w->up_tls, &cs, &u, err, sizeof(err));
	unlink(u.ca_file);
	if (!built || !w->up_tls.check_host) {
		fprintf(stderr, "session harness: upstream TLS: %s\n",
		        built ? "no host check" : err);
		abort();
	}
}

void hx_world_free(hx_world *w)
{
	if (w->lfd >= 0)
		close(w->lfd);
	evbuffer_free(w->stage);
	evbuffer_free(w->stage_replies);
	tls_free(&w->up_tls);
	event_base_free(w->base);
	engine_free(w->snap.engine);
	workload_free(w->wl);
	log_close();
	free(w);
	virt_on = false;
}

void hx_world_refuse(hx_world *w)
{
	if (w->lfd >= 0)
		close(w->lfd);
	w->lfd = -1;
}

struct mg_config *hx_config(hx_world *w)
{
	return &w->snap.cfg;
}

void hx_world_engine(hx_world *w, engine *e)
{
	engine_free(w->snap.engine);
	w->snap.engine = e;
}

const metrics_shard *hx_metrics(const hx_world *w)
{
	return &w->mx;
}

void hx_world_workload(hx_world *w, workload *wl)
{
	workload_free(w->wl);
	w->wl = wl;
}

const workload *hx_workload(const hx_world *w)
{
	return w->wl;
}

/* ---- a conn ---- */

static void on_closed(void *owner, void *token)
{
	hx_conn *c = token;
	c->closed = true;
	c->s = NULL;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	return p;
}

hx_conn *hx_conn_start(hx_world *w)
{
	hx_conn *c = calloc(1, sizeof(*c));
	if (!c)
		abort();
	c->w = w;
	c->ufd = -1;
	c->up_hash = 0xcbf29ce484222325ull; /* FNV-1a's offset basis */
	c->out = xmalloc(HX_BUF);
	c->got = xmalloc(HX_BUF);
	c->got_cap = HX_BUF;
	c->up_in = xmalloc(HX_BUF);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	c->cfd = sv[1];
	c->cb0 = session_callbacks_run();
	c->ep0 = epoll_ready;
	session_env env = {
	    .base = w->base,
	    .snap = &w->snapp,
	    .up = &w->up,
	    .ids = &w->ids,
	    .draining = &w->draining,
	    .nconns = &w->nconns,
	    .mx = &w->mx,
	    .workload = w->wl,
	    .stage = w->stage,
	    .stage_replies = w->stage_replies,
	    .on_closed = on_closed,
	    .owner = w,
	};
	if (w->server) {
		env.tls.server = w->server;
		env.tls.mode = TLS_MODE_ALLOW;
	}
	if (w->up_tls.upstream) {
		env.tls.upstream = w->up_tls.upstream;
		env.tls.check_host = w->up_tls.check_host;
		c->up_tls = true;
	}
	struct sockaddr_un peer = {.sun_family = AF_UNIX};
	c->s = session_start(&env, sv[0], (struct sockaddr *)&peer, sizeof(peer), c);
	if (c->s)
		c->id = session_id(c->s);
	hx_run(c);
	return c;
}

void hx_conn_free(hx_conn *c)
{
	if (c->s) {
		session_abort(c->s, "harness: end of test");
		hx_run(c);
	}
	if (c->cfd >= 0)
		close(c->cfd);
	if (c->ufd >= 0)
		close(c->ufd);
	SSL_free(c->ssl); /* frees its BIOs */
	SSL_free(c->up_ssl);
	free(c->up_out);
	free(c->out);
	free(c->got);
	free(c->up_in);
	free(c);
}

uint64_t hx_callbacks(const hx_conn *c)
{
	return session_callbacks_run() - c->cb0;
}

uint64_t hx_epoll_events(const hx_conn *c)
{
	return epoll_ready - c->ep0;
}

/* ---- the wire ---- */

static int32_t rd32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	                 (uint32_t)p[3] << 24);
}

static void wr32(uint8_t *p, int32_t v)
{
	uint32_t u = (uint32_t)v;
	p[0] = (uint8_t)u;
	p[1] = (uint8_t)(u >> 8);
	p[2] = (uint8_t)(u >> 16);
	p[3] = (uint8_t)(u >> 24);
}

static const uint8_t ok_doc[] = {17, 0, 0, 0, 0x01, 'o', 'k', 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0};

size_t hx_ping(uint8_t *buf, int32_t request_id)
{
	static const uint8_t doc[] = {30, 0, 0, 0,   0x10, 'p', 'i', 'n', 'g', 0,
	                              1,  0, 0, 0,   0x02, '$', 'd', 'b', 0,   6,
	                              0,  0, 0, 'a', 'd',  'm', 'i', 'n', 0,   0};
	size_t len = 16 + 4 + 1 + sizeof(doc);
	wr32(buf, (int32_t)len);
	wr32(buf + 4, request_id);
	wr32(buf + 8, 0);
	wr32(buf + 12, OP_MSG);
	wr32(buf + 16, 0);
	buf[20] = 0;
	memcpy(buf + 21, doc, sizeof(doc));
	return len;
}

int hx_replies_to(const hx_conn *c, int32_t request_id)
{
	int n = 0;
	for (size_t off = 0; off + 16 <= c->got_len;) {
		int32_t len = rd32(c->got + off);
		if (len < 16 || off + (size_t)len > c->got_len)
			break;
		if (rd32(c->got + off + 8) == request_id)
			n++;
		off += (size_t)len;
	}
	return n;
}

/* ---- the scripted upstream ---- */

static void send_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return; /* the session went: what it did not take is moot */
		p += w;
		n -= (size_t)w;
	}
}

/* n bytes appended to a buffer of the harness's that grows. */
static void grow_add(uint8_t **buf, size_t *len, size_t *cap, const uint8_t *p, size_t n)
{
	if (n > *cap - *len) {
		size_t want = *cap ? *cap : 4096;
		while (want - *len < n)
			want *= 2;
		uint8_t *b = realloc(*buf, want);
		if (!b)
			abort();
		*buf = b;
		*cap = want;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
}

/* The TLS upstream's ciphertext, moved to up_out. */
static void drain_up_wbio(hx_conn *c)
{
	uint8_t buf[16384];
	int n;
	while ((n = BIO_read(c->up_wbio, buf, sizeof(buf))) > 0)
		grow_add(&c->up_out, &c->up_out_len, &c->up_out_cap, buf, (size_t)n);
}

/* What the upstream answers: as it is, or, for TLS, one record per call
 * (SSL_write of up to 16 KiB), sent at the end of the turn. */
static void up_write(hx_conn *c, const uint8_t *p, size_t n)
{
	if (!c->up_ssl) {
		send_all(c->ufd, p, n);
		return;
	}
	ERR_clear_error();
	SSL_write(c->up_ssl, p, (int)n);
	drain_up_wbio(c);
}

/* {ok: 1}, and a string of reply_pad bytes when asked, into doc (room
 * enough); its length. */
static size_t ok_reply_doc(const hx_conn *c, uint8_t *doc)
{
	if (!c->reply_pad) {
		memcpy(doc, ok_doc, sizeof(ok_doc));
		return sizeof(ok_doc);
	}
	size_t at = sizeof(ok_doc) - 1; /* over its terminating 0 */
	memcpy(doc, ok_doc, at);
	doc[at++] = 0x02;
	memcpy(doc + at, "pad", 4);
	at += 4;
	wr32(doc + at, (int32_t)c->reply_pad + 1);
	at += 4;
	memset(doc + at, 'x', c->reply_pad);
	at += c->reply_pad;
	doc[at++] = 0; /* the string's */
	doc[at++] = 0; /* the document's */
	wr32(doc, (int32_t)at);
	return at;
}

size_t hx_reply_len(const hx_conn *c)
{
	return 16 + 4 + 1 + (c->reply_pad ? sizeof(ok_doc) + 10 + c->reply_pad : sizeof(ok_doc));
}

/* {ok: 1} for one request: OP_MSG for OP_MSG, OP_REPLY for OP_QUERY. */
static void answer(hx_conn *c, int32_t request_id, int32_t op)
{
	uint8_t small[128];
	size_t room = 64 + sizeof(ok_doc) + 16 + c->reply_pad;
	uint8_t *r = room <= sizeof(small) ? small : xmalloc(room);
	size_t len;
	if (op == OP_MSG) {
		len = 16 + 4 + 1 + ok_reply_doc(c, r + 21);
		wr32(r + 16, 0);
		r[20] = 0;
	} else {
		len = 16 + 20 + ok_reply_doc(c, r + 36);
		memset(r + 16, 0, 20);
		wr32(r + 32, 1); /* numberReturned */
	}
	wr32(r, (int32_t)len);
	wr32(r + 4, 1000000 + (int32_t)c->replies_sent);
	wr32(r + 8, request_id);
	wr32(r + 12, op == OP_MSG ? OP_MSG : OP_REPLY);
	up_write(c, r, len);
	c->replies_sent++;
	if (r != small)
		free(r);
}

/* n bytes the upstream got (plaintext), at the end of up_in: counted. */
static void up_took(hx_conn *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		c->up_hash = (c->up_hash ^ c->up_in[c->up_len + i]) * 0x100000001b3ull;
	c->up_seen += n;
	c->up_len += n;
}

/* The TLS upstream's handshake, then its plaintext into up_in. */
static void up_tls_progress(hx_conn *c)
{
	ERR_clear_error();
	if (!c->up_tls_done && SSL_do_handshake(c->up_ssl) == 1)
		c->up_tls_done = true;
	int n = 1;
	while (c->up_tls_done && n > 0) {
		if (c->up_len == HX_BUF)
			c->up_len = 0; /* more than a harness request: dropped unanswered */
		ERR_clear_error();
		n = SSL_read(c->up_ssl, c->up_in + c->up_len, (int)(HX_BUF - c->up_len));
		if (n > 0)
			up_took(c, (size_t)n);
	}
	drain_up_wbio(c);
}

static void up_tls_begin(hx_conn *c)
{
	c->up_ssl = SSL_new(server_ctx());
	BIO *r = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	if (!c->up_ssl || !r || !wb)
		abort();
	BIO_set_mem_eof_return(r, -1); /* empty: "want read", not an end */
	SSL_set_bio(c->up_ssl, r, wb);
	SSL_set_accept_state(c->up_ssl);
	c->up_rbio = r;
	c->up_wbio = wb;
}

/* Everything the socket holds; true when anything came. */
static bool read_upstream(hx_conn *c)
{
	bool acted = false;
	while (!(c->up_end_queued && c->up_end_reset)) {
		if (c->up_len == HX_BUF)
			c->up_len = 0; /* more than a harness request: dropped unanswered */
		uint8_t buf[16384];
		uint8_t *to = c->up_ssl ? buf : c->up_in + c->up_len;
		size_t room = c->up_ssl ? sizeof(buf) : HX_BUF - c->up_len;
		ssize_t n = recv(c->ufd, to, room, 0);
		if (n <= 0)
			break;
		acted = true;
		if (c->up_ssl)
			BIO_write(c->up_rbio, buf, (int)n);
		else
			up_took(c, (size_t)n);
	}
	if (c->up_ssl)
		up_tls_progress(c);
	return acted;
}

/* The end hx_upstream_end_after asked for, queued behind what was written. */
static void queue_end(hx_conn *c)
{
	if (c->up_end_queued)
		return;
	c->up_end_queued = true;
	if (c->up_end_notify && c->up_ssl && c->up_tls_done) {
		ERR_clear_error();
		SSL_shutdown(c->up_ssl);
		drain_up_wbio(c);
	}
}

/* Every whole request in up_in, answered unless mute or ended. */
static void answer_requests(hx_conn *c)
{
	size_t off = 0;
	while (c->up_len - off >= 16) {
		int32_t len = rd32(c->up_in + off);
		if (len < 16 || len > MAX_WIRE) {
			off = c->up_len; /* not a stream the harness can follow */
			break;
		}
		if ((size_t)len > c->up_len - off)
			break;
		const uint8_t *m = c->up_in + off;
		int32_t op = rd32(m + 12);
		bool wants = op == OP_QUERY ||
		             (op == OP_MSG && len >= 20 && !(rd32(m + 16) & MSG_MORE_TO_COME));
		c->requests_seen++;
		if (wants && !c->mute && !c->up_end_queued)
			answer(c, rd32(m + 4), op);
		if (c->up_end_after && c->replies_sent >= c->up_end_after)
			queue_end(c);
		off += (size_t)len;
	}
	memmove(c->up_in, c->up_in + off, c->up_len - off);
	c->up_len -= off;
}

/* up_out, as much as the socket takes, then the close when it is due;
 * true when anything went. */
static bool flush_upstream(hx_conn *c)
{
	bool acted = false;
	size_t sent = 0;
	int unread = 0;
	if (c->up_end_queued && c->up_end_reset &&
	    (ioctl(c->ufd, FIONREAD, &unread) != 0 || unread == 0))
		return false; /* waits for a request it will not read */
	while (sent < c->up_out_len) {
		ssize_t w = send(c->ufd, c->up_out + sent, c->up_out_len - sent, MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			break;
		if (w <= 0) { /* the session went: what it did not take is moot */
			sent = c->up_out_len;
			break;
		}
		sent += (size_t)w;
		acted = true;
	}
	if (sent > 0) { /* up_out stays NULL until a reply is queued */
		memmove(c->up_out, c->up_out + sent, c->up_out_len - sent);
		c->up_out_len -= sent;
	}
	if (c->up_end_queued && c->up_end_close && c->up_out_len == 0) {
		hx_upstream_close(c);
		acted = true;
	}
	return acted;
}

/* Accepts, reads and answers; true when it did anything. */
static bool serve_upstream(hx_conn *c)
{
	bool acted = false;
	if (c->w->lfd < 0)
		return false; /* refused (hx_world_refuse) */
	if (c->up_gone) {
		int fd = accept4(c->w->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			close(fd);
		return fd >= 0;
	}
	if (c->ufd < 0) {
		c->ufd = accept4(c->w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c->ufd < 0)
			return false;
		if (c->up_tls)
			up_tls_begin(c);
		acted = true;
	}
	acted |= read_upstream(c);
	answer_requests(c);
	if (c->up_end_after && c->replies_sent >= c->up_end_after)
		queue_end(c);
	acted |= flush_upstream(c);
	return acted;
}

void hx_upstream_end_after(hx_conn *c, uint64_t nth, bool notify, bool close)
{
	c->up_end_after = nth;
	c->up_end_notify = notify;
	c->up_end_close = close;
}

void hx_upstream_reset_after(hx_conn *c, uint64_t nth)
{
	hx_upstream_end_after(c, nth, false, true);
	c->up_end_reset = true;
}

/* ---- the scripted client ---- */

static void queue_out(hx_conn *c, const uint8_t *p, size_t n)
{
	if (n > HX_BUF - c->out_len)
		n = HX_BUF - c->out_len; /* more than any test writes */
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
	c->produced += n;
}

/* The TLS client's ciphertext, moved to out. */
static void drain_wbio(hx_conn *c)
{
	uint8_t buf[4096];
	int n;
	while (c->wbio && (n = BIO_read(c->wbio, buf, sizeof(buf))) > 0)
		queue_out(c, buf, (size_t)n);
}

static void tls_progress(hx_conn *c)
{
	if (!c->ssl)
		return;
	if (!c->tls_done) {
		ERR_clear_error();
		if (SSL_do_handshake(c->ssl) == 1) {
			c->tls_done = true;
			drain_wbio(c);
			c->hs_end = c->produced;
		}
	}
	if (c->tls_done) {
		uint8_t buf[4096];
		int n;
		ERR_clear_error();
		while ((n = SSL_read(c->ssl, buf, sizeof(buf))) > 0) {
			grow_add(&c->got, &c->got_len, &c->got_cap, buf, (size_t)n);
		}
	}
	drain_wbio(c);
}

/* Reads what the session sent the client; true when anything came. */
static bool serve_client(hx_conn *c)
{
	if (c->no_read || c->cfd < 0 || c->client_eof)
		return false;
	bool acted = false;
	uint8_t buf[16384];
	for (;;) {
		ssize_t n = recv(c->cfd, buf, sizeof(buf), 0);
		if (n == 0 ||
		    (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			c->client_eof = true;
			return true;
		}
		if (n < 0)
			break;
		acted = true;
		if (c->ssl) {
			BIO_write(c->rbio, buf, (int)n);
		} else {
			grow_add(&c->got, &c->got_len, &c->got_cap, buf, (size_t)n);
		}
	}
	if (acted)
		tls_progress(c);
	return acted;
}

void hx_queue_raw(hx_conn *c, const void *p, size_t n)
{
	queue_out(c, p, n);
}

void hx_queue_app(hx_conn *c, const void *p, size_t n)
{
	if (!c->ssl) {
		queue_out(c, p, n);
		return;
	}
	if (!c->tls_done)
		return; /* callers write plaintext only after the handshake */
	ERR_clear_error();
	SSL_write(c->ssl, p, (int)n);
	drain_wbio(c);
}

void hx_tls_begin(hx_conn *c)
{
	c->ssl = SSL_new(c->w->client);
	BIO *r = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	if (!c->ssl || !r || !wb)
		abort();
	BIO_set_mem_eof_return(r, -1); /* empty: "want read", not an end */
	SSL_set_bio(c->ssl, r, wb);
	SSL_set_connect_state(c->ssl);
	SSL_set_tlsext_host_name(c->ssl, "localhost");
	c->rbio = r;
	c->wbio = wb;
	tls_progress(c);
}

size_t hx_deliver(hx_conn *c, size_t n)
{
	if (c->cfd < 0)
		return 0;
	if (n > c->out_len)
		n = c->out_len;
	ssize_t w = n ? send(c->cfd, c->out, n, MSG_NOSIGNAL) : 0;
	if (w <= 0)
		return 0;
	memmove(c->out, c->out + w, c->out_len - (size_t)w);
	c->out_len -= (size_t)w;
	c->delivered += (uint64_t)w;
	return (size_t)w;
}

bool hx_flush(hx_conn *c)
{
	for (int i = 0; i < 64 && c->out_len && c->cfd >= 0; i++) {
		hx_deliver(c, c->out_len);
		if (!hx_run(c))
			return false;
	}
	return hx_run(c);
}

bool hx_tls_handshake(hx_conn *c)
{
	if (!c->ssl)
		hx_tls_begin(c);
	for (int i = 0; i < 32 && !c->closed; i++) {
		if (!hx_flush(c))
			return false;
		if (c->tls_done && c->out_len == 0)
			return hx_run(c);
	}
	return false;
}

void hx_tls_close_notify(hx_conn *c)
{
	if (!c->ssl || !c->tls_done)
		return;
	ERR_clear_error();
	SSL_shutdown(c->ssl);
	drain_wbio(c);
}

void hx_client_shutdown(hx_conn *c)
{
	if (c->cfd >= 0)
		shutdown(c->cfd, SHUT_WR);
}

void hx_client_close(hx_conn *c)
{
	if (c->cfd >= 0)
		close(c->cfd);
	c->cfd = -1;
}

void hx_upstream_close(hx_conn *c)
{
	if (c->ufd >= 0)
		close(c->ufd);
	c->ufd = -1;
	c->up_gone = true;
}

/* ---- running ---- */

bool hx_run(hx_conn *c)
{
	int quiet = 0;
	for (int turn = 0; turn < HX_MAX_TURNS; turn++) {
		bool acted = serve_upstream(c);
		acted |= serve_client(c);
		uint64_t cb = session_callbacks_run(), ep = epoll_ready;
		event_base_loop(c->w->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		c->turns++;
		acted |= session_callbacks_run() != cb || epoll_ready != ep;
		acted |= event_base_get_num_events(c->w->base, EVENT_BASE_COUNT_ACTIVE) > 0;
		quiet = acted ? 0 : quiet + 1;
		if (quiet == 2)
			return true;
	}
	fprintf(stderr, "session harness: the loop never got quiet in %d turns (%llu callbacks)\n",
	        HX_MAX_TURNS, (unsigned long long)hx_callbacks(c));
	return false;
}

bool hx_advance(hx_conn *c, uint64_t ms, uint64_t step_ms)
{
	while (ms) {
		uint64_t step = ms < step_ms ? ms : step_ms;
		virt_ns += (int64_t)step * 1000000;
		ms -= step;
		if (!hx_run(c))
			return false;
	}
	return true;
}

/* ---- the log ---- */

char *hx_log_line(hx_world *w, const hx_conn *c, int log_id, const char *text)
{
	FILE *f = fopen(w->log_path, "r");
	if (!f)
		return NULL;
	char ctx[64], id[32], *line = NULL, *found = NULL;
	size_t cap = 0;
	snprintf(ctx, sizeof(ctx), "\"ctx\":\"conn%llu\"", (unsigned long long)c->id);
	snprintf(id, sizeof(id), "\"id\":%d,", log_id);
	while (!found && getline(&line, &cap, f) > 0)
		if (strstr(line, ctx) && strstr(line, id) && strstr(line, text))
			found = strdup(line);
	free(line);
	fclose(f);
	return found;
}
