/* The text log's renderer (proxy/sinks/log_text.h): a finding's two lines,
 * other lines as [ctx] msg key=value, client text never reaching a terminal
 * as control bytes, and lines that are not JSON log lines refused. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "proxy/sinks/log_text.h"

static char out[8192];

static const char *render(const char *line, bool color)
{
	log_event ev;
	if (!log_event_parse(line, strlen(line), &ev))
		return NULL;
	text_buf t;
	text_init_reserve(&t, out, sizeof(out), 8);
	log_text_render(&ev, color, &t);
	return text_finish(&t);
}

static void test_finding(void **state)
{
	const char *line =
	    "{\"t\":{\"$date\":\"2026-12-02T13:53:45.123Z\"},\"s\":\"W\",\"c\":\"ANALYZER\","
	    "\"id\":4000,\"ctx\":\"main\",\"msg\":\"Query anti-pattern\",\"attr\":{\"rule\":"
	    "\"case-insensitive-regex\",\"action\":\"block\",\"ns\":\"shop.users\",\"command\":"
	    "\"find\",\"shapeHash\":\"00ff\",\"shape\":{\"filter\":{\"name\":{\"$regex\":\"?\"}}},"
	    "\"suggestion\":\"store a lower-cased copy\\u00e9\",\"appName\":\"\",\"repeats\":0}}";
	assert_string_equal(render(line, false),
	                    "2026-12-02T13:53:45.123Z W ANALYZER case-insensitive-regex block "
	                    "shop.users app=- {\"filter\":{\"name\":{\"$regex\":\"?\"}}}\n"
	                    "    fix: store a lower-cased copy\xc3\xa9\n");
	/* the connection, the client and why it matched, when the line has them */
	const char *full =
	    "{\"t\":{\"$date\":\"T\"},\"s\":\"W\",\"c\":\"ANALYZER\",\"id\":4000,\"ctx\":"
	    "\"conn12\",\"msg\":\"Query anti-pattern\",\"attr\":{\"rule\":\"r\",\"action\":"
	    "\"log\",\"ns\":\"a.b\",\"shape\":\"x\",\"suggestion\":\"do y\",\"detail\":"
	    "\"x is z\",\"client\":\"10.0.0.1:5\",\"appName\":\"app\",\"repeats\":0}}";
	assert_string_equal(render(full, false), "T W ANALYZER [conn12] r log a.b app=app "
	                                         "client=10.0.0.1:5 x\n    why: x is z\n"
	                                         "    fix: do y\n");
	assert_non_null(strstr(render(line, true), "\033[1;31mblock\033[0m"));
}

static void test_summary_and_other_lines(void **state)
{
	assert_string_equal(
	    render(
	        "{\"t\":{\"$date\":\"T\"},\"s\":\"W\",\"c\":\"ANALYZER\",\"id\":4001,\"ctx\":"
	        "\"main\",\"msg\":\"m\",\"attr\":{\"rule\":\"r\",\"action\":\"log\",\"ns\":\"a.b\","
	        "\"shape\":\"x\",\"appName\":\"app\",\"repeats\":12}}",
	        false),
	    "T W ANALYZER r log a.b app=app x (repeated 12 times)\n");
	assert_string_equal(
	    render("{\"t\":{\"$date\":\"T\"},\"s\":\"I\",\"c\":\"NETWORK\",\"id\":2000,\"ctx\":"
	           "\"conn7\",\"msg\":\"Connection accepted\",\"attr\":{\"remote\":\"1.2.3.4:5\","
	           "\"appName\":\"\",\"why\":\"a b\",\"n\":3,\"ok\":true}}",
	           false),
	    "T I NETWORK  [conn7] Connection accepted remote=1.2.3.4:5 why=\"a b\" n=3 ok=true\n");
}

