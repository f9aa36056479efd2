/* index_set: listIndexes documents reduced to what the sort rule needs.
 *
 * A set is built once, on the metadata thread (or in a test), and never
 * changes after that; worker threads share it through an atomic reference
 * count, so reading it needs no lock. */
#include "analyzers/planner/index_set.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/planner/paths.h"
#include "analyzers/planner/query_preds.h"
#include "protocol/wire_iter.h"

struct index_set {
	atomic_uint refs;
	size_t n;
	index_def *defs;
	bool opaque;
	char reason[96];
	int64_t doc_count;               /* -1: unknown */
	const bson_t *default_collation; /* the _id index's (NULL: simple or none) */
	/* Documents inserted less those deleted since doc_count was read, as
	 * the proxy saw the replies pass (index_set_note_docs): any thread. */
	_Atomic int64_t written;
	uint64_t stamp; /* index_set_stamp */
};

static void copy_bounded(char *dst, size_t cap, const char *src, bool *truncated)
{
	size_t len = strlen(src);
	if (len >= cap) {
		len = cap - 1;
		*truncated = true;
	}
	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* The direction of one key pattern value. The Ordering class treats any
 * number >= 0 as ascending; a string names a special index type (text,
 * hashed, 2d, 2dsphere, columnstore) whose order is not the field's order. */
static int key_direction(const bson_iter_t *it, bool *odd)
{
	switch (wire_iter_type(it)) {
	case BSON_TYPE_INT32:
		return bson_iter_int32(it) >= 0 ? 1 : -1;
	case BSON_TYPE_INT64:
		return bson_iter_int64(it) >= 0 ? 1 : -1;
	case BSON_TYPE_DOUBLE: {
		double d = bson_iter_double(it);
		if (isnan(d)) {
			*odd = true;
			return 0;
		}
		return d >= 0 ? 1 : -1;
	}
	case BSON_TYPE_DECIMAL128: {
		bson_decimal128_t dec;
		char str[BSON_DECIMAL128_STRING];
		bson_iter_decimal128(it, &dec);
		bson_decimal128_to_string(&dec, str);
		if (strstr(str, "NaN") != NULL) {
			*odd = true;
			return 0;
		}
		return str[0] == '-' ? -1 : 1;
	}
	case BSON_TYPE_UTF8:
		return 0;
	default:
		*odd = true;
		return 0;
	}
}

static index_key_type key_type(const bson_iter_t *it)
{
	static const struct {
		const char *name;
		index_key_type type;
	} names[] = {{"hashed", INDEX_KEY_HASHED},
	             {"2d", INDEX_KEY_2D},
	             {"2dsphere", INDEX_KEY_2DSPHERE},
	             {"text", INDEX_KEY_TEXT}};
	if (!WIRE_ITER_HOLDS_UTF8(it))
		return INDEX_KEY_BTREE;
	const char *v = bson_iter_utf8(it, NULL);
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(v, names[i].name) == 0)
			return names[i].type;
	return INDEX_KEY_OTHER;
}

static bool is_wildcard_field(const char *f)
{
	size_t len = strlen(f);
	return strcmp(f, "$**") == 0 || (len > 4 && strcmp(f + len - 4, ".$**") == 0);
}

/* A collation document that means the simple collation is stored as NULL. */
static bson_t *copy_collation(const bson_iter_t *it)
{
	const uint8_t *data;
	uint32_t len;
	bson_t view;
	bson_iter_t loc;

	if (!WIRE_ITER_HOLDS_DOCUMENT(it))
		return NULL;
	bson_iter_document(it, &len, &data);
	if (!bson_init_static(&view, data, len) || bson_count_keys(&view) == 0)
		return NULL;
	if (bson_iter_init_find(&loc, &view, "locale") && WIRE_ITER_HOLDS_UTF8(&loc) &&
	    strcmp(bson_iter_utf8(&loc, NULL), "simple") == 0)
		return NULL;
	return bson_copy(&view);
}

