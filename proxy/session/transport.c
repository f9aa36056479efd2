/* The transport (see transport.h). */
#include "proxy/session/transport.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h> /* ev_read, ev_write, wm_read, readcb, errorcb */
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

_Thread_local uint64_t session_ncallbacks;

enum { SMALL_READ = 16 * 1024 }; /* plain_read_cb's recv into the stack */

static void plain_read_cb(evutil_socket_t fd, short what, void *arg);

static bool reads_owned(const transport_side *t)
{
	return event_get_callback(&t->bev->ev_read) == plain_read_cb;
}

void transport_restart_reads(transport_side *t)
{
	struct bufferevent *bev = t->bev;
	if (!t->stopped || evbuffer_get_length(bufferevent_get_input(bev)) >= bev->wm_read.high)
		return;
	t->stopped = false;
	if (bufferevent_get_enabled(bev) & EV_READ)
		event_add(&bev->ev_read, NULL); /* no read timeouts are ever set */
}

void transport_set_read_need(transport_side *t, size_t need)
{
	struct bufferevent *bev = t->bev;
	size_t high = need > READ_CHUNK ? need : READ_CHUNK;
	if (bev->wm_read.high == high)
		return;
	if (!reads_owned(t)) {
		bufferevent_setwatermark(bev, EV_READ, 0, high);
		return;
	}
	bev->wm_read.high = high;
	transport_restart_reads(t);
}

void transport_await(transport_side *t, size_t remaining)
{
	int lowat = remaining > READ_CHUNK ? READ_CHUNK : (int)remaining;
	if (t->tls || lowat == t->lowat || (lowat <= 1 && t->lowat <= 1))
		return;
	int v = lowat > 1 ? lowat : 1;
	if (setsockopt(bufferevent_getfd(t->bev), SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v)) == 0)
		t->lowat = lowat;
}

void transport_direct(transport_side *t, uint8_t *buf, size_t room)
{
	t->direct = buf;
	t->direct_room = buf ? room : 0;
	t->direct_got = 0;
}

size_t transport_claim(transport_side *t)
{
	size_t n = t->direct_got;
	t->direct_got = 0;
	return n;
}

void transport_relay(struct evbuffer *src, transport_side *dst, bool connected, size_t len,
                     const uint8_t *at)
{
	struct evbuffer *out = bufferevent_get_output(dst->bev);
	struct evbuffer_iovec v[8];
	struct iovec io[8];
	int n = 0;
	if (connected && len > 0 && evbuffer_get_length(out) == 0 && !dst->tls) {
		if (at) { /* the caller's view of the first chain: no peek */
			io[0] = (struct iovec){(void *)at, len};
			n = 1;
		} else {
			n = evbuffer_peek(src, (ev_ssize_t)len, NULL, v, 8);
			n = n <= 8 ? n : 0;
			for (int i = 0; i < n; i++)
				io[i] = (struct iovec){v[i].iov_base, v[i].iov_len};
		}
	}
	if (n > 0) {
		/* send or sendmsg, not writev: the socket calls skip the file
		 * layer, and send copies no iovec in */
		struct msghdr m = {.msg_iov = io, .msg_iovlen = (size_t)n};
		/* a socket bufferevent's events hold its fd; bufferevent_getfd
		 * asks through its ctrl call, under its lock */
		int fd = event_get_fd(&dst->bev->ev_write);
		ssize_t w = n == 1 ? send(fd, io[0].iov_base, io[0].iov_len, MSG_NOSIGNAL)
		                   : sendmsg(fd, &m, MSG_NOSIGNAL);
		if (w > 0) {
			evbuffer_drain(src, (size_t)w);
			len -= (size_t)w;
		}
	}
	if (len > 0)
		evbuffer_remove_buffer(src, out, len);
}

void transport_stage_or_relay(struct evbuffer *src, size_t len, bool all, struct evbuffer *stage,
                              transport_side *dst, bool connected, const uint8_t *at)
{
	if (all && dst->bev && evbuffer_get_length(stage) == 0)
		transport_relay(src, dst, connected, len, at);
	else
		evbuffer_remove_buffer(src, stage, len);
}

transport_buf *transport_buf_new(size_t cap)
{
	transport_buf *b = malloc(sizeof(*b) + cap);
	if (b) {
		b->refs = 1;
		b->cap = cap;
	}
	return b;
}

void transport_buf_release(transport_buf *b)
{
	if (b && --b->refs == 0)
		free(b);
}

/* libevent is done with a piece of a buffer: written, or its output freed. */
static void buf_written(const void *data, size_t len, void *arg)
{
	transport_buf_release(arg);
}

