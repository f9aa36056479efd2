/* libFuzzer target: a whole session (proxy/session/) on the deterministic
 * harness (tests/unit/session_harness.h): real sockets, a real event base,
 * a virtual clock, an upstream that answers every request with {ok: 1}
 * (or never). The input is what the client does: bytes in any chunks,
 * silences, TLS or plain, and how it ends.
 *
 * The input:
 *   byte 0   bit 0: the listener takes TLS too (allowTLS) and the client
 *            speaks TLS (its OpenSSL client on memory BIOs, so its
 *            ciphertext can be cut anywhere); bit 1: the upstream never
 *            answers; bit 2: the client reads nothing the session sends
 *   then operations, one byte each (and what follows):
 *     0 mod 4  deliver: the next byte + 1 bytes of what the client has
 *              queued go to the socket (in TLS, bit 2 first queues that
 *              many bytes of the input as raw garbage into the ciphertext)
 *     1 mod 4  queue: bit 2 clear, a whole ping (OP_MSG) with a request id
 *              of its own; set, the next byte + 1 bytes of the input as
 *              they are (in TLS as plaintext, once the handshake is done)
 *     2 mod 4  time passes: (op >> 2) * 500 ms, in steps of a second
 *     3 mod 4  bit 3 set: the upstream closes its connection (and any
 *              later one); clear, the client ends: bit 2 clear,
 *              shutdown(SHUT_WR), set, close(), and the operations stop
 *   Without TLS the queue starts empty; with it, with the ClientHello.
 *   After the operations, 200 s of silence (more than net.maxFrameWaitMS,
 *   upstream.replyTimeoutMS and the flush wait together).
 *
 * Checked:
 *   - after every operation the loop gets quiet (hx_run): nothing runs
 *     again and again;
 *   - the session's callbacks and epoll's readiness stay in proportion to
 *     what the client did: at most 64 + 24 per operation + 1 per 16 bytes
 *     delivered in all, and at most 16 in any one silence (the final one
 *     included), however long: the deadlines fire, nothing else does;
 *   - it ends when it must: when the client or the upstream ended;
 *     without TLS, when the bytes delivered stop mid-message (or at a
 *     length no message has); with TLS, when the handshake's bytes did not
 *     all arrive. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/session_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
	MAX_OPS = 256,
	FINAL_SILENCE_MS = 200000,
	STEP_MS = 1000,
	/* 40 steps: a timer that fires every step would still pass SILENCE_BOUND */
	FINAL_STEP_MS = 5000,
	SILENCE_BOUND = 16,
	MIN_MSG = 16,
	MAX_MSG = 48000000,
};

typedef struct run {
	hx_conn *c;
	bool tls, ended, garbage;
	uint64_t ops, silence_ms, pings;
	/* Without TLS: the plain stream's framing as delivered. */
	uint8_t head[4];
	size_t head_got;
	uint64_t msg_left; /* bytes of the current message still to come */
	bool broken;       /* a length no message has */
	uint64_t framed;   /* delivered bytes accounted for */
	/* What went into the client's queue, in order, as the plain stream. */
	uint8_t *stream;
	size_t stream_len;
} run;

static void die(const run *r, const char *why)
{
	fprintf(stderr,
	        "fuzz_session: %s (tls %d, ops %llu, delivered %llu, silence %llu ms, callbacks "
	        "%llu, epoll %llu, closed %d)\n",
	        why, r->tls, (unsigned long long)r->ops, (unsigned long long)r->c->delivered,
	        (unsigned long long)r->silence_ms, (unsigned long long)hx_callbacks(r->c),
	        (unsigned long long)hx_epoll_events(r->c), r->c->closed);
	abort();
}

static void check_run(run *r, bool ok)
{
	if (!ok)
		die(r, "the loop never got quiet: something runs again and again");
}

/* Without TLS: follows the lengths of the bytes delivered so far. */
static void follow_plain(run *r)
{
	while (!r->broken && r->framed < r->c->delivered) {
		uint8_t b = r->stream[r->framed++];
		if (r->msg_left) {
			r->msg_left--;
			continue;
		}
		r->head[r->head_got++] = b;
		if (r->head_got < 4)
			continue;
		uint32_t len = (uint32_t)r->head[0] | (uint32_t)r->head[1] << 8 |
		               (uint32_t)r->head[2] << 16 | (uint32_t)r->head[3] << 24;
		r->head_got = 0;
		if (len < MIN_MSG || len > MAX_MSG)
			r->broken = true;
		else
			r->msg_left = len - 4;
	}
}

