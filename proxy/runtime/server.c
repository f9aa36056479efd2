/* The main thread: accepting, handing each connection to a worker, signals,
 * timers, start-up and teardown. Workers hear from it only through
 * worker_hand() and worker_notify(). */
#include "proxy/runtime/server.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyzers/catalog/index_cache.h"
#include "analyzers/rules/rules.h"
#include "proxy/admin/admin.h"
#include "proxy/admin/config_json.h"
#include "proxy/admin/metrics.h"
#include "proxy/net/resolver.h"
#include "proxy/net/srv.h"
#include "proxy/sinks/capture.h"
#include "proxy/sinks/finding_log.h"
#include "proxy/sinks/log.h"
#include "proxy/stats/workload_json.h"
#include "proxy/runtime/cpus.h"
#include "proxy/runtime/clock.h"
#include "proxy/runtime/restart_only.h"
#include "proxy/runtime/sd_notify.h"
#include "proxy/runtime/rotate.h"
#include "proxy/runtime/snapshot.h"
#include "proxy/runtime/upstream_watch.h"
#include "proxy/runtime/worker.h"

#ifndef MG_VERSION
#define MG_VERSION "0.0.0"
#endif

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
	index_cache *ic;       /* NULL when analysis is disabled */
	capture_sink *capture; /* NULL unless capture.dir is set */
	session_ids ids;
	atomic_uint nconns;
	atomic_bool warned_auth; /* the side connection's missing credentials, said once */
	worker_shared shared;
	worker *workers;
	size_t nworkers, nstarted, next_worker;
	cpus_usable cpus; /* what `workers: 0` starts (cpus.h) */
	metrics *metrics;
	mongo_sink *fleet;  /* sinks.mongodb, or NULL */
	routes_slot routes; /* each listener's upstream server, as DNS last said */
	bool routes_init;
	resolver *resolver;
	finding_sink *findings;
	upstream_watch *watch; /* "Upstream reachable/unreachable", and /readyz */
	admin *admin;
	pthread_mutex_t reload_lock; /* SIGHUP (main thread) and POST /reload (admin) */
	unsigned generation;         /* of the snapshot in force; under reload_lock */
	struct event *sighup;
	struct event *sigusr1;      /* rotate the log, start a new capture file */
	struct event *accept_retry; /* resumes accepting after a pause */
	struct event *fds_out;      /* activated by workers out of descriptors */
	uint32_t accept_backoff_ms; /* 0 while accepting works */
	int64_t accept_quiet_at;    /* after a pause: accepting counts as working from here */
	bool accept_paused;
	bool accept_recovering; /* paused since the last accept: the next one is logged */

	struct event_base *base;
	listen_ctx listeners[PLAN_MAX_LISTENERS];
	size_t nlisteners;
	struct event *sigterm, *sigint, *poll_done, *summary, *grace;
	bool shutting_down;
	/* The index cache's hooks run on its thread, which lives until
	 * index_cache_free joins it: stop() turns them off under hooks_lock
	 * before the workers and metrics they touch are freed. */
	pthread_mutex_t hooks_lock;
	bool hooks_off;
	bool ic_abandoned; /* its thread outlived stop(): see stop() */
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

static bool plan_add(server_plan *p, const char *listen, const char *member, char *err,
                     size_t errlen)
{
	plan_listener *l = &p->listeners[p->nlisteners];
	if (!net_parse_listen(listen, &l->listen, err, errlen))
		return false;
	advertise_name(listen, l->advertise, sizeof(l->advertise));
	routes_spec *sp = &p->spec;
	snprintf(sp->l[sp->n].advertise, sizeof(sp->l[sp->n].advertise), "%s", l->advertise);
	snprintf(sp->l[sp->n].listen, sizeof(sp->l[sp->n].listen), "%s", listen);
	snprintf(sp->l[sp->n].member, sizeof(sp->l[sp->n].member), "%s", member);
	sp->n++;
	p->nlisteners++;
	return true;
}

/* The side connection's URI: routes->uri, its hosts as addresses when
 * mongoguard has its own name server (libmongoc would ask the system's),
 * then the credentials file. */
