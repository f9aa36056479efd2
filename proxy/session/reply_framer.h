/* The reply framer: turns the upstream's byte stream into verbs, without
 * reading reply bodies. After a reply's header (and an OP_MSG's flag bits)
 * it answers one question, as pgbouncer's sbuf does:
 *
 *   FRAMER_GATHER   come back with n contiguous bytes (n may be more than
 *                   is buffered: then wait for the upstream to send them);
 *   FRAMER_FORWARD  move the next n bytes to the client untouched;
 *   FRAMER_DROP     discard the next n bytes: the reply they belong to
 *                   answers no request in flight;
 *   FRAMER_WHOLE    the next n bytes, contiguous at p, are one whole reply
 *                   (asked for with reply_framer_set_whole): pass them or
 *                   something in their place, then they are gone;
 *   FRAMER_INVALID  the stream cannot go on (err says why).
 *
 * A reply answers the oldest request in flight (its responseTo equals that
 * request's id) or continues an exhaust stream (its responseTo equals the
 * previous relayed reply's requestID while that one had moreToCome).
 * Anything else answers a request that allowed no reply (some servers answer
 * moreToCome writes anyway); relaying it would hand the client's next
 * request a stale answer, so it is dropped.
 *
 * The caller must do exactly what a FORWARD or DROP says: the framer counts
 * those bytes as gone when it returns. Pure: no I/O, no libevent. */
#ifndef MG_PROXY_SESSION_REPLY_FRAMER_H
#define MG_PROXY_SESSION_REPLY_FRAMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/opmsg.h"
#include "protocol/reply_peek.h"
#include "protocol/wire_error.h"

typedef enum {
	FRAMER_GATHER,
	FRAMER_FORWARD,
	FRAMER_DROP,
	FRAMER_WHOLE,
	FRAMER_INVALID,
} framer_verb;

typedef struct reply_framer {
	size_t left;         /* bytes of the current reply still to pass; 0 at a boundary */
	bool drop;           /* the current reply answers nothing in flight */
	bool more;           /* the current reply has moreToCome */
	bool streaming;      /* the last relayed reply had moreToCome ... */
	int32_t stream_from; /* ... and this requestID: the next reply answers it */
	size_t want;         /* contiguous bytes the next peek needs */
	bool whole;          /* replies to the head request are wanted whole */
} reply_framer;

/* One decision. starts: these are the first bytes of a reply (peek is then
 * filled). completes: after these bytes a relayed reply without moreToCome
 * has ended, so the request at the head of the queue is answered. begun:
 * a FRAMER_GATHER of a reply wanted whole whose header is here (peek
 * filled): the upstream has begun to answer. */
typedef struct framer_step {
	framer_verb verb;
	size_t n;
	bool starts;
	bool completes;
	bool begun;
	reply_peek peek;
} framer_step;

void reply_framer_init(reply_framer *f);

/* The contiguous bytes the next call wants to see at p (at a boundary: the
 * peek's; mid-reply: none). */
static inline size_t reply_framer_want(const reply_framer *f)
{
	return f->left ? 0 : f->want;
}

/* True while a reply is only partly passed: nothing else may be written to
 * the client until it ends. */
static inline bool reply_framer_mid_reply(const reply_framer *f)
{
	return f->left > 0;
}

/* While on, each reply answering the head request (an exhaust stream's
 * every reply too) is gathered whole and handed over as FRAMER_WHOLE: the
 * session sets it when the head is a hello whose reply it rewrites. Takes
 * effect at the next reply boundary. */
static inline void reply_framer_set_whole(reply_framer *f, bool on)
{
	f->whole = on;
}

/* The common case decided without reply_framer_next: at a boundary, not
 * gathering whole, the len bytes at p all here and one OP_MSG reply without
 * moreToCome answering *expect. True: it is forwarded whole and completes
 * the head request, and the framer is left exactly as reply_framer_next
 * would leave it. False: nothing changed; ask reply_framer_next. */
static inline bool reply_framer_plain(reply_framer *f, const uint8_t *p, size_t len,
                                      const int32_t *expect)
{
	if (f->left || f->whole || !expect || len < REPLY_PEEK_LEN || len > WIRE_MAX_MESSAGE_LEN ||
	    wire_read_i32(p) != (int32_t)len || wire_read_i32(p + 8) != *expect ||
	    wire_read_i32(p + 12) != OP_MSG ||
	    (wire_read_u32(p + WIRE_HEADER_LEN) & OPMSG_MORE_TO_COME))
		return false;
	f->drop = f->more = f->streaming = false;
	f->stream_from = wire_read_i32(p + 4);
	f->want = REPLY_PEEK_LEN;
	return true;
}

/* p/have: the first bytes buffered, contiguous (at least
 * reply_framer_want() of them when that many are buffered); avail: all the
 * bytes buffered. expect: the request id the head of the in-flight queue
 * waits for, or NULL when no request waits for the upstream. */
framer_verb reply_framer_next(reply_framer *f, const uint8_t *p, size_t have, size_t avail,
                              const int32_t *expect, framer_step *st, wire_error *err);

#endif
