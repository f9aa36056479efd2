/* The bounded LRU map under the findings table, the hot-path-lookup tracker
 * and the index cache: lookups by hash alone and by hash plus key, colliding
 * hashes, use order, removal from any position, the bound, and a long random
 * run checked against a plain array model after every step. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analyzers/catalog/lru_map.h"

typedef struct item {
	int before; /* the node is not first: LRU_MAP_ENTRY must subtract */
	lru_map_node node;
	char key[16];
} item;

static item *item_of(lru_map_node *n)
{
	return n ? LRU_MAP_ENTRY(n, item, node) : NULL;
}

static bool key_is(const lru_map_node *n, const void *key)
{
	return strcmp(LRU_MAP_ENTRY(n, const item, node)->key, key) == 0;
}

/* The map's use order, newest first, as a string of keys; also checks
 * that the walk both ways agrees and matches the count. */
static void order(const lru_map *m, char *out, size_t cap)
{
	size_t n = 0, len = 0;
	out[0] = '\0';
	for (lru_map_node *x = lru_map_newest(m); x; x = lru_map_older(x), n++)
		len +=
		    (size_t)snprintf(out + len, cap - len, "%s%s", n ? " " : "", item_of(x)->key);
	assert_int_equal(n, lru_map_count(m));
	size_t back = 0;
	for (lru_map_node *x = lru_map_oldest(m); x; x = lru_map_newer(x))
		back++;
	assert_int_equal(back, n);
}

static void test_zero_means_one(void **state)
{
	lru_map m;
	item a = {.key = "a"};
	assert_true(lru_map_init(&m, 0));
	assert_int_equal(m.max, 1);
	assert_false(lru_map_full(&m));
	assert_null(lru_map_newest(&m));
	assert_null(lru_map_oldest(&m));
	lru_map_insert(&m, &a.node, 1);
	assert_true(lru_map_full(&m));
	assert_ptr_equal(lru_map_newest(&m), &a.node);
	assert_ptr_equal(lru_map_oldest(&m), &a.node);
	lru_map_remove(&m, &a.node);
	assert_int_equal(lru_map_count(&m), 0);
	assert_null(lru_map_newest(&m));
	assert_null(lru_map_oldest(&m));
	lru_map_destroy(&m, NULL);
}

/* eq NULL: the hash is the key (the tracker's u64 shapes). */
static void test_hash_is_the_key(void **state)
{
	lru_map m;
	item a = {.key = "a"}, b = {.key = "b"};
	assert_true(lru_map_init(&m, 4));
	lru_map_insert(&m, &a.node, 0x100000000ull); /* folds onto bucket 1 ... */
	lru_map_insert(&m, &b.node, 1);              /* ... as does this one */
	assert_ptr_equal(lru_map_find(&m, 0x100000000ull, NULL, NULL), &a.node);
	assert_ptr_equal(lru_map_find(&m, 1, NULL, NULL), &b.node);
	assert_null(lru_map_find(&m, 2, NULL, NULL));
	assert_int_equal(a.node.hash, 0x100000000ull);
	lru_map_destroy(&m, NULL);
}

/* Same hash, different keys: eq decides, and removing one leaves the
 * other findable. */
static void test_colliding_hashes(void **state)
{
	lru_map m;
	item a = {.key = "a"}, b = {.key = "b"}, c = {.key = "c"};
	assert_true(lru_map_init(&m, 8));
	lru_map_insert(&m, &a.node, 7);
	lru_map_insert(&m, &b.node, 7);
	lru_map_insert(&m, &c.node, 7);
	assert_ptr_equal(lru_map_find(&m, 7, key_is, "a"), &a.node);
	assert_ptr_equal(lru_map_find(&m, 7, key_is, "b"), &b.node);
	assert_ptr_equal(lru_map_find(&m, 7, key_is, "c"), &c.node);
	assert_null(lru_map_find(&m, 7, key_is, "d"));
	assert_null(lru_map_find(&m, 8, key_is, "a")); /* the hash is compared first */
	lru_map_remove(&m, &b.node);                   /* middle of the chain */
	assert_null(lru_map_find(&m, 7, key_is, "b"));
	assert_ptr_equal(lru_map_find(&m, 7, key_is, "a"), &a.node);
	assert_ptr_equal(lru_map_find(&m, 7, key_is, "c"), &c.node);
	lru_map_remove(&m, &c.node); /* head of the chain */
	assert_ptr_equal(lru_map_find(&m, 7, key_is, "a"), &a.node);
	lru_map_destroy(&m, NULL);
}

