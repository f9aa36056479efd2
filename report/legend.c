/* The placeholders a redacted shape holds (analyzers/engine/shape.c
 * writes them), explained once wherever shapes are shown, so a reader
 * never guesses what "?regex/i" stands for. */
#include "report/sections.h"

static const char LEGEND[] =
    "a literal value is replaced by a placeholder of its type (?string, ?number, ?date, "
    "?objectId, ?bool, ?null, ...); ?regex/FLAGS is a regular expression with those flags "
    "(i: case-insensitive); ?array<?T> an array whose elements are all ?T, ?array one of "
    "mixed or no elements; ?deep a value nested too deep to show. Field names, operators, "
    "sort specifications, collection names and collations are kept as sent.";

void report_legend_html(text_buf *t)
{
	text_str(t, "<p class=\"muted legend\">Shapes: ");
	text_html(t, LEGEND);
	text_str(t, "</p>");
}

void report_legend_md(text_buf *t)
{
	text_str(t, "\nShapes: ");
	text_str(t, LEGEND);
	text_char(t, '\n');
}
