/* Driver and shell housekeeping: the requests drivers and shells send on
 * their own (the handshake, authentication, server facts, sessions), which
 * the report counts apart from the application's query shapes: no shape
 * row, no schema block, no diff, no failure mark. */
#ifndef MG_REPORT_HOUSEKEEPING_H
#define MG_REPORT_HOUSEKEEPING_H

#include <stdbool.h>
#include <stdint.h>

#include "report/model.h"
#include "protocol/text.h"

/* What a request is counted under when it is housekeeping (its command's
 * name, or the namespace mongosh reads), else NULL. name: the command as
 * sent; ns: the namespace its shape names. */
const char *report_housekeeping(const char *name, const char *ns);

/* One more request of what. */
void report_housekeeping_note(model *m, const char *what);
/* Most requests first (aggregator_finish). */
void report_housekeeping_finish(model *m);
/* "N requests (hello 12, buildInfo 3, ...)"; at most max kinds named. */
void report_housekeeping_words(text_buf *t, const model *m, size_t max);

#endif
