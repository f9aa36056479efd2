/* A connection's reads as the rules that follow them see them
 * (engine.h, engine_conn_track; rule_api.h, rule_checks.conn_read): each
 * request described once (rule_read: its namespace, whether it reads by
 * one field's value or values, the structure of its filter), given to the
 * rules that follow the connection, and their findings reported at the
 * request that completes one.
 *
 * Cost: engine_analyze calls conn_track_read on every request when such a
 * rule is not off: the command's id (which the engine needs anyway), its
 * collection from the view's first key, and the rule's few stores; a
 * find's filter is read only when the rule asks (client-side-join: only
 * within windowMS of a read that returned enough documents). Nothing is
 * allocated after a connection's first request. */
#include <stdlib.h>
#include <string.h>

#include "analyzers/engine/body.h"
#include "analyzers/engine/engine_int.h"
#include "protocol/keyed_filter.h"
#include "protocol/wire_iter.h"

struct engine_conn_track {
	uint64_t gen; /* of the engine whose layout it has */
	size_t size;  /* bytes of area */
	/* The last request told was no read: the rules know (a run of them
	 * is told once, and their replies not at all) ... */
	bool idle;
	/* ... and it was a write or a schema change: so a run of no reads is
	 * told once more at its first change (rule_read.changes) */
	bool changed;
	/* The last request was a read of at most one document (a find with
	 * limit 1, or by an _id value): its reply's count is no news. */
	bool point;
	/* The request that made the connection's repeat template was such a
	 * read: so is every request the template judges. */
	bool template_point;
	_Alignas(16) unsigned char area[];
};

#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

void conn_track_layout(engine *e)
{
	e->conn_rules = 0;
	e->nconn = 0;
	e->conn_size = 0;
	for (int r = 0; r < RULE_COUNT; r++) {
		const rule_checks *k = rule_table[r]->checks;
		const rule_config *rc = &e->cfg.rules[r];
		bool on = rc->action != RULE_OFF;
		for (size_t i = 0; i < rc->nscopes && i < RULE_MAX_SCOPES; i++)
			on |= rc->scopes[i].action != RULE_OFF;
		if (!k->conn_read || !k->conn_size || !on)
			continue;
		e->conn_rules |= 1u << r;
		e->conn_list[e->nconn++] = (rule_id)r;
		e->conn_off[r] = e->conn_size;
		e->conn_size += ALIGN16(k->conn_size);
	}
}

void engine_conn_track_free(engine_conn_track *t)
{
	free(t);
}

engine_conn_track *conn_track_of(engine *e, const request_ctx *rc)
{
	if (!e->conn_rules || !rc || !rc->track || rc->late)
		return NULL;
	engine_conn_track *t = *rc->track;
	if (t && t->gen == e->gen)
		return t;
	if (!t || t->size < e->conn_size) {
		engine_conn_track *n = realloc(t, sizeof(*t) + e->conn_size);
		if (!n)
			return NULL; /* the old one stays the slot's, to be freed */
		*rc->track = t = n;
		t->size = e->conn_size;
	}
	t->gen = e->gen;
	t->idle = false;
	t->point = t->template_point = false;
	memset(t->area, 0, t->size);
	return t;
}

void engine_note_reply(engine *e, engine_conn_track *t, int64_t ndocs, const value_filter *vals,
                       int64_t now_ms)
{
	if (!e || !t || t->gen != e->gen || t->idle)
		return;
	for (unsigned i = 0; i < e->nconn; i++) {
		rule_id r = e->conn_list[i];
		rule_table[r]->checks->conn_reply(t->area + e->conn_off[r], &e->cfg.rules[r], ndocs,
		                                  vals, now_ms);
	}
}

/* ---- describing a request ---- */

/* The filter's structure, words at a time (as verdict.c's shape-hash key). */
static uint64_t mix_str(uint64_t h, const char *s)
{
	return hash_words(h, s, strlen(s));
}