static bool plan_side_uri(server_plan *p, const mg_config *cfg, char *err, size_t errlen)
{
	const upstream_routes *r = p->routes;
	char base[4096], hosts[2048] = "";
	snprintf(base, sizeof(base), "%s", r->uri);
	bool by_address = cfg->dns_server[0] != '\0';
	for (size_t i = 0; i < r->nhosts; i++)
		by_address &= !r->hosts[i].unix_socket; /* a socket path needs no DNS */
	if (by_address) {
		size_t used = 0;
		for (size_t i = 0; i < r->nhosts; i++) {
			upstream_target t;
			char a[80];
			if (!upstream_lookup(&r->hosts[i], cfg->dns_server, &t, err, errlen))
				return false;
			net_format_addr((const struct sockaddr *)&t.ss, a, sizeof(a));
			used += (size_t)snprintf(hosts + used, sizeof(hosts) - used, "%s%s",
			                         i ? "," : "", a);
		}
		if (hosts[0] && !srv_with_hosts(r->uri, hosts, base, sizeof(base))) {
			snprintf(err, errlen, "upstream URI too long once resolved");
			return false;
		}
	}
	return upstream_side_uri(base, cfg->credentials_file, p->side_uri, sizeof(p->side_uri),
	                         &p->side_has_credentials, err, errlen);
}

bool server_plan_make(server_plan *p, const mg_config *cfg, char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	p->cfg = cfg;
	snprintf(p->spec.uri, sizeof(p->spec.uri), "%s", cfg->upstream_uri);
	snprintf(p->spec.dns_server, sizeof(p->spec.dns_server), "%s", cfg->dns_server);
	/* net.listen pairs with the URI's first host unless a member claims it */
	const char *l0 = "";
	for (size_t i = 0; i < cfg->nmembers; i++)
		if (!strcmp(cfg->members[i].listen, cfg->listen))
			l0 = cfg->members[i].host;
	if (!plan_add(p, cfg->listen, l0, err, errlen))
		return false;
	for (size_t i = 0; i < cfg->nmembers; i++)
		if (strcmp(cfg->members[i].listen, cfg->listen) &&
		    !plan_add(p, cfg->members[i].listen, cfg->members[i].host, err, errlen))
			return false;
	p->routes = routes_resolve(&p->spec, NULL, err, errlen);
	if (!p->routes)
		return false;
	p->uri = p->routes->info;
	for (size_t i = 0; i < p->nlisteners; i++)
		p->listeners[i].up = p->routes->target[i];
	if (!plan_side_uri(p, cfg, err, errlen) ||
	    !tls_build(&p->tls, &cfg->tls, &p->uri.tls, err, errlen))
		return false;
	p->admin = cfg->admin_listen[0] != '\0';
	if (p->admin && !net_parse_listen(cfg->admin_listen, &p->admin_listen, err, errlen))
		return false;
	if (cfg->admin_token_file[0] && !admin_read_token(cfg->admin_token_file, p->admin_token,
	                                                  sizeof(p->admin_token), err, errlen))
		return false;
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
	if (p->routes->srv) {
		routes_log_change(&p->spec, NULL, p->routes, NULL);
		return;
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
	/* the first connection accepted after a pause says so; the back-off
	 * starts afresh only after a quiet spell (pause_accepting) */
	if (srv->accept_recovering && !srv->accept_paused) {
		srv->accept_recovering = false;
		log_reason(LOG_INFO, "NETWORK", LOGID_LISTENING, NULL,
		           "Accepting connections again");
	}
	if (srv->accept_backoff_ms && !srv->accept_paused && mg_now_ms() > srv->accept_quiet_at)
		srv->accept_backoff_ms = 0;
	if (atomic_load(&srv->nconns) >= srv->cfg->max_connections) {
		close(fd);
		mx_add_shared(&srv->metrics->refused, 1);
		log_reason(LOG_WARNING, "NETWORK", LOGID_CONN_REFUSED, NULL,
		           "Connection refused: net.maxConnections (%u) reached",
		           srv->cfg->max_connections);
		return;
	}
	atomic_fetch_add(&srv->nconns, 1);
	worker *w = &srv->workers[srv->next_worker++ % srv->nworkers];
	/* the session keeps this answer for its life; the worker drops it */
	upstream_routes *r = routes_slot_get(&srv->routes);
	if (!worker_hand(w, fd, addr, (socklen_t)addrlen, r, (size_t)(lc - srv->listeners))) {
		atomic_fetch_sub(&srv->nconns, 1);
		mx_add_shared(&srv->metrics->refused, 1);
	}
}

/* Out of descriptors (or kernel memory), accept() fails while the
 * listening socket stays readable: listening on would spin. So the
 * listeners pause, 50 ms doubling to 1 s while it goes on, and resume on
 * a timer; the clients waiting meanwhile sit in the kernel's backlog. */
enum { ACCEPT_BACKOFF_MIN_MS = 50, ACCEPT_BACKOFF_MAX_MS = 1000 };
enum { IC_STOP_WAIT_MS = 1000 }; /* see stop() */

static void set_listening(server *srv, bool on)
{
	for (size_t i = 0; i < srv->nlisteners; i++)
		(on ? evconnlistener_enable : evconnlistener_disable)(srv->listeners[i].lev);
}

static void accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	server *srv = arg;
	srv->accept_paused = false;
	srv->accept_quiet_at = mg_now_ms() + 2 * (int64_t)srv->accept_backoff_ms;
	if (!srv->shutting_down)
		set_listening(srv, true);
}

