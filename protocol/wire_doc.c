/* The BSON checks every decoder makes (wire_doc.h): the cheap frame
 * check, the one-pass structural validation that lets analyzers walk a
 * document with libbson's iterator without reading past it, and the
 * top-level lookups the request path makes on validated bytes. */
#include "protocol/wire_doc.h"

#include <stdio.h>
#include <string.h>

#include "protocol/frame.h"

void wire_doc_frame_fail(const uint8_t *p, size_t avail, wire_error *err, const char *what, ...)
{
	int32_t len = avail >= 4 ? wire_read_i32(p) : 0;
	char name[96];
	va_list ap;
	va_start(ap, what);
	vsnprintf(name, sizeof(name), what, ap);
	va_end(ap);
	if (avail < 4)
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s is truncated: %zu bytes left, fewer than its 4-byte length",
		               name, avail);
	else if (len < 5)
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s has length %d, below the minimum of 5", name, len);
	else if ((size_t)len > avail)
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s claims %d bytes but only %zu are left", name, len, avail);
	else
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s of %d bytes does not end with a 0x00 terminator", name, len);
}

/* Why an element is refused; the index is what the walk reports. */
enum {
	BAD_NONE,
	BAD_TYPE,
	BAD_KEY,
	BAD_FIXED,
	BAD_STRING,
	BAD_BOOL,
	BAD_BINARY,
	BAD_BINARY_OLD,
	BAD_DOC,
	BAD_REGEX,
	BAD_DBPOINTER,
	BAD_CODEWSCOPE,
	BAD_DEPTH,
	BAD_FRAME,
};

static const char *const bad_words[] = {
    [BAD_NONE] = "",
    [BAD_TYPE] = "unknown element type",
    [BAD_KEY] = "key not NUL-terminated inside its document",
    [BAD_FIXED] = "value runs past the end of its document",
    [BAD_STRING] = "string length out of bounds or not ending in NUL",
    [BAD_BOOL] = "boolean neither 0 nor 1",
    [BAD_BINARY] = "binary length out of bounds",
    [BAD_BINARY_OLD] = "binary subtype 2 inner length disagrees with its outer length",
    [BAD_DOC] = "embedded document length out of bounds or not ending in NUL",
    [BAD_REGEX] = "regular expression pattern or options not NUL-terminated",
    [BAD_DBPOINTER] = "DBPointer namespace length out of bounds or not ending in NUL",
    [BAD_CODEWSCOPE] = "code-with-scope lengths inconsistent",
    [BAD_DEPTH] = "",
    [BAD_FRAME] = "declared length differs from the document's size",
};

/* Value sizes of the fixed-width types; VAR marks the types checked one by
 * one below, BAD the type bytes BSON does not define (0x00 included: it is
 * only valid as a document's terminator, which the walk handles apart). */
enum { VAR = 0xfe, BAD = 0xff };
static const uint8_t fixed_size[256] = {
    [0x00] = BAD,
    [0x01] = 8,
    [0x02] = VAR,
    [0x03] = VAR,
    [0x04] = VAR,
    [0x05] = VAR,
    [0x06] = 0,
    [0x07] = 12,
    [0x08] = VAR,
    [0x09] = 8,
    [0x0a] = 0,
    [0x0b] = VAR,
    [0x0c] = VAR,
    [0x0d] = VAR,
    [0x0e] = VAR,
    [0x0f] = VAR,
    [0x10] = 4,
    [0x11] = 8,
    [0x12] = 8,
    [0x13] = 16,
    [0x14 ... 0x7e] = BAD,
    [0x7f] = 0,
    [0x80 ... 0xfe] = BAD,
    [0xff] = 0,
};

/* The single pass. `end` is always the offset of the current document's
 * terminator, a 0x00 byte checked before the document is entered, so every
 * C-string scan stops there at the latest and needs no bounds test of its
 * own; each value must end at or before `end`. Lengths are read as
 * unsigned, so a negative one is simply too big. Returns BAD_NONE or why,
 * with *at the offset of the offending element's type byte. */