/* How a filter's values are read (rule_read_filter): each one counted and
 * kept in keys, or, with within, only those a parent's first documents
 * may have held; each one's hash (value_filter.h) taken from given (a
 * capture's, in the filter's order) or made here, and written to out when
 * asked (engine_value_hashes). A hash of 0: a value no filter holds
 * (value_checkable), taken as maybe anyone's. */
typedef struct value_reader {
	key_set *keys;
	const value_filter *within;
	const uint64_t *given; /* NULL: hashed here */
	uint32_t ngiven;
	uint64_t *out;
	uint32_t max; /* out's room */
	uint32_t at;  /* values read */
	bool opaque;  /* a given hash was 0 or missing: that value is not known */
} value_reader;

/* A value read: into keys (by its hash where it has one, so that a
 * replay given the hashes counts the same distinct values) and counted
 * (1), unless within says it cannot be one of its values (0). */
static uint32_t read_value(const bson_iter_t *it, value_reader *vr)
{
	uint32_t i = vr->at++;
	uint64_t h;
	if (vr->given) {
		h = i < vr->ngiven ? vr->given[i] : 0;
		vr->opaque |= !h;
	} else {
		uint8_t t = it->raw[it->type];
		size_t n = it->next_off - it->d1;
		h = value_checkable(t, n) ? value_hash(t, it->raw + it->d1, n) : 0;
	}
	if (vr->out && i < vr->max)
		vr->out[i] = h;
	if (vr->within && h && !value_filter_has(vr->within, h))
		return 0;
	if (h)
		key_set_add_hash(vr->keys, h);
	else
		key_set_add(vr->keys, it);
	return 1;
}

/* A value an equality reads: anything but a document of operators or a
 * regex. An operator document {$eq: v} is one too; {$in: [...]} is
 * KEYED_IN; any other operator is a query. values: the values read
 * (value_reader). */
static rule_read_kind value_kind(const bson_iter_t *it, uint32_t *values, uint64_t *key,
                                 value_reader *vr)
{
	bson_iter_t op;
	if (WIRE_ITER_HOLDS_REGEX(it))
		return RULE_READ_QUERY;
	if (!WIRE_ITER_HOLDS_DOCUMENT(it) || !wire_iter_recurse(it, &op) || !wire_iter_next(&op) ||
	    wire_iter_key(&op)[0] != '$') {
		/* a value, {k: {}} (an empty document), or an embedded document */
		*values = read_value(it, vr);
		return RULE_READ_KEYED;
	}
	const char *name = wire_iter_key(&op);
	*key = mix_str(*key, name);
	rule_read_kind k = RULE_READ_QUERY;
	if (strcmp(name, "$eq") == 0) {
		*values = read_value(&op, vr);
		k = RULE_READ_KEYED;
	} else if (strcmp(name, "$in") == 0 && WIRE_ITER_HOLDS_ARRAY(&op)) {
		bson_iter_t a;
		uint32_t n = 0;
		if (wire_iter_recurse(&op, &a))
			while (wire_iter_next(&a))
				n += read_value(&a, vr);
		*values = n;
		k = RULE_READ_KEYED_IN;
	}
	while (wire_iter_next(&op)) { /* another operator: {$in: [...], $ne: x} */
		*key = mix_str(*key, wire_iter_key(&op));
		k = RULE_READ_QUERY;
	}
	return k;
}

/* A condition beside the key (or of a filter with none): its operators
 * into key, never its values. */
static void beside_key(const bson_iter_t *it, uint64_t *key)
{
	bson_iter_t op;
	if (!WIRE_ITER_HOLDS_DOCUMENT(it) || !wire_iter_recurse(it, &op))
		return;
	while (wire_iter_next(&op) && wire_iter_key(&op)[0] == '$')
		*key = mix_str(*key, wire_iter_key(&op));
}

/* The value of the body's top-level key `name` of type `type` (the view's
 * keys, cmdview.h: no walk), or NULL. */