bool transport_relay_buf(transport_side *dst, bool connected, transport_buf *b, size_t at,
                         size_t len)
{
	struct evbuffer *out = bufferevent_get_output(dst->bev);
	const uint8_t *p = b->data + at;
	if (connected && len > 0 && evbuffer_get_length(out) == 0 && !dst->tls) {
		ssize_t w = send(event_get_fd(&dst->bev->ev_write), p, len, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
		}
	}
	if (len == 0)
		return true;
	if (evbuffer_add_reference(out, p, len, buf_written, b) != 0)
		return false;
	b->refs++;
	return true;
}

/* One readv of up to want bytes straight into the end of in: the return
 * of readv, or -2 without memory for the space. */
static ssize_t read_into(struct evbuffer *in, int fd, size_t want)
{
	struct evbuffer_iovec v[2];
	struct iovec io[2];
	int n = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2);
	if (n <= 0)
		return -2;
	for (int i = 0; i < n; i++)
		io[i] = (struct iovec){v[i].iov_base, v[i].iov_len};
	ssize_t got = readv(fd, io, n);
	size_t left = got > 0 ? (size_t)got : 0;
	for (int i = 0; i < n; i++) {
		v[i].iov_len = v[i].iov_len < left ? v[i].iov_len : left;
		left -= v[i].iov_len;
	}
	evbuffer_commit_space(in, v, n);
	return got;
}

/* A read that got nothing (n: its result; -2 when the input buffer could
 * not grow): nothing to do when the socket is merely empty, else the end
 * of the stream or the error, reported as libevent reports it: reading
 * disabled, then the event callback. */
static void read_failed(struct bufferevent *bev, ssize_t n)
{
	if (n < 0 && n != -2 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n == -2)
		errno = ENOMEM;
	bufferevent_disable(bev, EV_READ);
	bev->errorcb(bev, BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR),
	             bev->cbarg);
}

/* The stack's full first read (len bytes) and, after it in the same
 * chain, one recv of up to `want` more: a message that spans the two lies
 * contiguous in the input, so judging it needs no pullup copy (a 1,000-
 * statement bulk write, ~45 KB, arrives that way). *got: the bytes now in
 * the input; 0 and -2 without memory for the chain (the session ends, as
 * when evbuffer_add fails). */
static ssize_t read_after(struct evbuffer *in, int fd, const uint8_t *first, size_t len,
                          size_t want, size_t *got)
{
	struct evbuffer_iovec v;
	*got = 0;
	if (evbuffer_reserve_space(in, (ev_ssize_t)(len + want), &v, 1) != 1 ||
	    v.iov_len < len + want)
		return -2;
	memcpy(v.iov_base, first, len);
	ssize_t r = recv(fd, (uint8_t *)v.iov_base + len, want, 0);
	v.iov_len = len + (r > 0 ? (size_t)r : 0);
	evbuffer_commit_space(in, &v, 1);
	*got = v.iov_len;
	return r;
}

/* ---- the thread's read buffers ----
 * A small read into an empty input went into the stack and was copied to
 * the input by evbuffer_add, in a chain malloc'd for it (2 KiB and up,
 * past glibc's per-thread cache) and freed when the session drained it:
 * 6.6 % of a pipelined find's instructions. Now it is read into one
 * of the thread's READ_POOL buffers, which the input refers to
 * (evbuffer_add_reference): the chain is a small header and nothing is
 * copied. The buffer is counted like a large request's (transport_buf):
 * the pool holds one reference, the chain another until libevent lets go
 * of it, wherever the bytes went meanwhile (drained, moved to an output
 * that queued them, or freed with their session, on any later turn). One
 * still referred to (a partial message waiting for its rest, a reply
 * queued behind a slow client) is not read into again; with none free a
 * read goes through the stack as before, so a thread keeps at most
 * READ_POOL x SMALL_READ bytes this way. Only this thread's sessions use
 * its pool, so the counts need no atomics. */
enum { READ_POOL = 4 };
static _Thread_local transport_buf *read_pool[READ_POOL];

/* A buffer of the pool nothing refers to (made the first time), or NULL. */
static transport_buf *pool_take(void)
{
	for (int i = 0; i < READ_POOL; i++) {
		if (!read_pool[i])
			return read_pool[i] = transport_buf_new(SMALL_READ);
		if (read_pool[i]->refs == 1)
			return read_pool[i];
	}
	return NULL;
}

unsigned transport_pool_lent(void)
{
	unsigned n = 0;
	for (int i = 0; i < READ_POOL; i++)
		n += read_pool[i] && read_pool[i]->refs > 1;
	return n;
}

void transport_pool_end(void)
{
	for (int i = 0; i < READ_POOL; i++) {
		transport_buf_release(read_pool[i]);
		read_pool[i] = NULL;
	}
}

/* got bytes read into b->data, at the end of in, referred to where they
 * lie; 0, or -1 without memory for the chain's header. */
