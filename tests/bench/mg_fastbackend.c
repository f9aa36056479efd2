/* mg_fastbackend: a MongoDB-speaking server that does no work, so a
 * benchmark measures the proxy in front of it and not the database.
 *
 * Every request is answered at once from canned data: hello / isMaster (as
 * OP_MSG, or OP_QUERY answered with OP_REPLY, as drivers send their first
 * handshake), ping, buildInfo, find, getMore, insert / update / delete
 * ({n, ok: 1}), listIndexes (`_id_` and `grp_1_v_1`, so an index cache sees
 * the sort of the find-with-sort load served), count, endSessions, and a
 * plain {ok: 1} for anything else. Requests with moreToCome get no reply.
 *
 * Cursors are stateless: a find on a collection whose name starts with
 * "cursor" answers with cursor id K-1 (K = --cursor-batches), and a getMore
 * on id r returns a batch and id r-1, so the K-th batch carries id 0.
 *
 * One epoll loop per thread (--threads, SO_REUSEPORT listeners); per
 * connection one input and one output buffer that grow to the largest
 * message seen and are reused; replies are built in one scratch bson_t per
 * thread, so the steady state allocates nothing.
 *
 *   mg_fastbackend [--host 127.0.0.1] [--port 0] [--threads 1] [--cursor-batches 10]
 *
 * Prints "mg_fastbackend listening on HOST:PORT" once ready; SIGTERM or
 * SIGINT stops it with status 0. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bson/bson.h>

#define FB_MSG_MIN    16
#define FB_MSG_MAX    48000000
#define FB_OP_REPLY   1
#define FB_OP_QUERY   2004
#define FB_OP_MSG     2013
#define FB_MORE       (1u << 1)
#define FB_CHECKSUM   (1u << 0)
#define FB_READ_CHUNK (256 * 1024)
/* Stop reading a connection whose unsent replies exceed this. */
#define FB_OUT_HIGH  (8u * 1024 * 1024)
#define FB_MAX_BATCH 10000

typedef struct fb_buf {
	uint8_t *p;
	size_t len; /* bytes held: [0, len) */
	size_t off; /* output only: bytes [0, off) already written */
	size_t cap;
} fb_buf;

typedef struct fb_conn {
	int fd;
	uint32_t events; /* the epoll mask currently registered */
	fb_buf in;
	fb_buf out;
} fb_conn;

typedef struct fb_thread {
	pthread_t tid;
	int epfd;
	int lfd;
	bson_t scratch; /* every reply is built here, then copied out */
	int32_t next_request_id;
} fb_thread;

static struct {
	const char *host;
	int port;
	int threads;
	int cursor_batches;
} opt = {"127.0.0.1", 0, 1, 10};

static atomic_int next_connection_id = 1;
static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
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

static void buf_reserve(fb_buf *b, size_t need)
{
	if (b->cap >= need)
		return;
	size_t cap = b->cap ? b->cap : 64 * 1024;
	while (cap < need)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p) {
		fprintf(stderr, "mg_fastbackend: out of memory (%zu bytes)\n", cap);
		exit(1);
	}
	b->p = p;
	b->cap = cap;
}

/* --- replies ------------------------------------------------------------ */

static void emit(fb_thread *t, fb_conn *c, int32_t response_to, bool legacy)
{
	const bson_t *doc = &t->scratch;
	size_t hdr = legacy ? 36 : 21;
	size_t total = hdr + doc->len;
	buf_reserve(&c->out, c->out.len + total);
	uint8_t *p = c->out.p + c->out.len;
	wr32(p, (uint32_t)total);
	wr32(p + 4, (uint32_t)++t->next_request_id);
	wr32(p + 8, (uint32_t)response_to);
	if (legacy) {
		wr32(p + 12, FB_OP_REPLY);
		memset(p + 16, 0, 16); /* responseFlags, cursorID, startingFrom */
		wr32(p + 32, 1);       /* numberReturned */
	} else {
		wr32(p + 12, FB_OP_MSG);
		wr32(p + 16, 0);
		p[20] = 0;
	}
	memcpy(p + hdr, bson_get_data(doc), doc->len);
	c->out.len += total;
}