static void pause_accepting(server *srv, int err)
{
	if (srv->accept_paused)
		return;
	/* a pause soon after the last one continues it: the back-off grows */
	bool first = srv->accept_backoff_ms == 0 || mg_now_ms() > srv->accept_quiet_at;
	srv->accept_backoff_ms = first ? ACCEPT_BACKOFF_MIN_MS
	                         : srv->accept_backoff_ms * 2 > ACCEPT_BACKOFF_MAX_MS
	                             ? ACCEPT_BACKOFF_MAX_MS
	                             : srv->accept_backoff_ms * 2;
	srv->accept_paused = true;
	srv->accept_recovering = true;
	set_listening(srv, false);
	mx_add_shared(&srv->metrics->accept_pauses, 1);
	log_line *ln = log_begin(first ? LOG_WARNING : LOG_DEBUG, "NETWORK", LOGID_CONN_REFUSED,
	                         NULL, "Cannot accept connections; pausing accepts");
	log_attr_str(ln, "error", evutil_socket_error_to_string(err));
	log_attr_int(ln, "retryInMS", srv->accept_backoff_ms);
	log_attr_int(ln, "connections", (int64_t)atomic_load(&srv->nconns));
	log_end(ln);
	struct timeval tv = {0, (suseconds_t)srv->accept_backoff_ms * 1000};
	evtimer_add(srv->accept_retry, &tv);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	listen_ctx *lc = arg;
	int err = EVUTIL_SOCKET_ERROR();
	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM) {
		/* one connection's trouble (e.g. it was reset while queued) */
		log_reason(LOG_WARNING, "NETWORK", LOGID_CONN_REFUSED, NULL, "accept() failed: %s",
		           evutil_socket_error_to_string(err));
		return;
	}
	pause_accepting(lc->srv, err);
}

/* A session could not open its upstream socket for want of descriptors:
 * the accept itself worked, so accepting more would only close more. */
static void fds_out_cb(evutil_socket_t fd, short what, void *arg)
{
	pause_accepting(arg, EMFILE);
}

/* From a worker thread: wake the main loop to pause. */
static void out_of_fds(void *arg)
{
	server *srv = arg;
	event_active(srv->fds_out, 0, 0);
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
	sd_notify_send("STOPPING=1");
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
	struct timeval poll = {0, 50 * 1000};
	evtimer_add(srv->poll_done, &poll);
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
	server *srv = arg;
	pthread_mutex_lock(&srv->hooks_lock);
	if (!srv->hooks_off) {
		mx_add_shared(&srv->metrics->index_lists_learned, 1);
		notify_all(srv, WORKER_INDEX_CHANGED);
	}
	pthread_mutex_unlock(&srv->hooks_lock);
}

