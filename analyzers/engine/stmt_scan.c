/* The scan of a statement (stmt_scan.h): its keys, its filter's members
 * and its update's operators in one pass, each step as the full read
 * (body.c, facts.c) takes it, keeping only what the gate reads. */
#include "analyzers/engine/stmt_scan.h"

#include "analyzers/engine/body.h"
#include "analyzers/engine/facts_steps.h"
#include "analyzers/engine/keys.h"

/* bson_iter_as_bool of the element c is on, as take_read (body.c) reads
 * an upsert. Out of line: a bson_iter_t is 128-byte aligned, and rare.
 * The cursor by value, so that the caller's need not be in memory. */
static __attribute__((noinline)) bool as_bool(wire_cur c)
{
	bson_iter_t it;
	wire_cur_iter(&c, &it);
	return bson_iter_as_bool(&it);
}

/* The STMT_PATTERN and STMT_PLAN bits of the filter (a cursor on a
 * document), with no hint and no collation: facts_filter then facts_have,
 * the members' decisions of member() (facts.c) without keeping them. */
static inline __attribute__((always_inline)) unsigned scan_filter(const wire_cur *filter,
                                                                  facts_spans *sp)
{
	wire_cur c, first;
	unsigned n = 0;
	bool pattern = false, id_eq = false;
	if (!wire_cur_recurse(filter, &c))
		return STMT_PATTERN | STMT_PLAN; /* not viewable */
	bool viewable = c.len >= 5 && c.raw[c.len - 1] == 0;
	while (wire_cur_walk(&c)) {
		if (n == FACTS_MEMBERS)
			return STMT_PATTERN | STMT_PLAN; /* incomplete: the rules read it */
		n++;
		if (wire_cur_key(&c)[0] == '$') { /* FM_TOP */
			pattern = true;
			continue;
		}
		bson_type_t t = wire_cur_type(&c);
		bool eq; /* the member would make an equality on _id */
		if (t == BSON_TYPE_REGEX) {
			pattern = true;
			eq = false;
		} else if (t != BSON_TYPE_DOCUMENT) { /* FM_VALUE */
			value_span(sp, &c, t);
			eq = true;
		} else if (!wire_cur_recurse(&c, &first) || !wire_cur_walk(&first) ||
		           wire_cur_key(&first)[0] != '$') { /* FM_DOC */
			eq = true;
		} else { /* FM_OPS: an equality only as a DBRef */
			eq = is_dbref_key(&first);
			unsigned ops = 0;
			do
				ops |= op_bit(&first);
			while (wire_cur_walk(&first));
			pattern |= (ops & FOP_PATTERN) != 0;
		}
		if (eq && CUR_KEY_IS(&c, "_id"))
			id_eq = true;
	}
	if (!viewable)
		return STMT_PATTERN | STMT_PLAN;
	return (pattern ? STMT_PATTERN : 0) | (id_eq ? 0 : STMT_PLAN);
}

/* What the scan of an update found, for the learning's test. */
typedef struct scan_update_out {
	uint8_t form;   /* fact_update_form */
	bool may_learn; /* engine_arrays_may_learn of its facts */
	bool hit;       /* some write's path starts with a byte of firsts */
} scan_update_out;

/* writes_of (facts.c) for the gate and the learning: how many writes,
 * whether one starts with a byte of firsts (NULL: not asked), and whether
 * a $push member is unbounded. False when the writes overflow
 * FACTS_WRITES (writes_complete false). */
static inline __attribute__((always_inline)) bool
scan_writes(scan_update_out *o, unsigned *nwrites, bool *open, const wire_cur *c, fact_write_op op,
            const uint64_t *firsts, facts_spans *sp)
{
	wire_cur m;
	if (wire_cur_type(c) != BSON_TYPE_DOCUMENT || !wire_cur_recurse(c, &m))
		return true;
	while (wire_cur_walk(&m)) {
		uint32_t len, pos;
		if (!write_member(&m, op, sp, &len, &pos))
			continue;
		if (*nwrites == FACTS_WRITES)
			return false;
		if (op == FW_PUSH) {
			bool each, slice;
			if (!facts_push_bounded(&m, &each, &slice))
				*open = true;
		}
		if (firsts) { /* engine_arrays_passed_over's test of this write */
			uint8_t b = (uint8_t)wire_cur_key(&m)[0];
			o->hit |= firsts[b >> 6] >> (b & 63) & 1;
		}
		++*nwrites;
	}
	return true;
}

/* The STMT_PUSH bit of the update (a cursor on its value) and, in o, what
 * the learning's test reads: facts_update, then facts_have's part. */
