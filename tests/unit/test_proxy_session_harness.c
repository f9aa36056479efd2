/* Real sessions driven by the deterministic harness (session_harness.h):
 * scripted client bytes, silences and closes on a virtual clock, plain and
 * TLS. Each test asserts how the session ended (or that it did not), the
 * log line that says why, and a bound on the callbacks it ran: a session
 * that spins (a read event that keeps firing, a timer that keeps re-arming)
 * runs thousands where these run tens, and never lets the loop get quiet,
 * which hx_run reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <cmocka.h>

#include "proxy/sinks/log.h"
#include "session_harness.h"

enum {
	/* What a session costs in these tests, with room: a round trip is
	 * about ten callbacks, a TLS handshake about as many, a timeout one. */
	BOUND_CALLBACKS = 64,
	BOUND_EPOLL = 64,
	STEP_MS = 1000,
	IDLE_CALLBACKS = 1, /* an hour with nothing in flight */
	/* Sixteen requests in sixteen TLS records, written at once: a read, an
	 * upstream reply or two, the client's writes. A record per wake-up
	 * was 16 reads and more. */
	PIPELINED_CALLBACKS = 8,
	PAUSING_REQUESTS = 70,        /* past INFLIGHT_MAX (64) */
	OUT_HIGH_BYTES = 1024 * 1024, /* the session's OUT_HIGH (session_int.h) */
	SMALL_REPLIES = 40,
};

typedef struct fixture {
	char log[64];
	hx_world *w;
	hx_conn *c;
} fixture;

/* A world whose log is a file of the fixture's own (every world's first
 * connection is conn0), and no connection yet. */
static fixture *world(bool tls)
{
	fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->log, sizeof(f->log), "/tmp/mg-harness-log.XXXXXX");
	int fd = mkstemp(f->log);
	assert_true(fd >= 0);
	close(fd);
	f->w = hx_world_new(tls, f->log);
	return f;
}

static void connect_client(fixture *f)
{
	f->c = hx_conn_start(f->w);
	assert_non_null(f->c->s);
}

static fixture *start(bool tls)
{
	fixture *f = world(tls);
	connect_client(f);
	return f;
}

static void finish(fixture *f)
{
	hx_conn_free(f->c);
	hx_world_free(f->w);
	unlink(f->log);
	free(f);
}

/* The session is gone, the client saw its end, and the "Connection ended"
 * line gives the reason. */
static void assert_ended(fixture *f, const char *reason)
{
	assert_true(f->c->closed);
	assert_true(f->c->client_eof);
	char *line = hx_log_line(f->w, f->c, LOGID_CONN_ENDED, reason);
	if (!line)
		fail_msg("no \"Connection ended\" line with \"%s\" in %s", reason, f->log);
	free(line);
}

static void assert_cheap(const hx_conn *c)
{
	print_message("    %llu session callbacks, %llu epoll events, %llu loop turns\n",
	              (unsigned long long)hx_callbacks(c), (unsigned long long)hx_epoll_events(c),
	              (unsigned long long)c->turns);
	if (hx_callbacks(c) > BOUND_CALLBACKS || hx_epoll_events(c) > BOUND_EPOLL)
		fail_msg("%llu session callbacks, %llu epoll events: out of proportion",
		         (unsigned long long)hx_callbacks(c),
		         (unsigned long long)hx_epoll_events(c));
}

/* Silence: still open after open_ms, closed two steps later. */
static void silence_until_closed(fixture *f, uint64_t open_ms)
{
	assert_true(hx_advance(f->c, open_ms, STEP_MS));
	assert_false(f->c->closed);
	assert_true(hx_advance(f->c, 2 * STEP_MS, STEP_MS));
	assert_true(f->c->closed);
}

/* ---- plain ---- */

