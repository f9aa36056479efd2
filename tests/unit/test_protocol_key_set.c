/* protocol/key_set.h: the distinct values a chain of keyed reads looked
 * up. Values that fall on one of the 256 bits are still counted apart up
 * to KEY_SET_EXACT (a populate of 3 ids, two of them on one bit, was
 * counted 2 and its join lost); past that the count comes from the bits,
 * never under KEY_SET_EXACT + 1, never over the values there are; a value
 * added again, or a set joined to itself, changes nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "protocol/key_set.h"

/* A hash on bit `bit` (key_set_add_hash reads bits 40 and up) whose low
 * 32 bits, its fingerprint, are `fp`. */
static uint64_t on_bit(unsigned bit, uint32_t fp)
{
	return ((uint64_t)bit << 40) | fp;
}

static void test_values_on_one_bit_count_apart(void **state)
{
	key_set s;
	key_set_clear(&s);
	key_set_add_hash(&s, on_bit(47, 1));
	key_set_add_hash(&s, on_bit(47, 2));
	key_set_add_hash(&s, on_bit(229, 3));
	assert_int_equal(key_set_count(&s), 3);
	key_set_add_hash(&s, on_bit(47, 2)); /* read again */
	assert_int_equal(key_set_count(&s), 3);
}

static void test_exact_then_estimated(void **state)
{
	key_set s;
	key_set_clear(&s);
	for (uint32_t i = 1; i <= KEY_SET_EXACT; i++) {
		key_set_add_hash(&s, on_bit(7, i)); /* all on one bit */
		assert_int_equal(key_set_count(&s), i);
	}
	key_set_add_hash(&s, on_bit(7, KEY_SET_EXACT + 1));
	assert_int_equal(key_set_count(&s), KEY_SET_EXACT + 1); /* one bit: the floor */
	key_set_clear(&s);
	for (uint32_t i = 1; i <= 50; i++)
		key_set_add_hash(&s, on_bit(i * 5, i)); /* 50 bits apart */
	uint32_t n = key_set_count(&s);
	assert_true(n >= 50 && n <= 55); /* the estimate of 50 bits set */
}

static void test_union(void **state)
{
	key_set a, b;
	key_set_clear(&a);
	key_set_clear(&b);
	key_set_add_hash(&a, on_bit(3, 10));
	key_set_add_hash(&a, on_bit(3, 11));
	key_set_add_hash(&b, on_bit(3, 11));
	key_set_add_hash(&b, on_bit(3, 12));
	key_set_union(&a, &b);
	assert_int_equal(key_set_count(&a), 3);
	key_set_union(&a, &a);
	assert_int_equal(key_set_count(&a), 3);
	key_set_clear(&b);
	for (uint32_t i = 0; i < KEY_SET_EXACT + 4; i++)
		key_set_add_hash(&b, on_bit(100 + i, 100 + i));
	key_set_union(&a, &b); /* b is past its exact values: so is a */
	assert_true(key_set_count(&a) >= KEY_SET_EXACT + 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_values_on_one_bit_count_apart),
	    cmocka_unit_test(test_exact_then_estimated),
	    cmocka_unit_test(test_union),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
