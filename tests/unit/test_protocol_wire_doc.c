/* wire_doc_validate(): the structural BSON check every decoder relies on.
 *
 * Corrupt documents are written byte by byte (the top-level length is
 * patched in by `fin`), each refused with the offset of the element at
 * fault. Valid documents of every type come from libbson's own builders.
 * The differential test mutates seed documents with a fixed PRNG and holds
 * the validator to what libbson's reader can do: whatever passes must be
 * walkable with bson_iter_* down to the last nested element, and whatever
 * libbson can walk must pass. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "protocol/frame.h"
#include "protocol/opmsg.h"
#include "protocol/wire_doc.h"
#include "tests/fuzz/bson_walk.h"

static bool check(const uint8_t *p, size_t n, wire_error *err)
{
	memset(err, 0, sizeof(*err));
	return wire_doc_validate(p, n, err, "test document");
}

/* Writes the top-level length; returns n for the call site. */
static size_t fin(uint8_t *b, size_t n)
{
	wire_write_i32(b, (int32_t)n);
	return n;
}

#define REFUSED_AT(bytes, at, words)                                                               \
	refused_at(bytes, fin(bytes, sizeof(bytes)), at, words, __LINE__)

static void refused_at(uint8_t *b, size_t n, size_t at, const char *words, int line)
{
	wire_error err;
	char want[96];
	if (check(b, n, &err)) {
		fprintf(stderr, "line %d: accepted\n", line);
		fail();
	}
	assert_int_equal(err.code, WIRE_ERR_INVALID_BSON);
	assert_string_equal(err.code_name, "InvalidBSON");
	snprintf(want, sizeof want,
	         "test document is not valid BSON: corrupt element at byte %zu of %zu", at, n);
	if (!strstr(err.msg, want) || !strstr(err.msg, words)) {
		fprintf(stderr, "line %d: got \"%s\", want \"%s\" and \"%s\"\n", line, err.msg,
		        want, words);
		fail();
	}
	/* wire_iter (wire_iter.h) stops on each corruption where libbson's
	 * iterator stops, in the same state */
	if (!bw_iters_agree(b, (uint32_t)n)) {
		fprintf(stderr, "line %d: wire_iter and libbson's iterator differ\n", line);
		fail();
	}
}

static void test_corrupt_types_and_keys(void **state)
{
	uint8_t unknown[] = {0, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0x14, 'b', 0, 0};
	REFUSED_AT(unknown, 11, "unknown element type");
	uint8_t high[] = {0, 0, 0, 0, 0x80, 'b', 0, 0};
	REFUSED_AT(high, 4, "unknown element type");
	/* 0x00 is only a terminator: here it comes before the end */
	uint8_t early_eod[] = {0, 0, 0, 0, 0x00, 'a', 0, 0x0a, 'b', 0, 0};
	REFUSED_AT(early_eod, 4, "unknown element type");
	/* the key's only NUL is the document's terminator */
	uint8_t key[] = {0, 0, 0, 0, 0x0a, 'a', 'b', 'c', 0};
	REFUSED_AT(key, 4, "key not NUL-terminated");
	/* a nested key running into the nested document's terminator */
	uint8_t nested_key[] = {0, 0, 0, 0, 0x03, 'd', 0, 8, 0, 0, 0, 0x0a, 'x', 'y', 0, 0};
	REFUSED_AT(nested_key, 11, "key not NUL-terminated");
}

static void test_corrupt_fixed_width(void **state)
{
	uint8_t i32[] = {0, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0};
	REFUSED_AT(i32, 4, "runs past the end");
	uint8_t dbl[] = {0, 0, 0, 0, 0x01, 'a', 0, 1, 2, 3, 4, 5, 6, 7, 0};
	REFUSED_AT(dbl, 4, "runs past the end");
	uint8_t oid[] = {0, 0, 0, 0, 0x07, 'a', 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0};
	REFUSED_AT(oid, 4, "runs past the end");
	uint8_t dec[] = {0, 0, 0, 0, 0x13, 'a', 0,  1,  2,  3,  4,
	                 5, 6, 7, 8, 9,    10,  11, 12, 13, 14, 0};
	REFUSED_AT(dec, 4, "runs past the end");
	uint8_t b2[] = {0, 0, 0, 0, 0x08, 'a', 0, 2, 0};
	REFUSED_AT(b2, 4, "boolean neither 0 nor 1");
	uint8_t bnone[] = {0, 0, 0, 0, 0x08, 'a', 0, 0};
	REFUSED_AT(bnone, 4, "boolean");
}