/* One canned document; `id` is copied from the request's filter when given. */
static void append_doc(bson_t *arr, uint32_t idx, const bson_iter_t *id, int32_t n)
{
	char key[16];
	const char *k;
	bson_uint32_to_string(idx, &k, key, sizeof key);
	bson_t d;
	bson_append_document_begin(arr, k, -1, &d);
	if (id)
		bson_append_iter(&d, "_id", 3, id);
	else
		BSON_APPEND_INT32(&d, "_id", n);
	BSON_APPEND_INT32(&d, "grp", n % 10);
	BSON_APPEND_INT32(&d, "v", n);
	BSON_APPEND_UTF8(&d, "s", "mongoguard-bench");
	bson_append_document_end(arr, &d);
}

static void append_cursor(bson_t *reply, const char *db, const char *coll, const char *batch_key,
                          int64_t id, int ndocs, const bson_iter_t *id_from)
{
	char ns[256];
	snprintf(ns, sizeof ns, "%s.%s", db, coll);
	bson_t cur, arr;
	BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cur);
	bson_append_array_begin(&cur, batch_key, -1, &arr);
	for (int i = 0; i < ndocs; i++)
		append_doc(&arr, (uint32_t)i, id_from, i);
	bson_append_array_end(&cur, &arr);
	BSON_APPEND_INT64(&cur, "id", id);
	BSON_APPEND_UTF8(&cur, "ns", ns);
	bson_append_document_end(reply, &cur);
}

static void append_hello(bson_t *r, const char *cmd, bool hello_ok)
{
	if (strcmp(cmd, "hello") == 0)
		BSON_APPEND_BOOL(r, "isWritablePrimary", true);
	else
		BSON_APPEND_BOOL(r, "ismaster", true);
	if (hello_ok)
		BSON_APPEND_BOOL(r, "helloOk", true);
	BSON_APPEND_INT32(r, "maxBsonObjectSize", 16777216);
	BSON_APPEND_INT32(r, "maxMessageSizeBytes", FB_MSG_MAX);
	BSON_APPEND_INT32(r, "maxWriteBatchSize", 100000);
	BSON_APPEND_DATE_TIME(r, "localTime", bson_get_monotonic_time() / 1000);
	BSON_APPEND_INT32(r, "logicalSessionTimeoutMinutes", 30);
	BSON_APPEND_INT32(r, "connectionId", atomic_fetch_add(&next_connection_id, 1));
	BSON_APPEND_INT32(r, "minWireVersion", 0);
	BSON_APPEND_INT32(r, "maxWireVersion", 17);
	BSON_APPEND_BOOL(r, "readOnly", false);
}

static int32_t iter_int(const bson_iter_t *it)
{
	if (BSON_ITER_HOLDS_NUMBER(it))
		return (int32_t)bson_iter_as_int64(it);
	return 0;
}

static int batch_size(const bson_t *body, int dflt)
{
	bson_iter_t it;
	int n = dflt;
	if (bson_iter_init_find(&it, body, "batchSize"))
		n = iter_int(&it);
	if (n <= 0)
		n = dflt;
	return n > FB_MAX_BATCH ? FB_MAX_BATCH : n;
}

/* Builds the reply to one command in t->scratch. `nseq` counts the
 * documents of the request's kind-1 sections (insert/update/delete). */
