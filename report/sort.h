/* The report's orderings (sort.c): the lists the writers walk in their
 * useful order, and latencies and lengths sorted for percentiles. */
#ifndef MG_REPORT_SORT_H
#define MG_REPORT_SORT_H

#include <stddef.h>
#include <stdint.h>

#include "report/model.h"

/* v[0..n) ascending. */
void sort_i64(int64_t *v, size_t n);

/* The shapes by total time, then count, costliest first (indexes into
 * m->shapes, malloc'd; NULL when out of memory). */
size_t *model_shapes_by_time(const model *m);

/* The findings of the rules that grow arrays (rules.h, grows_arrays), as
 * indexes into m->findings, most growth first, then largest array;
 * *n of them. malloc'd; NULL when out of memory. */
size_t *model_array_findings_by_growth(const model *m, size_t *n);

#endif