/* False only when memory runs out. */
static bool copy_document(const bson_iter_t *it, bson_t **out)
{
	const uint8_t *data;
	uint32_t len;
	bson_iter_document(it, &len, &data);
	*out = bson_new_from_data(data, len);
	return *out != NULL;
}

static bool truthy(const bson_iter_t *it)
{
	return bson_iter_as_bool(it);
}

/* One listIndexes entry. What it cannot read marks the index odd instead
 * of failing: the rules then say less about that index, never something
 * wrong. */
static bool build_def(index_def *d, const bson_t *spec)
{
	bson_iter_t it, kit;
	bool odd = false;

	memset(d, 0, sizeof *d);
	if (!(d->spec = bson_copy(spec)))
		return false;
	if (!bson_iter_init(&it, spec)) {
		d->odd = true;
		return true;
	}
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (strcmp(k, "name") == 0 && WIRE_ITER_HOLDS_UTF8(&it)) {
			copy_bounded(d->name, sizeof d->name, bson_iter_utf8(&it, NULL), &odd);
		} else if (strcmp(k, "hidden") == 0) {
			d->hidden = truthy(&it);
		} else if (strcmp(k, "sparse") == 0) {
			d->sparse = truthy(&it);
		} else if (strcmp(k, "unique") == 0) {
			d->unique = truthy(&it);
		} else if (strcmp(k, "partialFilterExpression") == 0) {
			d->partial = true;
			if (WIRE_ITER_HOLDS_DOCUMENT(&it) &&
			    !copy_document(&it, &d->partial_filter))
				return false;
		} else if (strcmp(k, "wildcardProjection") == 0 && WIRE_ITER_HOLDS_DOCUMENT(&it)) {
			if (!copy_document(&it, &d->wildcard_projection))
				return false;
		} else if (strcmp(k, "2dsphereIndexVersion") == 0 && WIRE_ITER_HOLDS_NUMBER(&it)) {
			d->sphere_v1 = bson_iter_as_int64(&it) == 1;
		} else if (strcmp(k, "collation") == 0) {
			d->collation = copy_collation(&it);
		} else if (strcmp(k, INDEX_SPEC_MULTIKEY) == 0 && WIRE_ITER_HOLDS_NUMBER(&it)) {
			/* a capture's snapshot: what explain said live */
			d->multikey_known = true;
			d->multikey_keys = (uint32_t)bson_iter_as_int64(&it);
		} else if (strcmp(k, "key") == 0 && WIRE_ITER_HOLDS_DOCUMENT(&it) &&
		           wire_iter_recurse(&it, &kit)) {
			size_t cap = 8;
			d->keys = calloc(cap, sizeof *d->keys);
			if (d->keys == NULL)
				return false;
			while (wire_iter_next(&kit)) {
				if (d->nkeys == cap) {
					index_key *grown =
					    realloc(d->keys, 2 * cap * sizeof *d->keys);
					if (grown == NULL)
						return false;
					d->keys = grown;
					cap *= 2;
				}
				index_key *key = &d->keys[d->nkeys++];
				copy_bounded(key->field, sizeof key->field, wire_iter_key(&kit),
				             &odd);
				key->direction = key_direction(&kit, &odd);
				key->multikey_parts = 0;
				key->type = key_type(&kit);
				if (key->type != INDEX_KEY_BTREE && key->type != INDEX_KEY_HASHED)
					d->plugin = true;
				if (is_wildcard_field(key->field) && !d->wildcard) {
					d->wildcard = true;
					d->wildcard_key = d->nkeys - 1;
				}
			}
		}
	}
	for (size_t i = 0; i < d->nkeys; i++)
		d->keys[i].first = (uint32_t)strcspn(d->keys[i].field, ".");
	for (size_t i = 0; i < d->nkeys && i < 32; i++)
		if (strcmp(d->keys[i].field, "_id") != 0 && !is_wildcard_field(d->keys[i].field))
			d->learnable_keys |= 1u << i;
	/* An index with no key pattern cannot come from a real server. */
	if (d->nkeys == 0)
		odd = true;
	d->odd = odd;
	return true;
}

