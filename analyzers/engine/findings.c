/* The dedupe table: an lru_map keyed by (rule, shapeHash, action,
 * application name). An entry owns a copy of its first finding's strings,
 * which summaries repeat; that copy is the only allocation, made once per
 * new key (a first occurrence, never the common case). */
#include "analyzers/engine/findings.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/catalog/lru_map.h"

typedef struct fentry {
	lru_map_node node;
	struct fentry *due_next; /* flush's list of copies; never in the map */
	uint64_t count;          /* repeats since the last flush */
	finding f;               /* strings point into text */
	char text[];
} fentry;

struct findings_table {
	pthread_mutex_t lock;
	lru_map map; /* least recently reported evicted first */
};

static fentry *fentry_of(lru_map_node *n)
{
	return LRU_MAP_ENTRY(n, fentry, node);
}

static void fentry_free(lru_map_node *n)
{
	free(fentry_of(n));
}

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
	e->f.would_block = NULL; /* the first occurrence's line carried it; summaries do not */
	return e;
}

findings_table *findings_table_new(size_t max_keys)
{
	findings_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (!lru_map_init(&t->map, max_keys)) {
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
	lru_map_destroy(&t->map, fentry_free);
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

static bool node_is(const lru_map_node *n, const void *f)
{
	return same_key(&LRU_MAP_ENTRY(n, const fentry, node)->f, f);
}

static void emit_summary(const fentry *e, uint64_t repeats, engine_sink_fn sink, void *arg)
{
	finding f = e->f;
	f.repeats = repeats;
	sink(arg, &f);
}

/* A known key is counted under the lock and nothing is sent: the log
 * carries a key's first occurrence and then periodic summaries, not one
 * line per request. A new key evicts the least recently seen one. */
void findings_table_report(findings_table *t, const finding *f, engine_sink_fn sink, void *arg)
{
	fentry *victim = NULL;
	uint64_t hash = key_hash(f);
	pthread_mutex_lock(&t->lock);
	lru_map_node *n = lru_map_find(&t->map, hash, node_is, f);
	if (n) {
		fentry_of(n)->count++;
		lru_map_touch(&t->map, n);
		pthread_mutex_unlock(&t->lock);
		return;
	}
	/* Allocate before evicting: out of memory, the table keeps what it
	 * has and this finding is still sent. */
	fentry *e = fentry_new(f);
	if (e) {
		if (lru_map_full(&t->map)) {
			victim = fentry_of(lru_map_oldest(&t->map));
			lru_map_remove(&t->map, &victim->node);
		}
		lru_map_insert(&t->map, &e->node, hash);
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

bool findings_table_count_repeat(findings_table *t, const finding *f)
{
	uint64_t hash = key_hash(f);
	pthread_mutex_lock(&t->lock);
	lru_map_node *n = lru_map_find(&t->map, hash, node_is, f);
	if (n) {
		fentry_of(n)->count++;
		lru_map_touch(&t->map, n);
	}
	pthread_mutex_unlock(&t->lock);
	return n != NULL;
}

void findings_table_flush(findings_table *t, engine_sink_fn sink, void *arg)
{
	/* Copy what is due under the lock, report it after: a slow sink
	 * must not hold up worker threads that fire rules meanwhile. The
	 * walk goes newest first and prepends, so summaries go out oldest
	 * first. */
	fentry *due = NULL;
	pthread_mutex_lock(&t->lock);
	for (lru_map_node *n = lru_map_newest(&t->map); n; n = lru_map_older(n)) {
		fentry *e = fentry_of(n);
		if (e->count == 0)
			continue;
		fentry *c = fentry_new(&e->f);
		if (!c)
			continue; /* keep the count for the next flush */
		c->count = e->count;
		c->due_next = due;
		due = c;
		e->count = 0;
	}
	pthread_mutex_unlock(&t->lock);
	while (due) {
		fentry *next = due->due_next;
		emit_summary(due, due->count, sink, arg);
		free(due);
		due = next;
	}
}
