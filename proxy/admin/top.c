/* mongoguard top (see top.h). A plain HTTP/1.0 GET to the admin endpoint,
 * its JSON read with libbson, a table written to the terminal. */
#include "proxy/admin/top.h"

#include <bson/bson.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

enum { MAX_BODY = 32 * 1024 * 1024, PREV_MAX = 4096 };

typedef struct top_opts {
	char host[256], port[16];
	char token[512];
	char query[1024];
	double interval;
	bool once;
} top_opts;

static volatile sig_atomic_t stop_asked;

static void on_signal(int sig)
{
	(void)sig;
	stop_asked = 1;
}

/* ---- fetching ---- */

static int dial(const top_opts *o, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	int rc = getaddrinfo(o->host, o->port, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "%s: %s", o->host, gai_strerror(rc));
		return -1;
	}
	int fd = -1;
	for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
			snprintf(err, errlen, "cannot connect to %s:%s: %s", o->host, o->port,
			         strerror(errno));
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	return fd;
}

/* GET /workload's body, NUL-terminated (malloc'd); NULL with err set. */
static char *fetch(const top_opts *o, char *err, size_t errlen)
{
	int fd = dial(o, err, errlen);
	if (fd < 0)
		return NULL;
	char req[2048];
	int n = snprintf(req, sizeof(req), "GET /workload%s%s HTTP/1.0\r\nHost: %s\r\n%s%s%s\r\n",
	                 o->query[0] ? "?" : "", o->query, o->host,
	                 o->token[0] ? "Authorization: Bearer " : "", o->token,
	                 o->token[0] ? "\r\n" : "");
	char *buf = malloc(MAX_BODY + 1);
	size_t got = 0;
	if (!buf || write(fd, req, (size_t)n) != n) {
		snprintf(err, errlen, "cannot ask %s:%s", o->host, o->port);
		free(buf);
		close(fd);
		return NULL;
	}
	ssize_t r;
	while (got < MAX_BODY && (r = read(fd, buf + got, MAX_BODY - got)) > 0)
		got += (size_t)r;
	close(fd);
	buf[got] = '\0';
	char *body = strstr(buf, "\r\n\r\n");
	int status = 0;
	if (sscanf(buf, "HTTP/%*s %d", &status) != 1 || !body) {
		snprintf(err, errlen, "%s:%s did not answer HTTP", o->host, o->port);
		free(buf);
		return NULL;
	}
	body += 4;
	if (status != 200) {
		body[strcspn(body, "\n")] = '\0';
		snprintf(err, errlen, "GET /workload: HTTP %d: %s", status, body);
		free(buf);
		return NULL;
	}
	memmove(buf, body, strlen(body) + 1);
	return buf;
}

/* ---- reading the JSON ---- */

static double num(const bson_t *d, const char *key)
{
	bson_iter_t it;
	return bson_iter_init_find(&it, d, key) && BSON_ITER_HOLDS_NUMBER(&it)
	           ? bson_iter_as_double(&it)
	           : 0;
}

static const char *str(const bson_t *d, const char *key)
{
	bson_iter_t it;
	return bson_iter_init_find(&it, d, key) && BSON_ITER_HOLDS_UTF8(&it)
	           ? bson_iter_utf8(&it, NULL)
	           : "";
}

/* The rules of a shape, comma-separated. */
static void rules_of(const bson_t *d, char *out, size_t cap)
{
	bson_iter_t it, a;
	size_t used = 0;
	out[0] = '\0';
	if (!bson_iter_init_find(&it, d, "rules") || !bson_iter_recurse(&it, &a))
		return;
	while (bson_iter_next(&a) && BSON_ITER_HOLDS_UTF8(&a) && used < cap)
		used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? "," : "",
		                         bson_iter_utf8(&a, NULL));
}

/* Counts seen at the last refresh, for rates over the interval. */
typedef struct prev {
	char id[96]; /* shapeHash and app */
	double count;
} prev;

static prev prevs[PREV_MAX], nexts[PREV_MAX];
static size_t nprev, nnext;

static double rate_since(const char *id, double count, double secs, double fallback)
{
	if (nnext < PREV_MAX) {
		snprintf(nexts[nnext].id, sizeof(nexts[nnext].id), "%s", id);
		nexts[nnext++].count = count;
	}
	if (secs <= 0)
		return fallback;
	for (size_t i = 0; i < nprev; i++)
		if (!strcmp(prevs[i].id, id))
			return (count - prevs[i].count) / secs;
	return fallback;
}

static int width(void)
{
	struct winsize ws;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
		return ws.ws_col;
	return 200;
}

