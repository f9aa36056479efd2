/* The main thread: accepting, handing each connection to a worker, signals,
 * timers, start-up and teardown. Workers hear from it only through
 * worker_hand() and worker_notify(). */
#include "proxy/runtime/server.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyzers/index_cache.h"
#include "proxy/sinks/finding_log.h"
#include "proxy/sinks/log.h"
#include "proxy/runtime/snapshot.h"
#include "proxy/runtime/worker.h"

/* What an accept callback needs: the server, and which listener fired. */
typedef struct listen_ctx {
	struct server *srv;
	const plan_listener *pl;
	struct evconnlistener *lev;
} listen_ctx;

typedef struct server {
	const server_plan *plan;
	const mg_config *cfg; /* the start-up configuration (plan->cfg) */
	snapshot_slot config;
	index_cache *ic; /* NULL when analysis is disabled */
	session_ids ids;
	atomic_uint nconns;
	atomic_bool warned_auth; /* the side connection's missing credentials, said once */
	worker_shared shared;
	worker *workers;
	size_t nworkers, nstarted, next_worker;

	struct event_base *base;
	listen_ctx listeners[PLAN_MAX_LISTENERS];
	size_t nlisteners;
	struct event *sigterm, *sigint, *poll_done, *summary, *grace;
	bool shutting_down;
} server;

/* What hello replies call a listener: its address as configured, or for
 * a wildcard bind (every interface) this host's name and the port. */
static void advertise_name(const char *spec, char *out, size_t size)
{
	const char *colon = strrchr(spec, ':');
	size_t hostlen = colon ? (size_t)(colon - spec) : 0;
	bool wildcard =
	    hostlen == 0 || !strncmp(spec, "0.0.0.0", hostlen) || !strncmp(spec, "[::]", hostlen);
	char host[256];
	if (!wildcard || !colon || gethostname(host, sizeof(host)) != 0) {
		snprintf(out, size, "%s", spec);
		return;
	}
	host[sizeof(host) - 1] = '\0';
	snprintf(out, size, "%s%s", host, colon);
}

static bool plan_add(server_plan *p, const char *listen, const upstream_target *up, char *err,
                     size_t errlen)
{
	plan_listener *l = &p->listeners[p->nlisteners];
	if (!net_parse_listen(listen, &l->listen, err, errlen))
		return false;
	l->up = *up;
	advertise_name(listen, l->advertise, sizeof(l->advertise));
	p->nlisteners++;
	return true;
}

bool server_plan_make(server_plan *p, const mg_config *cfg, char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->cfg = cfg;
	upstream_target first;
	if (!upstream_resolve(cfg->upstream_uri, &first, &p->uri, err, errlen) ||
	    !upstream_side_uri(cfg->upstream_uri, cfg->credentials_file, p->side_uri,
	                       sizeof(p->side_uri), &p->side_has_credentials, err, errlen))
		return false;
	if (!tls_build(&p->tls, &cfg->tls, &p->uri.tls, err, errlen))
		return false;
	/* net.listen pairs with the URI's first host unless a member claims it */
	const upstream_target *l0 = &first;
	upstream_target ups[MG_MAX_MEMBERS];
	for (size_t i = 0; i < cfg->nmembers; i++) {
		const mg_member *m = &cfg->members[i];
		if (!upstream_resolve_host(m->host, &ups[i], err, errlen))
			return false;
		if (!strcmp(m->listen, cfg->listen))
			l0 = &ups[i];
	}
	if (!plan_add(p, cfg->listen, l0, err, errlen))
		return false;
	for (size_t i = 0; i < cfg->nmembers; i++)
		if (strcmp(cfg->members[i].listen, cfg->listen) &&
		    !plan_add(p, cfg->members[i].listen, &ups[i], err, errlen))
			return false;
	for (size_t i = 0; i < p->nlisteners; i++) {
		plan_listener *l = &p->listeners[i];
		hello_map_entry *e = &p->map[p->nmap++];
		snprintf(e->member, sizeof(e->member), "%s", l->up.name);
		snprintf(e->listen, sizeof(e->listen), "%s", l->advertise);
	}
	for (size_t i = 0; i < p->nlisteners; i++) {
		plan_listener *l = &p->listeners[i];
		l->hello = (hello_map){p->map, p->nmap, l->advertise, l->up.name};
	}
	return true;
}

