/* libFuzzer target: the reply path. The input is a few control bytes and a
 * reply stream; the stream reaches the reply framer
 * (proxy/session/reply_framer.c, over protocol/reply_peek.c) in chunks of
 * pseudo-random sizes, against an in-flight queue (proxy/session/inflight.c)
 * of pseudo-random requests, as test_proxy_reply_framer does by hand.
 *
 *   byte 0   bits 0-2: requests in flight (0-7); bit 3: their ids are the
 *            responseTo fields of the stream's replies, in order (so most
 *            replies match), else 4 bytes each follow the control bytes;
 *            bit 4: hello requests get their replies whole
 *   byte 1   the chunking's seed
 *   byte 2   bit i: request i is a hello
 *
 * Checked: every verb moves bytes the framer was shown (nothing read past
 * `have`: each call sees an exact-size heap copy); forwarded + dropped +
 * whole bytes add up to each reply's declared length, one verb kind per
 * reply; a relayed reply answers the queue's head (or continues its exhaust
 * stream); completions pop exactly the requests they answer; a GATHER
 * always asks for more than it was shown (no livelock). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/frame.h"
#include "proxy/session/inflight.h"
#include "proxy/session/reply_framer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* How many more bytes the "socket" delivers: mostly small, sometimes all. */
static size_t next_chunk(uint32_t *s, size_t left)
{
	uint32_t r = next_rand(s);
	size_t c;
	switch (r & 3) {
	case 0:
		c = 1 + (r >> 2) % 4;
		break;
	case 1:
		c = 1 + (r >> 2) % 64;
		break;
	case 2:
		c = 1 + (r >> 2) % 4096;
		break;
	default:
		c = left;
	}
	return c < left ? c : left;
}

/* The reply being passed: where it started, its length, and how. */
typedef struct cur_reply {
	bool open;
	size_t len, passed;
	framer_verb verb;
} cur_reply;

/* Checks one step of a reply that began at stream[done]. */
static void check_pass(cur_reply *c, const framer_step *st, framer_verb v, const uint8_t *at,
                       size_t have, const int32_t *expect, const reply_framer *f, bool whole_on)
{
	if (st->n == 0)
		abort(); /* a verb that moves nothing would loop */
	if (st->starts) {
		if (c->open)
			abort(); /* a new reply before the last one ended */
		if (have < WIRE_HEADER_LEN || st->peek.h.length != wire_read_i32(at) ||
		    st->peek.h.length < WIRE_HEADER_LEN)
			abort(); /* started without seeing the header it reports */
		if (v != FRAMER_DROP && !expect)
			abort(); /* relayed with nothing in flight */
		*c = (cur_reply){.open = true, .len = (size_t)st->peek.h.length, .verb = v};
	} else if (!c->open || v != c->verb) {
		abort(); /* bytes outside a reply, or one reply both relayed and dropped */
	}
	if (v == FRAMER_WHOLE && (!whole_on || st->n != c->len || st->n > have))
		abort(); /* whole: exactly one reply, all of it shown */
	c->passed += st->n;
	if (c->passed > c->len)
		abort();
	if (c->passed == c->len) {
		c->open = false;
		if (reply_framer_mid_reply(f))
			abort();
	} else if (st->completes) {
		abort(); /* completed mid-reply */
	}
	if (st->completes && v == FRAMER_DROP)
		abort(); /* a dropped reply answers nothing */
}

/* Request ids: the responseTo of each reply in the stream, in order. */
static unsigned ids_from_stream(const uint8_t *s, size_t len, int32_t *ids, unsigned n)
{
	size_t off = 0;
	unsigned k = 0;
	while (k < n && off + WIRE_HEADER_LEN <= len) {
		int32_t l = wire_read_i32(s + off);
		ids[k++] = wire_read_i32(s + off + 8);
		if (l < WIRE_HEADER_LEN)
			break;
		off += (size_t)l;
	}
	return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	unsigned nreq = data[0] & 7;
	bool derive = data[0] & 8, whole_hello = data[0] & 16;
	uint32_t seed = 0x9e3779b9u ^ data[1] ^ ((uint32_t)size << 8);
	uint8_t hello_bits = data[2];
	size_t off = 3;
	int32_t ids[8] = {0};
	if (!derive) {
		if (size < off + 4 * (size_t)nreq)
			return 0;
		for (unsigned i = 0; i < nreq; i++)
			ids[i] = wire_read_i32(data + off + 4 * i);
		off += 4 * (size_t)nreq;
	}
	const uint8_t *stream = data + off;
	size_t len = size - off;
	if (derive)
		nreq = ids_from_stream(stream, len, ids, nreq);

	inflight_ring ring;
	inflight_init(&ring);
	for (unsigned i = 0; i < nreq; i++)
		if (!inflight_push(&ring, ids[i],
		                   (hello_bits >> i) & 1 ? INFLIGHT_HELLO : INFLIGHT_PLAIN,
		                   REPLY_FORM_OPMSG))
			abort();
	reply_framer f;
	reply_framer_init(&f);
	cur_reply cur = {0};
	size_t done = 0, arrived = 0, completes = 0;
	size_t steps = 0, max_steps = 4 * len + 64;
	bool invalid = false;
	while (!invalid && arrived < len) {
		arrived += next_chunk(&seed, len - arrived);
		for (;;) {
			if (++steps > max_steps)
				abort(); /* no progress */
			size_t avail = arrived - done;
			inflight *head = inflight_head(&ring);
			bool whole_on = whole_hello && head && inflight_is_hello(head->kind);
			/* set only at a boundary, as the session does */
			if (!reply_framer_mid_reply(&f))
				reply_framer_set_whole(&f, whole_on);
			else
				whole_on = f.whole;
			size_t want = reply_framer_want(&f);
			size_t have = avail < want ? avail : want;
			uint8_t *shown = malloc(have ? have : 1);
			if (!shown)
				abort();
			memcpy(shown, stream + done, have);
			const int32_t *expect = inflight_expect(&ring);
			framer_step st;
			wire_error err = {0};
			framer_verb v =
			    reply_framer_next(&f, shown, have, avail, expect, &st, &err);
			free(shown);
			if (v == FRAMER_INVALID) {
				if (cur.open)
					abort(); /* mid-reply bytes are never judged */
				invalid = true;
				break;
			}
			if (v == FRAMER_GATHER) {
				/* mid-reply it waits only when nothing is there; at
				 * a boundary it must ask for more than it was shown,
				 * and next want that much */
				if (reply_framer_mid_reply(&f)
				        ? avail != 0
				        : st.n <= have || reply_framer_want(&f) < st.n)
					abort(); /* would loop */
				if (st.n > avail)
					break; /* wait for the next chunk */
				continue;
			}
			check_pass(&cur, &st, v, stream + done, have, expect, &f, whole_on);
			done += st.n;
			if (done > arrived)
				abort();
			if (st.completes) {
				if (!expect)
					abort();
				completes++;
				inflight_pop(&ring);
			}
		}
	}
	if (completes + inflight_count(&ring) != nreq || (!invalid && cur.open && done != len))
		abort();
	inflight_clear(&ring);
	return 0;
}