static void print_shapes(FILE *out, const bson_t *doc, double secs, int cols)
{
	bson_iter_t it, a;
	fprintf(out, "%-24s %-10s %-12s %9s %9s %11s %8s %8s %8s %8s %7s  %-22s %s\n", "NS",
	        "COMMAND", "APP", "COUNT", "RATE/s", "TOTAL_MS", "P50_MS", "P95_MS", "P99_MS",
	        "DOCS", "ERRORS", "RULES", "SHAPE");
	if (!bson_iter_init_find(&it, doc, "shapes") || !bson_iter_recurse(&it, &a))
		return;
	int fixed = 24 + 1 + 10 + 1 + 12 + 1 + 9 + 1 + 9 + 1 + 11 + 4 * 9 + 1 + 7 + 2 + 22 + 1;
	int room = cols - fixed > 20 ? cols - fixed : 20;
	while (bson_iter_next(&a)) {
		uint32_t len;
		const uint8_t *data;
		bson_t s;
		if (!BSON_ITER_HOLDS_DOCUMENT(&a))
			continue;
		bson_iter_document(&a, &len, &data);
		if (!bson_init_static(&s, data, len))
			continue;
		char rules[256], id[96];
		rules_of(&s, rules, sizeof(rules));
		snprintf(id, sizeof(id), "%s/%s", str(&s, "shapeHash"), str(&s, "app"));
		double count = num(&s, "count");
		fprintf(
		    out,
		    "%-24.24s %-10.10s %-12.12s %9.0f %9.1f %11.1f %8.2f %8.2f %8.2f %8.0f %7.0f  "
		    "%-22.22s %.*s\n",
		    str(&s, "ns"), str(&s, "command"), str(&s, "app")[0] ? str(&s, "app") : "-",
		    count, rate_since(id, count, secs, num(&s, "rate")), num(&s, "totalMS"),
		    num(&s, "p50MS"), num(&s, "p95MS"), num(&s, "p99MS"), num(&s, "docs"),
		    num(&s, "errors"), rules[0] ? rules : "-", room, str(&s, "shape"));
	}
}

static void print_collections(FILE *out, const bson_t *doc)
{
	bson_iter_t it, a;
	fprintf(out, "\n%-40s %10s %10s %12s %12s\n", "COLLECTION", "READS", "WRITES", "READS/s",
	        "WRITES/s");
	if (!bson_iter_init_find(&it, doc, "collections") || !bson_iter_recurse(&it, &a))
		return;
	while (bson_iter_next(&a)) {
		uint32_t len;
		const uint8_t *data;
		bson_t c;
		if (!BSON_ITER_HOLDS_DOCUMENT(&a))
			continue;
		bson_iter_document(&a, &len, &data);
		if (!bson_init_static(&c, data, len))
			continue;
		fprintf(out, "%-40.40s %10.0f %10.0f %12.1f %12.1f\n", str(&c, "ns"),
		        num(&c, "reads"), num(&c, "writes"), num(&c, "readsPerSec"),
		        num(&c, "writesPerSec"));
	}
}

/* One snapshot written to out; false (err set) when it could not be had. */
static bool show(FILE *out, const top_opts *o, double secs, char *err, size_t errlen)
{
	char *body = fetch(o, err, errlen);
	if (!body)
		return false;
	bson_error_t e;
	bson_t *doc = bson_new_from_json((const uint8_t *)body, -1, &e);
	free(body);
	if (!doc) {
		snprintf(err, errlen, "GET /workload: not JSON: %s", e.message);
		return false;
	}
	char when[32];
	time_t now = time(NULL);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&now));
	bson_iter_t it, f;
	double folded = 0;
	if (bson_iter_init_find(&it, doc, "folded") && bson_iter_recurse(&it, &f) &&
	    bson_iter_find(&f, "shapes"))
		folded = bson_iter_as_double(&f);
	fprintf(out,
	        "mongoguard top - %s:%s - %s - shapes %.0f of %.0f, folded %.0f, up %.0f s%s\n\n",
	        o->host, o->port, when, num(doc, "shapesListed"), num(doc, "shapesMatched"), folded,
	        num(doc, "secs"), o->once ? "" : " (q to quit)");
	nnext = 0;
	print_shapes(out, doc, secs, o->once ? 1000 : width());
	print_collections(out, doc);
	memcpy(prevs, nexts, nnext * sizeof(prevs[0]));
	nprev = nnext;
	bson_destroy(doc);
	return true;
}

/* ---- the terminal ---- */

static struct termios saved;
static bool raw_on;

static void term_restore(void)
{
	if (!raw_on)
		return;
	tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	fputs("\033[?25h\033[?1049l", stdout); /* cursor back, main screen back */
	fflush(stdout);
	raw_on = false;
}

static void term_raw(void)
{
	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved) != 0)
		return;
	struct termios t = saved;
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 0;
	t.c_cc[VTIME] = 0;
	tcsetattr(STDIN_FILENO, TCSANOW, &t);
	raw_on = true;
	fputs("\033[?1049h\033[?25l", stdout); /* the alternate screen, no cursor */
}

/* Waits up to secs for a key; true when q was pressed. */
static bool wait_key(double secs)
{
	struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
	int ms = (int)(secs * 1000);
	if (!raw_on) { /* not a terminal: no keys, only the interval */
		poll(NULL, 0, ms);
		return false;
	}
	if (poll(&p, 1, ms) <= 0)
		return false;
	char c = 0;
	return read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q');
}

