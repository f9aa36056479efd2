/* Monotonic time for timers, latencies and the analyzers' windows. */
#ifndef MG_PROXY_RUNTIME_CLOCK_H
#define MG_PROXY_RUNTIME_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t mg_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t mg_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
