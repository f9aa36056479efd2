/* The salt of every value hash (value_filter.h). */
#include "protocol/value_filter.h"

#include <sys/random.h>
#include <time.h>

uint64_t value_hash_salt;

void value_hash_salt_init(void)
{
	uint64_t s = 0;
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
	}
	value_hash_salt = s;
}
