/* Multikey learned from writes. An index is multikey once some document
 * holds an array under one of its keys, and mongod keeps it so; not every
 * server's explain says it (FerretDB's does not), and the sort and
 * collection-scan rules judge a multikey key differently. So the engine
 * reads what the writes it forwards put under the keys of the namespace's
 * known index list: an inserted or replacement document, and the paths of
 * an update's $set, $setOnInsert, $push and $addToSet (a positional path,
 * "a.$.b" or "a.$[e].b", says "a" is an array), as the statement's facts
 * keep them (facts.h: update_facts.writes, read once for this and the
 * unbounded-push rule). What a request shows is
 * noted in the rule_ctx as it is read and marked on the shared set
 * (index_set_note_multikey) only when the request is forwarded: a blocked
 * write wrote nothing. Only a list already known is marked, and only keys
 * not marked yet are looked for; statements a batch template stood for
 * are not read, so this learns from what the engine reads. */
#include <string.h>

#include "analyzers/engine/engine_int.h"
#include "analyzers/engine/keys.h"
#include "analyzers/planner/paths.h"
#include "protocol/wire_iter.h"

/* Whether, following path through the members c walks (a document's),
 * some element on the way is an array. */
static bool array_on_path(wire_cur *c, const char *path)
{
	const char *dot = strchr(path, '.');
	size_t n = dot ? (size_t)(dot - path) : strlen(path);
	while (wire_cur_walk(c)) {
		const char *k = wire_cur_key(c);
		if (strncmp(k, path, n) != 0 || k[n] != '\0')
			continue;
		bson_type_t t = wire_cur_type(c);
		if (t == BSON_TYPE_ARRAY)
			return true;
		wire_cur in;
		return dot && t == BSON_TYPE_DOCUMENT && wire_cur_recurse(c, &in) &&
		       array_on_path(&in, dot + 1);
	}
	return false;
}

/* Whether the write w (a member of $push, $addToSet, $set or
 * $setOnInsert, facts.h) puts an array under field: a positional path
 * under it, an array written at or above it, or a document written above
 * it holding an array on the rest of its path. */
