/* --baseline (model.h, model_diff): shapes and findings matched by hash
 * (a finding by rule and shape hash, as the engine dedupes them), and the
 * shapes present on both sides whose p95 latency grew past the
 * regression thresholds. Each side's rows are looked up in the other's
 * rows sorted by key, so a diff of many shapes and findings stays
 * n log n. */
#include <stdlib.h>

#include "report/model.h"

/* A row's key: its shape hash, and its rule (0 for a shape); i, the row,
 * orders equal keys so a lookup finds the first row as a scan would. */
typedef struct diff_key {
	uint64_t hash;
	int rule;
	size_t i;
} diff_key;

static int key_cmp(const void *pa, const void *pb)
{
	const diff_key *a = pa, *b = pb;
	if (a->hash != b->hash)
		return a->hash < b->hash ? -1 : 1;
	if (a->rule != b->rule)
		return a->rule < b->rule ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

static diff_key *keys(size_t n)
{
	diff_key *v = calloc(n ? n : 1, sizeof *v);
	if (!v)
		abort(); /* as the aggregator: nothing sensible to do */
	return v;
}

static diff_key *shape_keys(const model *m)
{
	diff_key *v = keys(m->nshapes);
	for (size_t i = 0; i < m->nshapes; i++)
		v[i] = (diff_key){.hash = m->shapes[i].hash, .i = i};
	qsort(v, m->nshapes, sizeof *v, key_cmp);
	return v;
}

static diff_key *finding_keys(const model *m)
{
	diff_key *v = keys(m->nfindings);
	for (size_t i = 0; i < m->nfindings; i++)
		v[i] = (diff_key){
		    .hash = m->findings[i].hash, .rule = (int)m->findings[i].rule, .i = i};
	qsort(v, m->nfindings, sizeof *v, key_cmp);
	return v;
}

/* The first row with hash and rule in v (sorted), or NULL. */
static const diff_key *lookup(const diff_key *v, size_t n, uint64_t hash, int rule)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].hash < hash || (v[mid].hash == hash && v[mid].rule < rule))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].hash == hash && v[lo].rule == rule ? &v[lo] : NULL;
}

static bool has_finding(const model *m, rule_id r, uint64_t hash)
{
	for (size_t i = 0; i < m->nfindings; i++)
		if (m->findings[i].rule == r && m->findings[i].hash == hash)
			return true;
	return false;
}

static size_t *list(size_t n)
{
	size_t *v = calloc(n ? n : 1, sizeof *v);
	if (!v)
		abort(); /* as the aggregator: nothing sensible to do */
	return v;
}

void model_diff_build(const model *now, const model *before, model_diff *d)
{
	*d = (model_diff){.before = before};
	d->new_shapes = list(now->nshapes);
	d->gone_shapes = list(before->nshapes);
	d->new_findings = list(now->nfindings);
	d->gone_findings = list(before->nfindings);
	d->regressions = calloc(now->nshapes ? now->nshapes : 1, sizeof *d->regressions);
	d->finding_new = calloc(now->nfindings ? now->nfindings : 1, sizeof *d->finding_new);
	if (!d->regressions || !d->finding_new)
		abort();
	d->nnow_findings = now->nfindings;
	diff_key *now_shapes = shape_keys(now), *before_shapes = shape_keys(before);
	diff_key *now_findings = finding_keys(now), *before_findings = finding_keys(before);
	for (size_t i = 0; i < now->nshapes; i++) {
		const model_shape *s = &now->shapes[i];
		const diff_key *k = lookup(before_shapes, before->nshapes, s->hash, 0);
		if (!k) {
			d->new_shapes[d->nnew_shapes++] = i;
			continue;
		}
		const model_shape *b = &before->shapes[k->i];
		if (s->nlat >= MODEL_REGRESSION_MIN_REPLIES &&
		    b->nlat >= MODEL_REGRESSION_MIN_REPLIES && !s->mostly_fails &&
		    s->p95 >= b->p95 * MODEL_REGRESSION_FACTOR &&
		    s->p95 - b->p95 >= MODEL_REGRESSION_MIN_MS)
			d->regressions[d->nregressions++] =
			    (model_regression){.shape = i, .before_p95 = b->p95, .p95 = s->p95};
	}
	for (size_t i = 0; i < before->nshapes; i++)
		if (!lookup(now_shapes, now->nshapes, before->shapes[i].hash, 0))
			d->gone_shapes[d->ngone_shapes++] = i;
	for (size_t i = 0; i < now->nfindings; i++) {
		const model_finding *f = &now->findings[i];
		if (!lookup(before_findings, before->nfindings, f->hash, (int)f->rule)) {
			d->new_findings[d->nnew_findings++] = i;
			d->finding_new[i] = true;
		}
	}
	for (size_t i = 0; i < before->nfindings; i++) {
		const model_finding *f = &before->findings[i];
		if (!lookup(now_findings, now->nfindings, f->hash, (int)f->rule))
			d->gone_findings[d->ngone_findings++] = i;
	}
	free(now_shapes);
	free(before_shapes);
	free(now_findings);
	free(before_findings);
}

void model_diff_free(model_diff *d)
{
	free(d->new_shapes);
	free(d->gone_shapes);
	free(d->new_findings);
	free(d->gone_findings);
	free(d->regressions);
	free(d->finding_new);
	*d = (model_diff){0};
}

bool model_finding_is_new(const model *m, size_t i)
{
	if (!m->diff)
		return true;
	if (m->diff->finding_new && m->diff->nnow_findings == m->nfindings)
		return m->diff->finding_new[i];
	/* a diff made by hand, not by model_diff_build */
	return !has_finding(m->diff->before, m->findings[i].rule, m->findings[i].hash);
}
