/* A strict JSON checker (RFC 8259) for the fuzz targets whose output other
 * tools parse: SARIF and the JSON report (fuzz_report_diff), log lines
 * (fuzz_log_text), /findings (fuzz_findings_query). libbson's parser, which
 * the targets also run to read the structure back, lets through what a
 * stricter consumer refuses; this one does not:
 *
 *   - strings are valid UTF-8 (no overlong forms, no surrogates) with no
 *     raw byte below 0x20; escapes are the eight short ones and \uXXXX,
 *     a surrogate escape only as a high-low pair;
 *   - numbers follow the grammar: no nan, inf, leading zero, '+', or bare
 *     '.';
 *   - no key twice in one object (compared as written, the first
 *     JC_MAX_KEYS keys of each), unless JC_DUP_KEYS_OK: the JSON report's
 *     "apps" objects are keyed by application names as the aggregator
 *     keeps them, and two names can come out the same (cut to 127 bytes,
 *     or invalid bytes made U+FFFD);
 *   - one value, then nothing but white space.
 *
 * json_check(s, n, flags, why, whylen, at): true when s[0..n) is such a text;
 * false with why saying what, and *at (may be NULL) at which byte. Never
 * reads past s + n. */
#ifndef MG_TESTS_FUZZ_JSON_CHECK_H
#define MG_TESTS_FUZZ_JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The checker is the judge, not the code under test: no coverage feedback
 * from it (it cost a third of the executions' time, and its branches say
 * nothing about the writers'). */
#ifndef FZ_NO_COVERAGE
#if defined(__clang__) && __clang_major__ >= 13
#define FZ_NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define FZ_NO_COVERAGE
#endif
#endif

/* Keys compared for duplicates: the first JC_MAX_KEYS of each object (the
 * report's widest objects have about 20), so a deep text costs little stack. */
enum { JC_MAX_DEPTH = 1000, JC_MAX_KEYS = 32 };
enum { JC_DUP_KEYS_OK = 1 };

typedef struct jc_state {
	const unsigned char *s, *p, *e;
	const char *why; /* the first fault, or NULL */
	size_t at;
	unsigned flags;
} jc_state;

static inline FZ_NO_COVERAGE bool jc_fail(jc_state *j, const char *why)
{
	if (!j->why) {
		j->why = why;
		j->at = (size_t)(j->p - j->s);
	}
	return false;
}

static inline FZ_NO_COVERAGE void jc_ws(jc_state *j)
{
	while (j->p < j->e && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static inline FZ_NO_COVERAGE bool jc_lit(jc_state *j, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(j->e - j->p) < n || memcmp(j->p, word, n) != 0)
		return jc_fail(j, "not a JSON value");
	j->p += n;
	return true;
}

static inline FZ_NO_COVERAGE int jc_hex(unsigned char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

/* \uXXXX at p (after "\u"): its code unit, or -1. */
static inline FZ_NO_COVERAGE long jc_u4(jc_state *j)
{
	if (j->e - j->p < 4)
		return -1;
	long v = 0;
	for (int i = 0; i < 4; i++) {
		int d = jc_hex(j->p[i]);
		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	j->p += 4;
	return v;
}

/* One UTF-8 sequence at p, strictly: its length, or 0. */
static inline FZ_NO_COVERAGE size_t jc_utf8(const unsigned char *p, const unsigned char *e)
{
	size_t avail = (size_t)(e - p);
	unsigned c = p[0];
	size_t n = c < 0x80                 ? 1
	           : c >= 0xc2 && c <= 0xdf ? 2
	           : c >= 0xe0 && c <= 0xef ? 3
	           : c >= 0xf0 && c <= 0xf4 ? 4
	                                    : 0;
	if (n == 0 || n > avail)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
		return 0; /* overlong, surrogate, past U+10FFFF */
	return n;
}

/* p at the opening quote. */
static inline FZ_NO_COVERAGE bool jc_string(jc_state *j)
{
	j->p++;
	while (j->p < j->e) {
		unsigned char c = *j->p;
		if (c == '"') {
			j->p++;
			return true;
		}
		if (c < 0x20)
			return jc_fail(j, "raw control byte in a string");
		if (c != '\\') {
			size_t n = jc_utf8(j->p, j->e);
			if (!n)
				return jc_fail(j, "invalid UTF-8 in a string");
			j->p += n;
			continue;
		}
		if (++j->p >= j->e)
			break;
		c = *j->p++;
		if (c && strchr("\"\\/bfnrt", c))
			continue;
		if (c != 'u')
			return jc_fail(j, "unknown escape");
		long u = jc_u4(j);
		if (u < 0)
			return jc_fail(j, "bad \\u escape");
		if (u >= 0xdc00 && u < 0xe000)
			return jc_fail(j, "lone low surrogate escape");
		if (u >= 0xd800 && u < 0xdc00) {
			if (j->e - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
				return jc_fail(j, "high surrogate escape without its pair");
			j->p += 2;
			long lo = jc_u4(j);
			if (lo < 0xdc00 || lo >= 0xe000)
				return jc_fail(j, "high surrogate escape without its pair");
		}
	}
	return jc_fail(j, "unterminated string");
}

static inline FZ_NO_COVERAGE bool jc_digits(jc_state *j)
{
	const unsigned char *s = j->p;
	while (j->p < j->e && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s;
}

static inline FZ_NO_COVERAGE bool jc_number(jc_state *j)
{
	if (j->p < j->e && *j->p == '-')
		j->p++;
	if (j->p < j->e && *j->p == '0')
		j->p++;
	else if (!(j->p < j->e && *j->p >= '1' && *j->p <= '9') || !jc_digits(j))
		return jc_fail(j, "bad number");
	if (j->p < j->e && *j->p == '.') {
		j->p++;
		if (!jc_digits(j))
			return jc_fail(j, "bad number: no digit after '.'");
	}
	if (j->p < j->e && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		if (j->p < j->e && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (!jc_digits(j))
			return jc_fail(j, "bad number: no exponent digits");
	}
	return true;
}

static inline FZ_NO_COVERAGE bool jc_value(jc_state *j, int depth);

static inline FZ_NO_COVERAGE bool jc_object(jc_state *j, int depth)
{
	const unsigned char *key[JC_MAX_KEYS];
	size_t keylen[JC_MAX_KEYS], nkeys = 0;
	j->p++;
	jc_ws(j);
	if (j->p < j->e && *j->p == '}') {
		j->p++;
		return true;
	}
	for (;;) {
		jc_ws(j);
		if (j->p >= j->e || *j->p != '"')
			return jc_fail(j, "object key is not a string");
		const unsigned char *k = j->p;
		if (!jc_string(j))
			return false;
		size_t kl = (size_t)(j->p - k);
		for (size_t i = 0; !(j->flags & JC_DUP_KEYS_OK) && i < nkeys; i++)
			if (keylen[i] == kl && memcmp(key[i], k, kl) == 0)
				return jc_fail(j, "duplicate key in an object");
		if (nkeys < JC_MAX_KEYS) {
			key[nkeys] = k;
			keylen[nkeys++] = kl;
		}
		jc_ws(j);
		if (j->p >= j->e || *j->p != ':')
			return jc_fail(j, "no ':' after a key");
		j->p++;
		if (!jc_value(j, depth + 1))
			return false;
		jc_ws(j);
		if (j->p < j->e && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->e && *j->p == '}') {
			j->p++;
			return true;
		}
		return jc_fail(j, "no ',' or '}' after a member");
	}
}

static inline FZ_NO_COVERAGE bool jc_array(jc_state *j, int depth)
{
	j->p++;
	jc_ws(j);
	if (j->p < j->e && *j->p == ']') {
		j->p++;
		return true;
	}
	for (;;) {
		if (!jc_value(j, depth + 1))
			return false;
		jc_ws(j);
		if (j->p < j->e && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->e && *j->p == ']') {
			j->p++;
			return true;
		}
		return jc_fail(j, "no ',' or ']' after an element");
	}
}

static inline FZ_NO_COVERAGE bool jc_value(jc_state *j, int depth)
{
	jc_ws(j);
	if (depth > JC_MAX_DEPTH)
		return jc_fail(j, "nested too deep");
	if (j->p >= j->e)
		return jc_fail(j, "a value is missing");
	switch (*j->p) {
	case '{':
		return jc_object(j, depth);
	case '[':
		return jc_array(j, depth);
	case '"':
		return jc_string(j);
	case 't':
		return jc_lit(j, "true");
	case 'f':
		return jc_lit(j, "false");
	case 'n':
		return jc_lit(j, "null");
	default:
		return jc_number(j);
	}
}

static inline FZ_NO_COVERAGE bool json_check(const char *s, size_t n, unsigned flags, char *why,
                                             size_t whylen, size_t *at)
{
	jc_state j = {(const unsigned char *)s,
	              (const unsigned char *)s,
	              (const unsigned char *)s + n,
	              NULL,
	              0,
	              flags};
	if (jc_value(&j, 0)) {
		jc_ws(&j);
		if (j.p != j.e)
			jc_fail(&j, "text after the value");
	}
	if (j.why && why)
		snprintf(why, whylen, "%s at byte %zu of %zu", j.why, j.at, n);
	if (at)
		*at = j.at;
	return j.why == NULL;
}

/* Aborts, showing where, when s[0..n) is not strict JSON. */
static inline FZ_NO_COVERAGE void json_must_check(const char *what, const char *s, size_t n,
                                                  unsigned flags)
{
	char why[200];
	size_t at = 0;
	if (json_check(s, n, flags, why, sizeof why, &at))
		return;
	size_t from = at > 200 ? at - 200 : 0;
	fprintf(stderr, "%s is not strict JSON: %s\n...%.*s<HERE>%.*s...\n", what, why,
	        (int)(at - from), s + from, (int)(n - at < 200 ? n - at : 200), s + at);
	abort();
}

/* ---- reading a checked text back ----
 *
 * For a text json_check accepted: the value at a path of object keys and
 * array indexes ("diff.newShapes", "findings.3.new"; keys compared as
 * written, so plain ASCII ones), and an array's length. libbson's parser
 * reads objects with "$" keys as Extended JSON ({"$regex": 1} is refused),
 * and the report's "apps" objects are keyed by application names, so the
 * targets read data-keyed texts this way. */

typedef struct json_slice {
	const char *p; /* the value's first byte; NULL: absent */
	size_t n;
} json_slice;

/* The value at s[0..n) (after white space) and where it ends. */
static inline FZ_NO_COVERAGE json_slice jc_value_at(const char *s, const char *e)
{
	jc_state j = {(const unsigned char *)s,
	              (const unsigned char *)s,
	              (const unsigned char *)e,
	              NULL,
	              0,
	              JC_DUP_KEYS_OK};
	jc_ws(&j);
	const char *start = (const char *)j.p;
	if (!jc_value(&j, 0))
		return (json_slice){NULL, 0};
	return (json_slice){start, (size_t)((const char *)j.p - start)};
}

/* The k-th member value of an object, or element of an array (key NULL),
 * or the member named key (len bytes). */
static inline FZ_NO_COVERAGE json_slice json_child(json_slice v, const char *key, size_t len,
                                                   size_t k)
{
	if (!v.p || v.n < 2 || (v.p[0] != '{' && v.p[0] != '['))
		return (json_slice){NULL, 0};
	bool obj = v.p[0] == '{';
	const char *p = v.p + 1, *e = v.p + v.n - 1;
	for (size_t i = 0;; i++) {
		while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ','))
			p++;
		if (p >= e)
			return (json_slice){NULL, 0};
		bool hit = !obj && !key && i == k;
		if (obj) {
			json_slice name = jc_value_at(p, e);
			if (!name.p)
				return name;
			hit = key ? name.n == len + 2 && !memcmp(name.p + 1, key, len) : i == k;
			p = name.p + name.n;
			while (p < e && *p != ':')
				p++;
			p++;
		}
		json_slice val = jc_value_at(p, e);
		if (!val.p || hit)
			return val;
		p = val.p + val.n;
	}
}

static inline FZ_NO_COVERAGE size_t json_len(json_slice v)
{
	size_t n = 0;
	while (json_child(v, NULL, 0, n).p)
		n++;
	return n;
}

/* The value at path ("a.b.0.c") in the text s[0..n). */
static inline FZ_NO_COVERAGE json_slice json_at(const char *s, size_t n, const char *path)
{
	json_slice v = jc_value_at(s, s + n);
	while (v.p && *path) {
		size_t len = strcspn(path, ".");
		bool index = len && strspn(path, "0123456789") >= len;
		v = index && v.p[0] == '[' ? json_child(v, NULL, 0, strtoul(path, NULL, 10))
		                           : json_child(v, path, len, 0);
		path += len + (path[len] == '.');
	}
	return v;
}

/* Whether v is exactly the literal word (true, false, null). */
static inline FZ_NO_COVERAGE bool json_is(json_slice v, const char *word)
{
	return v.p && v.n == strlen(word) && !memcmp(v.p, word, v.n);
}

#endif
