/* The main thread accepts and hands each connection to a worker; each worker
 * runs its own event base and owns its sessions for their whole life, so a
 * session's state is only ever touched by one thread. Workers hear from
 * other threads only through worker_wakeup(): a locked inbox of accepted
 * sockets plus three atomic flags. */
#include "proxy/server.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "proxy/log.h"
#include "proxy/server_run.h"
#include "proxy/session.h"

int64_t mg_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void worker_wakeup(worker *w)
{
	event_active(w->wakeup, EV_READ, 0);
}

static void worker_wakeup_cb(evutil_socket_t fd, short what, void *arg)
{
	worker *w = arg;
	pthread_mutex_lock(&w->lock);
	accepted_conn *batch = w->inbox;
	size_t n = w->ninbox;
	w->inbox = NULL;
	w->ninbox = w->capinbox = 0;
	pthread_mutex_unlock(&w->lock);
	for (size_t i = 0; i < n; i++) {
		if (atomic_load(&w->draining)) {
			close(batch[i].fd);
			atomic_fetch_sub(&w->srv->nconns, 1);
			continue;
		}
		session_start(w, batch[i].fd, (struct sockaddr *)&batch[i].addr, batch[i].addrlen);
	}
	free(batch);

	if (atomic_exchange(&w->index_changed, false))
		for (session *s = w->sessions, *next; s; s = next) {
			next = session_next(s);
			session_index_changed(s);
		}
	if (atomic_load(&w->stop)) {
		for (session *s = w->sessions, *next; s; s = next) {
			next = session_next(s);
			session_abort(s, "shutdown grace period over");
		}
		if (w->nsessions == 0)
			event_base_loopexit(w->base, NULL);
	} else if (atomic_load(&w->draining)) {
		for (session *s = w->sessions, *next; s; s = next) {
			next = session_next(s);
			session_drain(s);
		}
		if (w->nsessions == 0)
			event_base_loopexit(w->base, NULL);
	}
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

/* ---- accepting ---- */

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *addr,
                      int addrlen, void *arg)
{
	server *srv = arg;
	if (atomic_load(&srv->nconns) >= srv->cfg.max_connections) {
		close(fd);
		log_reason(LOG_WARNING, "NETWORK", LOGID_CONN_REFUSED, NULL,
		           "Connection refused: net.maxConnections (%u) reached",
		           srv->cfg.max_connections);
		return;
	}
	atomic_fetch_add(&srv->nconns, 1);
	worker *w = &srv->workers[srv->next_worker++ % srv->nworkers];
	pthread_mutex_lock(&w->lock);
	if (w->ninbox == w->capinbox) {
		size_t cap = w->capinbox ? w->capinbox * 2 : 16;
		accepted_conn *grown = realloc(w->inbox, cap * sizeof(*grown));
		if (!grown) {
			pthread_mutex_unlock(&w->lock);
			close(fd);
			atomic_fetch_sub(&srv->nconns, 1);
			log_reason(LOG_ERROR, "NETWORK", LOGID_CONN_REFUSED, NULL,
			           "Connection refused: out of memory");
			return;
		}
		w->inbox = grown;
		w->capinbox = cap;
	}
	accepted_conn *c = &w->inbox[w->ninbox++];
	c->fd = fd;
	memcpy(&c->addr, addr, (size_t)addrlen);
	c->addrlen = (socklen_t)addrlen;
	pthread_mutex_unlock(&w->lock);
	worker_wakeup(w);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();
	/* EMFILE and friends: say so and keep listening; the listener retries
	 * on the next readiness event. */
	log_reason(LOG_ERROR, "NETWORK", LOGID_CONN_REFUSED, NULL, "accept() failed: %s",
	           evutil_socket_error_to_string(err));
}

/* ---- addresses ---- */