static void test_control_bytes_never_reach_the_terminal(void **state)
{
	const char *r = render("{\"t\":{\"$date\":\"T\"},\"s\":\"I\",\"c\":\"NETWORK\",\"id\":1,"
	                       "\"ctx\":\"main\",\"msg\":\"x\\u001b[2Jy\\n\",\"attr\":{\"app\":"
	                       "\"\\u001b]0;pwn\\u0007\"}}",
	                       false);
	assert_non_null(r);
	assert_null(strchr(r, '\033'));
	assert_null(strchr(r, '\a'));
	assert_string_equal(r, "T I NETWORK  x?[2Jy? app=?]0;pwn?\n");
}

/* C1 controls are control sequences too (U+009B is CSI, U+009D OSC): as
 * UTF-8 bytes or as escapes, in strings and in objects shown as they
 * stand (fuzz_log_text found them reaching the text). */
static void test_c1_controls_never_reach_the_terminal(void **state)
{
	const char *r = render("{\"t\":{\"$date\":\"T\"},\"s\":\"I\",\"c\":\"NETWORK\",\"id\":1,"
	                       "\"ctx\":\"main\",\"msg\":\"a\xc2\x9b"
	                       "31mb\\u009d0;x\\u0085"
	                       "\xc2\xa0\",\"attr\":{\"o\":{\"k\":\"\xc2\x9b\"}}}",
	                       false);
	assert_non_null(r);
	assert_null(strstr(r, "\xc2\x9b"));
	assert_null(strstr(r, "\xc2\x9d"));
	assert_null(strstr(r, "\xc2\x85"));
	/* U+00A0 is no control: it stays */
	assert_string_equal(r, "T I NETWORK  a?31mb?0;x?\xc2\xa0 o={\"k\":\"?\"}\n");
}

/* A line without attributes: nothing to walk (fuzz_log_text: the absent
 * object was walked from a NULL pointer: NULL + 0, which clang's UBSan
 * refuses; gcc's lets it by, so this test passed before the fix too). */
static void test_line_without_attributes(void **state)
{
	assert_string_equal(render("{\"t\":{\"$date\":\"T\"},\"s\":\"I\",\"c\":\"CONTROL\","
	                           "\"id\":1,\"msg\":\"Waiting\"}",
	                           false),
	                    "T I CONTROL  Waiting\n");
	assert_string_equal(render("{\"t\":{\"$date\":\"T\"},\"s\":\"W\",\"c\":\"ANALYZER\","
	                           "\"id\":1,\"msg\":\"m\"}",
	                           false),
	                    "T W ANALYZER m\n");
}

static void test_not_log_lines(void **state)
{
	log_event ev;
	const char *bad[] = {
	    "",
	    "plain text",
	    "{\"t\":{\"$date\":\"T\"},\"s\":\"I\",\"c\":\"X\"}",              /* no msg */
	    "{\"t\":{\"$date\":\"T\"},\"s\":\"I\",\"c\":\"X\",\"msg\":\"m\"", /* cut */
	    "{\"t\":{\"$date\":\"T\"},\"s\":\"I\",\"c\":\"X\",\"msg\":\"m\",\"attr\":{", /* cut */
	    "[1,2]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(log_event_parse(bad[i], strlen(bad[i]), &ev));
	char deep[300];
	memset(deep, '[', sizeof(deep));
	snprintf(deep, sizeof(deep),
	         "{\"t\":{\"$date\":\"T\"},\"s\":\"I\",\"c\":\"X\",\"msg\":\"m\","
	         "\"attr\":{\"a\":");
	size_t n = strlen(deep);
	memset(deep + n, '[', sizeof(deep) - n - 1);
	deep[sizeof(deep) - 1] = '\0';
	assert_false(log_event_parse(deep, strlen(deep), &ev)); /* nesting bounded */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_finding),
	    cmocka_unit_test(test_summary_and_other_lines),
	    cmocka_unit_test(test_control_bytes_never_reach_the_terminal),
	    cmocka_unit_test(test_c1_controls_never_reach_the_terminal),
	    cmocka_unit_test(test_line_without_attributes),
	    cmocka_unit_test(test_not_log_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