static void queue_plain(run *r, const uint8_t *p, size_t n)
{
	size_t before = r->c->out_len;
	hx_queue_app(r->c, p, n);
	size_t took = r->c->out_len - before;
	memcpy(r->stream + r->stream_len, p, took);
	r->stream_len += took;
}

static void op_queue(run *r, uint8_t op, const uint8_t **in, const uint8_t *end)
{
	uint8_t msg[64];
	size_t n;
	const uint8_t *p = msg;
	if (op & 4) {
		if (*in == end)
			return;
		n = (size_t) * *in + 1;
		(*in)++;
		if (n > (size_t)(end - *in))
			n = (size_t)(end - *in);
		p = *in;
		*in += n;
	} else {
		n = hx_ping(msg, (int32_t)++r->pings);
	}
	if (r->tls)
		hx_queue_app(r->c, p, n);
	else
		queue_plain(r, p, n);
}

static void op_deliver(run *r, uint8_t op, const uint8_t **in, const uint8_t *end)
{
	if (*in == end)
		return;
	size_t n = (size_t) * *in + 1;
	(*in)++;
	if (r->tls && (op & 4)) {
		if (n > (size_t)(end - *in))
			n = (size_t)(end - *in);
		hx_queue_raw(r->c, *in, n);
		*in += n;
		r->garbage = true;
	}
	hx_deliver(r->c, n);
	if (!r->tls)
		follow_plain(r);
}

/* Time passes with nothing from the client: only the session's deadlines
 * may fire (the frame wait, the reply wait and its re-arming, the flush,
 * the end), not a timer per step. */
static void silence(run *r, uint64_t ms, uint64_t step_ms)
{
	uint64_t cb = hx_callbacks(r->c), ep = hx_epoll_events(r->c);
	r->silence_ms += ms;
	check_run(r, hx_advance(r->c, ms, step_ms));
	if (hx_callbacks(r->c) - cb > SILENCE_BOUND || hx_epoll_events(r->c) - ep > SILENCE_BOUND)
		die(r, "callbacks out of proportion during a silence");
}

static bool must_have_ended(const run *r)
{
	if (r->ended || r->c->up_gone)
		return true;
	if (r->tls) /* the server's handshake needs every byte up to the client's Finished */
		return !r->c->tls_done || r->c->delivered < r->c->hs_end;
	return r->broken || r->head_got || r->msg_left;
}

static void play(run *r, const uint8_t *in, const uint8_t *end)
{
	while (in < end && r->ops < MAX_OPS && !r->ended) {
		uint8_t op = *in++;
		r->ops++;
		switch (op & 3) {
		case 0:
			op_deliver(r, op, &in, end);
			break;
		case 1:
			op_queue(r, op, &in, end);
			break;
		case 2:
			silence(r, (uint64_t)(op >> 2) * 500, STEP_MS);
			break;
		case 3:
			if (op & 8) { /* the upstream goes; the client goes on */
				hx_upstream_close(r->c);
				break;
			}
			if (op & 4)
				hx_client_close(r->c);
			else
				hx_client_shutdown(r->c);
			r->ended = true;
			break;
		}
		check_run(r, hx_run(r->c));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	run r = {.tls = data[0] & 1};
	r.stream = malloc(HX_BUF);
	if (!r.stream)
		abort();
	hx_world *w = hx_world_new(r.tls, NULL);
	r.c = hx_conn_start(w);
	if (!r.c->s)
		die(&r, "the session did not start");
	r.c->mute = data[0] & 2;
	r.c->no_read = data[0] & 4;
	if (r.tls)
		hx_tls_begin(r.c);
	play(&r, data + 1, data + size);
	bool must_end = must_have_ended(&r);
	silence(&r, FINAL_SILENCE_MS, FINAL_STEP_MS);
	uint64_t bound = 64 + 24 * r.ops + r.c->delivered / 16;
	if (hx_callbacks(r.c) > bound || hx_epoll_events(r.c) > bound)
		die(&r, "callbacks out of proportion to what the client did");
	if (must_end && !r.c->closed)
		die(&r, "the session outlived its deadlines");
	if (getenv("FUZZ_SESSION_TRACE")) /* what each input did, for a look at the seeds */
		fprintf(stderr,
		        "fuzz_session: tls %d ops %llu delivered %llu callbacks %llu epoll %llu "
		        "(bound %llu) must end %d closed %d replies %llu\n",
		        r.tls, (unsigned long long)r.ops, (unsigned long long)r.c->delivered,
		        (unsigned long long)hx_callbacks(r.c),
		        (unsigned long long)hx_epoll_events(r.c), (unsigned long long)bound,
		        must_end, r.c->closed, (unsigned long long)r.c->replies_sent);
	hx_conn_free(r.c);
	hx_world_free(w);
	free(r.stream);
	return 0;
}
