/* upstream_probe: a signal that lands while it waits for the connect is
 * not an answer from the upstream. The upstream here is a listener whose
 * accept queue is full, so the probe's SYN is dropped and its connect
 * waits for the retransmission (about a second); the queue is emptied
 * meanwhile, and a SIGALRM interrupts the wait before that. The probe
 * must go on waiting and report the upstream reachable. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "proxy/runtime/upstream_watch.h"

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	alarms++;
}

/* Accepts the connection that fills the queue, after the probe began. */
static void *empty_queue_later(void *arg)
{
	int lfd = *(int *)arg;
	usleep(300 * 1000);
	int c = accept(lfd, NULL, NULL);
	if (c >= 0)
		close(c);
	return NULL;
}

static void test_probe_survives_a_signal(void **state)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(lfd >= 0);
	struct sockaddr_in sin = {.sin_family = AF_INET};
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	socklen_t slen = sizeof(sin);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &slen), 0);
	assert_int_equal(listen(lfd, 0), 0);
	/* a backlog of 0 holds one connection: this one fills it */
	int filler = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(filler, (struct sockaddr *)&sin, sizeof(sin)), 0);
	usleep(50 * 1000);

	net_addr up = {.len = sizeof(sin)};
	memcpy(&up.ss, &sin, sizeof(sin));
	snprintf(up.name, sizeof(up.name), "127.0.0.1:%u", ntohs(sin.sin_port));

	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART, as poll ignores it */
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
	/* the helper thread never takes the signal: it is the probe's */
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, empty_queue_later, &lfd), 0);
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
	struct itimerval it = {.it_value = {0, 100 * 1000}};
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);

	char why[256] = "";
	bool ok = upstream_probe(&up, 5000, why, sizeof(why));
	pthread_join(t, NULL);
	assert_int_equal(alarms, 1); /* the signal did land during the probe */
	if (!ok)
		fail_msg("probe failed: %s", why);
	close(filler);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_probe_survives_a_signal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
