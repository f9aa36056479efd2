/* The in-flight ring (see inflight.h). */
#include "proxy/session/inflight.h"

#include <stdlib.h>
#include <string.h>

#include "analyzers/catalog/index_cache.h"

void inflight_init(inflight_ring *r)
{
	memset(r, 0, sizeof(*r));
	r->slot = r->inline_slot;
	r->cap = INFLIGHT_INLINE;
}

static void entry_free(inflight *f)
{
	if (f->answer)
		free(f->answer);
	if (f->kept)
		free(f->kept);
	if (f->gate)
		index_cache_client_end(f->gate_ic, f->gate - 1);
	*f = (inflight){0};
}

void inflight_clear(inflight_ring *r)
{
	while (r->count > 0)
		inflight_pop(r);
	if (r->slot != r->inline_slot)
		free(r->slot);
	inflight_init(r);
}

/* Twice the slots, the entries moved to the front in order. */
static bool grow(inflight_ring *r)
{
	unsigned cap = r->cap * 2;
	inflight *slot = calloc(cap, sizeof(*slot));
	if (!slot)
		return false;
	for (unsigned i = 0; i < r->count; i++)
		slot[i] = *inflight_at(r, i);
	if (r->slot != r->inline_slot)
		free(r->slot);
	else
		memset(r->inline_slot, 0, sizeof(r->inline_slot));
	r->slot = slot;
	r->cap = cap;
	r->head = 0;
	return true;
}

inflight *inflight_push(inflight_ring *r, int32_t request_id, inflight_kind kind, reply_form form)
{
	if (r->count == INFLIGHT_MAX || (r->count == r->cap && !grow(r)))
		return NULL;
	inflight *f = inflight_at(r, r->count);
	f->request_id = request_id;
	f->kind = kind;
	f->form = form;
	r->count++;
	return f;
}

void inflight_pop(inflight_ring *r)
{
	entry_free(&r->slot[r->head]);
	r->head = (r->head + 1) & (r->cap - 1);
	r->count--;
}

bool inflight_only_awaiting(const inflight_ring *r)
{
	for (unsigned i = 0; i < r->count; i++)
		if (r->slot[(r->head + i) & (r->cap - 1)].kind != INFLIGHT_AWAIT)
			return false;
	return true;
}
