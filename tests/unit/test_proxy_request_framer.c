/* The request framer, without libevent: request streams fed in every
 * chunking from one byte to whole, with large requests held or cut
 * through, and with runs of pipelined requests taken, must come out as
 * exactly their requests (request_sim.h checks each verb and run). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "fixtures/request_sim.h"

/* A stream of requests of the given lengths: each a header (length,
 * request id, OP_MSG) and a body of bytes that differ per request. */
static uint8_t *stream_of(const size_t *lens, size_t n, size_t *total)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += lens[i];
	uint8_t *s = malloc(len), *p = s;
	for (size_t i = 0; i < n; i++) {
		wire_write_i32(p, (int32_t)lens[i]);
		wire_write_i32(p + 4, (int32_t)(i + 1));
		wire_write_i32(p + 8, 0);
		wire_write_i32(p + 12, OP_MSG);
		for (size_t j = WIRE_HEADER_LEN; j < lens[i]; j++)
			p[j] = (uint8_t)(i * 31 + j * 7);
		p += lens[i];
	}
	*total = len;
	return s;
}

static reqsim sim_of(const uint8_t *s, size_t len, uint32_t seed, unsigned relay_mask)
{
	return (reqsim){.stream = s, .len = len, .seed = seed ? seed : 1, .relay_mask = relay_mask};
}

/* Fixed chunk sizes, one byte to all of it: every request whole, in order. */
static void feed_fixed(const uint8_t *s, size_t len, size_t chunk, unsigned relay_mask, reqsim *r)
{
	*r = sim_of(s, len, 1, relay_mask);
	request_framer_init(&r->f);
	while (r->arrived < len) {
		r->arrived = r->arrived + chunk < len ? r->arrived + chunk : len;
		if (!reqsim_run(r))
			break;
	}
}

static void test_small_requests_in_every_chunking(void **state)
{
	const size_t lens[] = {16, 17, 100, 4096, 21, 65535, 16};
	size_t len;
	uint8_t *s = stream_of(lens, 7, &len);
	for (size_t chunk = 1; chunk <= len; chunk = chunk < 64 ? chunk + 1 : chunk * 2) {
		reqsim r;
		feed_fixed(s, len, chunk, 0, &r);
		assert_int_equal(r.lost, 0);
		assert_int_equal(r.whole, 7);
		assert_int_equal(r.judged, 0); /* none is large (65535 < CUT_MIN) */
		assert_int_equal(r.next_msg, len);
		reqsim_free(&r);
	}
	free(s);
}

static void test_large_requests_held_and_cut_through(void **state)
{
	const size_t lens[] = {100, CUT_MIN, 300000, 50, CUT_MIN + 1, 2 * 1024 * 1024, 16};
	size_t len;
	uint8_t *s = stream_of(lens, 7, &len);
	/* 0: every large request held; ~0u: every one cut through; 0x5: some */
	const unsigned masks[] = {0, ~0u, 0x5};
	const size_t chunks[] = {1, 7, 4096, 65536, 65537, 1 << 20, SIZE_MAX / 2};
	for (size_t m = 0; m < 3; m++)
		for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
			if (chunks[c] == 1 && m > 0)
				continue; /* 2.5 MB a byte at a time once is enough */
			reqsim r;
			feed_fixed(s, len, chunks[c], masks[m], &r);
			assert_int_equal(r.lost, 0);
			assert_int_equal(r.next_msg, len);
			assert_int_equal(r.whole + r.judged, 7);
			/* a request that arrives whole in one chunk is never "large" */
			if (chunks[c] < CUT_MIN)
				assert_int_equal(r.judged, 4);
			if (masks[m] == ~0u)
				assert_int_equal(r.relayed, r.judged);
			if (masks[m] == 0)
				assert_int_equal(r.relayed, 0);
			reqsim_free(&r);
		}
	free(s);
}

/* Random chunkings with direct reads into the large buffer. */
static void test_random_chunkings_with_direct_reads(void **state)
{
	const size_t lens[] = {CUT_MIN, 16, 200000, 1000, CUT_MIN * 3 + 5, 77, 70000};
	size_t len;
	uint8_t *s = stream_of(lens, 7, &len);
	for (uint32_t seed = 1; seed <= 300; seed++) {
		reqsim r = sim_of(s, len, seed * 2654435761u, seed * 40503u);
		assert_true(reqsim_feed(&r));
		assert_int_equal(r.lost, 0);
		assert_int_equal(r.whole + r.judged, 7);
		reqsim_free(&r);
	}
	free(s);
}