static void free_defs(index_def *defs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(defs[i].keys);
		if (defs[i].collation != NULL)
			bson_destroy(defs[i].collation);
		if (defs[i].partial_filter != NULL)
			bson_destroy(defs[i].partial_filter);
		if (defs[i].wildcard_projection != NULL)
			bson_destroy(defs[i].wildcard_projection);
		if (defs[i].spec != NULL)
			bson_destroy(defs[i].spec);
	}
	free(defs);
}

index_set *index_set_from_specs(const bson_t *const *specs, size_t n)
{
	index_set *s = calloc(1, sizeof *s);
	if (s == NULL)
		return NULL;
	atomic_init(&s->refs, 1);
	s->doc_count = -1;
	if (n > 0) {
		s->defs = calloc(n, sizeof *s->defs);
		if (s->defs == NULL) {
			free(s);
			return NULL;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!build_def(&s->defs[i], specs[i])) {
			free_defs(s->defs, i + 1);
			free(s);
			return NULL;
		}
	}
	s->n = n;
	const index_def *id = index_set_id_index(s);
	s->default_collation = id ? id->collation : NULL;
	return s;
}

const bson_t *index_set_default_collation(const index_set *s)
{
	return s->default_collation;
}

index_set *index_set_new_opaque(const char *reason)
{
	index_set *s = index_set_from_specs(NULL, 0);
	bool truncated = false;
	if (s == NULL)
		return NULL;
	s->opaque = true;
	copy_bounded(s->reason, sizeof s->reason, reason != NULL ? reason : "", &truncated);
	return s;
}

bool index_set_is_opaque(const index_set *s, const char **reason)
{
	if (s->opaque && reason != NULL)
		*reason = s->reason;
	return s->opaque;
}

index_set *index_set_from_json(const char *json, char *err, size_t errlen)
{
	bson_error_t error;
	bson_t *arr;
	bson_iter_t it;
	size_t n = 0, i = 0;

	/* libbson parses a top-level array as a document keyed "0", "1", ... */
	arr = bson_new_from_json((const uint8_t *)json, -1, &error);
	if (arr == NULL) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "index list JSON: %s", error.message);
		return NULL;
	}
	n = bson_count_keys(arr);
	bson_t *docs = calloc(n > 0 ? n : 1, sizeof *docs);
	const bson_t **ptrs = calloc(n > 0 ? n : 1, sizeof *ptrs);
	index_set *s = NULL;
	if (docs == NULL || ptrs == NULL)
		goto out;
	bson_iter_init(&it, arr);
	while (wire_iter_next(&it)) {
		const uint8_t *data;
		uint32_t len;
		if (!WIRE_ITER_HOLDS_DOCUMENT(&it)) {
			if (err != NULL && errlen > 0)
				snprintf(err, errlen,
				         "index list JSON: element %zu is not a document", i);
			goto out;
		}
		bson_iter_document(&it, &len, &data);
		if (!bson_init_static(&docs[i], data, len))
			goto out;
		ptrs[i] = &docs[i];
		i++;
	}
	s = index_set_from_specs(ptrs, i);
	if (s == NULL && err != NULL && errlen > 0)
		snprintf(err, errlen, "out of memory");
out:
	free(ptrs);
	free(docs);
	bson_destroy(arr);
	return s;
}

bool index_def_usable_for(const index_def *d, const bson_t *const *filters, size_t n)
{
	return !d->partial || query_implies(filters, n, d->partial_filter);
}

/* A wildcardProjection: inclusion when some field other than _id is
 * truthy; _id is held only when it says so. */