static void test_plain_round_trip_then_idle(void **state)
{
	fixture *f = start(false);
	uint8_t ping[64];
	size_t n = hx_ping(ping, 7);
	hx_queue_app(f->c, ping, n);
	assert_true(hx_flush(f->c));
	assert_int_equal(f->c->requests_seen, 1);
	assert_int_equal(hx_replies_to(f->c, 7), 1);
	/* an idle connection between requests has no deadline, and costs
	 * nothing but the reply timer's one look after the reply came */
	uint64_t before = hx_callbacks(f->c);
	assert_true(hx_advance(f->c, 3600 * 1000, 10 * STEP_MS));
	assert_false(f->c->closed);
	assert_in_range(hx_callbacks(f->c) - before, 0, IDLE_CALLBACKS);
	hx_client_shutdown(f->c);
	assert_true(hx_run(f->c));
	assert_ended(f, "client closed the connection");
	assert_cheap(f->c);
	finish(f);
}

/* The case: 3 bytes of a header, then 61 s of nothing. */
static void test_plain_partial_header_then_silence(void **state)
{
	fixture *f = start(false);
	uint8_t ping[64];
	hx_ping(ping, 1);
	hx_queue_raw(f->c, ping, 3);
	assert_true(hx_flush(f->c));
	silence_until_closed(f, HX_FRAME_WAIT_MS - STEP_MS);
	assert_ended(f, "incomplete request: only 3 bytes arrived within 60000 ms");
	assert_cheap(f->c);
	finish(f);
}

static void test_plain_close_mid_frame(void **state)
{
	fixture *f = start(false);
	uint8_t ping[64];
	hx_ping(ping, 1);
	hx_queue_raw(f->c, ping, 10);
	assert_true(hx_flush(f->c));
	assert_false(f->c->closed);
	hx_client_shutdown(f->c);
	assert_true(hx_run(f->c));
	assert_ended(f, "client closed the connection");
	assert_cheap(f->c);
	finish(f);
}

static void test_plain_reply_never_comes(void **state)
{
	fixture *f = start(false);
	f->c->mute = true;
	uint8_t ping[64];
	size_t n = hx_ping(ping, 9);
	hx_queue_app(f->c, ping, n);
	assert_true(hx_flush(f->c));
	assert_int_equal(f->c->requests_seen, 1);
	silence_until_closed(f, HX_REPLY_TIMEOUT_MS - STEP_MS);
	assert_ended(f, "sent no reply within 30000 ms (upstream.replyTimeoutMS)");
	assert_int_equal(hx_replies_to(f->c, 9), 0);
	assert_cheap(f->c);
	finish(f);
}

/* The upstream closes with a request in flight: the client's connection
 * ends the same way, at once. */
static void test_plain_upstream_closes_mid_request(void **state)
{
	fixture *f = start(false);
	f->c->mute = true;
	uint8_t ping[64];
	size_t n = hx_ping(ping, 5);
	hx_queue_app(f->c, ping, n);
	assert_true(hx_flush(f->c));
	assert_int_equal(f->c->requests_seen, 1);
	hx_upstream_close(f->c);
	assert_true(hx_run(f->c));
	assert_ended(f, "lost its connection to upstream harness-upstream:1: closed by the server");
	assert_int_equal(hx_replies_to(f->c, 5), 0);
	assert_cheap(f->c);
	finish(f);
}

/* The upstream refuses the connect (at once, as a unix socket upstream
 * does): a client that asks gets HostUnreachable; one that says nothing is
 * closed after the unreachable wait (2 s). The refusal is reported twice
 * (libevent's write and read sides); the second once ended the session at
 * once, logging a refused state change. */
static void test_plain_upstream_refused(void **state)
{
	fixture *f = world(false);
	hx_world_refuse(f->w);
	connect_client(f);
	uint8_t ping[64];
	size_t n = hx_ping(ping, 3);
	hx_queue_app(f->c, ping, n);
	assert_true(hx_flush(f->c));
	assert_int_equal(hx_replies_to(f->c, 3), 1);
	assert_int_equal(f->c->requests_seen, 0);
	assert_true(hx_advance(f->c, 3 * STEP_MS, STEP_MS));
	assert_ended(f, "could not connect to upstream harness-upstream:1");
	assert_null(hx_log_line(f->w, f->c, LOGID_INTERNAL, "")); /* no refused state change */
	assert_cheap(f->c);
	finish(f);
}

