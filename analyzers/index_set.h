/* One collection's indexes, as listIndexes describes them, reduced to what
 * the sort rule needs. An index_set is immutable once built and shared
 * between threads by reference count (index_set_retain/release). */
#ifndef MG_ANALYZERS_INDEX_SET_H
#define MG_ANALYZERS_INDEX_SET_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#define INDEX_FIELD_LEN 256
#define INDEX_NAME_LEN 128

typedef struct index_key {
	char field[INDEX_FIELD_LEN];
	int direction; /* 1 or -1; 0 for a special key (text, hashed, 2d, 2dsphere, ...) */
} index_key;

typedef struct index_def {
	char name[INDEX_NAME_LEN];
	index_key *keys;
	size_t nkeys;
	bson_t *collation; /* NULL for the simple collation */
	bool hidden;	   /* a hidden index is never used by the planner */
	bool sparse;
	bool partial;  /* has partialFilterExpression */
	bool wildcard; /* a "$**" key */
} index_def;

typedef struct index_set index_set;

/* Builds a set from listIndexes result documents. Never fails on odd specs:
 * an index it cannot understand is recorded as unusable for sorts. */
index_set *index_set_from_specs(const bson_t *const *specs, size_t n);
size_t index_set_count(const index_set *s);
const index_def *index_set_get(const index_set *s, size_t i);
index_set *index_set_retain(index_set *s);
void index_set_release(index_set *s);

#endif
