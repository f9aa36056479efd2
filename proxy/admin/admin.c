/* The admin endpoint (see admin.h). */
#include "proxy/admin/admin.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/sinks/log.h"

enum {
	MAX_HEAD = 16 * 1024, /* request line and headers */
	MAX_BODY = 4 * 1024,
	TIMEOUT_SECS = 10,
	TEXT_BIG = 256 * 1024, /* /findings and /config bodies */
	/* /connections: about 300 bytes a connection, so tens of thousands */
	TEXT_CONNECTIONS = 8 * 1024 * 1024,
	/* /workload: about 1.5 KiB a shape, up to its limit */
	TEXT_WORKLOAD = 16 * 1024 * 1024,
	/* /metrics' per-collection lines: two per labelled collection */
	TEXT_WORKLOAD_METRICS = 512 * 1024,
};

struct admin {
	admin_sources src;
	char token[256]; /* "" = none required */
	struct event_base *base;
	struct evhttp *http;
	pthread_t thread;
	bool running;
};

bool admin_read_token(const char *path, char *out, size_t size, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "cannot read admin.tokenFile %s: %s", path, strerror(errno));
		return false;
	}
	char line[512] = "";
	bool got = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	char *s = line, *e;
	while (*s == ' ' || *s == '\t')
		s++;
	for (e = s + strlen(s);
	     e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t');)
		*--e = '\0';
	if (!got || !*s || strlen(s) >= size) {
		snprintf(err, errlen, "admin.tokenFile %s %s", path,
		         !*s ? "holds no token" : "holds a token that is too long");
		return false;
	}
	snprintf(out, size, "%s", s);
	return true;
}

