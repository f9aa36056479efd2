/* mg_loadgen: raw OP_MSG load over TCP, for measuring what sits between a
 * client and a MongoDB server.
 *
 * N connections spread over T threads, each thread one epoll loop. Every
 * connection first sends a hello ({hello: 1, $db: "admin"}) and checks the
 * reply, then keeps D operations in flight (--depth 1: closed loop; more:
 * pipelined, replies come back in order on a connection). An operation is
 * one request, except `cursor`: a find, then getMore until the cursor id is
 * 0, timed as one operation.
 *
 * Every reply frame is checked: length within 16..48,000,000, OP_MSG,
 * responseTo equal to the oldest request in flight, a kind-0 body that is
 * valid BSON with ok: 1 and no writeErrors. Failures are counted by kind;
 * a frame that breaks the stream closes that connection.
 *
 * Requests are built once with libbson; a send copies only the head of the
 * message (header and the few patched fields: requestID, _id, cursor id)
 * and points at the shared rest, so a 16 MB insert costs no copy.
 *
 * Throughput counts operations completed within the measured window
 * (after --warmup, for --duration); latency is kept in a log-linear
 * histogram (1/64 relative precision). With --cpu-of PID, the CPU time that
 * process spent over the same window (read from /proc at its start and end)
 * is reported per operation: a proxy's cost per request, whatever share of
 * the cores it got. Output: one JSON line on stdout, a human summary on
 * stderr. Exit 0 when no error was counted, 1 otherwise.
 *
 * --setup prepares a real server for the loads instead (drop and fill the
 * collections, create the index the sorted find uses). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <bson/bson.h>

#define LG_MSG_MIN    16
#define LG_MSG_MAX    48000000
#define LG_OP_MSG     2013
#define LG_MORE       (1u << 1)
#define LG_CHECKSUM   (1u << 0)
#define LG_MAX_DEPTH  1024
#define LG_MAX_CONNS  100000
#define LG_MAX_CPU_OF 4

/* Sentinels written into templates and patched per send. */
#define S_KEY    0x13579BDF           /* int32: _id or grp */
#define S_VAL    0x1F2E3D4C           /* int32: the value an update sets */
#define S_UNIQUE 0x2468ACE02468ACE1LL /* int64: a fresh _id, or a cursor id */

typedef enum lg_op {
	OP_PING,
	OP_FIND_ID,
	OP_FIND_SORT,
	OP_UPDATE,
	OP_INSERT,
	OP_CURSOR,
} lg_op;

static const char *const op_names[] = {"ping",   "find-id", "find-sort",
                                       "update", "insert",  "cursor"};

typedef enum lg_err { E_CONNECT, E_CLOSED, E_FRAME, E_REPLY, E_TIMEOUT, E_KINDS } lg_err;

static const char *const err_names[] = {"connect", "closed", "frame", "reply", "timeout"};

/* --- latency histogram -------------------------------------------------- */

/* Values (ns) below 128 have a bucket each; above, each power of two is cut
 * into 64 buckets: at most 1/64 relative error, up to 2^41 ns. */
#define H_BUCKETS (128 + 35 * 64)

typedef struct lg_hist {
	uint64_t n[H_BUCKETS];
	uint64_t count, max, sum;
} lg_hist;

static int h_index(uint64_t v)
{
	if (v < 128)
		return (int)v;
	int msb = 63 - __builtin_clzll(v);
	int shift = msb - 6;
	int idx = 128 + (shift - 1) * 64 + (int)((v >> shift) - 64);
	return idx < H_BUCKETS ? idx : H_BUCKETS - 1;
}

static uint64_t h_value(int idx)
{
	if (idx < 128)
		return (uint64_t)idx;
	int k = idx - 128, shift = k / 64 + 1;
	uint64_t m = (uint64_t)(k % 64 + 64);
	return (m << shift) + ((1ull << shift) >> 1); /* bucket midpoint */
}

static void h_record(lg_hist *h, uint64_t v)
{
	h->n[h_index(v)]++;
	h->count++;
	h->sum += v;
	if (v > h->max)
		h->max = v;
}

static void h_merge(lg_hist *into, const lg_hist *h)
{
	for (int i = 0; i < H_BUCKETS; i++)
		into->n[i] += h->n[i];
	into->count += h->count;
	into->sum += h->sum;
	if (h->max > into->max)
		into->max = h->max;
}

static uint64_t h_percentile(const lg_hist *h, double p)
{
	if (!h->count)
		return 0;
	uint64_t rank = (uint64_t)(p * (double)h->count);
	if (rank >= h->count)
		rank = h->count - 1;
	uint64_t seen = 0;
	for (int i = 0; i < H_BUCKETS; i++) {
		seen += h->n[i];
		if (seen > rank) {
			uint64_t v = h_value(i);
			return v > h->max ? h->max : v;
		}
	}
	return h->max;
}

/* --- options ------------------------------------------------------------ */

