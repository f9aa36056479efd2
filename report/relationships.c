/* Relationships: pairs of collections read together, and for each the
 * data-modelling method's decision (embed, extended reference, reference)
 * with the numbers that decided it. relationships.h says what counts as a
 * client-side join and states the thresholds.
 *
 * A $lookup (or $graphLookup) pair is counted per aggregate that runs it;
 * its fan-out is the length of its output array in sampled replies. A
 * client-side pair is found per connection, from the requests and replies
 * in capture order: a read whose reply held N documents arms the
 * connection; keyed reads of other collections within the window are
 * counted against it; the chain closes at the next other read, at a gap
 * longer than the window, or at the end of the capture, and is judged
 * then. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/commands.h"
#include "protocol/key_set.h"
#include "protocol/keyed_filter.h"
#include "report/grow.h"
#include "report/html_table.h"
#include "report/relationships.h"
#include "report/sections.h"

typedef struct rel_child {
	size_t ns; /* row + 1 */
	char key[64];
	uint64_t singles, batches, elems;
	key_set values;    /* the values read: the fan-out counts distinct ones ... */
	bool placeholders; /* ... unless some were placeholders (rel_req) */
	bool sure;         /* a read by a value of the parent's (or none could tell) */
	int proj;          /* widest projection; -1 whole documents */
} rel_child;

typedef struct rel_conn {
	uint64_t instance;
	int64_t conn;
	/* a read waiting for its reply: it may be a parent */
	bool pending;
	int64_t pend_rid, pend_t;
	size_t pend_ns;
	uint64_t pend_shape;
	/* the armed parent */
	bool armed;
	size_t parent; /* row + 1 */
	uint64_t parent_shape;
	int64_t n, last_t;
	bool vals_known; /* the values its first documents held */
	value_filter vals;
	bool more; /* a getMore of the parent's cursor waits for its reply */
	int64_t more_rid;
	rel_child kids[REL_MAX_CHILDREN];
	size_t nkids;
	struct rel_conn *next;
} rel_conn;

#define REL_BUCKETS 4096
/* Every REL_SWEEP_EVERY requests, the connections with nothing open (no
 * chain within the window, no read waiting past REL_PENDING_US for its
 * reply) are judged and forgotten: the tracker holds about as many
 * connections as were busy lately, not every one a long capture saw. */
#define REL_SWEEP_EVERY 65536
#define REL_PENDING_US  (60 * 1000000LL)

struct rel_tracker {
	rel_conn *b[REL_BUCKETS];
	uint64_t requests;
};

rel_tracker *rel_tracker_new(void)
{
	return calloc(1, sizeof(rel_tracker));
}

void rel_tracker_free(rel_tracker *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < REL_BUCKETS; i++)
		for (rel_conn *c = r->b[i], *n; c; c = n) {
			n = c->next;
			free(c);
		}
	free(r);
}

static rel_conn *conn_get(rel_tracker *r, uint64_t instance, int64_t conn, bool make)
{
	uint64_t h = (instance ^ ((uint64_t)conn * 0x9e3779b97f4a7c15ull)) % REL_BUCKETS;
	for (rel_conn *c = r->b[h]; c; c = c->next)
		if (c->instance == instance && c->conn == conn)
			return c;
	if (!make)
		return NULL;
	rel_conn *c = calloc(1, sizeof *c);
	if (!c)
		abort();
	c->instance = instance;
	c->conn = conn;
	c->next = r->b[h];
	r->b[h] = c;
	return c;
}

/* The pair's row, made on first use. */
static model_rel *rel_get(model *m, const char *parent, const char *child, model_rel_via via,
                          const char *key)
{
	for (size_t i = 0; i < m->nrels; i++) {
		model_rel *x = &m->rels[i];
		if (x->via == via && !strcmp(x->parent, parent) && !strcmp(x->child, child) &&
		    !strcmp(x->key, key))
			return x;
	}
	REPORT_GROW(m->rels, m->nrels, m->caprels);
	model_rel *x = &m->rels[m->nrels++];
	memset(x, 0, sizeof *x);
	snprintf(x->parent, sizeof x->parent, "%s", parent);
	snprintf(x->child, sizeof x->child, "%s", child);
	snprintf(x->key, sizeof x->key, "%s", key);
	x->via = via;
	x->child_proj_fields = -2; /* none seen yet */
	return x;
}

