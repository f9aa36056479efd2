/* The transport: one side of a session (the client's or the upstream's
 * connection) as a bufferevent plus mongoguard's own reads and writes. The
 * only file that knows libevent's struct bufferevent layout.
 *
 * Reads. On a plain socket mongoguard reads itself, not through libevent's
 * bufferevent read, which asks FIONREAD before every read (a system call
 * per message on each side) and reads at most 4 KiB per call. A small
 * message is one recv into the stack, copied into the input buffer; when
 * that recv comes back full, its bytes and one recv of up to a read chunk
 * after them go into one chain of the input buffer (a message spanning the
 * two lies contiguous, judged without a pullup copy); when 16 KiB of a
 * message already wait, a readv of up to a read chunk goes straight into
 * the input buffer. While the side has a direct buffer
 * (transport_direct: the rest of a large request) and its input is empty,
 * reads go straight there instead, up to DIRECT_READ at a time, and the
 * bytes are claimed with transport_claim. A TLS side reads through
 * OpenSSL and libevent (its direct buffer is never used: what it reads
 * lands in its input buffer, from which the session takes it). libevent
 * reads one TLS record per wake-up, and a driver writes each message as a
 * record of its own, a server each reply (a large one as many); once
 * either side's handshake is done (transport_tls_open) a wake-up runs
 * libevent's read again while it gets more, and the session is handed
 * all of it at once (see tls_read_cb in transport.c).
 *
 * The read high-watermark: reading a side stops while its input holds
 * this much (a message gathered whole raises it to that message's length).
 * On a side whose reads are ours it is kept without libevent's watermark
 * callback, which runs on every change of the input buffer and re-adds the
 * read event under the base lock each time; the read callback stops at the
 * mark and transport_restart_reads restarts. TLS sides keep libevent's.
 *
 * Writes. A message that is all its source holds, with nothing queued
 * before it, goes out with one send when the side is a connected plain
 * socket, and only what the socket does not take is queued: through the
 * output buffer a small message costs an epoll_ctl to watch for
 * writability, a loop turn, and an epoll_ctl to stop watching. Batches
 * (pipelined requests, a reply with more behind it) go through the buffer
 * whole, one writev later. A write error is left for the bufferevent's own
 * write to meet and report. */
#ifndef MG_PROXY_SESSION_TRANSPORT_H
#define MG_PROXY_SESSION_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bufferevent;
struct evbuffer;

enum {
	READ_CHUNK = 256 * 1024,   /* the read mark and the most read or written per call */
	DIRECT_READ = 1024 * 1024, /* the most read at once into a direct buffer */
};

/* A side's bufferevent callbacks are given the side as their argument
 * (bufferevent_setcb): the read callback finds it there.
 * Invariant: direct_got <= direct_room; `stopped` only on a side whose
 * reads are ours. */
typedef struct transport_side {
	struct bufferevent *bev; /* NULL until made (the client's: after the sniff) */
	bool tls;
	bool paused;        /* reading stopped by the session's backpressure */
	bool stopped;       /* reads ours, and off: the input holds the read mark */
	int lowat;          /* SO_RCVLOWAT set on the socket (0: the default) */
	uint8_t *direct;    /* where reads go while the input is empty, or NULL */
	size_t direct_room; /* bytes the direct buffer still takes */
	size_t direct_got;  /* bytes read into it since the last claim */
	/* TLS, after the handshake: libevent's own read callback, which
	 * tls_read_cb runs (NULL: libevent's reads as they are). */
	void (*lib_read)(int fd, short what, void *arg);
	short held;     /* an end or error met after bytes not yet handed on */
	int held_errno; /* errno when it was met */
} transport_side;

/* Makes the side's reads ours where they can be (a plain socket whose read
 * event libevent assigned and has not added yet: after
 * bufferevent_socket_new, or bufferevent_socket_connect for the upstream,
 * which assigns it again) and sets the first read mark. */
void transport_init_reads(transport_side *t);

/* The side's TLS handshake finished (the client's, or a TLS upstream's:
 * both are OpenSSL socket bufferevents): each read wake-up gathers every
 * record the socket holds, up to a read chunk, before the session sees
 * them. Left as libevent made it if its read event does not look as
 * expected (another libevent). Reads the session stops on such a side
 * must resume through transport_enable_reads. */
void transport_tls_open(transport_side *t);