static void index_fetch_failed(void *arg, const char *ns, const char *message)
{
	server *srv = arg;
	pthread_mutex_lock(&srv->hooks_lock);
	if (srv->hooks_off) {
		pthread_mutex_unlock(&srv->hooks_lock);
		return; /* a fetch that ended during shutdown: nobody is waiting */
	}
	mx_add_shared(&srv->metrics->index_fetch_failures, 1);
	/* The rules that read index lists, named from the rule table. */
	char rules[160] = "";
	for (int r = 0, used = 0; r < RULE_COUNT; r++)
		if (rule_table[r]->needs_indexes && used < (int)sizeof rules)
			used += snprintf(rules + used, sizeof rules - (size_t)used, "%s%s",
			                 used ? ", " : "", rule_name((rule_id)r));
	if (strstr(message, "requires authentication") || strstr(message, "Unauthorized") ||
	    strstr(message, "not authorized")) {
		/* once, loudly: every sort on every collection is without verdict */
		if (!atomic_exchange(&srv->warned_auth, true))
			log_reason(
			    LOG_ERROR, "ANALYZER", LOGID_METADATA_CLIENT, NULL,
			    "The upstream requires authentication and the index-cache side "
			    "connection %s: %s give no verdict until it can run listIndexes. "
			    "Put credentials in upstream.uri or in upstream.credentialsFile "
			    "(least privilege: listIndexes and listCollections on the analysed "
			    "databases)",
			    srv->plan->side_has_credentials ? "was refused" : "has no credentials",
			    rules);
	}
	log_line *l = log_begin(LOG_WARNING, "ANALYZER", LOGID_METADATA_CLIENT, NULL,
	                        "Cannot list indexes; the rules that read them give no verdict "
	                        "for this collection until a retry succeeds");
	log_attr_str(l, "rules", rules);
	log_attr_str(l, "ns", ns);
	log_attr_str(l, "error", message);
	log_end(l);
	pthread_mutex_unlock(&srv->hooks_lock);
}

/* ---- reload ---- */

/* Names each restart-only setting (restart_only.h) that the file changed,
 * in the log and in waiting ("net.listen, workers"; "" for none), which
 * POST /reload answers with. */
static void warn_restart_only(const mg_config *was, const mg_config *now, char *waiting,
                              size_t size)
{
	size_t used = 0;
	waiting[0] = '\0';
	for (size_t i = 0; i < restart_only_count(); i++)
		if (restart_only_changed(i, was, now)) {
			log_reason(LOG_WARNING, "CONTROL", LOGID_RELOAD, NULL,
			           "Reload: %s changed, but takes effect only after a restart; "
			           "the running value stays",
			           restart_only_key(i));
			int n = snprintf(waiting + used, size - used, "%s%s", used ? ", " : "",
			                 restart_only_key(i));
			if (n > 0 && (size_t)n < size - used)
				used += (size_t)n;
		}
}

static void log_reloaded(const mg_config *cfg, unsigned generation, const char *source)
{
	log_line *l = log_begin(LOG_INFO, "CONTROL", LOGID_RELOAD, NULL, "Configuration reloaded");
	log_attr_str(l, "source", source);
	log_attr_int(l, "generation", generation);
	for (int r = 0; r < RULE_COUNT; r++)
		log_attr_str(l, rule_name((rule_id)r),
		             rule_action_name(cfg->engine.rules[r].action));
	log_attr_bool(l, "redactLiterals", cfg->engine.redact_literals);
	log_end(l);
}

/* Re-reads the configuration and publishes it as a new snapshot; workers
 * move to it between events, requests already analysed keep their verdict,
 * and "Configuration reloaded" is logged (and POST /reload answered) once
 * every worker has moved. A file that does not load changes nothing. Any
 * thread. On success, err
 * holds the changed settings that wait for a restart ("" for none); on
 * failure, why. */