/* The listeners and what each serves, once the log is open. */
static void log_plan(const server_plan *p)
{
	for (size_t i = 0; i < p->nlisteners; i++) {
		const plan_listener *pl = &p->listeners[i];
		log_line *l = log_begin(LOG_INFO, "NETWORK", LOGID_LISTENING, NULL,
		                        "Listener paired with upstream server");
		log_attr_str(l, "listen", pl->listen.name);
		log_attr_str(l, "advertised", pl->advertise);
		log_attr_str(l, "upstream", pl->up.name);
		log_end(l);
	}
	if (p->uri.nhosts > 1 && !p->cfg->nmembers)
		log_reason(LOG_WARNING, "NETWORK", LOGID_CONFIG, NULL,
		           "Upstream URI lists %u hosts but upstream.members maps none of them to "
		           "a listener: every client is paired with %s, and hello replies leave "
		           "the others out (see README, \"Topology, TLS and authentication\")",
		           p->uri.nhosts, p->listeners[0].up.name);
}

static void notify_all(server *srv, worker_flag flags)
{
	for (size_t i = 0; i < srv->nstarted; i++)
		worker_notify(&srv->workers[i], flags);
}

/* ---- accepting ---- */

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *addr,
                      int addrlen, void *arg)
{
	listen_ctx *lc = arg;
	server *srv = lc->srv;
	if (atomic_load(&srv->nconns) >= srv->cfg->max_connections) {
		close(fd);
		log_reason(LOG_WARNING, "NETWORK", LOGID_CONN_REFUSED, NULL,
		           "Connection refused: net.maxConnections (%u) reached",
		           srv->cfg->max_connections);
		return;
	}
	atomic_fetch_add(&srv->nconns, 1);
	worker *w = &srv->workers[srv->next_worker++ % srv->nworkers];
	if (!worker_hand(w, fd, addr, (socklen_t)addrlen, &lc->pl->up, &lc->pl->hello))
		atomic_fetch_sub(&srv->nconns, 1);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	int err = EVUTIL_SOCKET_ERROR();
	/* EMFILE and friends: say so and keep listening; the listener retries
	 * on the next readiness event. */
	log_reason(LOG_ERROR, "NETWORK", LOGID_CONN_REFUSED, NULL, "accept() failed: %s",
	           evutil_socket_error_to_string(err));
}

/* ---- shutdown ---- */

static void grace_cb(evutil_socket_t fd, short what, void *arg)
{
	server *srv = arg;
	log_reason(LOG_WARNING, "CONTROL", LOGID_SHUTDOWN_BEGIN, NULL,
	           "Shutdown grace period (%u ms) over: closing remaining connections",
	           srv->cfg->shutdown_grace_ms);
	notify_all(srv, WORKER_STOP);
	event_base_loopexit(srv->base, NULL);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	server *srv = arg;
	if (srv->shutting_down) {
		log_reason(LOG_WARNING, "CONTROL", LOGID_SHUTDOWN_BEGIN, NULL,
		           "Second signal: closing every connection now");
		notify_all(srv, WORKER_STOP);
		event_base_loopexit(srv->base, NULL);
		return;
	}
	srv->shutting_down = true;
	log_line *l = log_begin(LOG_INFO, "CONTROL", LOGID_SHUTDOWN_BEGIN, NULL,
	                        "Shutting down: no new connections, finishing in-flight requests");
	log_attr_str(l, "signal", strsignal((int)sig));
	log_attr_int(l, "gracePeriodMS", srv->cfg->shutdown_grace_ms);
	log_attr_int(l, "connections", (int64_t)atomic_load(&srv->nconns));
	log_end(l);
	for (size_t i = 0; i < srv->nlisteners; i++)
		evconnlistener_disable(srv->listeners[i].lev);
	notify_all(srv, WORKER_DRAIN);
	uint32_t ms = srv->cfg->shutdown_grace_ms;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	evtimer_add(srv->grace, &tv);
}

