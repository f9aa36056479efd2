/* The reply framer and the in-flight ring, without libevent: a reply
 * stream is fed in arbitrary chunks and the verbs must add up to exactly
 * the bytes of each reply, relayed or dropped as the queue says. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "fixtures/wire_builder.h"
#include "fixtures/wire_captures.h"
#include "proxy/session/inflight.h"
#include "proxy/session/reply_framer.h"

/* An OP_MSG reply {ok: 1, pad: "..."} of about `size` bytes. */
static size_t reply(uint8_t *out, int32_t request_id, int32_t response_to, uint32_t flags,
                    size_t pad)
{
	wb b;
	char *s = malloc(pad + 1);
	memset(s, 'x', pad);
	s[pad] = '\0';
	bson_t *doc = BCON_NEW("ok", BCON_INT32(1), "pad", BCON_UTF8(s));
	free(s);
	wb_header(&b, request_id, response_to, OP_MSG);
	wb_i32(&b, (int32_t)flags);
	wb_u8(&b, 0);
	wb_doc(&b, doc);
	wb_finish(&b);
	bson_destroy(doc);
	memcpy(out, b.buf, b.n);
	return b.n;
}

/* Feeds stream[0..len) to the framer `chunk` bytes at a time, as a socket
 * would deliver it; counts forwarded and dropped bytes and completions. */
typedef struct tally {
	size_t forwarded, dropped, completes, starts;
	size_t whole[8], nwhole; /* the length of each FRAMER_WHOLE */
	bool invalid;
	bool whole_for_hello; /* set_whole while the ring's head is a hello */
} tally;

static void feed(reply_framer *f, const uint8_t *stream, size_t len, size_t chunk,
                 const int32_t *(*expect)(void *), void *arg, tally *t)
{
	size_t done = 0, arrived = 0;
	while (done < len) {
		arrived = arrived + chunk < len ? arrived + chunk : len;
		for (;;) {
			size_t avail = arrived - done;
			if (t->whole_for_hello) {
				inflight *h = inflight_head(arg);
				reply_framer_set_whole(f, h && inflight_is_hello(h->kind));
			}
			size_t want = reply_framer_want(f);
			size_t have = avail < want ? avail : want;
			framer_step st;
			wire_error err = {0};
			framer_verb v = reply_framer_next(f, stream + done, have, avail,
			                                  expect(arg), &st, &err);
			if (v == FRAMER_INVALID) {
				t->invalid = true;
				return;
			}
			if (v == FRAMER_GATHER) {
				if (st.n > avail)
					break; /* wait for the next chunk */
				continue;
			}
			t->starts += st.starts;
			if (v == FRAMER_WHOLE) {
				/* the whole reply is there, contiguous */
				assert_true(st.n <= have);
				assert_int_equal(wire_read_i32(stream + done), (int32_t)st.n);
				if (t->nwhole < 8)
					t->whole[t->nwhole++] = st.n;
			} else if (v == FRAMER_FORWARD)
				t->forwarded += st.n;
			else
				t->dropped += st.n;
			done += st.n;
			if (st.completes) {
				t->completes++;
				inflight_pop(arg);
			}
			if (avail == st.n)
				break;
		}
	}
}

static const int32_t *ring_expect(void *arg)
{
	return inflight_expect(arg);
}

static void test_replies_in_any_chunking(void **state)
{
	static uint8_t stream[40000];
	size_t n1 = reply(stream, 100, 1, 0, 10);
	size_t n2 = reply(stream + n1, 101, 2, 0, 5000);
	size_t n3 = reply(stream + n1 + n2, 102, 3, 0, 0);
	size_t len = n1 + n2 + n3;
	const size_t chunks[] = {1, 3, 16, 17, 20, 21, 4096, len};
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		reply_framer f;
		inflight_ring ring;
		reply_framer_init(&f);
		inflight_init(&ring);
		for (int32_t id = 1; id <= 3; id++)
			assert_non_null(inflight_push(&ring, id, INFLIGHT_PLAIN, REPLY_FORM_OPMSG));
		tally t = {0};
		feed(&f, stream, len, chunks[c], ring_expect, &ring, &t);
		assert_false(t.invalid);
		assert_int_equal(t.forwarded, len);
		assert_int_equal(t.dropped, 0);
		assert_int_equal(t.starts, 3);
		assert_int_equal(t.completes, 3);
		assert_int_equal(inflight_count(&ring), 0);
		assert_false(reply_framer_mid_reply(&f));
	}
}

/* A reply to a moreToCome request (nothing in flight for it) is dropped,
 * whole, and the next real reply still goes through. */
