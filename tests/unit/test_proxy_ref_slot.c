/* The slot the routes and the configuration snapshot are published in
 * (proxy/ref_slot.h): who holds which reference, when an object is freed,
 * and readers and a publisher racing (run under ASan / TSan). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>

#include "proxy/ref_slot.h"

typedef struct obj {
	atomic_uint refs;
	int id;
} obj;

static atomic_int freed;

static obj *obj_new(int id)
{
	obj *o = malloc(sizeof *o);
	assert_non_null(o);
	refcount_init(&o->refs);
	o->id = id;
	return o;
}

static void obj_retain(void *p)
{
	refcount_take(&((obj *)p)->refs);
}

static void obj_release(void *p)
{
	obj *o = p;
	if (o && refcount_drop(&o->refs)) {
		atomic_fetch_add(&freed, 1);
		free(o);
	}
}

static const ref_slot_ops ops = {obj_retain, obj_release};

static void test_references(void **state)
{
	(void)state;
	ref_slot s;
	atomic_store(&freed, 0);
	ref_slot_init(&s, &ops, obj_new(1)); /* the slot took the creator's reference */
	obj *a = ref_slot_get(&s);
	assert_int_equal(a->id, 1);
	assert_int_equal(atomic_load(&a->refs), 2);

	ref_slot_publish(&s, obj_new(2));
	assert_int_equal(atomic_load(&freed), 0); /* a reader still holds 1 */
	assert_int_equal(atomic_load(&a->refs), 1);
	obj *b = ref_slot_get(&s);
	assert_int_equal(b->id, 2);
	obj_release(a);
	assert_int_equal(atomic_load(&freed), 1);

	ref_slot_publish(&s, obj_new(3)); /* 2 lives on in b */
	assert_int_equal(atomic_load(&freed), 1);
	obj_release(b);
	assert_int_equal(atomic_load(&freed), 2);
	ref_slot_destroy(&s); /* 3 had only the slot's reference */
	assert_int_equal(atomic_load(&freed), 3);
}

static void *reader(void *arg)
{
	ref_slot *s = arg;
	for (int i = 0; i < 20000; i++) {
		obj *o = ref_slot_get(s);
		if (o->id < 0) /* read what it points to: freed memory would show */
			abort();
		obj_release(o);
	}
	return NULL;
}

static void test_readers_and_a_publisher(void **state)
{
	(void)state;
	ref_slot s;
	pthread_t t[2];
	atomic_store(&freed, 0);
	ref_slot_init(&s, &ops, obj_new(0));
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, reader, &s), 0);
	for (int i = 1; i <= 2000; i++)
		ref_slot_publish(&s, obj_new(i));
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&freed), 2000); /* every object but the last */
	ref_slot_destroy(&s);
	assert_int_equal(atomic_load(&freed), 2001);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_references),
	    cmocka_unit_test(test_readers_and_a_publisher),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
