/* --md: a Markdown summary for a pull request or a ticket: the overview,
 * the ten costliest shapes, and each rule's findings with their fixes. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report/model.h"
#include "report/diff_out.h"
#include "report/housekeeping.h"
#include "report/out.h"
#include "report/report.h"
#include "report/sections.h"
#include "report/sort.h"

/* "3 (60%, codes 11000 ×2, 121), **mostly fails**", or "0". */
static void failures_cell(text_buf *t, const model_shape *s)
{
	text_printf(t, "%" PRIu64, s->errors);
	if (s->errors) {
		text_printf(t, " (%.0f%%", model_failed_share(s) * 100);
		for (size_t c = 0; c < s->ncodes; c++)
			text_printf(t, "%s%" PRId32 " ×%" PRIu64, c ? ", " : ", codes ",
			            s->codes[c], s->code_counts[c]);
		text_str(t, s->mostly_fails ? "), **mostly fails**" : ")");
	}
	text_str(t, " | ");
}

/* The findings of the rules that grow arrays, ranked by how much their
 * arrays grew (arrays.c). */
static void pushes_md(out_t *o, const model *m)
{
	size_t n = 0, *p = model_array_findings_by_growth(m, &n);
	if (p && n) {
		text_str(&o->t,
		         "\n## Arrays that grow (by growth: second-half largest minus "
		         "first-half largest)\n\n| ns | array | largest | p95 | first half | "
		         "second half | growth | |\n|---|---|---:|---:|---:|---:|---:|---|\n");
		for (size_t k = 0; k < n; k++) {
			const model_finding *f = &m->findings[p[k]];
			text_str(&o->t, "| ");
			out_md_code(&o->t, f->ns, 100, true);
			text_str(&o->t, " | ");
			if (!f->has_evidence) {
				text_str(&o->t, "(none sampled) | | | | | | |\n");
				continue;
			}
			out_md_code(&o->t, f->arr.path, 100, true);
			text_printf(&o->t,
			            " | %" PRId64 " | %" PRId64 " | %" PRId64 " | %" PRId64
			            " | %+" PRId64 " | %s |\n",
			            f->arr.largest, f->arr.p95, f->arr.first_half,
			            f->arr.second_half, f->arr.growth,
			            f->array_bounded ? "seen only small" : "");
			out_flush(o);
		}
	}
	free(p);
}

/* Each finding: its shape, what it saw, and its fix (a command in a code
 * block, words as words). */
static void changes_md(out_t *o, const model *m)
{
	text_str(&o->t, "\n## What to change\n");
	if (m->nfindings)
		report_legend_md(&o->t);
	for (size_t i = 0; i < m->nfindings; i++) {
		const model_finding *fd = &m->findings[i];
		text_printf(&o->t, "\n### `%s` on ", rule_name(fd->rule));
		out_md_code(&o->t, fd->ns, sizeof fd->ns, false);
		text_str(&o->t, " (");
		out_count(&o->t, fd->count, "occurrence", "occurrences");
		text_str(&o->t, ")\n\nShape: ");
		out_md_code(&o->t, fd->shape, 1000, false);
		text_str(&o->t, "\n\n");
		if (fd->count > 1) /* one occurrence's figures, not every one's */
			text_printf(&o->t, "First of %" PRIu64 " occurrences: ", fd->count);
		out_md_text(&o->t, fd->detail);
		if (rule_table[fd->rule]->grows_arrays) {
			text_str(&o->t, "\n\n");
			report_arrays_md(&o->t, fd);
		}
		size_t n = model_fix_command_len(fd->suggestion);
		const char *rest = fd->suggestion + n;
		if (n) {
			size_t fence = out_md_fence_need(3, fd->suggestion, n);
			text_str(&o->t, "\n\n");
			out_md_fence(&o->t, fence);
			text_str(&o->t, "js\n");
			out_md_code_line(&o->t, fd->suggestion, n);
			text_char(&o->t, '\n');
			out_md_fence(&o->t, fence);
		}
		while (*rest == ' ')
			rest++;
		if (n && !strncmp(rest, "and ", 4))
			rest += 4;
		text_str(&o->t, !*rest ? "\n" : n ? "\n\nThen: " : "\n\nFix: ");
		out_md_text(&o->t, rest);
		text_char(&o->t, '\n');
		out_flush(o);
	}
}

