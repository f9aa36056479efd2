/* libFuzzer target: the request path's framing. The input describes a
 * stream of requests (their lengths, and whether each large one is cut
 * through) and a chunking; the stream reaches the request framer
 * (proxy/session/request_framer.c) in chunks of pseudo-random sizes, and
 * now and then straight into a large request's buffer, as a plain socket's
 * direct read puts it, as test_proxy_request_framer does by hand.
 *
 *   bytes 0-3  the chunking's seed; also, unless its top bit is set, the
 *              seed of the runs of whole small requests taken now and then
 *              (request_framer_run, as the session judges a read of
 *              pipelined requests)
 *   bytes 4-7  bit i: the i-th large request is cut through
 *   then 3 bytes a request: the first byte's low two bits pick small
 *   (16-527 bytes), large (CUT_MIN up to about 1.1 MiB), exactly CUT_MIN
 *   or CUT_MIN - 1, or (rarely) an impossible length; the other 2 bytes
 *   size it
 *
 * Checked (request_sim.h): every verb moves only bytes that arrived; the
 * requests come out whole, in order, byte for byte; a cut-through
 * request's last CUT_HELD bytes wait for its verdict and what was sent
 * and what is left add up to it; NEED only when nothing can be done;
 * REFUSE only for an impossible length; a run holds only whole small
 * requests, within what it was shown and its limit, and is the longest
 * such; no livelock. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/fixtures/request_sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_REQUESTS = 24, MAX_STREAM = 2 * 1024 * 1024 };

static size_t length_of(const uint8_t *p, bool *bad)
{
	unsigned v = (unsigned)p[1] | (unsigned)p[2] << 8;
	switch (p[0] & 3) {
	case 0:
		return 16 + v % 512;
	case 1:
		return CUT_MIN + (size_t)v * 16;
	case 2:
		return v & 1 ? CUT_MIN : CUT_MIN - 1;
	default:
		if ((p[0] & 0xfc) == 0xfc) {
			*bad = true;
			return v & 1 ? 15 : 48000001;
		}
		return 16 + v % 64;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8)
		return 0;
	uint32_t seed = wire_read_u32(data), mask = wire_read_u32(data + 4);
	size_t n = (size - 8) / 3;
	n = n < MAX_REQUESTS ? n : MAX_REQUESTS;
	size_t lens[MAX_REQUESTS], total = 0;
	bool bad[MAX_REQUESTS] = {0};
	for (size_t i = 0; i < n; i++) {
		lens[i] = length_of(data + 8 + 3 * i, &bad[i]);
		size_t stored = bad[i] ? WIRE_HEADER_LEN : lens[i];
		if (total + stored > MAX_STREAM) {
			n = i;
			break;
		}
		total += stored;
	}
	uint8_t *s = malloc(total ? total : 1), *p = s;
	for (size_t i = 0; i < n; i++) {
		size_t stored = bad[i] ? WIRE_HEADER_LEN : lens[i];
		wire_write_i32(p, (int32_t)lens[i]);
		wire_write_i32(p + 4, (int32_t)i);
		wire_write_i32(p + 8, 0);
		wire_write_i32(p + 12, OP_MSG);
		for (size_t j = WIRE_HEADER_LEN; j < stored; j++)
			p[j] = (uint8_t)(i + j);
		p += stored;
	}
	reqsim r = {.stream = s,
	            .len = total,
	            .seed = seed ? seed : 1,
	            .relay_mask = mask,
	            .run_seed = seed & 0x80000000u ? 0 : (seed ^ mask) | 1};
	bool ok = reqsim_feed(&r);
	size_t first_bad = n;
	for (size_t i = 0; i < n && first_bad == n; i++)
		if (bad[i])
			first_bad = i;
	/* a stream with an impossible length is refused there, and only there */
	if (!ok || (first_bad < n) != (r.refused == 1) ||
	    (first_bad < n && r.whole + r.judged != first_bad))
		abort();
	reqsim_free(&r);
	free(s);
	return 0;
}