static bool server_reload(server *srv, const char *source, char *err, size_t errlen)
{
	sd_notify_send("RELOADING=1");
	const server_plan *p = srv->plan;
	mg_config *next = malloc(sizeof(*next));
	snapshot *running = snapshot_slot_get(&srv->config);
	bool ok = next && p->load && p->load(p->load_arg, next, err, errlen);
	if (!next)
		snprintf(err, errlen, "out of memory");
	else if (!p->load)
		snprintf(err, errlen, "there is no configuration file to reload");
	char waiting[512] = "";
	unsigned generation = 0;
	if (ok) {
		warn_restart_only(&running->cfg, next, waiting, sizeof waiting);
		restart_only_keep(next, &running->cfg);
		engine *e = NULL;
		net_tls tls = {0};
		/* certificate and key files are read again here */
		if (!tls_build(&tls, &next->tls, &p->uri.tls, err, errlen)) {
			ok = false;
		} else if (srv->ic && !(e = engine_new(&next->engine, srv->ic, server_log_finding,
		                                       srv->findings))) {
			snprintf(err, errlen, "cannot create the rule engine");
			tls_free(&tls);
			ok = false;
		}
		if (e)
			engine_set_tally(e, server_count_finding, srv->findings);
		pthread_mutex_lock(&srv->reload_lock);
		snapshot *s = ok ? snapshot_new(next, e, &tls, srv->generation + 1) : NULL;
		if (s) {
			generation = ++srv->generation;
			snapshot_slot_publish(&srv->config, s);
			log_set_max(next->log_verbosity ? LOG_DEBUG : LOG_INFO);
			log_set_format(next->log_fmt);
		} else if (ok) {
			snprintf(err, errlen, "out of memory");
			ok = false;
		}
		pthread_mutex_unlock(&srv->reload_lock);
	}
	if (ok) {
		notify_all(srv, WORKER_CONFIG_CHANGED);
		/* Each worker moves between two events. The line says the new
		 * rules are in force, so it waits until every worker has moved: a
		 * request read after it is judged by them. A sync query is
		 * answered after the flags set before it (at most 2 s a worker:
		 * one that does not answer by then moves when it next runs). */
		for (size_t i = 0; i < srv->nstarted; i++) {
			worker_query q = {.kind = WORKER_SYNC};
			if (!worker_ask(&srv->workers[i], &q, 2000))
				continue; /* logged as reloaded anyway */
		}
		log_reloaded(next, generation, source);
		mx_add_shared(&srv->metrics->reloads_ok, 1);
		snprintf(err, errlen, "%s", waiting);
	} else {
		mx_add_shared(&srv->metrics->reloads_failed, 1);
		log_line *l = log_begin(LOG_ERROR, "CONTROL", LOGID_RELOAD_FAILED, NULL,
		                        "Reload refused; the running configuration stays");
		log_attr_str(l, "source", source);
		log_attr_str(l, "file", p->config_path ? p->config_path : "");
		log_attr_str(l, "error", err);
		log_end(l);
	}
	snapshot_unref(running);
	free(next);
	sd_notify_send("READY=1");
	return ok;
}

static void sighup_cb(evutil_socket_t sig, short what, void *arg)
{
	char err[1024];
	(void)server_reload(arg, "SIGHUP", err, sizeof(err));
}

/* log.rotate is read from the snapshot in force: a reload changes it. */
static void sigusr1_cb(evutil_socket_t sig, short what, void *arg)
{
	server *srv = arg;
	snapshot *s = snapshot_slot_get(&srv->config);
	rotate_logs(s->cfg.log_rot, srv->capture);
	snapshot_unref(s);
}

static bool admin_reload(void *arg, char *err, size_t errlen)
{
	return server_reload(arg, "POST /reload", err, errlen);
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
		e = engine_new(&cfg->engine, srv->ic, server_log_finding, srv->findings);
		if (!e) {
			snprintf(err, errlen, "cannot create the rule engine");
			return false;
		}
		engine_set_tally(e, server_count_finding, srv->findings);
	}
	srv->generation = 1;
	/* the plan's TLS contexts (built to check the config) are the first
	 * snapshot's from here on */
	snapshot *s = snapshot_new(cfg, e, &srv->plan->tls, srv->generation);
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	snapshot_slot_init(&srv->config, s);
	return true;
}

/* The capture writer, when capture.dir is set: its header records the
 * rules in force, so the report can rerun them with the same parameters. */
static bool start_capture(server *srv, char *err, size_t errlen)
{
	const mg_config *cfg = srv->cfg;
	if (!cfg->capture.dir[0])
		return true;
	bson_t rules = BSON_INITIALIZER;
	for (int r = 0; r < RULE_COUNT; r++) {
		const rule_def *d = rule_table[r];
		bson_t rd;
		bson_append_document_begin(&rules, d->name, -1, &rd);
		BSON_APPEND_UTF8(&rd, "action", rule_action_name(cfg->engine.rules[r].action));
		for (size_t i = 0; i < d->nparams; i++)
			BSON_APPEND_INT64(&rd, d->params[i].name,
			                  cfg->engine.rules[r].params[d->params[i].slot]);
		bson_append_document_end(&rules, &rd);
	}
	srv->capture = capture_sink_new(&cfg->capture, MG_VERSION, &rules, srv->ic, err, errlen);
	bson_destroy(&rules);
	return srv->capture && capture_sink_start(srv->capture, err, errlen);
}

