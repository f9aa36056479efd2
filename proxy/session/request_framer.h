/* The request framer: turns the client's byte stream into verbs, as the
 * reply framer does for the upstream's, without reading request bodies.
 * It answers one question each call, from the first header bytes buffered
 * and how many bytes are buffered in all:
 *
 *   REQF_NEED    nothing to do until the input holds n bytes (a header, or
 *                the whole of a small request); `started`: some bytes of a
 *                request have arrived, so its arrival is being timed;
 *   REQF_WHOLE   the next n bytes of the input are one whole request:
 *                judge them where they are;
 *   REQF_LARGE   a request of n bytes (CUT_MIN or more) has begun and has
 *                not all arrived: give it a buffer of its own and say so
 *                (request_framer_large), or, without memory for one, wait
 *                for all n bytes in the input (NEED n);
 *   REQF_TAKE    move the next n bytes of the input into the large
 *                request's buffer at offset `at` (then request_framer_took);
 *   REQF_SEND    a large request cut through: bytes at..at+n of its buffer
 *                may go upstream now (then request_framer_sent). Never its
 *                last CUT_HELD bytes: those wait for the verdict, so the
 *                server cannot run a request mongoguard has not judged;
 *   REQF_JUDGE   the large request is whole in its buffer: judge it; bytes
 *                at..at+n of it have not gone upstream yet (all of it when
 *                held, its tail when cut through). Then request_framer_done,
 *                unless the request is held for later;
 *   REQF_REFUSE  the header's length is outside the protocol's limits (err
 *                says why): the stream cannot be resynchronised.
 *
 * next() only looks: it changes nothing, so a caller may ask, decide not to
 * act (backpressure), and ask again later. What the caller did is told back
 * through the four calls after it.
 *
 * Pipelined requests: run() says how many whole small requests lie one
 * after another at the front of the input, so a read of many is judged in
 * one pass and its bytes moved once, each request of the run being a
 * WHOLE of its own length. It only looks too. Pure: no I/O, no
 * allocation. */
#ifndef MG_PROXY_SESSION_REQUEST_FRAMER_H
#define MG_PROXY_SESSION_REQUEST_FRAMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/frame.h"
#include "protocol/wire_error.h"

enum {
	CUT_MIN = 64 * 1024, /* smallest request given a buffer of its own */
	CUT_HELD = 16,       /* a cut-through request's last bytes, held until judged */
};

typedef enum {
	REQF_NEED,
	REQF_WHOLE,
	REQF_LARGE,
	REQF_TAKE,
	REQF_SEND,
	REQF_JUDGE,
	REQF_REFUSE,
} reqf_verb;

/* Where the stream is. At a boundary the framer keeps nothing: a small
 * request gathers in the input, and its header is read again each call. */
typedef enum {
	REQF_BOUNDARY,
	REQF_HELD,    /* a large request arriving into its buffer, judged when whole */
	REQF_RELAYED, /* the same, cut through: forwarded as it arrives */
} reqf_mode;

/* Invariant: at a boundary len = got = sent = 0; else
 * sent <= got <= len, and sent <= len - CUT_HELD when relayed (0 when held). */
typedef struct request_framer {
	reqf_mode mode;
	size_t len;  /* the large request's length */
	size_t got;  /* bytes of it in its buffer */
	size_t sent; /* bytes of those forwarded */
} request_framer;

typedef struct reqf_step {
	reqf_verb verb;
	size_t n;
	size_t at;         /* TAKE, SEND, JUDGE: offset in the large request's buffer */
	bool started;      /* NEED: a request's bytes have begun to arrive */
	frame_header head; /* WHOLE, LARGE, REFUSE (request id and opcode): the header read */
} reqf_step;

static inline void request_framer_init(request_framer *f)
{
	*f = (request_framer){REQF_BOUNDARY, 0, 0, 0};
}

/* hdr: the first min(avail, WIRE_HEADER_LEN) bytes of the input,
 * contiguous; avail: all the bytes the input holds. */
reqf_verb request_framer_next(const request_framer *f, const uint8_t *hdr, size_t avail,
                              reqf_step *st, wire_error *err);

/* A run: at a boundary, how many requests, one after another from p (the
 * first `have` bytes of the input, contiguous), are whole there, shorter
 * than CUT_MIN and of a length the protocol allows; at most max of them.
 * *n: their bytes. 0 (and *n 0) in a large request, or when the first is
 * not such a one: next() then says what it is. The run ends before the
 * first request that is not, or at max. */
size_t request_framer_run(const request_framer *f, const uint8_t *p, size_t have, size_t max,
                          size_t *n);

/* A large request of len bytes (REQF_LARGE's n) has a buffer of its own;
 * relay: it is cut through. */
void request_framer_large(request_framer *f, size_t len, bool relay);

/* n more bytes of the large request are in its buffer (a TAKE done, or
 * read there straight from the socket). */
void request_framer_took(request_framer *f, size_t n);

/* n more bytes of it went upstream (a SEND done). */
void request_framer_sent(request_framer *f, size_t n);

/* The large request was judged and dealt with: back at a boundary. */
void request_framer_done(request_framer *f);

/* A large request arriving: whether one is, and how many bytes of it are
 * still to come (what a read may put straight into its buffer). */
static inline bool request_framer_in_large(const request_framer *f)
{
	return f->mode != REQF_BOUNDARY;
}

static inline size_t request_framer_room(const request_framer *f)
{
	return f->len - f->got;
}

#endif
