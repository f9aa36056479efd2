/* Evidence for arrays: what sampled replies showed of the arrays that
 * the findings of a rule that grows arrays (rules.h, grows_arrays) append
 * to. A sampled reply records, per path,
 * the longest array of its documents (capture.replySampleRate; docs/
 * report.md); each such figure is kept with the reply's time. For a
 * finding: its largest, the 95th percentile of the sampled figures, and
 * the growth over the capture, measured as the largest in the second half
 * of the capture's time range minus the largest in the first half. An
 * array never over MODEL_ARRAY_SMALL that did not grow is labelled as seen
 * only small; pushes are ranked by growth, then by largest. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/aggregate_parts.h"
#include "report/sections.h"
#include "report/sort.h"

void agg_array_sample(model_ns *n, const char *path, int64_t len, int64_t t)
{
	ns_field_note(&n->arrays, &n->narrays, path, len);
	model_field *f = NULL;
	for (size_t i = n->narrays; i-- > 0 && !f;)
		if (!strcmp(n->arrays[i].path, path))
			f = &n->arrays[i];
	if (!f || f->nsamples >= MODEL_ARRAY_SAMPLES)
		return;
	if (f->nsamples == f->capsamples) {
		size_t nc = f->capsamples ? f->capsamples * 2 : 64;
		int64_t *nt = realloc(f->sample_t, nc * sizeof *nt);
		if (!nt)
			abort();
		f->sample_t = nt;
		int64_t *nl = realloc(f->sample_len, nc * sizeof *nl);
		if (!nl)
			abort();
		f->sample_len = nl;
		f->capsamples = nc;
	}
	f->sample_t[f->nsamples] = t;
	f->sample_len[f->nsamples++] = len;
}

/* The fields a shape's $push / $addToSet name, anywhere in it (update
 * statements, findAndModify, bulkWrite). */
static void push_paths_in(model_finding *mf, bson_iter_t *it, int depth)
{
	bson_iter_t c;
	while (depth < 8 && bson_iter_next(it)) {
		const char *k = bson_iter_key(it);
		if (!BSON_ITER_HOLDS_DOCUMENT(it) && !BSON_ITER_HOLDS_ARRAY(it))
			continue;
		if (!bson_iter_recurse(it, &c))
			continue;
		if (strcmp(k, "$push") && strcmp(k, "$addToSet")) {
			push_paths_in(mf, &c, depth + 1);
			continue;
		}
		while (bson_iter_next(&c) && mf->npush_paths < 4)
			if (bson_iter_key(&c)[0] != '$')
				snprintf(mf->push_paths[mf->npush_paths++],
				         sizeof mf->push_paths[0], "%s", bson_iter_key(&c));
	}
}

void agg_finding_push_paths(model_finding *mf)
{
	bson_iter_t it;
	bson_t *b = bson_new_from_json((const uint8_t *)mf->shape, -1, NULL);
	if (b && bson_iter_init(&it, b))
		push_paths_in(mf, &it, 0);
	bson_destroy(b);
}

void report_array_evidence(const model *m, const model_field *f, model_array_evidence *e)
{
	int64_t mid = m->t_min + (m->t_max - m->t_min) / 2;
	int64_t *v = malloc((f->nsamples ? f->nsamples : 1) * sizeof *v);
	if (!v)
		abort();
	memset(e, 0, sizeof *e);
	snprintf(e->path, sizeof e->path, "%s", f->path);
	e->samples = f->nsamples;
	e->largest = f->max_len;
	e->first_half = e->second_half = -1;
	for (size_t i = 0; i < f->nsamples; i++) {
		int64_t *half = f->sample_t[i] <= mid ? &e->first_half : &e->second_half;
		if (f->sample_len[i] > *half)
			*half = f->sample_len[i];
		v[i] = f->sample_len[i];
	}
	sort_i64(v, f->nsamples);
	if (f->nsamples)
		e->p95 = v[(size_t)(0.95 * (double)(f->nsamples - 1) + 0.5)];
	e->growth = e->first_half >= 0 && e->second_half >= 0 ? e->second_half - e->first_half : 0;
	free(v);
}

static const model_field *array_of(const model *m, const char *ns, const char *path)
{
	for (size_t i = 0; i < m->nnss; i++) {
		if (strcmp(m->nss[i].ns, ns))
			continue;
		for (size_t k = 0; k < m->nss[i].narrays; k++)
			if (!strcmp(m->nss[i].arrays[k].path, path) && m->nss[i].arrays[k].nsamples)
				return &m->nss[i].arrays[k];
	}
	return NULL;
}