static void test_corrupt_strings(void **state)
{
	/* string, code and symbol share the rules */
	static const uint8_t types[] = {0x02, 0x0d, 0x0e};
	for (size_t i = 0; i < sizeof types; i++) {
		uint8_t zero[] = {0, 0, 0, 0, types[i], 's', 0, 0, 0, 0, 0, 0};
		REFUSED_AT(zero, 4, "string length");
		uint8_t past[] = {0, 0, 0, 0, types[i], 's', 0, 9, 0, 0, 0, 'h', 'i', 0, 0};
		REFUSED_AT(past, 4, "string length");
		/* length reaching the terminator: the string would swallow it */
		uint8_t swallow[] = {0, 0, 0, 0, types[i], 's', 0, 4, 0, 0, 0, 'h', 'i', 0, 0};
		REFUSED_AT(swallow, 4, "string length");
		uint8_t no_nul[] = {0, 0, 0, 0, types[i], 's', 0, 2, 0, 0, 0, 'h', 'i', 0};
		REFUSED_AT(no_nul, 4, "not ending in NUL");
		uint8_t negative[] = {0,    0,    0,    0,    types[i], 's', 0,
		                      0xfe, 0xff, 0xff, 0xff, 'h',      0,   0};
		REFUSED_AT(negative, 4, "string length");
		uint8_t short_len[] = {0, 0, 0, 0, types[i], 's', 0, 1, 0, 0};
		REFUSED_AT(short_len, 4, "string length");
	}
}

static void test_corrupt_documents(void **state)
{
	static const uint8_t types[] = {0x03, 0x04};
	for (size_t i = 0; i < sizeof types; i++) {
		uint8_t past[] = {0, 0, 0, 0, types[i], 'd', 0, 6, 0, 0, 0, 0, 0};
		REFUSED_AT(past, 4, "embedded document");
		uint8_t tiny[] = {0, 0, 0, 0, types[i], 'd', 0, 4, 0, 0, 0, 0, 0};
		REFUSED_AT(tiny, 4, "embedded document");
		/* inner length fits but its last byte is not 0x00 */
		uint8_t unterminated[] = {0, 0, 0,    0,   types[i], 'd',  0,   8, 0,
		                          0, 0, 0x0a, 'x', 0,        0x0a, 'y', 0, 0};
		REFUSED_AT(unterminated, 4, "embedded document");
		uint8_t negative[] = {0, 0, 0, 0, types[i], 'd', 0, 0xfb, 0xff, 0xff, 0xff, 0, 0};
		REFUSED_AT(negative, 4, "embedded document");
		uint8_t cut[] = {0, 0, 0, 0, types[i], 'd', 0, 5, 0, 0};
		REFUSED_AT(cut, 4, "embedded document");
	}
	/* an error inside a nested document names its absolute offset */
	uint8_t deep_bool[] = {0, 0, 0, 0, 0x03, 'd', 0, 9, 0, 0, 0, 0x08, 'b', 0, 7, 0, 0};
	REFUSED_AT(deep_bool, 11, "boolean");
	/* the nested document's terminator ends its elements: an int32 in it
	 * may not borrow the outer document's bytes */
	uint8_t borrow[] = {0,    0,   0, 0, 0x03, 'd', 0, 10, 0, 0, 0,
	                    0x10, 'i', 0, 1, 0,    0,   0, 0,  0, 0};
	REFUSED_AT(borrow, 11, "runs past the end");
}