/* Reading resumes after the session stopped it (backpressure on either
 * side, a held request): bufferevent_enable, and an end or error the last
 * read met and held for the bytes before it is delivered on the next loop
 * turn, with the errno it was met with. */
void transport_enable_reads(transport_side *t);

/* Callbacks this thread has run for its sessions: every socket or timer
 * callback of a session counts one (session_callbacks_run). One increment
 * of a thread-local a callback; a test bounds it against the bytes and
 * time it gave, so a callback that runs again and again shows. */
extern _Thread_local uint64_t session_ncallbacks;

/* The read mark for the next message: need bytes (at least READ_CHUNK). */
void transport_set_read_need(transport_side *t, size_t need);

/* A side whose reads stopped at the mark reads again once its input is
 * below it. Called where input is consumed and where the mark rises. */
void transport_restart_reads(transport_side *t);

/* The rest of a large request is awaited without a wake-up per packet:
 * the kernel reports the socket readable once `remaining` bytes (at most a
 * read chunk) are queued, or at its end. Plain sockets only (TLS records
 * do not map to request bytes); 0 puts the default back. */
void transport_await(transport_side *t, size_t remaining);

/* Reads go into buf (room bytes) while the input is empty; NULL stops. */
void transport_direct(transport_side *t, uint8_t *buf, size_t room);

/* The bytes read into the direct buffer since the last call; the caller
 * points it anew (transport_direct) past them. */
size_t transport_claim(transport_side *t);

/* Moves the len bytes src holds (all of them: the callers know how many
 * without asking) to dst's output, or, when dst's output is empty and dst
 * is connected (an upstream still connecting is not), writes them at once
 * (see the top of this file). at: where the caller sees them lie together
 * in src's first chain (a peek or pullup it made, nothing drained since),
 * so they are not looked up again; NULL when it has no such view. */
void transport_relay(struct evbuffer *src, transport_side *dst, bool connected, size_t len,
                     const uint8_t *at);

/* One message's len bytes, at the front of src, on their way to dst: into
 * the worker's stage, to go out with the others of this turn, or, when
 * they are all src holds (`all`, which the callers know without asking
 * src) and nothing is staged, to dst at once (transport_relay, with at as
 * there), as the stage would have sent them alone at the turn's end
 * anyway. A read of one request, or of one reply, is the common case.
 * dst->bev NULL (the side is gone): staged, for the caller to drop. */
void transport_stage_or_relay(struct evbuffer *src, size_t len, bool all, struct evbuffer *stage,
                              transport_side *dst, bool connected, const uint8_t *at);

/* A large request's own buffer (a socket's direct reads land there). Its
 * bytes go upstream from it without a copy: what the socket does not take
 * at once stays in the buffer, and dst's output refers to it
 * (evbuffer_add_reference) until libevent has written it. So the buffer
 * is counted: the session holds one reference until it is done with the
 * request (transport_buf_release), and each piece queued in an output
 * holds one until it is written or its output is freed, which may be
 * after the session is gone. The last reference frees it; nothing else
 * ever does. Invariant: refs >= 1 while allocated; bytes of data that an
 * output refers to are never written again. */
typedef struct transport_buf {
	unsigned refs;
	size_t cap;
	uint8_t data[];
} transport_buf;

/* Buffers of the calling thread's read pool that an input or output
 * still refers to (tests, and a reader of this file, see it work). */
unsigned transport_pool_lent(void);

/* The calling thread is done with sessions: its read buffers (see
 * read_input in transport.c) are let go, each freed once no input or
 * output still refers to it. */
void transport_pool_end(void);

/* A buffer of cap bytes, held once by the caller; NULL without memory. */
transport_buf *transport_buf_new(size_t cap);

/* Drops the caller's reference (b may be NULL). */
void transport_buf_release(transport_buf *b);

/* Bytes of b still wait in an output to be written. */
static inline bool transport_buf_queued(const transport_buf *b)
{
	return b->refs > 1;
}

/* Bytes at..at+len of b on their way to dst, the same way as
 * transport_relay: sent at once when dst's output is empty; whatever the
 * socket does not take is queued in dst's output as a reference to b, not
 * a copy. False when that could not be queued (out of memory). */
bool transport_relay_buf(transport_side *dst, bool connected, transport_buf *b, size_t at,
                         size_t len);

#endif
