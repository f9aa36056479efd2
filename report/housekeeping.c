/* Driver and shell housekeeping (housekeeping.h). Which commands are
 * housekeeping is the command table's column (protocol/commands.h); the
 * one namespace that is housekeeping is here. */
#include "report/housekeeping.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/commands.h"

/* mongosh reads this collection at start to tell an Atlas CLI local
 * deployment from others: a read no application sends. */
static const char ATLASCLI_NS[] = "admin.atlascli";

const char *report_housekeeping(const char *name, const char *ns)
{
	cmd_id id = cmd_find(name);
	if (id != CMD_NONE && cmd_rows[id].housekeeping)
		return cmd_rows[id].name;
	if (ns && !strcmp(ns, ATLASCLI_NS))
		return ATLASCLI_NS;
	return NULL;
}

void report_housekeeping_note(model *m, const char *what)
{
	m->housekeeping_requests++;
	size_t i = 0;
	while (i < m->nhousekeeping && strcmp(m->housekeeping[i].what, what) != 0)
		i++;
	if (i == m->nhousekeeping) {
		if (i == MODEL_HOUSEKEEPING_KINDS)
			return; /* counted in the total; the table holds every row's name */
		snprintf(m->housekeeping[i].what, sizeof m->housekeeping[i].what, "%s", what);
		m->nhousekeeping++;
	}
	m->housekeeping[i].count++;
}

static int by_count(const void *x, const void *y)
{
	const model_housekeeping *a = x, *b = y;
	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return strcmp(a->what, b->what);
}

void report_housekeeping_finish(model *m)
{
	qsort(m->housekeeping, m->nhousekeeping, sizeof *m->housekeeping, by_count);
}

void report_housekeeping_words(text_buf *t, const model *m, size_t max)
{
	text_printf(t, "%" PRIu64 " request%s", m->housekeeping_requests,
	            m->housekeeping_requests == 1 ? "" : "s");
	for (size_t i = 0; i < m->nhousekeeping && i < max; i++)
		text_printf(t, "%s%s %" PRIu64, i ? ", " : " (", m->housekeeping[i].what,
		            m->housekeeping[i].count);
	if (m->nhousekeeping > max)
		text_str(t, ", ...");
	if (m->nhousekeeping)
		text_char(t, ')');
}
