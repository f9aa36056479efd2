/* The HTML report's tables (html_table.h). */
#include "report/html_table.h"

#include <inttypes.h>

void html_table_open(text_buf *t, const char *attrs, const html_col *cols, size_t ncols)
{
	text_str(t, "<table");
	if (attrs) {
		text_char(t, ' ');
		text_str(t, attrs);
	}
	text_char(t, '>');
	if (ncols) {
		text_str(t, "<thead><tr>");
		for (size_t i = 0; i < ncols; i++) {
			text_str(t, cols[i].num ? "<th class=\"n\">" : "<th>");
			text_html(t, cols[i].name);
			text_str(t, "</th>");
		}
		text_str(t, "</tr></thead>");
	}
	text_str(t, "<tbody>");
}

void html_table_close(text_buf *t)
{
	text_str(t, "</tbody></table>");
}

void html_table_row_head(text_buf *t, const char *label)
{
	text_str(t, "<tr><th>");
	text_html(t, label);
	text_str(t, "</th><td>");
}

void html_table_row_end(text_buf *t)
{
	text_str(t, "</td></tr>");
}

void html_table_td(text_buf *t, const char *cls)
{
	if (!cls) {
		text_str(t, "<td>");
		return;
	}
	text_str(t, "<td class=\"");
	text_str(t, cls);
	text_str(t, "\">");
}

void html_table_td_end(text_buf *t)
{
	text_str(t, "</td>");
}

void html_table_td_text(text_buf *t, const char *s)
{
	text_str(t, "<td>");
	text_html(t, s);
	text_str(t, "</td>");
}

void html_table_td_code(text_buf *t, const char *s)
{
	text_str(t, "<td><code>");
	text_html(t, s);
	text_str(t, "</code></td>");
}

void html_table_td_u64(text_buf *t, uint64_t v)
{
	text_printf(t, "<td class=\"n\">%" PRIu64 "</td>", v);
}

void html_table_td_fixed(text_buf *t, double v, int prec)
{
	text_printf(t, "<td class=\"n\">%.*f</td>", prec, v);
}
