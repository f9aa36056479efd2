/* One collection's indexes, as listIndexes describes them, reduced to what
 * the sort and collection-scan rules need, and which of them a hint names.
 * An index_set is immutable once built and shared
 * between threads by reference count (index_set_retain/release). */
#ifndef MG_ANALYZERS_PLANNER_INDEX_SET_H
#define MG_ANALYZERS_PLANNER_INDEX_SET_H

#include <bson/bson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INDEX_FIELD_LEN 256
#define INDEX_NAME_LEN  128

/* What a key's value names: a number (ascending or descending) or a
 * special index type. */
typedef enum {
	INDEX_KEY_BTREE,
	INDEX_KEY_HASHED,
	INDEX_KEY_2D,
	INDEX_KEY_2DSPHERE,
	INDEX_KEY_TEXT,
	INDEX_KEY_OTHER, /* geoHaystack, columnstore, an unknown string */
} index_key_type;

typedef struct index_key {
	char field[INDEX_FIELD_LEN];
	int direction; /* 1 or -1; 0 for a special key (text, hashed, 2d, 2dsphere, ...) */
	/* With the index's multikey_known from explain: bit p, the field's
	 * component p (from 0: "a.b" is 1 of "a.b.c") holds arrays, as
	 * multiKeyPaths lists them. 0 when explain said none or nothing. */
	uint32_t multikey_parts;
	index_key_type type;
	/* strcspn(field, "."): its first component's length, the top-level
	 * member of a written document that can hold it (arrays_seen.c, on
	 * every insert). Set when the spec is read. */
	uint32_t first;
} index_key;

typedef struct index_def {
	char name[INDEX_NAME_LEN];
	index_key *keys;
	size_t nkeys;
	bson_t *collation; /* NULL for the simple collation */
	bool hidden;       /* a hidden index is never used by the planner */
	bool sparse;
	bool unique;                 /* unique: true (the _id index is unique without saying) */
	bool partial;                /* has partialFilterExpression */
	bson_t *partial_filter;      /* ... a copy of it (NULL: none, or not a document) */
	bool wildcard;               /* a "$**" key */
	size_t wildcard_key;         /* its position (a compound wildcard index, 7.0, has regular
	                                keys too); nkeys when there is none. Set when the spec is
	                                read. */
	bson_t *wildcard_projection; /* its wildcardProjection (NULL: none) */
	bool sphere_v1;              /* 2dsphereIndexVersion 1: not sparse on its geo keys */
	bool plugin;                 /* a text, 2d, 2dsphere or geoHaystack key: such an index
	                                serves only its own operators and is never scanned
	                                whole for a sort (hashed is not a plugin here) */
	bool odd;                    /* a spec this code does not fully understand (an unknown key
	                                type, a name or field too long to store): never assumed
	                                unable to serve a sort, so it turns a finding into no verdict */
	/* Multikey, as explain of a hinted query reported it (listIndexes does
	 * not say). Unknown unless multikey_known; then bit i of multikey_keys
	 * says keys[i] holds arrays in some document. */
	bool multikey_known;
	uint32_t multikey_keys;
	/* Bit i: the proxy saw a write put an array under keys[i]
	 * (index_set_note_multikey), from any thread, on a shared set. Not
	 * every server's explain says multikey (FerretDB's does not); mongod
	 * keeps an index multikey once a document made it so, and so does
	 * this. Read it with index_def_multikey. */
	_Atomic uint32_t written_arrays;
	/* Bit i: keys[i] (of the first 32) is one a write can make multikey
	 * as the proxy learns it: not _id (never an array), not a wildcard
	 * key (whose paths are many). Set when the spec is read. */
	uint32_t learnable_keys;
	/* The listIndexes document it was read from, as the server gave it:
	 * what a capture's snapshot writes, so that the report reads the list
	 * the live path read (every option: unique, the partial filter, a 2d
	 * or 2dsphere key, the wildcard projection, expireAfterSeconds). */
	bson_t *spec;
} index_def;

/* The key a capture's snapshot gives an index's multikey facts from explain
 * (multikey_keys, when multikey_known) under, beside the listIndexes
 * fields: no server's listIndexes has it, and index_set_from_specs reads it
 * back. */
#define INDEX_SPEC_MULTIKEY "mgMultikeyKeys"

/* Which keys of d hold arrays in some document, from either source:
 * explain (multikey_keys when multikey_known) or the writes the proxy saw.
 * *known: whether either source has said anything. */
static inline uint32_t index_def_multikey(const index_def *d, bool *known)
{
	uint32_t w = atomic_load_explicit(&d->written_arrays, memory_order_relaxed);
	*known = d->multikey_known || w != 0;
	return (d->multikey_known ? d->multikey_keys : 0) | w;
}

typedef struct index_set index_set;

/* Builds a set from listIndexes result documents. Never fails on odd specs:
 * an index it cannot understand is recorded with odd set, and the sort rule
 * then declines to judge rather than risk a false finding. Returns NULL only
 * when memory runs out. */
index_set *index_set_from_specs(const bson_t *const *specs, size_t n);
size_t index_set_count(const index_set *s);
const index_def *index_set_get(const index_set *s, size_t i);
index_set *index_set_retain(index_set *s);