static void rel_parent_shape(model_rel *x, uint64_t shape)
{
	for (size_t i = 0; i < x->nparent_shapes; i++)
		if (x->parent_shapes[i] == shape)
			return;
	if (x->nparent_shapes < sizeof x->parent_shapes / sizeof *x->parent_shapes)
		x->parent_shapes[x->nparent_shapes++] = shape;
}

/* ---- a read by one key ---- */

typedef struct keyed {
	char key[64];
	int64_t in; /* -1: one value; else the $in's length */
	key_set values;
} keyed;

/* Whether a find reads by one field: {f: value}, {f: {$eq: v}} or
 * {f: {$in: [...]}}, alone or with conditions beside it (as mode says;
 * protocol/keyed_filter.h), where f is _id or the first key of one of the
 * collection's indexes (the capture's snapshot). An aggregate that reads as
 * a find (keyed_aggregate_match) by its $match, as the live rule reads it. */
static bool read_by_key(const model_ns *n, const cmdview *v, bool find, keyed_mode mode, keyed *k)
{
	bson_iter_t it, f, op;
	uint32_t len;
	const uint8_t *doc;
	if (!bson_iter_init_find(&it, &v->body, find ? "filter" : "pipeline") ||
	    !(find ? BSON_ITER_HOLDS_DOCUMENT(&it) : BSON_ITER_HOLDS_ARRAY(&it)))
		return false;
	if (find) {
		bson_iter_document(&it, &len, &doc);
	} else {
		bson_iter_array(&it, &len, &doc);
		if (!(doc = keyed_aggregate_match(doc, len)))
			return false;
		memcpy(&len, doc, 4);
		len = BSON_UINT32_FROM_LE(len);
	}
	int at = keyed_filter_pick(doc, len, mode);
	if (at < 0)
		return false;
	keyed_walk w;
	const bson_iter_t *at_it = NULL;
	keyed_walk_init(&w, doc, len, mode);
	for (int i = 0; i <= at; i++)
		if (!keyed_walk_next(&w, &at_it))
			return false;
	f = *at_it;
	const char *key = bson_iter_key(&f);
	k->in = -1;
	key_set_clear(&k->values);
	if (key[0] == '$')
		return false;
	if (BSON_ITER_HOLDS_DOCUMENT(&f)) {
		if (!bson_iter_recurse(&f, &op) || !bson_iter_next(&op))
			return false;
		const char *o = bson_iter_key(&op);
		if (!strcmp(o, "$in") && BSON_ITER_HOLDS_ARRAY(&op)) {
			bson_iter_t e;
			k->in = 0;
			if (bson_iter_recurse(&op, &e))
				for (; bson_iter_next(&e); k->in++)
					key_set_add(&k->values, &e);
		} else if (strcmp(o, "$eq")) {
			return false;
		} else {
			key_set_add(&k->values, &op);
		}
		if (bson_iter_next(&op))
			return false; /* {$gte, $lt}: a range, not a key */
	} else if (BSON_ITER_HOLDS_ARRAY(&f)) {
		return false;
	} else {
		key_set_add(&k->values, &f);
	}
	bool indexed = !strcmp(key, "_id");
	for (size_t i = 0; !indexed && i < n->nindexes; i++)
		indexed = !strcmp(n->indexes[i].first, key);
	if (!indexed)
		return false;
	snprintf(k->key, sizeof k->key, "%s", key);
	return true;
}

/* ---- the chain ---- */

static void note_child(model_rel *x, const rel_child *k, uint64_t parent_shape, uint64_t fanout)
{
	x->occurrences++;
	rel_parent_shape(x, parent_shape);
	x->fanout_total += fanout;
	x->fanout_samples++;
	if ((int64_t)fanout > x->fanout_max)
		x->fanout_max = (int64_t)fanout;
	x->child_reads += k->singles + k->batches;
	if (k->proj < 0 || x->child_proj_fields == -2 ||
	    (x->child_proj_fields >= 0 && k->proj > x->child_proj_fields))
		x->child_proj_fields = k->proj;
}

