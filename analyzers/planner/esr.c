/* ESR index suggestions and the writers behind them. */
#include "analyzers/planner/esr.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "protocol/wire_iter.h"

static void field_dir(text_buf *b, const char *field, int dir, bool first)
{
	if (!first)
		text_str(b, ", ");
	text_json(b, field);
	text_str(b, dir < 0 ? ": -1" : ": 1");
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

void esr_key_build(const query_preds *preds, const sort_spec *sort, esr_key *f)
{
	f->n = 0;
	for (size_t i = 0; i < preds->n; i++)
		if (preds->p[i].equality)
			add_field(f, preds->p[i].field, 1);
	f->neq = f->n;
	for (size_t i = 0; i < sort->n; i++)
		add_field(f, sort->keys[i].field, sort->keys[i].direction);
	f->nsort = f->n - f->neq;
	for (size_t i = 0; i < preds->n; i++)
		if (preds->p[i].range)
			add_field(f, preds->p[i].field, 1);
}

bool esr_suggest_parsed(const char *db, const char *coll, const query_preds *preds,
                        const sort_spec *sort, const bson_t *collation, char *out, size_t len)
{
	esr_key f;
	text_buf b;

	esr_key_build(preds, sort, &f);
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
	return esr_suggest_parsed(q->db, q->coll, &preds, &sort, q->collation, out, len);
}
