/* The schema view's raw facts from a (redacted) request: the fields
 * filters, sorts and hints use (for index use), $push / $addToSet targets,
 * joins. aggregate.c calls agg_note_schema for each request with a
 * namespace; it reads the request and writes namespace rows only. */
#include <stdio.h>
#include <string.h>

#include "protocol/commands.h"
#include "report/aggregate_parts.h"

static void note_filter_fields(model_ns *n, const bson_iter_t *filter, int depth)
{
	bson_iter_t c;
	if (depth > 8 || !bson_iter_recurse(filter, &c))
		return;
	while (bson_iter_next(&c)) {
		const char *k = bson_iter_key(&c);
		if (k[0] != '$') {
			ns_field_note(&n->used, &n->nused, k, -1);
		} else if ((!strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor")) &&
		           BSON_ITER_HOLDS_ARRAY(&c)) {
			bson_iter_t e;
			if (bson_iter_recurse(&c, &e))
				while (bson_iter_next(&e))
					if (BSON_ITER_HOLDS_DOCUMENT(&e))
						note_filter_fields(n, &e, depth + 1);
		}
	}
}

static void note_keys(model_ns *n, const bson_iter_t *doc, const char *prefix)
{
	bson_iter_t c;
	if (!BSON_ITER_HOLDS_DOCUMENT(doc) || !bson_iter_recurse(doc, &c))
		return;
	while (bson_iter_next(&c)) {
		char p[160];
		snprintf(p, sizeof p, "%s%s", prefix, bson_iter_key(&c));
		ns_field_note(&n->used, &n->nused, p, -1);
	}
}

static void note_update(model_ns *n, const bson_iter_t *u)
{
	bson_iter_t c, f;
	if (!BSON_ITER_HOLDS_DOCUMENT(u) || !bson_iter_recurse(u, &c))
		return;
	while (bson_iter_next(&c)) {
		const char *op = bson_iter_key(&c);
		if ((strcmp(op, "$push") && strcmp(op, "$addToSet")) || !bson_iter_recurse(&c, &f))
			continue;
		while (bson_iter_next(&f)) {
			ns_field_note(&n->push, &n->npush, bson_iter_key(&f), -1);
			if (op[1] == 'a') /* $addToSet: the workload's arrays name it */
				ns_field_note(&n->add_to_set, &n->nadd_to_set, bson_iter_key(&f),
				              -1);
			n->pushes++;
		}
	}
}

static void note_pipeline(ns_table *t, model_ns *n, const char *db, const bson_iter_t *pl)
{
	bson_iter_t st, c, l;
	bool leading = true, joined = false;
	if (!bson_iter_recurse(pl, &st))
		return;
	while (bson_iter_next(&st)) {
		if (!BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &c) ||
		    !bson_iter_next(&c))
			continue;
		const char *k = bson_iter_key(&c);
		if (leading && !strcmp(k, "$match"))
			note_filter_fields(n, &c, 0);
		else if (leading && !strcmp(k, "$sort"))
			note_keys(n, &c, "");
		else
			leading = false;
		if ((!strcmp(k, "$lookup") || !strcmp(k, "$graphLookup")) &&
		    bson_iter_recurse(&c, &l)) {
			const char *from = NULL, *foreign = NULL;
			while (bson_iter_next(&l)) {
				if (!strcmp(bson_iter_key(&l), "from") && BSON_ITER_HOLDS_UTF8(&l))
					from = bson_iter_utf8(&l, NULL);
				if ((!strcmp(bson_iter_key(&l), "foreignField") ||
				     !strcmp(bson_iter_key(&l), "connectToField")) &&
				    BSON_ITER_HOLDS_UTF8(&l))
					foreign = bson_iter_utf8(&l, NULL);
			}
			joined = true;
			if (from) {
				char fns[MODEL_NS_LEN];
				snprintf(fns, sizeof fns, "%s.%s", db, from);
				size_t j = 0;
				while (j < n->njoined && strcmp(n->joined[j], fns))
					j++;
				if (j == n->njoined && j < 8)
					snprintf(n->joined[n->njoined++], MODEL_NS_LEN, "%s", fns);
				size_t self = ns_table_index(t, n);
				model_ns *fn = ns_table_get(t, fns); /* may move t->m->nss */
				if (foreign)
					ns_field_note(&fn->used, &fn->nused, foreign, -1);
				n = &t->m->nss[self - 1];
			}
		}
	}
	if (joined)
		n->lookups++;
}

void agg_note_schema(ns_table *t, model_ns *n, const cmdview *v, const char *canon)
{
	bson_iter_t it;
	size_t self = ns_table_index(t, n);
	if (!bson_iter_init(&it, &v->body))
		return;
	const cmd_row *row = &cmd_rows[cmd_find(canon)];
	if (row->kind == CMD_KIND_READ)
		n->reads++;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		if ((!strcmp(k, "filter") || !strcmp(k, "query")) && BSON_ITER_HOLDS_DOCUMENT(&it))
			note_filter_fields(n, &it, 0);
		else if (!strcmp(k, "sort"))
			note_keys(n, &it, "");
		else if (!strcmp(k, "hint") && BSON_ITER_HOLDS_UTF8(&it)) {
			char p[160];
			snprintf(p, sizeof p, "hint:%s", bson_iter_utf8(&it, NULL));
			ns_field_note(&n->used, &n->nused, p, -1);
		} else if (!strcmp(k, "hint"))
			note_keys(n, &it, "");
		else if (!strcmp(k, "key") && BSON_ITER_HOLDS_UTF8(&it))
			ns_field_note(&n->used, &n->nused, bson_iter_utf8(&it, NULL), -1);
		else if (!strcmp(k, "update"))
			note_update(n, &it);
		else if (!strcmp(k, "pipeline") && BSON_ITER_HOLDS_ARRAY(&it)) {
			note_pipeline(t, n, v->db, &it);
			n = &t->m->nss[self - 1];
		}
	}
	/* each statement's filter and update, by the row's keys (update's q
	 * and u, delete's q; bulkWrite names no collection of its own, so never
	 * comes here) */
	if (row->seq != CMD_SEQ_STATEMENTS)
		return;
	cmdview_docs d;
	bson_t stmt;
	cmdview_docs_init(&d, v, row->stmts);
	while (cmdview_docs_next(&d, &stmt)) {
		bson_iter_t s;
		if (row->filter && bson_iter_init_find(&s, &stmt, row->filter) &&
		    BSON_ITER_HOLDS_DOCUMENT(&s))
			note_filter_fields(n, &s, 0);
		if (row->update && bson_iter_init_find(&s, &stmt, row->update))
			note_update(n, &s);
	}
}
