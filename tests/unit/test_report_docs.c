/* Inserted documents in a capture: the stub keeps no value, and the
 * document the report stands back up from it gets the same answer from the
 * large-document rule as the real one did (the same size, the same field
 * or array named, the same length), so the rule fires offline as it did
 * live. A version-1 stub ({$size} alone) is left as it was. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analyzers/rules/rule_doc.h"
#include "protocol/capture.h"

#define MARKER "mk-secret-0042"

static char *filled(size_t n)
{
	char *s = malloc(n + 1);
	memset(s, 'x', n);
	memcpy(s, MARKER, strlen(MARKER));
	s[n] = '\0';
	return s;
}

static void add_array(bson_t *d, const char *key, uint32_t n, bool docs)
{
	bson_t arr, e;
	bson_append_array_begin(d, key, -1, &arr);
	for (uint32_t i = 0; i < n; i++) {
		char kb[16];
		const char *ks;
		bson_uint32_to_string(i, &ks, kb, sizeof kb);
		if (docs) {
			bson_append_document_begin(&arr, ks, -1, &e);
			BSON_APPEND_UTF8(&e, "sku", MARKER);
			bson_append_document_end(&arr, &e);
		} else {
			BSON_APPEND_UTF8(&arr, ks, MARKER);
		}
	}
	bson_append_array_end(d, &arr);
}

/* The rule's verdict on doc and on the stand-in of its stub, at a few
 * limits around the document's own figures. */
static void same_verdict(const bson_t *doc)
{
	capture_doc_facts f;
	bson_t stub, back;
	capture_doc_measure(doc, &f);
	capture_doc_stub(&f, &stub);
	assert_null(memmem(bson_get_data(&stub), stub.len, MARKER, strlen(MARKER)));
	assert_true(capture_doc_synthesize(&stub, 48000000, &back));
	assert_int_equal(back.len, doc->len);
	const uint32_t bytes[] = {1000, 2097152, doc->len, doc->len - 1};
	const uint32_t arrays[] = {10, 1000, f.arr_len ? f.arr_len : 1,
	                           f.arr_len ? f.arr_len - 1 : 1};
	for (size_t b = 0; b < 4; b++)
		for (size_t a = 0; a < 4; a++) {
			doc_hit h1, h2;
			bool r1 = rule_doc_check(doc, bytes[b], arrays[a] ? arrays[a] : 1, &h1);
			bool r2 = rule_doc_check(&back, bytes[b], arrays[a] ? arrays[a] : 1, &h2);
			assert_int_equal(r1, r2);
			if (!r1)
				continue;
			assert_int_equal(h1.too_big, h2.too_big);
			assert_string_equal(h1.path, h2.path);
			assert_int_equal(h1.bytes, h2.bytes);
			if (!h1.too_big)
				assert_int_equal(h1.size, h2.size);
		}
	bson_destroy(&stub);
	bson_destroy(&back);
}

static void test_small_document(void **st)
{
	(void)st;
	bson_t *d =
	    BCON_NEW("_id", BCON_INT32(1), "name", MARKER, "tags", "[", MARKER, MARKER, "]");
	same_verdict(d);
	bson_destroy(d);
}

static void test_long_array(void **st)
{
	(void)st;
	bson_t d = BSON_INITIALIZER;
	BSON_APPEND_UTF8(&d, "name", MARKER);
	add_array(&d, "short", 3, false);
	add_array(&d, "items", 1500, false);
	same_verdict(&d);
	bson_destroy(&d);
}

static void test_array_under_array(void **st)
{
	(void)st;
	bson_t d = BSON_INITIALIZER, orders, o;
	bson_append_array_begin(&d, "orders", -1, &orders);
	bson_append_document_begin(&orders, "0", -1, &o);
	add_array(&o, "lines", 1200, true);
	bson_append_document_end(&orders, &o);
	bson_append_array_end(&d, &orders);
	same_verdict(&d);
	bson_destroy(&d);
}

static void test_one_field_holds_most(void **st)
{
	(void)st;
	char *blob = filled(3u << 20);
	bson_t d = BSON_INITIALIZER, p;
	BSON_APPEND_UTF8(&d, "name", MARKER);
	bson_append_document_begin(&d, "payload", -1, &p);
	BSON_APPEND_UTF8(&p, "blob", blob);
	BSON_APPEND_INT32(&p, "n", 1);
	bson_append_document_end(&d, &p);
	add_array(&d, "tags", 40, false);
	same_verdict(&d);
	bson_destroy(&d);
	free(blob);
}

static void test_no_field_holds_most(void **st)
{
	(void)st;
	char *part = filled(1u << 20);
	bson_t d = BSON_INITIALIZER;
	BSON_APPEND_UTF8(&d, "a", part);
	BSON_APPEND_UTF8(&d, "b", part);
	BSON_APPEND_UTF8(&d, "c", part);
	same_verdict(&d);
	bson_destroy(&d);
	free(part);
}

static void test_the_array_holds_most(void **st)
{
	(void)st;
	bson_t d = BSON_INITIALIZER, w;
	BSON_APPEND_UTF8(&d, "name", MARKER);
	bson_append_document_begin(&d, "wrap", -1, &w);
	add_array(&w, "items", 150000, false);
	bson_append_document_end(&d, &w);
	same_verdict(&d);
	bson_destroy(&d);
}

static void test_a_container_on_the_path_holds_most(void **st)
{
	(void)st;
	char *part = filled(1u << 20);
	bson_t d = BSON_INITIALIZER, w;
	BSON_APPEND_UTF8(&d, "name", MARKER);
	bson_append_document_begin(&d, "wrap", -1, &w);
	add_array(&w, "items", 1100, false);
	BSON_APPEND_UTF8(&w, "x", part);
	BSON_APPEND_UTF8(&w, "y", part);
	BSON_APPEND_UTF8(&w, "z", part);
	bson_append_document_end(&d, &w);
	same_verdict(&d);
	bson_destroy(&d);
	free(part);
}

static void test_stubs_that_stay_stubs(void **st)
{
	(void)st;
	bson_t out;
	bson_t *v1 = BCON_NEW("$size", BCON_INT32(5000000)); /* a version-1 capture's */
	assert_false(capture_doc_synthesize(v1, 48000000, &out));
	bson_t *liar =
	    BCON_NEW("$size", BCON_INT32(100), "$len", BCON_INT32(1000), "$arr", "a", "$big", "");
	assert_false(capture_doc_synthesize(liar, 48000000, &out)); /* 1000 elements in 100 B */
	bson_t *big =
	    BCON_NEW("$size", BCON_INT32(1000000), "$len", BCON_INT32(0), "$arr", "", "$big", "");
	assert_false(capture_doc_synthesize(big, 999999, &out)); /* over the budget */
	assert_true(capture_doc_synthesize(big, 1000000, &out));
	assert_int_equal(out.len, 1000000);
	bson_destroy(&out);
	bson_destroy(v1);
	bson_destroy(liar);
	bson_destroy(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_small_document),
	    cmocka_unit_test(test_long_array),
	    cmocka_unit_test(test_array_under_array),
	    cmocka_unit_test(test_one_field_holds_most),
	    cmocka_unit_test(test_no_field_holds_most),
	    cmocka_unit_test(test_the_array_holds_most),
	    cmocka_unit_test(test_a_container_on_the_path_holds_most),
	    cmocka_unit_test(test_stubs_that_stay_stubs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