/* 127.0.0.0/8 or ::1: reachable from this host only. */
static bool is_loopback(const net_addr *a)
{
	if (a->ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&a->ss;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (a->ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return false;
}

/* Compares without an early exit, so timing says nothing about the token. */
static bool token_ok(const admin *a, const char *header)
{
	static const char prefix[] = "Bearer ";
	if (!a->token[0])
		return true;
	if (!header || strncmp(header, prefix, sizeof(prefix) - 1) != 0)
		return false;
	const char *got = header + sizeof(prefix) - 1;
	size_t n = strlen(a->token), m = strlen(got);
	unsigned char diff = (unsigned char)(n != m);
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(a->token[i] ^ (i < m ? got[i] : 0));
	return diff == 0;
}

static void reply(struct evhttp_request *req, int code, const char *reason,
                  const char *content_type, const char *body, size_t len)
{
	struct evbuffer *b = evbuffer_new();
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Content-Type", content_type);
	evhttp_add_header(h, "Cache-Control", "no-store");
	if (code == 401)
		evhttp_add_header(h, "WWW-Authenticate", "Bearer realm=\"mongoguard\"");
	if (b)
		evbuffer_add(b, body, len);
	evhttp_send_reply(req, code, reason, b);
	if (b)
		evbuffer_free(b);
}

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *msg)
{
	reply(req, code, reason, "text/plain; charset=utf-8", msg, strlen(msg));
}

/* Renders with fn (given ctx) into a heap buffer of `size` bytes and sends it. */
static void reply_rendered(admin *a, struct evhttp_request *req, const char *content_type,
                           size_t size, void (*fn)(admin *a, const void *ctx, text_buf *t),
                           const void *ctx)
{
	char *buf = malloc(size);
	if (!buf) {
		reply_text(req, 500, "Internal Server Error", "out of memory\n");
		return;
	}
	text_buf t;
	text_init_reserve(&t, buf, size, 16); /* room to close a cut JSON array */
	fn(a, ctx, &t);
	reply(req, 200, "OK", content_type, buf, t.len);
	free(buf);
}

static void render_metrics(admin *a, const void *ctx, text_buf *t)
{
	metrics_render(a->src.metrics, t);
	if (a->src.workload_metrics && !t->overflow) /* the per-collection counters */
		a->src.workload_metrics(a->src.arg, t);
}

/* GET /workload: rendered into a buffer of its own, so a worker's copy
 * and the rows are gone before the reply is sent. */
static void serve_workload(admin *a, struct evhttp_request *req)
{
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	char store[1024], err[300];
	wl_query q;
	if (!workload_query_parse(query, &q, store, sizeof(store), err, sizeof(err))) {
		char msg[400];
		snprintf(msg, sizeof(msg), "%s\n", err);
		reply_text(req, 400, "Bad Request", msg);
		return;
	}
	char *buf = malloc(TEXT_WORKLOAD);
	if (!buf) {
		reply_text(req, 500, "Internal Server Error", "out of memory\n");
		return;
	}
	text_buf t;
	text_init_reserve(&t, buf, TEXT_WORKLOAD, 16);
	if (!a->src.workload_json || !a->src.workload_json(a->src.arg, &q, &t))
		reply_text(req, 404, "Not Found",
		           "workload statistics are off (workload.enabled)\n");
	else
		reply(req, 200, "OK", "application/json", buf, t.len);
	free(buf);
}

static void render_findings(admin *a, const void *filter, text_buf *t)
{
	a->src.findings_json(a->src.arg, filter, t);
}

static void findings(admin *a, struct evhttp_request *req)
{
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	char store[1024], err[300];
	admin_filter f;
	if (!admin_filter_parse(query, &f, store, sizeof(store), err, sizeof(err))) {
		char msg[400];
		snprintf(msg, sizeof(msg), "%s\n", err);
		reply_text(req, 400, "Bad Request", msg);
		return;
	}
	reply_rendered(a, req, "application/json", TEXT_BIG, render_findings, &f);
}

static void readyz(admin *a, struct evhttp_request *req)
{
	char why[512], msg[600];
	if (a->src.ready(a->src.arg, why, sizeof(why))) {
		reply_text(req, 200, "OK", "ready\n");
		return;
	}
	snprintf(msg, sizeof(msg), "upstream not reachable: %s\n", why);
	reply_text(req, 503, "Service Unavailable", msg);
}

static void render_config(admin *a, const void *ctx, text_buf *t)
{
	a->src.config_json(a->src.arg, t);
}

static void render_connections(admin *a, const void *ctx, text_buf *t)
{
	a->src.connections_json(a->src.arg, t);
}

/* POST /connections/ID/close: the connection ends as at shutdown's end,
 * its log line naming the operator; 404 when no worker has it. */
static void close_connection(admin *a, struct evhttp_request *req, enum evhttp_cmd_type method,
                             const char *rest)
{
	char *end = NULL;
	errno = 0;
	unsigned long long id = strtoull(rest, &end, 10);
	if (end == rest || errno || strcmp(end, "/close") != 0) {
		reply_text(req, 404, "Not Found", "try POST /connections/ID/close\n");
		return;
	}
	if (method != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		reply_text(req, 405, "Method Not Allowed",
		           "POST /connections/ID/close closes it\n");
		return;
	}
	char msg[96];
	if (!a->src.close_connection(a->src.arg, (uint64_t)id)) {
		snprintf(msg, sizeof msg, "no open connection %llu\n", id);
		reply_text(req, 404, "Not Found", msg);
		return;
	}
	log_reason(LOG_WARNING, "CONTROL", LOGID_ADMIN, NULL,
	           "Connection conn%llu closed by an operator (POST /connections/%llu/close)", id,
	           id);
	snprintf(msg, sizeof msg, "closed conn%llu\n", id);
	reply_text(req, 200, "OK", msg);
}

static void reload(admin *a, struct evhttp_request *req, enum evhttp_cmd_type method)
{
	char err[1024], msg[1200];
	if (method != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		reply_text(req, 405, "Method Not Allowed", "POST /reload re-reads the config\n");
		return;
	}
	if (a->src.reload(a->src.arg, err, sizeof(err))) {
		if (err[0])
			snprintf(msg, sizeof(msg),
			         "reloaded; these changes wait for a restart (the running values "
			         "stay): %s\n",
			         err);
		reply_text(req, 200, "OK", err[0] ? msg : "reloaded\n");
		return;
	}
	snprintf(msg, sizeof(msg), "reload refused, the running configuration stays: %s\n", err);
	reply_text(req, 422, "Unprocessable Entity", msg);
}

static void handle(struct evhttp_request *req, void *arg)
{
	admin *a = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	if (!path)
		path = "/";
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	/* Probes are open: a kubelet or a load balancer's health check sends no
	 * token, and liveness and readiness say nothing the token protects. */
	bool probe = !strcmp(path, "/healthz") || !strcmp(path, "/readyz");
	if (!probe && !token_ok(a, evhttp_find_header(in, "Authorization"))) {
		log_reason(LOG_WARNING, "CONTROL", LOGID_ADMIN, NULL,
		           "Admin request without the right bearer token refused (%s)", path);
		reply_text(req, 401, "Unauthorized", "bearer token required\n");
		return;
	}
	enum evhttp_cmd_type method = evhttp_request_get_command(req);
	if (!strcmp(path, "/reload")) {
		reload(a, req, method);
		return;
	}
	if (!strncmp(path, "/connections/", 13)) {
		close_connection(a, req, method, path + 13);
		return;
	}
	bool get = method == EVHTTP_REQ_GET;
	static const char *const known[] = {"/metrics", "/healthz",     "/readyz",   "/findings",
	                                    "/config",  "/connections", "/workload", NULL};
	bool found = false;
	for (int i = 0; known[i]; i++)
		found |= !strcmp(path, known[i]);
	if (!found) {
		reply_text(req, 404, "Not Found",
		           "unknown path; try /metrics, /healthz, /readyz, /findings, /config, "
		           "/connections, /workload, /reload\n");
		return;
	}
	if (!get) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
		reply_text(req, 405, "Method Not Allowed", "only GET is served here\n");
		return;
	}
	if (!strcmp(path, "/metrics"))
		reply_rendered(a, req, "text/plain; version=0.0.4; charset=utf-8",
		               metrics_text_size() + TEXT_WORKLOAD_METRICS, render_metrics, NULL);
	else if (!strcmp(path, "/healthz"))
		reply_text(req, 200, "OK", "ok\n");
	else if (!strcmp(path, "/readyz"))
		readyz(a, req);
	else if (!strcmp(path, "/findings"))
		findings(a, req);
	else if (!strcmp(path, "/workload"))
		serve_workload(a, req);
	else if (!strcmp(path, "/connections"))
		reply_rendered(a, req, "application/json", TEXT_CONNECTIONS, render_connections,
		               NULL);
	else
		reply_rendered(a, req, "application/json", TEXT_BIG, render_config, NULL);
}

