/* A session's start-up when memory runs out, with libevent's allocator
 * failing on demand (event_set_mem_functions) and every close() counted
 * (the test links with --wrap=close): each failure must close the
 * client's descriptor exactly once and call on_closed once. A second
 * close of the same number could close another connection's socket,
 * accepted in between on another thread. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <event2/event.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

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

int main(void)
{
	event_set_mem_functions(ev_malloc, ev_realloc, free);
	assert_true(log_open("-", LOG_WARNING));
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_timer_failure_with_tls_closes_once),
	    cmocka_unit_test(test_timer_failure_without_tls_closes_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
