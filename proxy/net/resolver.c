/* The resolver thread (see resolver.h). */
#include "proxy/net/resolver.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "proxy/sinks/log.h"

/* Connect failures re-resolve at most this often: an upstream that is
 * down must not turn every client's retry into a DNS query. */
enum { FAILURE_MIN_GAP_SECS = 1 };

struct resolver {
	const routes_spec *spec;
	routes_slot *slot;
	unsigned refresh_secs;
	resolver_failures_fn failures;
	void *arg;
	pthread_t thread;
	pthread_mutex_t lock; /* guards stop, with wake */
	pthread_cond_t wake;
	bool stop;
};

static double now_secs(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One resolution; the new routes are published only when they differ. */
static void refresh(resolver *r, const char *why)
{
	char err[1024];
	upstream_routes *cur = routes_slot_get(r->slot);
	upstream_routes *next = routes_resolve(r->spec, cur, err, sizeof(err));
	if (!next) {
		log_line *l = log_begin(LOG_WARNING, "NETWORK", LOGID_UPSTREAM_FAILED, NULL,
		                        "Re-resolving the upstream failed; keeping the last good "
		                        "answer");
		log_attr_str(l, "trigger", why);
		log_attr_str(l, "error", err);
		log_end(l);
	} else if (routes_same(cur, next)) {
		routes_unref(next);
	} else {
		routes_log_change(r->spec, cur, next, why);
		routes_slot_publish(r->slot, next);
	}
	routes_unref(cur);
}

static void *resolver_main(void *arg)
{
	resolver *r = arg;
	double last = now_secs();
	uint64_t seen = r->failures(r->arg);
	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += 250 * 1000000L; /* look at the failure count 4 times a second */
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		int rc = pthread_cond_timedwait(&r->wake, &r->lock, &until);
		if (r->stop || (rc != 0 && rc != ETIMEDOUT))
			continue;
		double t = now_secs();
		uint64_t f = r->failures(r->arg);
		bool failed = f != seen && t - last >= FAILURE_MIN_GAP_SECS;
		bool due = r->refresh_secs && t - last >= r->refresh_secs;
		if (!failed && !due)
			continue;
		seen = f;
		pthread_mutex_unlock(&r->lock);
		refresh(r, failed ? "connecting upstream failed" : "upstream.dnsRefreshSecs");
		pthread_mutex_lock(&r->lock);
		last = now_secs();
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

resolver *resolver_start(const routes_spec *spec, routes_slot *slot, unsigned refresh_secs,
                         resolver_failures_fn failures, void *arg, char *err, size_t errlen)
{
	resolver *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	*r = (resolver){.spec = spec,
	                .slot = slot,
	                .refresh_secs = refresh_secs,
	                .failures = failures,
	                .arg = arg};
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&r->lock, NULL);
	if (pthread_create(&r->thread, NULL, resolver_main, r) != 0) {
		pthread_cond_destroy(&r->wake);
		pthread_mutex_destroy(&r->lock);
		free(r);
		snprintf(err, errlen, "cannot start the resolver thread");
		return NULL;
	}
	return r;
}

void resolver_stop(resolver *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
