/* The body walker (body.h): one switch that names each key the rules read,
 * one pass that takes them, and the command an explain wraps. */
#include "analyzers/engine/body.h"

#include "analyzers/engine/keys.h"

/* hint: a key pattern document or an index name. */
static void take_hint(const bson_iter_t *it, bson_t *doc, sort_query *q)
{
	if (WIRE_ITER_HOLDS_UTF8(it))
		q->hint_name = bson_iter_utf8(it, NULL);
	else if (wire_iter_doc_view(it, doc))
		q->hint_doc = doc;
}

/* Only a boolean or a number makes the server explain instead of run; it
 * refuses any other type, so reading {explain: "false"} as explain (libbson
 * calls every string true) would only have let it go unblocked. */
static bool explains(const bson_iter_t *it)
{
	return (WIRE_ITER_HOLDS_BOOL(it) || WIRE_ITER_HOLDS_NUMBER(it)) && bson_iter_as_bool(it);
}

/* bson_iter_as_int64 of the number c is on. Out of line: a bson_iter_t
 * is 128-byte aligned, and the walk would otherwise realign its stack on
 * every statement. */
static __attribute__((noinline)) int64_t as_int64(const wire_cur *c)
{
	bson_iter_t it;
	wire_cur_iter(c, &it);
	return bson_iter_as_int64(&it);
}

/* find's limit is negative for a single batch: its absolute value. */
static void take_limit(const wire_cur *c, int64_t *limit)
{
	int64_t n;
	bson_type_t type = wire_cur_type(c);
	if (type == BSON_TYPE_INT32) { /* every find has one: read as bson_iter_int32 */
		uint32_t v;
		memcpy(&v, c->raw + c->val, sizeof v);
		n = (int32_t)BSON_UINT32_FROM_LE(v);
	} else if (type == BSON_TYPE_INT64 || type == BSON_TYPE_DOUBLE) {
		n = as_int64(c); /* libbson's own conversion, a double's above all */
	} else {
		return; /* not a number */
	}
	*limit = n < 0 ? (n == INT64_MIN ? INT64_MAX : -n) : n;
}

static void add_part(shape_part *parts, size_t *n, const char *key, shape_mode mode,
                     const wire_cur *c)
{
	parts[*n].key = key;
	parts[*n].mode = mode;
	parts[*n].str = NULL;
	parts[*n].value = *c;
	(*n)++;
}

body_key body_key_of(const char *k)
{
	return body_key_at(k);
}

/* One switch case per key, hence its length. */
bool body_walk(cmd_body *b, const bson_t *doc, unsigned wanted)
{
	bson_iter_t it;
	wire_cur c;
	if (!bson_iter_init(&it, doc))
		return false;
	wire_cur_of_iter(&c, &it);
	if (!body_walk_cur(b, &c, wanted))
		return false;
	body_iters(b);
	return true;
}

/* A key whose value is read, not kept (and kept in the shape when it
 * says so): an iterator is made for it, to be read as before. False when
 * it is not part of the shape. Out of line: a bson_iter_t is 128-byte
 * aligned, and the walk would otherwise realign its stack on every
 * statement. */
static __attribute__((noinline)) bool take_read(cmd_body *b, body_key key, const wire_cur *c)
{
	bson_iter_t it;
	wire_cur_iter(c, &it);
	switch (key) {
	case BK_HINT:
		take_hint(&it, &b->hint, &b->q);
		return true;
	case BK_EXPLAIN:
		b->explain |= explains(&it);
		b->explain_valued |= WIRE_ITER_HOLDS_NUMBER(&it);
		return false; /* not part of the shape */
	case BK_MULTI:
		b->multi = bson_iter_as_bool(&it);
		return false;
	case BK_KEY:
		if (WIRE_ITER_HOLDS_UTF8(&it))
			b->key = bson_iter_utf8(&it, NULL);
		return true;
	case BK_UPSERT:
		b->upsert = bson_iter_as_bool(&it);
		return true;
	default:
		return true;
	}
}

/* On a cursor: a statement's body is walked for every statement of a
 * batch, and most of its keys (q, u, filter) are only found and kept, as
 * cursors. */
bool body_walk_cur(cmd_body *b, const wire_cur *doc, unsigned wanted)
{
	wire_cur c = *doc;
	if (!c.raw)
		return true; /* an ended iterator's: nothing to walk */
	while (wire_cur_walk(&c)) {
		const char *k = wire_cur_key(&c); /* shown as is; lives as the body */
		body_key key = body_key_at(k);
		if (!(wanted & (1u << key)))
			continue; /* BK_NONE is never wanted */
		bool taken = true;
		shape_mode mode = SHAPE_VERBATIM;
		bson_type_t type = wire_cur_type(&c);
		switch (key) {
		case BK_FILTER:
		case BK_QUERY:
		case BK_Q:
			if ((taken = type == BSON_TYPE_DOCUMENT)) {
				b->filter_at = c;
				b->has_filter = true;
				mode = SHAPE_FILTER;
			}
			break;
		case BK_UPDATE:
		case BK_U:
		case BK_UPDATE_MODS:
			b->update_at = c;
			b->has_update = true;
			mode = SHAPE_UPDATE;
			break;
		case BK_PIPELINE:
			if ((taken = type == BSON_TYPE_ARRAY)) {
				wire_cur_iter(&c, &b->pipeline);
				b->has_pipeline = true;
				mode = SHAPE_PIPELINE;
			}
			break;
		case BK_SORT:
			if ((taken = wire_cur_doc_view(&c, &b->sort)))
				b->q.sort = &b->sort;
			break;
		case BK_COLLATION:
			if ((taken = wire_cur_doc_view(&c, &b->collation)))
				b->q.collation = &b->collation;
			break;
		case BK_ARRAY_FILTERS:
			mode = SHAPE_FILTER_LIST;
			break;
		case BK_LIMIT: /* as before: limits do not change the shape */
		case BK_SKIP:  /* the documents read and dropped before the limit's */
			take_limit(&c, key == BK_LIMIT ? &b->limit : &b->skip);
			taken = false;
			break;
		case BK_MIN_MAX:
			b->min_max = true;
			break;
		case BK_NONE:
			break;
		default:
			taken = take_read(b, key, &c);
			break;
		}
		if (taken && b->n < BODY_MAX_PARTS)
			add_part(b->parts, &b->n, k, mode, &c);
	}
	return true;
}

bool body_explained(const cmdview *v, cmdview *inner)
{
	bson_iter_t it;
	if (!bson_iter_init(&it, &v->body) || !wire_iter_next(&it))
		return false;
	memset(inner, 0, sizeof(*inner));
	inner->origin = v->origin;
	inner->db = v->db;
	if (!wire_iter_doc_view(&it, &inner->body) || !bson_iter_init(&it, &inner->body) ||
	    !wire_iter_next(&it))
		return false;
	inner->name = wire_iter_key(&it);
	return true;
}
