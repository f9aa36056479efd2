/* A session's start-up when memory runs out, with libevent's allocator
 * failing on demand (event_set_mem_functions) and every close() counted
 * (the test links with --wrap=close): each failure must close the
 * client's descriptor exactly once and call on_closed once. A second
 * close of the same number could close another connection's socket,
 * accepted in between on another thread.
 *
 * The same for a TLS buffer libevent cannot make: it frees the SSL it was
 * given itself, so the session must not (the test links with
 * --wrap=SSL_new and --wrap=SSL_free and counts the session's calls). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <event2/event.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>

#include "proxy/sinks/log.h"
#include "proxy/session/session.h"

/* ---- libevent's allocations, failing from the n-th one on ---- */

static int allocs_left = -1; /* -1: never fail */

static bool alloc_fails(void)
{
	if (allocs_left < 0)
		return false;
	if (allocs_left == 0)
		return true;
	allocs_left--;
	return false;
}

static void *ev_malloc(size_t n)
{
	return alloc_fails() ? NULL : malloc(n);
}

static void *ev_realloc(void *p, size_t n)
{
	return alloc_fails() ? NULL : realloc(p, n);
}

/* ---- close(), counted per descriptor ---- */

int __real_close(int fd);
int __wrap_close(int fd);

static int watched_fd = -1, watched_closes;

int __wrap_close(int fd)
{
	if (fd == watched_fd)
		watched_closes++;
	return __real_close(fd);
}

/* ---- the session's SSL_new and SSL_free, counted ---- */

SSL *__real_SSL_new(SSL_CTX *ctx);
SSL *__wrap_SSL_new(SSL_CTX *ctx);
void __real_SSL_free(SSL *ssl);
void __wrap_SSL_free(SSL *ssl);

static int ssl_news, ssl_frees;

SSL *__wrap_SSL_new(SSL_CTX *ctx)
{
	ssl_news++;
	return __real_SSL_new(ctx);
}

/* Counted, and not passed on: in these tests every SSL the session makes
 * is handed to libevent, so a free of the session's is a second free. */
void __wrap_SSL_free(SSL *ssl)
{
	ssl_frees++;
}

static int closed_calls;

static void on_closed(void *owner, void *token)
{
	closed_calls++;
}

/* Starts a session on one end of a socket pair with libevent failing its
 * n-th allocation from here (the sniff event with TLS on, then the two
 * timers). Returns whether the session started. */
static bool start_failing_at(int n, bool tls)
{
	struct event_base *base = event_base_new();
	assert_non_null(base);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	session_ids ids = {0};
	atomic_bool draining = false;
	atomic_uint nconns = 1;
	metrics_shard mx = {0};
	session_env env = {
	    .base = base,
	    .ids = &ids,
	    .draining = &draining,
	    .nconns = &nconns,
	    .mx = &mx,
	    .on_closed = on_closed,
	};
	SSL_CTX *ctx = tls ? SSL_CTX_new(TLS_server_method()) : NULL;
	env.tls.server = ctx;
	env.tls.mode = tls ? TLS_MODE_PREFER : TLS_MODE_DISABLED;
	struct sockaddr_storage peer = {.ss_family = AF_UNIX};
	watched_fd = sv[0];
	watched_closes = 0;
	closed_calls = 0;
	allocs_left = n;
	session *s = session_start(&env, sv[0], (struct sockaddr *)&peer, sizeof(peer), NULL);
	allocs_left = -1;
	watched_fd = -1;
	assert_null(s); /* every n given here is before the session could start */
	SSL_CTX_free(ctx);
	close(sv[1]);
	event_base_free(base);
	return s != NULL;
}

static void test_timer_failure_with_tls_closes_once(void **state)
{
	/* allocation 0 is the sniff event; 1 and 2 the timers */
	for (int n = 0; n <= 2; n++) {
		start_failing_at(n, true);
		assert_int_equal(watched_closes, 1);
		assert_int_equal(closed_calls, 1);
	}
}

