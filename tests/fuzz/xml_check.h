/* A strict XML 1.0 well-formedness checker for the JUnit report
 * (fuzz_report_diff). libxml2 is no dependency of the project, and JUnit
 * needs only a small part of XML, so this checks what a conforming parser
 * would refuse in a document without a DTD:
 *
 *   - every character is an XML Char (valid UTF-8; no C0 control but tab,
 *     newline and CR; no surrogate; no U+FFFE or U+FFFF);
 *   - an optional <?xml ...?> declaration first, then exactly one root
 *     element, with only white space, comments and processing
 *     instructions around it;
 *   - tags nest and match; attribute values are quoted, hold no '<', and
 *     no name appears twice in one tag;
 *   - '&' only starts &amp; &lt; &gt; &quot; &apos; or a character
 *     reference to an XML Char; "]]>" never appears in text;
 *   - comments hold no "--"; CDATA sections are closed.
 *
 * Names are checked loosely (a letter, '_', ':' or any non-ASCII
 * character first; then also digits, '-' and '.'), which is all JUnit
 * names need.
 *
 * xml_check(s, n, fn, arg, why, whylen): true when s[0..n) is well-formed;
 * fn (may be NULL) is called for every start tag with its parent's name
 * ("" for the root) and its attributes (values as written, entities not
 * expanded). Never reads past s + n. */
#ifndef MG_TESTS_FUZZ_XML_CHECK_H
#define MG_TESTS_FUZZ_XML_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

enum { XC_MAX_DEPTH = 64, XC_MAX_ATTRS = 16, XC_NAME_MAX = 64 };

typedef struct xml_attr {
	const char *name;
	size_t name_len;
	const char *value; /* between the quotes */
	size_t value_len;
} xml_attr;

typedef void (*xml_start_fn)(void *arg, const char *parent, const char *name, const xml_attr *attrs,
                             size_t nattrs);

typedef struct xc_state {
	const unsigned char *s, *p, *e;
	const char *why;
	size_t at;
	xml_start_fn fn;
	void *arg;
	char stack[XC_MAX_DEPTH][XC_NAME_MAX]; /* open elements' names */
	int depth;
} xc_state;

static inline FZ_NO_COVERAGE bool xc_fail(xc_state *x, const char *why)
{
	if (!x->why) {
		x->why = why;
		x->at = (size_t)(x->p - x->s);
	}
	return false;
}

static inline FZ_NO_COVERAGE bool xc_is_char(uint32_t c)
{
	return c == 0x9 || c == 0xa || c == 0xd || (c >= 0x20 && c <= 0xd7ff) ||
	       (c >= 0xe000 && c <= 0xfffd) || (c >= 0x10000 && c <= 0x10ffff);
}

/* One character at p: its length (0: not valid UTF-8 or not a Char). */
static inline FZ_NO_COVERAGE size_t xc_char(const unsigned char *p, const unsigned char *e,
                                            uint32_t *cp)
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
	uint32_t v = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3f);
	}
	if ((n == 2 && v < 0x80) || (n == 3 && v < 0x800) || (n == 4 && v < 0x10000))
		return 0; /* overlong */
	if (!xc_is_char(v))
		return 0;
	*cp = v;
	return n;
}

static inline FZ_NO_COVERAGE bool xc_starts(const xc_state *x, const char *lit)
{
	size_t n = strlen(lit);
	return (size_t)(x->e - x->p) >= n && memcmp(x->p, lit, n) == 0;
}

static inline FZ_NO_COVERAGE bool xc_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline FZ_NO_COVERAGE void xc_ws(xc_state *x)
{
	while (x->p < x->e && xc_space(*x->p))
		x->p++;
}

static inline FZ_NO_COVERAGE bool xc_name_start(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       c >= 0x80;
}