static struct {
	const char *host;
	int port;
	lg_op op;
	long size;
	int conns;
	int depth;
	int threads;
	double duration;
	double warmup;
	long requests;
	const char *db;
	const char *coll;
	int keys;
	int batch;
	int statements;
	int shapes;
	double timeout;
	bool setup;
	bool quiet;
	const char *label;
	int ncpu_of;
	int cpu_of[LG_MAX_CPU_OF];
} opt = {
    .host = "127.0.0.1",
    .port = 27017,
    .op = OP_PING,
    .size = 1024,
    .conns = 1,
    .depth = 1,
    .threads = 0,
    .duration = 2.0,
    .warmup = 0.2,
    .requests = 0,
    .db = "mgbench",
    .coll = "items",
    .keys = 1000,
    .batch = 100,
    .statements = 1,
    .timeout = 10.0,
    .label = "",
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void wr64(uint8_t *p, uint64_t v)
{
	wr32(p, (uint32_t)v);
	wr32(p + 4, (uint32_t)(v >> 32));
}

static void *checked(void *p, size_t n)
{
	if (!p) {
		fprintf(stderr, "mg_loadgen: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

static void *xmalloc(size_t n)
{
	return checked(calloc(1, n), n);
}

static void *xrealloc(void *old, size_t n)
{
	return checked(realloc(old, n), n);
}

/* --- request templates -------------------------------------------------- */

typedef enum lg_patch_kind { P_KEY, P_VAL, P_UNIQUE } lg_patch_kind;

typedef struct lg_patch {
	size_t off;
	lg_patch_kind kind;
} lg_patch;

typedef struct lg_tmpl {
	uint8_t *msg;
	size_t len;
	size_t head; /* bytes [0, head) are copied and patched per send */
	lg_patch patch[4];
	int npatch;
} lg_tmpl;

static void find_patches(lg_tmpl *t, const void *pat, size_t plen, lg_patch_kind kind)
{
	const uint8_t *p = t->msg;
	size_t left = t->len;
	const uint8_t *hit;
	/* Patched fields are in the command body or a document's first field,
	 * so a search of the first 4 KiB finds them all. */
	if (left > 4096)
		left = 4096;
	while ((hit = memmem(p, left, pat, plen)) && t->npatch < 4) {
		size_t off = (size_t)(hit - t->msg);
		t->patch[t->npatch++] = (lg_patch){off, kind};
		if (off + plen > t->head)
			t->head = off + plen;
		left -= (size_t)(hit + plen - p);
		p = hit + plen;
	}
}

/* An OP_MSG from a body and, optionally, one kind-1 sequence of the
 * documents in seq (docs_len bytes, one after the other). */
static lg_tmpl tmpl_build(const bson_t *body, const char *seq_id, const uint8_t *seq,
                          size_t docs_len)
{
	lg_tmpl t = {0};
	size_t seq_len = seq ? 1 + 4 + strlen(seq_id) + 1 + docs_len : 0;
	t.len = 16 + 4 + 1 + body->len + seq_len;
	t.msg = xmalloc(t.len);
	wr32(t.msg, (uint32_t)t.len);
	wr32(t.msg + 12, LG_OP_MSG);
	uint8_t *p = t.msg + 21;
	t.msg[20] = 0;
	memcpy(p, bson_get_data(body), body->len);
	p += body->len;
	if (seq) {
		*p++ = 1;
		wr32(p, (uint32_t)(seq_len - 1));
		p += 4;
		memcpy(p, seq_id, strlen(seq_id) + 1);
		p += strlen(seq_id) + 1;
		memcpy(p, seq, docs_len);
	}
	t.head = 16;
	int32_t k = S_KEY, v = S_VAL;
	int64_t u = S_UNIQUE;
	find_patches(&t, &k, 4, P_KEY);
	find_patches(&t, &v, 4, P_VAL);
	find_patches(&t, &u, 8, P_UNIQUE);
	if (t.len <= 4096)
		t.head = t.len;
	return t;
}

typedef struct lg_tmpls {
	lg_tmpl hello;
	lg_tmpl main;
	lg_tmpl getmore; /* cursor only */
	size_t head_max;
} lg_tmpls;

/* Appends d's bytes to the sequence being built and frees d. */
static void seq_append(uint8_t **docs, size_t *len, bson_t *d)
{
	*docs = xrealloc(*docs, *len + d->len);
	memcpy(*docs + *len, bson_get_data(d), d->len);
	*len += d->len;
	bson_destroy(d);
}

static lg_tmpls templates(void)
{
	lg_tmpls ts = {0};
	bson_t *b = BCON_NEW("hello", BCON_INT32(1), "$db", "admin");
	ts.hello = tmpl_build(b, NULL, NULL, 0);
	bson_destroy(b);
	const char *seq_id = NULL;
	uint8_t *docs = NULL;
	size_t docs_len = 0;
	switch (opt.op) {
	case OP_PING:
		b = BCON_NEW("ping", BCON_INT32(1), "$db", "admin");
		break;
	case OP_FIND_ID:
		b = BCON_NEW("find", BCON_UTF8(opt.coll), "filter", "{", "_id", BCON_INT32(S_KEY),
		             "}", "limit", BCON_INT32(1), "singleBatch", BCON_BOOL(true), "$db",
		             BCON_UTF8(opt.db));
		break;
	case OP_FIND_SORT:
		b = BCON_NEW("find", BCON_UTF8(opt.coll), "filter", "{", "grp", BCON_INT32(S_KEY),
		             "}", "sort", "{", "v", BCON_INT32(1), "}", "limit", BCON_INT32(10),
		             "$db", BCON_UTF8(opt.db));
		break;
	case OP_UPDATE:
		b = BCON_NEW("update", BCON_UTF8(opt.coll), "ordered", BCON_BOOL(true), "$db",
		             BCON_UTF8(opt.db));
		/* The first statement's key and value are patched per request; the
		 * others (--statements) are fixed: keys 1.. of --keys, value 0.
		 * With --shapes K (2 or more), fixed statement i is of shape i mod
		 * K: an even shape sets field "v<shape>", an odd one appends to
		 * array "a<shape>" with $each and $slice (bounded: the push rule's
		 * check is called and finds nothing), so no statement is of the
		 * shape of the one before it: each is read, but for those a
		 * template kept through the engine's backoff matches. */
		for (int i = 0; i < opt.statements; i++) {
			bson_t *u;
			if (opt.shapes == 0 || i == 0) {
				u = BCON_NEW("$set", "{", "v", BCON_INT32(i ? 0 : S_VAL), "}");
			} else {
				int k = i % opt.shapes;
				char field[16];
				snprintf(field, sizeof field, "%c%d", k % 2 ? 'a' : 'v', k);
				u = k % 2 ? BCON_NEW("$push", "{", field, "{", "$each", "[",
				                     BCON_INT32(0), "]", "$slice", BCON_INT32(-8),
				                     "}", "}")
				          : BCON_NEW("$set", "{", field, BCON_INT32(0), "}");
			}
			seq_append(&docs, &docs_len,
			           BCON_NEW("q", "{", "_id",
			                    BCON_INT32(i ? (int32_t)(i % opt.keys) : S_KEY), "}",
			                    "u", BCON_DOCUMENT(u)));
			bson_destroy(u);
		}
		seq_id = "updates";
		break;
	case OP_INSERT: {
		char coll[256];
		snprintf(coll, sizeof coll, "%s_ins", opt.coll);
		b = BCON_NEW("insert", BCON_UTF8(coll), "ordered", BCON_BOOL(true), "$db",
		             BCON_UTF8(opt.db));
		uint8_t *payload = xmalloc((size_t)opt.size);
		memset(payload, 'x', (size_t)opt.size);
		bson_t *doc = bson_new();
		BSON_APPEND_INT64(doc, "_id", S_UNIQUE);
		bson_append_binary(doc, "payload", -1, BSON_SUBTYPE_BINARY, payload,
		                   (uint32_t)opt.size);
		free(payload);
		seq_append(&docs, &docs_len, doc);
		seq_id = "documents";
		break;
	}
	case OP_CURSOR: {
		b = BCON_NEW("find", "cursor", "filter", "{", "}", "batchSize",
		             BCON_INT32(opt.batch), "$db", BCON_UTF8(opt.db));
		bson_t *g = BCON_NEW("getMore", BCON_INT64(S_UNIQUE), "collection", "cursor",
		                     "batchSize", BCON_INT32(opt.batch), "$db", BCON_UTF8(opt.db));
		ts.getmore = tmpl_build(g, NULL, NULL, 0);
		bson_destroy(g);
		break;
	}
	}
	ts.main = tmpl_build(b, seq_id, docs, docs_len);
	bson_destroy(b);
	free(docs);
	ts.head_max = ts.main.head > ts.getmore.head ? ts.main.head : ts.getmore.head;
	if (ts.hello.head > ts.head_max)
		ts.head_max = ts.hello.head;
	return ts;
}

/* --- connections -------------------------------------------------------- */

typedef struct lg_slot {
	int32_t request_id;
	uint64_t op_start; /* when the operation's first request was queued */
	bool getmore;
	uint8_t *head; /* the patched head of its request, alive until the reply */
} lg_slot;

typedef struct lg_seg {
	const uint8_t *p;
	size_t n;
} lg_seg;

typedef struct lg_conn {
	int fd;
	int index;
	bool dead;
	uint32_t events;
	lg_slot *slots; /* ring of depth entries: requests in flight, oldest first */
	int s_head, s_count;
	lg_seg *segs; /* ring of 2 * depth: bytes queued for writev */
	int g_head, g_count;
	uint8_t *in;
	size_t in_len, in_cap;
	uint64_t seq;
} lg_conn;

typedef struct lg_thread {
	pthread_t tid;
	int index;
	int epfd;
	lg_conn *conns;
	int nconns;
	int live;
	lg_hist hist;
	uint64_t ops, frames, bytes_out, bytes_in;
	uint64_t errors[E_KINDS];
	uint64_t last_done;
	char first_error[256];
} lg_thread;

static lg_tmpls T;
static atomic_int next_request_id = 1;
static atomic_long ops_started;
static uint64_t t_start, t_measure, t_end; /* set before the threads run */
static pthread_barrier_t barrier;
static volatile sig_atomic_t interrupted;
static uint64_t run_nonce;

static void note_error(lg_thread *th, lg_err kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note_error(lg_thread *th, lg_err kind, const char *fmt, ...)
{
	th->errors[kind]++;
	if (th->first_error[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(th->first_error, sizeof th->first_error, "%s: ", err_names[kind]);
	vsnprintf(th->first_error + n, sizeof th->first_error - (size_t)n, fmt, ap);
	va_end(ap);
}

static int dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
	if (fd < 0 || inet_pton(AF_INET, opt.host, &sa.sin_addr) != 1)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(fd);
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

/* Checks one reply frame's body: ok: 1 and no writeErrors. On a cursor
 * reply, *cursor_id gets its id. false: an error reply (noted). */
static bool check_body(lg_thread *th, const uint8_t *f, uint32_t len, int64_t *cursor_id)
{
	uint32_t flags = rd32(f + 16);
	uint32_t end = len - ((flags & LG_CHECKSUM) ? 4 : 0);
	if (len < 26 || f[20] != 0) {
		note_error(th, E_FRAME, "reply without a kind-0 body first");
		return false;
	}
	uint32_t dl = rd32(f + 21);
	bson_t body;
	if (dl < 5 || dl > end - 21 || !bson_init_static(&body, f + 21, dl)) {
		note_error(th, E_FRAME, "reply body is not BSON");
		return false;
	}
	bson_iter_t it;
	if (!bson_iter_init_find(&it, &body, "ok") || !BSON_ITER_HOLDS_NUMBER(&it) ||
	    bson_iter_as_double(&it) != 1.0) {
		bson_iter_t m;
		const char *msg =
		    bson_iter_init_find(&m, &body, "errmsg") && BSON_ITER_HOLDS_UTF8(&m)
		        ? bson_iter_utf8(&m, NULL)
		        : "(no errmsg)";
		note_error(th, E_REPLY, "ok is not 1: %s", msg);
		return false;
	}
	if (bson_iter_init_find(&it, &body, "writeErrors")) {
		char *j = bson_as_relaxed_extended_json(&body, NULL);
		note_error(th, E_REPLY, "writeErrors: %.200s", j);
		bson_free(j);
		return false;
	}
	if (cursor_id) {
		bson_iter_t id;
		if (!bson_iter_init_find(&it, &body, "cursor") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
		    !bson_iter_recurse(&it, &id) || !bson_iter_find(&id, "id") ||
		    !BSON_ITER_HOLDS_NUMBER(&id)) {
			note_error(th, E_REPLY, "cursor reply without cursor.id");
			return false;
		}
		*cursor_id = bson_iter_as_int64(&id);
	}
	return true;
}

static void conn_kill(lg_thread *th, lg_conn *c, lg_err why, const char *what)
{
	if (c->dead)
		return;
	note_error(th, why, "connection %d: %s", c->index, what);
	/* Requests still in flight will never be answered. */
	if (c->s_count > 1)
		th->errors[why] += (uint64_t)(c->s_count - 1);
	epoll_ctl(th->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->dead = true;
	c->s_count = 0;
	th->live--;
}

/* Queues one request: copies and patches its head into the slot. */
static void conn_send(lg_conn *c, const lg_tmpl *t, uint64_t op_start, bool getmore, int64_t cur)
{
	int si = (c->s_head + c->s_count) % opt.depth;
	lg_slot *s = &c->slots[si];
	c->s_count++;
	s->op_start = op_start;
	s->getmore = getmore;
	s->request_id = atomic_fetch_add_explicit(&next_request_id, 1, memory_order_relaxed);
	memcpy(s->head, t->msg, t->head);
	wr32(s->head + 4, (uint32_t)s->request_id);
	uint64_t n = c->seq++;
	for (int i = 0; i < t->npatch; i++) {
		uint8_t *p = s->head + t->patch[i].off;
		switch (t->patch[i].kind) {
		case P_KEY:
			wr32(p,
			     (uint32_t)(opt.op == OP_FIND_SORT ? n % 10 : n % (uint64_t)opt.keys));
			break;
		case P_VAL:
			wr32(p, (uint32_t)n);
			break;
		case P_UNIQUE:
			wr64(p,
			     getmore ? (uint64_t)cur : run_nonce + ((uint64_t)c->index << 32) + n);
			break;
		}
	}
	int gi = (c->g_head + c->g_count) % (2 * opt.depth);
	c->segs[gi] = (lg_seg){s->head, t->head};
	c->g_count++;
	if (t->len > t->head) {
		gi = (gi + 1) % (2 * opt.depth);
		c->segs[gi] = (lg_seg){t->msg + t->head, t->len - t->head};
		c->g_count++;
	}
}

static bool may_start(uint64_t now)
{
	if (interrupted)
		return false;
	if (opt.requests) {
		long n = atomic_fetch_add(&ops_started, 1);
		return n < opt.requests;
	}
	return now < t_end;
}

static void conn_flush(lg_thread *th, lg_conn *c)
{
	while (c->g_count) {
		struct iovec iov[64];
		int n = 0;
		for (int i = 0; i < c->g_count && n < 64; i++, n++) {
			lg_seg *g = &c->segs[(c->g_head + i) % (2 * opt.depth)];
			iov[n] = (struct iovec){(void *)g->p, g->n};
		}
		ssize_t w = writev(c->fd, iov, n);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			conn_kill(th, c, E_CLOSED, strerror(errno));
			return;
		}
		th->bytes_out += (uint64_t)w;
		size_t left = (size_t)w;
		while (left) {
			lg_seg *g = &c->segs[c->g_head];
			if (left >= g->n) {
				left -= g->n;
				c->g_head = (c->g_head + 1) % (2 * opt.depth);
				c->g_count--;
			} else {
				g->p += left;
				g->n -= left;
				left = 0;
			}
		}
	}
	uint32_t ev = EPOLLIN | (c->g_count ? EPOLLOUT : 0);
	if (ev != c->events) {
		struct epoll_event e = {.events = ev, .data.ptr = c};
		epoll_ctl(th->epfd, EPOLL_CTL_MOD, c->fd, &e);
		c->events = ev;
	}
}

/* One complete reply frame for the oldest slot. */
static void conn_reply(lg_thread *th, lg_conn *c, const uint8_t *f, uint32_t len)
{
	if (c->s_count == 0) {
		conn_kill(th, c, E_FRAME, "reply with no request in flight");
		return;
	}
	lg_slot *s = &c->slots[c->s_head];
	int32_t response_to = (int32_t)rd32(f + 8);
	if (response_to != s->request_id) {
		char why[96];
		snprintf(why, sizeof why, "responseTo %d, expected %d", response_to, s->request_id);
		conn_kill(th, c, E_FRAME, why);
		return;
	}
	if (rd32(f + 12) != LG_OP_MSG || (rd32(f + 16) & LG_MORE)) {
		conn_kill(th, c, E_FRAME, "reply is not a plain OP_MSG");
		return;
	}
	th->frames++;
	uint64_t op_start = s->op_start;
	c->s_head = (c->s_head + 1) % opt.depth;
	c->s_count--;

	int64_t cursor_id = 0;
	bool ok = check_body(th, f, len, opt.op == OP_CURSOR ? &cursor_id : NULL);
	uint64_t now = now_ns();
	if (ok && cursor_id != 0) {
		/* The operation goes on: its next batch. */
		conn_send(c, &T.getmore, op_start, true, cursor_id);
		return;
	}
	if (ok && now >= t_measure && (opt.requests || now <= t_end)) {
		th->ops++;
		h_record(&th->hist, now - op_start);
		th->last_done = now;
	}
	if (may_start(now))
		conn_send(c, &T.main, now, false, 0);
}

static void conn_read(lg_thread *th, lg_conn *c)
{
	for (;;) {
		size_t need = c->in_len + 65536;
		if (c->in_len >= 4) {
			uint32_t fl = rd32(c->in);
			if (fl < LG_MSG_MIN || fl > LG_MSG_MAX) {
				conn_kill(th, c, E_FRAME, "reply length out of range");
				return;
			}
			if (fl > need)
				need = fl;
		}
		if (need > c->in_cap) {
			size_t cap = c->in_cap * 2;
			while (cap < need)
				cap *= 2;
			c->in = realloc(c->in, cap);
			if (!c->in) {
				fprintf(stderr, "mg_loadgen: out of memory\n");
				exit(1);
			}
			c->in_cap = cap;
		}
		size_t room = c->in_cap - c->in_len;
		ssize_t n = read(c->fd, c->in + c->in_len, room);
		if (n == 0) {
			conn_kill(th, c, E_CLOSED, "server closed the connection");
			return;
		}
		if (n < 0) {
			if (errno != EAGAIN && errno != EINTR)
				conn_kill(th, c, E_CLOSED, strerror(errno));
			return;
		}
		th->bytes_in += (uint64_t)n;
		c->in_len += (size_t)n;
		size_t off = 0;
		while (c->in_len - off >= 16 && !c->dead) {
			uint32_t fl = rd32(c->in + off);
			if (fl < LG_MSG_MIN || fl > LG_MSG_MAX) {
				conn_kill(th, c, E_FRAME, "reply length out of range");
				return;
			}
			if (c->in_len - off < fl)
				break;
			conn_reply(th, c, c->in + off, fl);
			off += fl;
		}
		if (c->dead)
			return;
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
		if ((size_t)n < room)
			return;
	}
}

/* Blocking hello on a fresh socket; true when the reply is ok: 1. */
static bool handshake(lg_thread *th, lg_conn *c)
{
	uint8_t head[4096];
	memcpy(head, T.hello.msg, T.hello.len);
	int32_t id = atomic_fetch_add(&next_request_id, 1);
	wr32(head + 4, (uint32_t)id);
	if (write(c->fd, head, T.hello.len) != (ssize_t)T.hello.len)
		return false;
	size_t got = 0, want = 16;
	uint8_t *buf = c->in;
	while (got < want) {
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		if (poll(&pfd, 1, (int)(opt.timeout * 1000)) <= 0) {
			note_error(th, E_TIMEOUT, "no hello reply");
			return false;
		}
		ssize_t n = read(c->fd, buf + got, c->in_cap - got);
		if (n <= 0) {
			note_error(th, E_CLOSED, "closed during hello");
			return false;
		}
		got += (size_t)n;
		if (got >= 4) {
			want = rd32(buf);
			if (want < 21 || want > c->in_cap) {
				note_error(th, E_FRAME, "hello reply length %zu", want);
				return false;
			}
		}
	}
	if ((int32_t)rd32(buf + 8) != id || rd32(buf + 12) != LG_OP_MSG) {
		note_error(th, E_FRAME, "hello reply does not answer the hello");
		return false;
	}
	th->bytes_in += got;
	return check_body(th, buf, (uint32_t)want, NULL) && got == want;
}

static void *thread_main(void *arg)
{
	lg_thread *th = arg;
	th->epfd = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < th->nconns; i++) {
		lg_conn *c = &th->conns[i];
		c->slots = xmalloc(sizeof *c->slots * (size_t)opt.depth);
		for (int k = 0; k < opt.depth; k++)
			c->slots[k].head = xmalloc(T.head_max);
		c->segs = xmalloc(sizeof *c->segs * 2 * (size_t)opt.depth);
		c->in_cap = 65536;
		c->in = xmalloc(c->in_cap);
		c->fd = dial();
		if (c->fd < 0) {
			note_error(th, E_CONNECT, "connect to %s:%d: %s", opt.host, opt.port,
			           strerror(errno));
			c->dead = true;
			continue;
		}
		if (!handshake(th, c)) {
			close(c->fd);
			c->dead = true;
			continue;
		}
		if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0) {
			close(c->fd);
			c->dead = true;
			continue;
		}
		c->events = EPOLLIN;
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
		epoll_ctl(th->epfd, EPOLL_CTL_ADD, c->fd, &e);
		th->live++;
	}
	pthread_barrier_wait(&barrier); /* everyone connected */
	pthread_barrier_wait(&barrier); /* main has set the clock */

	for (int i = 0; i < th->nconns; i++) {
		lg_conn *c = &th->conns[i];
		for (int k = 0; k < opt.depth && !c->dead; k++)
			if (may_start(t_start))
				conn_send(c, &T.main, now_ns(), false, 0);
		if (!c->dead)
			conn_flush(th, c);
	}
	struct epoll_event evs[256];
	for (;;) {
		uint64_t now = now_ns();
		int inflight = 0;
		for (int i = 0; i < th->nconns; i++) {
			lg_conn *c = &th->conns[i];
			if (c->dead || !c->s_count)
				continue;
			inflight += c->s_count;
			uint64_t started = c->slots[c->s_head].op_start;
			if (now - started > (uint64_t)(opt.timeout * 1e9))
				conn_kill(th, c, E_TIMEOUT, "no reply within --timeout");
		}
		if (!inflight || !th->live)
			break;
		int n = epoll_wait(th->epfd, evs, 256, 100);
		for (int i = 0; i < n; i++) {
			lg_conn *c = evs[i].data.ptr;
			if (!c->dead && (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
				conn_read(th, c);
			if (!c->dead)
				conn_flush(th, c);
		}
	}
	for (int i = 0; i < th->nconns; i++)
		if (!th->conns[i].dead)
			close(th->conns[i].fd);
	return NULL;
}

/* --- --setup: prepare a real server ------------------------------------- */

/* Sends one command (with an optional kind-1 sequence of `docs`, documents
 * back to back) on a blocking socket and checks its reply. A drop of a
 * missing namespace (code 26) is fine. */
static bool setup_cmd(int fd, bson_t *body, const char *seq_id, const uint8_t *docs,
                      size_t docs_len)
{
	size_t seq_len = seq_id ? 1 + 4 + strlen(seq_id) + 1 + docs_len : 0;
	size_t len = 21 + body->len + seq_len;
	uint8_t *m = xmalloc(len);
	int32_t id = atomic_fetch_add(&next_request_id, 1);
	wr32(m, (uint32_t)len);
	wr32(m + 4, (uint32_t)id);
	wr32(m + 12, LG_OP_MSG);
	memcpy(m + 21, bson_get_data(body), body->len);
	if (seq_id) {
		uint8_t *p = m + 21 + body->len;
		*p++ = 1;
		wr32(p, (uint32_t)(seq_len - 1));
		memcpy(p + 4, seq_id, strlen(seq_id) + 1);
		memcpy(p + 4 + strlen(seq_id) + 1, docs, docs_len);
	}
	bool ok = write(fd, m, len) == (ssize_t)len;
	free(m);
	uint8_t hdr[16];
	if (!ok || recv(fd, hdr, 16, MSG_WAITALL) != 16)
		return false;
	uint32_t rlen = rd32(hdr);
	if (rlen < 26 || rlen > LG_MSG_MAX || (int32_t)rd32(hdr + 8) != id)
		return false;
	uint8_t *r = xmalloc(rlen);
	memcpy(r, hdr, 16);
	ok = recv(fd, r + 16, rlen - 16, MSG_WAITALL) == (ssize_t)(rlen - 16);
	bson_t reply;
	if (ok && bson_init_static(&reply, r + 21, rd32(r + 21))) {
		bson_iter_t it;
		ok = bson_iter_init_find(&it, &reply, "ok") && bson_iter_as_double(&it) == 1.0;
		if (!ok && bson_iter_init_find(&it, &reply, "code") &&
		    bson_iter_as_int64(&it) == 26)
			ok = true;
		if (!ok) {
			char *j = bson_as_relaxed_extended_json(&reply, NULL);
			fprintf(stderr, "mg_loadgen --setup: %s\n", j);
			bson_free(j);
		}
	}
	free(r);
	return ok;
}

static bool setup_fill(int fd, const char *coll, int n)
{
	for (int start = 0; start < n; start += 500) {
		bson_t *body = BCON_NEW("insert", BCON_UTF8(coll), "ordered", BCON_BOOL(true),
		                        "$db", BCON_UTF8(opt.db));
		uint8_t *docs = NULL;
		size_t docs_len = 0;
		for (int i = start; i < n && i < start + 500; i++) {
			bson_t *d = BCON_NEW("_id", BCON_INT32(i), "grp", BCON_INT32(i % 10), "v",
			                     BCON_INT32(i), "s", "mongoguard-bench");
			docs = realloc(docs, docs_len + d->len);
			memcpy(docs + docs_len, bson_get_data(d), d->len);
			docs_len += d->len;
			bson_destroy(d);
		}
		bool ok = setup_cmd(fd, body, "documents", docs, docs_len);
		free(docs);
		bson_destroy(body);
		if (!ok)
			return false;
	}
	return true;
}

static int run_setup(void)
{
	int fd = dial();
	if (fd < 0) {
		fprintf(stderr, "mg_loadgen --setup: connect to %s:%d: %s\n", opt.host, opt.port,
		        strerror(errno));
		return 1;
	}
	char ins[256];
	snprintf(ins, sizeof ins, "%s_ins", opt.coll);
	const char *drops[] = {opt.coll, ins, "cursor"};
	bool ok = true;
	bson_t *b = BCON_NEW("hello", BCON_INT32(1), "$db", "admin");
	ok = setup_cmd(fd, b, NULL, NULL, 0);
	bson_destroy(b);
	for (int i = 0; ok && i < 3; i++) {
		b = BCON_NEW("drop", BCON_UTF8(drops[i]), "$db", BCON_UTF8(opt.db));
		ok = setup_cmd(fd, b, NULL, NULL, 0);
		bson_destroy(b);
	}
	ok = ok && setup_fill(fd, opt.coll, opt.keys);
	if (ok) {
		b = BCON_NEW("createIndexes", BCON_UTF8(opt.coll), "indexes", "[", "{", "key", "{",
		             "grp", BCON_INT32(1), "v", BCON_INT32(1), "}", "name", "grp_1_v_1",
		             "}", "]", "$db", BCON_UTF8(opt.db));
		ok = setup_cmd(fd, b, NULL, NULL, 0);
		bson_destroy(b);
	}
	ok = ok && setup_fill(fd, "cursor", opt.batch * 10);
	close(fd);
	printf("{\"setup\":\"%s\",\"db\":\"%s\",\"keys\":%d,\"cursor_docs\":%d}\n",
	       ok ? "ok" : "failed", opt.db, opt.keys, opt.batch * 10);
	return ok ? 0 : 1;
}

/* --- another process's CPU time ------------------------------------------ */

/* User and system CPU seconds of every thread of process `pid`, from
 * /proc/PID/stat (fields 14 and 15, in clock ticks); false when it cannot
 * be read. */
static bool cpu_times(int pid, double *user, double *sys)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	unsigned long long ut, st;
	if (!p ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return false;
	double tick = (double)sysconf(_SC_CLK_TCK);
	*user = (double)ut / tick;
	*sys = (double)st / tick;
	return true;
}

/* The --cpu-of processes' CPU times, at the start and the end of the
 * measured window. */
typedef struct {
	double user[2][LG_MAX_CPU_OF], sys[2][LG_MAX_CPU_OF];
	bool ok[LG_MAX_CPU_OF];
} cpu_window;

static void cpu_sample(cpu_window *w, int end)
{
	for (int i = 0; i < opt.ncpu_of; i++) {
		bool got = cpu_times(opt.cpu_of[i], &w->user[end][i], &w->sys[end][i]);
		w->ok[i] = end ? w->ok[i] && got : got;
	}
}

static void sleep_until(uint64_t t)
{
	uint64_t now;
	while (!interrupted && (now = now_ns()) < t) {
		struct timespec ts = {(time_t)((t - now) / 1000000000u),
		                      (long)((t - now) % 1000000000u)};
		nanosleep(&ts, NULL);
	}
}

/* --- command line and report -------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: mg_loadgen [options]\n"
	    "  --host ADDR          server address (IPv4)                  [127.0.0.1]\n"
	    "  --port N             server port                            [27017]\n"
	    "  --op OP              ping | find-id | find-sort | update | insert | cursor\n"
	    "                       find-id: find {_id: k} limit 1; find-sort: find {grp: g}\n"
	    "                       sort {v: 1} limit 10; update: $set v where _id k;\n"
	    "                       insert: one document of --size payload bytes into\n"
	    "                       <coll>_ins; cursor: find on 'cursor' + getMore until 0 [ping]\n"
	    "  --size BYTES         insert payload, suffix k (1024) or m (1048576) [1k]\n"
	    "  --connections N      connections, each sends a hello first  [1]\n"
	    "  --depth D            operations in flight per connection (1 = closed loop) [1]\n"
	    "  --threads T          threads, each an epoll loop   [min(cores, connections)]\n"
	    "  --duration S         measured seconds (after --warmup)      [2]\n"
	    "  --warmup S           unmeasured seconds first               [0.2]\n"
	    "  --requests N         stop after N operations instead (no warm-up)\n"
	    "  --db NAME            database                               [mgbench]\n"
	    "  --coll NAME          collection                             [items]\n"
	    "  --keys N             _id values used (0..N-1)               [1000]\n"
	    "  --batch-size N       cursor batch size                      [100]\n"
	    "  --statements N       update: statements per command (the first patched,\n"
	    "                       the rest fixed: _id 1..N-1 mod --keys)  [1]\n"
	    "  --shapes K           update: the fixed statements in K shapes (2..1000),\n"
	    "                       none of the shape before it, so each is read\n"
	    "                       (even: $set v<k>; odd: bounded $push a<k>) [0: one]\n"
	    "  --timeout S          a reply later than this is an error    [10]\n"
	    "  --label TEXT         copied into the JSON line\n"
	    "  --cpu-of PID         also report process PID's user and system CPU time per\n"
	    "                       operation over the measured window (from /proc; 10 ms\n"
	    "                       ticks, so use windows of a second or more); up to 4\n"
	    "  --quiet              no human summary on stderr\n"
	    "  --setup              prepare a real server instead: drop and fill <coll> with\n"
	    "                       --keys documents, index {grp: 1, v: 1}, fill 'cursor'\n"
	    "                       with 10 batches, drop <coll>_ins\n"
	    "Output: one JSON line on stdout. Exit status 0 when no error was counted.\n");
}

static long parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (*end == 'k' || *end == 'K')
		v *= 1024, end++;
	else if (*end == 'm' || *end == 'M')
		v *= 1048576, end++;
	if (*end || v < 0 || v > 16000000)
		return -1;
	return (long)v;
}

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"host", required_argument, NULL, 'H'},
	                                         {"port", required_argument, NULL, 'p'},
	                                         {"op", required_argument, NULL, 'o'},
	                                         {"size", required_argument, NULL, 's'},
	                                         {"connections", required_argument, NULL, 'c'},
	                                         {"depth", required_argument, NULL, 'd'},
	                                         {"threads", required_argument, NULL, 't'},
	                                         {"duration", required_argument, NULL, 'D'},
	                                         {"warmup", required_argument, NULL, 'w'},
	                                         {"requests", required_argument, NULL, 'n'},
	                                         {"db", required_argument, NULL, 'b'},
	                                         {"coll", required_argument, NULL, 'C'},
	                                         {"keys", required_argument, NULL, 'k'},
	                                         {"batch-size", required_argument, NULL, 'B'},
	                                         {"statements", required_argument, NULL, 'N'},
	                                         {"shapes", required_argument, NULL, 'K'},
	                                         {"timeout", required_argument, NULL, 'T'},
	                                         {"label", required_argument, NULL, 'l'},
	                                         {"cpu-of", required_argument, NULL, 'P'},
	                                         {"quiet", no_argument, NULL, 'q'},
	                                         {"setup", no_argument, NULL, 'S'},
	                                         {"help", no_argument, NULL, 'h'},
	                                         {NULL, 0, NULL, 0}};
	int ch;
	bool bad = false;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'H':
			opt.host = optarg;
			break;
		case 'p':
			opt.port = atoi(optarg);
			break;
		case 'o': {
			int i;
			for (i = 0; i <= OP_CURSOR && strcmp(optarg, op_names[i]); i++)
				;
			bad |= i > OP_CURSOR;
			opt.op = (lg_op)i;
			break;
		}
		case 's':
			opt.size = parse_size(optarg);
			bad |= opt.size < 0;
			break;
		case 'c':
			opt.conns = atoi(optarg);
			break;
		case 'd':
			opt.depth = atoi(optarg);
			break;
		case 't':
			opt.threads = atoi(optarg);
			break;
		case 'D':
			opt.duration = atof(optarg);
			break;
		case 'w':
			opt.warmup = atof(optarg);
			break;
		case 'n':
			opt.requests = atol(optarg);
			break;
		case 'b':
			opt.db = optarg;
			break;
		case 'C':
			opt.coll = optarg;
			break;
		case 'k':
			opt.keys = atoi(optarg);
			break;
		case 'B':
			opt.batch = atoi(optarg);
			break;
		case 'N':
			opt.statements = atoi(optarg);
			break;
		case 'K':
			opt.shapes = atoi(optarg);
			break;
		case 'T':
			opt.timeout = atof(optarg);
			break;
		case 'l':
			opt.label = optarg;
			break;
		case 'P':
			bad |= opt.ncpu_of == LG_MAX_CPU_OF || atoi(optarg) <= 0;
			if (opt.ncpu_of < LG_MAX_CPU_OF)
				opt.cpu_of[opt.ncpu_of++] = atoi(optarg);
			break;
		case 'q':
			opt.quiet = true;
			break;
		case 'S':
			opt.setup = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			bad = true;
		}
	}
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (opt.threads <= 0)
		opt.threads = (int)(ncpu < opt.conns ? ncpu : opt.conns);
	if (opt.threads > opt.conns)
		opt.threads = opt.conns;
	bad |= optind < argc || opt.port <= 0 || opt.port > 65535 || opt.conns < 1 ||
	       opt.conns > LG_MAX_CONNS || opt.depth < 1 || opt.depth > LG_MAX_DEPTH ||
	       opt.duration <= 0 || opt.warmup < 0 || opt.requests < 0 || opt.keys < 1 ||
	       opt.batch < 1 || opt.statements < 1 || opt.statements > 100000 ||
	       (opt.statements > 1 && opt.op != OP_UPDATE) || opt.shapes < 0 || opt.shapes == 1 ||
	       opt.shapes > 1000 || (opt.shapes > 0 && opt.op != OP_UPDATE) || opt.timeout <= 0 ||
	       opt.threads < 1;
	if (bad) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (opt.setup)
		return run_setup();

	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	/* Insert _ids: unique per run, connection and operation. */
	run_nonce = ((uint64_t)wall.tv_sec & 0x3fffff) << 40;
	T = templates();

	lg_thread *ths = xmalloc(sizeof *ths * (size_t)opt.threads);
	for (int t = 0; t < opt.threads; t++) {
		ths[t].index = t;
		ths[t].nconns = opt.conns / opt.threads + (t < opt.conns % opt.threads);
		ths[t].conns = xmalloc(sizeof(lg_conn) * (size_t)ths[t].nconns);
		for (int i = 0; i < ths[t].nconns; i++)
			ths[t].conns[i].index = t + i * opt.threads;
	}
	pthread_barrier_init(&barrier, NULL, (unsigned)opt.threads + 1);
	for (int t = 0; t < opt.threads; t++)
		pthread_create(&ths[t].tid, NULL, thread_main, &ths[t]);
	pthread_barrier_wait(&barrier);
	t_start = now_ns();
	if (opt.requests) {
		t_measure = t_start;
		t_end = UINT64_MAX;
	} else {
		t_measure = t_start + (uint64_t)(opt.warmup * 1e9);
		t_end = t_measure + (uint64_t)(opt.duration * 1e9);
	}
	pthread_barrier_wait(&barrier);
	cpu_window cw;
	if (opt.ncpu_of) {
		sleep_until(t_measure);
		cpu_sample(&cw, 0);
		if (!opt.requests)
			sleep_until(t_end);
	}

	lg_hist *h = xmalloc(sizeof *h);
	uint64_t ops = 0, frames = 0, out = 0, in = 0, last = t_start, err[E_KINDS] = {0};
	const char *first = "";
	int live = 0;
	for (int t = 0; t < opt.threads; t++) {
		pthread_join(ths[t].tid, NULL);
		h_merge(h, &ths[t].hist);
		ops += ths[t].ops;
		frames += ths[t].frames;
		out += ths[t].bytes_out;
		in += ths[t].bytes_in;
		live += ths[t].live;
		if (ths[t].last_done > last)
			last = ths[t].last_done;
		for (int k = 0; k < E_KINDS; k++)
			err[k] += ths[t].errors[k];
		if (!*first && ths[t].first_error[0])
			first = ths[t].first_error;
	}
	if (opt.ncpu_of)
		cpu_sample(&cw, 1);
	uint64_t errors = 0;
	for (int k = 0; k < E_KINDS; k++)
		errors += err[k];
	double secs = opt.requests ? (double)(last - t_start) / 1e9 : opt.duration;
	if (secs <= 0)
		secs = 1e-9;
	double rate = (double)ops / secs;
	double us[4] = {(double)h_percentile(h, 0.50) / 1e3, (double)h_percentile(h, 0.99) / 1e3,
	                (double)h_percentile(h, 0.999) / 1e3, (double)h->max / 1e3};
	double mean = h->count ? (double)h->sum / (double)h->count / 1e3 : 0;

	/* The JSON line: first_error is escaped minimally (quotes, backslashes, controls). */
	char esc[600];
	size_t e = 0;
	for (const char *p = first; *p && e < sizeof esc - 8; p++) {
		if (*p == '"' || *p == '\\')
			esc[e++] = '\\', esc[e++] = *p;
		else if ((unsigned char)*p < 0x20)
			esc[e++] = ' ';
		else
			esc[e++] = *p;
	}
	esc[e] = 0;
	printf("{\"tool\":\"mg_loadgen\",\"label\":\"%s\",\"op\":\"%s\",\"size\":%ld,"
	       "\"connections\":%d,\"depth\":%d,\"threads\":%d,\"seconds\":%.4f,\"ops\":%" PRIu64
	       ",\"ops_per_s\":%.1f,\"frames\":%" PRIu64 ",\"bytes_sent\":%" PRIu64
	       ",\"bytes_received\":%" PRIu64 ",\"latency_us\":{\"p50\":%.1f,\"p99\":%.1f,"
	       "\"p999\":%.1f,\"max\":%.1f,\"mean\":%.1f},\"errors\":%" PRIu64
	       ",\"errors_by_kind\":{",
	       opt.label, op_names[opt.op], opt.op == OP_INSERT ? opt.size : 0L, opt.conns,
	       opt.depth, opt.threads, secs, ops, rate, frames, out, in, us[0], us[1], us[2], us[3],
	       mean, errors);
	for (int k = 0; k < E_KINDS; k++)
		printf("%s\"%s\":%" PRIu64, k ? "," : "", err_names[k], err[k]);
	printf("},\"connections_alive\":%d", live);
	if (opt.ncpu_of) {
		/* µs of CPU per operation completed in the window; null when the
		 * process could not be read or nothing completed */
		printf(",\"cpu_us_per_op\":{");
		for (int i = 0; i < opt.ncpu_of; i++) {
			printf("%s\"%d\":", i ? "," : "", opt.cpu_of[i]);
			if (cw.ok[i] && ops)
				printf("{\"user\":%.3f,\"system\":%.3f}",
				       (cw.user[1][i] - cw.user[0][i]) * 1e6 / (double)ops,
				       (cw.sys[1][i] - cw.sys[0][i]) * 1e6 / (double)ops);
			else
				printf("null");
		}
		printf("}");
	}
	printf(",\"first_error\":\"%s\"}\n", esc);
	fflush(stdout);
	if (!opt.quiet) {
		char what[64];
		if (opt.op == OP_INSERT)
			snprintf(what, sizeof what, "insert %ld B", opt.size);
		else
			snprintf(what, sizeof what, "%s", op_names[opt.op]);
		fprintf(
		    stderr,
		    "mg_loadgen %s c=%d d=%d t=%d: %.0f ops/s (%" PRIu64
		    " ops in %.2f s), latency us p50 %.1f p99 %.1f p99.9 %.1f max %.1f, %" PRIu64
		    " errors%s%s\n",
		    what, opt.conns, opt.depth, opt.threads, rate, ops, secs, us[0], us[1], us[2],
		    us[3], errors, *first ? "; first: " : "", first);
	}
	return errors || !ops ? 1 : 0;
}