/* The overview: what was read, in counts with their nouns. */
static void overview_md(out_t *o, const model *m)
{
	double secs = m->t_max > m->t_min ? (double)(m->t_max - m->t_min) / 1e6 : 0;
	text_str(&o->t, "# mongoguard design review\n\n- Requests: ");
	text_printf(&o->t, "%" PRIu64 " over %.1f s (", m->requests, secs);
	out_count(&o->t, m->nshapes, "query shape", "query shapes");
	text_str(&o->t, ", ");
	out_count(&o->t, m->napps, "app", "apps");
	text_str(&o->t, ", ");
	out_count(&o->t, m->nnss, "collection", "collections");
	text_str(&o->t, ")\n- Driver and shell housekeeping: ");
	report_housekeeping_words(&o->t, m, 8);
	text_printf(&o->t,
	            ", not counted as query shapes\n- Replies paired with their request: %" PRIu64
	            " of %" PRIu64 "\n- Records lost to a full capture queue: %" PRIu64
	            "\n- Redaction: %s\n",
	            m->paired, m->replies, m->dropped,
	            m->redacted ? "shapes only" : "some inputs hold whole requests");
	if (m->no_value_hashes)
		text_str(&o->t, "- Limit: " REPORT_NO_VALUE_HASHES "\n");
	size_t mark = text_mark(&o->t);
	text_str(&o->t, "- Judged with (--rule): ");
	if (!report_overrides_words(&o->t, m))
		text_rewind(&o->t, mark); /* the capture's own rules: nothing to say */
	else
		text_char(&o->t, '\n');
	for (size_t i = 0; i < m->ninputs; i++)
		if (m->inputs[i].refused || m->inputs[i].truncated) {
			text_str(&o->t, "- **");
			text_str(&o->t, m->inputs[i].refused ? "Refused" : "Truncated");
			text_str(&o->t, "**: ");
			out_md_code(&o->t, m->inputs[i].path, 200, false);
			text_str(&o->t, ": ");
			text_str(&o->t, m->inputs[i].problem);
			text_char(&o->t, '\n');
		}
	out_flush(o);
}

/* Per rule: its findings (a finding is the rule on one query shape) and
 * their occurrences (each time a request broke it: docs/report.md). */
static void rules_md(out_t *o, const model *m)
{
	text_str(&o->t, "\n## Findings per rule\n\nA finding is a rule broken by one query "
	                "shape; its occurrences are the times requests broke it (each statement "
	                "of a batch counts).\n\n| rule | findings | occurrences | fix "
	                "|\n|---|---:|---:|---|\n");
	for (int r = 0; r < RULE_COUNT; r++) {
		size_t n = 0;
		for (size_t i = 0; i < m->nfindings; i++)
			n += m->findings[i].rule == (rule_id)r;
		text_printf(&o->t, "| `%s` | %zu | %" PRIu64 " | %s |\n", rule_name((rule_id)r), n,
		            m->rule_totals[r], rule_table[r]->fix_kind);
	}
	out_flush(o);
}

static void shapes_md(out_t *o, const model *m)
{
	text_str(&o->t, "\n## Costliest query shapes (by total time)\n\n"
	                "| ns | command | count | p50 ms | p95 ms | total ms | failed | rules | "
	                "shape |\n|---|---|---:|---:|---:|---:|---|---|---|\n");
	size_t *order = model_shapes_by_time(m);
	for (size_t k = 0; order && k < m->nshapes && k < 10; k++) {
		const model_shape *s = &m->shapes[order[k]];
		text_str(&o->t, "| ");
		out_md_code(&o->t, s->ns, 100, true);
		text_str(&o->t, " | ");
		out_md_text(&o->t, s->command);
		text_printf(&o->t, " | %" PRIu64 " | %.2f | %.2f | %.1f | ", s->count, s->p50,
		            s->p95, (double)s->total_us / 1000.0);
		failures_cell(&o->t, s);
		for (int r = 0; r < RULE_COUNT; r++)
			if (s->rules & (1u << r))
				text_printf(&o->t, "`%s` ", rule_name((rule_id)r));
		text_str(&o->t, "| ");
		out_md_code(&o->t, s->shape, 300, true);
		text_str(&o->t, " |\n");
		out_flush(o);
	}
	free(order);
	report_legend_md(&o->t);
	out_flush(o);
}

bool report_write_md(const model *m, FILE *f)
{
	static out_t o;
	out_init(&o, f);
	overview_md(&o, m);
	rules_md(&o, m);
	report_recs_md(&o, m);
	shapes_md(&o, m);
	report_workload_md(&o, m);
	report_rels_md(&o, m);
	report_quiet_md(&o, m);
	report_diff_md(&o, m);
	pushes_md(&o, m);
	changes_md(&o, m);
	return out_done(&o);
}