static void answer(fb_thread *t, const bson_t *body, const char *db, uint32_t nseq)
{
	bson_t *r = &t->scratch;
	bson_reinit(r);
	bson_iter_t it;
	if (!bson_iter_init(&it, body) || !bson_iter_next(&it)) {
		BSON_APPEND_DOUBLE(r, "ok", 0);
		BSON_APPEND_UTF8(r, "errmsg", "empty command");
		BSON_APPEND_INT32(r, "code", 59);
		return;
	}
	const char *cmd = bson_iter_key(&it);
	const char *coll = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
	bson_iter_t f;

	if (!strcmp(cmd, "hello") || !strcasecmp(cmd, "isMaster")) {
		append_hello(r, cmd, bson_iter_init_find(&f, body, "helloOk"));
	} else if (!strcmp(cmd, "buildInfo") || !strcmp(cmd, "buildinfo")) {
		bson_t arr;
		BSON_APPEND_UTF8(r, "version", "7.0.0");
		BSON_APPEND_ARRAY_BEGIN(r, "versionArray", &arr);
		BSON_APPEND_INT32(&arr, "0", 7);
		BSON_APPEND_INT32(&arr, "1", 0);
		BSON_APPEND_INT32(&arr, "2", 0);
		BSON_APPEND_INT32(&arr, "3", 0);
		bson_append_array_end(r, &arr);
		BSON_APPEND_INT32(r, "maxBsonObjectSize", 16777216);
	} else if (!strcmp(cmd, "find")) {
		if (!strncmp(coll, "cursor", 6)) {
			append_cursor(r, db, coll, "firstBatch", opt.cursor_batches - 1,
			              batch_size(body, 101), NULL);
		} else {
			bson_iter_t id;
			int limit = 0;
			if (bson_iter_init_find(&f, body, "limit"))
				limit = iter_int(&f);
			bool by_id = bson_iter_init_find(&id, body, "filter") &&
			             BSON_ITER_HOLDS_DOCUMENT(&id) && bson_iter_recurse(&id, &f) &&
			             bson_iter_find(&f, "_id");
			if (by_id) {
				id = f;
				append_cursor(r, db, coll, "firstBatch", 0, 1, &id);
			} else {
				int n = limit > 0 && limit < 100 ? limit : 10;
				append_cursor(r, db, coll, "firstBatch", 0, n, NULL);
			}
		}
	} else if (!strcmp(cmd, "getMore")) {
		int64_t id = BSON_ITER_HOLDS_INT64(&it) ? bson_iter_int64(&it) : 0;
		const char *gcoll = "";
		if (bson_iter_init_find(&f, body, "collection") && BSON_ITER_HOLDS_UTF8(&f))
			gcoll = bson_iter_utf8(&f, NULL);
		if (id <= 0 || id >= opt.cursor_batches) {
			BSON_APPEND_DOUBLE(r, "ok", 0);
			BSON_APPEND_UTF8(r, "errmsg", "cursor id not found");
			BSON_APPEND_INT32(r, "code", 43);
			BSON_APPEND_UTF8(r, "codeName", "CursorNotFound");
			return;
		}
		append_cursor(r, db, gcoll, "nextBatch", id - 1, batch_size(body, 101), NULL);
	} else if (!strcmp(cmd, "insert") || !strcmp(cmd, "delete") || !strcmp(cmd, "update")) {
		const char *arr_key = cmd[0] == 'i'   ? "documents"
		                      : cmd[0] == 'd' ? "deletes"
		                                      : "updates";
		uint32_t n = nseq;
		bson_iter_t a;
		if (bson_iter_init_find(&f, body, arr_key) && BSON_ITER_HOLDS_ARRAY(&f) &&
		    bson_iter_recurse(&f, &a))
			while (bson_iter_next(&a))
				n++;
		BSON_APPEND_INT32(r, "n", (int32_t)n);
		if (cmd[0] == 'u')
			BSON_APPEND_INT32(r, "nModified", (int32_t)n);
	} else if (!strcmp(cmd, "listIndexes")) {
		char ns[256];
		snprintf(ns, sizeof ns, "%s.%s", db, coll);
		bson_t cur, arr, ix, key;
		BSON_APPEND_DOCUMENT_BEGIN(r, "cursor", &cur);
		BSON_APPEND_ARRAY_BEGIN(&cur, "firstBatch", &arr);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &ix);
		BSON_APPEND_INT32(&ix, "v", 2);
		BSON_APPEND_DOCUMENT_BEGIN(&ix, "key", &key);
		BSON_APPEND_INT32(&key, "_id", 1);
		bson_append_document_end(&ix, &key);
		BSON_APPEND_UTF8(&ix, "name", "_id_");
		bson_append_document_end(&arr, &ix);
		BSON_APPEND_DOCUMENT_BEGIN(&arr, "1", &ix);
		BSON_APPEND_INT32(&ix, "v", 2);
		BSON_APPEND_DOCUMENT_BEGIN(&ix, "key", &key);
		BSON_APPEND_INT32(&key, "grp", 1);
		BSON_APPEND_INT32(&key, "v", 1);
		bson_append_document_end(&ix, &key);
		BSON_APPEND_UTF8(&ix, "name", "grp_1_v_1");
		bson_append_document_end(&arr, &ix);
		bson_append_array_end(&cur, &arr);
		BSON_APPEND_INT64(&cur, "id", 0);
		BSON_APPEND_UTF8(&cur, "ns", ns);
		bson_append_document_end(r, &cur);
	} else if (!strcmp(cmd, "count")) {
		BSON_APPEND_INT32(r, "n", 0);
	}
	/* ping, endSessions and everything else: a plain success. */
	BSON_APPEND_DOUBLE(r, "ok", 1);
}

/* --- requests ----------------------------------------------------------- */