static bool projection_covers(const bson_t *proj, const char *field)
{
	bson_iter_t it;
	bool inclusion = false, listed = false, id_wanted = false;
	if (!bson_iter_init(&it, proj))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		bool on = bson_iter_as_bool(&it);
		if (strcmp(k, "_id") == 0) {
			id_wanted = on;
			continue;
		}
		inclusion |= on;
		if (path_at_or_under(field, k, strlen(k)))
			listed = true;
	}
	if (path_at_or_under(field, "_id", 3))
		return id_wanted;
	return inclusion ? listed : !listed;
}

bool index_def_wildcard_covers(const index_def *d, const char *field)
{
	size_t w = index_def_wildcard_key(d);
	if (w == d->nkeys)
		return false;
	const char *k = d->keys[w].field;
	size_t len = strlen(k);
	if (strcmp(k, "$**") != 0)
		return path_at_or_under(field, k, len - 4); /* "p.$**" */
	if (d->wildcard_projection)
		return projection_covers(d->wildcard_projection, field);
	return !path_at_or_under(field, "_id", 3);
}

#define KEYS_COVER_MAX_DEPTH 8

static bool keys_cover(const index_def *d, const bson_t *filter, int depth)
{
	bson_iter_t it, el;
	bson_t sub;
	if (!filter || depth > KEYS_COVER_MAX_DEPTH || !bson_iter_init(&it, filter))
		return filter == NULL;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0) {
			if (!WIRE_ITER_HOLDS_ARRAY(&it) || !wire_iter_recurse(&it, &el))
				return false;
			while (wire_iter_next(&el)) {
				uint32_t len;
				const uint8_t *data;
				if (!WIRE_ITER_HOLDS_DOCUMENT(&el))
					return false;
				bson_iter_document(&el, &len, &data);
				if (!bson_init_static(&sub, data, len) ||
				    !keys_cover(d, &sub, depth + 1))
					return false;
			}
			continue;
		}
		if (strcmp(k, "$comment") == 0)
			continue;
		size_t i = 0;
		while (i < d->nkeys && strcmp(d->keys[i].field, k) != 0)
			i++;
		if (i == d->nkeys)
			return false;
	}
	return true;
}

bool index_def_keys_cover(const index_def *d, const bson_t *filter)
{
	return keys_cover(d, filter, 0);
}

void index_def_key_pattern(const index_def *d, bson_t *out)
{
	bson_init(out);
	for (size_t i = 0; i < d->nkeys; i++) {
		if (d->keys[i].direction != 0)
			BSON_APPEND_INT32(out, d->keys[i].field, d->keys[i].direction);
		else if (!d->plugin)
			BSON_APPEND_UTF8(out, d->keys[i].field, "hashed");
	}
}

bool index_def_matches_hint(const index_def *d, const bson_t *hint)
{
	bson_iter_t it;
	size_t i = 0;
	if (!bson_iter_init(&it, hint))
		return false;
	while (wire_iter_next(&it)) {
		if (i == d->nkeys || strcmp(wire_iter_key(&it), d->keys[i].field) != 0)
			return false;
		if (WIRE_ITER_HOLDS_NUMBER(&it)) {
			if (d->keys[i].direction != (bson_iter_as_double(&it) >= 0 ? 1 : -1))
				return false;
		} else if (d->keys[i].direction != 0) {
			return false;
		}
		i++;
	}
	return i == d->nkeys;
}

size_t index_set_find_hint(const index_set *s, const char *hint_name, const bson_t *hint_doc,
                           const index_def **out)
{
	size_t matches = 0;
	*out = NULL;
	for (size_t i = 0; i < index_set_count(s); i++) {
		const index_def *d = index_set_get(s, i);
		if (hint_name ? strcmp(d->name, hint_name) == 0
		              : index_def_matches_hint(d, hint_doc)) {
			*out = d;
			matches++;
		}
	}
	return matches;
}

#define EXPLAIN_MAX_DEPTH 64

