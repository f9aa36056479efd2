/* What a filter bounds for the sort question (sort_bounds.h). */
#include "analyzers/planner/sort_bounds.h"

#include <stdio.h>
#include <string.h>

#include "protocol/wire_iter.h"

/* The pred for field in p (field's bytes must outlive p), added when absent. */
static query_pred *pred_slot(query_preds *p, const char *field)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->p[i].field, field) == 0)
			return &p->p[i];
	if (p->n == QUERY_PREDS_MAX)
		return NULL; /* no bound added: quieter, never louder */
	query_pred *q = &p->p[p->n++];
	memset(q, 0, sizeof *q);
	q->field = field;
	return q;
}

static void merge(query_pred *dst, const query_pred *src)
{
	dst->any |= src->any;
	if (src->point) {
		dst->point = true;
		dst->point_nc |= src->point_nc;
	}
	if (src->points && (dst->points == 0 || src->points < dst->points)) {
		dst->points = src->points;
		dst->points_nc = src->points_nc;
	}
	dst->bounded_nc |= src->bounded_nc;
	dst->equality |= src->equality;
	dst->range |= src->range;
}

/* prefix.field kept in names; NULL when it does not fit. */
static const char *compose(sort_names *names, const char *prefix, const char *field)
{
	size_t room = sizeof names->buf - names->len;
	char *at = names->buf + names->len;
	int n = snprintf(at, room, "%s.%s", prefix, field);
	if (n < 0 || (size_t)n >= room)
		return NULL;
	names->len += (size_t)n + 1;
	return at;
}

/* The value form: the operand's operators, read as if on a field. */
static void value_form(query_preds *p, const char *field, const bson_t *operand)
{
	bson_t tmp;
	query_preds sub;
	bson_init(&tmp);
	if (bson_append_document(&tmp, "v", 1, operand)) {
		query_preds_init(&sub);
		query_preds_collect(&sub, &tmp);
		query_pred *q = sub.n == 1 ? pred_slot(p, field) : NULL;
		if (q != NULL)
			merge(q, &sub.p[0]);
	}
	bson_destroy(&tmp);
}

void sort_bounds_elems(query_preds *p, size_t from, sort_names *names)
{
	size_t nelems = p->nelems;
	for (size_t e = from; e < nelems; e++) {
		bson_t operand;
		bson_iter_t it;
		const char *field = p->elems[e].field;
		if (!bson_init_static(&operand, p->elems[e].data, p->elems[e].len) ||
		    !bson_iter_init(&it, &operand) || !wire_iter_next(&it))
			continue;
		const char *k = wire_iter_key(&it);
		if (k[0] == '$') {
			/* {$and, $or, $expr, ...} at the head is the document form
			 * read no further; any other operator is the value form. */
			if (strcmp(k, "$and") != 0 && strcmp(k, "$or") != 0 &&
			    strcmp(k, "$nor") != 0 && strcmp(k, "$expr") != 0 &&
			    strcmp(k, "$where") != 0 && strcmp(k, "$jsonSchema") != 0 &&
			    strcmp(k, "$comment") != 0 && strcmp(k, "$text") != 0)
				value_form(p, field, &operand);
			continue;
		}
		query_preds sub;
		query_preds_init(&sub);
		query_preds_collect(&sub, &operand); /* names point into the filter */
		for (size_t i = 0; i < sub.n; i++) {
			const char *path = compose(names, field, sub.p[i].field);
			query_pred *q = path != NULL ? pred_slot(p, path) : NULL;
			if (q != NULL)
				merge(q, &sub.p[i]);
		}
	}
}

/* ---- sparse: does the filter keep out documents without the field ---- */

static bool is_null(const bson_iter_t *v)
{
	bson_type_t t = wire_iter_type(v);
	return t == BSON_TYPE_NULL || t == BSON_TYPE_UNDEFINED;
}

/* One operator of {field: {op: v}}. */
static missing_kind op_missing(const char *op, const bson_iter_t *v)
{
	if (strcmp(op, "$eq") == 0 || strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 ||
	    strcmp(op, "$lt") == 0 || strcmp(op, "$lte") == 0) {
		bson_type_t t = wire_iter_type(v);
		if (t == BSON_TYPE_MINKEY || t == BSON_TYPE_MAXKEY)
			return MISSING_UNSURE; /* {$gt: MinKey} matches a missing field */
		if (!is_null(v))
			return MISSING_EXCLUDED;
		/* {$eq: null} matches a missing field; $gte/$lte null: unsure */
		return strcmp(op, "$eq") == 0 ? MISSING_MATCHES : MISSING_UNSURE;
	}
	if (strcmp(op, "$in") == 0) {
		bson_iter_t el;
		if (!WIRE_ITER_HOLDS_ARRAY(v) || !wire_iter_recurse(v, &el))
			return MISSING_UNSURE;
		while (wire_iter_next(&el))
			if (is_null(&el))
				return MISSING_MATCHES;
		return MISSING_EXCLUDED;
	}
	if (strcmp(op, "$exists") == 0)
		return bson_iter_as_bool(v) ? MISSING_EXCLUDED : MISSING_MATCHES;
	if (strcmp(op, "$regex") == 0 || strcmp(op, "$elemMatch") == 0 ||
	    strcmp(op, "$size") == 0 || strcmp(op, "$mod") == 0 || strcmp(op, "$all") == 0)
		return MISSING_EXCLUDED;
	return MISSING_UNSURE; /* $ne, $nin, $not, $type, $options, geo, bits */
}

