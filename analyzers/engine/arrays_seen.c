/* Multikey learned from writes. An index is multikey once some document
 * holds an array under one of its keys, and mongod keeps it so; not every
 * server's explain says it (FerretDB's does not), and the sort and
 * collection-scan rules judge a multikey key differently. So the engine
 * reads what the writes it forwards put under the keys of the namespace's
 * known index list: an inserted or replacement document, and the paths of
 * an update's $set, $setOnInsert, $push and $addToSet (a positional path,
 * "a.$.b" or "a.$[e].b", says "a" is an array). What a request shows is
 * noted in the rule_ctx as it is read and marked on the shared set
 * (index_set_note_multikey) only when the request is forwarded: a blocked
 * write wrote nothing. Only a list already known is marked, and only keys
 * not marked yet are looked for; statements a batch template stood for
 * are not read, so this learns from what the engine reads. */
#include <string.h>

#include "analyzers/engine/engine_int.h"
#include "analyzers/engine/keys.h"
#include "protocol/wire_iter.h"

/* Whether, following path through the members it iterates (a document's),
 * some element on the way is an array. */
static bool array_on_path(bson_iter_t *it, const char *path)
{
	const char *dot = strchr(path, '.');
	size_t n = dot ? (size_t)(dot - path) : strlen(path);
	while (wire_iter_next(it)) {
		const char *k = wire_iter_key(it);
		if (strncmp(k, path, n) != 0 || k[n] != '\0')
			continue;
		if (WIRE_ITER_HOLDS_ARRAY(it))
			return true;
		bson_iter_t c;
		return dot && WIRE_ITER_HOLDS_DOCUMENT(it) && wire_iter_recurse(it, &c) &&
		       array_on_path(&c, dot + 1);
	}
	return false;
}

/* Whether field is the path p[0..n) or a path under it. */
static bool under(const char *field, const char *p, size_t n)
{
	return n > 0 && strncmp(field, p, n) == 0 && (field[n] == '\0' || field[n] == '.');
}

/* The length of p before its first positional component ("$", "$[]",
 * "$[name]"), which only an array can take; 0 when it has none. */
static size_t positional_prefix(const char *p)
{
	for (const char *c = p; (c = strchr(c, '.')) != NULL; c++)
		if (c[1] == '$' && (c[2] == '\0' || c[2] == '.' || c[2] == '['))
			return (size_t)(c - p);
	return 0;
}

/* The paths an update writes that can put an array anywhere (a bulk
 * update's statements are judged one by one, each against every key of
 * the list, so the update is read once, here, and the keys are matched
 * against what it holds). The others ($inc, $unset, a scalar $set, ...)
 * never make an array. */
#define PATH_WRITES_MAX 16

typedef struct path_write {
	const char *p;
	size_t n;          /* strlen(p) */
	size_t positional; /* positional_prefix(p): an array at p[0..positional) */
	bool array;        /* $push / $addToSet, or an array value: an array at p */
	bool doc;          /* a document value of $set / $setOnInsert: arrays may sit under p */
	bson_iter_t value; /* when doc */
} path_write;

typedef struct update_writes {
	path_write w[PATH_WRITES_MAX];
	unsigned n;
	bool pipeline;   /* an update pipeline: it computes its values, not read */
	bool replace;    /* a replacement document: read as a document */
	bool overflow;   /* more than PATH_WRITES_MAX: not learned from (a finding can be
	                    missed on such a key, none invented) */
	bson_iter_t doc; /* when replace: its members */
} update_writes;

static void writes_of(const bson_iter_t *update, update_writes *u)
{
	bson_iter_t it, paths;
	u->n = 0;
	u->pipeline = u->replace = u->overflow = false;
	if (!WIRE_ITER_HOLDS_DOCUMENT(update) || !wire_iter_recurse(update, &it)) {
		u->pipeline = true;
		return;
	}
	bson_iter_t first = it;
	if (!wire_iter_next(&first))
		return;
	if (wire_iter_key(&first)[0] != '$') { /* a replacement document */
		u->replace = true;
		u->doc = it;
		return;
	}
	while (wire_iter_next(&it)) {
		const char *op = wire_iter_key(&it);
		bool grows = key_eq(op, "$push") || key_eq(op, "$addToSet");
		if (!(grows || key_eq(op, "$set") || key_eq(op, "$setOnInsert")) ||
		    !WIRE_ITER_HOLDS_DOCUMENT(&it) || !wire_iter_recurse(&it, &paths))
			continue;
		while (wire_iter_next(&paths)) {
			const char *p = wire_iter_key(&paths);
			size_t pos = positional_prefix(p);
			bool array = grows || WIRE_ITER_HOLDS_ARRAY(&paths);
			bool doc = !grows && WIRE_ITER_HOLDS_DOCUMENT(&paths);
			if (!pos && !array && !doc)
				continue;
			if (u->n == PATH_WRITES_MAX) {
				u->overflow = true;
				return;
			}
			path_write *w = &u->w[u->n++];
			*w = (path_write){p, strlen(p), pos, array, doc, paths};
		}
	}
}

/* Whether the update's paths put an array under field: a positional path
 * under it, an array written at or above it, or a document written above
 * it holding an array on the rest of its path. */
static bool writes_array(const update_writes *u, const char *field)
{
	for (unsigned i = 0; i < u->n; i++) {
		const path_write *w = &u->w[i];
		if (under(field, w->p, w->positional))
			return true;
		if (w->array && under(field, w->p, w->n))
			return true;
		bson_iter_t c;
		if (w->doc && field[w->n] == '.' && strncmp(field, w->p, w->n) == 0 &&
		    wire_iter_recurse(&w->value, &c) && array_on_path(&c, field + w->n + 1))
			return true;
	}
	return false;
}

