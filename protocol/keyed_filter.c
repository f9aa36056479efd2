/* keyed_filter.h */
#include <string.h>

#include "protocol/keyed_filter.h"
#include "protocol/wire_iter.h"

typedef enum {
	KF_BESIDE, /* a condition beside the key */
	KF_EQ,     /* an equality to a value that may be a reference */
	KF_IN,     /* {$in: [...]} alone */
} kf_kind;

/* A value every document of a kind holds alike: a flag, not a reference. */
static bool flag_value(bson_type_t t)
{
	return t == BSON_TYPE_BOOL || t == BSON_TYPE_NULL || t == BSON_TYPE_UNDEFINED ||
	       t == BSON_TYPE_MINKEY || t == BSON_TYPE_MAXKEY;
}

static kf_kind field_kind(const bson_iter_t *it)
{
	bson_iter_t op;
	bson_type_t t = wire_iter_type(it);
	if (t == BSON_TYPE_REGEX || flag_value(t))
		return KF_BESIDE;
	if (t != BSON_TYPE_DOCUMENT || !wire_iter_recurse(it, &op) || !wire_iter_next(&op) ||
	    wire_iter_key(&op)[0] != '$')
		return KF_EQ; /* a value, an empty document or an embedded one */
	const char *name = wire_iter_key(&op);
	kf_kind k = KF_BESIDE;
	if (strcmp(name, "$in") == 0 && WIRE_ITER_HOLDS_ARRAY(&op))
		k = KF_IN;
	else if (strcmp(name, "$eq") == 0 && !flag_value(wire_iter_type(&op)))
		k = KF_EQ;
	return wire_iter_next(&op) ? KF_BESIDE : k; /* {$in: [...], $ne: x}: a query */
}

/* {$and: [documents]}, it on the $and: walked as fields of the filter. */
static bool and_of_documents(const bson_iter_t *it)
{
	bson_iter_t a;
	const char *k = wire_iter_key(it);
	if (k[0] != '$' || strcmp(k, "$and") != 0 || !WIRE_ITER_HOLDS_ARRAY(it) ||
	    !wire_iter_recurse(it, &a))
		return false;
	bool any = false;
	while (wire_iter_next(&a)) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&a))
			return false;
		any = true;
	}
	return any;
}

/* keyed_filter.h */
void keyed_walk_init(keyed_walk *w, const uint8_t *doc, uint32_t len, keyed_mode mode)
{
	wire_iter_init_framed(&w->top, doc, len);
	w->flat = mode == KEYED_FLAT;
	w->in_and = w->elem_open = false;
}

/* keyed_filter.h */
bool keyed_walk_next(keyed_walk *w, const bson_iter_t **at)
{
	for (;;) {
		if (w->in_and) {
			if (w->elem_open && wire_iter_next(&w->elem)) {
				*at = &w->elem;
				return true;
			}
			w->elem_open =
			    wire_iter_next(&w->and_arr) && wire_iter_recurse(&w->and_arr, &w->elem);
			if (w->elem_open)
				continue;
			w->in_and = false;
		}
		if (!wire_iter_next(&w->top))
			return false;
		if (w->flat && and_of_documents(&w->top) &&
		    wire_iter_recurse(&w->top, &w->and_arr)) {
			w->in_and = true;
			w->elem_open = false;
			continue;
		}
		*at = &w->top;
		return true;
	}
}

/* keyed_filter.h */
int keyed_filter_pick(const uint8_t *doc, uint32_t len, keyed_mode mode)
{
	keyed_walk w;
	const bson_iter_t *it;
	int i = 0, eq = -1, neq = 0, at_in = -1, nin = 0;
	bool op = false;
	keyed_walk_init(&w, doc, len, mode);
	for (; keyed_walk_next(&w, &it); i++) {
		if (wire_iter_key(it)[0] == '$') {
			op = true; /* $or, $expr, $comment, ...: no one field's reads */
			continue;
		}
		kf_kind k = field_kind(it);
		if (k == KF_IN) {
			at_in = i;
			nin++;
		} else if (k == KF_EQ) {
			eq = i;
			neq++;
		}
	}
	if (i == 1)
		return 0;
	if (op || mode == KEYED_ALONE)
		return -1;
	if (nin == 1)
		return at_in;
	return nin == 0 && neq == 1 ? eq : -1;
}

/* A stage that only shapes, orders or cuts what the stages before it
 * read: an aggregate of a $match and such stages reads as a find does. */
static bool shaping_stage(const char *k, uint32_t n)
{
	switch (n) {
	case 4:
		return memcmp(k, "$set", 4) == 0;
	case 5:
		return memcmp(k, "$sort", 5) == 0 || memcmp(k, "$skip", 5) == 0;
	case 6:
		return memcmp(k, "$limit", 6) == 0 || memcmp(k, "$unset", 6) == 0;
	case 8:
		return memcmp(k, "$project", 8) == 0;
	case 10:
		return memcmp(k, "$addFields", 10) == 0;
	default:
		return false;
	}
}

/* keyed_filter.h */
const uint8_t *keyed_aggregate_match(const uint8_t *pipeline, uint32_t len)
{
	const uint8_t *match = NULL;
	bson_iter_t it, st;
	wire_iter_init_framed(&it, pipeline, len);
	while (wire_iter_next(&it)) {
		if (wire_iter_type(&it) != BSON_TYPE_DOCUMENT || !wire_iter_recurse(&it, &st) ||
		    !wire_iter_next(&st))
			return NULL;
		const char *k = wire_iter_key(&st);
		if (match ? !shaping_stage(k, wire_iter_key_len(&st))
		          : strcmp(k, "$match") != 0 || wire_iter_type(&st) != BSON_TYPE_DOCUMENT)
			return NULL;
		if (!match)
			match = st.raw + st.d1;
		if (wire_iter_next(&st))
			return NULL; /* a stage of two keys: mongod refuses it */
	}
	return match;
}