static void test_unwanted_reply_dropped(void **state)
{
	static uint8_t stream[4000];
	size_t n1 = reply(stream, 200, 9, 0, 100); /* answers request 9: not in flight */
	size_t n2 = reply(stream + n1, 201, 5, 0, 50);
	reply_framer f;
	inflight_ring ring;
	reply_framer_init(&f);
	inflight_init(&ring);
	inflight_push(&ring, 5, INFLIGHT_PLAIN, REPLY_FORM_OPMSG);
	tally t = {0};
	feed(&f, stream, n1 + n2, 7, ring_expect, &ring, &t);
	assert_int_equal(t.dropped, n1);
	assert_int_equal(t.forwarded, n2);
	assert_int_equal(t.completes, 1);

	/* nothing in flight at all: every reply is dropped */
	reply_framer_init(&f);
	t = (tally){0};
	feed(&f, stream, n1 + n2, n1 + n2, ring_expect, &ring, &t);
	assert_int_equal(t.dropped, n1 + n2);
	assert_int_equal(t.completes, 0);
}

/* An exhaust stream: moreToCome replies keep the head; each next reply
 * answers the previous reply's requestID; the last one completes it. */
static void test_exhaust_stream(void **state)
{
	static uint8_t stream[4000];
	size_t n = 0;
	n += reply(stream + n, 300, 7, OPMSG_MORE_TO_COME, 20);
	n += reply(stream + n, 301, 300, OPMSG_MORE_TO_COME, 20);
	n += reply(stream + n, 302, 301, 0, 20);
	reply_framer f;
	inflight_ring ring;
	reply_framer_init(&f);
	inflight_init(&ring);
	inflight_push(&ring, 7, INFLIGHT_PLAIN, REPLY_FORM_OPMSG);
	tally t = {0};
	feed(&f, stream, n, 5, ring_expect, &ring, &t);
	assert_int_equal(t.forwarded, n);
	assert_int_equal(t.completes, 1);
	assert_int_equal(inflight_count(&ring), 0);
}

/* Our own answer at the head: the server's next reply is not for it. */
static void test_no_expect_behind_own_answer(void **state)
{
	inflight_ring ring;
	inflight_init(&ring);
	inflight *f = inflight_push(&ring, 1, INFLIGHT_PLAIN, REPLY_FORM_OPMSG);
	f->answer = malloc(4);
	f->answer_len = 4;
	inflight_push(&ring, 2, INFLIGHT_AWAIT, REPLY_FORM_OPMSG);
	assert_null(inflight_expect(&ring));
	assert_false(inflight_only_awaiting(&ring));
	inflight_pop(&ring);
	assert_int_equal(*inflight_expect(&ring), 2);
	assert_true(inflight_only_awaiting(&ring));
	inflight_clear(&ring);
	assert_int_equal(inflight_count(&ring), 0);
	assert_null(inflight_head(&ring));
}

static void test_ring_wraps_and_fills(void **state)
{
	inflight_ring ring;
	inflight_init(&ring);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < INFLIGHT_MAX; i++)
			assert_non_null(inflight_push(&ring, round * 1000 + i, INFLIGHT_PLAIN,
			                              REPLY_FORM_OPMSG));
		assert_true(inflight_full(&ring));
		assert_null(inflight_push(&ring, -1, INFLIGHT_PLAIN, REPLY_FORM_OPMSG));
		for (int i = 0; i < INFLIGHT_MAX / 2 + round; i++) {
			assert_int_equal(inflight_head(&ring)->request_id, round * 1000 + i);
			inflight_pop(&ring);
		}
		inflight_clear(&ring);
	}
}

/* The ring grows from its inline slots while wrapped: order and entries
 * survive, answers included (ASan checks nothing leaks or is lost). */
static void test_ring_grows_in_order(void **state)
{
	inflight_ring ring;
	inflight_init(&ring);
	int32_t next = 0, expect = 0;
	for (int i = 0; i < 3; i++)
		inflight_push(&ring, next++, INFLIGHT_PLAIN, REPLY_FORM_OPMSG);
	inflight_pop(&ring); /* head moves: the next pushes wrap inside the inline slots */
	inflight_pop(&ring);
	expect = 2;
	for (int i = 0; i < 20; i++) {
		inflight *f = inflight_push(&ring, next++, INFLIGHT_PLAIN, REPLY_FORM_OPMSG);
		assert_non_null(f);
		f->answer = malloc(8);
		f->answer_len = 8;
	}
	assert_int_equal(inflight_count(&ring), 21);
	for (unsigned i = 0; i < inflight_count(&ring); i++)
		assert_int_equal(inflight_at(&ring, i)->request_id, expect + (int32_t)i);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(inflight_head(&ring)->request_id, expect++);
		inflight_pop(&ring);
	}
	inflight_clear(&ring);
	assert_int_equal(inflight_count(&ring), 0);
	assert_non_null(inflight_push(&ring, 99, INFLIGHT_PLAIN, REPLY_FORM_OPMSG));
	inflight_clear(&ring);
}