static void *admin_main(void *arg)
{
	admin *a = arg;
	event_base_loop(a->base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

static bool admin_bind(admin *a, const net_addr *listen, char *err, size_t errlen)
{
	struct evconnlistener *l = evconnlistener_new_bind(
	    a->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    64, (const struct sockaddr *)&listen->ss, (int)listen->len);
	if (!l) {
		snprintf(err, errlen, "cannot listen on admin.listen %s: %s", listen->name,
		         strerror(errno));
		return false;
	}
	if (!evhttp_bind_listener(a->http, l)) {
		evconnlistener_free(l);
		snprintf(err, errlen, "cannot serve HTTP on %s", listen->name);
		return false;
	}
	return true;
}

admin *admin_start(const net_addr *listen, const char *token, const admin_sources *src, char *err,
                   size_t errlen)
{
	admin *a = calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	a->src = *src;
	snprintf(a->token, sizeof(a->token), "%s", token ? token : "");
	a->base = event_base_new();
	a->http = a->base ? evhttp_new(a->base) : NULL;
	if (!a->http) {
		snprintf(err, errlen, "cannot create the admin HTTP server");
		admin_stop(a);
		return NULL;
	}
	evhttp_set_max_headers_size(a->http, MAX_HEAD);
	evhttp_set_max_body_size(a->http, MAX_BODY);
	evhttp_set_timeout(a->http, TIMEOUT_SECS);
	evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
	                                        EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE);
	evhttp_set_gencb(a->http, handle, a);
	if (!admin_bind(a, listen, err, errlen)) {
		admin_stop(a);
		return NULL;
	}
	if (pthread_create(&a->thread, NULL, admin_main, a) != 0) {
		snprintf(err, errlen, "cannot start the admin thread");
		admin_stop(a);
		return NULL;
	}
	a->running = true;
	log_reason(LOG_INFO, "CONTROL", LOGID_ADMIN, NULL, "Admin endpoint on http://%s%s",
	           listen->name, a->token[0] ? " (bearer token required)" : "");
	if (!a->token[0] && !is_loopback(listen))
		log_reason(
		    LOG_WARNING, "CONTROL", LOGID_ADMIN, NULL,
		    "Admin endpoint on %s is reachable beyond this host and needs no token: "
		    "anyone who can reach it can read findings and configuration and reload; "
		    "set admin.tokenFile or listen on 127.0.0.1",
		    listen->name);
	return a;
}

void admin_stop(admin *a)
{
	if (!a)
		return;
	if (a->running) {
		event_base_loopexit(a->base, NULL);
		pthread_join(a->thread, NULL);
	}
	if (a->http)
		evhttp_free(a->http);
	if (a->base)
		event_base_free(a->base);
	free(a);
}