void report_arrays_finish(model *m)
{
	for (size_t i = 0; i < m->nfindings; i++) {
		model_finding *f = &m->findings[i];
		if (!rule_table[f->rule]->grows_arrays)
			continue;
		/* of its arrays, the one that grew most */
		for (size_t p = 0; p < f->npush_paths; p++) {
			const model_field *a = array_of(m, f->ns, f->push_paths[p]);
			model_array_evidence e;
			if (!a)
				continue;
			report_array_evidence(m, a, &e);
			if (!f->has_evidence || e.growth > f->arr.growth) {
				f->arr = e;
				f->has_evidence = true;
			}
		}
		f->array_bounded =
		    f->has_evidence && f->arr.largest <= MODEL_ARRAY_SMALL && f->arr.growth <= 0;
	}
}

/* ---- the writers' pieces ---- */

static void half(text_buf *t, int64_t v)
{
	if (v < 0)
		text_str(t, "none sampled");
	else
		text_printf(t, "%" PRId64, v);
}

void report_arrays_html(text_buf *t, const model_finding *f)
{
	if (!f->has_evidence) {
		text_str(t, "<p class=\"evidence muted\">Array lengths: no sampled reply held ");
		text_html(t, f->npush_paths ? f->push_paths[0] : "the array");
		text_str(t, " (capture.replySampleRate, or the app never reads it back).</p>");
		return;
	}
	text_str(t, "<p class=\"evidence\">Array lengths seen in sampled replies of <code>");
	text_html(t, f->arr.path);
	text_printf(t,
	            "</code>: largest <b>%" PRId64 "</b>, p95 %" PRId64 " (%" PRIu64
	            " replies); largest in the first half of the capture ",
	            f->arr.largest, f->arr.p95, f->arr.samples);
	half(t, f->arr.first_half);
	text_str(t, ", in the second ");
	half(t, f->arr.second_half);
	text_printf(t, ": growth <b>%+" PRId64 "</b>.", f->arr.growth);
	if (f->array_bounded)
		text_printf(t,
		            " <span class=\"tag ok-tag\">seen only small (at most %" PRId64
		            ", not growing): likely bounded by the business; make the bound "
		            "explicit ($slice) rather than redesign</span>",
		            f->arr.largest);
	else if (f->arr.growth > 0)
		text_str(t, " <span class=\"tag\">grows</span>");
	text_str(t, "</p>");
}

void report_arrays_md(text_buf *t, const model_finding *f)
{
	if (!f->has_evidence) {
		text_str(t, "Array lengths: no sampled reply held it.\n\n");
		return;
	}
	text_printf(t,
	            "Array lengths of `%s` in sampled replies: largest %" PRId64 ", p95 %" PRId64
	            " (%" PRIu64 " replies); largest in the first half ",
	            f->arr.path, f->arr.largest, f->arr.p95, f->arr.samples);
	half(t, f->arr.first_half);
	text_str(t, ", second half ");
	half(t, f->arr.second_half);
	text_printf(t, ": growth %+" PRId64 "%s.\n\n", f->arr.growth,
	            f->array_bounded ? "; **seen only small** (likely bounded by the business)"
	                             : "");
}

void report_arrays_json(text_buf *t, const model_finding *f, size_t growth_rank)
{
	text_str(t, ",\"arrayEvidence\":");
	if (!rule_table[f->rule]->grows_arrays) {
		text_str(t, "null");
		return;
	}
	if (!f->has_evidence) {
		text_printf(t, "{\"growthRank\":%zu,\"samples\":0}", growth_rank);
		return;
	}
	text_str(t, "{\"path\":");
	out_json_str(t, f->arr.path);
	text_printf(t,
	            ",\"growthRank\":%zu,\"samples\":%" PRIu64 ",\"largest\":%" PRId64
	            ",\"p95\":%" PRId64 ",\"firstHalfLargest\":%" PRId64
	            ",\"secondHalfLargest\":%" PRId64 ",\"growth\":%" PRId64
	            ",\"growthMeasure\":\"second-half largest minus first-half largest\","
	            "\"seenOnlySmall\":%s}",
	            growth_rank, f->arr.samples, f->arr.largest, f->arr.p95, f->arr.first_half,
	            f->arr.second_half, f->arr.growth, f->array_bounded ? "true" : "false");
}