static const uint8_t *top_value(const cmdview *v, const char *name, uint32_t n, bson_type_t type)
{
	size_t top = v->ntop < CMDVIEW_TOP_KEYS ? v->ntop : CMDVIEW_TOP_KEYS;
	for (size_t i = 1; i < top; i++)
		if (v->top_lens[i] == n && memcmp(v->top_keys[i], name, n) == 0)
			return (uint8_t)v->top_keys[i][-1] == type
			           ? (const uint8_t *)v->top_keys[i] + n + 1
			           : NULL;
	return NULL;
}

static uint32_t le32(const uint8_t *p)
{
	uint32_t n;
	memcpy(&n, p, 4);
	return BSON_UINT32_FROM_LE(n);
}

/* The $match of an aggregate that reads as a find (keyed_filter.h), or
 * NULL. */
static const uint8_t *aggregate_match(const cmdview *v)
{
	const uint8_t *p = top_value(v, "pipeline", 8, BSON_TYPE_ARRAY);
	return p ? keyed_aggregate_match(p, le32(p)) : NULL; /* validated with the body */
}

/* Whether r's values can be looked up in a parent's: by the hashes a
 * capture kept, or hashed here from values that are not placeholders
 * (never in a replay, whose salt is not the live process's). */
static bool values_checkable(const rule_read *r)
{
	return r->hashes || (r->values_known && !r->hashes_only);
}

/* A find's filter (or the $match of an aggregate that reads as one), one
 * field read by its value or values, or another query; key gets its field
 * names and operators, vr its values. */
static void read_filter(const rule_read *r, value_reader *vr, rule_read_filter_facts *f)
{
	f->kind = RULE_READ_QUERY;
	f->values = 0;
	f->key = 0;
	f->field = NULL;
	f->values_known = r->values_known;
	f->checkable = values_checkable(r);
	key_set_clear(&f->keys);
	const uint8_t *doc = r->find ? top_value(r->view, "filter", 6, BSON_TYPE_DOCUMENT)
	                             : aggregate_match(r->view);
	if (!doc)
		return; /* no filter (every document), or another pipeline */
	keyed_walk w;
	const bson_iter_t *it;
	keyed_walk_init(&w, doc, le32(doc), r->key_mode); /* validated with the body */
	if (!keyed_walk_next(&w, &it))
		return; /* {}: every document */
	/* the key's field: the only one, or one of several (a $and's too) */
	bson_iter_t more = w.top;
	int at = 0;
	if (w.in_and || wire_iter_next(&more))
		at = keyed_filter_pick(doc, le32(doc), r->key_mode);
	const char *field = NULL;
	uint32_t values = 1;
	rule_read_kind k = RULE_READ_QUERY;
	int i = 0;
	do {
		const char *name = wire_iter_key(it);
		f->key = mix_str(f->key, name);
		/* an operator ($or, $nor, $expr, $comment, $where, $jsonSchema,
		 * a $and not walked, ...) reads by no one field's value */
		if (i++ != at || name[0] == '$') {
			beside_key(it, &f->key);
			continue;
		}
		field = name;
		k = value_kind(it, &values, &f->key, vr);
	} while (keyed_walk_next(&w, &it));
	f->kind = k;
	if (k == RULE_READ_KEYED || k == RULE_READ_KEYED_IN) {
		f->values = values;
		f->field = field;
	}
	/* a replay's placeholders are known by the hashes the capture kept */
	f->values_known = r->values_known || (vr->given && !vr->opaque);
}

/* rule_api.h */
void rule_read_filter(const rule_read *r, const value_filter *within, rule_read_filter_facts *f)
{
	value_reader vr = {.keys = &f->keys, .given = r->hashes, .ngiven = r->nhashes};
	if (values_checkable(r))
		vr.within = within;
	read_filter(r, &vr, f);
}

/* What v (command id) is as a read: its collection from the view's first
 * key, a getMore's from its "collection"; the filter is read only when a
 * rule asks. */