/* Multikey facts for index i from the reply to
 *   {explain: {find: coll, filter: {}, hint: <its key pattern>, limit: 1},
 *    verbosity: "queryPlanner"}
 * as mongod writes it: an IXSCAN stage for the index (anywhere in the plan:
 * classic winningPlan, SBE's queryPlan, each shard of a mongos) with
 * isMultiKey and multiKeyPaths ({field: [positions that are arrays]}). True
 * when such a stage was found and the facts recorded; false leaves the
 * index unknown (a server that does not say, such as FerretDB, or an
 * isMultiKey without multiKeyPaths, which does not say which field). Call
 * before the set is shared. */
bool index_set_learn_multikey(index_set *s, size_t i, const bson_t *explain_reply);

/* Records that a write put an array under the keys of index i in mask
 * (bit k: keys[k]); from any thread, on a shared set. */
void index_set_note_multikey(index_set *s, size_t i, uint32_t mask);
/* A list fetched again stands for the same collection: what writes showed
 * of an index in from (the same name and key pattern) holds in to. */
void index_set_carry_multikey(index_set *to, const index_set *from);

/* The hint that names index i by its key pattern (for that explain). */
void index_def_key_pattern(const index_def *d, bson_t *out);

/* Whether hint, a key-pattern hint ({a: 1, b: -1}), names index d: the same
 * fields in the same order, each number's sign its direction and any other
 * value a special key (text, hashed, ...). */
bool index_def_matches_hint(const index_def *d, const bson_t *hint);

/* The indexes of s that a hint names: by name when hint_name is set, else
 * by key pattern (hint_doc, not $natural: the caller decides that). Returns
 * how many match; *out is the last of them (NULL when none). One match is
 * the index the server uses; several is a hint it refuses. */
size_t index_set_find_hint(const index_set *s, const char *hint_name, const bson_t *hint_doc,
                           const index_def **out);

/* Whether an index of collation a serves comparisons of a query with
 * collation b (NULL, {} and {locale: "simple"} are the simple collation):
 * the same locale and strength (3 when absent), and the same caseLevel
 * (false when absent). listIndexes spells out every option of an index's
 * collation; queries usually give locale and strength only, so the
 * options with defaults beyond these are not compared. */
bool index_collation_same(const bson_t *a, const bson_t *b);

/* Whether the planner may use d for a query whose filter is the
 * conjunction of filters (n documents): always, unless d is partial; then
 * only when the filters certainly imply its partialFilterExpression
 * (query_implies). */
bool index_def_usable_for(const index_def *d, const bson_t *const *filters, size_t n);

/* Whether wildcard index d holds keys for field in its wildcard key:
 * "$**" every field but _id (or what its wildcardProjection includes, or
 * does not exclude), "p.$**" p and the fields under it. False for any
 * other index. A compound wildcard index (7.0) has one wildcard key
 * among regular ones; this is that key's. */
bool index_def_wildcard_covers(const index_def *d, const char *field);

/* The position of d's wildcard key ("$**" or "p.$**"); nkeys when it has
 * none. */
static inline size_t index_def_wildcard_key(const index_def *d)
{
	return d->wildcard ? d->wildcard_key : d->nkeys;
}

/* Whether every field filter (NULL: none) names, at the top level or
 * under $and / $or, is a key of d; any other top-level operator ($expr,
 * $where, $nor, ...) is not. */
bool index_def_keys_cover(const index_def *d, const bson_t *filter);

/* The _id index ({_id: 1}, named "_id_"), or NULL. Its collation is the
 * collection's default, which indexes created without one inherit. */
const index_def *index_set_id_index(const index_set *s);
/* That index's collation, the collection's default (NULL: simple, or no
 * _id index listed); read once, when the set is built. */
const bson_t *index_set_default_collation(const index_set *s);

/* The collection's estimated document count, learned with the index list
 * (the collection-scan rule reports only above a size); -1 when unknown,
 * which is what a set starts with. Set once, before the set is shared. */
int64_t index_set_doc_count(const index_set *s);
void index_set_set_doc_count(index_set *s, int64_t n);
/* The count follows the writes: documents inserted (delta > 0) or deleted
 * since it was read are added to what index_set_doc_count answers (from
 * any thread, on a shared set). Returns the total added so far. The count
 * as it was read: index_set_read_count. */
int64_t index_set_note_docs(index_set *s, int64_t delta);
int64_t index_set_read_count(const index_set *s);
/* The index cache's count of changes when this list landed
 * (index_cache_changes; 0: never in a cache). Set by the cache once, under
 * its lock, before any lookup can return the set. */
uint64_t index_set_stamp(const index_set *s);
void index_set_set_stamp(index_set *s, uint64_t stamp);
void index_set_release(index_set *s);

/* A set that stands for "nothing to reason about": the collection does not
 * exist (listIndexes answers NamespaceNotFound, or nothing at all) or it is a
 * view. sort_check gives SORT_NO_VERDICT for it. reason is copied (short). */
index_set *index_set_new_opaque(const char *reason);
/* True for a set made by index_set_new_opaque; *reason (may be NULL) gets why. */
bool index_set_is_opaque(const index_set *s, const char **reason);

/* Builds a set from a JSON array of listIndexes documents (extended JSON), e.g.
 *   [{"v": 2, "key": {"_id": 1}, "name": "_id_"}, {"key": {"a": 1}, "name": "a_1"}]
 * For tests and tools. NULL with err set when the text is not such an array. */
index_set *index_set_from_json(const char *json, char *err, size_t errlen);

#endif
