/* What the three writers share (model.h). */
#include <stdlib.h>

#include "report/model.h"

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
	sort_model = m; /* qsort has no argument; the report is one thread */
	qsort(o, m->nshapes, sizeof *o, by_time);
	return o;
}