/* What an update shows: an iterator on its value, and what writes_of read
 * of it. */
typedef struct write_seen {
	const bson_iter_t *update;
	update_writes u;
} write_seen;

static bool puts_array(write_seen *w, const char *field)
{
	bson_iter_t it;
	if (w->u.replace) {
		it = w->u.doc;
		return array_on_path(&it, field);
	}
	return writes_array(&w->u, field);
}

static void note(rule_ctx *ax, index_set *set, size_t i, uint32_t mask)
{
	for (unsigned j = 0; j < ax->narrays; j++)
		if (ax->arrays[j].set == set && ax->arrays[j].index == i) {
			ax->arrays[j].mask |= mask;
			return;
		}
	if (ax->narrays < ENGINE_ARRAYS_MAX) {
		ax->arrays[ax->narrays].set = index_set_retain(set);
		ax->arrays[ax->narrays].index = i;
		ax->arrays[ax->narrays].mask = mask;
		ax->narrays++;
	}
}

/* Whether the update can put an array anywhere at all: one whose paths
 * writes_of keeps none of ($inc, $unset, scalar $sets: most statements
 * of a bulk update) cannot, and costs no index lookup. */
static bool may_put_arrays(write_seen *w)
{
	writes_of(w->update, &w->u);
	return !w->u.pipeline && !w->u.overflow && (w->u.replace || w->u.n > 0);
}

static void learn(rule_ctx *ax, const char *db, const char *coll, write_seen *w)
{
	const index_set *seen;
	if (!ax->e->learn_arrays || ax->explain || ax->late_call || !may_put_arrays(w) ||
	    engine_lookup(ax, db, coll, &seen) != INDEXES_KNOWN || index_set_is_opaque(seen, NULL))
		return;
	index_set *set = ax->lookup_set; /* seen, as the engine holds it */
	size_t n = index_set_count(set);
	for (size_t i = 0; i < n; i++) {
		const index_def *d = index_set_get(set, i);
		bool known;
		/* the keys that could still learn: none left, no write is read */
		uint32_t want = d->learnable_keys & ~index_def_multikey(d, &known), add = 0;
		for (size_t k = 0; want >> k; k++)
			if ((want >> k & 1) && puts_array(w, d->keys[k].field))
				add |= 1u << k;
		if (add)
			note(ax, set, i, add);
	}
}

/* A document's keys that can still learn, matched in one pass over its
 * members (an insert of thousands of fields is walked once, not once per
 * key); a pass that has seen every key's first component stops. */
#define DOC_KEYS_MAX 64

typedef struct doc_key {
	size_t index;
	unsigned key;
	const char *field;
	size_t first; /* the length of field's first component */
	bool seen;
} doc_key;

static unsigned doc_keys(const index_set *set, doc_key *out)
{
	unsigned n = 0;
	for (size_t i = 0; i < index_set_count(set); i++) {
		const index_def *d = index_set_get(set, i);
		bool known;
		uint32_t want = d->learnable_keys & ~index_def_multikey(d, &known);
		for (unsigned k = 0; want >> k && n < DOC_KEYS_MAX; k++)
			if (want >> k & 1)
				out[n++] = (doc_key){i, k, d->keys[k].field,
				                     strcspn(d->keys[k].field, "."), false};
	}
	return n;
}

void engine_arrays_from_doc(rule_ctx *ax, const char *db, const char *coll, const bson_t *doc)
{
	const index_set *seen;
	doc_key keys[DOC_KEYS_MAX];
	bson_iter_t it, c;
	if (!ax->e->learn_arrays || ax->explain || ax->late_call ||
	    engine_lookup(ax, db, coll, &seen) != INDEXES_KNOWN || index_set_is_opaque(seen, NULL))
		return;
	index_set *set = ax->lookup_set; /* seen, as the engine holds it */
	unsigned n = doc_keys(set, keys), left = n;
	if (n == 0 || !bson_iter_init(&it, doc))
		return;
	while (left > 0 && wire_iter_next(&it)) {
		const char *m = wire_iter_key(&it);
		for (unsigned i = 0; i < n; i++) {
			doc_key *k = &keys[i];
			if (k->seen || strncmp(m, k->field, k->first) != 0 || m[k->first] != '\0')
				continue;
			k->seen = true;
			left--;
			if (WIRE_ITER_HOLDS_ARRAY(&it) ||
			    (k->field[k->first] == '.' && WIRE_ITER_HOLDS_DOCUMENT(&it) &&
			     wire_iter_recurse(&it, &c) &&
			     array_on_path(&c, k->field + k->first + 1)))
				note(ax, set, k->index, 1u << k->key);
		}
	}
}

void engine_arrays_from_update(rule_ctx *ax, const char *db, const char *coll,
                               const bson_iter_t *update)
{
	write_seen w; /* u is written by writes_of: no need to clear it */
	w.update = update;
	learn(ax, db, coll, &w);
}

void engine_arrays_apply(rule_ctx *ax, bool written)
{
	for (unsigned j = 0; j < ax->narrays; j++) {
		if (written)
			index_set_note_multikey(ax->arrays[j].set, ax->arrays[j].index,
			                        ax->arrays[j].mask);
		index_set_release(ax->arrays[j].set);
	}
	ax->narrays = 0;
}
