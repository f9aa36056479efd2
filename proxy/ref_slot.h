/* A ref_slot: where one counted, immutable object is published for other
 * threads to take, and replaced whole. The routes in force
 * (proxy/net/routes.h) and the configuration snapshot in force
 * (proxy/runtime/snapshot.h) are each published in one.
 *
 * The slot holds one reference to its object. ref_slot_get() hands out a
 * new one under the lock, so an object is never freed between reading the
 * pointer and counting the reader; ref_slot_publish() swaps in the next
 * object and drops the slot's reference to the old one outside the lock,
 * so a free never runs under it. Readers keep the object they took until
 * they release it: nothing they point into goes away while they run.
 * Taking is rare (per accepted connection, per publication), so a mutex is
 * enough.
 *
 * Depends on pthreads only: any folder of proxy/ may use it. */
#ifndef MG_PROXY_REF_SLOT_H
#define MG_PROXY_REF_SLOT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* An object's reference count, from 1 for its creator. */
static inline void refcount_init(atomic_uint *refs)
{
	atomic_init(refs, 1);
}

static inline void refcount_take(atomic_uint *refs)
{
	atomic_fetch_add_explicit(refs, 1, memory_order_relaxed);
}

/* True when that was the last reference: the caller frees the object
 * (acquire-release, so every other holder's use happens before). */
static inline bool refcount_drop(atomic_uint *refs)
{
	return atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) == 1;
}

/* How the slot counts references to the objects it holds. */
typedef struct ref_slot_ops {
	void (*retain)(void *obj);
	void (*release)(void *obj);
} ref_slot_ops;

typedef struct ref_slot {
	pthread_mutex_t lock;
	void *current; /* the slot's reference */
	const ref_slot_ops *ops;
} ref_slot;

void ref_slot_init(ref_slot *s, const ref_slot_ops *ops, void *first); /* takes first's reference */
void ref_slot_destroy(ref_slot *s);            /* drops the slot's reference */
void *ref_slot_get(ref_slot *s);               /* a new reference */
void ref_slot_publish(ref_slot *s, void *obj); /* takes obj's reference */

#endif