/* The armed chain judged and closed. */
static void close_chain(model *m, rel_conn *c)
{
	for (size_t i = 0; c->armed && i < c->nkids; i++) {
		const rel_child *k = &c->kids[i];
		double n = (double)c->n;
		const char *parent = m->nss[c->parent - 1].ns, *child = m->nss[k->ns - 1].ns;
		if (!k->placeholders && key_set_count(&k->values) < REL_MIN_FANOUT)
			continue; /* one value read again and again: no fan-out */
		if (!k->sure)
			continue; /* no read by a value of the parent: close in time by chance */
		if (!k->batches && k->singles >= REL_MIN_FANOUT &&
		    (double)k->singles >= REL_EACH_LOW * n &&
		    (double)k->singles <= REL_EACH_HIGH * n)
			note_child(rel_get(m, parent, child, MODEL_REL_CLIENT_EACH, k->key), k,
			           c->parent_shape, k->singles);
		else if (!k->singles && k->batches && k->batches <= REL_MAX_IN_BATCHES && k->elems)
			note_child(rel_get(m, parent, child, MODEL_REL_CLIENT_IN, k->key), k,
			           c->parent_shape, k->elems);
	}
	c->armed = false;
	c->nkids = 0;
}

/* A keyed read of another collection within the window: one more child
 * read of the armed parent. False when it is not one. */
static bool child_read(model *m, rel_conn *c, const rel_req *q)
{
	keyed k;
	if (!c->armed || q->t - c->last_t > REL_WINDOW_US || q->ns == c->parent ||
	    (strcmp(q->cmd, "find") && strcmp(q->cmd, "aggregate")) ||
	    !read_by_key(&m->nss[q->ns - 1], q->v, q->cmd[0] == 'f', q->key_mode, &k))
		return false;
	bool sure = !c->vals_known || !q->vh; /* nothing to tell */
	for (uint32_t v = 0; !sure && v < q->nvh; v++)
		sure = !q->vh[v] || value_filter_has(&c->vals, q->vh[v]);
	if (!sure && c->vals.all)
		return false; /* by no value of the parent, all of whose are known */
	size_t i = 0;
	while (i < c->nkids && (c->kids[i].ns != q->ns || strcmp(c->kids[i].key, k.key)))
		i++;
	if (i == c->nkids) {
		if (i == REL_MAX_CHILDREN)
			return false;
		memset(&c->kids[i], 0, sizeof c->kids[i]);
		c->kids[i].ns = q->ns;
		c->kids[i].proj = -2;
		snprintf(c->kids[i].key, sizeof c->kids[i].key, "%s", k.key);
		c->nkids++;
	}
	rel_child *ch = &c->kids[i];
	ch->sure |= sure;
	bool opaque = q->placeholders;
	if (q->vh) { /* the values by their hashes, as the live rule keys them */
		key_set_clear(&k.values);
		opaque = false;
		for (uint32_t v = 0; v < q->nvh; v++) {
			if (q->vh[v])
				key_set_add_hash(&k.values, q->vh[v]);
			opaque |= !q->vh[v];
		}
	}
	key_set_union(&ch->values, &k.values);
	ch->placeholders |= opaque;
	if (k.in < 0) {
		ch->singles++;
	} else {
		ch->batches++;
		ch->elems += (uint64_t)k.in;
	}
	int p = q->proj;
	if (p < 0 || ch->proj == -2 || (ch->proj >= 0 && p > ch->proj))
		ch->proj = p;
	c->last_t = q->t;
	return true;
}

