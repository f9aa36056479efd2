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

static inline bool out_done(out_t *o)
{
	out_flush(o);
	return !o->failed && fflush(o->f) == 0;
}

#endif