static void test_timer_failure_without_tls_closes_once(void **state)
{
	for (int n = 0; n <= 1; n++) {
		start_failing_at(n, false);
		assert_int_equal(watched_closes, 1);
		assert_int_equal(closed_calls, 1);
	}
}

/* A session whose n-th libevent allocation, counted from `from`, fails:
 * client_tls, the client's buffer is TLS (a ClientHello's first bytes are
 * waiting, so the sniff makes it); else the upstream's is. Returns whether
 * the session made an SSL before it ended. */
static bool tls_buffer_failing_at(int n, bool client_tls)
{
	struct event_base *base = event_base_new();
	assert_non_null(base);
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	session_ids ids = {0};
	atomic_bool draining = false;
	atomic_uint nconns = 1;
	metrics_shard mx = {0};
	static snapshot snap;
	snap.cfg.max_frame_wait_ms = 5000;
	snap.cfg.connect_timeout_ms = 1000;
	snapshot *snapp = &snap;
	upstream_target up = {.len = sizeof(struct sockaddr_in)};
	struct sockaddr_in *sin = (struct sockaddr_in *)&up.ss;
	sin->sin_family = AF_INET;
	sin->sin_port = htons(1);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	strcpy(up.name, "127.0.0.1:1");
	session_env env = {
	    .base = base,
	    .snap = &snapp,
	    .up = &up,
	    .ids = &ids,
	    .draining = &draining,
	    .nconns = &nconns,
	    .mx = &mx,
	    .on_closed = on_closed,
	};
	SSL_CTX *server = client_tls ? SSL_CTX_new(TLS_server_method()) : NULL;
	SSL_CTX *client = client_tls ? NULL : SSL_CTX_new(TLS_client_method());
	env.tls.server = server;
	env.tls.upstream = client;
	env.tls.mode = client_tls ? TLS_MODE_ALLOW : TLS_MODE_DISABLED;
	static const uint8_t hello_head[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
	assert_int_equal(write(sv[1], hello_head, sizeof(hello_head)), sizeof(hello_head));
	struct sockaddr_storage peer = {.ss_family = AF_UNIX};
	closed_calls = ssl_news = ssl_frees = 0;
	/* with TLS for the client, the start makes its sniff event and two
	 * timers; the buffers are made when the loop runs the sniff */
	allocs_left = client_tls ? -1 : n;
	session *s = session_start(&env, sv[0], (struct sockaddr *)&peer, sizeof(peer), NULL);
	if (client_tls)
		allocs_left = n;
	for (int turn = 0; turn < 10 && closed_calls == 0; turn++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	allocs_left = -1;
	if (closed_calls == 0) /* it started: end it */
		session_abort(s, "test over");
	for (int turn = 0; turn < 10 && closed_calls == 0; turn++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	assert_int_equal(closed_calls, 1);
	/* the client's socket was closed: an end of stream, or a reset as
	 * it went with the sniffed bytes unread; never "nothing yet" */
	uint8_t b;
	ssize_t got = recv(sv[1], &b, 1, MSG_DONTWAIT);
	assert_true(got == 0 || (got < 0 && errno == ECONNRESET));
	SSL_CTX_free(server);
	SSL_CTX_free(client);
	close(sv[1]);
	event_base_free(base);
	return ssl_news > 0;
}

static void test_failed_tls_buffer_frees_its_ssl_once(void **state)
{
	for (int side = 0; side < 2; side++) {
		bool client_tls = side == 0;
		int n = 0;
		/* the first failure after the SSL is made is libevent's first
		 * allocation for its buffer */
		while (!tls_buffer_failing_at(n, client_tls)) {
			assert_int_equal(ssl_frees, 0);
			assert_true(++n < 64);
		}
		assert_int_equal(ssl_news, 1);
		assert_int_equal(ssl_frees, 0);
	}
}

int main(void)
{
	event_set_mem_functions(ev_malloc, ev_realloc, free);
	assert_true(log_open("-", LOG_WARNING));
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_timer_failure_with_tls_closes_once),
	    cmocka_unit_test(test_timer_failure_without_tls_closes_once),
	    cmocka_unit_test(test_failed_tls_buffer_frees_its_ssl_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