static void test_plain_upstream_refused_silent_client(void **state)
{
	fixture *f = world(false);
	hx_world_refuse(f->w);
	connect_client(f);
	assert_false(f->c->closed);
	assert_true(hx_advance(f->c, 3 * STEP_MS, STEP_MS));
	assert_ended(f, "could not connect to upstream harness-upstream:1");
	assert_null(hx_log_line(f->w, f->c, LOGID_INTERNAL, "")); /* no refused state change */
	assert_cheap(f->c);
	finish(f);
}

/* net.proxyProtocol: a header begun, then nothing (its wait is the sniff's). */
static void test_proxy_header_begun_then_silence(void **state)
{
	fixture *f = world(false);
	hx_config(f->w)->proxy_protocol = true;
	connect_client(f);
	hx_queue_raw(f->c, "PROXY TCP4 ", 11);
	assert_true(hx_flush(f->c));
	silence_until_closed(f, HX_FRAME_WAIT_MS - STEP_MS);
	assert_ended(f, "client sent only 11 bytes of a PROXY header within 60000 ms");
	assert_cheap(f->c);
	finish(f);
}

/* ---- TLS (net.tls.mode allowTLS) ---- */

/* The spin of issue 33: a record header's first 3 bytes, then nothing. */
static void test_tls_record_header_then_silence(void **state)
{
	fixture *f = start(true);
	hx_queue_raw(f->c, "\x16\x03\x01", 3);
	assert_true(hx_flush(f->c));
	silence_until_closed(f, HX_FRAME_WAIT_MS - STEP_MS);
	assert_ended(f, "client sent only 3 bytes within 60000 ms, too few to tell plain from TLS");
	assert_cheap(f->c);
	finish(f);
}

static void test_tls_whole_client_hello_then_silence(void **state)
{
	fixture *f = start(true);
	hx_tls_begin(f->c);
	assert_true(f->c->out_len > 5); /* the ClientHello */
	f->c->no_read = true;           /* the server's answer is never read */
	assert_true(hx_flush(f->c));
	assert_false(f->c->closed);
	silence_until_closed(f, HX_FRAME_WAIT_MS - STEP_MS);
	f->c->no_read = false;
	assert_true(hx_run(f->c));
	assert_ended(f, "TLS handshake not finished within 60000 ms (net.maxFrameWaitMS)");
	assert_cheap(f->c);
	finish(f);
}

/* A record header saying ClientHello, then bytes that are none: the sniff
 * hands the socket to TLS, whose handshake fails at once. */
static void test_tls_garbage_after_header(void **state)
{
	fixture *f = start(true);
	hx_queue_raw(f->c, "\x16\x03\x01\x00\x20\x01garbage, not a ClientHello body", 37);
	assert_true(hx_flush(f->c));
	assert_true(f->c->closed);
	assert_ended(f, "TLS with the client failed");
	char *tls = hx_log_line(f->w, f->c, LOGID_TLS, "TLS with client failed");
	assert_non_null(tls);
	free(tls);
	assert_cheap(f->c);
	finish(f);
}

/* A handshake record that is not a ClientHello is taken for plain bytes:
 * no message header, so the session answers the error and closes. */
static void test_tls_record_not_a_client_hello(void **state)
{
	fixture *f = start(true);
	hx_queue_raw(f->c, "\x16\x03\x01\x00\x20garbage, not a handshake message!", 37);
	assert_true(hx_flush(f->c));
	assert_true(f->c->closed);
	assert_ended(f, "not a MongoDB message");
	assert_cheap(f->c);
	finish(f);
}

static void test_tls_partial_request_then_silence(void **state)
{
	fixture *f = start(true);
	assert_true(hx_tls_handshake(f->c));
	uint8_t ping[64];
	hx_ping(ping, 1);
	hx_queue_app(f->c, ping, 12);
	assert_true(hx_flush(f->c));
	silence_until_closed(f, HX_FRAME_WAIT_MS - STEP_MS);
	assert_ended(f, "incomplete request: only 12 bytes arrived within 60000 ms");
	assert_cheap(f->c);
	finish(f);
}