static void test_corrupt_binary(void **state)
{
	uint8_t past[] = {0, 0, 0, 0, 0x05, 'b', 0, 3, 0, 0, 0, 0, 'x', 'y', 0};
	REFUSED_AT(past, 4, "binary length");
	uint8_t negative[] = {0, 0, 0, 0, 0x05, 'b', 0, 0xff, 0xff, 0xff, 0xff, 0, 'x', 0};
	REFUSED_AT(negative, 4, "binary length");
	uint8_t no_subtype[] = {0, 0, 0, 0, 0x05, 'b', 0, 0, 0, 0, 0, 0};
	REFUSED_AT(no_subtype, 4, "binary length");
	/* subtype 2: the inner length must be the outer one minus 4 */
	uint8_t old_bad[] = {0, 0, 0, 0, 0x05, 'b', 0, 5, 0, 0, 0, 2, 0, 0, 0, 0, 'x', 0};
	REFUSED_AT(old_bad, 4, "subtype 2");
	uint8_t old_short[] = {0, 0, 0, 0, 0x05, 'b', 0, 3, 0, 0, 0, 2, 1, 2, 3, 0};
	REFUSED_AT(old_short, 4, "subtype 2");
	uint8_t old_ok[] = {0, 0, 0, 0, 0x05, 'b', 0, 5, 0, 0, 0, 2, 1, 0, 0, 0, 'x', 0};
	wire_error err;
	assert_true(check(old_ok, fin(old_ok, sizeof old_ok), &err));
}

static void test_corrupt_regex_dbpointer(void **state)
{
	uint8_t one_cstring[] = {0, 0, 0, 0, 0x0b, 'r', 0, 'a', 0, 'i', 0};
	REFUSED_AT(one_cstring, 4, "regular expression");
	uint8_t none[] = {0, 0, 0, 0, 0x0b, 'r', 0, 'a', 'b', 0};
	REFUSED_AT(none, 4, "regular expression");
	uint8_t ok[] = {0, 0, 0, 0, 0x0b, 'r', 0, 'a', 0, 'i', 0, 0};
	wire_error err;
	assert_true(check(ok, fin(ok, sizeof ok), &err));

	uint8_t zero[] = {0, 0, 0, 0, 0x0c, 'p', 0, 0, 0,  0,  0,  1,
	                  2, 3, 4, 5, 6,    7,   8, 9, 10, 11, 12, 0};
	REFUSED_AT(zero, 4, "DBPointer");
	uint8_t no_oid[] = {0, 0, 0, 0, 0x0c, 'p', 0, 2, 0, 0,  0,  'c', 0,
	                    1, 2, 3, 4, 5,    6,   7, 8, 9, 10, 11, 0};
	REFUSED_AT(no_oid, 4, "DBPointer");
	uint8_t no_nul[] = {0, 0, 0, 0, 0x0c, 'p', 0, 2, 0, 0,  0,  'c', 'd',
	                    1, 2, 3, 4, 5,    6,   7, 8, 9, 10, 11, 12,  0};
	REFUSED_AT(no_nul, 4, "DBPointer");
	uint8_t good[] = {0, 0, 0, 0, 0x0c, 'p', 0, 2, 0, 0,  0,  'c', 0,
	                  1, 2, 3, 4, 5,    6,   7, 8, 9, 10, 11, 12,  0};
	assert_true(check(good, fin(good, sizeof good), &err));
}

static void test_corrupt_codewscope(void **state)
{
	/* total 15: itself (4), code length (4), "x\0" (2), empty scope (5) */
	uint8_t good[] = {0, 0, 0, 0,   0x0f, 'c', 0, 15, 0, 0, 0, 2,
	                  0, 0, 0, 'x', 0,    5,   0, 0,  0, 0, 0};
	wire_error err;
	assert_true(check(good, fin(good, sizeof good), &err));

	uint8_t small_total[] = {0, 0, 0, 0,   0x0f, 'c', 0, 13, 0, 0, 0, 2,
	                         0, 0, 0, 'x', 0,    5,   0, 0,  0, 0, 0};
	REFUSED_AT(small_total, 4, "code-with-scope");
	uint8_t big_total[] = {0, 0, 0, 0,   0x0f, 'c', 0, 16, 0, 0, 0, 2,
	                       0, 0, 0, 'x', 0,    5,   0, 0,  0, 0, 0};
	REFUSED_AT(big_total, 4, "code-with-scope");
	uint8_t zero_code[] = {0, 0, 0, 0,   0x0f, 'c', 0, 15, 0, 0, 0, 0,
	                       0, 0, 0, 'x', 0,    5,   0, 0,  0, 0, 0};
	REFUSED_AT(zero_code, 4, "code-with-scope");
	uint8_t code_no_nul[] = {0, 0, 0, 0,   0x0f, 'c', 0, 15, 0, 0, 0, 2,
	                         0, 0, 0, 'x', 'y',  5,   0, 0,  0, 0, 0};
	REFUSED_AT(code_no_nul, 4, "code-with-scope");
	/* the scope's own length disagrees with what the total leaves for it */
	uint8_t scope_len[] = {0, 0, 0, 0,   0x0f, 'c', 0, 15, 0, 0, 0, 2,
	                       0, 0, 0, 'x', 0,    6,   0, 0,  0, 0, 0};
	REFUSED_AT(scope_len, 4, "code-with-scope");
	uint8_t scope_unterminated[] = {0, 0, 0, 0,   0x0f, 'c', 0, 15, 0, 0, 0, 2,
	                                0, 0, 0, 'x', 0,    5,   0, 0,  0, 9, 0};
	REFUSED_AT(scope_unterminated, 4, "code-with-scope");
	/* the code string's length leaves no room for a scope */
	uint8_t code_long[] = {0, 0, 0, 0,   0x0f, 'c', 0, 15, 0, 0, 0, 3,
	                       0, 0, 0, 'x', 0,    5,   0, 0,  0, 0, 0};
	REFUSED_AT(code_long, 4, "code-with-scope");
	/* a corrupt element inside the scope */
	uint8_t inner[] = {0, 0,   0, 0, 0x0f, 'c', 0, 19,   0,   0, 0, 2, 0, 0,
	                   0, 'x', 0, 9, 0,    0,   0, 0x08, 'b', 0, 3, 0, 0};
	REFUSED_AT(inner, 21, "boolean");
}

