/* The workload table (see workload.h). */
#include "proxy/stats/workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned index_size(unsigned cap)
{
	unsigned n = 4;
	while (n < 2 * cap)
		n *= 2;
	return n;
}

size_t workload_bytes(unsigned shapes, unsigned colls)
{
	return sizeof(workload) + (size_t)shapes * sizeof(wl_shape) +
	       (size_t)index_size(shapes) * sizeof(uint32_t) +
	       (size_t)(colls + 1) * sizeof(wl_coll);
}

workload *workload_new(unsigned shapes, unsigned colls, int64_t now_ns)
{
	workload *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->cap = shapes ? shapes : 1;
	w->coll_cap = (colls ? colls : 1) + 1;
	w->index_mask = index_size(w->cap) - 1;
	w->shapes = calloc(w->cap, sizeof(*w->shapes));
	w->index = calloc(w->index_mask + 1, sizeof(*w->index));
	w->colls = calloc(w->coll_cap, sizeof(*w->colls));
	if (!w->shapes || !w->index || !w->colls) {
		workload_free(w);
		return NULL;
	}
	snprintf(w->colls[WL_COLL_OTHER].ns, WL_NS_LEN, "other");
	w->ncoll = 1;
	w->next_gen = 1;
	w->started_ns = now_ns;
	w->sample = WL_DEFAULT_SAMPLE;
	return w;
}

void workload_free(workload *w)
{
	if (!w)
		return;
	free(w->shapes);
	free(w->index);
	free(w->colls);
	free(w);
}

/* The index position of key: its slot's, or the empty one it would take. */
static unsigned probe(const workload *w, uint64_t key)
{
	unsigned i = (unsigned)(key ^ (key >> 29)) & w->index_mask;
	while (w->index[i] && w->shapes[w->index[i] - 1].key != key)
		i = (i + 1) & w->index_mask;
	return i;
}

wl_ref workload_find(const workload *w, uint64_t key)
{
	unsigned i = probe(w, key);
	if (!w->index[i])
		return (wl_ref){0, 0};
	const wl_shape *e = &w->shapes[w->index[i] - 1];
	return (wl_ref){w->index[i] - 1, e->gen};
}

/* Removes index position i (linear probing: the entries after it that
 * would no longer be found move back). */
static void index_remove(workload *w, unsigned i)
{
	unsigned j = i;
	w->index[i] = 0;
	for (;;) {
		j = (j + 1) & w->index_mask;
		if (!w->index[j])
			return;
		uint64_t k = w->shapes[w->index[j] - 1].key;
		unsigned home = (unsigned)(k ^ (k >> 29)) & w->index_mask;
		/* may j's entry move to i? only if its home is not in (i, j] */
		bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!stays) {
			w->index[i] = w->index[j];
			w->index[j] = 0;
			i = j;
		}
	}
}

/* A shape's requests, to its collection's counts. */
static void add_to_coll(wl_coll *c, const wl_shape *e)
{
	if (e->kind == WL_KIND_READ)
		c->reads += e->count;
	else if (e->kind == WL_KIND_WRITE)
		c->writes += e->count;
	else
		c->other += e->count;
}

/* The slot of the entry with the least total time, folded into "other". */
static unsigned fold_lightest(workload *w)
{
	unsigned min = 0;
	for (unsigned i = 1; i < w->cap; i++)
		if (w->shapes[i].total_ns < w->shapes[min].total_ns ||
		    (w->shapes[i].total_ns == w->shapes[min].total_ns &&
		     w->shapes[i].count < w->shapes[min].count))
			min = i;
	wl_shape *e = &w->shapes[min];
	add_to_coll(&w->colls[e->coll], e);
	w->folded++;
	w->folded_count += e->count;
	w->folded_total_ns += e->total_ns;
	index_remove(w, probe(w, e->key));
	return min;
}

