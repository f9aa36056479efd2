/* Worker threads (see worker.h). */
#include "proxy/runtime/worker.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "analyzers/catalog/index_cache.h"
#include "proxy/runtime/clock.h"
#include "proxy/session/late.h"
#include "proxy/session/transport.h"
#include "proxy/stats/workload.h"
#include "proxy/sinks/log.h"

enum { MAINTENANCE_MS = 1000 };

/* A session ended: off the list, and one connection fewer. */
static void session_closed(void *owner, void *token)
{
	worker *w = owner;
	session_node *n = token;
	if (n->prev)
		n->prev->next = n->next;
	else
		w->sessions = n->next;
	if (n->next)
		n->next->prev = n->prev;
	w->nsessions--;
	routes_unref(n->routes);
	free(n);
	atomic_fetch_sub(w->shared->nconns, 1);
	if (atomic_load(&w->draining) && w->nsessions == 0)
		event_base_loopexit(w->base, NULL);
}

static void out_of_fds(void *owner)
{
	worker *w = owner;
	if (w->shared->out_of_fds)
		w->shared->out_of_fds(w->shared->out_of_fds_arg);
}

static void start_session(worker *w, const accepted_conn *c)
{
	session_node *n = calloc(1, sizeof(*n));
	if (!n) {
		close(c->fd);
		routes_unref(c->routes);
		atomic_fetch_sub(w->shared->nconns, 1);
		log_reason(LOG_ERROR, "NETWORK", LOGID_CONN_REFUSED, NULL,
		           "Out of memory accepting a connection");
		return;
	}
	/* On the list before the session starts: a session that fails at
	 * once calls session_closed, which unlinks it. */
	n->next = w->sessions;
	if (w->sessions)
		w->sessions->prev = n;
	w->sessions = n;
	w->nsessions++;
	n->routes = c->routes;
	session_env env = w->env;
	env.up = &c->routes->target[c->listener];
	env.hello = &c->routes->hello[c->listener];
	n->s = session_start(&env, c->fd, (const struct sockaddr *)&c->addr, c->addrlen, n);
}

static void take_inbox(worker *w)
{
	pthread_mutex_lock(&w->lock);
	accepted_conn *batch = w->inbox;
	size_t n = w->ninbox;
	w->inbox = NULL;
	w->ninbox = w->capinbox = 0;
	pthread_mutex_unlock(&w->lock);
	for (size_t i = 0; i < n; i++) {
		if (atomic_load(&w->draining)) {
			close(batch[i].fd);
			routes_unref(batch[i].routes);
			atomic_fetch_sub(w->shared->nconns, 1);
			continue;
		}
		start_session(w, &batch[i]);
	}
	free(batch);
}

/* Calls fn on every session; fn may end (and unlink) the one it is given. */
static void each_session(worker *w, void (*fn)(session *s, const char *arg), const char *arg)
{
	for (session_node *n = w->sessions, *next; n; n = next) {
		next = n->next;
		fn(n->s, arg);
	}
}

static void index_changed(session *s, const char *arg)
{
	session_index_changed(s);
}

static void drain(session *s, const char *arg)
{
	session_drain(s);
}

/* The queries waiting, answered in the order asked. */
static void answer_queries(worker *w)
{
	pthread_mutex_lock(&w->lock);
	worker_query *q = w->queries;
	w->queries = NULL;
	pthread_mutex_unlock(&w->lock);
	int64_t now = mg_now_ms();
	for (worker_query *next; q; q = next) {
		next = q->next;
		if (q->kind == WORKER_WORKLOAD && w->workload && q->workload &&
		    q->workload->cap == w->workload->cap &&
		    q->workload->coll_cap == w->workload->coll_cap) {
			workload_copy(q->workload, w->workload);
			q->found = true;
		}
		q->found |= q->kind == WORKER_SYNC;
		for (session_node *n = w->sessions, *nn; n; n = nn) {
			nn = n->next;
			if (q->kind == WORKER_WORKLOAD || q->kind == WORKER_SYNC) {
				break;
			} else if (q->kind == WORKER_LIST) {
				if (q->listed++)
					text_str(q->out, ",");
				session_describe(n->s, now, q->out);
			} else if (session_id(n->s) == q->conn) {
				char why[96];
				snprintf(why, sizeof why,
				         "closed by an operator (POST /connections/%llu/close)",
				         (unsigned long long)q->conn);
				q->found = true;
				session_abort(n->s, why);
				break;
			}
		}
		pthread_mutex_lock(&w->lock);
		q->done = true;
		pthread_cond_broadcast(&w->answered);
		pthread_mutex_unlock(&w->lock);
	}
}