static void test_top_level_frame(void **state)
{
	uint8_t b[] = {0, 0, 0, 0, 0x0a, 'a', 0, 0};
	wire_error err;
	fin(b, sizeof b);
	assert_true(check(b, sizeof b, &err));
	/* the declared length must be the size exactly */
	assert_false(check(b, sizeof b - 1, &err));
	assert_non_null(strstr(err.msg, "corrupt element at byte 0 of 7"));
	b[0] = 9;
	assert_false(check(b, sizeof b, &err));
	assert_non_null(strstr(err.msg, "declared length"));
	b[0] = 8;
	b[7] = 1;
	assert_false(check(b, sizeof b, &err));
	uint8_t empty[] = {5, 0, 0, 0, 0};
	assert_true(check(empty, sizeof empty, &err));
	assert_false(check(empty, 4, &err));
}

/* {a: {a: ... {} ...}} nested `levels` deep below the top document */
static uint8_t *nested(int levels, size_t *n)
{
	*n = 5 + (size_t)levels * 8;
	uint8_t *b = malloc(*n);
	/* written front to back: each level is its length, 0x03 "a" 0; then the
	 * innermost {} and one terminator per level */
	size_t off = 0;
	for (int i = 0; i < levels; i++) {
		size_t len = 5 + (size_t)(levels - i) * 8;
		wire_write_i32(b + off, (int32_t)len);
		b[off + 4] = 0x03;
		b[off + 5] = 'a';
		b[off + 6] = 0;
		off += 7;
	}
	wire_write_i32(b + off, 5);
	b[off + 4] = 0;
	off += 5;
	memset(b + off, 0, *n - off);
	return b;
}

static void test_depth_limit(void **state)
{
	size_t n;
	wire_error err;
	uint8_t *ok = nested(WIRE_MAX_BSON_DEPTH, &n);
	bson_t b;
	assert_true(bson_init_static(&b, ok, n));
	size_t off;
	assert_true(bson_validate(&b, BSON_VALIDATE_NONE, &off));
	assert_true(check(ok, n, &err));
	free(ok);

	uint8_t *deep = nested(WIRE_MAX_BSON_DEPTH + 1, &n);
	assert_true(bson_init_static(&b, deep, n));
	assert_true(bson_validate(&b, BSON_VALIDATE_NONE, &off)); /* libbson has no limit */
	assert_false(check(deep, n, &err));
	assert_int_equal(err.code, WIRE_ERR_INVALID_BSON);
	char want[96];
	snprintf(want, sizeof want, "nested deeper than 256 levels (at byte %d of %zu)",
	         WIRE_MAX_BSON_DEPTH * 7 + 4, n);
	assert_non_null(strstr(err.msg, want));
	free(deep);

	/* 40,000 deep, the old fuzz crash: refused without a stack overflow */
	deep = nested(40000, &n);
	assert_false(check(deep, n, &err));
	free(deep);
}

