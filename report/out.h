/* Where the report's writers put text: the one text builder
 * (protocol/text.h) over a 64 KiB buffer, emptied into a FILE after each
 * piece (a table row, a chart). A piece bigger than the buffer is an
 * error, never a silent cut. */
#ifndef MG_REPORT_OUT_H
#define MG_REPORT_OUT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "protocol/text.h"

typedef struct out_t {
	FILE *f;
	text_buf t;
	bool failed;
	char buf[1 << 16];
} out_t;

static inline void out_init(out_t *o, FILE *f)
{
	o->f = f;
	o->failed = false;
	text_init(&o->t, o->buf, sizeof o->buf);
}

/* Writes what was built and starts over. */
static inline void out_flush(out_t *o)
{
	if (o->t.overflow)
		o->failed = true;
	if (o->t.len && fwrite(o->t.p, 1, o->t.len, o->f) != o->t.len)
		o->failed = true;
	text_init(&o->t, o->buf, sizeof o->buf);
}

/* A JSON string, quoted, of text that may hold anything a client sent:
 * it comes out as valid UTF-8 (TEXT_JSON_UTF8), so every JSON writer of
 * the report (JSON, SARIF, the diff, the recommendations) escapes alike. */
static inline void out_json_str(text_buf *t, const char *s)
{
	text_json_str(t, s, strlen(s), TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
}

/* "1 app", "3 apps": a count and its noun, singular for one. */
static inline void out_count(text_buf *t, uint64_t n, const char *one, const char *many)
{
	text_printf(t, "%" PRIu64 " %s", n, n == 1 ? one : many);
}

/* A size for people: "512 B", "1.5 KiB", "12.0 MiB" (binary units, as
 * MongoDB's 16 MiB limit is). */
static inline void out_size(text_buf *t, uint64_t bytes)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	size_t u = 0;
	if (bytes < 1024) {
		text_printf(t, "%" PRIu64 " B", bytes);
		return;
	}
	v /= 1024;
	while (v >= 1024 && u + 1 < sizeof units / sizeof *units) {
		v /= 1024;
		u++;
	}
	text_printf(t, "%.1f %s", v, units[u]);
}

/* Markdown inline code of text from the capture (a namespace, a shape):
 * newlines and other controls as spaces, so a table row or a heading stays
 * one line; in a table (in_table) '|' as "\\|", which GFM unescapes even in
 * code; a backtick run inside, fenced by a longer run (CommonMark), padded
 * with spaces when the text starts or ends with one. At most max bytes. */
static inline void out_md_code(text_buf *t, const char *s, size_t max, bool in_table)
{
	size_t n = strnlen(s, max), run = 0, longest = 0;
	for (size_t i = 0; i < n; i++) {
		run = s[i] == '`' ? run + 1 : 0;
		if (run > longest)
			longest = run;
	}
	bool pad = longest && (s[0] == '`' || s[n - 1] == '`');
	for (size_t k = 0; k <= longest; k++)
		text_char(t, '`');
	if (pad)
		text_char(t, ' ');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			text_char(t, ' ');
		else if (c == '|' && in_table)
			text_str(t, "\\|");
		else
			text_char(t, (char)c);
	}
	if (pad)
		text_char(t, ' ');
	for (size_t k = 0; k <= longest; k++)
		text_char(t, '`');
}

/* Markdown text of a value from the capture in a table cell or a list
 * item: controls as spaces, and the characters that would start markup
 * or end the cell backslash-escaped. */
static inline void out_md_text(text_buf *t, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x20 || c == 0x7f)
			text_char(t, ' ');
		else if (strchr("|`*[]<>\\", c))
			text_printf(t, "\\%c", c);
		else
			text_char(t, (char)c);
	}
}

/* A fenced code block holding text from the capture (a suggested command
 * names its fields): its fence is longer than any run of backticks inside
 * and at least three (CommonMark), so nothing inside ends it. need: the
 * fence so far (3 to begin), grown for n bytes of s. */
static inline size_t out_md_fence_need(size_t need, const char *s, size_t n)
{
	size_t run = 0;
	for (size_t i = 0; i < n && s[i]; i++) {
		run = s[i] == '`' ? run + 1 : 0;
		if (run >= need)
			need = run + 1;
	}
	return need;
}

static inline void out_md_fence(text_buf *t, size_t len)
{
	for (size_t k = 0; k < len; k++)
		text_char(t, '`');
}

/* A line of a fenced block: controls as spaces, so the line stays one
 * (an indented block in a list item ends at a line less indented). */
static inline void out_md_code_line(text_buf *t, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		text_char(t, c < 0x20 || c == 0x7f ? ' ' : (char)c);
	}
}

static inline bool out_done(out_t *o)
{
	out_flush(o);
	return !o->failed && fflush(o->f) == 0;
}

#endif