static void test_invalid_stream(void **state)
{
	reply_framer f;
	inflight_ring ring;
	reply_framer_init(&f);
	inflight_init(&ring);
	inflight_push(&ring, 1, INFLIGHT_PLAIN, REPLY_FORM_OPMSG);
	uint8_t junk[32] = {0xff, 0xff, 0xff, 0x7f};
	tally t = {0};
	feed(&f, junk, sizeof(junk), sizeof(junk), ring_expect, &ring, &t);
	assert_true(t.invalid);
	assert_int_equal(t.forwarded + t.dropped, 0);
	inflight_clear(&ring);
}

/* The OP_COMPRESSED reply is gathered whole before anything moves. */
static void test_compressed_reply_gathered(void **state)
{
	reply_framer f;
	reply_framer_init(&f);
	int32_t id = wire_read_i32(fx_compressed_zstd + 8);
	framer_step st;
	wire_error err = {0};
	size_t len = sizeof(fx_compressed_zstd);
	assert_int_equal(
	    reply_framer_next(&f, fx_compressed_zstd, REPLY_PEEK_LEN, len - 1, &id, &st, &err),
	    FRAMER_GATHER);
	assert_int_equal(st.n, len);
	assert_int_equal(reply_framer_want(&f), len);
	assert_int_equal(reply_framer_next(&f, fx_compressed_zstd, len, len, &id, &st, &err),
	                 FRAMER_FORWARD);
	assert_int_equal(st.n, len);
	assert_true(st.completes);
	assert_true(st.peek.compressed);
	assert_int_equal(reply_framer_want(&f), REPLY_PEEK_LEN);
}

/* Replies to a hello are gathered whole when asked, in any chunking; a
 * streaming hello's every reply too; other replies still stream, and a
 * reply answering nothing is still dropped without being gathered. */
static void test_hello_replies_whole(void **state)
{
	static uint8_t stream[60000];
	size_t n[5], len = 0;
	len += n[0] = reply(stream + len, 400, 1, 0, 30);                    /* plain */
	len += n[1] = reply(stream + len, 401, 2, OPMSG_MORE_TO_COME, 5000); /* hello ... */
	len += n[2] = reply(stream + len, 402, 401, OPMSG_MORE_TO_COME, 40); /* streamed */
	len += n[3] = reply(stream + len, 403, 77, 0, 100);                  /* answers nothing */
	len += n[4] = reply(stream + len, 404, 402, 0, 10);                  /* last of stream */
	const size_t chunks[] = {1, 7, 20, 21, 1000, len};
	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		reply_framer f;
		inflight_ring ring;
		reply_framer_init(&f);
		inflight_init(&ring);
		assert_non_null(inflight_push(&ring, 1, INFLIGHT_PLAIN, REPLY_FORM_OPMSG));
		assert_non_null(inflight_push(&ring, 2, INFLIGHT_AWAIT, REPLY_FORM_OPMSG));
		tally t = {.whole_for_hello = true};
		feed(&f, stream, len, chunks[c], ring_expect, &ring, &t);
		assert_false(t.invalid);
		assert_int_equal(t.forwarded, n[0]);
		assert_int_equal(t.dropped, n[3]);
		assert_int_equal(t.nwhole, 3);
		assert_int_equal(t.whole[0], n[1]);
		assert_int_equal(t.whole[1], n[2]);
		assert_int_equal(t.whole[2], n[4]);
		assert_int_equal(t.completes, 2);
		assert_int_equal(inflight_count(&ring), 0);
	}
	/* off: the same stream passes in pieces, as before */
	reply_framer f;
	inflight_ring ring;
	reply_framer_init(&f);
	inflight_init(&ring);
	inflight_push(&ring, 1, INFLIGHT_PLAIN, REPLY_FORM_OPMSG);
	inflight_push(&ring, 2, INFLIGHT_HELLO, REPLY_FORM_OPMSG);
	tally t = {0};
	feed(&f, stream, len, 7, ring_expect, &ring, &t);
	assert_int_equal(t.nwhole, 0);
	assert_int_equal(t.forwarded, len - n[3]);
}

/* A reply wanted whole says when it has begun: a gather with its header
 * here (the upstream answers, so its reply deadline ends, as a streamed
 * reply's does at its first bytes), and not while the header itself is
 * still arriving. */