static bool str_is(const bson_iter_t *it, const char *want)
{
	return WIRE_ITER_HOLDS_UTF8(it) && strcmp(bson_iter_utf8(it, NULL), want) == 0;
}

/* What explain says of index d: which keys hold arrays (bit i of mask)
 * and, per key, which of its path's components (parts[i]). found: some
 * IXSCAN of d with both facts was read (a mongos answers one per shard:
 * any shard's array makes the field multikey). */
typedef struct mk_facts {
	bool found;
	uint32_t mask;
	uint32_t parts[32];
} mk_facts;

/* A multiKeyPaths member ({field: [the prefixes that hold arrays]}): the
 * key it names gets its components' bits. */
static void path_parts(const index_def *d, const bson_iter_t *member, uint32_t *m, mk_facts *f)
{
	bson_iter_t arr;
	if (!WIRE_ITER_HOLDS_ARRAY(member) || !wire_iter_recurse(member, &arr))
		return;
	uint32_t bits = 0;
	bool any = false;
	while (wire_iter_next(&arr)) {
		any = true;
		/* a path prefix, "a.b" (its last component, 1, holds arrays) */
		if (WIRE_ITER_HOLDS_UTF8(&arr)) {
			unsigned pos = 0;
			for (const char *c = bson_iter_utf8(&arr, NULL); *c; c++)
				pos += *c == '.';
			if (pos < 32)
				bits |= 1u << pos;
		}
	}
	for (size_t i = 0; any && i < d->nkeys && i < 32; i++)
		if (strcmp(d->keys[i].field, wire_iter_key(member)) == 0) {
			*m |= 1u << i;
			f->parts[i] |= bits;
		}
}

/* One stage document: an IXSCAN of index d with both facts. */
static void ixscan_facts(const bson_t *stage, const index_def *d, mk_facts *f)
{
	bson_iter_t it, paths;
	bool ixscan = false, named = false, has_multi = false, has_paths = false;
	uint32_t m = 0;
	mk_facts mine = {0};
	if (!bson_iter_init(&it, stage))
		return;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (strcmp(k, "stage") == 0)
			ixscan = str_is(&it, "IXSCAN");
		else if (strcmp(k, "indexName") == 0)
			named = str_is(&it, d->name);
		else if (strcmp(k, "isMultiKey") == 0 && WIRE_ITER_HOLDS_BOOL(&it))
			has_multi = true;
		else if (strcmp(k, "multiKeyPaths") == 0 && WIRE_ITER_HOLDS_DOCUMENT(&it) &&
		         wire_iter_recurse(&it, &paths)) {
			has_paths = true;
			while (wire_iter_next(&paths))
				path_parts(d, &paths, &m, &mine);
		}
	}
	if (ixscan && named && has_multi && has_paths) {
		f->found = true;
		f->mask |= m;
		for (size_t i = 0; i < 32; i++)
			f->parts[i] |= mine.parts[i];
	}
}

static void walk_plan(const bson_iter_t *it, const index_def *d, mk_facts *f, int depth)
{
	bson_iter_t c;
	if (depth > EXPLAIN_MAX_DEPTH || !wire_iter_recurse(it, &c))
		return;
	if (WIRE_ITER_HOLDS_DOCUMENT(it)) {
		uint32_t len;
		const uint8_t *data;
		bson_t doc;
		bson_iter_document(it, &len, &data);
		if (bson_init_static(&doc, data, len))
			ixscan_facts(&doc, d, f);
	}
	while (wire_iter_next(&c))
		if (WIRE_ITER_HOLDS_DOCUMENT(&c) || WIRE_ITER_HOLDS_ARRAY(&c))
			walk_plan(&c, d, f, depth + 1);
}