/* An aggregate's $lookup / $graphLookup stages: one pair each. */
static void lookups(model *m, const rel_req *q)
{
	bson_iter_t it, st, c, l;
	if (!bson_iter_init_find(&it, &q->v->body, "pipeline") || !bson_iter_recurse(&it, &st))
		return;
	while (bson_iter_next(&st)) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &c) ||
		    !bson_iter_next(&c) ||
		    (strcmp(bson_iter_key(&c), "$lookup") &&
		     strcmp(bson_iter_key(&c), "$graphLookup")) ||
		    !bson_iter_recurse(&c, &l))
			continue;
		const char *from = NULL, *key = "(pipeline)", *as = "";
		while (bson_iter_next(&l)) {
			const char *k = bson_iter_key(&l);
			if (!BSON_ITER_HOLDS_UTF8(&l))
				continue;
			if (!strcmp(k, "from"))
				from = bson_iter_utf8(&l, NULL);
			else if (!strcmp(k, "foreignField") || !strcmp(k, "connectToField"))
				key = bson_iter_utf8(&l, NULL);
			else if (!strcmp(k, "as"))
				as = bson_iter_utf8(&l, NULL);
		}
		if (!from)
			continue;
		char child[MODEL_NS_LEN];
		snprintf(child, sizeof child, "%s.%s", q->v->db ? q->v->db : "", from);
		model_rel *x = rel_get(m, m->nss[q->ns - 1].ns, child, MODEL_REL_LOOKUP, key);
		x->occurrences++;
		x->fanout_max = -1;
		x->child_proj_fields = -1;
		snprintf(x->as, sizeof x->as, "%s", as);
		rel_parent_shape(x, q->shape);
	}
}

static void sweep(rel_tracker *r, model *m, int64_t now)
{
	for (size_t i = 0; i < REL_BUCKETS; i++)
		for (rel_conn **pp = &r->b[i], *c; (c = *pp);) {
			if (c->armed && now - c->last_t > REL_WINDOW_US)
				close_chain(m, c);
			if (c->armed || (c->pending && now - c->pend_t <= REL_PENDING_US)) {
				pp = &c->next;
				continue;
			}
			*pp = c->next;
			free(c);
		}
}

/* A getMore of the armed parent's collection: its documents are the
 * parent's too (an application iterating a cursor reads each batch's
 * children before asking for the next). */
static void parent_more(model *m, rel_tracker *r, const rel_req *q)
{
	bson_iter_t it;
	rel_conn *c = conn_get(r, q->instance, q->conn, false);
	if (!c || !c->armed || q->t - c->last_t > REL_WINDOW_US ||
	    !bson_iter_init_find(&it, &q->v->body, "collection") || !BSON_ITER_HOLDS_UTF8(&it))
		return;
	const char *ns = m->nss[c->parent - 1].ns, *dot = strchr(ns, '.');
	if (!dot || strcmp(dot + 1, bson_iter_utf8(&it, NULL)) ||
	    strncmp(ns, q->v->db ? q->v->db : "", (size_t)(dot - ns)))
		return;
	c->more = true;
	c->more_rid = q->rid;
	c->last_t = q->t;
}

void rel_request(rel_tracker *r, model *m, const rel_req *q)
{
	if (++r->requests % REL_SWEEP_EVERY == 0)
		sweep(r, m, q->t);
	if (!strcmp(q->cmd, "getMore")) {
		parent_more(m, r, q);
		return;
	}
	bool find = !strcmp(q->cmd, "find"), agg = !strcmp(q->cmd, "aggregate");
	cmd_id id = cmd_find(q->cmd);
	if (cmd_changes(id)) {
		/* another operation's work: the chain ends, as the rule's does */
		rel_conn *c = conn_get(r, q->instance, q->conn, false);
		if (c) {
			close_chain(m, c);
			c->pending = false;
		}
		return;
	}
	if (!q->ns || (!find && !agg))
		return; /* count, distinct and the rest neither join nor break a chain */
	if (agg)
		lookups(m, q);
	rel_conn *c = conn_get(r, q->instance, q->conn, true);
	if (c->armed && q->t - c->last_t > REL_WINDOW_US)
		close_chain(m, c);
	if (child_read(m, c, q))
		return;
	close_chain(m, c);
	c->pending = true; /* a parent, if its reply holds documents enough */
	c->pend_t = q->t;
	c->pend_rid = q->rid;
	c->pend_ns = q->ns;
	c->pend_shape = q->shape;
}