/* Every BSON type, built by libbson, nested in a document and an array and
 * inside a code-with-scope scope. */
static bson_t *every_type(void)
{
	bson_t *d = bson_new(), sub, arr, scope;
	bson_oid_t oid;
	bson_decimal128_t dec = {.high = 0x3040000000000000ull, .low = 1};
	bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
	bson_init(&scope);
	BSON_APPEND_INT32(&scope, "x", 1);
	BSON_APPEND_UTF8(&scope, "s", "scope");
	BSON_APPEND_DOUBLE(d, "double", 1.5);
	BSON_APPEND_UTF8(d, "string", "hello");
	bson_append_utf8(d, "nul", -1, "a\0b", 3);
	BSON_APPEND_DOCUMENT_BEGIN(d, "doc", &sub);
	BSON_APPEND_INT64(&sub, "i64", 1);
	BSON_APPEND_DOCUMENT(&sub, "empty", &(bson_t)BSON_INITIALIZER);
	bson_append_document_end(d, &sub);
	BSON_APPEND_ARRAY_BEGIN(d, "array", &arr);
	BSON_APPEND_INT32(&arr, "0", 1);
	BSON_APPEND_UTF8(&arr, "1", "two");
	bson_append_array_end(d, &arr);
	BSON_APPEND_BINARY(d, "bin", BSON_SUBTYPE_BINARY, (const uint8_t *)"abc", 3);
	BSON_APPEND_BINARY(d, "bin_old", BSON_SUBTYPE_BINARY_DEPRECATED, (const uint8_t *)"abc", 3);
	BSON_APPEND_BINARY(d, "bin_empty", BSON_SUBTYPE_UUID, NULL, 0);
	BSON_APPEND_UNDEFINED(d, "undefined");
	BSON_APPEND_OID(d, "oid", &oid);
	BSON_APPEND_BOOL(d, "true", true);
	BSON_APPEND_BOOL(d, "false", false);
	BSON_APPEND_DATE_TIME(d, "date", 1700000000000);
	BSON_APPEND_NULL(d, "null");
	BSON_APPEND_REGEX(d, "regex", "^a.*", "i");
	BSON_APPEND_REGEX(d, "regex_empty", "", "");
	BSON_APPEND_DBPOINTER(d, "dbpointer", "db.coll", &oid);
	BSON_APPEND_CODE(d, "code", "function() {}");
	BSON_APPEND_SYMBOL(d, "symbol", "sym");
	BSON_APPEND_CODE_WITH_SCOPE(d, "cws", "function() { return x; }", &scope);
	BSON_APPEND_CODE_WITH_SCOPE(d, "cws_empty", "", &(bson_t)BSON_INITIALIZER);
	BSON_APPEND_INT32(d, "int32", -7);
	BSON_APPEND_TIMESTAMP(d, "timestamp", 1, 2);
	BSON_APPEND_INT64(d, "int64", INT64_MIN);
	BSON_APPEND_DECIMAL128(d, "decimal", &dec);
	BSON_APPEND_MAXKEY(d, "maxkey");
	BSON_APPEND_MINKEY(d, "minkey");
	BSON_APPEND_INT32(d, "", 0); /* an empty key */
	bson_destroy(&scope);
	return d;
}

/* d inside a document, an array and a code-with-scope scope. */
static bson_t *nested_every_way(const bson_t *d)
{
	bson_t *outer = bson_new(), arr, scope;
	BSON_APPEND_DOCUMENT(outer, "d", d);
	BSON_APPEND_ARRAY_BEGIN(outer, "a", &arr);
	BSON_APPEND_DOCUMENT(&arr, "0", d);
	bson_append_array_end(outer, &arr);
	bson_init(&scope);
	BSON_APPEND_DOCUMENT(&scope, "d", d);
	BSON_APPEND_CODE_WITH_SCOPE(outer, "c", "f()", &scope);
	bson_destroy(&scope);
	return outer;
}

static void test_every_type_accepted(void **state)
{
	bson_t *d = every_type(), *outer = nested_every_way(d);
	wire_error err;
	assert_true(check(bson_get_data(d), d->len, &err));
	size_t off;
	assert_true(bson_validate(d, BSON_VALIDATE_NONE, &off));
	assert_true(check(bson_get_data(outer), outer->len, &err));
	bson_destroy(outer);
	bson_destroy(d);
}

