/* Late verdicts expire by the clock alone: what has been owed LATE_WAIT_MS
 * goes from the queue and is counted as never given (facts_never_came),
 * though no index list changed, which is what a failed listIndexes leaves
 * (the worker's maintenance step calls late_queue_expire once a second).
 * The clock is the test's. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "proxy/session/late.h"

enum { RULE = 2 };

static void owe(late_queue *q, int64_t now_ms)
{
	static const uint8_t msg[32] = {32};
	engine_late owed = {.n = 1};
	owed.at[0].rules = 1u << RULE;
	late_queue_owe(q, msg, sizeof(msg), &owed, "app", "127.0.0.1:1", 1, now_ms);
}

static uint64_t never_came(metrics_shard *mx)
{
	return mx->skipped[RULE][MX_SKIP_NEVER_CAME];
}

static void test_expiry_needs_no_index_change(void **state)
{
	static metrics_shard mx;
	late_queue *q = late_queue_new(late_count_lost, &mx);
	assert_non_null(q);
	owe(q, 1000);
	owe(q, 5000);
	late_queue_expire(q, 1000 + LATE_WAIT_MS - 1);
	assert_int_equal(late_queue_size(q), 2);
	assert_int_equal(never_came(&mx), 0);
	late_queue_expire(q, 1000 + LATE_WAIT_MS);
	assert_int_equal(late_queue_size(q), 1); /* the later one is not due */
	assert_int_equal(never_came(&mx), 1);
	late_queue_expire(q, 5000 + LATE_WAIT_MS);
	assert_int_equal(late_queue_size(q), 0);
	assert_int_equal(never_came(&mx), 2);
	late_queue_free(q);
	assert_int_equal(never_came(&mx), 2); /* nothing was left to count twice */
}

static void test_expired_slots_are_free_again(void **state)
{
	static metrics_shard mx;
	late_queue *q = late_queue_new(late_count_lost, &mx);
	assert_non_null(q);
	for (int i = 0; i < LATE_QUEUE_MAX; i++)
		owe(q, 0);
	owe(q, 0); /* no room */
	assert_int_equal(mx.skipped[RULE][MX_SKIP_NO_ROOM], 1);
	late_queue_expire(q, LATE_WAIT_MS);
	assert_int_equal(late_queue_size(q), 0);
	assert_int_equal(never_came(&mx), LATE_QUEUE_MAX);
	owe(q, LATE_WAIT_MS);
	assert_int_equal(late_queue_size(q), 1);
	assert_int_equal(mx.skipped[RULE][MX_SKIP_NO_ROOM], 1);
	late_queue_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_expiry_needs_no_index_change),
	    cmocka_unit_test(test_expired_slots_are_free_again),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