static bool write_puts_array(const fact_write *w, const char *field)
{
	const char *p = wire_cur_key(&w->at);
	if (field[0] != p[0])
		return false; /* each case below needs p to prefix field (index keys never
		                 start with '.') */
	if (path_at_or_under(field, p, w->position))
		return true;
	bool array = w->op != FW_SET || wire_cur_type(&w->at) == BSON_TYPE_ARRAY;
	if (array && path_at_or_under(field, p, w->len))
		return true;
	wire_cur c;
	return w->op == FW_SET && wire_cur_type(&w->at) == BSON_TYPE_DOCUMENT &&
	       field[w->len] == '.' && strncmp(field, p, w->len) == 0 &&
	       wire_cur_recurse(&w->at, &c) && array_on_path(&c, field + w->len + 1);
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

/* The keys of index d that can still learn: none left, no write is read. */
static uint32_t wanted(const index_def *d)
{
	bool known;
	return d->learnable_keys & ~index_def_multikey(d, &known);
}

/* The set db.coll's writes can learn on: its list, known and not opaque,
 * with some key that can still learn; else NULL. Not retained. */
static index_set *learnable_set(rule_ctx *ax, const char *db, const char *coll)
{
	const index_set *seen;
	if (!ax->e->learn_arrays || ax->explain || ax->late_call ||
	    engine_lookup(ax, db, coll, &seen) != INDEXES_KNOWN || index_set_is_opaque(seen, NULL))
		return NULL;
	index_set *set = ax->lookup_set; /* seen, as the engine holds it */
	for (size_t i = 0; i < index_set_count(set); i++)
		if (wanted(index_set_get(set, i)))
			return set;
	return NULL;
}

static void learn_doc(rule_ctx *ax, index_set *set, wire_cur *members);

/* at's set, retained, and the first bytes of its keys that can learn. */
static void target_look(rule_ctx *ax, arrays_target *at, const char *db, const char *coll)
{
	at->looked = true;
	memset(at->firsts, 0, sizeof(at->firsts));
	at->set = learnable_set(ax, db, coll);
	if (!at->set)
		return;
	index_set_retain(at->set);
	for (size_t i = 0; i < index_set_count(at->set); i++) {
		const index_def *d = index_set_get(at->set, i);
		uint32_t want = wanted(d);
		for (size_t k = 0; want >> k; k++)
			if (want >> k & 1) {
				uint8_t c = (uint8_t)d->keys[k].field[0];
				at->firsts[c >> 6] |= (uint64_t)1 << (c & 63);
			}
	}
}

void engine_arrays_from_update(rule_ctx *ax, arrays_target *at, const char *db, const char *coll,
                               const wire_cur *update, const update_facts *u)
{
	bool replace = u->form == FU_REPLACEMENT;
	if (!engine_arrays_may_learn(u))
		return;
	if (!at->looked)
		target_look(ax, at, db, coll);
	index_set *set = at->set;
	if (!set)
		return;
	wire_cur it;
	if (replace) {
		if (wire_cur_recurse(update, &it))
			learn_doc(ax, set, &it);
		return;
	}
	bool some = false;
	for (unsigned j = 0; j < u->nwrites && !some; j++) {
		uint8_t c = (uint8_t)wire_cur_key(&u->writes[j].at)[0];
		some = at->firsts[c >> 6] >> (c & 63) & 1;
	}
	if (!some)
		return; /* no write can reach a key that can learn */
	size_t n = index_set_count(set);
	for (size_t i = 0; i < n; i++) {
		const index_def *d = index_set_get(set, i);
		uint32_t want = wanted(d), add = 0;
		for (size_t k = 0; want >> k; k++) {
			if (!(want >> k & 1))
				continue;
			for (unsigned j = 0; j < u->nwrites; j++)
				if (write_puts_array(&u->writes[j], d->keys[k].field)) {
					add |= 1u << k;
					break;
				}
		}
		if (add)
			note(ax, set, i, add);
	}
}

void engine_arrays_target_done(arrays_target *at)
{
	if (at->set)
		index_set_release(at->set);
	at->set = NULL;
	at->looked = false;
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
		uint32_t want = wanted(d);
		for (unsigned k = 0; want >> k && n < DOC_KEYS_MAX; k++)
			if (want >> k & 1)
				out[n++] =
				    (doc_key){i, k, d->keys[k].field, d->keys[k].first, false};
	}
	return n;
}

/* Learns from a document's members (an inserted or replacement
 * document), members a cursor before its first. */
static void learn_doc(rule_ctx *ax, index_set *set, wire_cur *members)
{
	doc_key keys[DOC_KEYS_MAX];
	wire_cur c;
	unsigned n = doc_keys(set, keys), left = n;
	while (left > 0 && wire_cur_walk(members)) {
		/* by length first: a member is a key's first component when it
		 * has its length and its bytes (a key holds no NUL) */
		const char *m = wire_cur_key(members);
		uint32_t mlen = wire_cur_key_len(members);
		for (unsigned i = 0; i < n; i++) {
			doc_key *k = &keys[i];
			if (k->seen || k->first != mlen || memcmp(m, k->field, mlen) != 0)
				continue;
			k->seen = true;
			left--;
			bson_type_t type = wire_cur_type(members);
			if (type == BSON_TYPE_ARRAY ||
			    (k->field[k->first] == '.' && type == BSON_TYPE_DOCUMENT &&
			     wire_cur_recurse(members, &c) &&
			     array_on_path(&c, k->field + k->first + 1)))
				note(ax, set, k->index, 1u << k->key);
		}
	}
}

void engine_arrays_from_doc(rule_ctx *ax, const char *db, const char *coll, const bson_t *doc)
{
	bson_iter_t it;
	wire_cur c;
	index_set *set = learnable_set(ax, db, coll);
	if (set && bson_iter_init(&it, doc)) {
		wire_cur_of_iter(&c, &it);
		learn_doc(ax, set, &c);
	}
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