/* wire_iter_next and wire_iter_recurse (wire_iter.h) leave the iterator in
 * libbson's state at every step over every type, at the top, nested in a
 * document and an array, inside a scope; and the accessors read the same
 * values through either. */
static void test_iter_steps_as_libbson(void **state)
{
	bson_t *d = every_type(), *outer = nested_every_way(d);
	assert_true(bw_iters_agree(bson_get_data(d), d->len));
	assert_true(bw_iters_agree(bson_get_data(outer), outer->len));
	/* by hand, for a few accessors: the state is what they read */
	bson_iter_t it;
	size_t n = 0;
	assert_true(bson_iter_init(&it, d));
	while (wire_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		if (!strcmp(k, "string"))
			assert_string_equal(bson_iter_utf8(&it, NULL), "hello");
		if (!strcmp(k, "regex")) {
			const char *opts;
			assert_string_equal(bson_iter_regex(&it, &opts), "^a.*");
			assert_string_equal(opts, "i");
		}
		if (!strcmp(k, "int64"))
			assert_true(bson_iter_int64(&it) == INT64_MIN);
		if (!strcmp(k, "array")) {
			bson_iter_t child;
			assert_true(wire_iter_recurse(&it, &child));
			assert_true(wire_iter_next(&child) && bson_iter_int32(&child) == 1);
			assert_true(wire_iter_next(&child));
			assert_string_equal(bson_iter_utf8(&child, NULL), "two");
			assert_false(wire_iter_next(&child));
			assert_int_equal(child.err_off, 0);
		}
		n++;
	}
	assert_int_equal(n, bson_count_keys(d));
	assert_int_equal(it.err_off, 0);
	bson_destroy(outer);
	bson_destroy(d);
}

/* wire_doc_keys walks every type's size as libbson's iterator does: the
 * same keys, in order, for the every-type document and a nested one; a
 * short `cap` still counts them all. */
static void test_keys_match_the_iterator(void **state)
{
	bson_t *d = every_type(), *outer = bson_new();
	BSON_APPEND_DOCUMENT(outer, "first", d);
	BSON_APPEND_UTF8(outer, "after", "x");
	const bson_t *docs[] = {d, outer};
	for (size_t t = 0; t < 2; t++) {
		const char *keys[64];
		uint32_t lens[64];
		size_t n = wire_doc_keys(bson_get_data(docs[t]), docs[t]->len, keys, lens, 64);
		bson_iter_t it;
		size_t i = 0;
		assert_true(bson_iter_init(&it, docs[t]));
		while (bson_iter_next(&it)) {
			assert_true(i < n);
			assert_string_equal(keys[i], bson_iter_key(&it));
			assert_int_equal(lens[i], strlen(bson_iter_key(&it)));
			i++;
		}
		assert_int_equal(i, n);
		assert_int_equal(wire_doc_keys(bson_get_data(docs[t]), docs[t]->len, keys, lens, 1),
		                 n);
	}
	const uint8_t empty[5] = {5, 0, 0, 0, 0};
	assert_int_equal(wire_doc_keys(empty, 5, NULL, NULL, 0), 0);
	bson_destroy(outer);
	bson_destroy(d);
}

/* wire_doc_find lands on the same element as bson_iter_find for every key
 * of the every-type document (each type's size walked over), takes the
 * first of two equal keys, and compares whole keys only. */
static void test_find_matches_the_iterator(void **state)
{
	bson_t *d = every_type();
	BSON_APPEND_INT32(d, "int32", 2); /* a second "int32" */
	const uint8_t *p = bson_get_data(d);
	bson_iter_t it;
	assert_true(bson_iter_init(&it, d));
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		bson_iter_t first;
		assert_true(bson_iter_init_find(&first, d, k));
		const uint8_t *e = wire_doc_find(p, d->len, k, strlen(k));
		assert_non_null(e);
		assert_ptr_equal(e + 1, (const uint8_t *)bson_iter_key(&first));
		assert_int_equal(e[0], bson_iter_type(&first));
	}
	const uint8_t *first = wire_doc_find(p, d->len, "int32", 5);
	int32_t v;
	memcpy(&v, first + 1 + 6, sizeof(v)); /* after the type and "int32\0" */
	assert_int_equal(v, -7);
	assert_null(wire_doc_find(p, d->len, "int3", 4));
	assert_null(wire_doc_find(p, d->len, "int32x", 6));
	assert_null(wire_doc_find(p, d->len, "absent", 6));
	const uint8_t empty[5] = {5, 0, 0, 0, 0};
	assert_null(wire_doc_find(empty, 5, "", 0));
	bson_destroy(d);
}

