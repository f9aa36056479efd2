/* The log writer: every line is one valid JSON object in mongod's shape,
 * whatever bytes a client put into the strings it carries. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <bson/bson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/sinks/log.h"

static char path[64];

static int setup(void **state)
{
	snprintf(path, sizeof(path), "/tmp/mg-test-log-XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_true(log_open(path, LOG_INFO));
	return 0;
}

static int teardown(void **state)
{
	log_close();
	unlink(path);
	return 0;
}

/* The last line written, parsed as JSON (libbson's parser is strict about
 * UTF-8 and escapes). */
static bson_t *last_line(void)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	static char buf[70000], line[70000];
	line[0] = 0;
	while (fgets(buf, sizeof(buf), f))
		memcpy(line, buf, strlen(buf) + 1);
	fclose(f);
	bson_error_t err;
	bson_t *b = bson_new_from_json((const uint8_t *)line, -1, &err);
	if (!b)
		fail_msg("not JSON (%s): %s", err.message, line);
	return b;
}

static const char *get_str(const bson_t *b, const char *dotted)
{
	bson_iter_t it, child;
	assert_true(bson_iter_init(&it, b));
	assert_true(bson_iter_find_descendant(&it, dotted, &child));
	return bson_iter_utf8(&child, NULL);
}

static void test_shape_of_a_line(void **state)
{
	log_line *l = log_begin(LOG_WARNING, "NETWORK", 2001, "conn7", "Connection ended");
	log_attr_str(l, "reason", "client closed the connection");
	log_attr_int(l, "requests", 42);
	log_attr_bool(l, "tls", false);
	log_attr_raw(l, "shape", "{\"find\":\"c\",\"filter\":{\"a\":\"?number\"}}");
	log_end(l);
	bson_t *b = last_line();
	assert_string_equal(get_str(b, "s"), "W");
	assert_string_equal(get_str(b, "c"), "NETWORK");
	assert_string_equal(get_str(b, "ctx"), "conn7");
	assert_string_equal(get_str(b, "msg"), "Connection ended");
	assert_string_equal(get_str(b, "attr.reason"), "client closed the connection");
	assert_string_equal(get_str(b, "attr.shape.filter.a"), "?number");
	bson_iter_t t;
	assert_true(bson_iter_init_find(&t, b, "t")); /* {"$date": ...}: a real date */
	assert_true(BSON_ITER_HOLDS_DATE_TIME(&t));
	bson_destroy(b);
}

static void test_hostile_strings_stay_valid_json(void **state)
{
	/* quotes, backslashes, control bytes, a lone continuation byte, a
	 * truncated 3-byte sequence, an overlong encoding, a surrogate, and
	 * valid multi-byte text that must survive untouched */
	const char *nasty =
	    "a\"b\\c\n\x01\x80 \xe2\x82 \xc0\xaf \xed\xa0\x80 \xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80";
	log_line *l = log_begin(LOG_INFO, "NETWORK", 1, "conn1", nasty);
	log_attr_str(l, "appName", nasty);
	log_attr_raw(l, "shape", "{\"f\xff\":1}"); /* not UTF-8: logged as a string */
	log_end(l);
	bson_t *b = last_line();
	const char *app = get_str(b, "attr.appName");
	assert_non_null(strstr(app, "a\"b\\c\n\x01"));
	assert_non_null(strstr(app, "\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80"));
	assert_non_null(strstr(app, "\xef\xbf\xbd")); /* U+FFFD for the bad bytes */
	assert_null(strstr(app, "\xc0\xaf"));
	assert_string_equal(get_str(b, "msg"), app);
	assert_non_null(strstr(get_str(b, "attr.shape"), "{\"f"));
	bson_destroy(b);
}

static void test_level_is_tested_first(void **state)
{
	assert_null(log_begin(LOG_DEBUG, "NETWORK", 1, NULL, "not wanted"));
	log_attr_str(NULL, "k", "v"); /* a NULL line is accepted everywhere */
	log_end(NULL);
}

static void test_overlong_value_is_cut_not_broken(void **state)
{
	size_t n = 200000;
	char *big = malloc(n + 1);
	memset(big, 'x', n);
	big[n] = 0;
	log_line *l = log_begin(LOG_INFO, "ANALYZER", 1, NULL, "big");
	log_attr_str(l, "detail", big);
	log_attr_int(l, "after", 1); /* no room left: left out, line still valid */
	log_end(l);
	bson_t *b = last_line();
	bson_iter_t it;
	assert_true(bson_iter_init(&it, b));
	assert_true(bson_iter_find_descendant(&it, "attr.truncated", &it));
	assert_true(bson_iter_as_bool(&it));
	size_t kept = strlen(get_str(b, "attr.detail"));
	assert_true(kept > 60000 && kept < n);
	assert_true(bson_iter_init(&it, b));
	assert_false(bson_iter_find_descendant(&it, "attr.after", &it));
	bson_destroy(b);

	/* a raw JSON value that does not fit is replaced, never cut */
	char *raw = malloc(n + 16);
	snprintf(raw, n + 16, "{\"k\":\"%s\"}", big);
	l = log_begin(LOG_INFO, "ANALYZER", 1, NULL, "raw");
	log_attr_raw(l, "shape", raw);
	log_end(l);
	b = last_line();
	assert_string_equal(get_str(b, "attr.shape"), "<too long to log>");
	bson_destroy(b);
	free(raw);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shape_of_a_line),
	    cmocka_unit_test(test_hostile_strings_stay_valid_json),
	    cmocka_unit_test(test_level_is_tested_first),
	    cmocka_unit_test(test_overlong_value_is_cut_not_broken),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
