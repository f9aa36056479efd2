/* ESR index suggestions and the writers behind them. */
#include "analyzers/planner/esr.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyzers/planner/sort_bounds.h"
#include "protocol/wire_iter.h"

void esr_put_dir(text_buf *b, int dir)
{
	text_str(b, dir == ESR_DIR_2DSPHERE ? ": \"2dsphere\""
	            : dir == ESR_DIR_2D     ? ": \"2d\""
	            : dir < 0               ? ": -1"
	                                    : ": 1");
}

static void field_dir(text_buf *b, const char *field, int dir, bool first)
{
	if (!first)
		text_str(b, ", ");
	text_json(b, field);
	esr_put_dir(b, dir);
}

void esr_put_sort(text_buf *b, const sort_key *keys, size_t n)
{
	text_str(b, "{");
	for (size_t i = 0; i < n; i++)
		field_dir(b, keys[i].field, keys[i].direction, i == 0);
	text_str(b, "}");
}

void esr_put_doc(text_buf *b, const bson_t *doc)
{
	bson_iter_t it;
	bool first = true;

	text_str(b, "{");
	if (doc != NULL && bson_iter_init(&it, doc)) {
		while (wire_iter_next(&it)) {
			if (!first)
				text_str(b, ", ");
			first = false;
			text_json(b, wire_iter_key(&it));
			text_str(b, ": ");
			switch (wire_iter_type(&it)) {
			case BSON_TYPE_UTF8:
				text_json(b, bson_iter_utf8(&it, NULL));
				break;
			case BSON_TYPE_BOOL:
				text_str(b, bson_iter_bool(&it) ? "true" : "false");
				break;
			case BSON_TYPE_INT32:
			case BSON_TYPE_INT64:
				text_printf(b, "%" PRId64, bson_iter_as_int64(&it));
				break;
			case BSON_TYPE_DOUBLE:
				text_printf(b, "%.17g", bson_iter_double(&it));
				break;
			case BSON_TYPE_DOCUMENT: {
				const uint8_t *data;
				uint32_t len;
				bson_t sub;
				bson_iter_document(&it, &len, &data);
				if (bson_init_static(&sub, data, len))
					esr_put_doc(b, &sub);
				break;
			}
			default:
				/* Collations hold strings, numbers and booleans only. */
				text_str(b, "null");
				break;
			}
		}
	}
	text_str(b, "}");
}

static void add_field(esr_key *f, const char *field, int dir)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->field[i], field) == 0)
			return;
	if (f->n == ESR_MAX_FIELDS)
		return;
	f->field[f->n] = field;
	f->dir[f->n] = dir;
	f->n++;
}

/* prefix.field (field NULL: prefix), kept in f->names. */
static void add_path(esr_key *f, const char *prefix, const char *field)
{
	char path[256];
	int n = field ? snprintf(path, sizeof path, "%s.%s", prefix, field)
	              : snprintf(path, sizeof path, "%s", prefix);
	if (n < 0 || (size_t)n >= sizeof path)
		return;
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->field[i], path) == 0)
			return;
	if (f->n == ESR_MAX_FIELDS || f->names_len + (size_t)n + 1 > sizeof f->names)
		return;
	char *at = f->names + f->names_len;
	memcpy(at, path, (size_t)n + 1);
	f->names_len += (size_t)n + 1;
	add_field(f, at, 1);
}

/* The ESR group a walk adds to. */
typedef enum { ESR_EQUALITY, ESR_RANGE } esr_group;

#define ELEM_DEPTH_MAX 4 /* nested $elemMatch walked; deeper, the array's path */

/* The operators that make {$elemMatch: {...}} a filter on element
 * documents although they start with '$'. */
static bool filter_level(const char *k)
{
	return strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0 ||
	       strcmp(k, "$expr") == 0 || strcmp(k, "$where") == 0 || strcmp(k, "$text") == 0 ||
	       strcmp(k, "$comment") == 0 || strcmp(k, "$jsonSchema") == 0;
}

/* The value form {$elemMatch: {$eq: 5, ...}}: a point on the array's own
 * index keys; any other operator is a range of them. */
static bool names_eq(const bson_t *doc)
{
	bson_iter_t it;
	if (bson_iter_init(&it, doc))
		while (wire_iter_next(&it))
			if (strcmp(wire_iter_key(&it), "$eq") == 0)
				return true;
	return false;
}

static bool elem_of(const query_preds *p, const char *field, size_t *i);

/* What the $elemMatch on path tests (its operand's bytes), in group g:
 * the value form gives path itself, the document form path.f for each
 * field f it tests (nested $elemMatch: path.f.g), the equalities in the
 * equality group and every other field in the range group. */