bool worker_ask(worker *w, worker_query *q, int timeout_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	q->done = false;
	pthread_mutex_lock(&w->lock);
	q->next = w->queries;
	w->queries = q;
	pthread_mutex_unlock(&w->lock);
	worker_notify(w, WORKER_QUERY);
	pthread_mutex_lock(&w->lock);
	while (!q->done)
		if (pthread_cond_timedwait(&w->answered, &w->lock, &until) != 0) {
			/* Not taken yet: withdrawn. Taken: it is being answered,
			 * which takes no longer than a walk of the sessions. */
			worker_query **pp = &w->queries;
			while (*pp && *pp != q)
				pp = &(*pp)->next;
			if (*pp) {
				*pp = q->next;
				break;
			}
			until.tv_sec += 1;
		}
	bool ok = q->done;
	pthread_mutex_unlock(&w->lock);
	return ok;
}

static void take_config(worker *w)
{
	snapshot *old = w->snap;
	w->snap = snapshot_slot_get(w->shared->config);
	w->env.tls = w->snap->tls; /* new sessions use the new contexts */
	snapshot_unref(old);
}

static void wakeup_cb(evutil_socket_t fd, short what, void *arg)
{
	worker *w = arg;
	uint64_t count;
	/* the flags and the inbox say what to do; the count only woke us */
	if (read(fd, &count, sizeof(count)) < 0) {
		/* EAGAIN: another wake-up read it first; nothing else can fail */
	}
	unsigned flags = atomic_exchange(&w->pending, 0);
	if (flags & WORKER_CONFIG_CHANGED)
		take_config(w);
	if (flags & (WORKER_DRAIN | WORKER_STOP))
		atomic_store(&w->draining, true);
	take_inbox(w);
	if (flags & WORKER_QUERY)
		answer_queries(w);
	if (flags & WORKER_INDEX_CHANGED) {
		late_queue_judge(w->late, w->snap->engine, mg_now_ns() / 1000000);
		each_session(w, index_changed, NULL);
	}
	if (flags & WORKER_STOP)
		each_session(w, session_abort, "shutdown grace period over");
	else if (atomic_load(&w->draining))
		each_session(w, drain, NULL);
	if (atomic_load(&w->draining) && w->nsessions == 0)
		event_base_loopexit(w->base, NULL);
}

/* The worker's maintenance step, once a second: the deadlines no socket
 * event or index change would reach. Now the late verdicts owed past
 * LATE_WAIT_MS (a failed listIndexes notifies no worker). */
static void maintenance_cb(evutil_socket_t fd, short what, void *arg)
{
	worker *w = arg;
	late_queue_expire(w->late, mg_now_ms());
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	event_base_loop(w->base, EVLOOP_NO_EXIT_ON_EMPTY);
	index_cache_thread_end(); /* the reference its last lookup kept */
	transport_pool_end();     /* its read buffers, as their last readers let go */
	return NULL;
}

/* A base without libevent's locks: only the worker's thread ever touches
 * it (see worker.h), and on the request path they would be a lock and an
 * unlock at every event added, deleted or made active, several a request. */
static struct event_base *unlocked_base(void)
{
	struct event_config *cfg = event_config_new();
	if (!cfg)
		return NULL;
	struct event_base *b = NULL;
	/* edge-triggered reads (epoll): the TLS sniff waits on them (session.c) */
	if (event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK) == 0 &&
	    event_config_require_features(cfg, EV_FEATURE_ET) == 0)
		b = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return b;
}

/* Another thread wakes the worker: an eventfd, since its base has no
 * locks for event_active() from outside. */
