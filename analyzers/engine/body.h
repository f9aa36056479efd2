/* Reading a command body, or one statement of a batch, for the engine: one
 * pass over the document takes the keys a command's rules read (its filter,
 * update, pipeline, sort, collation, hint, limit, ...) as views into the
 * request, and lists, in the body's order, the parts its shape shows.
 *
 * Each key name means the same wherever it appears, so one switch names a
 * key once (body.c) and each command says, as a set of BK bits, which keys
 * it reads (its row in commands.c). Nothing is copied or allocated: every
 * view points into the document walked, which must outlive the body.
 *
 * Engine-internal: only the engine's files and their tests include it. */
#ifndef MG_ANALYZERS_ENGINE_BODY_H
#define MG_ANALYZERS_ENGINE_BODY_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "analyzers/engine/keys.h"
#include "analyzers/engine/shape.h"
#include "analyzers/planner/sort_query.h"
#include "protocol/cmdview.h"
#include "protocol/wire_iter.h"

typedef enum {
	BK_NONE,
	BK_FILTER,      /* find, bulkWrite ops */
	BK_QUERY,       /* findAndModify, count, distinct */
	BK_Q,           /* update and delete statements */
	BK_UPDATE,      /* findAndModify */
	BK_U,           /* update statements */
	BK_UPDATE_MODS, /* bulkWrite update ops */
	BK_PIPELINE,
	BK_SORT,
	BK_COLLATION,
	BK_HINT,
	BK_UPSERT,
	BK_KEY, /* distinct */
	BK_ARRAY_FILTERS,
	BK_EXPLAIN, /* {aggregate, explain: true} */
	BK_LIMIT,   /* find, delete statements */
	BK_MULTI,   /* update statements, bulkWrite ops */
	BK_MIN_MAX, /* find's min and max */
	BK_SKIP,    /* find's skip */
} body_key;

#define BK(k) (1u << BK_##k)

/* The most parts a command shows (findAndModify). More means repeated keys,
 * which the server refuses; the rules still see every key, the shape shows
 * the first ones. */
#define BODY_MAX_PARTS 8

/* What the walk found. Views point into the body; the bson_t slots live
 * here because a view is never copied by value. The filter and the update
 * are found as cursors (filter_at, update_at), which the engine's facts
 * read; their iterators, which the rules' checks read, are made by
 * body_walk, and for a statement (body_walk_cur) only by body_iters,
 * once a check is to read them. */
typedef struct cmd_body {
	wire_cur filter_at, update_at;        /* each valid when its has_ is set */
	bson_iter_t filter, update, pipeline; /* each valid when its has_ is set
	                                       * (filter, update: see above) */
	bool has_filter, has_update, has_pipeline;
	bool explain;
	bool explain_valued; /* explain given as a number: its value decides */
	bool multi;          /* an update statement's multi */
	bool upsert;         /* an update statement's or a findAndModify's upsert */
	bool min_max;        /* find's min or max */
	int64_t limit;       /* find's limit (its absolute value), a delete's limit */
	int64_t skip;        /* find's skip (0: none, or not a positive number) */
	const char *key;     /* distinct's key */
	sort_query q;        /* sort, collation and hint point into the slots; the
	                      * filter too once body_sort_query has run */
	bson_t filter_doc, sort, collation, hint;
	shape_part parts[BODY_MAX_PARTS]; /* the shape, in the body's order */
	size_t n;
} cmd_body;

/* The key's BK_ value (BK_NONE for a key no rule reads). Inline: in the
 * walks of a body and of a statement (stmt_scan.c), for every key. */
static inline __attribute__((always_inline)) body_key body_key_at(const char *k)
{
	switch (k[0]) {
	case 'a':
		return key_eq(k, "arrayFilters") ? BK_ARRAY_FILTERS : BK_NONE;
	case 'c':
		return key_eq(k, "collation") ? BK_COLLATION : BK_NONE;
	case 'e':
		return key_eq(k, "explain") ? BK_EXPLAIN : BK_NONE;
	case 'f':
		return key_eq(k, "filter") ? BK_FILTER : BK_NONE;
	case 'h':
		return key_eq(k, "hint") ? BK_HINT : BK_NONE;
	case 'k':
		return key_eq(k, "key") ? BK_KEY : BK_NONE;
	case 'l':
		return key_eq(k, "limit") ? BK_LIMIT : BK_NONE;
	case 'm':
		if (key_eq(k, "multi"))
			return BK_MULTI;
		return key_eq(k, "min") || key_eq(k, "max") ? BK_MIN_MAX : BK_NONE;
	case 'p':
		return key_eq(k, "pipeline") ? BK_PIPELINE : BK_NONE;
	case 'q':
		return key_eq(k, "q") ? BK_Q : key_eq(k, "query") ? BK_QUERY : BK_NONE;
	case 's':
		return key_eq(k, "sort") ? BK_SORT : key_eq(k, "skip") ? BK_SKIP : BK_NONE;
	case 'u':
		if (key_eq(k, "u"))
			return BK_U;
		if (key_eq(k, "update"))
			return BK_UPDATE;
		if (key_eq(k, "updateMods"))
			return BK_UPDATE_MODS;
		return key_eq(k, "upsert") ? BK_UPSERT : BK_NONE;
	default:
		return BK_NONE;
	}
}