/* What the resolver watches to re-resolve soon after connecting fails. */
static uint64_t connect_failures(void *arg)
{
	const metrics *m = arg;
	uint64_t n = 0;
	for (size_t i = 0; i < m->nshards; i++)
		n += atomic_load_explicit(&m->shards[i].upstream_connect_failures,
		                          memory_order_relaxed);
	return n;
}

/* The routes in force (the plan's first answer), and the thread that
 * re-resolves them. */
static bool start_routes(server *srv, char *err, size_t errlen)
{
	routes_slot_init(&srv->routes, routes_ref(srv->plan->routes));
	srv->routes_init = true;
	srv->resolver = resolver_start(&srv->plan->spec, &srv->routes, srv->cfg->dns_refresh_secs,
	                               connect_failures, srv->metrics, err, errlen);
	return srv->resolver != NULL;
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
	srv->workers = calloc(srv->nworkers, sizeof(worker));
	if (!srv->workers) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	srv->shared = (worker_shared){.ids = &srv->ids,
	                              .nconns = &srv->nconns,
	                              .config = &srv->config,
	                              .metrics = srv->metrics,
	                              .capture = srv->capture,
	                              .out_of_fds = out_of_fds,
	                              .out_of_fds_arg = srv};
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
	srv->sighup = evsignal_new(srv->base, SIGHUP, sighup_cb, srv);
	srv->sigusr1 = evsignal_new(srv->base, SIGUSR1, sigusr1_cb, srv);
	/* armed when a shutdown begins: an idle process does not wake for it */
	srv->poll_done = add_timer(srv, poll_done_cb, EV_PERSIST, 0);
	srv->summary =
	    add_timer(srv, summary_cb, EV_PERSIST, srv->cfg->summary_interval_secs * 1000);
	srv->grace = add_timer(srv, grace_cb, 0, 0);
	srv->accept_retry = add_timer(srv, accept_retry_cb, 0, 0);
	srv->fds_out = add_timer(srv, fds_out_cb, 0, 0);
	if (!srv->sigterm || !srv->sigint || !srv->sighup || !srv->sigusr1 || !srv->poll_done ||
	    !srv->summary || !srv->grace || !srv->accept_retry || !srv->fds_out ||
	    evsignal_add(srv->sigterm, NULL) < 0 || evsignal_add(srv->sigint, NULL) < 0 ||
	    evsignal_add(srv->sighup, NULL) < 0 || evsignal_add(srv->sigusr1, NULL) < 0) {
		snprintf(err, errlen, "cannot set up signal handlers and timers");
		return false;
	}
	return true;
}

/* instanceName, or "host:port" of this machine and the listen port. */
static void instance_name(const server *srv, char *out, size_t size)
{
	if (srv->cfg->instance_name[0]) {
		snprintf(out, size, "%s", srv->cfg->instance_name);
		return;
	}
	char host[256] = "localhost";
	gethostname(host, sizeof(host) - 1);
	const char *port = strrchr(srv->cfg->listen, ':');
	snprintf(out, size, "%s%s", host, port ? port : "");
}

/* The counters, and the findings sinks that feed some of them. */
static bool start_metrics(server *srv, char *err, size_t errlen)
{
	srv->cpus = cpus_usable_now();
	srv->nworkers = srv->cfg->workers ? srv->cfg->workers : srv->cpus.n;
	srv->metrics = metrics_new(srv->nworkers, &srv->nconns, srv->plan->version);
	if (srv->metrics && srv->cfg->sink_mongodb.uri[0]) {
		char instance[300];
		instance_name(srv, instance, sizeof(instance));
		srv->fleet =
		    mongo_sink_start(&srv->cfg->sink_mongodb, instance, srv->metrics, err, errlen);
		if (!srv->fleet)
			return false;
	}
	srv->findings = srv->metrics
	                    ? finding_sink_new(srv->metrics, srv->fleet, srv->cfg->findings_ring)
	                    : NULL;
	if (!srv->findings) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	return true;
}

static void admin_findings(void *arg, const admin_filter *f, text_buf *out)
{
	server *srv = arg;
	finding_query q = {f->rule, f->ns, f->app, f->since, f->limit};
	finding_sink_recent_json(srv->findings, &q, out);
}

static bool admin_ready(void *arg, char *why, size_t whylen)
{
	server *srv = arg;
	return upstream_watch_probe(srv->watch, why, whylen);
}