void rel_reply(rel_tracker *r, model *m, uint64_t instance, int64_t conn, int64_t rt, int64_t t,
               int64_t n, const value_filter *vals)
{
	rel_conn *c = conn_get(r, instance, conn, false);
	(void)m;
	if (!c)
		return;
	if (c->armed && t > c->last_t)
		c->last_t = t; /* a child's reply: the next child read follows it */
	if (c->armed && c->more && c->more_rid == rt) {
		c->more = false;
		c->n += n > 0 ? n : 0;
		if (n > 0) /* documents whose values were not read */
			c->vals.all = false;
	}
	if (!c->pending || c->pend_rid != rt)
		return;
	c->pending = false;
	if (n < REL_MIN_FANOUT)
		return;
	c->armed = true;
	c->parent = c->pend_ns;
	c->parent_shape = c->pend_shape;
	c->n = n;
	c->last_t = t;
	c->more = false;
	c->nkids = 0;
	c->vals_known = vals != NULL;
	if (vals)
		c->vals = *vals;
}

/* ---- the advice ---- */

static void advise(model_rel *x)
{
	char *w = x->why;
	size_t cap = sizeof x->why;
	double per = x->rate > 0 ? 1 / x->rate : 0; /* per joint read */
	if (x->fanout_max > REL_UNBOUNDED_FANOUT) {
		x->advice = MODEL_ADVICE_REFERENCE;
		snprintf(w, cap,
		         "fan-out up to %" PRId64 " (over %d): unbounded, keep it referenced",
		         x->fanout_max, REL_UNBOUNDED_FANOUT);
	} else if (x->child_writes_s * per >= REL_WRITE_OFTEN) {
		x->advice = MODEL_ADVICE_REFERENCE;
		snprintf(
		    w, cap,
		    "the child changes often: %.2f writes/s against %.2f joint reads/s (%.2f per "
		    "read, at least %.2f)",
		    x->child_writes_s, x->rate, x->child_writes_s * per, REL_WRITE_OFTEN);
	} else if (x->child_solo_s * per >= REL_SOLO_OFTEN) {
		x->advice = MODEL_ADVICE_REFERENCE;
		snprintf(
		    w, cap,
		    "the child is read on its own: %.2f reads/s against %.2f joint reads/s (%.2f "
		    "per read, at least %.2f)",
		    x->child_solo_s, x->rate, x->child_solo_s * per, REL_SOLO_OFTEN);
	} else if (x->share >= REL_TOGETHER && x->child_writes_s * per <= REL_WRITE_RARE) {
		x->advice = MODEL_ADVICE_EMBED;
		snprintf(w, cap,
		         "read together on %.0f%% of the parent's reads (at least %.0f%%) and the "
		         "child changes rarely (%.3f writes per joint read, at most %.2f)",
		         x->share * 100, REL_TOGETHER * 100, x->child_writes_s * per,
		         REL_WRITE_RARE);
	} else if (x->share >= REL_OFTEN && x->child_proj_fields >= 0 &&
	           x->child_proj_fields <= REL_FEW_FIELDS) {
		x->advice = MODEL_ADVICE_EXTENDED_REFERENCE;
		snprintf(
		    w, cap,
		    "read together on %.0f%% of the parent's reads, the child changes sometimes "
		    "(%.3f writes per joint read) and only %d field%s of it are read: copy them "
		    "into the parent",
		    x->share * 100, x->child_writes_s * per, x->child_proj_fields,
		    x->child_proj_fields == 1 ? "" : "s");
	} else {
		x->advice = MODEL_ADVICE_REFERENCE;
		snprintf(w, cap,
		         "read together on %.0f%% of the parent's reads; %s: keep the reference "
		         "(one $in per page or a $lookup, not one read per document)",
		         x->share * 100,
		         x->share < REL_OFTEN ? "not often enough to copy the child"
		                              : "whole child documents are read");
	}
}

static uint64_t shape_count(const model *m, uint64_t hash)
{
	for (size_t i = 0; i < m->nshapes; i++)
		if (m->shapes[i].hash == hash)
			return m->shapes[i].count;
	return 0;
}

