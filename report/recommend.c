/* One recommendation per collection: recommend.h says what, and states
 * the merge rule. Index fixes come from findings whose suggestion is a
 * createIndex command (an ESR key, or an index with a collation); every
 * other finding asks for a design change, named by the pattern its rule
 * gives (rules.h, design_pattern). */
#include "report/recommend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/planner/esr.h"
#include "analyzers/planner/query_preds.h"
#include "protocol/commands.h"

/* ---- the merge rule ---- */

static bool has_field(const rec_key *k, size_t from, size_t n, const char *f)
{
	for (size_t i = from; i < from + n; i++)
		if (!strcmp(k->field[i], f))
			return true;
	return false;
}

/* ix[from, from + n) holds the fields of s[from, from + n), in any order
 * (a key names each field once, so containment one way is enough). */
static bool same_set(const rec_key *ix, const rec_key *s, size_t from, size_t n)
{
	for (size_t i = from; i < from + n; i++)
		if (!has_field(ix, from, n, s->field[i]))
			return false;
	return true;
}

bool rec_key_serves(const rec_key *ix, const rec_key *s)
{
	size_t e = s->neq, so = s->nsort;
	if (ix->n < s->n || e + so > s->n || !same_set(ix, s, 0, e))
		return false;
	bool fwd = true, back = true;
	for (size_t i = e; i < e + so; i++) {
		if (strcmp(ix->field[i], s->field[i]))
			return false;
		fwd = fwd && ix->dir[i] == s->dir[i];
		back = back && ix->dir[i] == -s->dir[i];
	}
	return (fwd || back) && same_set(ix, s, e + so, s->n - e - so);
}

bool rec_key_is_prefix(const rec_key *a, const rec_key *b)
{
	if (a->n == 0 || a->n > b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->field[i], b->field[i]) || a->dir[i] != b->dir[i])
			return false;
	return true;
}

/* Index g's fields with shape s's equality fields moved to the front: kept
 * when it still serves every shape g serves, and s. */
static bool try_front(rec_key *g, size_t gi, const rec_key *shapes, const size_t *group, size_t n,
                      const rec_key *s)
{
	static rec_key c; /* 4 KiB: off the stack; the report is one thread */
	if (s->neq == 0)
		return false;
	for (size_t i = 0; i < g->n; i++)
		if (g->dir[i] == ESR_DIR_2D)
			return false; /* a 2d key must lead */
	c.n = 0;
	for (size_t i = 0; i < s->neq; i++) {
		snprintf(c.field[c.n], sizeof c.field[0], "%s", s->field[i]);
		c.dir[c.n++] = 1;
	}
	for (size_t i = 0; i < g->n; i++)
		if (!has_field(s, 0, s->neq, g->field[i])) {
			if (c.n == REC_KEY_MAX)
				return false;
			snprintf(c.field[c.n], sizeof c.field[0], "%s", g->field[i]);
			c.dir[c.n++] = g->dir[i];
		}
	if (!rec_key_serves(&c, s))
		return false;
	for (size_t j = 0; j < n; j++)
		if (group[j] == gi && !rec_key_serves(&c, &shapes[j]))
			return false;
	c.neq = c.nsort = 0;
	*g = c;
	return true;
}