/* The same, out of line, for the tests. */
body_key body_key_of(const char *k);

/* Leaves the bson_t slots alone: on the request path, and only written
 * when their key is met. Inline: every analysed request calls it, from
 * the analysers and from engine_shape. */
static inline void body_init(cmd_body *b, const char *db, const char *coll)
{
	b->has_filter = b->has_update = b->has_pipeline = b->explain = b->multi = b->upsert = false;
	b->explain_valued = false;
	b->min_max = false;
	b->limit = b->skip = 0;
	b->key = NULL;
	memset(&b->q, 0, sizeof(b->q));
	b->q.db = db;
	b->q.coll = coll;
	b->n = 0;
}

/* One pass over doc, taking the keys in the set `wanted` (BK bits). A
 * filter, pipeline, sort or collation of the wrong type is passed over; a
 * repeated key counts as its last occurrence. Parts already in b->parts
 * (a bulkWrite op's kind) stay first. False when doc cannot be read. */
bool body_walk(cmd_body *b, const bson_t *doc, unsigned wanted) __attribute__((warn_unused_result));

/* The same, from a cursor before the document's first element (as
 * wire_cur_init_framed or wire_cur_of_iter after bson_iter_init leave
 * one); the views point into its bytes. The filter's and the update's
 * iterators are not made (body_iters makes them). */
bool body_walk_cur(cmd_body *b, const wire_cur *doc, unsigned wanted)
    __attribute__((warn_unused_result));

/* The filter's and the update's iterators, from their cursors: the ones a
 * walk with bson_iter_t would have kept. */
static inline __attribute__((always_inline)) void body_iters(cmd_body *b)
{
	if (b->has_filter)
		wire_cur_iter(&b->filter_at, &b->filter);
	if (b->has_update)
		wire_cur_iter(&b->update_at, &b->update);
}

/* The collection a command names: its first value, when a string. Every
 * analyser and the connection's track ask, on every request: so not
 * bson_iter_init and bson_iter_utf8, two calls into libbson, but what they
 * do (a view of at least five bytes; the string libbson's step checked at
 * d2). */
static inline const char *body_coll_of(const bson_t *doc)
{
	bson_iter_t it;
	if (doc->len < 5)
		return NULL;
	wire_iter_init_framed(&it, bson_get_data(doc), doc->len);
	if (wire_iter_next(&it) && WIRE_ITER_HOLDS_UTF8(&it))
		return (const char *)it.raw + it.d2;
	return NULL;
}

/* body_coll_of(&v->body), from the view's first key when it has one (the
 * decoder's pass found it: its type byte before it, its value after it):
 * the string checked as libbson's step checks it, without the step. */
static inline const char *cmdview_coll(const cmdview *v)
{
	if (v->ntop == 0)
		return body_coll_of(&v->body);
	const uint8_t *base = bson_get_data(&v->body), *k = (const uint8_t *)v->top_keys[0];
	uint32_t len = v->body.len, o = (uint32_t)(k - base) + v->top_lens[0] + 1, l;
	if (k[-1] != BSON_TYPE_UTF8 || o + 4 >= len)
		return NULL;
	memcpy(&l, base + o, sizeof l);
	l = BSON_UINT32_FROM_LE(l);
	if (l == 0 || l > len - (o + 4) || o + 4 + l >= len || base[o + 4 + l - 1] != 0)
		return NULL;
	return (const char *)base + o + 4;
}

/* The sort rule's question. The filter's view is made only here: only
 * the sort rule reads it as a document, and only when there is a sort. */
static inline const sort_query *body_sort_query(cmd_body *b)
{
	if (b->has_filter && b->q.sort && wire_iter_doc_view(&b->filter, &b->filter_doc))
		b->q.filter = &b->filter_doc;
	return &b->q;
}

/* {explain: {find: ...}}: the inner command, in a view of its own (a
 * cmdview is never copied). Both the analyser of explain and the offline
 * shape read it. False when there is none. */
bool body_explained(const cmdview *v, cmdview *inner) __attribute__((warn_unused_result));

#endif
