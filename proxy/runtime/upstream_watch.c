/* The upstream's reachability (see upstream_watch.h). */
#include "proxy/runtime/upstream_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proxy/sinks/log.h"

enum {
	PROBE_MS = 1000,    /* a probe's connect timeout (as /readyz always had) */
	WATCH_UP_SECS = 30, /* between probes while the upstream answers */
	WATCH_DOWN_MS = 1000,
	TICK_MS = 250, /* how often the thread looks at the failures counter */
};

typedef enum { WATCH_UNKNOWN, WATCH_UP, WATCH_DOWN } watch_state;

struct upstream_watch {
	upstream_watch_sources src;
	pthread_mutex_t lock; /* state, said, and the log line change together */
	pthread_cond_t wake;  /* on CLOCK_MONOTONIC: a step of the wall clock moves no wait */
	watch_state state;
	net_addr said; /* the address the last line named */
	bool stopping;
	pthread_t thread;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* poll() for the connect, for timeout_ms in all: a signal that interrupts
 * it (the process has handlers) is not an answer from the upstream, so
 * the wait goes on for the time left. */
static int poll_connect(int fd, int timeout_ms)
{
	int64_t until = now_ms() + timeout_ms;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int64_t left = until - now_ms();
		int n = poll(&p, 1, left > 0 ? (int)left : 0);
		if (n >= 0 || errno != EINTR)
			return n;
	}
}

bool upstream_probe(const net_addr *up, int timeout_ms, char *why, size_t whylen)
{
	int fd = socket(up->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, whylen, "socket: %s", strerror(errno));
		return false;
	}
	int soerr = 0;
	bool ok = connect(fd, (const struct sockaddr *)&up->ss, up->len) == 0;
	if (!ok && errno == EINPROGRESS) {
		socklen_t len = sizeof(soerr);
		int n = poll_connect(fd, timeout_ms);
		if (n == 0)
			soerr = ETIMEDOUT;
		else if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
			soerr = errno;
		ok = soerr == 0;
	} else if (!ok) {
		soerr = errno;
	}
	if (!ok)
		snprintf(why, whylen, "%s", strerror(soerr));
	close(fd);
	return ok;
}

static bool same_addr(const net_addr *a, const net_addr *b)
{
	return a->len == b->len && memcmp(&a->ss, &b->ss, a->len) == 0 &&
	       strcmp(a->name, b->name) == 0;
}

static net_addr target_now(const upstream_watch *w)
{
	net_addr up = {0};
	w->src.target(w->src.arg, &up);
	return up;
}

/* Probes up (what the sources said a moment ago) and logs a change: of the
 * answer, or of the address, so the last line names what /readyz probes. */
static bool probe_at(upstream_watch *w, const net_addr *up, char *why, size_t whylen)
{
	why[0] = '\0';
	bool ok = upstream_probe(up, PROBE_MS, why, whylen);
	pthread_mutex_lock(&w->lock);
	watch_state now = ok ? WATCH_UP : WATCH_DOWN;
	if (now != w->state || !same_addr(up, &w->said)) {
		log_line *l = ok ? log_begin(LOG_INFO, "NETWORK", LOGID_UPSTREAM_REACHABLE, NULL,
		                             "Upstream reachable")
		                 : NULL;
		if (!ok) {
			char msg[600];
			snprintf(msg, sizeof(msg), "Upstream unreachable: %s", why);
			l = log_begin(LOG_WARNING, "NETWORK", LOGID_UPSTREAM_UNREACHABLE, NULL,
			              msg);
		}
		log_attr_str(l, "upstream", up->name);
		if (!ok)
			log_attr_str(l, "reason", why);
		log_end(l);
		w->state = now;
		w->said = *up;
	}
	pthread_mutex_unlock(&w->lock);
	return ok;
}

bool upstream_watch_probe(upstream_watch *w, char *why, size_t whylen)
{
	net_addr up = target_now(w);
	return probe_at(w, &up, why, whylen);
}

/* Sleeps a tick (on the monotonic clock, the one wake was made with), or
 * until stopped. False once stopping. */
static bool nap(upstream_watch *w)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += TICK_MS * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&w->lock);
	if (!w->stopping)
		pthread_cond_timedwait(&w->wake, &w->lock, &ts);
	bool go_on = !w->stopping;
	pthread_mutex_unlock(&w->lock);
	return go_on;
}

static void *watch_main(void *arg)
{
	upstream_watch *w = arg;
	char why[512];
	uint64_t seen = w->src.failures ? w->src.failures(w->src.arg) : 0;
	net_addr probed = target_now(w);
	bool up = probe_at(w, &probed, why, sizeof(why));
	int64_t last = now_ms();
	while (nap(w)) {
		uint64_t f = w->src.failures ? w->src.failures(w->src.arg) : 0;
		net_addr target = target_now(w);
		int64_t wait = up ? WATCH_UP_SECS * 1000 : WATCH_DOWN_MS;
		if (f == seen && same_addr(&target, &probed) && now_ms() - last < wait)
			continue;
		seen = f;
		probed = target;
		up = probe_at(w, &probed, why, sizeof(why));
		last = now_ms();
	}
	return NULL;
}

upstream_watch *upstream_watch_start(const upstream_watch_sources *src, char *err, size_t errlen)
{
	upstream_watch *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	*w = (upstream_watch){.src = *src};
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
		snprintf(err, errlen, "cannot start the upstream watch thread");
		pthread_cond_destroy(&w->wake);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return NULL;
	}
	return w;
}

void upstream_watch_stop(upstream_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
