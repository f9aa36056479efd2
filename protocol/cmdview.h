/* The command view: what analyzers read instead of frames.
 *
 * A request is decoded into its database, command name, body document and
 * its kind-1 document sequences. Every field points into the caller's message
 * buffer (bson_t values are static views made with bson_init_static), so a
 * view costs no allocation and lives exactly as long as that buffer.
 *
 * seqs points into the opmsg the view was made from, so that opmsg must live
 * as long as the view too. Do not copy a cmdview by value: a static bson_t
 * points at itself and db may point at db_buf, so a copy would still refer to
 * the original. Build a second view from the message instead. */
#ifndef MG_PROTOCOL_CMDVIEW_H
#define MG_PROTOCOL_CMDVIEW_H

#include <bson/bson.h>
#include <stdbool.h>

#include "protocol/opmsg.h"
#include "protocol/opquery.h"
#include "protocol/wire_doc.h"
#include "protocol/wire_iter.h"
#include "protocol/wire_error.h"

typedef enum {
	CMDVIEW_FROM_OPMSG,
	CMDVIEW_FROM_OPQUERY,
} cmdview_origin;

/* How many top-level keys of the body the view keeps (drivers send fewer
 * than a dozen). */
#define CMDVIEW_TOP_KEYS 32

typedef struct cmdview {
	cmdview_origin origin;
	const char *db;             /* $db (OP_MSG) or the part before ".$cmd" (OP_QUERY) */
	const char *name;           /* first key of the body, as sent ("find", "isMaster") */
	bson_t body;                /* static view of the command document */
	const opmsg_sequence *seqs; /* OP_MSG kind-1 sections; NULL for OP_QUERY */
	size_t nseqs;
	uint32_t flags; /* OP_MSG flagBits, 0 for OP_QUERY */
	/* The body's top-level keys in order, as wire_doc_keys() gives them:
	 * top_keys[i] / top_lens[i] for the first CMDVIEW_TOP_KEYS, ntop how
	 * many there are (it may be more). One bare pass serves the $db lookup
	 * (OP_MSG) and the decoder's repeated-field check (request.c). */
	size_t ntop;
	const char *top_keys[CMDVIEW_TOP_KEYS];
	uint32_t top_lens[CMDVIEW_TOP_KEYS];
	char db_buf[128]; /* backing store for an OP_QUERY database name */
} cmdview;

/* From an OP_MSG that opmsg_parse() accepted (so its body is validated).
 * Fails when the body has no first key or no $db. */
bool cmdview_from_opmsg(const opmsg *m, cmdview *v, wire_error *err)
    __attribute__((warn_unused_result));

/* From a parsed OP_QUERY on "<db>.$cmd"; unwraps {$query: {...}} if present. */
bool cmdview_from_opquery(const opquery *q, cmdview *v, wire_error *err)
    __attribute__((warn_unused_result));

/* Iterates the documents of an "array of documents" argument, wherever the
 * driver put it: a kind-1 sequence named `field`, or an array `field` in the
 * body ("updates", "deletes", "documents", "ops", "nsInfo"). */
typedef struct cmdview_docs {
	bool in_seq;
	const uint8_t *p, *end; /* remaining sequence bytes */
	bson_iter_t it;         /* body array iterator */
	bool iter_ok;
	bool corrupt; /* set when a document could not be read */
} cmdview_docs;

void cmdview_docs_init(cmdview_docs *d, const cmdview *v, const char *field);

/* Next document as a static view in *doc; false at the end or on corrupt
 * input (check d->corrupt to tell them apart). */
bool cmdview_docs_next(cmdview_docs *d, bson_t *doc);

/* The same document as an iterator before its first element, as
 * bson_iter_init would leave one on that view, without making the view:
 * for a walk of every statement of a batch, where the view was two
 * library calls a statement. */
bool cmdview_docs_next_iter_any(cmdview_docs *d, bson_iter_t *it);

/* The same document as a cursor before its first element
 * (protocol/wire_iter.h), where the statement walks of the engine start: a
 * kind-1 sequence's next document (opmsg_parse framed each already; the
 * checks stay, for a view made otherwise) inline, the rest out of line. */
static inline bool cmdview_docs_next_cur(cmdview_docs *d, wire_cur *c)
{
	size_t len;
	bson_iter_t it;
	if (d->in_seq && !d->corrupt && wire_doc_fits(d->p, (size_t)(d->end - d->p), &len)) {
		wire_cur_init_framed(c, d->p, (uint32_t)len);
		d->p += len;
		return true;
	}
	if (!cmdview_docs_next_iter_any(d, &it))
		return false;
	wire_cur_of_iter(c, &it);
	return true;
}

#endif