static uint16_t coll_of(workload *w, const char *ns)
{
	for (unsigned i = 1; i < w->ncoll; i++)
		if (!strncmp(w->colls[i].ns, ns, WL_NS_LEN - 1))
			return (uint16_t)i;
	if (w->ncoll == w->coll_cap || w->ncoll > UINT16_MAX)
		return WL_COLL_OTHER;
	snprintf(w->colls[w->ncoll].ns, WL_NS_LEN, "%s", ns);
	return (uint16_t)w->ncoll++;
}

wl_ref workload_enter(workload *w, uint64_t key, const wl_desc *d, int64_t now_ns)
{
	if (!key)
		key = 1; /* 0 marks a free slot */
	wl_ref r = workload_find(w, key);
	if (r.gen)
		return r;
	unsigned slot = w->n < w->cap ? w->n++ : fold_lightest(w);
	wl_shape *e = &w->shapes[slot];
	memset(e, 0, sizeof(*e));
	e->key = key;
	e->shape_hash = d->shape_hash;
	e->gen = w->next_gen++;
	if (!w->next_gen)
		w->next_gen = 1;
	e->kind = (uint8_t)d->kind;
	e->coll = coll_of(w, d->ns ? d->ns : "");
	snprintf(e->ns, sizeof(e->ns), "%s", d->ns ? d->ns : "");
	snprintf(e->command, sizeof(e->command), "%s", d->command ? d->command : "");
	e->answer_is_n = !strcmp(e->command, "count");
	snprintf(e->app, sizeof(e->app), "%s", d->app ? d->app : "");
	snprintf(e->shape, sizeof(e->shape), "%s", d->shape ? d->shape : "");
	e->first_ns = now_ns;
	w->index[probe(w, key)] = slot + 1;
	return (wl_ref){slot, e->gen};
}

int64_t workload_bucket_mid(unsigned b)
{
	if (b < 4)
		return b;
	unsigned e = b / 4 + 1, m = b % 4;
	int64_t lo = (int64_t)(4 + m) << (e - 2);
	int64_t width = (int64_t)1 << (e - 2);
	return lo + width / 2;
}

void workload_error(wl_shape *e, int32_t code)
{
	e->errors++;
	for (unsigned i = 0; i < WL_ERRS; i++) {
		if (e->err[i].n && e->err[i].code != code)
			continue;
		e->err[i].code = code;
		e->err[i].n++;
		return;
	}
	e->err_other++;
}

int64_t workload_percentile(const wl_shape *e, double q)
{
	uint64_t total = 0;
	for (unsigned b = 0; b < WL_HIST; b++)
		total += e->hist[b];
	if (!total)
		return 0;
	/* the smallest bucket holding the ceil(q * total)-th reply */
	uint64_t rank = (uint64_t)(q * (double)total + 0.999999);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned b = 0; b < WL_HIST; b++) {
		seen += e->hist[b];
		if (seen >= rank)
			return workload_bucket_mid(b);
	}
	return workload_bucket_mid(WL_HIST - 1);
}

void workload_copy(workload *to, const workload *from)
{
	memcpy(to->shapes, from->shapes, (size_t)from->cap * sizeof(*from->shapes));
	memcpy(to->colls, from->colls, (size_t)from->coll_cap * sizeof(*from->colls));
	to->n = from->n;
	to->ncoll = from->ncoll;
	to->folded = from->folded;
	to->folded_count = from->folded_count;
	to->folded_total_ns = from->folded_total_ns;
	to->started_ns = from->started_ns;
	to->sample = from->sample;
	workload_settle(to);
}

void workload_settle(workload *w)
{
	for (unsigned i = 0; i < w->n; i++) {
		wl_shape *e = &w->shapes[i];
		e->replies = 0;
		for (unsigned b = 0; b < WL_HIST; b++)
			e->replies += e->hist[b];
		add_to_coll(&w->colls[e->coll], e);
	}
}