static int run_live(const top_opts *o)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	term_raw();
	atexit(term_restore);
	char err[512] = "";
	struct timespec last = {0}, now;
	int status = 0;
	while (!stop_asked) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		double secs = last.tv_sec ? (double)(now.tv_sec - last.tv_sec) +
		                                (double)(now.tv_nsec - last.tv_nsec) / 1e9
		                          : 0;
		fputs("\033[H\033[2J", stdout);
		if (!show(stdout, o, secs, err, sizeof(err)))
			printf("mongoguard top: %s (retrying)\n", err);
		fflush(stdout);
		last = now;
		if (wait_key(o->interval))
			break;
	}
	term_restore();
	return status;
}

/* ---- arguments ---- */

static void top_usage(FILE *out)
{
	fputs("Usage: mongoguard top [--admin HOST:PORT] [--once] [--interval SECS]\n"
	      "                      [--ns GLOB] [--app GLOB] [--sort KEY] [--limit N]\n"
	      "                      [--token-file FILE]\n"
	      "A running mongoguard's live workload (GET /workload on its admin endpoint):\n"
	      "query shapes by total time, with the rules that fired on them, and the\n"
	      "collections' reads and writes. Refreshes every --interval seconds (2) until\n"
	      "q or Ctrl-C; --once prints one snapshot and exits (1 when it cannot be had).\n"
	      "--admin defaults to 127.0.0.1:9216; --sort: total (default), count, p99,\n"
	      "errors, docs, bytes.\n",
	      out);
}

static bool split_admin(const char *a, top_opts *o)
{
	const char *colon = strrchr(a, ':');
	if (!colon || colon == a || !colon[1])
		return false;
	size_t hl = (size_t)(colon - a);
	if (a[0] == '[' && colon[-1] == ']') { /* [v6]:port */
		a++;
		hl -= 2;
	}
	if (hl >= sizeof(o->host) || strlen(colon + 1) >= sizeof(o->port))
		return false;
	memcpy(o->host, a, hl);
	o->host[hl] = '\0';
	snprintf(o->port, sizeof(o->port), "%s", colon + 1);
	return true;
}

/* Appends key=value to the query, the value percent-encoded. */
static void add_param(top_opts *o, const char *key, const char *value)
{
	size_t n = strlen(o->query);
	n += (size_t)snprintf(o->query + n, sizeof(o->query) - n, "%s%s=", n ? "&" : "", key);
	for (const unsigned char *v = (const unsigned char *)value; *v && n + 4 < sizeof(o->query);
	     v++)
		n += (size_t)snprintf(o->query + n, sizeof(o->query) - n,
		                      (*v >= '0' && *v <= '9') ||
		                              ((*v | 0x20) >= 'a' && (*v | 0x20) <= 'z') ||
		                              *v == '.' || *v == '-' || *v == '_'
		                          ? "%c"
		                          : "%%%02X",
		                      *v);
}

static bool read_token(const char *path, top_opts *o)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fgets(o->token, sizeof(o->token), f) != NULL;
	fclose(f);
	o->token[strcspn(o->token, "\r\n")] = '\0';
	return ok && o->token[0];
}

int top_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"admin", required_argument, NULL, 'a'},
	    {"once", no_argument, NULL, '1'},
	    {"interval", required_argument, NULL, 'i'},
	    {"ns", required_argument, NULL, 'n'},
	    {"app", required_argument, NULL, 'p'},
	    {"sort", required_argument, NULL, 's'},
	    {"limit", required_argument, NULL, 'l'},
	    {"token-file", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	top_opts o = {.host = "127.0.0.1", .port = "9216", .interval = 2};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (!split_admin(optarg, &o)) {
				fprintf(stderr, "mongoguard top: --admin %s: want HOST:PORT\n",
				        optarg);
				return 2;
			}
			break;
		case '1':
			o.once = true;
			break;
		case 'i':
			o.interval = atof(optarg);
			if (o.interval < 0.1 || o.interval > 3600) {
				fprintf(stderr,
				        "mongoguard top: --interval: 0.1 to 3600 seconds\n");
				return 2;
			}
			break;
		case 'n':
			add_param(&o, "ns", optarg);
			break;
		case 'p':
			add_param(&o, "app", optarg);
			break;
		case 's':
			add_param(&o, "sort", optarg);
			break;
		case 'l':
			add_param(&o, "limit", optarg);
			break;
		case 't':
			if (!read_token(optarg, &o)) {
				fprintf(stderr, "mongoguard top: --token-file %s: no token read\n",
				        optarg);
				return 2;
			}
			break;
		case 'h':
			top_usage(stdout);
			return 0;
		default:
			top_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "mongoguard top: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!o.once)
		return run_live(&o);
	char err[512];
	if (!show(stdout, &o, 0, err, sizeof(err))) {
		fprintf(stderr, "mongoguard top: %s\n", err);
		return 1;
	}
	return 0;
}
