/* The report's sections that live in files of their own, for each
 * writer: recommendations (recommend_out.c), array evidence (arrays.c) and
 * the time charts and filters (timeline.c). */
#ifndef MG_REPORT_SECTIONS_H
#define MG_REPORT_SECTIONS_H

#include "report/model.h"
#include "report/out.h"

void report_recs_html(out_t *o, const model *m); /* <section id="recommendations"> */
void report_recs_json(out_t *o, const model *m); /* "recommendations":[...], */
void report_recs_md(out_t *o, const model *m);   /* ## Recommendations */

/* Array evidence of a finding of a rule that grows arrays (arrays.c). */
void report_arrays_html(text_buf *t, const model_finding *f); /* <p class="evidence"> */
void report_arrays_md(text_buf *t, const model_finding *f);
void report_arrays_json(text_buf *t, const model_finding *f,
                        size_t growth_rank); /* ,"arrayEvidence":... */

/* Time charts and filters (timeline.c). */
void report_timeline_html(out_t *o, const model *m); /* two <svg> line charts */
void report_timeline_json(out_t *o, const model *m); /* "timeline":{...}, */
void report_filters_html(out_t *o, const model *m);  /* <form id="filters" hidden> */
extern const char report_filter_js[];                /* shows and runs that form */

/* Scans a rule's size parameter kept quiet (quiet.c): one part per rule
 * with a quiet_below parameter (rules.h). */
void report_quiet_html(out_t *o, const model *m); /* <h3>Scans below ...</h3> */
void report_quiet_md(out_t *o, const model *m);   /* ## Scans below ... */
void report_quiet_json(out_t *o, const model *m); /* "quietFindings":[...], */

/* The workload (workload.c) and the relationships (relationships.c):
 * the HTML section holds both. */
void report_workload_html(out_t *o, const model *m); /* <section id="workload"> */
void report_workload_md(out_t *o, const model *m);   /* ## Workload */
void report_workload_json(out_t *o, const model *m); /* "workload":{...}, */
void report_rels_html(out_t *o, const model *m);     /* <h3>Relationships</h3> */
void report_rels_md(out_t *o, const model *m);       /* ## Relationships */
void report_rels_json(out_t *o, const model *m);     /* "relationships":{...}, */

/* The placeholders a redacted shape holds, explained (legend.c). */
void report_legend_html(text_buf *t);
void report_legend_md(text_buf *t);

/* The length of the runnable command a fix starts with (a createIndex),
 * 0 when the fix is words: a command goes in a code block, words never. */
size_t model_fix_command_len(const char *fix);

/* The shape of m with that hash, or NULL. */
const model_shape *model_shape_by_hash(const model *m, uint64_t hash);

#endif