/* Handles one complete frame; false means the connection must close. */
static bool handle_frame(fb_thread *t, fb_conn *c, const uint8_t *p, uint32_t len)
{
	int32_t request_id = (int32_t)rd32(p + 4);
	uint32_t opcode = rd32(p + 12);
	bson_t body;
	char db[128] = "admin";

	if (opcode == FB_OP_MSG) {
		if (len < 21)
			return false;
		uint32_t flags = rd32(p + 16);
		uint32_t end = len - ((flags & FB_CHECKSUM) ? 4 : 0);
		const uint8_t *doc = NULL;
		uint32_t doclen = 0, nseq = 0, pos = 20;
		while (pos < end) {
			uint8_t kind = p[pos++];
			if (end - pos < 4)
				return false;
			uint32_t n = rd32(p + pos);
			if (n < 5 || n > end - pos)
				return false;
			if (kind == 0) {
				doc = p + pos;
				doclen = n;
			} else if (kind == 1) {
				const uint8_t *q = memchr(p + pos + 4, 0, n - 4);
				if (!q)
					return false;
				q++;
				const uint8_t *send = p + pos + n;
				while (send - q >= 5) {
					uint32_t dl = rd32(q);
					if (dl < 5 || dl > (uint32_t)(send - q))
						return false;
					q += dl;
					nseq++;
				}
			} else {
				return false;
			}
			pos += n;
		}
		if (!doc || !bson_init_static(&body, doc, doclen))
			return false;
		bson_iter_t it;
		if (bson_iter_init_find(&it, &body, "$db") && BSON_ITER_HOLDS_UTF8(&it))
			snprintf(db, sizeof db, "%s", bson_iter_utf8(&it, NULL));
		answer(t, &body, db, nseq);
		if (!(flags & FB_MORE))
			emit(t, c, request_id, false);
		return true;
	}
	if (opcode == FB_OP_QUERY) {
		/* flags, fullCollectionName, numberToSkip, numberToReturn, query */
		if (len < 16 + 4 + 1 + 8 + 5)
			return false;
		const uint8_t *name = p + 20;
		const uint8_t *nul = memchr(name, 0, len - 20);
		if (!nul || (size_t)(p + len - (nul + 1)) < 8 + 5)
			return false;
		const uint8_t *doc = nul + 9;
		uint32_t doclen = rd32(doc);
		if (doclen < 5 || doclen > (uint32_t)(p + len - doc) ||
		    !bson_init_static(&body, doc, doclen))
			return false;
		size_t dblen = strcspn((const char *)name, ".");
		snprintf(db, sizeof db, "%.*s", (int)dblen, (const char *)name);
		bson_iter_t it;
		bson_t inner;
		const bson_t *cmd = &body;
		if (bson_iter_init_find(&it, &body, "$query") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
			const uint8_t *d;
			uint32_t dl;
			bson_iter_document(&it, &dl, &d);
			if (bson_init_static(&inner, d, dl))
				cmd = &inner;
		}
		answer(t, cmd, db, 0);
		emit(t, c, request_id, true);
		return true;
	}
	return false; /* legacy opcodes a 5.1+ server refuses */
}

/* --- connections and the loop ------------------------------------------- */

static void conn_close(fb_thread *t, fb_conn *c)
{
	epoll_ctl(t->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->in.p);
	free(c->out.p);
	free(c);
}

static void conn_update_events(fb_thread *t, fb_conn *c)
{
	size_t pending = c->out.len - c->out.off;
	uint32_t ev = (pending > FB_OUT_HIGH ? 0 : EPOLLIN) | (pending ? EPOLLOUT : 0);
	if (ev == c->events)
		return;
	struct epoll_event e = {.events = ev, .data.ptr = c};
	epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &e);
	c->events = ev;
}

/* Writes what it can; false when the peer is gone. */
static bool conn_flush(fb_conn *c)
{
	while (c->out.off < c->out.len) {
		ssize_t n = write(c->fd, c->out.p + c->out.off, c->out.len - c->out.off);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			return false;
		}
		c->out.off += (size_t)n;
	}
	if (c->out.off == c->out.len)
		c->out.off = c->out.len = 0;
	return true;
}