static void describe(const cmdview *v, cmd_id id, rule_read *r)
{
	r->kind = RULE_READ_NONE;
	r->db = NULL;
	r->changes = cmd_changes(id);
	if ((id != CMD_FIND && id != CMD_AGGREGATE && id != CMD_GET_MORE) || !v->db || !v->ntop)
		return;
	const uint8_t *coll;
	if (id == CMD_GET_MORE)
		coll = top_value(v, "collection", 10, BSON_TYPE_UTF8);
	else
		coll = (uint8_t)v->top_keys[0][-1] == BSON_TYPE_UTF8
		           ? (const uint8_t *)v->top_keys[0] + v->top_lens[0] + 1
		           : NULL;
	if (!coll || (id == CMD_AGGREGATE && top_value(v, "explain", 7, BSON_TYPE_BOOL)))
		return; /* db-wide, or explained: runs nothing */
	r->kind = id == CMD_GET_MORE ? RULE_READ_MORE : RULE_READ_QUERY;
	r->find = id == CMD_FIND;
	r->db = v->db;
	r->coll = (const char *)coll + 4;
	r->coll_len = le32(coll) - 1; /* its length counts the NUL */
	r->view = v;
}

/* A find that returns at most one document: limit 1 (find_one), or a
 * filter whose first member is _id equal to a value. One pass over the
 * view's top keys: no walk. */
static bool point_read(const cmdview *v)
{
	size_t top = v->ntop < CMDVIEW_TOP_KEYS ? v->ntop : CMDVIEW_TOP_KEYS;
	for (size_t i = 1; i < top; i++) {
		const char *k = v->top_keys[i];
		uint8_t type = (uint8_t)k[-1];
		const uint8_t *p = (const uint8_t *)k + v->top_lens[i] + 1;
		if (v->top_lens[i] == 5 && memcmp(k, "limit", 5) == 0) {
			if ((type == BSON_TYPE_INT32 || type == BSON_TYPE_INT64) && le32(p) == 1 &&
			    (type == BSON_TYPE_INT32 || le32(p + 4) == 0))
				return true;
		} else if (v->top_lens[i] == 6 && memcmp(k, "filter", 6) == 0 &&
		           type == BSON_TYPE_DOCUMENT && le32(p) >= 5 + 1 + 4 + 1) {
			uint8_t t = p[4];
			if (memcmp(p + 5, "_id", 4) == 0 && t != BSON_TYPE_DOCUMENT &&
			    t != BSON_TYPE_ARRAY && t != BSON_TYPE_REGEX && t != BSON_TYPE_EOD)
				return true;
		}
	}
	return false;
}

/* conn_track_repeat_point's body, for its two callers: each is called
 * from one place, and LTO inlines each whole there. */
static inline bool repeat_point(engine *e, engine_conn_track *t, int64_t now_ms)
{
	if (!t->template_point)
		return false;
	for (unsigned i = 0; i < e->nconn; i++) {
		rule_id rr = e->conn_list[i];
		const rule_checks *k = rule_table[rr]->checks;
		if (!k->conn_point_wanted ||
		    k->conn_point_wanted(t->area + e->conn_off[rr], &e->cfg.rules[rr], now_ms))
			return false;
	}
	t->point = true;
	t->idle = false;
	return true;
}

bool conn_track_repeat_point(engine *e, engine_conn_track *t, int64_t now_ms)
{
	return repeat_point(e, t, now_ms);
}

bool conn_track_point_again(engine *e, const request_ctx *rc)
{
	if (!e->conn_rules || !rc->track || rc->late)
		return true; /* conn_track_of: no track */
	engine_conn_track *t = *rc->track;
	/* one of another generation conn_track_of would start anew */
	return t && t->gen == e->gen && repeat_point(e, t, rc->now_ms);
}

void conn_track_template_set(engine_conn_track *t)
{
	t->template_point = t->point;
}

bool engine_track_wants_count(const engine_conn_track *t)
{
	return t && !t->idle && !t->point;
}