static const model_ns *ns_row(const model *m, const char *ns)
{
	for (size_t i = 0; i < m->nnss; i++)
		if (!strcmp(m->nss[i].ns, ns))
			return &m->nss[i];
	return NULL;
}

/* A $lookup's fan-out: its output array's lengths in sampled replies. */
static void lookup_fanout(const model *m, model_rel *x)
{
	const model_ns *p = ns_row(m, x->parent);
	for (size_t k = 0; p && k < p->narrays; k++) {
		const model_field *f = &p->arrays[k];
		if (strcmp(f->path, x->as) || !f->nsamples)
			continue;
		x->fanout_max = f->max_len;
		x->fanout_samples = f->nsamples;
		for (size_t s = 0; s < f->nsamples; s++)
			x->fanout_total += (uint64_t)f->sample_len[s];
	}
}

static int cmp_rel(const void *a, const void *b)
{
	const model_rel *x = a, *y = b;
	if (x->occurrences != y->occurrences)
		return x->occurrences > y->occurrences ? -1 : 1;
	int c = strcmp(x->parent, y->parent);
	return c ? c : strcmp(x->child, y->child);
}

void rel_finish(rel_tracker *r, model *m)
{
	for (size_t i = 0; r && i < REL_BUCKETS; i++)
		for (rel_conn *c = r->b[i]; c; c = c->next)
			close_chain(m, c);
	double secs = m->covered_s;
	for (size_t i = 0; i < m->nrels; i++) {
		model_rel *x = &m->rels[i];
		const model_ns *child = ns_row(m, x->child);
		uint64_t joined = 0;
		for (size_t k = 0; k < m->nrels; k++)
			if (m->rels[k].via != MODEL_REL_LOOKUP &&
			    !strcmp(m->rels[k].child, x->child))
				joined += m->rels[k].child_reads;
		for (size_t k = 0; k < x->nparent_shapes; k++)
			x->parent_reads += shape_count(m, x->parent_shapes[k]);
		if (x->via == MODEL_REL_LOOKUP)
			lookup_fanout(m, x);
		uint64_t solo = child && child->reads > joined ? child->reads - joined : 0;
		x->rate = secs > 0 ? (double)x->occurrences / secs : 0;
		x->share = x->parent_reads ? (double)x->occurrences / (double)x->parent_reads : 0;
		x->fanout_avg =
		    x->fanout_samples ? (double)x->fanout_total / (double)x->fanout_samples : 0;
		x->child_writes_s = secs > 0 && child ? (double)child->writes / secs : 0;
		x->child_solo_s = secs > 0 ? (double)solo / secs : 0;
		if (x->child_proj_fields == -2)
			x->child_proj_fields = -1;
		advise(x);
	}
	if (m->nrels > 1)
		qsort(m->rels, m->nrels, sizeof *m->rels, cmp_rel);
}

/* ---- the writers ---- */

static const char *const via_words[] = {
    [MODEL_REL_LOOKUP] = "$lookup",
    [MODEL_REL_CLIENT_EACH] = "client: one read per document (N+1)",
    [MODEL_REL_CLIENT_IN] = "client: $in batches",
};
static const char *const via_keys[] = {
    [MODEL_REL_LOOKUP] = "lookup",
    [MODEL_REL_CLIENT_EACH] = "client-each",
    [MODEL_REL_CLIENT_IN] = "client-in",
};
static const char *const advice_words[] = {
    [MODEL_ADVICE_EMBED] = "embed",
    [MODEL_ADVICE_EXTENDED_REFERENCE] = "extended reference",
    [MODEL_ADVICE_REFERENCE] = "reference",
};

static void fanout_text(text_buf *t, const model_rel *x)
{
	if (x->fanout_max < 0 || !x->fanout_samples)
		text_str(t, "not sampled");
	else
		text_printf(t, "%.1f avg, %" PRId64 " max", x->fanout_avg, x->fanout_max);
}

static void fields_text(text_buf *t, const model_rel *x)
{
	if (x->child_proj_fields < 0)
		text_str(t, "whole");
	else
		text_printf(t, "%d", x->child_proj_fields);
}

