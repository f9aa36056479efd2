/* The steps of a statement's facts (facts.h) that two readers share:
 * facts.c's read of a filter and an update, and the statement scan
 * (stmt_scan.c), which reads the same bytes the same way for the gate
 * alone. One copy of each decision, so the two cannot drift apart.
 * Engine-internal. */
#ifndef MG_ANALYZERS_ENGINE_FACTS_STEPS_H
#define MG_ANALYZERS_ENGINE_FACTS_STEPS_H

#include "analyzers/engine/facts.h"
#include "analyzers/engine/keys.h"
#include "protocol/byte_template.h"
#include "protocol/wire_iter.h"

/* The key of an operator document's member c is on, as the rules tell
 * them apart. */
static inline unsigned op_bit(const wire_cur *c)
{
	switch (wire_cur_key(c)[1]) {
	case 'r':
		return CUR_KEY_IS(c, "$regex") ? FOP_REGEX : FOP_OTHER;
	case 'i':
		return CUR_KEY_IS(c, "$in") ? FOP_LIST : FOP_OTHER;
	case 'n':
		if (CUR_KEY_IS(c, "$nin"))
			return FOP_LIST;
		return CUR_KEY_IS(c, "$not") ? FOP_NOT : FOP_OTHER;
	case 'a':
		return CUR_KEY_IS(c, "$all") ? FOP_LIST : FOP_OTHER;
	case 'e':
		return CUR_KEY_IS(c, "$elemMatch") ? FOP_ELEM_MATCH : FOP_OTHER;
	case 'o':
		return CUR_KEY_IS(c, "$options") ? FOP_OPTIONS : FOP_OTHER;
	default:
		return FOP_OTHER;
	}
}

/* A member's value bytes that neither the step over it nor anything the
 * facts decide reads: a fixed-size value but a boolean (whose byte the
 * step checks), the inside of a string. The member's value is raw[val,
 * next): given by value, so that the caller's cursor need not be in
 * memory for the call. */
static __attribute__((noinline, unused)) void
value_span_of(facts_spans *sp, const uint8_t *raw, uint32_t val, uint32_t next, bson_type_t t)
{
	if (t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
	    t == BSON_TYPE_DATE_TIME || t == BSON_TYPE_OID || t == BSON_TYPE_TIMESTAMP ||
	    t == BSON_TYPE_DECIMAL128)
		byte_spans_add(sp, raw + val, next - val);
	else if (t == BSON_TYPE_UTF8 && next - (val + 4) > 1)            /* the string's bytes */
		byte_spans_add(sp, raw + val + 4, next - (val + 4) - 1); /* not the NUL */
}

/* The span of the operand of an update operator c is on that writes no
 * array (write_op < 0): nothing reads its inside, between its length and
 * its last byte. */
static inline __attribute__((always_inline)) void operand_span(facts_spans *sp, const wire_cur *c)
{
	bson_type_t t = wire_cur_type(c);
	if (sp && (t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY) && c->next - c->val > 5)
		byte_spans_add(sp, c->raw + c->val + 4, c->next - c->val - 5);
}

/* The same, a call only while a template is being made (most statements
 * of a mixed batch make none). */
static inline __attribute__((always_inline)) void value_span(facts_spans *sp, const wire_cur *c,
                                                             bson_type_t t)
{
	if (sp)
		value_span_of(sp, c->raw, c->val, c->next, t);
}

static inline bool is_dbref_key(const wire_cur *c)
{
	return CUR_KEY_IS(c, "$ref") || CUR_KEY_IS(c, "$id") || CUR_KEY_IS(c, "$db");
}

/* The fact_write_op of the update operator c is on, or -1 for one that
 * never makes an array. */
static inline int write_op(const wire_cur *c)
{
	const char *k = wire_cur_key(c);
	if (k[0] != '$')
		return -1;
	switch (k[1]) {
	case 'p':
		return CUR_KEY_IS(c, "$push") ? FW_PUSH : -1;
	case 'a':
		return CUR_KEY_IS(c, "$addToSet") ? FW_ADD_TO_SET : -1;
	case 's':
		return CUR_KEY_IS(c, "$set") || CUR_KEY_IS(c, "$setOnInsert") ? FW_SET : -1;
	default:
		return -1;
	}
}

/* The length of a path before its first positional component ("$",
 * "$[]", "$[name]"), which only an array can take; 0 when it has none. A
 * byte loop: paths are short, and most hold no '$'. */
static inline uint32_t positional(const char *p, uint32_t len)
{
	for (uint32_t i = 1; i < len; i++)
		if (p[i] == '$' && p[i - 1] == '.' &&
		    (p[i + 1] == '\0' || p[i + 1] == '.' || p[i + 1] == '['))
			return i - 1;
	return 0;
}

/* A member m of the operand of a write operator op (facts.h's writes): its
 * path's length and positional prefix (*len, *pos), and whether it is a
 * write; one that is not (a scalar $set at a plain path) gives its value's
 * span. */
static inline __attribute__((always_inline)) bool
write_member(const wire_cur *m, fact_write_op op, facts_spans *sp, uint32_t *len, uint32_t *pos)
{
	*len = wire_cur_key_len(m);
	*pos = positional(wire_cur_key(m), *len);
	bson_type_t t = wire_cur_type(m);
	if (op == FW_SET && t != BSON_TYPE_ARRAY && t != BSON_TYPE_DOCUMENT && !*pos) {
		value_span(sp, m, t);
		return false;
	}
	return true;
}

#endif