/* Reads, answers every complete frame; false means close. */
static bool conn_read(fb_thread *t, fb_conn *c)
{
	for (;;) {
		size_t need = c->in.len + FB_READ_CHUNK;
		if (c->in.len >= 4) {
			uint32_t fl = rd32(c->in.p);
			if (fl < FB_MSG_MIN || fl > FB_MSG_MAX)
				return false;
			if (fl > need)
				need = fl;
		}
		buf_reserve(&c->in, need);
		size_t room = c->in.cap - c->in.len;
		ssize_t n = read(c->fd, c->in.p + c->in.len, room);
		if (n == 0)
			return false;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		c->in.len += (size_t)n;

		size_t off = 0;
		while (c->in.len - off >= 4) {
			uint32_t fl = rd32(c->in.p + off);
			if (fl < FB_MSG_MIN || fl > FB_MSG_MAX)
				return false;
			if (c->in.len - off < fl)
				break;
			if (!handle_frame(t, c, c->in.p + off, fl))
				return false;
			off += fl;
		}
		if (off) {
			memmove(c->in.p, c->in.p + off, c->in.len - off);
			c->in.len -= off;
		}
		/* A short read means the socket is drained; answer what we have. */
		if ((size_t)n < room || c->out.len - c->out.off > FB_OUT_HIGH)
			return true;
	}
}

static void accept_all(fb_thread *t)
{
	for (;;) {
		int fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		fb_conn *c = calloc(1, sizeof *c);
		if (!c) {
			close(fd);
			return;
		}
		c->fd = fd;
		c->events = EPOLLIN;
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
		if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
			close(fd);
			free(c);
		}
	}
}

static void *thread_main(void *arg)
{
	fb_thread *t = arg;
	struct epoll_event evs[256];
	while (!stopping) {
		int n = epoll_wait(t->epfd, evs, 256, 200);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == NULL) {
				accept_all(t);
				continue;
			}
			fb_conn *c = evs[i].data.ptr;
			bool ok = true;
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				ok = conn_read(t, c);
			if (ok)
				ok = conn_flush(c);
			if (!ok)
				conn_close(t, c);
			else
				conn_update_events(t, c);
		}
	}
	return NULL;
}

static int listen_on(const char *host, int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (fd < 0 || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		fprintf(stderr, "mg_fastbackend: bad address %s\n", host);
		exit(2);
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 4096) < 0) {
		fprintf(stderr, "mg_fastbackend: cannot listen on %s:%d: %s\n", host, port,
		        strerror(errno));
		exit(1);
	}
	return fd;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mg_fastbackend [--host ADDR] [--port N] [--threads N] "
	           "[--cursor-batches K]\n"
	           "  A MongoDB wire-protocol server that answers every request at once from\n"
	           "  canned data (see the top of tests/bench/mg_fastbackend.c).\n"
	           "  --port 0 picks a free port; the chosen one is printed.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"host", required_argument, NULL, 'H'},
	                                         {"port", required_argument, NULL, 'p'},
	                                         {"threads", required_argument, NULL, 't'},
	                                         {"cursor-batches", required_argument, NULL, 'k'},
	                                         {"help", no_argument, NULL, 'h'},
	                                         {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "H:p:t:k:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'H':
			opt.host = optarg;
			break;
		case 'p':
			opt.port = atoi(optarg);
			break;
		case 't':
			opt.threads = atoi(optarg);
			break;
		case 'k':
			opt.cursor_batches = atoi(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (opt.threads < 1 || opt.threads > 64 || opt.cursor_batches < 1 || opt.port < 0 ||
	    opt.port > 65535) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	fb_thread *ts = calloc((size_t)opt.threads, sizeof *ts);
	int port = opt.port;
	for (int i = 0; i < opt.threads; i++) {
		ts[i].lfd = listen_on(opt.host, port);
		if (port == 0) {
			struct sockaddr_in got;
			socklen_t sl = sizeof got;
			getsockname(ts[i].lfd, (struct sockaddr *)&got, &sl);
			port = ntohs(got.sin_port);
		}
		ts[i].epfd = epoll_create1(EPOLL_CLOEXEC);
		bson_init(&ts[i].scratch);
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
		epoll_ctl(ts[i].epfd, EPOLL_CTL_ADD, ts[i].lfd, &e);
	}
	printf("mg_fastbackend listening on %s:%d\n", opt.host, port);
	fflush(stdout);
	for (int i = 1; i < opt.threads; i++)
		pthread_create(&ts[i].tid, NULL, thread_main, &ts[i]);
	thread_main(&ts[0]);
	for (int i = 1; i < opt.threads; i++)
		pthread_join(ts[i].tid, NULL);
	return 0;
}