/* A name at p, copied (cut) into out. */
static inline FZ_NO_COVERAGE bool xc_name(xc_state *x, char *out, const char **start, size_t *len)
{
	const unsigned char *s = x->p;
	if (x->p >= x->e || !xc_name_start(*x->p))
		return xc_fail(x, "a name was expected");
	while (x->p < x->e) {
		unsigned char c = *x->p;
		if (xc_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.') {
			uint32_t cp;
			size_t k = c < 0x80 ? 1 : xc_char(x->p, x->e, &cp);
			if (!k)
				return xc_fail(x, "not an XML character in a name");
			x->p += k;
			continue;
		}
		break;
	}
	size_t n = (size_t)(x->p - s);
	if (out) {
		size_t c = n < XC_NAME_MAX - 1 ? n : XC_NAME_MAX - 1;
		memcpy(out, s, c);
		out[c] = '\0';
	}
	if (start)
		*start = (const char *)s;
	if (len)
		*len = n;
	return true;
}

/* p at '&'. */
static inline FZ_NO_COVERAGE bool xc_reference(xc_state *x)
{
	x->p++;
	if (x->p < x->e && *x->p == '#') {
		x->p++;
		bool hex = x->p < x->e && *x->p == 'x';
		if (hex)
			x->p++;
		uint32_t v = 0;
		int digits = 0;
		while (x->p < x->e && *x->p != ';') {
			unsigned char c = *x->p;
			int d = c >= '0' && c <= '9'          ? c - '0'
			        : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
			        : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
			                                      : -1;
			if (d < 0)
				return xc_fail(x, "bad character reference");
			if (v > 0x10ffff)
				return xc_fail(x, "character reference out of range");
			v = v * (hex ? 16 : 10) + (uint32_t)d;
			digits++;
			x->p++;
		}
		if (x->p >= x->e || !digits || !xc_is_char(v))
			return xc_fail(x, "character reference to no XML character");
		x->p++;
		return true;
	}
	static const char *const known[] = {"amp;", "lt;", "gt;", "quot;", "apos;"};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (xc_starts(x, known[i])) {
			x->p += strlen(known[i]);
			return true;
		}
	return xc_fail(x, "'&' that starts no known entity");
}

/* Text up to '<' (or the end): characters, references, no "]]>". */
static inline FZ_NO_COVERAGE bool xc_text(xc_state *x)
{
	while (x->p < x->e && *x->p != '<') {
		if (*x->p == '&') {
			if (!xc_reference(x))
				return false;
			continue;
		}
		if (xc_starts(x, "]]>"))
			return xc_fail(x, "\"]]>\" in text");
		uint32_t cp;
		size_t k = xc_char(x->p, x->e, &cp);
		if (!k)
			return xc_fail(x, "not an XML character in text");
		x->p += k;
	}
	return true;
}

/* Characters up to the literal end (consumed); for comments, PIs, CDATA. */
static inline FZ_NO_COVERAGE bool xc_until(xc_state *x, const char *end, bool no_dashes)
{
	while (x->p < x->e) {
		if (xc_starts(x, end)) {
			x->p += strlen(end);
			return true;
		}
		if (no_dashes && xc_starts(x, "--"))
			return xc_fail(x, "\"--\" inside a comment");
		uint32_t cp;
		size_t k = xc_char(x->p, x->e, &cp);
		if (!k)
			return xc_fail(x, "not an XML character");
		x->p += k;
	}
	return xc_fail(x, "unterminated comment, PI or CDATA");
}

/* Comments, PIs and white space between elements. */
static inline FZ_NO_COVERAGE bool xc_misc(xc_state *x)
{
	for (;;) {
		xc_ws(x);
		if (xc_starts(x, "<!--")) {
			x->p += 4;
			if (!xc_until(x, "-->", true))
				return false;
		} else if (xc_starts(x, "<?")) {
			if (xc_starts(x, "<?xml ") || xc_starts(x, "<?xml?"))
				return xc_fail(x, "an XML declaration not at the start");
			x->p += 2;
			if (!xc_name(x, NULL, NULL, NULL) || !xc_until(x, "?>", false))
				return false;
		} else {
			return true;
		}
	}
}