static void wake(worker *w)
{
	uint64_t one = 1;
	if (write(w->wakeup_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, so a wake-up is pending anyway */
	}
}

bool worker_init(worker *w, int index, const worker_shared *shared, char *err, size_t errlen)
{
	memset(w, 0, sizeof(*w));
	w->index = index;
	w->shared = shared;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->answered, &ca);
	pthread_condattr_destroy(&ca);
	w->base = unlocked_base();
	w->wakeup_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->wakeup = w->base && w->wakeup_fd >= 0
	                ? event_new(w->base, w->wakeup_fd, EV_READ | EV_PERSIST, wakeup_cb, w)
	                : NULL;
	if (w->wakeup && event_add(w->wakeup, NULL) != 0) {
		event_free(w->wakeup);
		w->wakeup = NULL;
	}
	w->stage = evbuffer_new();
	w->stage_replies = evbuffer_new();
	w->late = late_queue_new(late_count_lost, &shared->metrics->shards[index]);
	w->maintenance = w->base ? event_new(w->base, -1, EV_PERSIST, maintenance_cb, w) : NULL;
	struct timeval every = {MAINTENANCE_MS / 1000, (MAINTENANCE_MS % 1000) * 1000};
	if (w->maintenance && event_add(w->maintenance, &every) != 0) {
		event_free(w->maintenance);
		w->maintenance = NULL;
	}
	if (!w->wakeup || !w->stage || !w->stage_replies || !w->late || !w->maintenance) {
		snprintf(err, errlen, "cannot create the event loop of worker %d", index);
		return false;
	}
	w->snap = snapshot_slot_get(shared->config);
	const workload_settings *ws = &w->snap->cfg.workload;
	if (ws->enabled &&
	    !(w->workload = workload_new(ws->shapes, ws->collections, mg_now_ns()))) {
		snprintf(err, errlen, "no memory for the workload statistics of worker %d", index);
		return false;
	}
	if (w->workload)
		w->workload->sample = ws->reply_sample;
	w->env = (session_env){
	    .base = w->base,
	    .snap = &w->snap,
	    .ids = shared->ids,
	    .draining = &w->draining,
	    .nconns = shared->nconns,
	    .mx = &shared->metrics->shards[index],
	    .stage = w->stage,
	    .stage_replies = w->stage_replies,
	    .capture = shared->capture,
	    .late = w->late,
	    .workload = w->workload,
	    .on_closed = session_closed,
	    .out_of_fds = out_of_fds,
	    .owner = w,
	    .tls = w->snap->tls,
	};
	return true;
}

bool worker_start(worker *w, char *err, size_t errlen)
{
	if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
		snprintf(err, errlen, "cannot start worker thread %d", w->index);
		return false;
	}
	return true;
}

bool worker_hand(worker *w, int fd, const struct sockaddr *addr, socklen_t addrlen,
                 upstream_routes *routes, size_t listener)
{
	pthread_mutex_lock(&w->lock);
	if (w->ninbox == w->capinbox) {
		size_t cap = w->capinbox ? w->capinbox * 2 : 16;
		accepted_conn *grown = realloc(w->inbox, cap * sizeof(*grown));
		if (!grown) {
			pthread_mutex_unlock(&w->lock);
			close(fd);
			routes_unref(routes);
			log_reason(LOG_ERROR, "NETWORK", LOGID_CONN_REFUSED, NULL,
			           "Connection refused: out of memory");
			return false;
		}
		w->inbox = grown;
		w->capinbox = cap;
	}
	accepted_conn *c = &w->inbox[w->ninbox++];
	c->fd = fd;
	c->routes = routes;
	c->listener = listener;
	memcpy(&c->addr, addr, (size_t)addrlen);
	c->addrlen = addrlen;
	pthread_mutex_unlock(&w->lock);
	wake(w);
	return true;
}

void worker_notify(worker *w, worker_flag flags)
{
	atomic_fetch_or(&w->pending, (unsigned)flags);
	wake(w);
}

workload **workers_workload(worker *workers, size_t n, const workload_settings *ws, size_t *got)
{
	*got = 0;
	workload **tabs = ws->enabled ? calloc(n ? n : 1, sizeof(*tabs)) : NULL;
	for (size_t i = 0; tabs && i < n; i++) {
		workload *t = workload_new(ws->shapes, ws->collections, 0);
		worker_query q = {.kind = WORKER_WORKLOAD, .workload = t};
		if (t && worker_ask(&workers[i], &q, 1000) && q.found)
			tabs[(*got)++] = t;
		else
			workload_free(t);
	}
	return tabs;
}

void workers_workload_free(workload **tabs, size_t n)
{
	for (size_t i = 0; tabs && i < n; i++)
		workload_free(tabs[i]);
	free(tabs);
}

void worker_join(worker *w)
{
	pthread_join(w->thread, NULL);
	event_free(w->wakeup);
	event_free(w->maintenance);
	close(w->wakeup_fd);
	evbuffer_free(w->stage);
	evbuffer_free(w->stage_replies);
	event_base_free(w->base);
	for (size_t i = 0; i < w->ninbox; i++) { /* handed over after the loop ended */
		close(w->inbox[i].fd);
		routes_unref(w->inbox[i].routes);
	}
	free(w->inbox);
	late_queue_free(w->late);
	workload_free(w->workload);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->answered);
	snapshot_unref(w->snap);
}