uint32_t engine_value_hashes(const cmdview *v, uint64_t *out, uint32_t max)
{
	rule_read r;
	rule_read_filter_facts f;
	describe(v, cmd_find(v->name), &r);
	if (r.kind != RULE_READ_QUERY)
		return 0;
	r.values_known = true;
	r.hashes_only = false;
	r.key_mode = KEYED_FLAT;
	r.hashes = NULL;
	value_reader vr = {.keys = &f.keys, .out = out, .max = max};
	read_filter(&r, &vr, &f);
	if (f.kind != RULE_READ_KEYED && f.kind != RULE_READ_KEYED_IN)
		return 0;
	return vr.at < max ? vr.at : max;
}

uint32_t conn_track_read(engine *e, engine_conn_track *t, const cmdview *v, cmd_id id,
                         const request_ctx *rc)
{
	rule_read r;
	int64_t now_ms = rc->now_ms;
	describe(v, id, &r);
	r.values_known = !rc->placeholders;
	r.hashes = rc->value_hashes;
	r.nhashes = rc->nvalue_hashes;
	r.hashes_only = rc->hashes_only;
	r.key_mode = rc->key_mode;
	t->point = r.kind == RULE_READ_QUERY && r.find && point_read(v);
	if (r.kind == RULE_READ_NONE && t->idle && (!r.changes || t->changed))
		return 0;
	t->idle = r.kind == RULE_READ_NONE;
	t->changed = r.changes;
	uint32_t fired = 0;
	for (unsigned i = 0; i < e->nconn; i++) {
		rule_id rr = e->conn_list[i];
		const rule_checks *k = rule_table[rr]->checks;
		void *conn = t->area + e->conn_off[rr];
		if (t->point && k->conn_point_wanted &&
		    !k->conn_point_wanted(conn, &e->cfg.rules[rr], now_ms))
			continue; /* a lookup by _id with nothing under way: the common read */
		if (k->conn_read(conn, &e->cfg.rules[rr], e->state[rr], &r, now_ms))
			fired |= 1u << rr;
	}
	return fired;
}

/* ---- reporting ---- */

/* The finding's site: the request's namespace, each rule's action there
 * (a block taken as dry-run: a read that completes a sequence of reads is
 * harmless alone), and its shape as findings on it show it. */
__attribute__((noinline)) void conn_track_report(rule_ctx *ax, engine_conn_track *t,
                                                 const cmdview *v, uint32_t rules)
{
	engine *e = ax->e;
	const char *coll = cmdview_coll(v);
	const command_def *c = commands_find(v->name);
	cmd_body b;
	if (!coll || !c || !v->db)
		return;
	body_init(&b, v->db, coll);
	if (!body_walk(&b, &v->body, c->keys))
		return;
	char ns[256];
	ns_join(ns, sizeof(ns), v->db, coll);
	const char *app = ax->rc && ax->rc->app_name ? ax->rc->app_name : "";
	rule_action act[RULE_COUNT];
	uint8_t sample[RULE_COUNT];
	for (int r = 0; r < RULE_COUNT; r++) {
		act[r] = RULE_OFF;
		sample[r] = 0;
		if (!(rules >> r & 1))
			continue;
		act[r] =
		    e->scoped ? rule_effective(&e->cfg.rules[r], ns, app, &sample[r]) : e->act[r];
		if (act[r] == RULE_BLOCK)
			act[r] = RULE_DRY_RUN;
	}
	shape_spec spec = {command_name(c), coll, false, b.parts, b.n};
	rule_site s = {v->db, coll, ns, act, sample, &spec, NULL, NULL, 0, NULL, NULL, NULL};
	for (int r = 0; r < RULE_COUNT; r++) {
		const rule_checks *k = rule_table[r]->checks;
		const void *facts = t->area + e->conn_off[r];
		if (act[r] == RULE_OFF)
			continue;
		if (!k->conn_hash) {
			rule_report(ax, &s, (rule_id)r, facts);
			continue;
		}
		char shape[SHAPE_BUF_LEN];
		uint64_t h = rule_shape_redacted(ax, &s, shape);
		ax->own_hash = h;
		rule_report_shaped(ax, &s, (rule_id)r, facts, shape, k->conn_hash(facts, h));
		ax->own_hash = 0;
	}
}
