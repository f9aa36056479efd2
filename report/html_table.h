/* The HTML report's tables (html.c, diff_out.c): a head from a list of
 * columns, and the cells the tables hold. A number column is
 * right-aligned (class "n", in html.c's style sheet). Text is escaped;
 * a cell of anything else is opened and closed around it. */
#ifndef MG_REPORT_HTML_TABLE_H
#define MG_REPORT_HTML_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/text.h"

typedef struct html_col {
	const char *name; /* the heading, text */
	bool num;         /* holds numbers: right-aligned */
} html_col;

/* <table attrs><thead>...</thead><tbody>: attrs (id, class) written as
 * given, or NULL; no columns, no head (a table whose rows carry their
 * own heading, html_table_row_head). */
void html_table_open(text_buf *t, const char *attrs, const html_col *cols, size_t ncols);
void html_table_close(text_buf *t); /* </tbody></table> */

/* A row whose first cell is a heading: <tr><th>label</th><td>; its one
 * data cell is then written and html_table_row_end closes both. */
void html_table_row_head(text_buf *t, const char *label);
void html_table_row_end(text_buf *t);

/* <td> or <td class="cls"> (cls NULL: none); html_table_td_end: </td>. */
void html_table_td(text_buf *t, const char *cls);
void html_table_td_end(text_buf *t);
void html_table_td_text(text_buf *t, const char *s); /* escaped */
void html_table_td_code(text_buf *t, const char *s); /* escaped, in <code> */
void html_table_td_u64(text_buf *t, uint64_t v);     /* a number cell */
/* A number cell of v with prec decimals (milliseconds, rates). */
void html_table_td_fixed(text_buf *t, double v, int prec);

#endif