/* Ends the main loop once every worker has closed its last session. */
static void poll_done_cb(evutil_socket_t fd, short what, void *arg)
{
	server *srv = arg;
	if (srv->shutting_down && atomic_load(&srv->nconns) == 0)
		event_base_loopexit(srv->base, NULL);
}

static void flush_summaries(server *srv)
{
	snapshot *s = snapshot_slot_get(&srv->config);
	if (s->engine)
		engine_flush_summaries(s->engine);
	snapshot_unref(s);
}

static void summary_cb(evutil_socket_t fd, short what, void *arg)
{
	flush_summaries(arg);
}

/* ---- the index cache's hooks (its own thread) ---- */

static void index_changed(void *arg)
{
	notify_all(arg, WORKER_INDEX_CHANGED);
}

static void index_fetch_failed(void *arg, const char *ns, const char *message)
{
	server *srv = arg;
	if (strstr(message, "requires authentication") || strstr(message, "Unauthorized") ||
	    strstr(message, "not authorized")) {
		/* once, loudly: every sort on every collection is without verdict */
		if (!atomic_exchange(&srv->warned_auth, true))
			log_reason(LOG_ERROR, "ANALYZER", LOGID_METADATA_CLIENT, NULL,
			           "The upstream requires authentication and the index-cache side "
			           "connection %s: index-mismatched-sort gives no verdict until it "
			           "can run listIndexes. Put credentials in upstream.uri or in "
			           "upstream.credentialsFile (least privilege: listIndexes and "
			           "listCollections on the analysed databases)",
			           srv->plan->side_has_credentials ? "was refused"
			                                           : "has no credentials");
	}
	log_line *l =
	    log_begin(LOG_WARNING, "ANALYZER", LOGID_METADATA_CLIENT, NULL,
	              "Cannot list indexes; index-mismatched-sort has no verdict for this "
	              "collection until a retry succeeds");
	log_attr_str(l, "ns", ns);
	log_attr_str(l, "error", message);
	log_end(l);
}

/* ---- start-up ---- */

/* The index cache and the engine, in the first snapshot. */
static bool start_config(server *srv, char *err, size_t errlen)
{
	const mg_config *cfg = srv->cfg;
	engine *e = NULL;
	if (cfg->analysis_enabled) {
		srv->ic = index_cache_new(srv->plan->side_uri, cfg->index_refresh_secs,
		                          index_changed, srv, err, errlen);
		if (!srv->ic)
			return false;
		index_cache_set_error_hook(srv->ic, index_fetch_failed, srv);
		e = engine_new(&cfg->engine, srv->ic, server_log_finding, NULL);
		if (!e) {
			snprintf(err, errlen, "cannot create the rule engine");
			return false;
		}
	}
	snapshot *s = snapshot_new(cfg, e, 1);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	snapshot_slot_init(&srv->config, s);
	return true;
}

/* One listener per plan entry: net.listen and each replica-set member's. */
static bool start_listeners(server *srv, char *err, size_t errlen)
{
	for (size_t i = 0; i < srv->plan->nlisteners; i++) {
		const plan_listener *pl = &srv->plan->listeners[i];
		const net_addr *a = &pl->listen;
		listen_ctx *lc = &srv->listeners[i];
		*lc = (listen_ctx){.srv = srv, .pl = pl};
		lc->lev = evconnlistener_new_bind(
		    srv->base, accept_cb, lc,
		    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 1024,
		    (const struct sockaddr *)&a->ss, (int)a->len);
		if (!lc->lev) {
			snprintf(err, errlen, "cannot listen on %s: %s", a->name, strerror(errno));
			return false;
		}
		srv->nlisteners++;
		evconnlistener_set_error_cb(lc->lev, accept_error_cb);
	}
	return true;
}