static const char THRESHOLDS[] =
    "Decided in this order: a fan-out over %d is unbounded (reference); the child changes "
    "often at %.2f writes or more per joint read (reference); it is read on its own at %.2f "
    "reads or more per joint read (reference); read together on %.0f%% or more of the "
    "parent's reads with at most %.2f child writes per joint read: embed; on %.0f%% or more "
    "with a projection of at most %d fields: extended reference; otherwise reference. A "
    "client-side join: a parent read of at least %d documents, then reads of another "
    "collection by one key within %d ms of each other.";

static void thresholds(text_buf *t)
{
	text_printf(t, THRESHOLDS, REL_UNBOUNDED_FANOUT, REL_WRITE_OFTEN, REL_SOLO_OFTEN,
	            REL_TOGETHER * 100, REL_WRITE_RARE, REL_OFTEN * 100, REL_FEW_FIELDS,
	            REL_MIN_FANOUT, REL_WINDOW_US / 1000);
}

void report_rels_md(out_t *o, const model *m)
{
	text_str(&o->t, "\n## Relationships\n\n");
	if (!m->nrels) {
		text_str(&o->t, "No collections were read together.\n");
		out_flush(o);
		return;
	}
	text_str(&o->t, "| parent | child | how | by | together/s | share of parent reads | "
	                "fan-out | child writes/s | child alone/s | child fields | advice | "
	                "why |\n|---|---|---|---|---:|---:|---|---:|---:|---:|---|---|\n");
	for (size_t i = 0; i < m->nrels; i++) {
		const model_rel *x = &m->rels[i];
		text_str(&o->t, "| ");
		out_md_code(&o->t, x->parent, 100, true);
		text_str(&o->t, " | ");
		out_md_code(&o->t, x->child, 100, true);
		text_printf(&o->t, " | %s | ", via_words[x->via]);
		out_md_code(&o->t, x->key, 64, true);
		text_printf(&o->t, " | %.2f | %.0f%% | ", x->rate, x->share * 100);
		fanout_text(&o->t, x);
		text_printf(&o->t, " | %.2f | %.2f | ", x->child_writes_s, x->child_solo_s);
		fields_text(&o->t, x);
		text_printf(&o->t, " | **%s** | ", advice_words[x->advice]);
		out_md_text(&o->t, x->why);
		text_str(&o->t, " |\n");
		out_flush(o);
	}
	text_char(&o->t, '\n');
	thresholds(&o->t);
	text_char(&o->t, '\n');
	out_flush(o);
}

static const html_col rel_cols[] = {
    {"parent", false},
    {"child", false},
    {"read together", false},
    {"together/s", true},
    {"share of parent reads", true},
    {"fan-out", false},
    {"child writes/s", true},
    {"child alone/s", true},
    {"child fields", true},
    {"advice", false},
};

static const char *const via_short[] = {
    [MODEL_REL_LOOKUP] = "$lookup on",
    [MODEL_REL_CLIENT_EACH] = "client, N+1 by",
    [MODEL_REL_CLIENT_IN] = "client, $in by",
};

/* One pair: its numbers in a row, the evidence in words under it. */
static void rel_html(out_t *o, const model_rel *x)
{
	text_str(&o->t, "<tr class=\"pair\" data-ns=\"");
	text_html(&o->t, x->parent);
	text_str(&o->t, "\"><td class=\"nsc\">");
	text_html(&o->t, x->parent);
	text_str(&o->t, "</td><td class=\"nsc\">");
	text_html(&o->t, x->child);
	text_printf(&o->t, "</td><td>%s <code>", via_short[x->via]);
	text_html(&o->t, x->key);
	text_str(&o->t, "</code></td>");
	html_table_td_fixed(&o->t, x->rate, 2);
	html_table_td(&o->t, "n");
	text_printf(&o->t, "%.0f%%", x->share * 100);
	html_table_td_end(&o->t);
	html_table_td(&o->t, NULL);
	fanout_text(&o->t, x);
	html_table_td_end(&o->t);
	html_table_td_fixed(&o->t, x->child_writes_s, 2);
	html_table_td_fixed(&o->t, x->child_solo_s, 2);
	html_table_td(&o->t, "n");
	fields_text(&o->t, x);
	html_table_td_end(&o->t);
	text_printf(&o->t, "<td class=\"advice\"><b>%s</b></td></tr><tr class=\"why\" data-ns=\"",
	            advice_words[x->advice]);
	text_html(&o->t, x->parent);
	text_printf(&o->t, "\"><td colspan=\"%zu\">Why: ", sizeof rel_cols / sizeof *rel_cols);
	text_html(&o->t, x->why);
	text_str(&o->t, ".</td></tr>");
	out_flush(o);
}