/* The held tail: a cut-through request's last CUT_HELD bytes go only with
 * the verdict, whatever the chunking. */
static void test_cut_through_holds_the_tail(void **state)
{
	const size_t lens[] = {CUT_MIN * 2};
	size_t len;
	uint8_t *s = stream_of(lens, 1, &len);
	request_framer f;
	request_framer_init(&f);
	reqf_step st;
	wire_error err = {0};
	assert_int_equal(request_framer_next(&f, s, 100, &st, &err), REQF_LARGE);
	assert_int_equal(st.n, len);
	request_framer_large(&f, st.n, true);
	request_framer_took(&f, len - 1); /* all but one byte, straight in */
	assert_int_equal(request_framer_next(&f, s, 0, &st, &err), REQF_SEND);
	assert_int_equal(st.at, 0);
	assert_int_equal(st.n, len - CUT_HELD);
	request_framer_sent(&f, st.n);
	assert_int_equal(request_framer_next(&f, s, 0, &st, &err), REQF_NEED);
	assert_true(st.started);
	request_framer_took(&f, 1);
	assert_int_equal(request_framer_next(&f, s, 0, &st, &err), REQF_JUDGE);
	assert_int_equal(st.at, len - CUT_HELD);
	assert_int_equal(st.n, CUT_HELD);
	request_framer_done(&f);
	assert_false(request_framer_in_large(&f));
	free(s);
}

/* Lengths outside the protocol's limits are refused from the header
 * alone, however little of the request has arrived. */
static void test_impossible_lengths_refused(void **state)
{
	const int32_t bad[] = {0, 15, -1, 48000001, INT32_MAX};
	for (size_t i = 0; i < 5; i++) {
		uint8_t h[WIRE_HEADER_LEN] = {0};
		wire_write_i32(h, bad[i]);
		wire_write_i32(h + 4, 42);
		wire_write_i32(h + 12, OP_QUERY);
		request_framer f;
		request_framer_init(&f);
		reqf_step st;
		wire_error err = {0};
		assert_int_equal(request_framer_next(&f, h, WIRE_HEADER_LEN, &st, &err),
		                 REQF_REFUSE);
		assert_true(err.msg[0] != 0);
		assert_int_equal(st.head.request_id, 42); /* for the error reply */
		assert_int_equal(st.head.opcode, OP_QUERY);
	}
	/* the most the protocol allows is a request like any other */
	uint8_t h[WIRE_HEADER_LEN] = {0};
	wire_write_i32(h, 48000000);
	request_framer f;
	request_framer_init(&f);
	reqf_step st;
	wire_error err = {0};
	assert_int_equal(request_framer_next(&f, h, WIRE_HEADER_LEN, &st, &err), REQF_LARGE);
}

/* Partial headers and small requests wait, and say whether a request has
 * begun (the frame timer) and how much to gather. */
static void test_need_says_how_much(void **state)
{
	const size_t lens[] = {500};
	size_t len;
	uint8_t *s = stream_of(lens, 1, &len);
	request_framer f;
	request_framer_init(&f);
	reqf_step st;
	wire_error err = {0};
	assert_int_equal(request_framer_next(&f, s, 0, &st, &err), REQF_NEED);
	assert_false(st.started);
	assert_int_equal(request_framer_next(&f, s, 5, &st, &err), REQF_NEED);
	assert_true(st.started);
	assert_int_equal(st.n, WIRE_HEADER_LEN);
	assert_int_equal(request_framer_next(&f, s, 16, &st, &err), REQF_NEED);
	assert_int_equal(st.n, 500);
	assert_int_equal(request_framer_next(&f, s, 500, &st, &err), REQF_WHOLE);
	assert_int_equal(st.n, 500);
	free(s);
}

/* Runs (the session's way with a read of pipelined requests) taken now
 * and then, with random limits, over random parts of what arrived, in
 * every chunking: still every request whole, once, in order. */