static int walk(const uint8_t *p, size_t len, size_t *at)
{
	uint32_t ends[WIRE_MAX_BSON_DEPTH + 1];
	int depth = 0;
	size_t end = len - 1, pos = 4;
	for (;;) {
		if (pos == end) {
			if (depth == 0)
				return BAD_NONE;
			pos = end + 1;
			end = ends[--depth];
			continue;
		}
		*at = pos;
		uint8_t type = p[pos];
		const uint8_t *k = p + pos + 1;
		while (*k)
			k++;
		size_t v = (size_t)(k - p) + 1; /* the value's offset */
		if (v > end)
			return fixed_size[type] == BAD ? BAD_TYPE : BAD_KEY;
		size_t avail = end - v; /* value bytes before the terminator */
		uint8_t fixed = fixed_size[type];
		if (fixed < VAR) {
			if (fixed > avail)
				return BAD_FIXED;
			pos = v + fixed;
			continue;
		}
		uint32_t n;
		switch (type) {
		case 0x02: /* string */
		case 0x0d: /* JavaScript code */
		case 0x0e: /* symbol */
			if (avail < 4)
				return BAD_STRING;
			n = wire_read_u32(p + v);
			if (n == 0 || n > avail - 4 || p[v + 4 + n - 1] != 0)
				return BAD_STRING;
			pos = v + 4 + n;
			break;
		case 0x08: /* boolean */
			if (avail < 1 || p[v] > 1)
				return BAD_BOOL;
			pos = v + 1;
			break;
		case 0x03: /* document */
		case 0x04: /* array */
			if (avail < 5)
				return BAD_DOC;
			n = wire_read_u32(p + v);
			if (n < 5 || n > avail || p[v + n - 1] != 0)
				return BAD_DOC;
			if (depth == WIRE_MAX_BSON_DEPTH)
				return BAD_DEPTH;
			ends[depth++] = (uint32_t)end;
			end = v + n - 1;
			pos = v + 4;
			break;
		case 0x05: /* binary: int32 length, subtype, bytes */
			if (avail < 5)
				return BAD_BINARY;
			n = wire_read_u32(p + v);
			if (n > avail - 5)
				return BAD_BINARY;
			/* the old subtype 2 repeats the length inside; libbson's
			 * iterator refuses it when the two disagree */
			if (p[v + 4] == 0x02 && (n < 4 || wire_read_u32(p + v + 5) + 4u != n))
				return BAD_BINARY_OLD;
			pos = v + 5 + n;
			break;
		case 0x0b: { /* regex: pattern and options, two C strings */
			const uint8_t *q = p + v;
			while (*q)
				q++;
			if ((size_t)(q - p) >= end)
				return BAD_REGEX;
			q++;
			while (*q)
				q++;
			if ((size_t)(q - p) >= end)
				return BAD_REGEX;
			pos = (size_t)(q - p) + 1;
			break;
		}
		case 0x0c: /* DBPointer: string, then a 12-byte ObjectId */
			if (avail < 4)
				return BAD_DBPOINTER;
			n = wire_read_u32(p + v);
			if (n == 0 || n > avail - 4 || avail - 4 - n < 12 || p[v + 4 + n - 1] != 0)
				return BAD_DBPOINTER;
			pos = v + 4 + n + 12;
			break;
		case 0x0f: { /* code with scope: int32 total, string, document */
			if (avail < 14)
				return BAD_CODEWSCOPE;
			uint32_t total = wire_read_u32(p + v);
			if (total < 14 || total > avail)
				return BAD_CODEWSCOPE;
			n = wire_read_u32(p + v + 4); /* code string length */
			/* the scope fills the rest exactly and holds at least 5 bytes */
			if (n == 0 || n > total - 13 || p[v + 8 + n - 1] != 0)
				return BAD_CODEWSCOPE;
			size_t scope = v + 8 + n;
			if (wire_read_u32(p + scope) != total - 8 - n || total - 8 - n < 5 ||
			    p[v + total - 1] != 0)
				return BAD_CODEWSCOPE;
			if (depth == WIRE_MAX_BSON_DEPTH)
				return BAD_DEPTH;
			ends[depth++] = (uint32_t)end;
			end = v + total - 1;
			pos = scope + 4;
			break;
		}
		default:
			return BAD_TYPE;
		}
	}
}

