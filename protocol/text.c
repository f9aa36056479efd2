/* The bounded text builder (text.h). */
#include "protocol/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void text_init_reserve(text_buf *t, char *p, size_t cap, size_t reserve)
{
	t->p = p;
	t->cap = cap;
	t->limit = reserve < cap ? cap - reserve : 0;
	t->len = 0;
	t->overflow = cap == 0;
	if (cap > 0)
		p[0] = '\0';
}

void text_init(text_buf *t, char *p, size_t cap)
{
	text_init_reserve(t, p, cap, 1);
}

void text_str(text_buf *t, const char *s)
{
	text_put(t, s, strlen(s));
}

void text_printf(text_buf *t, const char *fmt, ...)
{
	if (t->overflow || t->len > t->limit) {
		t->overflow = true;
		return;
	}
	size_t room = t->limit - t->len; /* text bytes that may be added */
	va_list ap;
	va_start(ap, fmt);
	/* Formats in place; room + 1 leaves space for vsnprintf's NUL, which
	 * lands at most on limit, inside the buffer. */
	int n = vsnprintf(t->p + t->len, room + 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n > room) {
		t->overflow = true;
		t->p[t->len] = '\0'; /* all or nothing */
		return;
	}
	t->len += (size_t)n;
}

void text_close(text_buf *t, const char *s)
{
	if (t->cap == 0)
		return;
	for (; *s && t->len + 1 < t->cap; s++)
		t->p[t->len++] = *s;
	t->p[t->len] = '\0';
}

void text_rewind(text_buf *t, size_t mark)
{
	if (mark > t->len || t->cap == 0)
		return;
	t->len = mark;
	t->overflow = false;
	t->p[t->len] = '\0';
}

size_t text_utf8_seq_len(const unsigned char *p)
{
	if (p[0] < 0x80)
		return 1;
	size_t n = (p[0] & 0xe0) == 0xc0   ? 2
	           : (p[0] & 0xf0) == 0xe0 ? 3
	           : (p[0] & 0xf8) == 0xf0 ? 4
	                                   : 0;
	if (n == 0 || (n == 2 && p[0] < 0xc2) || (n == 4 && p[0] > 0xf4))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0; /* also stops at the terminating NUL */
	if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
	    (n == 4 && p[0] == 0xf0 && p[1] < 0x90) || (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
		return 0; /* overlong, surrogate, or beyond U+10FFFF */
	return n;
}

bool text_utf8_valid(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = text_utf8_seq_len(p);
		if (n == 0)
			return false;
		p += n;
	}
	return true;
}

static const char hex[] = "0123456789abcdef";

/* Bytes as they are: runs that need no escaping are copied in one go (this
 * is on the path of every rendered shape). All or nothing. */
static void json_bytes(text_buf *t, const char *s, size_t n, bool quoted)
{
	size_t mark = text_mark(t);
	bool was = t->overflow;
	if (quoted)
		text_char(t, '"');
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		text_put(t, s + run, i - run);
		run = i + 1;
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			text_put(t, e, 2);
		} else {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			text_put(t, e, 6);
		}
	}
	text_put(t, s + run, n - run);
	if (quoted)
		text_char(t, '"');
	if (t->overflow && !was) {
		text_rewind(t, mark);
		t->overflow = true;
	}
}

/* Client text: one character at a time, so a cut falls between two. */
static void json_utf8(text_buf *t, const char *s, size_t n, bool quoted)
{
	if (quoted) {
		if (t->overflow || t->len > t->limit || t->limit - t->len < 2) {
			t->overflow = true;
			return;
		}
		text_char(t, '"');
	}
	const char *end = s + n;
	while (s < end && *s && !t->overflow) {
		unsigned char c = (unsigned char)*s;
		size_t k = text_utf8_seq_len((const unsigned char *)s);
		if (k > (size_t)(end - s))
			k = 0;
		char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
		if (k > 1 || (k == 1 && c >= 0x20 && c != '"' && c != '\\'))
			text_put(t, s, k);
		else if (k == 0)
			text_put(t, "\\ufffd", 6);
		else if (c == '"')
			text_put(t, "\\\"", 2);
		else if (c == '\\')
			text_put(t, "\\\\", 2);
		else if (c == '\n')
			text_put(t, "\\n", 2);
		else if (c == '\t')
			text_put(t, "\\t", 2);
		else
			text_put(t, esc, 6);
		s += k ? k : 1;
	}
	if (quoted)
		text_close(t, "\"");
}

void text_json_str(text_buf *t, const char *s, size_t n, unsigned flags)
{
	if (flags & TEXT_JSON_UTF8)
		json_utf8(t, s, n, flags & TEXT_JSON_QUOTED);
	else
		json_bytes(t, s, n, flags & TEXT_JSON_QUOTED);
}

void text_html_str(text_buf *t, const char *s, size_t n)
{
	size_t mark = text_mark(t);
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	while (p < end && !t->overflow) {
		unsigned char c = *p;
		if (c == '&')
			text_put(t, "&amp;", 5);
		else if (c == '<')
			text_put(t, "&lt;", 4);
		else if (c == '>')
			text_put(t, "&gt;", 4);
		else if (c == '"')
			text_put(t, "&quot;", 6);
		else if (c == '\'')
			text_put(t, "&#39;", 5);
		else if (c >= 0x80) {
			size_t l = text_utf8_seq_len(p);
			if (l == 0 || l > (size_t)(end - p)) {
				text_put(t, "\xef\xbf\xbd", 3);
				l = 1;
			} else {
				text_put(t, (const char *)p, l);
			}
			p += l;
			continue;
		} else if (c >= 0x20 || c == '\n' || c == '\t')
			text_char(t, (char)c);
		p++;
	}
	if (t->overflow)
		text_rewind(t, mark), t->overflow = true;
}
