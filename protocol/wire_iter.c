/* wire_iter.h: libbson's iterator steps, without the calls. */
#include "protocol/wire_iter.h"

#include <string.h>

static uint32_t le32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof v);
	return BSON_UINT32_FROM_LE(v);
}

/* wire_iter.h */
/* Each fixed-size type's value bytes plus one, for both tables below. */
#define FIXED_PLUS_ONE                                                                             \
	[BSON_TYPE_DOUBLE] = 9, [BSON_TYPE_DATE_TIME] = 9, [BSON_TYPE_INT64] = 9,                  \
	[BSON_TYPE_TIMESTAMP] = 9, [BSON_TYPE_INT32] = 5, [BSON_TYPE_DECIMAL128] = 17,             \
	[BSON_TYPE_OID] = 13, [BSON_TYPE_NULL] = 1, [BSON_TYPE_UNDEFINED] = 1,                     \
	[BSON_TYPE_MINKEY] = 1, [BSON_TYPE_MAXKEY] = 1

const uint8_t wire_iter_fixed_plus_one[256] = {FIXED_PLUS_ONE};

const uint8_t wire_cur_class[256] = {
    FIXED_PLUS_ONE,
    [BSON_TYPE_DOCUMENT] = WIRE_CUR_DOC,
    [BSON_TYPE_ARRAY] = WIRE_CUR_DOC,
    [BSON_TYPE_UTF8] = WIRE_CUR_STR,
};

/* The iterator's state after a failed step, as libbson leaves it. */
static bool ended(bson_iter_t *it)
{
	it->raw = NULL;
	it->len = 0;
	it->next_off = 0;
	return false;
}

static bool corrupt_at(bson_iter_t *it, uint32_t off)
{
	it->err_off = off;
	return ended(it);
}

/* The checks below are libbson's, in libbson's order and with its unsigned
 * arithmetic (a length that does not fit fails the same comparison), so
 * the same element fails with the same err_off. */
bool wire_iter_next_any(bson_iter_t *it)
{
	const uint8_t *raw = it->raw;
	if (!raw)
		return false;
	uint32_t len = it->len, at = it->next_off;
	it->off = at;
	it->type = at;
	it->key = at + 1;
	it->d1 = it->d2 = it->d3 = it->d4 = 0;
	uint32_t o = wire_nul_from(raw, at + 1, len);
	if (o >= len)
		return ended(it); /* an unterminated key: no err_off, as libbson */
	it->d1 = ++o;
	uint8_t type = raw[at];
	uint32_t next, l;
	if (wire_iter_fixed_plus_one[type]) {
		next = o + wire_iter_fixed_plus_one[type] - 1u;
	} else {
		switch (type) {
		case BSON_TYPE_UTF8:
		case BSON_TYPE_CODE:
		case BSON_TYPE_SYMBOL:
			if (o + 4 >= len)
				return corrupt_at(it, o);
			it->d2 = o + 4;
			l = le32(raw + o);
			if (l > len - (o + 4))
				return corrupt_at(it, o);
			next = o + 4 + l;
			if (l == 0 || next >= len)
				return corrupt_at(it, o);
			if (raw[o + 4 + l - 1] != 0)
				return corrupt_at(it, o + 4 + l - 1);
			break;
		case BSON_TYPE_DOCUMENT:
		case BSON_TYPE_ARRAY:
			if (o >= len - 4)
				return corrupt_at(it, o);
			l = le32(raw + o);
			if (l > len || l > len - o)
				return corrupt_at(it, o);
			next = o + l;
			break;
		case BSON_TYPE_BOOL:
			if (o >= len || raw[o] > 1)
				return corrupt_at(it, o);
			next = o + 1;
			break;
		case BSON_TYPE_BINARY:
			if (o >= len - 4)
				return corrupt_at(it, o);
			it->d2 = o + 4;
			it->d3 = o + 5;
			l = le32(raw + o);
			if (l >= len - o - 4)
				return corrupt_at(it, o);
			/* the old binary subtype repeats its length inside */
			if (raw[o + 4] == BSON_SUBTYPE_BINARY_DEPRECATED &&
			    (l < 4 || le32(raw + o + 5) + 4u != l))
				return corrupt_at(it, l < 4 ? o : o + 5);
			next = o + 5 + l;
			break;
		case BSON_TYPE_REGEX:
			/* two C strings, pattern and options; an unterminated
			 * one is reported at the element, as libbson does */
			o = wire_nul_from(raw, o, len);
			if (o >= len)
				return corrupt_at(it, at);
			it->d2 = ++o;
			o = wire_nul_from(raw, o, len);
			if (o >= len)
				return corrupt_at(it, at);
			next = o + 1;
			break;
		case BSON_TYPE_DBPOINTER:
			if (o >= len - 4)
				return corrupt_at(it, o);
			it->d2 = o + 4;
			l = le32(raw + o);
			if (l == 0 || l > len - o - 4)
				return corrupt_at(it, o);
			if (raw[o + l + 3] != 0)
				return corrupt_at(it, o + l + 3);
			it->d3 = o + 4 + l;
			next = o + 4 + l + 12;
			break;
		case BSON_TYPE_CODEWSCOPE: {
			if (len < 19 || o >= len - 14)
				return corrupt_at(it, o);
			it->d2 = o + 4;
			it->d3 = o + 8;
			l = le32(raw + o);
			if (l < 14 || l >= len - o)
				return corrupt_at(it, o);
			next = o + l;
			if (next >= len)
				return corrupt_at(it, o);
			uint32_t code = le32(raw + o + 4);
			if (code == 0 || code >= len - o - 8)
				return corrupt_at(it, o);
			if (o + 8 + code + 4 >= next)
				return corrupt_at(it, o + 4);
			it->d4 = o + 8 + code;
			if (o + 8 + code + le32(raw + it->d4) != next)
				return corrupt_at(it, it->d4);
			break;
		}
		default: /* the end of the document, or a type libbson does not know */
			return corrupt_at(it, o);
		}
	}
	if (next >= len)
		return corrupt_at(it, o);
	it->next_off = next;
	it->err_off = 0;
	return true;
}

/* wire_iter.h: the step the inline one hands over, on an iterator standing
 * where the cursor stands (next_off is all a step reads of it). */
wire_cur_step wire_cur_step_any(const uint8_t *raw, uint32_t len, uint32_t at)
{
	bson_iter_t it;
	wire_cur_step r = {0, 0, 0, 0};
	if (at < len && raw[at] == BSON_TYPE_BOOL) {
		/* a statement's multi and upsert, a find's singleBatch: the
		 * boolean's checks (wire_iter_next_any's), without the iterator;
		 * any that fails takes the whole step below */
		uint32_t o = wire_nul_from(raw, at + 1, len);
		if (o < len && ++o < len && raw[o] <= 1 && o + 1 < len) {
			r.ok = 1;
			r.at = at;
			r.val = o;
			r.next = o + 1;
			return r;
		}
	}
	it.raw = raw;
	it.len = len;
	it.next_off = at;
	it.err_off = 0;
	if (!wire_iter_next_any(&it))
		return r;
	r.ok = 1;
	r.at = it.off;
	r.val = it.d1;
	r.next = it.next_off;
	return r;
}

/* wire_iter.h: the step onto c's element again, which succeeded before on
 * the same bytes. */
void wire_cur_iter_any(const wire_cur *c, bson_iter_t *it)
{
	it->raw = c->raw;
	it->len = c->len;
	it->next_off = c->at;
	it->err_off = 0;
	(void)wire_iter_next_any(it);
}