bool wire_doc_validate(const uint8_t *p, size_t len, wire_error *err, const char *what, ...)
{
	size_t at = 0;
	int bad;
	if (len < 5 || len > UINT32_MAX || wire_read_u32(p) != len || p[len - 1] != 0)
		bad = BAD_FRAME;
	else
		bad = walk(p, len, &at);
	if (bad == BAD_NONE)
		return true;

	char name[96];
	va_list ap;
	va_start(ap, what);
	vsnprintf(name, sizeof(name), what, ap);
	va_end(ap);
	if (bad == BAD_DEPTH)
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s is nested deeper than %d levels (at byte %zu of %zu)", name,
		               WIRE_MAX_BSON_DEPTH, at, len);
	else
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s is not valid BSON: corrupt element at byte %zu of %zu (%s)",
		               name, at, len, bad_words[bad]);
	return false;
}

/* Sizes as walk() reads them, trusting what walk() already checked. */
static size_t value_size(const uint8_t *v, uint8_t type)
{
	uint8_t fixed = fixed_size[type];
	if (fixed < VAR)
		return fixed;
	switch (type) {
	case 0x02: /* string, code, symbol: int32 length, bytes */
	case 0x0d:
	case 0x0e:
		return 4 + (size_t)wire_read_u32(v);
	case 0x08:
		return 1;
	case 0x03: /* document, array, code with scope: int32 total */
	case 0x04:
	case 0x0f:
		return wire_read_u32(v);
	case 0x05:
		return 5 + (size_t)wire_read_u32(v);
	case 0x0b: {
		size_t a = strlen((const char *)v) + 1;
		return a + strlen((const char *)v + a) + 1;
	}
	case 0x0c:
		return 4 + (size_t)wire_read_u32(v) + 12;
	default:
		return 0; /* unreachable in a validated document */
	}
}

/* The bare top-level pass of wire_doc_find and wire_doc_keys: the key of
 * the element at pos (its length in *kl) and, in *next, where the next one
 * starts; the document's terminator is at len - 1. */
static const char *element_key(const uint8_t *p, size_t pos, size_t *kl, size_t *next)
{
	const char *k = (const char *)p + pos + 1;
	*kl = strlen(k);
	size_t v = pos + 1 + *kl + 1;
	*next = v + value_size(p + v, p[pos]);
	return k;
}

const uint8_t *wire_doc_find(const uint8_t *p, size_t len, const char *key, size_t keylen)
{
	for (size_t pos = 4, next, kl; pos < len - 1; pos = next) {
		const char *k = element_key(p, pos, &kl, &next);
		if (kl == keylen && memcmp(k, key, keylen) == 0)
			return p + pos;
	}
	return NULL;
}

size_t wire_doc_keys(const uint8_t *p, size_t len, const char **keys, uint32_t *lens, size_t cap)
{
	size_t n = 0;
	for (size_t pos = 4, next, kl; pos < len - 1; pos = next, n++) {
		const char *k = element_key(p, pos, &kl, &next);
		if (n < cap) {
			keys[n] = k;
			lens[n] = (uint32_t)kl;
		}
	}
	return n;
}

bool wire_doc_fixed_spans(const uint8_t *p, size_t len, byte_spans *sp)
{
	for (size_t pos = 4, next, kl; pos < len - 1 && !sp->full; pos = next) {
		uint8_t type = p[pos];
		(void)element_key(p, pos, &kl, &next);
		size_t v = pos + 1 + kl + 1;
		if (type == 0x03 || type == 0x04)
			(void)wire_doc_fixed_spans(p + v, next - v, sp);
		else if (type != 0x08 && fixed_size[type] > 0 && fixed_size[type] < VAR)
			byte_spans_add(sp, p + v, (uint32_t)(next - v));
	}
	return !sp->full;
}
