/* Counted, immutable configuration snapshots (see snapshot.h). */
#include "proxy/runtime/snapshot.h"

#include <stdlib.h>

snapshot *snapshot_new(const mg_config *cfg, engine *e, const net_tls *tls, unsigned generation)
{
	snapshot *s = malloc(sizeof(*s));
	net_tls t = *tls;
	if (!s) {
		engine_free(e);
		tls_free(&t);
		return NULL;
	}
	s->cfg = *cfg;
	s->engine = e;
	s->tls = t;
	s->generation = generation;
	atomic_init(&s->refs, 1);
	return s;
}

snapshot *snapshot_ref(snapshot *s)
{
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

void snapshot_unref(snapshot *s)
{
	if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (s->engine) /* repeats counted since the last summary are not lost */
		engine_flush_summaries(s->engine);
	engine_free(s->engine);
	tls_free(&s->tls);
	free(s);
}

void snapshot_slot_init(snapshot_slot *slot, snapshot *first)
{
	pthread_mutex_init(&slot->lock, NULL);
	slot->current = first;
}

void snapshot_slot_destroy(snapshot_slot *slot)
{
	snapshot_unref(slot->current);
	slot->current = NULL;
	pthread_mutex_destroy(&slot->lock);
}

snapshot *snapshot_slot_get(snapshot_slot *slot)
{
	pthread_mutex_lock(&slot->lock);
	snapshot *s = snapshot_ref(slot->current);
	pthread_mutex_unlock(&slot->lock);
	return s;
}

void snapshot_slot_publish(snapshot_slot *slot, snapshot *s)
{
	pthread_mutex_lock(&slot->lock);
	snapshot *old = slot->current;
	slot->current = s;
	pthread_mutex_unlock(&slot->lock);
	snapshot_unref(old);
}