size_t rec_merge(const rec_key *shapes, size_t n, rec_key *keys, size_t *group)
{
	size_t *order = malloc((n ? n : 1) * sizeof *order);
	size_t ng = 0;
	if (!order)
		abort();
	for (size_t i = 0; i < n; i++) {
		order[i] = i;
		group[i] = (size_t)-1;
	}
	for (size_t i = 1; i < n; i++) /* stable: longest first, else the caller's order */
		for (size_t j = i; j > 0 && shapes[order[j]].n > shapes[order[j - 1]].n; j--) {
			size_t t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (size_t k = 0; k < n; k++) {
		const rec_key *s = &shapes[order[k]];
		size_t g = 0;
		while (g < ng && !rec_key_serves(&keys[g], s))
			g++;
		if (g == ng) {
			g = 0;
			while (g < ng && !try_front(&keys[g], g, shapes, group, n, s))
				g++;
		}
		if (g == ng) {
			keys[ng] = *s;
			keys[ng].neq = keys[ng].nsort = 0;
			ng++;
		}
		group[order[k]] = g;
	}
	free(order);
	return ng;
}

/* ---- reading a command back ---- */

/* The end of the JSON string or document at p (just past it), or NULL. */
static const char *json_end(const char *p)
{
	int depth = 0;
	bool str = false;
	for (; *p; p++) {
		if (str) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				str = false;
			else
				continue;
			if (!str && depth == 0)
				return p + 1;
		} else if (*p == '"') {
			str = true;
		} else if (*p == '{') {
			depth++;
		} else if (*p == '}') {
			if (--depth == 0)
				return p + 1;
		}
	}
	return NULL;
}

/* The JSON string at *p into out; *p moves past it. */
static bool take_str(const char **p, char *out, size_t cap)
{
	const char *e = **p == '"' ? json_end(*p) : NULL;
	char buf[512];
	bson_iter_t it;
	if (!e || (size_t)(e - *p) + 8 > sizeof buf)
		return false;
	snprintf(buf, sizeof buf, "{\"s\":%.*s}", (int)(e - *p), *p);
	bson_t *b = bson_new_from_json((const uint8_t *)buf, -1, NULL);
	bool ok = b && bson_iter_init_find(&it, b, "s") && BSON_ITER_HOLDS_UTF8(&it);
	if (ok)
		snprintf(out, cap, "%s", bson_iter_utf8(&it, NULL));
	bson_destroy(b);
	*p = e;
	return ok;
}

/* A key pattern document into k (fields with 1/-1, or the geo kinds a
 * suggestion names: "2dsphere", "2d"). */
static bool key_from_doc(const bson_t *doc, rec_key *k)
{
	bson_iter_t it;
	k->n = k->neq = 0;
	if (!bson_iter_init(&it, doc))
		return false;
	while (bson_iter_next(&it)) {
		if (k->n == REC_KEY_MAX)
			return false;
		int dir;
		if (BSON_ITER_HOLDS_NUMBER(&it))
			dir = bson_iter_as_double(&it) < 0 ? -1 : 1;
		else if (BSON_ITER_HOLDS_UTF8(&it) &&
		         !strcmp(bson_iter_utf8(&it, NULL), "2dsphere"))
			dir = ESR_DIR_2DSPHERE;
		else if (BSON_ITER_HOLDS_UTF8(&it) && !strcmp(bson_iter_utf8(&it, NULL), "2d"))
			dir = ESR_DIR_2D;
		else
			return false;
		snprintf(k->field[k->n], sizeof k->field[0], "%s", bson_iter_key(&it));
		k->dir[k->n++] = dir;
	}
	k->nsort = k->n;
	return k->n > 0;
}

static bool key_from_json(const char *json, size_t len, rec_key *k)
{
	bson_t *b = bson_new_from_json((const uint8_t *)json, (ssize_t)len, NULL);
	bool ok = b && key_from_doc(b, k);
	bson_destroy(b);
	return ok;
}

bool rec_key_from_json(const char *json, rec_key *k)
{
	return key_from_json(json, strlen(json), k);
}

void rec_key_put(text_buf *t, const rec_key *k)
{
	text_char(t, '{');
	for (size_t i = 0; i < k->n; i++) {
		if (i)
			text_str(t, ", ");
		text_json(t, k->field[i]);
		esr_put_dir(t, k->dir[i]);
	}
	text_char(t, '}');
}

static bool skip(const char **p, const char *lit)
{
	size_t l = strlen(lit);
	if (strncmp(*p, lit, l))
		return false;
	*p += l;
	return true;
}

