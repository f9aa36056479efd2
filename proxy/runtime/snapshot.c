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
	refcount_init(&s->refs);
	return s;
}

snapshot *snapshot_ref(snapshot *s)
{
	refcount_take(&s->refs);
	return s;
}

void snapshot_unref(snapshot *s)
{
	if (!s || !refcount_drop(&s->refs))
		return;
	if (s->engine) /* repeats counted since the last summary are not lost */
		engine_flush_summaries(s->engine);
	engine_free(s->engine);
	tls_free(&s->tls);
	free(s);
}

static void slot_retain(void *s)
{
	snapshot_ref(s);
}

static void slot_release(void *s)
{
	snapshot_unref(s);
}

static const ref_slot_ops snapshot_slot_ops = {slot_retain, slot_release};

void snapshot_slot_init(snapshot_slot *ss, snapshot *first)
{
	ref_slot_init(&ss->s, &snapshot_slot_ops, first);
}

void snapshot_slot_destroy(snapshot_slot *ss)
{
	ref_slot_destroy(&ss->s);
}

snapshot *snapshot_slot_get(snapshot_slot *ss)
{
	return ref_slot_get(&ss->s);
}

void snapshot_slot_publish(snapshot_slot *ss, snapshot *s)
{
	ref_slot_publish(&ss->s, s);
}
