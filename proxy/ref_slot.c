/* Published counted objects (see ref_slot.h). */
#include "proxy/ref_slot.h"

#include <stddef.h>

void ref_slot_init(ref_slot *s, const ref_slot_ops *ops, void *first)
{
	pthread_mutex_init(&s->lock, NULL);
	s->ops = ops;
	s->current = first;
}

void ref_slot_destroy(ref_slot *s)
{
	s->ops->release(s->current);
	s->current = NULL;
	pthread_mutex_destroy(&s->lock);
}

void *ref_slot_get(ref_slot *s)
{
	pthread_mutex_lock(&s->lock);
	void *obj = s->current;
	s->ops->retain(obj);
	pthread_mutex_unlock(&s->lock);
	return obj;
}

void ref_slot_publish(ref_slot *s, void *obj)
{
	pthread_mutex_lock(&s->lock);
	void *old = s->current;
	s->current = obj;
	pthread_mutex_unlock(&s->lock);
	s->ops->release(old);
}
