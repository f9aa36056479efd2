/* The transport's writes from a large request's own buffer
 * (transport_relay_buf), on a real socket pair with a small send buffer:
 * what the socket does not take is queued as a reference to the buffer,
 * never a copy, reaches the peer byte for byte and in order, and the
 * buffer is held exactly as long as an output refers to it, whoever lets
 * go first (the session, or libevent writing or freeing the output). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/session/transport.h"

enum { BIG = 4 * 1024 * 1024 };

typedef struct pair {
	struct event_base *base;
	transport_side t; /* the writing side, sv[0] */
	int peer;         /* sv[1], read by the test */
} pair;

static void pair_open(pair *p)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	int small = 64 * 1024;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	p->base = event_base_new();
	assert_non_null(p->base);
	p->t = (transport_side){0};
	p->t.bev = bufferevent_socket_new(p->base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(p->t.bev);
	bufferevent_enable(p->t.bev, EV_WRITE);
	p->peer = sv[1];
}

static void pair_close(pair *p)
{
	if (p->t.bev)
		bufferevent_free(p->t.bev);
	event_base_loop(p->base, EVLOOP_NONBLOCK); /* finalizers */
	event_base_free(p->base);
	close(p->peer);
}

static transport_buf *patterned(size_t len)
{
	transport_buf *b = transport_buf_new(len);
	assert_non_null(b);
	for (size_t i = 0; i < len; i++)
		b->data[i] = (uint8_t)(i * 7 + i / 4096);
	return b;
}

/* Runs the loop and reads the peer until want bytes arrived; returns them. */
static uint8_t *drain_peer(pair *p, size_t want)
{
	uint8_t *got = malloc(want);
	size_t have = 0;
	for (unsigned spins = 0; have < want && spins < 1000000; spins++) {
		event_base_loop(p->base, EVLOOP_NONBLOCK);
		ssize_t n = recv(p->peer, got + have, want - have, 0);
		if (n > 0)
			have += (size_t)n;
		else
			assert_true(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	}
	assert_int_equal(have, want);
	return got;
}

static size_t out_len(const pair *p)
{
	return evbuffer_get_length(bufferevent_get_output(p->t.bev));
}

/* A buffer larger than the socket takes: part goes at once, the rest is
 * queued by reference (the buffer is shared while it waits), and all of it
 * reaches the peer as it was; once written the buffer is ours alone. */
static void test_rest_is_referred_to_then_written(void **state)
{
	pair p;
	pair_open(&p);
	transport_buf *b = patterned(BIG);
	assert_true(transport_relay_buf(&p.t, true, b, 0, BIG));
	assert_true(out_len(&p) > 0 && out_len(&p) < BIG); /* some went at once */
	assert_true(transport_buf_queued(b));
	uint8_t *got = drain_peer(&p, BIG);
	assert_memory_equal(got, b->data, BIG);
	assert_int_equal(out_len(&p), 0);
	assert_false(transport_buf_queued(b));
	transport_buf_release(b);
	free(got);
	pair_close(&p);
}

/* Pieces of one buffer sent one after another (a request cut through as it
 * arrives), while earlier ones still wait, come out in order. */
static void test_pieces_in_order(void **state)
{
	pair p;
	pair_open(&p);
	transport_buf *b = patterned(BIG);
	const size_t cuts[] = {0, 100000, 100001, 1 << 20, 3 * (1 << 20) + 5, BIG - 16, BIG};
	for (size_t i = 0; i + 1 < sizeof(cuts) / sizeof(cuts[0]); i++)
		assert_true(transport_relay_buf(&p.t, true, b, cuts[i], cuts[i + 1] - cuts[i]));
	assert_true(transport_buf_queued(b));
	uint8_t *got = drain_peer(&p, BIG);
	assert_memory_equal(got, b->data, BIG);
	assert_false(transport_buf_queued(b));
	transport_buf_release(b);
	free(got);
	pair_close(&p);
}

/* The session lets go first (its request is done): the buffer lives on
 * until libevent has written it, then goes (the sanitizer build checks
 * that it is freed once, and not before). Copied first to compare. */
static void test_session_lets_go_first(void **state)
{
	pair p;
	pair_open(&p);
	transport_buf *b = patterned(BIG);
	uint8_t *want = malloc(BIG);
	memcpy(want, b->data, BIG);
	assert_true(transport_relay_buf(&p.t, true, b, 0, BIG));
	transport_buf_release(b); /* the output's references keep it */
	uint8_t *got = drain_peer(&p, BIG);
	assert_memory_equal(got, want, BIG);
	free(got);
	free(want);
	pair_close(&p);
}

/* The output is freed with pieces still queued (the session ended): its
 * references go with it. */
static void test_output_freed_first(void **state)
{
	pair p;
	pair_open(&p);
	transport_buf *b = patterned(BIG);
	assert_true(transport_relay_buf(&p.t, true, b, 0, BIG / 2));
	assert_true(transport_relay_buf(&p.t, true, b, BIG / 2, BIG / 2));
	assert_true(transport_buf_queued(b));
	bufferevent_free(p.t.bev);
	p.t.bev = NULL;
	event_base_loop(p.base, EVLOOP_NONBLOCK);
	assert_false(transport_buf_queued(b));
	transport_buf_release(b);
	pair_close(&p);
}

/* Not connected yet, or TLS (OpenSSL writes): nothing is sent at once,
 * all of it is queued by reference; and with something queued ahead, a
 * piece waits behind it rather than jumping the queue. */
static void test_queued_when_it_cannot_go_at_once(void **state)
{
	pair p;
	pair_open(&p);
	transport_buf *b = patterned(BIG);
	assert_true(transport_relay_buf(&p.t, false, b, 0, 1000));
	assert_int_equal(out_len(&p), 1000);
	p.t.tls = true;
	assert_true(transport_relay_buf(&p.t, true, b, 1000, 1000));
	assert_int_equal(out_len(&p), 2000);
	p.t.tls = false;
	assert_true(transport_relay_buf(&p.t, true, b, 2000, BIG - 2000));
	assert_int_equal(out_len(&p), BIG); /* behind the first two */
	uint8_t *got = drain_peer(&p, BIG);
	assert_memory_equal(got, b->data, BIG);
	assert_false(transport_buf_queued(b));
	transport_buf_release(b);
	free(got);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rest_is_referred_to_then_written),
	    cmocka_unit_test(test_pieces_in_order),
	    cmocka_unit_test(test_session_lets_go_first),
	    cmocka_unit_test(test_output_freed_first),
	    cmocka_unit_test(test_queued_when_it_cannot_go_at_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
