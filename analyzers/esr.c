/* ESR index suggestions and the text helpers behind them. */
#include "analyzers/esr.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define ESR_MAX_FIELDS 32 /* the server's limit on compound index keys */

void esr_buf_init(esr_buf *b, char *p, size_t cap)
{
	b->p = p;
	b->cap = cap;
	b->len = 0;
	b->overflow = cap == 0;
	if (cap > 0)
		p[0] = '\0';
}

static void put(esr_buf *b, const char *s, size_t n)
{
	if (b->overflow)
		return;
	if (b->len + n >= b->cap) {
		b->overflow = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void esr_buf_str(esr_buf *b, const char *s)
{
	put(b, s, strlen(s));
}

void esr_buf_json_string(esr_buf *b, const char *s)
{
	put(b, "\"", 1);
	for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
		char esc[8];
		if (*c == '"' || *c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*c;
			put(b, esc, 2);
		} else if (*c < 0x20) {
			snprintf(esc, sizeof esc, "\\u%04x", *c);
			put(b, esc, 6);
		} else {
			put(b, (const char *)c, 1);
		}
	}
	put(b, "\"", 1);
}

static void field_dir(esr_buf *b, const char *field, int dir, bool first)
{
	if (!first)
		esr_buf_str(b, ", ");
	esr_buf_json_string(b, field);
	esr_buf_str(b, dir < 0 ? ": -1" : ": 1");
}

void esr_buf_sort(esr_buf *b, const sort_key *keys, size_t n)
{
	esr_buf_str(b, "{");
	for (size_t i = 0; i < n; i++)
		field_dir(b, keys[i].field, keys[i].direction, i == 0);
	esr_buf_str(b, "}");
}

void esr_buf_doc(esr_buf *b, const bson_t *doc)
{
	bson_iter_t it;
	bool first = true;
	char num[64];

	esr_buf_str(b, "{");
	if (doc != NULL && bson_iter_init(&it, doc)) {
		while (bson_iter_next(&it)) {
			if (!first)
				esr_buf_str(b, ", ");
			first = false;
			esr_buf_json_string(b, bson_iter_key(&it));
			esr_buf_str(b, ": ");
			switch (bson_iter_type(&it)) {
			case BSON_TYPE_UTF8:
				esr_buf_json_string(b, bson_iter_utf8(&it, NULL));
				break;
			case BSON_TYPE_BOOL:
				esr_buf_str(b, bson_iter_bool(&it) ? "true" : "false");
				break;
			case BSON_TYPE_INT32:
			case BSON_TYPE_INT64:
				snprintf(num, sizeof num, "%" PRId64, bson_iter_as_int64(&it));
				esr_buf_str(b, num);
				break;
			case BSON_TYPE_DOUBLE:
				snprintf(num, sizeof num, "%.17g", bson_iter_double(&it));
				esr_buf_str(b, num);
				break;
			case BSON_TYPE_DOCUMENT: {
				const uint8_t *data;
				uint32_t len;
				bson_t sub;
				bson_iter_document(&it, &len, &data);
				if (bson_init_static(&sub, data, len))
					esr_buf_doc(b, &sub);
				break;
			}
			default:
				/* Collations hold strings, numbers and booleans only. */
				esr_buf_str(b, "null");
				break;
			}
		}
	}
	esr_buf_str(b, "}");
}

typedef struct esr_fields {
	const char *field[ESR_MAX_FIELDS];
	int dir[ESR_MAX_FIELDS];
	size_t n;
} esr_fields;

static void add_field(esr_fields *f, const char *field, int dir)
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

bool esr_suggest_parsed(const char *db, const char *coll, const query_preds *preds,
                        const sort_spec *sort, const bson_t *collation, char *out, size_t len)
{
	esr_fields f = {.n = 0};
	esr_buf b;

	for (size_t i = 0; i < preds->n; i++)
		if (preds->p[i].equality)
			add_field(&f, preds->p[i].field, 1);
	for (size_t i = 0; i < sort->n; i++)
		add_field(&f, sort->keys[i].field, sort->keys[i].direction);
	for (size_t i = 0; i < preds->n; i++)
		if (preds->p[i].range)
			add_field(&f, preds->p[i].field, 1);

	esr_buf_init(&b, out, len);
	esr_buf_str(&b, "db.getSiblingDB(");
	esr_buf_json_string(&b, db != NULL ? db : "");
	esr_buf_str(&b, ").getCollection(");
	esr_buf_json_string(&b, coll != NULL ? coll : "");
	esr_buf_str(&b, ").createIndex({");
	for (size_t i = 0; i < f.n; i++)
		field_dir(&b, f.field[i], f.dir[i], i == 0);
	esr_buf_str(&b, "}");
	if (!query_collation_is_simple(collation)) {
		esr_buf_str(&b, ", {\"collation\": ");
		esr_buf_doc(&b, collation);
		esr_buf_str(&b, "}");
	}
	esr_buf_str(&b, ")");
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
