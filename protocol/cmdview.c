/* The command view. Everything here points into the caller's message; no
 * function in this file allocates. */
#include "protocol/cmdview.h"

#include <string.h>

#include "protocol/frame.h"
#include "protocol/wire_doc.h"
#include "protocol/wire_iter.h"

#define CMD_SUFFIX ".$cmd"

/* Sets v->name from the first key of v->body. */
static bool take_name(cmdview *v, const char *form, wire_error *err)
{
	bson_iter_t it;
	if (!bson_iter_init(&it, &v->body) || !wire_iter_next(&it)) {
		wire_error_set(err, WIRE_ERR_BAD_VALUE, "BadValue",
		               "%s command document is empty; its first key names the command",
		               form);
		return false;
	}
	v->name = wire_iter_key(&it);
	return true;
}

/* The body's top-level keys, from one bare pass: the body is validated
 * (opmsg_parse, opquery_parse; a wrapped {$query: ...} is a nested
 * document of a validated one). */
static void keep_top_keys(cmdview *v)
{
	v->ntop = wire_doc_keys(bson_get_data(&v->body), v->body.len, v->top_keys, v->top_lens,
	                        CMDVIEW_TOP_KEYS);
}

/* The first top-level element named $db: among the keys the view kept, or
 * by a second pass when the body has more. */
static const uint8_t *find_db(const opmsg *m, const cmdview *v)
{
	if (v->ntop > CMDVIEW_TOP_KEYS)
		return wire_doc_find(m->body, m->body_len, "$db", 3);
	for (size_t i = 0; i < v->ntop; i++)
		if (v->top_lens[i] == 3 && memcmp(v->top_keys[i], "$db", 3) == 0)
			return (const uint8_t *)v->top_keys[i] - 1; /* its type byte */
	return NULL;
}

bool cmdview_from_opmsg(const opmsg *m, cmdview *v, wire_error *err)
{
	/* Field by field, not memset: the key arrays are written only as far
	 * as ntop says, and this runs on every request. */
	v->origin = CMDVIEW_FROM_OPMSG;
	v->db = v->name = NULL;
	v->seqs = m->seqs;
	v->nseqs = m->nseqs;
	v->flags = m->flags;
	v->ntop = 0;
	v->db_buf[0] = '\0';
	if (!bson_init_static(&v->body, m->body, m->body_len)) {
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "OP_MSG body of %zu bytes is not a BSON document", m->body_len);
		return false;
	}
	/* opmsg_parse validated the body (wire_doc_validate): its first key
	 * and $db are read bare, without bson_iter's checks again. */
	if (m->body_len <= 5) {
		wire_error_set(err, WIRE_ERR_BAD_VALUE, "BadValue",
		               "OP_MSG command document is empty; its first key names the command");
		return false;
	}
	v->name = (const char *)m->body + 5;
	keep_top_keys(v);
	const uint8_t *e = find_db(m, v);
	if (!e) {
		wire_error_set(err, WIRE_ERR_BAD_VALUE, "BadValue",
		               "OP_MSG command '%s' has no $db field", v->name);
		return false;
	}
	/* type, "$db\0", then a string's int32 length (with its NUL, at least
	 * 1 in a validated document) and bytes */
	const char *db = (const char *)e + 5 + 4;
	size_t db_len = e[0] == BSON_TYPE_UTF8 ? (size_t)wire_read_u32(e + 5) - 1 : 0;
	if (db_len == 0 || strlen(db) != db_len) {
		wire_error_set(err, WIRE_ERR_BAD_VALUE, "BadValue",
		               "OP_MSG command '%s' has a $db that is not a non-empty string",
		               v->name);
		return false;
	}
	v->db = db;
	return true;
}