static void test_whole_gather_says_it_began(void **state)
{
	static uint8_t msg[3000];
	size_t len = reply(msg, 500, 9, 0, 2000);
	int32_t id = 9;
	reply_framer f;
	reply_framer_init(&f);
	reply_framer_set_whole(&f, true);
	framer_step st;
	wire_error err = {0};
	assert_int_equal(reply_framer_next(&f, msg, 10, 10, &id, &st, &err), FRAMER_GATHER);
	assert_false(st.begun);
	assert_int_equal(reply_framer_next(&f, msg, REPLY_PEEK_LEN, 100, &id, &st, &err),
	                 FRAMER_GATHER);
	assert_true(st.begun);
	assert_int_equal(st.n, len);
	assert_int_equal(reply_framer_next(&f, msg, len, len, &id, &st, &err), FRAMER_WHOLE);
	assert_false(st.begun);
	assert_true(st.starts && st.completes);
}

static void assert_same_framer(const reply_framer *a, const reply_framer *b)
{
	assert_int_equal(a->left, b->left);
	assert_int_equal(a->drop, b->drop);
	assert_int_equal(a->more, b->more);
	assert_int_equal(a->streaming, b->streaming);
	assert_int_equal(a->stream_from, b->stream_from);
	assert_int_equal(a->want, b->want);
	assert_int_equal(a->whole, b->whole);
}

/* reply_framer_plain, the run's inline decision, against the framer
 * itself: every reply it takes, reply_framer_next forwards whole and
 * completes, leaving the same state; every one it leaves, it leaves
 * untouched. Over flag bits, opcodes, answers to others, a stream going
 * on, and framers mid-reply or gathering whole. */
static void test_plain_is_what_next_says(void **state)
{
	static uint8_t msg[600];
	const uint32_t flags[] = {0, OPMSG_MORE_TO_COME, OPMSG_CHECKSUM_PRESENT, 1u << 16};
	const int32_t opcodes[] = {OP_MSG, OP_REPLY, OP_COMPRESSED, 2012 + 100};
	const int32_t answers[] = {7, 8, 50};
	size_t taken = 0, left = 0;
	for (size_t fl = 0; fl < 4; fl++)
		for (size_t op = 0; op < 4; op++)
			for (size_t an = 0; an < 3; an++)
				for (int pre = 0; pre < 5; pre++) {
					size_t len = reply(msg, 60, answers[an], flags[fl], 300);
					wire_write_i32(msg + 12, opcodes[op]);
					int32_t expect = 7;
					reply_framer f, g, was;
					reply_framer_init(&f);
					if (pre == 1) { /* a stream from request 50 goes on */
						f.streaming = true;
						f.stream_from = 50;
					}
					if (pre == 2)
						f.left = 10; /* mid-reply */
					if (pre == 3)
						reply_framer_set_whole(&f, true);
					g = was = f;
					const int32_t *ex = pre == 4 ? NULL : &expect;
					if (!reply_framer_plain(&f, msg, len, ex)) {
						assert_same_framer(&f, &was);
						left++;
						continue;
					}
					framer_step st;
					wire_error err = {0};
					assert_int_equal(
					    reply_framer_next(&g, msg, len, len, ex, &st, &err),
					    FRAMER_FORWARD);
					assert_int_equal(st.n, len);
					assert_true(st.starts && st.completes);
					assert_same_framer(&f, &g);
					taken++;
				}
	/* OP_MSG to request 7 with no moreToCome, from a boundary: flags 0,
	 * checksum, bit 16; fresh or after a stream */
	assert_int_equal(taken, 3 * 2);
	assert_int_equal(left, 4 * 4 * 3 * 5 - taken);
	/* a length the header does not say, or one too short for flag bits */
	size_t len = reply(msg, 60, 7, 0, 10);
	int32_t expect = 7;
	reply_framer f;
	reply_framer_init(&f);
	assert_false(reply_framer_plain(&f, msg, len - 1, &expect));
	wire_write_i32(msg, 19);
	assert_false(reply_framer_plain(&f, msg, 19, &expect));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replies_in_any_chunking),
	    cmocka_unit_test(test_unwanted_reply_dropped),
	    cmocka_unit_test(test_exhaust_stream),
	    cmocka_unit_test(test_no_expect_behind_own_answer),
	    cmocka_unit_test(test_ring_wraps_and_fills),
	    cmocka_unit_test(test_ring_grows_in_order),
	    cmocka_unit_test(test_invalid_stream),
	    cmocka_unit_test(test_compressed_reply_gathered),
	    cmocka_unit_test(test_hello_replies_whole),
	    cmocka_unit_test(test_whole_gather_says_it_began),
	    cmocka_unit_test(test_plain_is_what_next_says),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