/* Behaviour change: bson_validate refused a key that is not UTF-8 (it never
 * checked string values); the structural check accepts both, as mongod's
 * default validation does. */
static void test_invalid_utf8_accepted(void **state)
{
	uint8_t key[] = {0, 0, 0, 0, 0x10, 0xff, 0xfe, 0, 1, 0, 0, 0, 0};
	uint8_t value[] = {0, 0, 0, 0, 0x02, 's', 0, 3, 0, 0, 0, 0xc3, 0x28, 0, 0};
	uint8_t overlong[] = {0, 0, 0, 0, 0x02, 0xc0, 0xaf, 0, 2, 0, 0, 0, 0xed, 0, 0};
	wire_error err;
	bson_t b;
	size_t off;
	fin(key, sizeof key);
	assert_true(bson_init_static(&b, key, sizeof key));
	assert_false(bson_validate(&b, BSON_VALIDATE_NONE, &off)); /* the old refusal */
	assert_true(check(key, sizeof key, &err));
	assert_true(check(value, fin(value, sizeof value), &err));
	assert_true(check(overlong, fin(overlong, sizeof overlong), &err));

	/* and so does the OP_MSG decoder, for a body that bson_validate refused */
	bson_t *body = BCON_NEW("ping", BCON_INT32(1), "$db", "admin");
	bson_append_utf8(body, "k\xff", -1, "v\xc3\x28", -1);
	assert_false(bson_validate(body, BSON_VALIDATE_NONE, &off));
	size_t len;
	uint8_t *msg = opmsg_build(1, 0, 0, bson_get_data(body), body->len, &len);
	opmsg m;
	assert_true(opmsg_parse(msg, len, &m, &err));
	free(msg);
	bson_destroy(body);
}

/* ---- differential: libbson's reader is the judge ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_rand(void)
{
	rng ^= rng << 13; /* xorshift64 */
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

/* One mutation of buf (len bytes, room for cap); returns the new length. */
static size_t mutate(uint8_t *b, size_t len, size_t cap)
{
	static const uint8_t interesting[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x0b,
	                                      0x0c, 0x0f, 0x13, 0x14, 0x7f, 0x80, 0xff};
	static const uint32_t lens[] = {0, 1, 3, 4, 5, 12, 13, 14, 0x7fffffff, 0xffffffff};
	size_t at = next_rand() % len;
	switch (next_rand() % 6) {
	case 0:
		b[at] ^= (uint8_t)(1u << (next_rand() % 8));
		break;
	case 1:
		b[at] = interesting[next_rand() % sizeof interesting];
		break;
	case 2:
		if (at + 4 <= len) {
			uint32_t v = next_rand() % 2
			                 ? lens[next_rand() % 10]
			                 : wire_read_u32(b + at) + (next_rand() % 9) - 4;
			wire_write_i32(b + at, (int32_t)v);
		}
		break;
	case 3: /* delete a byte */
		if (len > 5) {
			memmove(b + at, b + at + 1, len - at - 1);
			len--;
		}
		break;
	case 4: /* insert a byte */
		if (len < cap) {
			memmove(b + at + 1, b + at, len - at);
			b[at] = interesting[next_rand() % sizeof interesting];
			len++;
		}
		break;
	default:
		b[at] = (uint8_t)next_rand();
	}
	return len;
}