static void test_tls_round_trip_then_idle(void **state)
{
	fixture *f = start(true);
	assert_true(hx_tls_handshake(f->c));
	uint8_t ping[64];
	size_t n = hx_ping(ping, 21);
	hx_queue_app(f->c, ping, n);
	assert_true(hx_flush(f->c));
	assert_int_equal(f->c->requests_seen, 1);
	assert_int_equal(hx_replies_to(f->c, 21), 1);
	/* the frame wait that ran from accept ended with the handshake */
	uint64_t before = hx_callbacks(f->c);
	assert_true(hx_advance(f->c, 3600 * 1000, 10 * STEP_MS));
	assert_false(f->c->closed);
	assert_in_range(hx_callbacks(f->c) - before, 0, IDLE_CALLBACKS);
	hx_client_close(f->c);
	assert_true(hx_run(f->c));
	assert_true(f->c->closed);
	char *line = hx_log_line(f->w, f->c, LOGID_CONN_ENDED, "\"requests\":1");
	assert_non_null(line);
	free(line);
	assert_cheap(f->c);
	finish(f);
}

static void test_tls_client_closes_mid_handshake(void **state)
{
	fixture *f = start(true);
	hx_tls_begin(f->c);
	hx_deliver(f->c, 40);
	assert_true(hx_run(f->c));
	assert_false(f->c->closed);
	hx_client_shutdown(f->c);
	assert_true(hx_run(f->c));
	assert_true(f->c->closed);
	assert_cheap(f->c);
	finish(f);
}

/* n pings, requestIDs first.., each written as a TLS record of its own
 * (as drivers write messages), all queued. */
static void queue_pings(hx_conn *c, int32_t first, int n)
{
	uint8_t ping[64];
	for (int i = 0; i < n; i++)
		hx_queue_app(c, ping, hx_ping(ping, first + i));
}

/* Sixteen pipelined requests, sixteen records in one write: one wake-up
 * reads them all (libevent alone reads a record per wake-up), and they
 * go upstream together. */
static void test_tls_pipelined_records_read_together(void **state)
{
	fixture *f = start(true);
	assert_true(hx_tls_handshake(f->c));
	uint64_t before = hx_callbacks(f->c);
	queue_pings(f->c, 100, 16);
	assert_true(hx_flush(f->c));
	assert_int_equal(f->c->requests_seen, 16);
	for (int i = 0; i < 16; i++)
		assert_int_equal(hx_replies_to(f->c, 100 + i), 1);
	print_message("    16 pipelined requests: %llu session callbacks\n",
	              (unsigned long long)(hx_callbacks(f->c) - before));
	assert_in_range(hx_callbacks(f->c) - before, 1, PIPELINED_CALLBACKS);
	assert_cheap(f->c);
	finish(f);
}

/* Requests, then close_notify and the socket's end, all in one write:
 * every request goes upstream before the session ends (the end is met
 * by the same wake-up that read them, and held until they are handed on). */
static void test_tls_requests_then_close_notify(void **state)
{
	fixture *f = start(true);
	assert_true(hx_tls_handshake(f->c));
	queue_pings(f->c, 200, 16);
	hx_tls_close_notify(f->c);
	hx_deliver(f->c, f->c->out_len);
	hx_client_shutdown(f->c);
	assert_true(hx_run(f->c));
	assert_int_equal(f->c->requests_seen, 16);
	assert_ended(f, "client closed the connection");
	assert_cheap(f->c);
	finish(f);
}

/* More requests than the in-flight queue takes, then close_notify: the
 * session stops reading at the queue's limit with the end already met;
 * it is delivered only after the replies made room and the rest went. */
static void test_tls_close_notify_while_paused(void **state)
{
	fixture *f = start(true);
	assert_true(hx_tls_handshake(f->c));
	queue_pings(f->c, 300, PAUSING_REQUESTS);
	hx_tls_close_notify(f->c);
	hx_deliver(f->c, f->c->out_len);
	hx_client_shutdown(f->c);
	assert_true(hx_run(f->c));
	assert_int_equal(f->c->requests_seen, PAUSING_REQUESTS);
	assert_ended(f, "client closed the connection");
	finish(f);
}