/* p at '<' of a start tag. */
static inline FZ_NO_COVERAGE bool xc_element(xc_state *x)
{
	char name[XC_NAME_MAX];
	xml_attr attrs[XC_MAX_ATTRS];
	size_t nattrs = 0;
	x->p++;
	if (!xc_name(x, name, NULL, NULL))
		return false;
	for (;;) {
		bool spaced = x->p < x->e && xc_space(*x->p);
		xc_ws(x);
		if (x->p >= x->e)
			return xc_fail(x, "unterminated start tag");
		if (*x->p == '>' || xc_starts(x, "/>"))
			break;
		if (!spaced)
			return xc_fail(x, "no white space before an attribute");
		xml_attr a;
		if (!xc_name(x, NULL, &a.name, &a.name_len))
			return false;
		for (size_t i = 0; i < nattrs; i++)
			if (attrs[i].name_len == a.name_len &&
			    memcmp(attrs[i].name, a.name, a.name_len) == 0)
				return xc_fail(x, "an attribute named twice");
		xc_ws(x);
		if (x->p >= x->e || *x->p != '=')
			return xc_fail(x, "no '=' after an attribute name");
		x->p++;
		xc_ws(x);
		if (x->p >= x->e || (*x->p != '"' && *x->p != '\''))
			return xc_fail(x, "an attribute value not in quotes");
		unsigned char q = *x->p++;
		a.value = (const char *)x->p;
		while (x->p < x->e && *x->p != q) {
			if (*x->p == '<')
				return xc_fail(x, "'<' in an attribute value");
			if (*x->p == '&') {
				if (!xc_reference(x))
					return false;
				continue;
			}
			uint32_t cp;
			size_t k = xc_char(x->p, x->e, &cp);
			if (!k)
				return xc_fail(x, "not an XML character in an attribute value");
			x->p += k;
		}
		if (x->p >= x->e)
			return xc_fail(x, "unterminated attribute value");
		a.value_len = (size_t)((const char *)x->p - a.value);
		x->p++;
		if (nattrs == XC_MAX_ATTRS)
			return xc_fail(x, "more attributes than this checker keeps");
		attrs[nattrs++] = a;
	}
	if (x->fn)
		x->fn(x->arg, x->depth ? x->stack[x->depth - 1] : "", name, attrs, nattrs);
	if (xc_starts(x, "/>")) {
		x->p += 2;
		return true;
	}
	x->p++; /* '>' */
	if (x->depth == XC_MAX_DEPTH)
		return xc_fail(x, "nested deeper than this checker goes");
	memcpy(x->stack[x->depth++], name, sizeof name);
	for (;;) {
		if (!xc_text(x))
			return false;
		if (x->p >= x->e)
			return xc_fail(x, "an element is not closed");
		if (xc_starts(x, "</")) {
			x->p += 2;
			char end[XC_NAME_MAX];
			if (!xc_name(x, end, NULL, NULL))
				return false;
			if (strcmp(end, name) != 0)
				return xc_fail(x, "an end tag that does not match");
			xc_ws(x);
			if (x->p >= x->e || *x->p != '>')
				return xc_fail(x, "unterminated end tag");
			x->p++;
			x->depth--;
			return true;
		}
		if (xc_starts(x, "<!--")) {
			x->p += 4;
			if (!xc_until(x, "-->", true))
				return false;
		} else if (xc_starts(x, "<![CDATA[")) {
			x->p += 9;
			if (!xc_until(x, "]]>", false))
				return false;
		} else if (xc_starts(x, "<?")) {
			x->p += 2;
			if (!xc_name(x, NULL, NULL, NULL) || !xc_until(x, "?>", false))
				return false;
		} else if (!xc_element(x)) {
			return false;
		}
	}
}

static inline FZ_NO_COVERAGE bool xml_check(const char *s, size_t n, xml_start_fn fn, void *arg,
                                            char *why, size_t whylen)
{
	static xc_state x; /* the name stack: off the stack */
	x = (xc_state){.s = (const unsigned char *)s,
	               .p = (const unsigned char *)s,
	               .e = (const unsigned char *)s + n,
	               .fn = fn,
	               .arg = arg};
	if (xc_starts(&x, "<?xml ")) {
		x.p += 5;
		if (!xc_until(&x, "?>", false))
			goto out;
	}
	if (!xc_misc(&x))
		goto out;
	if (x.p >= x.e || *x.p != '<') {
		xc_fail(&x, "no root element");
		goto out;
	}
	if (!xc_element(&x) || !xc_misc(&x))
		goto out;
	if (x.p != x.e)
		xc_fail(&x, "more than one root element, or text after it");
out:
	if (x.why && why)
		snprintf(why, whylen, "%s at byte %zu of %zu", x.why, x.at, n);
	return x.why == NULL;
}

#endif
