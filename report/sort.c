/* The report's orderings (sort.h). qsort has no argument for a model:
 * the comparators read one set just before, the report being one
 * thread. */
#include "report/sort.h"

#include <stdlib.h>

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
	return a < b ? -1 : a > b;
}

void sort_i64(int64_t *v, size_t n)
{
	if (n > 1) /* v may be NULL when there is nothing to sort */
		qsort(v, n, sizeof *v, cmp_i64);
}

static const model *sort_model;

static int by_time(const void *x, const void *y)
{
	const model_shape *a = &sort_model->shapes[*(const size_t *)x];
	const model_shape *b = &sort_model->shapes[*(const size_t *)y];
	if (a->total_us != b->total_us)
		return a->total_us > b->total_us ? -1 : 1;
	return a->count > b->count ? -1 : a->count < b->count;
}

size_t *model_shapes_by_time(const model *m)
{
	size_t *o = malloc((m->nshapes ? m->nshapes : 1) * sizeof *o);
	if (!o)
		return NULL;
	for (size_t i = 0; i < m->nshapes; i++)
		o[i] = i;
	sort_model = m;
	qsort(o, m->nshapes, sizeof *o, by_time);
	return o;
}

static int by_growth(const void *x, const void *y)
{
	const model_finding *a = &sort_model->findings[*(const size_t *)x];
	const model_finding *b = &sort_model->findings[*(const size_t *)y];
	int64_t ga = a->has_evidence ? a->arr.growth : INT64_MIN;
	int64_t gb = b->has_evidence ? b->arr.growth : INT64_MIN;
	if (ga != gb)
		return ga > gb ? -1 : 1;
	int64_t la = a->has_evidence ? a->arr.largest : -1,
	        lb = b->has_evidence ? b->arr.largest : -1;
	return la > lb ? -1 : la < lb;
}

size_t *model_array_findings_by_growth(const model *m, size_t *n)
{
	size_t *o = malloc((m->nfindings ? m->nfindings : 1) * sizeof *o);
	*n = 0;
	if (!o)
		return NULL;
	for (size_t i = 0; i < m->nfindings; i++)
		if (rule_table[m->findings[i].rule]->grows_arrays)
			o[(*n)++] = i;
	sort_model = m;
	qsort(o, *n, sizeof *o, by_growth);
	return o;
}