/* ---- a TLS upstream (the URI's tls=true; plain clients) ---- */

/* A plain client whose session's upstream is TLS, after a first round
 * trip (the upstream's handshake and its session tickets are behind). */
static fixture *start_tls_upstream(void)
{
	fixture *f = world(false);
	hx_world_tls_upstream(f->w);
	connect_client(f);
	uint8_t ping[64];
	hx_queue_app(f->c, ping, hx_ping(ping, 1));
	assert_true(hx_flush(f->c));
	assert_int_equal(hx_replies_to(f->c, 1), 1);
	return f;
}

/* n pings, requestIDs first.., in one plain write. */
static void send_pings(hx_conn *c, int32_t first, int n)
{
	uint8_t ping[64];
	for (int i = 0; i < n; i++)
		hx_queue_raw(c, ping, hx_ping(ping, first + i));
	assert_true(hx_flush(c));
}

static void assert_replies(const hx_conn *c, int32_t first, int n)
{
	for (int i = 0; i < n; i++)
		if (hx_replies_to(c, first + i) != 1)
			fail_msg("reply to %d: %d of them", first + i, hx_replies_to(c, first + i));
}

/* Sixteen replies, sixteen records in one write of the upstream's: one
 * wake-up reads them all (libevent alone reads a record per wake-up, and
 * relays each reply to the client by itself). */
static void test_tls_upstream_replies_read_together(void **state)
{
	fixture *f = start_tls_upstream();
	uint64_t before = hx_callbacks(f->c);
	send_pings(f->c, 100, 16);
	assert_int_equal(f->c->requests_seen, 17);
	assert_replies(f->c, 100, 16);
	print_message("    16 replies from a TLS upstream: %llu session callbacks\n",
	              (unsigned long long)(hx_callbacks(f->c) - before));
	assert_in_range(hx_callbacks(f->c) - before, 1, PIPELINED_CALLBACKS);
	assert_cheap(f->c);
	finish(f);
}

/* Sixteen replies with the upstream's end right behind them in the same
 * write (close_notify, the socket's close, or both): the end is met by
 * the wake-up that read the replies, and every reply reaches the client
 * before its connection ends. */
static void replies_then_end(bool notify, bool close)
{
	fixture *f = start_tls_upstream();
	hx_upstream_end_after(f->c, 17, notify, close);
	uint64_t before = hx_callbacks(f->c);
	send_pings(f->c, 200, 16);
	assert_replies(f->c, 200, 16);
	assert_ended(f, "lost its connection to upstream harness-upstream:1: closed by the server");
	/* the replies' wake-up, and the end's event and the client's flush */
	assert_in_range(hx_callbacks(f->c) - before, 1, PIPELINED_CALLBACKS + 2);
	assert_cheap(f->c);
	finish(f);
}

static void test_tls_upstream_close_notify_behind_replies(void **state)
{
	replies_then_end(true, true);
}

static void test_tls_upstream_close_behind_replies(void **state)
{
	replies_then_end(false, true);
}

/* close_notify with the socket left open: nothing after it wakes the
 * session, so the end must come from what the read that met it held. */
static void test_tls_upstream_close_notify_socket_open(void **state)
{
	replies_then_end(true, false);
}

/* Bytes the session wrote to the client that it has not read. */
static size_t client_unread(const hx_conn *c)
{
	int n = 0;
	assert_int_equal(ioctl(c->cfd, FIONREAD, &n), 0);
	return (size_t)n;
}

/* 40 replies behind a client that reads nothing, then an end, in one
 * write (test_tls_upstream_close_notify_while_paused says how): close_notify
 * with the socket left open, or with reset a reset. */