bool cmdview_from_opquery(const opquery *q, cmdview *v, wire_error *err)
{
	memset(v, 0, sizeof(*v));
	v->origin = CMDVIEW_FROM_OPQUERY;
	if (!opquery_is_command(q)) {
		wire_error_set(err, WIRE_ERR_UNSUPPORTED_OPQUERY, "UnsupportedOpQueryCommand",
		               "OP_QUERY on '%s' is not a command; only <db>" CMD_SUFFIX
		               " is supported",
		               q->full_collection);
		return false;
	}
	size_t db_len = strlen(q->full_collection) - strlen(CMD_SUFFIX);
	if (db_len >= sizeof(v->db_buf)) {
		wire_error_set(err, WIRE_ERR_BAD_VALUE, "BadValue",
		               "OP_QUERY database name of %zu bytes is longer than %zu", db_len,
		               sizeof(v->db_buf) - 1);
		return false;
	}
	memcpy(v->db_buf, q->full_collection, db_len);
	v->db_buf[db_len] = '\0';
	v->db = v->db_buf;

	if (!bson_init_static(&v->body, q->query, q->query_len)) {
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "OP_QUERY query of %zu bytes is not a BSON document", q->query_len);
		return false;
	}
	/* Old drivers wrap the command as {$query: {...}, $readPreference: ...}
	 * (or {query: ...}); the command is the wrapped document. */
	bson_iter_t it;
	if (bson_iter_init(&it, &v->body) && wire_iter_next(&it) &&
	    (strcmp(wire_iter_key(&it), "$query") == 0 ||
	     strcmp(wire_iter_key(&it), "query") == 0) &&
	    WIRE_ITER_HOLDS_DOCUMENT(&it)) {
		uint32_t len;
		const uint8_t *data;
		bson_iter_document(&it, &len, &data);
		if (!bson_init_static(&v->body, data, len)) {
			wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
			               "OP_QUERY %s document is not BSON", wire_iter_key(&it));
			return false;
		}
	}
	keep_top_keys(v);
	return take_name(v, "OP_QUERY", err);
}

void cmdview_docs_init(cmdview_docs *d, const cmdview *v, const char *field)
{
	memset(d, 0, sizeof(*d));
	for (size_t i = 0; i < v->nseqs; i++)
		if (strcmp(v->seqs[i].id, field) == 0) {
			d->in_seq = true;
			d->p = v->seqs[i].docs;
			d->end = d->p + v->seqs[i].docs_len;
			return;
		}
	bson_iter_t it;
	if (!bson_iter_init_find(&it, &v->body, field))
		return; /* absent: nothing to iterate, nothing wrong */
	if (!WIRE_ITER_HOLDS_ARRAY(&it) || !wire_iter_recurse(&it, &d->it)) {
		d->corrupt = true; /* present but not an array of documents */
		return;
	}
	d->iter_ok = true;
}

/* The next document's bytes, framed as bson_init_static frames them
 * (length prefix, size, terminating byte): the one place both views of a
 * document list read it. */
static bool docs_next_raw(cmdview_docs *d, const uint8_t **data, uint32_t *len)
{
	if (d->corrupt)
		return false;
	if (d->in_seq) {
		if (d->p >= d->end)
			return false;
		size_t n;
		if (!wire_doc_fits(d->p, (size_t)(d->end - d->p), &n)) {
			d->corrupt = true;
			return false;
		}
		*data = d->p;
		*len = (uint32_t)n;
		d->p += n;
		return true;
	}
	if (!d->iter_ok)
		return false;
	if (!wire_iter_next(&d->it)) {
		/* The iterator stops early (err_off set) on corrupt bytes. */
		d->corrupt = d->it.err_off != 0;
		d->iter_ok = false;
		return false;
	}
	if (!WIRE_ITER_HOLDS_DOCUMENT(&d->it)) {
		d->corrupt = true;
		return false;
	}
	bson_iter_document(&d->it, len, data);
	if (*len < 5 || (*data)[*len - 1] != 0) {
		d->corrupt = true;
		return false;
	}
	return true;
}

bool cmdview_docs_next(cmdview_docs *d, bson_t *doc)
{
	const uint8_t *data;
	uint32_t len;
	if (!docs_next_raw(d, &data, &len))
		return false;
	if (!bson_init_static(doc, data, len)) { /* checks nothing docs_next_raw did not */
		d->corrupt = true;
		return false;
	}
	return true;
}

bool cmdview_docs_next_iter_any(cmdview_docs *d, bson_iter_t *it)
{
	const uint8_t *data;
	uint32_t len;
	return docs_next_raw(d, &data, &len) && wire_iter_init_raw(it, data, len);
}