static int lend(struct evbuffer *in, transport_buf *b, size_t got)
{
	if (evbuffer_add_reference(in, b->data, got, buf_written, b) != 0)
		return -1;
	b->refs++;
	return 0;
}

/* Up to `room` bytes into the input: one recv into a free buffer of the
 * pool when the input is empty (referred to), else into the stack
 * (copied); when that comes back full, the rest of up to a read chunk in
 * the same chain (read_after); when SMALL_READ bytes of a large message
 * already wait, one readv of up to a read chunk straight into the input.
 * The bytes got, or 0 with *n the failed call's result. */
static size_t read_input(struct bufferevent *bev, int fd, size_t have, size_t room, ssize_t *n)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t got = 0;
	/* A bufferevent keeps its input's end frozen except while it reads. */
	evbuffer_unfreeze(in, 0);
	if (have < SMALL_READ || room < SMALL_READ) {
		uint8_t stack[SMALL_READ];
		transport_buf *b = have == 0 ? pool_take() : NULL;
		uint8_t *buf = b ? b->data : stack;
		*n = recv(fd, buf, room < SMALL_READ ? room : SMALL_READ, 0);
		if (*n > 0) {
			got = (size_t)*n;
			room -= got;
			if (got == SMALL_READ && room > 0) {
				size_t want = room < READ_CHUNK ? room : READ_CHUNK;
				if (read_after(in, fd, buf, got, want, &got) == -2)
					*n = -2;
			} else if (b ? lend(in, b, got) != 0 : evbuffer_add(in, buf, got) != 0) {
				got = 0;
				*n = -2;
			}
		}
	} else {
		*n = read_into(in, fd, room < READ_CHUNK ? room : READ_CHUNK);
		if (*n > 0)
			got = (size_t)*n;
	}
	evbuffer_freeze(in, 0);
	return got;
}

/* A plain socket's read event (see the top of transport.h). The
 * bufferevent's enabling and disabling work on its ev_read whatever
 * callback that event has, so they are unchanged; an enable while stopped
 * wakes this once, which stops again. Bytes read are handed on before an
 * end of stream or an error met after them (the socket stays readable, the
 * next call meets it again). */
static void plain_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bufferevent *bev = arg;
	transport_side *t = bev->cbarg;
	session_ncallbacks++;
	size_t have = evbuffer_get_length(bufferevent_get_input(bev)), high = bev->wm_read.high;
	ssize_t n = 0;
	if (t->direct_room > t->direct_got && have == 0) {
		size_t want = t->direct_room - t->direct_got;
		n = recv(fd, t->direct + t->direct_got, want < DIRECT_READ ? want : DIRECT_READ, 0);
		if (n > 0) {
			t->direct_got += (size_t)n;
			bev->readcb(bev, bev->cbarg); /* last: it may end the session */
			return;
		}
		read_failed(bev, n);
		return;
	}
	if (high <= have) {
		/* The input holds the read mark: stop until it is consumed
		 * (transport_restart_reads). The session consumes what it can
		 * before it returns, so this is a backstop against spinning. */
		event_del(&bev->ev_read);
		t->stopped = true;
		return;
	}
	size_t got = read_input(bev, fd, have, high - have, &n);
	if (got > 0) {
		bev->readcb(bev, bev->cbarg); /* last: it may end the session */
		return;
	}
	read_failed(bev, n);
}

/* Points a plain socket bufferevent's read event at plain_read_cb. If it
 * does not look like the one libevent assigned (another libevent, another
 * layout), libevent's own read stays. */
static void own_reads(transport_side *t)
{
	struct bufferevent *bev = t->bev;
	struct event *rd = &bev->ev_read;
	evutil_socket_t fd = bufferevent_getfd(bev);
	short evs = EV_READ | EV_PERSIST | EV_FINALIZE;
	if (t->tls || fd < 0 || event_get_fd(rd) != fd ||
	    event_get_base(rd) != bufferevent_get_base(bev) || event_get_events(rd) != evs ||
	    event_get_callback_arg(rd) != bev || event_pending(rd, EV_READ, NULL))
		return;
	/* the argument stays the bufferevent: libevent finalizes the event
	 * with it when the bufferevent is freed */
	event_assign(rd, bufferevent_get_base(bev), fd, evs, plain_read_cb, bev);
}