bool server_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len, char *err,
                         size_t errlen)
{
	char host[256];
	const char *port;
	if (spec[0] == '[') {
		const char *close_br = strchr(spec, ']');
		if (!close_br || close_br[1] != ':') {
			snprintf(err, errlen, "listen address '%s' must look like [::1]:27018",
			         spec);
			return false;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(close_br - spec - 1), spec + 1);
		port = close_br + 2;
	} else {
		const char *colon = strrchr(spec, ':');
		if (!colon) {
			snprintf(err, errlen, "listen address '%s' must look like HOST:PORT", spec);
			return false;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
		port = colon + 1;
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc != 0) {
		snprintf(err, errlen, "cannot resolve listen address '%s': %s", spec,
		         gai_strerror(rc));
		return false;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return true;
}

/* ---- shutdown ---- */

static void set_all(server *srv, bool drain, bool stop)
{
	for (size_t i = 0; i < srv->nworkers; i++) {
		if (drain)
			atomic_store(&srv->workers[i].draining, true);
		if (stop)
			atomic_store(&srv->workers[i].stop, true);
		worker_wakeup(&srv->workers[i]);
	}
}

static void grace_cb(evutil_socket_t fd, short what, void *arg)
{
	server *srv = arg;
	log_reason(LOG_WARNING, "CONTROL", LOGID_SHUTDOWN_BEGIN, NULL,
	           "Shutdown grace period (%u ms) over: closing remaining connections",
	           srv->cfg.shutdown_grace_ms);
	set_all(srv, true, true);
	event_base_loopexit(srv->base, NULL);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	server *srv = arg;
	if (srv->shutting_down) {
		log_reason(LOG_WARNING, "CONTROL", LOGID_SHUTDOWN_BEGIN, NULL,
		           "Second signal: closing every connection now");
		set_all(srv, true, true);
		event_base_loopexit(srv->base, NULL);
		return;
	}
	srv->shutting_down = true;
	log_line *l = log_begin(LOG_INFO, "CONTROL", LOGID_SHUTDOWN_BEGIN, NULL,
	                        "Shutting down: no new connections, finishing in-flight requests");
	log_attr_str(l, "signal", strsignal((int)sig));
	log_attr_int(l, "gracePeriodMS", srv->cfg.shutdown_grace_ms);
	log_attr_int(l, "connections", (int64_t)atomic_load(&srv->nconns));
	log_end(l);
	evconnlistener_disable(srv->listener);
	set_all(srv, true, false);
	struct timeval tv = {srv->cfg.shutdown_grace_ms / 1000,
	                     (srv->cfg.shutdown_grace_ms % 1000) * 1000};
	struct event *grace = evtimer_new(srv->base, grace_cb, srv);
	evtimer_add(grace, &tv);
	srv->grace_timer = grace;
}

/* Ends the main loop once every worker has closed its last session. */
static void poll_done_cb(evutil_socket_t fd, short what, void *arg)
{
	server *srv = arg;
	if (srv->shutting_down && atomic_load(&srv->nconns) == 0)
		event_base_loopexit(srv->base, NULL);
}

static void summary_cb(evutil_socket_t fd, short what, void *arg)
{
	server *srv = arg;
	if (srv->engine)
		engine_flush_summaries(srv->engine);
}

static void index_changed(void *arg)
{
	server *srv = arg;
	for (size_t i = 0; i < srv->nworkers; i++) {
		atomic_store(&srv->workers[i].index_changed, true);
		worker_wakeup(&srv->workers[i]);
	}
}

static void index_fetch_failed(void *arg, const char *ns, const char *message)
{
	log_line *l =
	    log_begin(LOG_WARNING, "ANALYZER", LOGID_METADATA_CLIENT, NULL,
	              "Cannot list indexes; index-mismatched-sort has no verdict for this "
	              "collection until a retry succeeds");
	log_attr_str(l, "ns", ns);
	log_attr_str(l, "error", message);
	log_end(l);
}

/* ---- the whole run ---- */

bool server_run(server *srv, char *err, size_t errlen)
{
	if (evthread_use_pthreads() != 0) {
		snprintf(err, errlen, "libevent has no pthreads support");
		return false;
	}
	signal(SIGPIPE, SIG_IGN);
	srv->base = event_base_new();
	if (!srv->base) {
		snprintf(err, errlen, "cannot create the main event base");
		return false;
	}

	if (srv->cfg.analysis_enabled) {
		srv->ic = index_cache_new(srv->cfg.upstream_uri, srv->cfg.index_refresh_secs,
		                          index_changed, srv, err, errlen);
		if (!srv->ic)
			return false;
		index_cache_set_error_hook(srv->ic, index_fetch_failed, srv);
		srv->engine = engine_new(&srv->cfg.engine, srv->ic, server_log_finding, srv);
		if (!srv->engine) {
			snprintf(err, errlen, "cannot create the rule engine");
			return false;
		}
	}

	struct sockaddr_storage ss;
	socklen_t sslen;
	if (!server_parse_listen(srv->cfg.listen, &ss, &sslen, err, errlen))
		return false;
	srv->listener = evconnlistener_new_bind(srv->base, accept_cb, srv,
	                                        LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
	                                            LEV_OPT_CLOSE_ON_EXEC,
	                                        1024, (struct sockaddr *)&ss, (int)sslen);
	if (!srv->listener) {
		snprintf(err, errlen, "cannot listen on %s: %s", srv->cfg.listen, strerror(errno));
		return false;
	}
	evconnlistener_set_error_cb(srv->listener, accept_error_cb);

	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	srv->nworkers = srv->cfg.workers ? srv->cfg.workers : (cores > 0 ? (size_t)cores : 1);
	srv->workers = calloc(srv->nworkers, sizeof(worker));
	for (size_t i = 0; i < srv->nworkers; i++) {
		worker *w = &srv->workers[i];
		w->srv = srv;
		w->index = (int)i;
		pthread_mutex_init(&w->lock, NULL);
		w->base = event_base_new();
		w->wakeup = event_new(w->base, -1, EV_PERSIST, worker_wakeup_cb, w);
		if (!w->base || !w->wakeup ||
		    pthread_create(&w->thread, NULL, worker_main, w) != 0) {
			snprintf(err, errlen, "cannot start worker thread %zu", i);
			return false;
		}
	}
	if (srv->ic && !index_cache_start(srv->ic, err, errlen))
		return false;

	struct event *sigterm = evsignal_new(srv->base, SIGTERM, signal_cb, srv);
	struct event *sigint = evsignal_new(srv->base, SIGINT, signal_cb, srv);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	struct event *poll_done = event_new(srv->base, -1, EV_PERSIST, poll_done_cb, srv);
	struct timeval poll_tv = {0, 50 * 1000};
	evtimer_add(poll_done, &poll_tv);
	struct event *summary = event_new(srv->base, -1, EV_PERSIST, summary_cb, srv);
	struct timeval sum_tv = {srv->cfg.summary_interval_secs, 0};
	evtimer_add(summary, &sum_tv);

	log_line *l =
	    log_begin(LOG_INFO, "NETWORK", LOGID_LISTENING, NULL, "Waiting for connections");
	log_attr_str(l, "listen", srv->cfg.listen);
	log_attr_str(l, "upstream", srv->up.name);
	log_attr_int(l, "workers", (int64_t)srv->nworkers);
	log_attr_bool(l, "analysis", srv->engine != NULL);
	log_end(l);

	event_base_dispatch(srv->base);

	/* Either every connection finished or the grace period ran out. */
	set_all(srv, true, true);
	for (size_t i = 0; i < srv->nworkers; i++)
		pthread_join(srv->workers[i].thread, NULL);
	if (srv->engine)
		engine_flush_summaries(srv->engine);
	log_reason(LOG_INFO, "CONTROL", LOGID_SHUTDOWN_DONE, NULL, "Shutdown complete");

	for (size_t i = 0; i < srv->nworkers; i++) {
		event_free(srv->workers[i].wakeup);
		event_base_free(srv->workers[i].base);
		free(srv->workers[i].inbox);
		pthread_mutex_destroy(&srv->workers[i].lock);
	}
	free(srv->workers);
	event_free(sigterm);
	event_free(sigint);
	event_free(poll_done);
	event_free(summary);
	if (srv->grace_timer)
		event_free(srv->grace_timer);
	evconnlistener_free(srv->listener);
	event_base_free(srv->base);
	if (srv->engine)
		engine_free(srv->engine);
	if (srv->ic)
		index_cache_free(srv->ic);
	return true;
}
