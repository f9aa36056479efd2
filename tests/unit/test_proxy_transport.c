/* The transport's writes from a large request's own buffer
 * (transport_relay_buf), on a real socket pair with a small send buffer:
 * what the socket does not take is queued as a reference to the buffer,
 * never a copy, reaches the peer byte for byte and in order, and the
 * buffer is held exactly as long as an output refers to it, whoever lets
 * go first (the session, or libevent writing or freeing the output).
 * And its reads into the thread's pool of buffers: a buffer an input or
 * output still refers to is never read into again. */
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

/* ---- reads into the thread's pool ---- */

enum { READERS = 6 }; /* more than the pool holds */

typedef struct reader {
	struct event_base *base;
	transport_side t; /* the reading side, sv[0] */
	int peer;         /* sv[1], written by the test */
} reader;

static void keep_bytes(struct bufferevent *bev, void *arg)
{
	(void)bev; /* the bytes stay in the input, as a partial message does */
	(void)arg;
}

static void no_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)arg;
	fail_msg("unexpected event %d", what);
}

static void reader_open(reader *r, struct event_base *base)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	r->base = base;
	r->t = (transport_side){0};
	r->t.bev = bufferevent_socket_new(base, sv[0], BEV_OPT_CLOSE_ON_FREE);
	assert_non_null(r->t.bev);
	bufferevent_setcb(r->t.bev, keep_bytes, NULL, no_event, &r->t);
	transport_init_reads(&r->t);
	bufferevent_enable(r->t.bev, EV_READ);
	r->peer = sv[1];
}

/* The peer sends len bytes of pattern `seed`, and the loop reads them. */
static void send_and_read(reader *r, uint8_t seed, size_t len)
{
	uint8_t buf[1000];
	assert_true(len <= sizeof(buf));
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 31 + i);
	assert_int_equal(send(r->peer, buf, len, 0), (ssize_t)len);
	size_t before = evbuffer_get_length(bufferevent_get_input(r->t.bev));
	for (int spins = 0; spins < 1000; spins++) {
		event_base_loop(r->base, EVLOOP_NONBLOCK);
		if (evbuffer_get_length(bufferevent_get_input(r->t.bev)) == before + len)
			return;
	}
	fail_msg("the read did not arrive");
}

/* evb holds, from its front, len bytes of each of the n patterns. */
static void assert_holds(struct evbuffer *evb, const uint8_t *seeds, size_t n, size_t len)
{
	assert_int_equal(evbuffer_get_length(evb), n * len);
	const uint8_t *p = evbuffer_pullup(evb, -1);
	for (size_t k = 0; k < n; k++)
		for (size_t i = 0; i < len; i++)
			assert_int_equal(p[k * len + i], (uint8_t)(seeds[k] * 31 + i));
}

/* Six inputs each keep a read (as a partial message waits for its rest):
 * the first four are the pool's four buffers, referred to, and are never
 * read into again, so the other two reads and a second read on the first
 * input leave every input's bytes as they came. */
static void test_referred_buffers_are_not_read_into(void **state)
{
	struct event_base *base = event_base_new();
	assert_non_null(base);
	reader r[READERS];
	for (int i = 0; i < READERS; i++) {
		reader_open(&r[i], base);
		send_and_read(&r[i], (uint8_t)(i + 1), 300);
	}
	assert_int_equal(transport_pool_lent(), 4);
	send_and_read(&r[0], 9, 300); /* behind its first: not lent, copied */
	const uint8_t first[] = {1, 9};
	assert_holds(bufferevent_get_input(r[0].t.bev), first, 2, 300);
	for (int i = 1; i < READERS; i++) {
		const uint8_t seed = (uint8_t)(i + 1);
		assert_holds(bufferevent_get_input(r[i].t.bev), &seed, 1, 300);
	}
	for (int i = 0; i < READERS; i++) {
		bufferevent_free(r[i].t.bev);
		close(r[i].peer);
	}
	event_base_loop(base, EVLOOP_NONBLOCK); /* finalizers */
	assert_int_equal(transport_pool_lent(), 0);
	event_base_free(base);
}

/* A buffer comes back when its bytes are drained, and bytes moved on to
 * another buffer (an output that queued them) keep it until they go:
 * reads meanwhile go elsewhere, and the moved bytes stay as they came. */
static void test_buffer_back_when_its_bytes_go(void **state)
{
	struct event_base *base = event_base_new();
	assert_non_null(base);
	reader a, b;
	reader_open(&a, base);
	reader_open(&b, base);
	send_and_read(&a, 1, 500);
	assert_int_equal(transport_pool_lent(), 1);
	evbuffer_drain(bufferevent_get_input(a.t.bev), 500);
	assert_int_equal(transport_pool_lent(), 0);
	send_and_read(&a, 2, 500);
	struct evbuffer *queued = evbuffer_new();
	evbuffer_remove_buffer(bufferevent_get_input(a.t.bev), queued, 500);
	assert_int_equal(transport_pool_lent(), 1); /* the queued bytes hold it */
	for (uint8_t k = 3; k < 12; k++) {
		send_and_read(&b, k, 700);
		evbuffer_drain(bufferevent_get_input(b.t.bev), 700);
		send_and_read(&a, k, 200);
		evbuffer_drain(bufferevent_get_input(a.t.bev), 200);
	}
	const uint8_t two = 2;
	assert_holds(queued, &two, 1, 500);
	evbuffer_free(queued);
	assert_int_equal(transport_pool_lent(), 0);
	bufferevent_free(a.t.bev);
	bufferevent_free(b.t.bev);
	close(a.peer);
	close(b.peer);
	event_base_loop(base, EVLOOP_NONBLOCK);
	event_base_free(base);
	transport_pool_end(); /* as a worker thread does: the sanitizer sees no leak */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rest_is_referred_to_then_written),
	    cmocka_unit_test(test_pieces_in_order),
	    cmocka_unit_test(test_session_lets_go_first),
	    cmocka_unit_test(test_output_freed_first),
	    cmocka_unit_test(test_queued_when_it_cannot_go_at_once),
	    cmocka_unit_test(test_referred_buffers_are_not_read_into),
	    cmocka_unit_test(test_buffer_back_when_its_bytes_go),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
