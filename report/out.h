/* Where the report's writers put text: the one text builder
 * (protocol/text.h) over a 64 KiB buffer, emptied into a FILE after each
 * piece (a table row, a chart). A piece bigger than the buffer is an
 * error, never a silent cut. */
#ifndef MG_REPORT_OUT_H
#define MG_REPORT_OUT_H

#include <stdbool.h>
#include <stdio.h>

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

static inline bool out_done(out_t *o)
{
	out_flush(o);
	return !o->failed && fflush(o->f) == 0;
}

#endif