typedef struct missing_acc {
	bool excluded, matches, unsure;
} missing_acc;

static void note(missing_acc *a, missing_kind k)
{
	a->excluded |= k == MISSING_EXCLUDED;
	a->matches |= k == MISSING_MATCHES;
	a->unsure |= k == MISSING_UNSURE;
}

static void field_value(missing_acc *a, const bson_iter_t *v)
{
	bson_iter_t op;
	if (WIRE_ITER_HOLDS_DOCUMENT(v) && wire_iter_recurse(v, &op) && wire_iter_next(&op) &&
	    wire_iter_key(&op)[0] == '$') {
		do
			note(a, op_missing(wire_iter_key(&op), &op));
		while (wire_iter_next(&op));
		return;
	}
	note(a, is_null(v) ? MISSING_MATCHES : MISSING_EXCLUDED);
}

static void doc_missing(missing_acc *a, const bson_t *doc, const char *field, int depth)
{
	bson_iter_t it, el;
	if (doc == NULL || depth > 4 || !bson_iter_init(&it, doc))
		return;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (strcmp(k, field) == 0) {
			field_value(a, &it);
		} else if (strcmp(k, "$and") == 0 && WIRE_ITER_HOLDS_ARRAY(&it) &&
		           wire_iter_recurse(&it, &el)) {
			while (wire_iter_next(&el)) {
				bson_t sub;
				if (wire_iter_doc_view(&el, &sub))
					doc_missing(a, &sub, field, depth + 1);
			}
		}
	}
}

missing_kind sort_bounds_missing(const bson_t *const *filters, size_t n, const char *field)
{
	missing_acc a = {false, false, false};
	for (size_t i = 0; i < n; i++)
		doc_missing(&a, filters[i], field, 0);
	if (a.excluded)
		return MISSING_EXCLUDED;
	return a.matches && !a.unsure ? MISSING_MATCHES : MISSING_UNSURE;
}

/* ---- multikey ---- */

/* Whether two dotted paths share their first component. */
static bool share_first(const char *a, const char *b)
{
	size_t la = strcspn(a, "."), lb = strcspn(b, ".");
	return la == lb && memcmp(a, b, la) == 0;
}

uint32_t sort_bounds_multikey_cut(const index_def *d, const query_preds *p)
{
	bool known; /* from explain, or a write the proxy saw put an array there */
	uint32_t multikey = index_def_multikey(d, &known);
	if (multikey == 0)
		return 0;
	size_t n = d->nkeys < 32 ? d->nkeys : 32;
	uint32_t bounded = 0, cut = 0;
	for (size_t i = 0; i < n; i++) {
		if (!(multikey & (1u << i)))
			continue;
		const query_pred *q = query_preds_find(p, d->keys[i].field);
		if (q != NULL && q->any)
			bounded |= 1u << i;
	}
	cut = bounded;
	for (size_t i = 0; i < n; i++) {
		if (!(multikey & (1u << i)) || (cut & (1u << i)))
			continue;
		for (size_t j = 0; j < n; j++)
			if ((bounded & (1u << j)) &&
			    share_first(d->keys[i].field, d->keys[j].field))
				cut |= 1u << i;
	}
	return cut;
}

/* ---- $expr ---- */

typedef struct expr_points {
	query_preds *p;
	bool added;
} expr_points;

/* {$eq: ["$f", v]}: a point on f (query_expr_comparisons). A constant
 * says its type; a variable's is not known, and is taken as not a string,
 * as collection-scan takes it (under an index of another collation a
 * finding can be missed there, none invented). */
static void expr_eq(void *arg, const query_expr_cmp *c)
{
	expr_points *e = arg;
	if (strcmp(c->op, "$eq") != 0)
		return;
	query_pred *q = pred_slot(e->p, c->field);
	if (q == NULL)
		return;
	q->any = q->point = q->equality = true;
	bson_type_t t = wire_iter_type(c->value);
	if (c->variable || (t != BSON_TYPE_UTF8 && t != BSON_TYPE_SYMBOL))
		q->point_nc = q->bounded_nc = true;
	e->added = true;
}

bool sort_bounds_expr(query_preds *p, const bson_t *filter)
{
	bson_iter_t it;
	expr_points e = {p, false};
	if (filter == NULL || !wire_iter_init_raw(&it, bson_get_data(filter), filter->len))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		if (k[0] == '$' && strcmp(k, "$expr") == 0) {
			query_expr_comparisons(&it, expr_eq, NULL, &e);
			break;
		}
	}
	return e.added;
}

/* ---- $lookup ---- */

void sort_bounds_lookup(bson_t *out, const char *foreign_field)
{
	if (foreign_field != NULL && foreign_field[0] != '\0')
		bson_append_utf8(out, foreign_field, -1, "?", 1);
}