bool index_set_learn_multikey(index_set *s, size_t i, const bson_t *reply)
{
	bson_iter_t it;
	mk_facts f = {0};
	if (i >= s->n || !bson_iter_init_find(&it, reply, "queryPlanner") ||
	    !WIRE_ITER_HOLDS_DOCUMENT(&it))
		return false;
	/* The winning plan only: a rejected plan may scan another index. */
	bson_iter_t qp;
	if (!wire_iter_recurse(&it, &qp) || !bson_iter_find(&qp, "winningPlan"))
		return false;
	walk_plan(&qp, &s->defs[i], &f, 0);
	if (!f.found)
		return false;
	s->defs[i].multikey_known = true;
	s->defs[i].multikey_keys = f.mask;
	for (size_t k = 0; k < s->defs[i].nkeys && k < 32; k++)
		s->defs[i].keys[k].multikey_parts = f.parts[k];
	return true;
}

int64_t index_set_doc_count(const index_set *s)
{
	if (s->doc_count < 0)
		return -1;
	int64_t n = s->doc_count + atomic_load_explicit(&s->written, memory_order_relaxed);
	return n > 0 ? n : 0;
}

int64_t index_set_note_docs(index_set *s, int64_t delta)
{
	return atomic_fetch_add_explicit(&s->written, delta, memory_order_relaxed) + delta;
}

int64_t index_set_read_count(const index_set *s)
{
	return s->doc_count;
}

uint64_t index_set_stamp(const index_set *s)
{
	return s->stamp;
}

void index_set_set_stamp(index_set *s, uint64_t stamp)
{
	s->stamp = stamp;
}

void index_set_set_doc_count(index_set *s, int64_t n)
{
	s->doc_count = n < 0 ? -1 : n;
}

size_t index_set_count(const index_set *s)
{
	return s->n;
}

const index_def *index_set_get(const index_set *s, size_t i)
{
	return i < s->n ? &s->defs[i] : NULL;
}

index_set *index_set_retain(index_set *s)
{
	if (s != NULL)
		atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

void index_set_release(index_set *s)
{
	if (s == NULL)
		return;
	/* acq_rel: the thread that frees must see every write made before the
	 * other holders let go. */
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	free_defs(s->defs, s->n);
	free(s);
}

static bool case_level(const bson_t *c)
{
	bson_iter_t it;
	return c && bson_iter_init_find(&it, c, "caseLevel") && bson_iter_as_bool(&it);
}

bool index_collation_same(const bson_t *a, const bson_t *b)
{
	if (!query_collation_equal(a, b))
		return false;
	return query_collation_is_simple(a) || case_level(a) == case_level(b);
}

const index_def *index_set_id_index(const index_set *s)
{
	for (size_t i = 0; s && i < s->n; i++) {
		const index_def *d = &s->defs[i];
		if (d->nkeys == 1 && d->keys[0].direction != 0 &&
		    strcmp(d->keys[0].field, "_id") == 0 && strcmp(d->name, "_id_") == 0)
			return d;
	}
	return NULL;
}

void index_set_note_multikey(index_set *s, size_t i, uint32_t mask)
{
	if (i < s->n)
		atomic_fetch_or_explicit(&s->defs[i].written_arrays, mask, memory_order_relaxed);
}

/* The same index: name and key pattern. */
static bool same_index(const index_def *a, const index_def *b)
{
	if (strcmp(a->name, b->name) != 0 || a->nkeys != b->nkeys)
		return false;
	for (size_t k = 0; k < a->nkeys; k++)
		if (strcmp(a->keys[k].field, b->keys[k].field) != 0 ||
		    a->keys[k].direction != b->keys[k].direction)
			return false;
	return true;
}

void index_set_carry_multikey(index_set *to, const index_set *from)
{
	if (to == NULL || from == NULL || to == from)
		return;
	for (size_t i = 0; i < to->n; i++)
		for (size_t j = 0; j < from->n; j++)
			if (same_index(&to->defs[i], &from->defs[j])) {
				uint32_t w = atomic_load_explicit(&from->defs[j].written_arrays,
				                                  memory_order_relaxed);
				if (w)
					index_set_note_multikey(to, i, w);
				break;
			}
}