static bool start_workers(server *srv, char *err, size_t errlen)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	srv->nworkers = srv->cfg->workers ? srv->cfg->workers : (cores > 0 ? (size_t)cores : 1);
	srv->workers = calloc(srv->nworkers, sizeof(worker));
	if (!srv->workers) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	srv->shared = (worker_shared){.tls = &srv->plan->tls,
	                              .ids = &srv->ids,
	                              .nconns = &srv->nconns,
	                              .config = &srv->config};
	for (size_t i = 0; i < srv->nworkers; i++) {
		worker *w = &srv->workers[i];
		if (!worker_init(w, (int)i, &srv->shared, err, errlen) ||
		    !worker_start(w, err, errlen))
			return false;
		srv->nstarted++;
	}
	return true;
}

static struct event *add_timer(server *srv, event_callback_fn fn, short flags, uint32_t ms)
{
	struct event *ev = event_new(srv->base, -1, flags, fn, srv);
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	if (ev && ms)
		evtimer_add(ev, &tv);
	return ev;
}

static bool start_events(server *srv, char *err, size_t errlen)
{
	srv->sigterm = evsignal_new(srv->base, SIGTERM, signal_cb, srv);
	srv->sigint = evsignal_new(srv->base, SIGINT, signal_cb, srv);
	srv->poll_done = add_timer(srv, poll_done_cb, EV_PERSIST, 50);
	srv->summary =
	    add_timer(srv, summary_cb, EV_PERSIST, srv->cfg->summary_interval_secs * 1000);
	srv->grace = add_timer(srv, grace_cb, 0, 0);
	if (!srv->sigterm || !srv->sigint || !srv->poll_done || !srv->summary || !srv->grace ||
	    evsignal_add(srv->sigterm, NULL) < 0 || evsignal_add(srv->sigint, NULL) < 0) {
		snprintf(err, errlen, "cannot set up signal handlers and timers");
		return false;
	}
	return true;
}

static bool start(server *srv, char *err, size_t errlen)
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
	return start_config(srv, err, errlen) && start_listeners(srv, err, errlen) &&
	       start_workers(srv, err, errlen) &&
	       (!srv->ic || index_cache_start(srv->ic, err, errlen)) &&
	       start_events(srv, err, errlen);
}

/* ---- teardown: whatever start() got to ---- */

static void stop(server *srv)
{
	notify_all(srv, WORKER_STOP);
	for (size_t i = 0; i < srv->nstarted; i++)
		worker_join(&srv->workers[i]);
	free(srv->workers);
	if (srv->config.current) {
		flush_summaries(srv); /* the repeats counted since the last timer */
		snapshot_slot_destroy(&srv->config);
	}
	struct event *evs[] = {srv->sigterm, srv->sigint, srv->poll_done, srv->summary, srv->grace};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i])
			event_free(evs[i]);
	for (size_t i = 0; i < srv->nlisteners; i++)
		evconnlistener_free(srv->listeners[i].lev);
	if (srv->ic)
		index_cache_free(srv->ic);
	if (srv->base)
		event_base_free(srv->base);
}

bool server_run(const server_plan *p, char *err, size_t errlen)
{
	server *srv = calloc(1, sizeof(*srv));
	if (!srv) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	srv->plan = p;
	srv->cfg = p->cfg;
	atomic_init(&srv->ids.next_conn, 1);
	bool ok = start(srv, err, errlen);
	if (ok) {
		log_line *l = log_begin(LOG_INFO, "NETWORK", LOGID_LISTENING, NULL,
		                        "Waiting for connections");
		log_attr_str(l, "listen", p->listeners[0].listen.name);
		log_attr_str(l, "upstream", p->listeners[0].up.name);
		log_attr_int(l, "workers", (int64_t)srv->nworkers);
		log_attr_bool(l, "analysis", srv->ic != NULL);
		log_attr_str(l, "tlsMode", tls_mode_name(p->tls.mode));
		log_attr_bool(l, "upstreamTLS", p->tls.upstream != NULL);
		log_end(l);
		log_plan(p);
		event_base_dispatch(srv->base);
		/* Either every connection finished or the grace period ran out. */
	}
	stop(srv);
	if (ok)
		log_reason(LOG_INFO, "CONTROL", LOGID_SHUTDOWN_DONE, NULL, "Shutdown complete");
	free(srv);
	return ok;
}
