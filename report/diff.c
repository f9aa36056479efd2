/* --baseline (model.h, model_diff): shapes and findings matched by hash
 * (a finding by rule and shape hash, as the engine dedupes them), and the
 * shapes present on both sides whose p95 latency grew past the
 * regression thresholds. */
#include <stdlib.h>

#include "report/model.h"

static bool has_shape(const model *m, uint64_t hash)
{
	for (size_t i = 0; i < m->nshapes; i++)
		if (m->shapes[i].hash == hash)
			return true;
	return false;
}

static const model_shape *find_shape(const model *m, uint64_t hash)
{
	for (size_t i = 0; i < m->nshapes; i++)
		if (m->shapes[i].hash == hash)
			return &m->shapes[i];
	return NULL;
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
	if (!d->regressions)
		abort();
	for (size_t i = 0; i < now->nshapes; i++) {
		const model_shape *s = &now->shapes[i];
		const model_shape *b = find_shape(before, s->hash);
		if (!b) {
			d->new_shapes[d->nnew_shapes++] = i;
			continue;
		}
		if (s->nlat >= MODEL_REGRESSION_MIN_REPLIES &&
		    b->nlat >= MODEL_REGRESSION_MIN_REPLIES && !s->mostly_fails &&
		    s->p95 >= b->p95 * MODEL_REGRESSION_FACTOR &&
		    s->p95 - b->p95 >= MODEL_REGRESSION_MIN_MS)
			d->regressions[d->nregressions++] =
			    (model_regression){.shape = i, .before_p95 = b->p95, .p95 = s->p95};
	}
	for (size_t i = 0; i < before->nshapes; i++)
		if (!has_shape(now, before->shapes[i].hash))
			d->gone_shapes[d->ngone_shapes++] = i;
	for (size_t i = 0; i < now->nfindings; i++)
		if (!has_finding(before, now->findings[i].rule, now->findings[i].hash))
			d->new_findings[d->nnew_findings++] = i;
	for (size_t i = 0; i < before->nfindings; i++)
		if (!has_finding(now, before->findings[i].rule, before->findings[i].hash))
			d->gone_findings[d->ngone_findings++] = i;
}

void model_diff_free(model_diff *d)
{
	free(d->new_shapes);
	free(d->gone_shapes);
	free(d->new_findings);
	free(d->gone_findings);
	free(d->regressions);
	*d = (model_diff){0};
}

bool model_finding_is_new(const model *m, size_t i)
{
	if (!m->diff)
		return true;
	return !has_finding(m->diff->before, m->findings[i].rule, m->findings[i].hash);
}