static inline __attribute__((always_inline)) unsigned
scan_update(scan_update_out *o, const wire_cur *update, const uint64_t *firsts, facts_spans *sp)
{
	wire_cur c;
	bson_type_t type = wire_cur_type(update);
	o->may_learn = o->hit = false;
	if (type == BSON_TYPE_ARRAY) {
		o->form = FU_PIPELINE;
		return STMT_PUSH;
	}
	if (type != BSON_TYPE_DOCUMENT || !wire_cur_recurse(update, &c)) {
		o->form = FU_OTHER;
		return 0;
	}
	if (!wire_cur_walk(&c)) {
		o->form = FU_EMPTY;
		return 0;
	}
	if (wire_cur_key(&c)[0] != '$') {
		o->form = FU_REPLACEMENT;
		o->may_learn = true;
		return 0;
	}
	o->form = FU_OPERATORS;
	unsigned nwrites = 0;
	bool push = false, open = false, complete = true;
	do {
		int op = write_op(&c);
		if (op < 0)
			operand_span(sp, &c);
		push |= op == FW_PUSH;
		if (op >= 0 && complete)
			complete =
			    scan_writes(o, &nwrites, &open, &c, (fact_write_op)op, firsts, sp);
	} while (wire_cur_walk(&c));
	o->may_learn = nwrites > 0 && complete;
	return push && (open || !complete) ? STMT_PUSH : 0;
}

/* Whether the learning reads a statement whose update the scan found o
 * (read_facts' test: engine_arrays_may_learn, engine_arrays_passed_over). */
static inline bool learning_reads(const arrays_target *at, const scan_update_out *o)
{
	if (!o->may_learn || !at)
		return false;
	if (!at->looked)
		return true;
	return at->set && (o->form != FU_OPERATORS || o->hit);
}

bool stmt_scan_run(const stmt_scan_in *in, const wire_cur *doc, facts_spans *sp, bool *upsert)
{
	wire_cur c = *doc;
	bool seen_filter = false, seen_update = false, has_update = false;
	unsigned have = 0;
	uint32_t update_len = 0;
	scan_update_out u = {FU_OTHER, false, false}; /* read only once an update is */
	/* the learnable keys' first bytes, when a write's decides the test */
	const arrays_target *at = in->learn;
	const uint64_t *firsts = at && at->looked && at->set ? at->firsts : NULL;
	*upsert = false;
	if (!c.raw)
		return false; /* an ended iterator's: the full read says what */
	while (wire_cur_walk(&c)) {
		/* q and u, the keys of nearly every statement, without the switch */
		const char *k = wire_cur_key(&c);
		body_key key = wire_cur_key_len(&c) != 1 ? body_key_at(k)
		               : k[0] == 'q'             ? BK_Q
		               : k[0] == 'u'             ? BK_U
		                                         : BK_NONE;
		if (!(in->wanted & (1u << key)))
			continue;
		switch (key) {
		case BK_FILTER:
		case BK_QUERY:
		case BK_Q:
			if (wire_cur_type(&c) != BSON_TYPE_DOCUMENT)
				break; /* passed over, as body_walk_cur passes it */
			if (seen_filter)
				return false; /* the last one counts: read in full */
			seen_filter = true;
			if (in->filter)
				have |= scan_filter(&c, sp);
			break;
		case BK_UPDATE:
		case BK_U:
		case BK_UPDATE_MODS:
			if (seen_update)
				return false;
			seen_update = true;
			if (in->update) {
				has_update = true;
				if (wire_cur_type(&c) == BSON_TYPE_DOCUMENT ||
				    wire_cur_type(&c) == BSON_TYPE_ARRAY)
					update_len = c.next - c.val;
				have |= scan_update(&u, &c, firsts, in->update_spans ? sp : NULL);
			}
			break;
		case BK_UPSERT:
			*upsert = as_bool(c);
			break;
		case BK_MULTI: /* read only by the query checks, which a */
		case BK_LIMIT: /* statement the scan passes has none of */
		case BK_SKIP:
			break;
		default:
			return false; /* a hint, a collation, a sort, arrayFilters, ... */
		}
	}
	if (!(seen_filter && in->filter))
		have |= STMT_PATTERN | STMT_PLAN;
	if (!has_update)
		have |= STMT_PUSH;
	/* stmt_unchecked, then the learning's test */
	return !in->gate_always && !(have & in->gate_when) &&
	       (!has_update || (update_len < in->gate_floor && !learning_reads(at, &u)));
}
