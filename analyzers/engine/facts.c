/* A statement's facts (facts.h): one pass over the top level of its filter
 * and of its update. */
#include "analyzers/engine/facts.h"

#include "analyzers/engine/facts_steps.h"
#include "analyzers/engine/keys.h"
#include "protocol/wire_iter.h"

/* One member, c on it. */
static void member(filter_facts *f, fact_member *m, const wire_cur *c, facts_spans *sp)
{
	wire_cur first;
	const char *k = wire_cur_key(c);
	m->at = *c;
	m->ops = 0;
	m->dbref = false;
	if (k[0] == '$') {
		m->kind = FM_TOP;
		f->tops = true;
		return;
	}
	bson_type_t t = wire_cur_type(c);
	if (t == BSON_TYPE_REGEX) {
		m->kind = FM_REGEX;
		f->regexes = true;
	} else if (t != BSON_TYPE_DOCUMENT) {
		m->kind = FM_VALUE;
		value_span(sp, c, t);
	} else if (!wire_cur_recurse(c, &first) || !wire_cur_walk(&first) ||
	           wire_cur_key(&first)[0] != '$') {
		m->kind = FM_DOC;
	} else {
		m->kind = FM_OPS;
		m->dbref = is_dbref_key(&first);
		unsigned ops = 0;
		do
			ops |= op_bit(&first);
		while (wire_cur_walk(&first));
		m->ops = (uint8_t)ops;
		f->ops |= (uint8_t)ops;
	}
	if (CUR_KEY_IS(c, "_id") && (m->kind != FM_OPS || m->dbref) && m->kind != FM_REGEX) {
		f->id_eq = true;
		f->id_collatable = t == BSON_TYPE_UTF8 || t == BSON_TYPE_SYMBOL ||
		                   t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY;
	}
}

void facts_filter(filter_facts *f, const wire_cur *filter, facts_spans *sp)
{
	wire_cur c;
	f->n = 0;
	f->complete = true;
	f->ops = 0;
	f->regexes = f->tops = f->id_eq = f->id_collatable = false;
	f->viewable = false;
	if (!wire_cur_recurse(filter, &c))
		return;
	f->viewable = c.len >= 5 && c.raw[c.len - 1] == 0;
	while (wire_cur_walk(&c)) {
		if (f->n == FACTS_MEMBERS) {
			f->complete = false;
			return;
		}
		member(f, &f->m[f->n], &c, sp);
		f->n++;
	}
}

/* The writes (update_facts.writes) of one operator, c on it. spans: a
 * $set's members that are no write (a scalar at a plain path) give their
 * values' bytes, as a filter's values do; a write's bytes, and a $push's
 * or an $addToSet's, are read (the multikey learning, the push rule's
 * bound) and give none. */
static void writes_of(update_facts *u, const wire_cur *c, fact_write_op op, facts_spans *sp)
{
	wire_cur m;
	if (wire_cur_type(c) != BSON_TYPE_DOCUMENT || !wire_cur_recurse(c, &m))
		return;
	while (wire_cur_walk(&m)) {
		uint32_t len, pos;
		if (!write_member(&m, op, sp, &len, &pos))
			continue;
		if (u->nwrites == FACTS_WRITES) {
			u->writes_complete = false;
			return;
		}
		fact_write *w = &u->writes[u->nwrites++];
		if (op == FW_PUSH && !facts_push_bounded(&m, &w->each, &w->slice))
			u->ops |= UOP_PUSH_OPEN;
		w->at = m;
		w->len = len;
		w->position = pos;
		w->op = (uint8_t)op;
	}
}

void facts_update(update_facts *u, const wire_cur *update, facts_spans *sp)
{
	wire_cur c;
	u->ops = 0;
	u->len = 0;
	u->nwrites = 0;
	u->writes_complete = true;
	bson_type_t type = wire_cur_type(update);
	if (type == BSON_TYPE_ARRAY) {
		u->form = FU_PIPELINE;
		u->len = update->next - update->val;
		return;
	}
	if (type != BSON_TYPE_DOCUMENT || !wire_cur_recurse(update, &c)) {
		u->form = FU_OTHER;
		return;
	}
	u->len = update->next - update->val;
	if (!wire_cur_walk(&c)) {
		u->form = FU_EMPTY;
		return;
	}
	if (wire_cur_key(&c)[0] != '$') {
		u->form = FU_REPLACEMENT;
		return;
	}
	u->form = FU_OPERATORS;
	unsigned ops = 0;
	u->ops = 0; /* writes_of may add UOP_PUSH_OPEN */
	do {
		int op = write_op(&c);
		if (op < 0)
			operand_span(sp, &c);
		if (op == FW_PUSH)
			ops |= UOP_PUSH;
		else if (CUR_KEY_IS(&c, "$inc"))
			ops |= UOP_INC;
		else
			ops |= UOP_OTHER;
		if (op >= 0 && u->writes_complete)
			writes_of(u, &c, (fact_write_op)op, sp);
	} while (wire_cur_walk(&c));
	u->ops |= (uint8_t)ops;
}

static bool is(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* mongod's update modifiers (UpdateDriver's parse): an update naming any
 * other is refused ("Unknown modifier"). By the letter after the '$'. */
static bool modifier_known(const char *k)
{
	if (k[0] != '$' || !k[1])
		return false;
	const char *r = k + 2;
	switch (k[1]) {
	case 's':
		return is(r, "et") || is(r, "etOnInsert");
	case 'u':
		return is(r, "nset");
	case 'i':
		return is(r, "nc");
	case 'm':
		return is(r, "ul") || is(r, "in") || is(r, "ax");
	case 'r':
		return is(r, "ename");
	case 'p':
		return is(r, "ush") || is(r, "ull") || is(r, "ullAll") || is(r, "op");
	case 'a':
		return is(r, "ddToSet");
	case 'c':
		return is(r, "urrentDate");
	case 'b':
		return is(r, "it");
	default:
		return false;
	}
}

/* The stages an update pipeline may hold (and $merge's whenMatched). */
static bool update_stage_known(const char *k)
{
	return is(k, "$addFields") || is(k, "$set") || is(k, "$project") || is(k, "$unset") ||
	       is(k, "$replaceRoot") || is(k, "$replaceWith");
}

bool facts_update_refused(const bson_iter_t *update)
{
	bson_iter_t c, st;
	if (!wire_iter_recurse(update, &c))
		return false;
	if (WIRE_ITER_HOLDS_ARRAY(update)) {
		while (wire_iter_next(&c))
			if (WIRE_ITER_HOLDS_DOCUMENT(&c) && wire_iter_recurse(&c, &st) &&
			    wire_iter_next(&st) && !update_stage_known(wire_iter_key(&st)))
				return true;
		return false;
	}
	if (!WIRE_ITER_HOLDS_DOCUMENT(update) || !wire_iter_next(&c) || wire_iter_key(&c)[0] != '$')
		return false; /* a replacement, or {} */
	do {
		if (!modifier_known(wire_iter_key(&c)))
			return true;
	} while (wire_iter_next(&c));
	return false;
}