/* The first listener's server in the routes in force: what a session
 * accepted now would be paired with (DNS may have moved it since start-up). */
static void watch_target(void *arg, net_addr *up)
{
	server *srv = arg;
	upstream_routes *r = routes_slot_get(&srv->routes);
	*up = r->target[0];
	routes_unref(r);
}

static uint64_t watch_failures(void *arg)
{
	server *srv = arg;
	return connect_failures(srv->metrics);
}

/* The upstream's reachability, in the log from start-up on. */
static bool start_watch(server *srv, char *err, size_t errlen)
{
	upstream_watch_sources src = {
	    .target = watch_target, .failures = watch_failures, .arg = srv};
	srv->watch = upstream_watch_start(&src, err, errlen);
	return srv->watch != NULL;
}

static void admin_config(void *arg, text_buf *out)
{
	server *srv = arg;
	snapshot *s = snapshot_slot_get(&srv->config);
	config_json(&s->cfg, (unsigned)srv->nworkers, out);
	snapshot_unref(s);
}

/* Each worker is asked in turn, on its own thread (worker_ask); a worker
 * that does not answer within a second (it has stopped) is left out. */
static void admin_connections(void *arg, text_buf *out)
{
	server *srv = arg;
	worker_query q = {.kind = WORKER_LIST, .out = out};
	text_str(out, "[");
	for (size_t i = 0; i < srv->nworkers; i++)
		(void)!worker_ask(&srv->workers[i], &q, 1000); /* a stopped worker lists none */
	text_str(out, "]");
}

static bool admin_workload(void *arg, const wl_query *q, text_buf *out)
{
	server *srv = arg;
	size_t n;
	workload **tabs = workers_workload(srv->workers, srv->nworkers, &srv->cfg->workload, &n);
	if (!tabs)
		return false;
	workload_json((const workload *const *)tabs, n, q, mg_now_ns(), out);
	workers_workload_free(tabs, n);
	return true;
}

static void admin_workload_metrics(void *arg, text_buf *out)
{
	server *srv = arg;
	size_t n;
	workload **tabs = workers_workload(srv->workers, srv->nworkers, &srv->cfg->workload, &n);
	if (tabs)
		workload_prometheus((const workload *const *)tabs, n,
		                    srv->cfg->workload.metrics_collections, out);
	workers_workload_free(tabs, n);
}

static bool admin_close_connection(void *arg, uint64_t id)
{
	server *srv = arg;
	for (size_t i = 0; i < srv->nworkers; i++) {
		worker_query q = {.kind = WORKER_CLOSE, .conn = id};
		if (worker_ask(&srv->workers[i], &q, 1000) && q.found)
			return true;
	}
	return false;
}

static bool start_admin(server *srv, char *err, size_t errlen)
{
	const server_plan *p = srv->plan;
	if (!p->admin)
		return true;
	admin_sources src = {.metrics = srv->metrics,
	                     .ready = admin_ready,
	                     .findings_json = admin_findings,
	                     .config_json = admin_config,
	                     .reload = admin_reload,
	                     .connections_json = admin_connections,
	                     .close_connection = admin_close_connection,
	                     .workload_json = admin_workload,
	                     .workload_metrics = admin_workload_metrics,
	                     .arg = srv};
	srv->admin = admin_start(&p->admin_listen, p->admin_token[0] ? p->admin_token : NULL, &src,
	                         err, errlen);
	return srv->admin != NULL;
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
	/* The listeners go in last: once the port accepts, everything else is
	 * up. A supervisor (or the test suite) that waits for the port may then
	 * send SIGHUP or SIGTERM (with no handler yet, that killed the process)
	 * or ask the admin endpoint (refused, not yet bound): both seen under
	 * TSan, where start-up is slow. Accepting waits for the loop anyway. */
	return start_metrics(srv, err, errlen) && start_config(srv, err, errlen) &&
	       start_capture(srv, err, errlen) && start_routes(srv, err, errlen) &&
	       start_events(srv, err, errlen) && start_workers(srv, err, errlen) &&
	       (!srv->ic || index_cache_start(srv->ic, err, errlen)) &&
	       start_watch(srv, err, errlen) && start_admin(srv, err, errlen) &&
	       start_listeners(srv, err, errlen);
}

/* ---- teardown: whatever start() got to ---- */

