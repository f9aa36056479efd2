/* The upstream watch: it probes the address its sources give at each probe
 * (DNS can move the sessions' server while the proxy runs), names that
 * address in its lines, and times its naps on the monotonic clock.
 *
 * clock_gettime is wrapped (-Wl,--wrap=clock_gettime, CMakeLists.txt): while
 * wall_ahead is set, CLOCK_REALTIME reads an hour ahead of the kernel's, as
 * if the wall clock were stepped back an hour just after the read. A nap
 * timed on the wall clock then sleeps an hour. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proxy/runtime/upstream_watch.h"
#include "proxy/sinks/log.h"

int __real_clock_gettime(clockid_t clk, struct timespec *ts);

static atomic_bool wall_ahead;

int __wrap_clock_gettime(clockid_t clk, struct timespec *ts)
{
	int rc = __real_clock_gettime(clk, ts);
	if (rc == 0 && clk == CLOCK_REALTIME && atomic_load(&wall_ahead))
		ts->tv_sec += 3600;
	return rc;
}

/* The sources: an address the test moves, and how often the watch looked. */
typedef struct fake_routes {
	pthread_mutex_t lock;
	net_addr target;
	atomic_uint failures_reads;
} fake_routes;

static void fake_target(void *arg, net_addr *up)
{
	fake_routes *f = arg;
	pthread_mutex_lock(&f->lock);
	*up = f->target;
	pthread_mutex_unlock(&f->lock);
}

static uint64_t fake_failures(void *arg)
{
	fake_routes *f = arg;
	atomic_fetch_add(&f->failures_reads, 1);
	return 0;
}

static void set_target(fake_routes *f, const net_addr *up)
{
	pthread_mutex_lock(&f->lock);
	f->target = *up;
	pthread_mutex_unlock(&f->lock);
}

/* A loopback listener (fd >= 0) or, with listening false, a port where
 * nothing listens (fd closed, -1): connecting there is refused at once. */
static int loopback(bool listening, net_addr *out)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	struct sockaddr_in sin = {.sin_family = AF_INET};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	socklen_t slen = sizeof(sin);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &slen), 0);
	*out = (net_addr){.len = sizeof(sin)};
	memcpy(&out->ss, &sin, sizeof(sin));
	snprintf(out->name, sizeof(out->name), "127.0.0.1:%u", ntohs(sin.sin_port));
	if (listening) {
		assert_int_equal(listen(fd, 64), 0);
		return fd;
	}
	close(fd);
	return -1;
}

static char *read_all(const char *path)
{
	static char buf[65536];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

/* Waits up to ms for needle in the log; the log so far when it is there. */
static const char *wait_log(const char *path, const char *needle, int ms)
{
	for (int waited = 0; waited <= ms; waited += 20) {
		const char *all = read_all(path);
		if (strstr(all, needle))
			return all;
		usleep(20 * 1000);
	}
	fail_msg("no %s in the log:\n%s", needle, read_all(path));
	return NULL;
}

static void test_follows_the_target(void **state)
{
	char path[] = "/tmp/mg-test-watch-XXXXXX";
	int lf = mkstemp(path);
	assert_true(lf >= 0);
	close(lf);
	assert_true(log_open(path, LOG_INFO));

	net_addr dead, live;
	loopback(false, &dead);
	int lfd = loopback(true, &live);
	fake_routes f = {.target = dead};
	pthread_mutex_init(&f.lock, NULL);
	char err[256] = "";
	upstream_watch_sources src = {.target = fake_target, .failures = fake_failures, .arg = &f};
	upstream_watch *w = upstream_watch_start(&src, err, sizeof(err));
	assert_non_null(w);

	char down[400];
	snprintf(down, sizeof(down), "\"upstream\":\"%s\"", dead.name);
	wait_log(path, down, 3000);
	char why[256];
	assert_false(upstream_watch_probe(w, why, sizeof(why)));

	/* DNS moves the routes: the next tick probes the new address (a watch
	 * that kept the first one would never name it) */
	set_target(&f, &live);
	char up[400];
	snprintf(up, sizeof(up), "\"msg\":\"Upstream reachable\",\"attr\":{\"upstream\":\"%s\"}",
	         live.name);
	wait_log(path, up, 3000);
	assert_true(upstream_watch_probe(w, why, sizeof(why)));

	/* the same state at another address is a line too: the last line names
	 * what /readyz probes */
	net_addr live2;
	int lfd2 = loopback(true, &live2);
	set_target(&f, &live2);
	snprintf(up, sizeof(up), "\"msg\":\"Upstream reachable\",\"attr\":{\"upstream\":\"%s\"}",
	         live2.name);
	assert_true(upstream_watch_probe(w, why, sizeof(why)));
	wait_log(path, up, 0);
	size_t lines = 0;
	for (const char *p = read_all(path); (p = strchr(p, '\n')); p++)
		lines++;
	assert_true(upstream_watch_probe(w, why, sizeof(why))); /* no change, no line */
	size_t again = 0;
	for (const char *p = read_all(path); (p = strchr(p, '\n')); p++)
		again++;
	assert_int_equal(again, lines);

	upstream_watch_stop(w);
	log_close();
	unlink(path);
	close(lfd);
	close(lfd2);
	pthread_mutex_destroy(&f.lock);
}

/* The thread reads the failures counter once a tick (250 ms); a nap
 * timed on a wall clock an hour ahead would read it once and sleep. */
static void test_a_wall_clock_step_moves_no_nap(void **state)
{
	net_addr live;
	int lfd = loopback(true, &live);
	fake_routes f = {.target = live};
	pthread_mutex_init(&f.lock, NULL);
	atomic_store(&wall_ahead, true);
	char err[256] = "";
	upstream_watch_sources src = {.target = fake_target, .failures = fake_failures, .arg = &f};
	upstream_watch *w = upstream_watch_start(&src, err, sizeof(err));
	assert_non_null(w);
	usleep(1500 * 1000);
	unsigned reads = atomic_load(&f.failures_reads);
	upstream_watch_stop(w);
	atomic_store(&wall_ahead, false);
	if (reads < 3)
		fail_msg("the watch read the failures counter %u times in 1.5 s", reads);
	close(lfd);
	pthread_mutex_destroy(&f.lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_follows_the_target),
	    cmocka_unit_test(test_a_wall_clock_step_moves_no_nap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
