/* One bounded text builder for every JSON line, shape, suggestion and
 * message mongoguard writes.
 *
 * A text_buf appends into a caller's fixed buffer and never allocates. An
 * append either fits whole or writes nothing and sets `overflow`; after an
 * overflow nothing more is appended, so a writer stays linear and checks
 * once at the end. text_finish() NUL-terminates the text; appends do not,
 * because shapes are rendered a few bytes at a time and a store per append
 * would be wasted on all but the last.
 *
 * Bound and reserve: appends stop at `limit`; the bytes from limit to cap
 * are a reserve that only text_close() writes into, so a writer that opened
 * quotes or brackets can always close them (the log line and the shape
 * renderer rely on this to stay valid JSON when cut).
 *
 * Marks: text_mark() remembers the length; text_rewind() takes back what
 * was appended since and clears the overflow, for writers that emit a
 * token (a comma, a key and a value) all or nothing.
 *
 * Pure: no I/O, no globals. */
#ifndef MG_PROTOCOL_TEXT_H
#define MG_PROTOCOL_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct text_buf {
	char *p;
	size_t cap;    /* bytes at p */
	size_t limit;  /* appends end at or before this; limit < cap */
	size_t len;    /* text bytes at p; p[len] is '\0' after text_finish() */
	bool overflow; /* an append did not fit; nothing more is appended */
} text_buf;

/* The whole buffer is usable (cap - 1 bytes of text). cap must be > 0. */
void text_init(text_buf *t, char *p, size_t cap);
/* Appends stop `reserve` bytes before the end; text_close() may use them.
 * reserve is at least 1 (the NUL) and less than cap. */
void text_init_reserve(text_buf *t, char *p, size_t cap, size_t reserve);

/* Inline: shapes are rendered a few bytes at a time. */
static inline void text_put(text_buf *t, const char *s, size_t n)
{
	if (t->overflow)
		return;
	if (t->len > t->limit || n > t->limit - t->len) { /* len > limit: after text_close */
		t->overflow = true;
		return;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
}

static inline void text_char(text_buf *t, char c)
{
	text_put(t, &c, 1);
}

void text_str(text_buf *t, const char *s);

/* Appends s to the string dst (a buffer of cap bytes), cut to fit as
 * snprintf cuts: for fixed fields filled on the request path (a rule's
 * hit), where text_buf would drop a piece that does not fit whole and
 * snprintf costs more than the check that found the hit. */
static inline void text_cat(char *dst, size_t cap, const char *s)
{
	size_t n = strlen(dst);
	while (*s && n + 1 < cap)
		dst[n++] = *s++;
	dst[n] = '\0';
}

/* Terminates the text (there is always room: limit < cap) and returns it. */
static inline const char *text_finish(text_buf *t)
{
	if (t->cap > 0)
		t->p[t->len < t->cap ? t->len : t->cap - 1] = '\0';
	return t->p;
}
__attribute__((format(printf, 2, 3))) void text_printf(text_buf *t, const char *fmt, ...);

/* Appends into the reserve, ignoring `overflow`: for closing what is open.
 * Cut (never past cap - 1) if even the reserve is too small. */
void text_close(text_buf *t, const char *s);

static inline size_t text_mark(const text_buf *t)
{
	return t->len;
}
void text_rewind(text_buf *t, size_t mark);

/* How text_json_str() writes a string. */
enum {
	/* Wrap in double quotes. */
	TEXT_JSON_QUOTED = 1u << 0,
	/* Client text that must come out as valid UTF-8 whatever it holds:
	 * invalid bytes become U+FFFD, \n and \t use their short escapes, and
	 * when the bound is hit the string is cut between two characters and
	 * (when quoted) still closed from the reserve; overflow is then set.
	 * Without it, bytes other than '"', '\\' and controls pass as they
	 * are (shapes are hashed byte for byte, so their bytes never change)
	 * and the string is appended all or nothing. */
	TEXT_JSON_UTF8 = 1u << 1,
};
void text_json_str(text_buf *t, const char *s, size_t n, unsigned flags);
/* Quoted, bytes as they are, all or nothing: the common case. */
static inline void text_json(text_buf *t, const char *s)
{
	text_json_str(t, s, strlen(s), TEXT_JSON_QUOTED);
}

/* HTML text or attribute value: &, <, >, " and ' as entities, invalid
 * UTF-8 as U+FFFD, other controls dropped; all or nothing, like
 * text_json_str without TEXT_JSON_UTF8 (the report's pages). */
void text_html_str(text_buf *t, const char *s, size_t n);
static inline void text_html(text_buf *t, const char *s)
{
	text_html_str(t, s, strlen(s));
}

/* Length (1..4) of the valid UTF-8 sequence at p, which holds at least one
 * byte before a NUL; 0 when the bytes there are not one (a NUL inside a
 * sequence ends it). Overlong forms, surrogates and code points past
 * U+10FFFF are not valid. */
size_t text_utf8_seq_len(const unsigned char *p);
bool text_utf8_valid(const char *s);

#endif