static void test_differential_mutations(void **state)
{
	bson_t *seeds[4];
	seeds[0] = every_type();
	seeds[1] = bson_new();
	BSON_APPEND_UTF8(seeds[1], "insert", "orders");
	BSON_APPEND_DOCUMENT(seeds[1], "doc", seeds[0]);
	bson_t arr;
	BSON_APPEND_ARRAY_BEGIN(seeds[1], "documents", &arr);
	BSON_APPEND_DOCUMENT(&arr, "0", seeds[0]);
	BSON_APPEND_DOCUMENT(&arr, "1", seeds[0]);
	bson_append_array_end(seeds[1], &arr);
	BSON_APPEND_UTF8(seeds[1], "$db", "test");
	seeds[2] = BCON_NEW("find", "c", "filter", "{", "a", BCON_INT32(1), "b", "{", "$gt",
	                    BCON_DOUBLE(2.0), "}", "}", "sort", "{", "a", BCON_INT32(1), "}");
	seeds[3] = bson_new();
	bson_t scope;
	bson_init(&scope);
	BSON_APPEND_DOCUMENT(&scope, "inner", seeds[2]);
	BSON_APPEND_CODE_WITH_SCOPE(seeds[3], "c", "f", &scope);
	BSON_APPEND_CODE_WITH_SCOPE(seeds[3], "c2", "g", &scope);
	bson_destroy(&scope);

	unsigned accepted = 0, refused = 0, libbson_lenient = 0, utf8_only = 0;
	uint8_t *buf = malloc(4096);
	for (int s = 0; s < 4; s++) {
		for (int round = 0; round < 3000; round++) {
			size_t len = seeds[s]->len;
			assert_true(len + 16 <= 4096);
			memcpy(buf, bson_get_data(seeds[s]), len);
			int muts = 1 + (int)(next_rand() % 4);
			for (int m = 0; m < muts; m++)
				len = mutate(buf, len, 4096);
			/* keep the outer frame right most of the time, so the walk
			 * gets past it */
			if (next_rand() % 8) {
				wire_write_i32(buf, (int32_t)len);
				buf[len - 1] = 0;
			}
			/* an exact-size copy, so ASan sees any read past the end */
			uint8_t *doc = malloc(len);
			memcpy(doc, buf, len);
			wire_error err;
			bool ours = wire_doc_validate(doc, len, &err, "mutant");
			bool readable = bw_walk_all(doc, len, 0) == 1;
			if (!bw_iters_agree(doc, (uint32_t)len)) {
				fprintf(stderr, "seed %d round %d: wire_iter and libbson differ\n",
				        s, round);
				fail();
			}
			bson_t b;
			size_t off;
			bool theirs = bson_init_static(&b, doc, len) &&
			              bson_validate(&b, BSON_VALIDATE_NONE, &off);
			if (ours != readable) {
				fprintf(stderr,
				        "seed %d round %d: ours %d, libbson reader %d: %s\n", s,
				        round, ours, readable, err.msg);
				fail();
			}
			/* no false refusals: what bson_validate accepts passes, unless
			 * libbson's own reader cannot walk it (bson_validate skips a
			 * nested document or scope whose frame is bad, length < 5 or
			 * no 0x00 at its end, without looking inside) */
			if (theirs && !ours) {
				assert_false(readable);
				libbson_lenient++;
			}
			if (ours && !theirs) {
				/* only the UTF-8 of a key may make the difference */
				assert_false(bw_keys_utf8(doc, len));
				utf8_only++;
			}
			if (ours)
				accepted++;
			else
				refused++;
			free(doc);
		}
	}
	printf("mutants: %u accepted, %u refused; bson_validate accepted %u that libbson's "
	       "reader cannot walk with nested frames checked, refused %u only for a key's UTF-8\n",
	       accepted, refused, libbson_lenient, utf8_only);
	assert_true(accepted > 100 && refused > 100);
	free(buf);
	for (int s = 0; s < 4; s++)
		bson_destroy(seeds[s]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys_match_the_iterator),
	    cmocka_unit_test(test_corrupt_types_and_keys),
	    cmocka_unit_test(test_corrupt_fixed_width),
	    cmocka_unit_test(test_corrupt_strings),
	    cmocka_unit_test(test_corrupt_documents),
	    cmocka_unit_test(test_corrupt_binary),
	    cmocka_unit_test(test_corrupt_regex_dbpointer),
	    cmocka_unit_test(test_corrupt_codewscope),
	    cmocka_unit_test(test_top_level_frame),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_every_type_accepted),
	    cmocka_unit_test(test_find_matches_the_iterator),
	    cmocka_unit_test(test_iter_steps_as_libbson),
	    cmocka_unit_test(test_invalid_utf8_accepted),
	    cmocka_unit_test(test_differential_mutations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