void report_rels_html(out_t *o, const model *m)
{
	text_str(&o->t, "<h3 id=\"relationships\">Relationships</h3><p class=\"muted\">Pairs of "
	                "collections read together, by a $lookup or on the client, and the "
	                "data-modelling method's decision for each. ");
	thresholds(&o->t);
	text_str(&o->t, "</p>");
	if (!m->nrels) {
		text_str(&o->t, "<p>No collections were read together.</p>");
		out_flush(o);
		return;
	}
	html_table_open(&o->t, "id=\"rel-table\"", rel_cols, sizeof rel_cols / sizeof *rel_cols);
	for (size_t i = 0; i < m->nrels; i++)
		rel_html(o, &m->rels[i]);
	html_table_close(&o->t);
	out_flush(o);
}

void report_rels_json(out_t *o, const model *m)
{
	text_printf(&o->t,
	            "\"relationships\":{\"params\":{\"windowMs\":%d,\"minFanout\":%d,"
	            "\"eachLow\":%.2f,\"eachHigh\":%.2f,\"maxInBatches\":%d,"
	            "\"unboundedFanout\":%d,\"writeOften\":%.2f,\"writeRare\":%.2f,"
	            "\"soloOften\":%.2f,\"together\":%.2f,\"often\":%.2f,\"fewFields\":%d},"
	            "\"pairs\":[",
	            REL_WINDOW_US / 1000, REL_MIN_FANOUT, REL_EACH_LOW, REL_EACH_HIGH,
	            REL_MAX_IN_BATCHES, REL_UNBOUNDED_FANOUT, REL_WRITE_OFTEN, REL_WRITE_RARE,
	            REL_SOLO_OFTEN, REL_TOGETHER, REL_OFTEN, REL_FEW_FIELDS);
	for (size_t i = 0; i < m->nrels; i++) {
		const model_rel *x = &m->rels[i];
		text_str(&o->t, i ? ",{\"parent\":" : "{\"parent\":");
		out_json_str(&o->t, x->parent);
		text_str(&o->t, ",\"child\":");
		out_json_str(&o->t, x->child);
		text_printf(&o->t, ",\"via\":\"%s\",\"key\":", via_keys[x->via]);
		out_json_str(&o->t, x->key);
		text_printf(&o->t,
		            ",\"occurrences\":%" PRIu64
		            ",\"perSecond\":%.3f,\"parentReads\":%" PRIu64
		            ",\"shareOfParentReads\":%.3f,\"fanoutAvg\":",
		            x->occurrences, x->rate, x->parent_reads, x->share);
		if (x->fanout_samples && x->fanout_max >= 0)
			text_printf(&o->t, "%.3f,\"fanoutMax\":%" PRId64, x->fanout_avg,
			            x->fanout_max);
		else
			text_str(&o->t, "null,\"fanoutMax\":null");
		text_printf(&o->t,
		            ",\"childWritesPerSecond\":%.3f,\"childSoloReadsPerSecond\":%.3f,"
		            "\"childReads\":%" PRIu64 ",\"childFieldsRead\":%d,\"advice\":\"%s\","
		            "\"why\":",
		            x->child_writes_s, x->child_solo_s, x->child_reads,
		            x->child_proj_fields, advice_words[x->advice]);
		out_json_str(&o->t, x->why);
		text_char(&o->t, '}');
		out_flush(o);
	}
	text_str(&o->t, "]},");
	out_flush(o);
}