/* ---- a TLS side's reads ----
 * libevent's OpenSSL bufferevent reads one record per wake-up: its loop
 * (consider_reading) goes on only while SSL_pending says the record it is
 * in holds more, and OpenSSL, without read_ahead, reads from the socket no
 * further than that record's end. A driver writes each message as a
 * record of its own, so sixteen pipelined requests were sixteen wake-ups,
 * sixteen passes of the request loop (none judged as a run) and sixteen
 * writes upstream. A server does the same with replies written back to
 * back, and writes a large reply as records of at most 16 KiB, so a
 * 1 MiB reply was 64 wake-ups. tls_read_cb runs libevent's read again
 * while it gets more, with the read callback off, then hands the session
 * everything at once. Both sides have it once their handshake is done:
 * the client's (client_handshake_done) and a TLS upstream's
 * (upstream_connected, on the BEV_EVENT_CONNECTED that libevent reports
 * after the handshake, the read event assigned just before).
 *
 * Stopping anywhere is safe: each of libevent's reads ends at a record's
 * end (nothing decrypted is left in OpenSSL) or at a socket that had no
 * more (a record begun is finished when epoll reports the rest), so what
 * is not read yet is in the socket, which the level-triggered event
 * reports again. That is why read_ahead stays off: it would leave whole
 * records in OpenSSL's buffer, which epoll never reports. The cost is one
 * read that finds the socket empty per wake-up.
 *
 * An end or error (close_notify, the peer's close, a bad record) met
 * after the first record would reach the session before the requests or
 * replies in front of it, which it would then drop or cut short: it is
 * held (tls_hold) and delivered after them, unless the session stopped
 * reading meanwhile (a full in-flight queue, a slow client's output);
 * then it waits for transport_enable_reads, as the socket may never
 * report anything again (a close_notify on a socket left open). libevent
 * met it with its reads stopped, and OpenSSL keeps its state, so nothing
 * more is read. */

static void tls_hold(struct bufferevent *bev, short what, void *arg)
{
	transport_side *t = arg;
	t->held |= what;
	t->held_errno = EVUTIL_SOCKET_ERROR();
}

/* Delivers the held event when the session still reads; true when it
 * did (the session may have ended: nothing of it may be touched). */
static bool tls_deliver_held(struct bufferevent *bev, transport_side *t)
{
	if (!t->held || !(bufferevent_get_enabled(bev) & EV_READ))
		return false;
	short what = t->held;
	t->held = 0;
	/* the event callback words an error by errno: as it was when met,
	 * not as the session's sends since left it. (A socket error under
	 * TLS, a reset included, reaches it as an end of stream: the session
	 * allows a TLS side's dirty shutdown, so only an OpenSSL error is an
	 * error there, and its errno only words it.) */
	EVUTIL_SET_SOCKET_ERROR(t->held_errno);
	bufferevent_trigger_event(bev, what, 0);
	return true;
}

static void tls_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct bufferevent *bev = arg;
	transport_side *t = bev->cbarg;
	session_ncallbacks++;
	if (t->held) { /* met by an earlier read; reading has resumed */
		tls_deliver_held(bev, t);
		return;
	}
	if (what & EV_TIMEOUT) { /* none are set; libevent's own handling */
		t->lib_read(fd, what, arg);
		return;
	}
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t start = evbuffer_get_length(in), have = start, was;
	bufferevent_data_cb readcb = bev->readcb;
	bufferevent_event_cb eventcb = bev->errorcb;
	bev->readcb = NULL; /* libevent skips a NULL callback */
	bev->errorcb = tls_hold;
	do {
		was = have;
		t->lib_read(fd, what, arg);
		have = evbuffer_get_length(in);
	} while (have > was && !t->held && have - start < READ_CHUNK);
	bev->readcb = readcb;
	bev->errorcb = eventcb;
	/* through libevent, which re-checks its read mark after the callback */
	if (have > start)
		bufferevent_trigger(bev, EV_READ, 0);
	tls_deliver_held(bev, t);
}

void transport_tls_open(transport_side *t)
{
	struct bufferevent *bev = t->bev;
	struct event *rd = &bev->ev_read;
	evutil_socket_t fd = event_get_fd(rd);
	short evs = EV_READ | EV_PERSIST | EV_FINALIZE;
	if (!t->tls || t->lib_read || fd < 0 || event_get_base(rd) != bufferevent_get_base(bev) ||
	    event_get_events(rd) != evs || event_get_callback_arg(rd) != bev)
		return;
	/* libevent has just assigned it (set_open_callbacks) and added it
	 * when reading is enabled; the argument stays the bufferevent, which
	 * libevent finalizes the event with */
	bool pending = event_pending(rd, EV_READ, NULL);
	t->lib_read = event_get_callback(rd);
	event_del(rd);
	event_assign(rd, bufferevent_get_base(bev), fd, evs, tls_read_cb, bev);
	if (pending)
		event_add(rd, NULL);
}

void transport_enable_reads(transport_side *t)
{
	bufferevent_enable(t->bev, EV_READ);
	if (t->held)
		event_active(&t->bev->ev_read, EV_READ, 1);
}

void transport_init_reads(transport_side *t)
{
	own_reads(t);
	transport_set_read_need(t, READ_CHUNK);
}