bool rec_parse_command(const char *text, rec_command *c)
{
	const char *p = text, *e;
	memset(c, 0, sizeof *c);
	if (!skip(&p, "db.getSiblingDB(") || !take_str(&p, c->db, sizeof c->db) ||
	    !skip(&p, ").getCollection(") || !take_str(&p, c->coll, sizeof c->coll) ||
	    !skip(&p, ").createIndex(") || *p != '{' || !(e = json_end(p)) ||
	    !key_from_json(p, (size_t)(e - p), &c->key))
		return false;
	p = e;
	if (skip(&p, ", ")) {
		if (*p != '{' || !(e = json_end(p)) || (size_t)(e - p) >= sizeof c->opts)
			return false;
		snprintf(c->opts, sizeof c->opts, "%.*s", (int)(e - p), p);
		p = e;
	}
	if (*p != ')')
		return false;
	c->len = (size_t)(p + 1 - text);
	return true;
}

/* ---- classes, from the request that gave the key ---- */

static bool doc_of(const bson_iter_t *it, bson_t *out)
{
	uint32_t l;
	const uint8_t *d;
	if (!BSON_ITER_HOLDS_DOCUMENT(it))
		return false;
	bson_iter_document(it, &l, &d);
	return bson_init_static(out, d, l);
}

/* Whether filter and sort give c's key; the classes into neq, nsort. */
static bool try_query(const bson_t *filter, const bson_t *sortdoc, const rec_command *c, int *neq,
                      int *nsort)
{
	static query_preds qp; /* large: off the stack */
	sort_spec sort;
	esr_key k;
	query_preds_init(&qp);
	if (filter)
		query_preds_collect(&qp, filter);
	if (!sortdoc || query_sort_parse(sortdoc, &sort) != SORT_SPEC_KEYS)
		sort.n = 0;
	esr_key_build(&qp, &sort, &k);
	if (qp.overflow || k.n != c->key.n)
		return false;
	for (size_t i = 0; i < k.n; i++)
		if (strcmp(k.field[i], c->key.field[i]) || k.dir[i] != c->key.dir[i])
			return false;
	*neq = (int)k.neq;
	*nsort = (int)k.nsort;
	return true;
}

/* A document's filter (filter, query or q) and sort; a pipeline's leading
 * $match and the $sort right after it. */
static bool try_doc(const bson_t *doc, const rec_command *c, int *neq, int *nsort)
{
	bson_iter_t it, st, s1;
	bson_t filter, sort, m, srt;
	bool hf = false, hs = false;
	if (!bson_iter_init(&it, doc))
		return false;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		if (!strcmp(k, "filter") || !strcmp(k, "query") || !strcmp(k, "q"))
			hf = doc_of(&it, &filter);
		else if (!strcmp(k, "sort"))
			hs = doc_of(&it, &sort);
		else if (!strcmp(k, "pipeline") && bson_iter_recurse(&it, &st)) {
			bool hm = false, hsrt = false;
			while (bson_iter_next(&st) && bson_iter_recurse(&st, &s1) &&
			       bson_iter_next(&s1))
				if (!hm && !strcmp(bson_iter_key(&s1), "$match"))
					hm = doc_of(&s1, &m);
				else if (!strcmp(bson_iter_key(&s1), "$sort"))
					hsrt = doc_of(&s1, &srt);
				else
					break;
			if ((hm || hsrt) &&
			    try_query(hm ? &m : NULL, hsrt ? &srt : NULL, c, neq, nsort))
				return true;
		}
	}
	return (hf || hs) && try_query(hf ? &filter : NULL, hs ? &sort : NULL, c, neq, nsort);
}

void rec_classify(const cmdview *v, const rec_command *c, int *neq, int *nsort)
{
	if (try_doc(&v->body, c, neq, nsort))
		return;
	/* every statement sequence of the command table (update's, delete's,
	 * bulkWrite's ops), whichever command holds it */
	for (unsigned id = CMD_NONE + 1; id < CMD_IDS; id++) {
		cmdview_docs d;
		bson_t stmt;
		if (cmd_rows[id].seq != CMD_SEQ_STATEMENTS)
			continue;
		cmdview_docs_init(&d, v, cmd_rows[id].stmts);
		while (cmdview_docs_next(&d, &stmt))
			if (try_doc(&stmt, c, neq, nsort))
				return;
	}
}