static void paused_then_end(bool reset)
{
	fixture *f = start_tls_upstream();
	hx_conn *c = f->c;
	c->no_read = true;
	c->reply_pad = 32 * 1024;
	size_t sent = 0;
	int32_t id = 1000;
	while (sent + 2 * hx_reply_len(c) < OUT_HIGH_BYTES + client_unread(c)) {
		sent += hx_reply_len(c);
		send_pings(c, id++, 1);
	}
	assert_false(c->closed);
	c->reply_pad = 2000;
	assert_true(SMALL_REPLIES * hx_reply_len(c) > 2 * (32 * 1024 + 64));
	if (reset)
		hx_upstream_reset_after(c, c->replies_sent + SMALL_REPLIES);
	else
		hx_upstream_end_after(c, c->replies_sent + SMALL_REPLIES, true, false);
	send_pings(c, 2000, SMALL_REPLIES);
	assert_int_equal(c->replies_sent, 1 + (uint64_t)(id - 1000) + SMALL_REPLIES);
	assert_false(c->closed);
	if (reset) {
		send_pings(c, 3000, 1); /* read by no one: the close resets */
		assert_int_equal(c->ufd, -1);
		assert_false(c->closed); /* held behind the replies, reads paused */
	}
	c->no_read = false;
	assert_true(hx_run(c));
	assert_replies(c, 1000, id - 1000);
	assert_replies(c, 2000, SMALL_REPLIES);
	assert_ended(f, "lost its connection to upstream harness-upstream:1: closed by the server");
	finish(f);
}

/* Backpressure with the end behind the replies. The client reads
 * nothing while 32 KiB replies, one at a time, bring what the session
 * queued for it (what it was sent minus what its socket holds) to within
 * two of them of OUT_HIGH; then 40 replies of 2 KiB and close_notify,
 * the socket left open, in one write, which one wake-up reads whole:
 * relaying them crosses OUT_HIGH, upstream reads stop with replies still
 * in the input and the end already met. When the client reads, every
 * reply arrives and then the end, which nothing on the socket announces
 * again: it is delivered when reads resume. */
static void test_tls_upstream_close_notify_while_paused(void **state)
{
	paused_then_end(false);
}

/* The same pause with a reset behind the replies: the read that met them
 * met ECONNRESET too, which OpenSSL reports as a syscall error and libevent,
 * as the session allows a TLS side's dirty shutdown, as an end of stream.
 * Held while reads are paused, it comes after every reply when the client
 * reads, as a close by the server (not passed on as a reset: that is the
 * plain side's). */
static void test_tls_upstream_reset_while_paused(void **state)
{
	paused_then_end(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_plain_round_trip_then_idle),
	    cmocka_unit_test(test_plain_partial_header_then_silence),
	    cmocka_unit_test(test_plain_close_mid_frame),
	    cmocka_unit_test(test_plain_reply_never_comes),
	    cmocka_unit_test(test_plain_upstream_closes_mid_request),
	    cmocka_unit_test(test_plain_upstream_refused),
	    cmocka_unit_test(test_plain_upstream_refused_silent_client),
	    cmocka_unit_test(test_proxy_header_begun_then_silence),
	    cmocka_unit_test(test_tls_record_header_then_silence),
	    cmocka_unit_test(test_tls_whole_client_hello_then_silence),
	    cmocka_unit_test(test_tls_garbage_after_header),
	    cmocka_unit_test(test_tls_record_not_a_client_hello),
	    cmocka_unit_test(test_tls_partial_request_then_silence),
	    cmocka_unit_test(test_tls_round_trip_then_idle),
	    cmocka_unit_test(test_tls_client_closes_mid_handshake),
	    cmocka_unit_test(test_tls_pipelined_records_read_together),
	    cmocka_unit_test(test_tls_requests_then_close_notify),
	    cmocka_unit_test(test_tls_close_notify_while_paused),
	    cmocka_unit_test(test_tls_upstream_replies_read_together),
	    cmocka_unit_test(test_tls_upstream_close_notify_behind_replies),
	    cmocka_unit_test(test_tls_upstream_close_behind_replies),
	    cmocka_unit_test(test_tls_upstream_close_notify_socket_open),
	    cmocka_unit_test(test_tls_upstream_close_notify_while_paused),
	    cmocka_unit_test(test_tls_upstream_reset_while_paused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
