/* protocol/text: the bounded text builder behind shapes, ESR suggestions,
 * rule words and the log. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "protocol/text.h"

static void test_protocol_text_appends_all_or_nothing(void **state)
{
	char buf[8];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	text_str(&t, "abc");
	text_char(&t, 'd');
	assert_string_equal(text_finish(&t), "abcd");
	text_str(&t, "efgh"); /* 4 more do not fit in 7 */
	assert_true(t.overflow);
	assert_string_equal(text_finish(&t), "abcd");
	text_str(&t, "e"); /* nothing after an overflow */
	assert_string_equal(text_finish(&t), "abcd");
	assert_int_equal(t.len, 4);
}

static void test_protocol_text_exact_fit(void **state)
{
	char buf[5];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	text_str(&t, "abcd");
	assert_false(t.overflow);
	assert_string_equal(text_finish(&t), "abcd");
}

static void test_protocol_text_printf(void **state)
{
	char buf[16];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	text_printf(&t, "%u runs in %s", 60u, "60s");
	assert_string_equal(text_finish(&t), "60 runs in 60s");
	text_printf(&t, "%s", "toolong");
	assert_true(t.overflow);
	assert_string_equal(text_finish(&t), "60 runs in 60s"); /* all or nothing */
}

static void test_protocol_text_reserve_and_close(void **state)
{
	char buf[10];
	text_buf t;
	text_init_reserve(&t, buf, sizeof buf, 4); /* 6 bytes of text, 3 to close */
	text_str(&t, "[1,2,3");
	text_str(&t, ",4");
	assert_true(t.overflow);
	text_close(&t, "]");
	assert_string_equal(text_finish(&t), "[1,2,3]");
	text_close(&t, "}}}}"); /* cut at the end of the buffer, NUL kept */
	assert_int_equal(strlen(buf), sizeof buf - 1);
	text_str(&t, "x"); /* past the limit: refused, never written */
	assert_int_equal(strlen(buf), sizeof buf - 1);
}

static void test_protocol_text_mark_rewind(void **state)
{
	char buf[8];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	text_str(&t, "ab");
	size_t m = text_mark(&t);
	text_str(&t, "cdefghij");
	assert_true(t.overflow);
	text_rewind(&t, m);
	assert_false(t.overflow);
	text_str(&t, "cd");
	assert_string_equal(text_finish(&t), "abcd");
}

static void test_protocol_text_json_bytes(void **state)
{
	char buf[64];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	const char s[] = "a\"b\\c\nd\x01\xff";
	text_json_str(&t, s, sizeof s - 1, TEXT_JSON_QUOTED);
	/* bytes pass as they are; controls as \u00XX */
	assert_string_equal(text_finish(&t), "\"a\\\"b\\\\c\\u000ad\\u0001\xff\"");
	text_init(&t, buf, 6);
	text_json(&t, "abcdef");
	assert_true(t.overflow);
	assert_string_equal(text_finish(&t), ""); /* all or nothing */
}

static void test_protocol_text_json_utf8(void **state)
{
	char buf[64];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	const char s[] = "\xc3\xa9\n\t\xff\xc0\xaf\xed\xa0\x80x";
	text_json_str(&t, s, sizeof s - 1, TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
	assert_false(t.overflow);
	assert_string_equal(text_finish(&t),
	                    "\"\xc3\xa9\\n\\t\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffdx\"");
	assert_true(text_utf8_valid(buf));
}

/* A long string is cut between two characters and still closed. */
static void test_protocol_text_json_utf8_cut(void **state)
{
	char buf[12];
	text_buf t;
	text_init_reserve(&t, buf, sizeof buf, 2); /* 10 bytes, then the quote */
	const char s[] = "ab\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac";
	text_json_str(&t, s, sizeof s - 1, TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
	assert_true(t.overflow);
	assert_string_equal(text_finish(&t), "\"ab\xe2\x82\xac\xe2\x82\xac\"");
	assert_true(text_utf8_valid(buf));
}

static void test_protocol_text_utf8_seq(void **state)
{
	assert_int_equal(text_utf8_seq_len((const unsigned char *)"a"), 1);
	assert_int_equal(text_utf8_seq_len((const unsigned char *)"\xc3\xa9"), 2);
	assert_int_equal(text_utf8_seq_len((const unsigned char *)"\xf0\x9f\x98\x80"), 4);
	assert_int_equal(text_utf8_seq_len((const unsigned char *)"\xc0\x80"), 0); /* overlong */
	assert_int_equal(text_utf8_seq_len((const unsigned char *)"\xed\xa0\x80"),
	                 0); /* surrogate */
	assert_int_equal(text_utf8_seq_len((const unsigned char *)"\xf4\x90\x80\x80"), 0);
	assert_int_equal(text_utf8_seq_len((const unsigned char *)"\xe2\x82"), 0); /* cut by NUL */
	assert_false(text_utf8_valid("ok\xff"));
	assert_true(text_utf8_valid("ok \xe2\x82\xac"));
}

/* text_cat cuts as snprintf("%s%s", dst, s) would: the longest prefix that
 * fits, always terminated; nothing past cap is written. */
static void test_protocol_text_cat_cuts_as_snprintf(void **state)
{
	(void)state;
	static const char *const pieces[] = {"", "a", "abc", "abcdefgh", "abcdefghijkl"};
	for (size_t cap = 1; cap <= 10; cap++)
		for (size_t i = 0; i < 5; i++)
			for (size_t j = 0; j < 5; j++) {
				char got[16], want[16];
				memset(got, 'x', sizeof(got));
				got[0] = '\0';
				text_cat(got, cap, pieces[i]);
				text_cat(got, cap, pieces[j]);
				/* the first piece already cut: snprintf of the cut text */
				char cut[16];
				snprintf(cut, cap, "%s", pieces[i]);
				snprintf(want, cap, "%s%s", cut, pieces[j]);
				assert_string_equal(got, want);
				for (size_t k = cap; k < sizeof(got); k++)
					assert_int_equal(got[k], 'x');
			}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_protocol_text_appends_all_or_nothing),
	    cmocka_unit_test(test_protocol_text_exact_fit),
	    cmocka_unit_test(test_protocol_text_printf),
	    cmocka_unit_test(test_protocol_text_reserve_and_close),
	    cmocka_unit_test(test_protocol_text_mark_rewind),
	    cmocka_unit_test(test_protocol_text_json_bytes),
	    cmocka_unit_test(test_protocol_text_json_utf8),
	    cmocka_unit_test(test_protocol_text_json_utf8_cut),
	    cmocka_unit_test(test_protocol_text_utf8_seq),
	    cmocka_unit_test(test_protocol_text_cat_cuts_as_snprintf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