static void stop(server *srv)
{
	/* a listIndexes still on the wire (a silent upstream holds it for the
	 * side connection's socket timeout) must not land in freed workers */
	pthread_mutex_lock(&srv->hooks_lock);
	srv->hooks_off = true;
	pthread_mutex_unlock(&srv->hooks_lock);
	admin_stop(srv->admin);          /* it reads the snapshot and the counters */
	upstream_watch_stop(srv->watch); /* it reads the counters and the routes */
	/* Before the workers stop: the cache's thread tells them about new
	 * index lists (index_changed) until it is joined. A listIndexes the
	 * upstream never answers holds it for the side connection's socket
	 * timeout (10 s); shutdown waits IC_STOP_WAIT_MS for it, then leaves it
	 * running: the cache is not freed and server_run ends the process with
	 * _exit, so no exit handler frees what the thread still uses. */
	srv->ic_abandoned = !index_cache_stop(srv->ic, IC_STOP_WAIT_MS);
	if (srv->ic_abandoned)
		log_reason(LOG_WARNING, "CONTROL", LOGID_SHUTDOWN_DONE, NULL,
		           "The index cache's request to the upstream has not returned after "
		           "%d ms; exiting without waiting for it",
		           IC_STOP_WAIT_MS);
	notify_all(srv, WORKER_STOP);
	for (size_t i = 0; i < srv->nstarted; i++)
		worker_join(&srv->workers[i]);
	free(srv->workers);
	resolver_stop(srv->resolver);
	if (srv->routes_init)
		routes_slot_destroy(&srv->routes); /* the sessions' references went with them */
	if (srv->config.s.current) {
		flush_summaries(srv); /* the repeats counted since the last timer */
		snapshot_slot_destroy(&srv->config);
	}
	mongo_sink_stop(srv->fleet); /* after the last summaries reached it */
	struct event *evs[] = {srv->sigterm, srv->sigint,       srv->sighup,
	                       srv->sigusr1, srv->poll_done,    srv->summary,
	                       srv->grace,   srv->accept_retry, srv->fds_out};
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i])
			event_free(evs[i]);
	for (size_t i = 0; i < srv->nlisteners; i++)
		evconnlistener_free(srv->listeners[i].lev);
	capture_sink_free(srv->capture, NULL); /* after the workers: nothing enqueues now */
	if (!srv->ic_abandoned)
		index_cache_free(srv->ic);
	finding_sink_free(srv->findings);
	metrics_free(srv->metrics);
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
	pthread_mutex_init(&srv->reload_lock, NULL);
	pthread_mutex_init(&srv->hooks_lock, NULL);
	atomic_init(&srv->ids.next_conn, 1);
	bool ok = start(srv, err, errlen);
	if (ok) {
		log_line *l = log_begin(LOG_INFO, "NETWORK", LOGID_LISTENING, NULL,
		                        "Waiting for connections");
		log_attr_str(l, "listen", p->listeners[0].listen.name);
		log_attr_str(l, "upstream", p->listeners[0].up.name);
		log_attr_int(l, "workers", (int64_t)srv->nworkers);
		log_attr_int(l, "cpusUsable", (int64_t)srv->cpus.n); /* what workers: 0 starts */
		log_attr_int(l, "cpuAffinity", (int64_t)srv->cpus.affinity);
		log_attr_int(l, "cpuQuota", (int64_t)srv->cpus.quota);
		log_attr_bool(l, "analysis", srv->ic != NULL);
		log_attr_str(l, "tlsMode", tls_mode_name(p->tls.mode));
		log_attr_bool(l, "upstreamTLS", p->tls.upstream != NULL);
		log_end(l);
		log_plan(p);
		/* Listening and serving: systemd's Type=notify counts it up now. */
		sd_notify_send("READY=1\nSTATUS=Waiting for connections");
		event_base_dispatch(srv->base);
		/* Either every connection finished or the grace period ran out. */
	}
	stop(srv);
	if (ok)
		log_reason(LOG_INFO, "CONTROL", LOGID_SHUTDOWN_DONE, NULL, "Shutdown complete");
	if (srv->ic_abandoned) {
		log_close(); /* the thread still reads srv's hooks_lock: keep srv */
		_exit(ok ? 0 : 1);
	}
	pthread_mutex_destroy(&srv->reload_lock);
	pthread_mutex_destroy(&srv->hooks_lock);
	free(srv);
	return ok;
}
