/* The before/after section of each writer (--baseline; model.h,
 * model_diff). Each writes nothing but an empty marker without a diff. */
#ifndef MG_REPORT_DIFF_OUT_H
#define MG_REPORT_DIFF_OUT_H

#include "report/model.h"
#include "report/out.h"

void report_diff_json(out_t *o, const model *m); /* "diff":{...} or "diff":null, then ',' */
void report_diff_html(out_t *o, const model *m); /* <section id="diff"> */
void report_diff_md(out_t *o, const model *m);   /* ## Before and after */

#endif
