/* The dedupe table: a chained hash keyed by (rule, shapeHash), with an LRU
 * list for eviction. An entry owns a copy of its first finding's strings,
 * which summaries repeat; that copy is the only allocation, made once per
 * new key (a first occurrence, never the common case). */
#include "analyzers/findings.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct fentry {
	struct fentry *next;     /* hash chain */
	struct fentry *lru_prev; /* towards most recent */
	struct fentry *lru_next; /* towards least recent */
	uint64_t count;          /* repeats since the last flush */
	finding f;               /* strings point into text */
	char text[];
} fentry;

struct findings_table {
	pthread_mutex_t lock;
	size_t max_keys, nkeys, nbuckets; /* nbuckets: power of two */
	fentry **buckets;
	fentry *lru_head, *lru_tail;
};

static const char *nz(const char *s)
{
	return s ? s : "";
}

/* Copies f and its strings into one allocation. */
static fentry *fentry_new(const finding *f)
{
	const char *src[7] = {nz(f->ns),     nz(f->command),  nz(f->shape), nz(f->suggestion),
	                      nz(f->detail), nz(f->app_name), nz(f->client)};
	size_t len[7], total = 0;
	for (int i = 0; i < 7; i++) {
		len[i] = strlen(src[i]) + 1;
		total += len[i];
	}
	fentry *e = calloc(1, sizeof(*e) + total);
	if (!e)
		return NULL;
	e->f = *f;
	const char **dst[7] = {&e->f.ns,     &e->f.command,  &e->f.shape, &e->f.suggestion,
	                       &e->f.detail, &e->f.app_name, &e->f.client};
	char *p = e->text;
	for (int i = 0; i < 7; i++) {
		memcpy(p, src[i], len[i]);
		*dst[i] = p;
		p += len[i];
	}
	e->f.repeats = 0;
	return e;
}

findings_table *findings_table_new(size_t max_keys)
{
	findings_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->max_keys = max_keys ? max_keys : 1;
	t->nbuckets = 1;
	while (t->nbuckets < t->max_keys)
		t->nbuckets <<= 1;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	if (!t->buckets) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void findings_table_free(findings_table *t)
{
	if (!t)
		return;
	for (fentry *e = t->lru_head, *n; e; e = n) {
		n = e->lru_next;
		free(e);
	}
	free(t->buckets);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* The key: rule, shape, and who saw it how. The same shape blocked for one
 * application and logged for another (scopes) is two lines, or the logged
 * one would hide inside the other's summary. */
static uint64_t key_hash(const finding *f)
{
	uint64_t h = f->shape_hash ^ ((uint64_t)f->rule * 0x9e3779b97f4a7c15ull) ^
	             ((uint64_t)f->action << 61);
	for (const char *p = nz(f->app_name); *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	return h ^ (h >> 29);
}

static bool same_key(const finding *a, const finding *b)
{
	return a->rule == b->rule && a->shape_hash == b->shape_hash && a->action == b->action &&
	       strcmp(nz(a->app_name), nz(b->app_name)) == 0;
}

static fentry **bucket_of(findings_table *t, const finding *f)
{
	return &t->buckets[key_hash(f) & (t->nbuckets - 1)];
}

static void lru_unlink(findings_table *t, fentry *e)
{
	if (e->lru_prev)
		e->lru_prev->lru_next = e->lru_next;
	else
		t->lru_head = e->lru_next;
	if (e->lru_next)
		e->lru_next->lru_prev = e->lru_prev;
	else
		t->lru_tail = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(findings_table *t, fentry *e)
{
	e->lru_prev = NULL;
	e->lru_next = t->lru_head;
	if (t->lru_head)
		t->lru_head->lru_prev = e;
	t->lru_head = e;
	if (!t->lru_tail)
		t->lru_tail = e;
}

static void emit_summary(const fentry *e, uint64_t repeats, engine_sink_fn sink, void *arg)
{
	finding f = e->f;
	f.repeats = repeats;
	sink(arg, &f);
}

void findings_table_report(findings_table *t, const finding *f, engine_sink_fn sink, void *arg)
{
	fentry *victim = NULL;
	pthread_mutex_lock(&t->lock);
	fentry **b = bucket_of(t, f);
	for (fentry *e = *b; e; e = e->next)
		if (same_key(&e->f, f)) {
			e->count++;
			if (t->lru_head != e) {
				lru_unlink(t, e);
				lru_push_front(t, e);
			}
			pthread_mutex_unlock(&t->lock);
			return;
		}
	fentry *e = fentry_new(f);
	if (e) {
		if (t->nkeys >= t->max_keys && t->lru_tail) {
			victim = t->lru_tail;
			lru_unlink(t, victim);
			for (fentry **pp = bucket_of(t, &victim->f); *pp; pp = &(*pp)->next)
				if (*pp == victim) {
					*pp = victim->next;
					break;
				}
			t->nkeys--;
		}
		e->next = *b;
		*b = e;
		lru_push_front(t, e);
		t->nkeys++;
	}
	pthread_mutex_unlock(&t->lock);

	if (victim) {
		if (victim->count > 0)
			emit_summary(victim, victim->count, sink, arg);
		free(victim);
	}
	finding first = *f;
	first.repeats = 0;
	sink(arg, &first);
}

void findings_table_flush(findings_table *t, engine_sink_fn sink, void *arg)
{
	/* Copy what is due under the lock, report it after: a slow sink
	 * must not hold up worker threads that fire rules meanwhile. */
	fentry *due = NULL;
	pthread_mutex_lock(&t->lock);
	for (fentry *e = t->lru_head; e; e = e->lru_next) {
		if (e->count == 0)
			continue;
		fentry *c = fentry_new(&e->f);
		if (!c)
			continue; /* keep the count for the next flush */
		c->count = e->count;
		c->next = due;
		due = c;
		e->count = 0;
	}
	pthread_mutex_unlock(&t->lock);
	while (due) {
		fentry *n = due->next;
		emit_summary(due, due->count, sink, arg);
		free(due);
		due = n;
	}
}

size_t findings_table_size(findings_table *t)
{
	pthread_mutex_lock(&t->lock);
	size_t n = t->nkeys;
	pthread_mutex_unlock(&t->lock);
	return n;
}