static void test_use_order(void **state)
{
	lru_map m;
	item it[4] = {{.key = "a"}, {.key = "b"}, {.key = "c"}, {.key = "d"}};
	char s[64];
	assert_true(lru_map_init(&m, 4));
	for (int i = 0; i < 4; i++)
		lru_map_insert(&m, &it[i].node, (uint64_t)i);
	assert_true(lru_map_full(&m));
	order(&m, s, sizeof(s));
	assert_string_equal(s, "d c b a");
	assert_null(lru_map_find(&m, 9, NULL, NULL));
	order(&m, s, sizeof(s)); /* finding is not using */
	assert_string_equal(s, "d c b a");
	lru_map_touch(&m, &it[0].node); /* the oldest */
	order(&m, s, sizeof(s));
	assert_string_equal(s, "a d c b");
	lru_map_touch(&m, &it[2].node); /* a middle one */
	order(&m, s, sizeof(s));
	assert_string_equal(s, "c a d b");
	lru_map_touch(&m, &it[2].node); /* already the newest */
	order(&m, s, sizeof(s));
	assert_string_equal(s, "c a d b");
	assert_ptr_equal(lru_map_oldest(&m), &it[1].node);

	/* Evicting the way the users do: remove the oldest, insert anew,
	 * here reusing its memory under another key as the tracker does. */
	lru_map_node *victim = lru_map_oldest(&m);
	lru_map_remove(&m, victim);
	assert_false(lru_map_full(&m));
	strcpy(item_of(victim)->key, "e");
	lru_map_insert(&m, victim, 42);
	order(&m, s, sizeof(s));
	assert_string_equal(s, "e c a d");
	assert_null(lru_map_find(&m, 1, NULL, NULL));
	assert_ptr_equal(lru_map_find(&m, 42, NULL, NULL), victim);

	lru_map_remove(&m, &it[2].node); /* the newest */
	lru_map_remove(&m, &it[3].node); /* the oldest */
	order(&m, s, sizeof(s));
	assert_string_equal(s, "e a");
	lru_map_destroy(&m, NULL);
}

/* Destroy hands every entry over once (LeakSanitizer checks they are all
 * freed). */
static int freed;

static void free_item(lru_map_node *n)
{
	freed++;
	free(item_of(n));
}

static void test_destroy_frees_entries(void **state)
{
	lru_map m;
	assert_true(lru_map_init(&m, 8));
	for (uint64_t i = 0; i < 5; i++) {
		item *x = calloc(1, sizeof(*x));
		assert_non_null(x);
		lru_map_insert(&m, &x->node, i % 2);
	}
	item *gone = item_of(lru_map_oldest(&m)); /* removed: the caller's to free */
	lru_map_remove(&m, &gone->node);
	free(gone);
	freed = 0;
	lru_map_destroy(&m, free_item);
	assert_int_equal(freed, 4);
	assert_null(m.buckets);
}

/* A random run against a model: an array of keys in use order. Small key
 * space and weak hashes so chains are long and collisions common. */
#define MODEL_MAX  37
#define MODEL_KEYS 120

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void test_against_a_model(void **state)
{
	static item pool[MODEL_KEYS];
	int model[MODEL_MAX]; /* keys, newest first */
	int n = 0;
	lru_map m;
	assert_true(lru_map_init(&m, MODEL_MAX));
	for (int k = 0; k < MODEL_KEYS; k++)
		snprintf(pool[k].key, sizeof(pool[k].key), "k%d", k);

	for (int step = 0; step < 200000; step++) {
		uint64_t r = next_rand();
		int k = (int)((r >> 8) % MODEL_KEYS);
		/* Ten hashes; odd keys' in the high half, folded onto the same
		 * buckets as even keys'. */
		uint64_t hash = (uint64_t)(k % 5) << ((k & 1) ? 32 : 0);
		int at = -1;
		for (int i = 0; i < n; i++)
			if (model[i] == k)
				at = i;
		lru_map_node *found = lru_map_find(&m, hash, key_is, pool[k].key);
		assert_ptr_equal(found, at >= 0 ? &pool[k].node : NULL);

		switch (r % 4) {
		case 0: /* remove when present */
			if (at < 0)
				break;
			lru_map_remove(&m, found);
			memmove(&model[at], &model[at + 1], sizeof(int) * (size_t)(n - at - 1));
			n--;
			break;
		case 1: /* touch when present */
			if (at < 0)
				break;
			lru_map_touch(&m, found);
			memmove(&model[1], &model[0], sizeof(int) * (size_t)at);
			model[0] = k;
			break;
		default: /* use: touch, or insert evicting the oldest */
			if (at >= 0) {
				lru_map_touch(&m, found);
				memmove(&model[1], &model[0], sizeof(int) * (size_t)at);
				model[0] = k;
				break;
			}
			if (lru_map_full(&m)) {
				assert_int_equal(n, MODEL_MAX);
				assert_ptr_equal(lru_map_oldest(&m), &pool[model[n - 1]].node);
				lru_map_remove(&m, lru_map_oldest(&m));
				n--;
			}
			lru_map_insert(&m, &pool[k].node, hash);
			memmove(&model[1], &model[0], sizeof(int) * (size_t)n);
			model[0] = k;
			n++;
			break;
		}
		assert_int_equal(lru_map_count(&m), (size_t)n);
		if (step % 97 == 0) {
			int i = 0;
			for (lru_map_node *x = lru_map_newest(&m); x; x = lru_map_older(x), i++)
				assert_ptr_equal(x, &pool[model[i]].node);
			assert_int_equal(i, n);
			for (lru_map_node *x = lru_map_oldest(&m); x; x = lru_map_newer(x))
				assert_ptr_equal(x, &pool[model[--i]].node);
		}
	}
	lru_map_destroy(&m, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_zero_means_one),        cmocka_unit_test(test_hash_is_the_key),
	    cmocka_unit_test(test_colliding_hashes),      cmocka_unit_test(test_use_order),
	    cmocka_unit_test(test_destroy_frees_entries), cmocka_unit_test(test_against_a_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