static void test_runs_in_every_chunking(void **state)
{
	const size_t lens[] = {16, 17, 100, 4096, 21, CUT_MIN - 1, 16, 300, 16, 16, 70000, 40};
	const size_t nlens = sizeof(lens) / sizeof(lens[0]);
	size_t len;
	uint8_t *s = stream_of(lens, nlens, &len);
	unsigned runs = 0, in_runs = 0;
	for (size_t chunk = 1; chunk <= len; chunk = chunk < 64 ? chunk + 1 : chunk * 2)
		for (uint32_t seed = 1; seed <= 8; seed++) {
			reqsim r = sim_of(s, len, 1, seed & 1 ? ~0u : 0);
			r.run_seed = seed * 2654435761u;
			request_framer_init(&r.f);
			while (r.arrived < len) {
				r.arrived = r.arrived + chunk < len ? r.arrived + chunk : len;
				if (!reqsim_run(&r))
					break;
			}
			assert_int_equal(r.lost, 0);
			assert_int_equal(r.next_msg, len);
			assert_int_equal(r.whole + r.judged, nlens);
			runs += r.runs;
			in_runs += r.in_runs;
			reqsim_free(&r);
		}
	assert_true(runs > 0 && in_runs > runs); /* runs of several happened */
	free(s);
}

/* Random chunkings with direct reads into large buffers, and runs. */
static void test_runs_with_large_requests_and_direct_reads(void **state)
{
	const size_t lens[] = {40, 50,    CUT_MIN, 16, 200000, 1000, 60, CUT_MIN * 3 + 5,
	                       77, 70000, 16};
	const size_t nlens = sizeof(lens) / sizeof(lens[0]);
	size_t len;
	uint8_t *s = stream_of(lens, nlens, &len);
	for (uint32_t seed = 1; seed <= 300; seed++) {
		reqsim r = sim_of(s, len, seed * 2654435761u, seed * 40503u);
		r.run_seed = seed * 69069u + 1;
		assert_true(reqsim_feed(&r));
		assert_int_equal(r.lost, 0);
		assert_int_equal(r.whole + r.judged, nlens);
		reqsim_free(&r);
	}
	free(s);
}

/* Where a run ends: before a request not all shown, a large one, an
 * impossible length (which next() then refuses), or at the limit; never
 * inside a large request. */
static void test_run_stops_where_it_must(void **state)
{
	const size_t lens[] = {100, 200, CUT_MIN - 1, CUT_MIN, 50};
	size_t len, n;
	uint8_t *s = stream_of(lens, 5, &len);
	request_framer f;
	request_framer_init(&f);
	assert_int_equal(request_framer_run(&f, s, len, 64, &n), 3);
	assert_int_equal(n, 300 + CUT_MIN - 1); /* CUT_MIN itself is large */
	assert_int_equal(request_framer_run(&f, s, 299, 64, &n), 1);
	assert_int_equal(n, 100);
	assert_int_equal(request_framer_run(&f, s, 315, 64, &n), 2); /* a partial header */
	assert_int_equal(n, 300);
	assert_int_equal(request_framer_run(&f, s, len, 2, &n), 2);
	assert_int_equal(n, 300);
	assert_int_equal(request_framer_run(&f, s, len, 0, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(request_framer_run(&f, s, 99, 64, &n), 0);
	assert_int_equal(request_framer_run(&f, s, 15, 64, &n), 0);
	assert_int_equal(request_framer_run(&f, s, 0, 64, &n), 0);

	/* an impossible length after the first: the run stops before it, and
	 * next() refuses it there */
	wire_write_i32(s + 100, 15);
	assert_int_equal(request_framer_run(&f, s, len, 64, &n), 1);
	assert_int_equal(n, 100);
	reqf_step st;
	wire_error err = {0};
	assert_int_equal(request_framer_next(&f, s + 100, len - 100, &st, &err), REQF_REFUSE);
	wire_write_i32(s + 100, 48000001);
	assert_int_equal(request_framer_run(&f, s, len, 64, &n), 1);

	/* in a large request, no run: its bytes are the large request's */
	request_framer_large(&f, CUT_MIN, true);
	assert_int_equal(request_framer_run(&f, s, len, 64, &n), 0);
	assert_int_equal(n, 0);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_small_requests_in_every_chunking),
	    cmocka_unit_test(test_large_requests_held_and_cut_through),
	    cmocka_unit_test(test_random_chunkings_with_direct_reads),
	    cmocka_unit_test(test_cut_through_holds_the_tail),
	    cmocka_unit_test(test_impossible_lengths_refused),
	    cmocka_unit_test(test_need_says_how_much),
	    cmocka_unit_test(test_runs_in_every_chunking),
	    cmocka_unit_test(test_runs_with_large_requests_and_direct_reads),
	    cmocka_unit_test(test_run_stops_where_it_must),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
