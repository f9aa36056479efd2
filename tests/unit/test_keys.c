/* The byte searches that let a walk be skipped (analyzers/engine/keys.h):
 * key_maybe_in and join_maybe_in against a plain search, over hand-made
 * edges (a key at the very start and end, a key cut short by the end, a
 * key without its NUL, a longer key ending in it) and random bytes drawn
 * from the letters of the keys, so near misses are common. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/engine/keys.h"

/* key with its NUL anywhere in p[0..len): the definition. */
static bool naive(const uint8_t *p, size_t len, const char *key)
{
	size_t n = strlen(key) + 1;
	for (size_t i = 0; i + n <= len; i++)
		if (memcmp(p + i, key, n) == 0)
			return true;
	return false;
}

static bool naive_join(const uint8_t *p, size_t len)
{
	return naive(p, len, "$lookup") || naive(p, len, "$graphLookup");
}

/* Copies bytes to a buffer of exactly len, so a read past it is ASan's. */
static void check(const char *bytes, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);
	memcpy(p, bytes, len);
	static const char *const keys[] = {"$lookup", "$graphLookup", "whenMatched", "x", "$l"};
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (key_maybe_in(p, len, keys[k]) != naive(p, len, keys[k]))
			fail_msg("key_maybe_in(%s) on %zu bytes: %d", keys[k], len,
			         key_maybe_in(p, len, keys[k]));
	if (join_maybe_in(p, len) != naive_join(p, len))
		fail_msg("join_maybe_in on %zu bytes: %d", len, join_maybe_in(p, len));
	free(p);
}

#define CHECK(lit) check(lit, sizeof(lit) - 1)

static void test_edges(void **state)
{
	CHECK("");
	CHECK("\0");
	CHECK("$lookup");               /* no NUL */
	CHECK("$lookup\0");             /* the whole buffer */
	CHECK("\x03$lookup\0\x05");     /* in the middle */
	CHECK("$looku\0p\0");           /* cut short */
	CHECK("x$lookup\0");            /* a longer key ending in it */
	CHECK("$graphLookup\0");        /* the other */
	CHECK("graphLookup\0$lookup");  /* one without '$', one without NUL */
	CHECK("$GraphLookup\0");        /* case */
	CHECK("ookup\0");               /* the tail alone */
	CHECK("p\0p\0p\0$lookup\0");    /* the last byte, often */
	CHECK("\x02whenMatched\0\x03"); /* a key not starting with '$' */
	CHECK("x\0");                   /* a one-byte key */
	CHECK("$l\0$lookup\0");
}

static void test_random(void **state)
{
	static const char alphabet[] = "$lookupgraphL\0whenMatcedx";
	char buf[40];
	srand(7);
	for (int i = 0; i < 200000; i++) {
		size_t len = (size_t)rand() % sizeof(buf);
		for (size_t j = 0; j < len; j++)
			buf[j] = alphabet[(size_t)rand() % (sizeof(alphabet) - 1)];
		/* plant a key now and then, so hits are checked as often as misses */
		if (len > 14 && rand() % 4 == 0) {
			const char *k = rand() % 2 ? "$lookup" : "$graphLookup";
			size_t at = (size_t)rand() % (len - strlen(k));
			memcpy(buf + at, k, strlen(k) + 1);
		}
		check(buf, len);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_edges),
	    cmocka_unit_test(test_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