static void elem_fields(esr_key *f, const char *path, const uint8_t *data, uint32_t len,
                        esr_group g, int depth)
{
	bson_t doc;
	bson_iter_t it;
	if (!bson_init_static(&doc, data, len) || !bson_iter_init(&it, &doc))
		return;
	const char *k = wire_iter_next(&it) ? wire_iter_key(&it) : NULL;
	if (!k || depth >= ELEM_DEPTH_MAX || (k[0] == '$' && !filter_level(k))) {
		bool eq = k && depth < ELEM_DEPTH_MAX && names_eq(&doc);
		if (eq == (g == ESR_EQUALITY))
			add_path(f, path, NULL);
		return;
	}
	query_preds sub; /* on the suggestion's path only, never per request */
	query_preds_init(&sub);
	query_preds_collect(&sub, &doc);
	if (sub.n == 0 && g == ESR_RANGE)
		add_path(f, path, NULL); /* {$elemMatch: {$expr: ...}} and the like */
	for (size_t i = 0; i < sub.n; i++) {
		const query_pred *q = &sub.p[i];
		size_t e;
		if (elem_of(&sub, q->field, &e)) {
			char nested[256];
			int n = snprintf(nested, sizeof nested, "%s.%s", path, q->field);
			if (n > 0 && (size_t)n < sizeof nested)
				elem_fields(f, nested, sub.elems[e].data, sub.elems[e].len, g,
				            depth + 1);
			continue;
		}
		if (q->equality == (g == ESR_EQUALITY))
			add_path(f, path, q->field);
	}
}

/* Whether field (a name p's predicates point to) has an $elemMatch in p:
 * its index in *i. */
static bool elem_of(const query_preds *p, const char *field, size_t *i)
{
	for (*i = 0; *i < p->nelems; (*i)++)
		if (p->elems[*i].field == field)
			return true;
	return false;
}

/* The $elemMatch of preds->p[i], if any, in group g. */
static void pred_elems(esr_key *f, const query_preds *preds, size_t i, esr_group g)
{
	for (size_t e = 0; e < preds->nelems; e++)
		if (preds->elems[e].field == preds->p[i].field)
			elem_fields(f, preds->p[i].field, preds->elems[e].data, preds->elems[e].len,
			            g, 0);
}

void esr_key_build(const query_preds *preds, const sort_spec *sort, esr_key *f)
{
	f->n = 0;
	f->names_len = 0;
	for (size_t i = 0; i < preds->n; i++) {
		if (preds->p[i].equality)
			add_field(f, preds->p[i].field, 1);
		if (preds->nelems)
			pred_elems(f, preds, i, ESR_EQUALITY);
	}
	f->neq = f->n;
	for (size_t i = 0; i < sort->n; i++)
		add_field(f, sort->keys[i].field, sort->keys[i].direction);
	f->nsort = f->n - f->neq;
	for (size_t i = 0; i < preds->n; i++) {
		if (preds->p[i].range)
			add_field(f, preds->p[i].field, 1);
		if (preds->nelems)
			pred_elems(f, preds, i, ESR_RANGE);
	}
	/* A $geoWithin or $geoIntersects uses a geo index only: 2dsphere, which
	 * may follow the other keys, or 2d, which must lead (and alone here). */
	for (size_t i = 0; i < preds->n; i++) {
		if (preds->p[i].geo == QUERY_GEO_FLAT) {
			f->n = f->neq = f->nsort = 0;
			add_field(f, preds->p[i].field, ESR_DIR_2D);
			return;
		}
		if (preds->p[i].geo == QUERY_GEO_SPHERE)
			add_field(f, preds->p[i].field, ESR_DIR_2DSPHERE);
	}
	/* Only predicates of no ESR class ($size, $all, $type, $not, $mod):
	 * an index on their fields is the one createIndex can be given. */
	if (f->n == 0)
		for (size_t i = 0; i < preds->n; i++)
			if (preds->p[i].any)
				add_field(f, preds->p[i].field, 1);
}

bool esr_suggest_parsed(const char *db, const char *coll, const query_preds *preds,
                        const sort_spec *sort, const bson_t *collation, char *out, size_t len)
{
	esr_key f;
	text_buf b;

	esr_key_build(preds, sort, &f);
	if (f.n == 0) { /* mongod refuses createIndex({}) */
		if (len > 0)
			out[0] = '\0';
		return false;
	}
	text_init(&b, out, len);
	text_str(&b, "db.getSiblingDB(");
	text_json(&b, db != NULL ? db : "");
	text_str(&b, ").getCollection(");
	text_json(&b, coll != NULL ? coll : "");
	text_str(&b, ").createIndex({");
	for (size_t i = 0; i < f.n; i++)
		field_dir(&b, f.field[i], f.dir[i], i == 0);
	text_str(&b, "}");
	if (!query_collation_is_simple(collation)) {
		text_str(&b, ", {\"collation\": ");
		esr_put_doc(&b, collation);
		text_str(&b, "}");
	}
	text_str(&b, ")");
	text_finish(&b);
	if (b.overflow && len > 0)
		out[0] = '\0';
	return !b.overflow;
}

bool esr_suggest(const sort_query *q, char *out, size_t len)
{
	query_preds preds;
	sort_spec sort;

	if (query_sort_parse(q->sort, &sort) != SORT_SPEC_KEYS) {
		if (len > 0)
			out[0] = '\0';
		return false;
	}
	query_preds_init(&preds);
	query_preds_collect(&preds, q->filter);
	sort_bounds_expr(&preds, q->filter); /* as the sort rule reads it */
	return esr_suggest_parsed(q->db, q->coll, &preds, &sort, q->collation, out, len);
}
