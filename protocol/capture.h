/* The capture format: what mongoguard records of real traffic for the
 * offline report, as a stream of BSON documents (readable by bsondump and
 * any BSON library), one record per document, each with a "k" (kind) field.
 *
 *   header   first in every file: format "mongoguard-capture", v (format
 *            version), mongoguard (its version), instance (one per
 *            process), redaction ("shapes" or "none"), start (date),
 *            startUs, rules (actions and params); in version 5,
 *            valueHashes (capture_header_value_hashes; absent: true).
 *   req      one request: t (µs since the epoch), conn, client, app, rid
 *            (requestID), op (command name), db, ns, len (bytes on the
 *            wire), mtc (moreToCome), verdict; and either body + seqs
 *            (redacted: every literal replaced by a placeholder of the same
 *            BSON type, see capture_redact_command; an inserted document
 *            becomes a stub, capture_doc_stub) or msg (the whole message,
 *            redaction off); from version 4, counts {"db.coll": n}: the
 *            estimated document count of each collection the verdict
 *            read one of (the collection-scan rule's minDocuments), as it
 *            read it, when it read any.
 *   reply    one reply: t, conn, rt (responseTo), len, and when the reply
 *            was read: ok, code, n (documents returned), cid (cursor id),
 *            we (writeErrors, from version 2, when any; code is then the
 *            first one's when the reply itself is ok);
 *            for a sample of replies: docs {n, max, total} (document sizes)
 *            and arrays {path: longest length seen}. Reply documents
 *            themselves are never stored.
 *   indexes  the index list of ns as mongoguard learned it: t, ns, and
 *            indexes (each listIndexes document as the server gave it,
 *            with mgMultikeyKeys: explain's multikey keys; a redacted
 *            capture's partial filters redacted) or opaque (why none); from
 *            version 2, count (the estimated document count the index
 *            cache had with it) when known: up to version 3 the estimate
 *            when the record was written, a new record written when it
 *            changed; from version 4 the count the list landed with (the
 *            one a late verdict reads), a new record for a new list only.
 *   gap      records lost because the writer's queue was full: t, dropped,
 *            from, to (µs).
 *   forget   from version 3: the index cache forgot what it knew of db.coll
 *            (coll absent: of every collection of db): t, db, coll, why
 *            ("schema": a schema change passed; "written": documents were
 *            written into a collection it listed missing; "made": a
 *            collection dropped exists again, a write made it or a list
 *            showed it, which is a schema change of its own: a reader
 *            that knows no "made" forgets as at "schema", which gives
 *            the late verdicts the same answer). Written in the
 *            order the cache saw it among the lists that landed (indexes
 *            records), and each request after every list and forgetting
 *            it was judged after and before every later one, so a reader
 *            forgets where the proxy did, not where the reply that made
 *            it forget happens to fall.
 *
 * Versions: 1 kept inserted documents as {$size} and index lists without
 * counts; 2 adds both facts; 3 adds forget records, and a reader of one
 * forgets lists at them instead of at a DDL's or a write's reply; 4 adds
 * requests' counts, and a reader of one judges each request with the
 * counts it keeps, moving no count at an insert's or a delete's reply (the
 * estimate moved live at moments no record's place can stand for: another
 * worker's request could read it between a reply's move and its record);
 * 5 adds a keyed read's value hashes (vh) and a parent reply's values
 * (vals), unless its header says valueHashes: false; 6 takes a keyed
 * read's key beside other conditions ({_id: {$in: [...]}, deleted: false},
 * protocol/keyed_filter.h) and keeps its vh, where 5 and older read only a
 * key alone, as the proxy that wrote them did; 7 takes it among the
 * fields of a top-level $and too ({$and: [{customer: v}, {deleted:
 * false}]}), where 6 took that $and for an operator and no key.
 * A reader reads every version from CAPTURE_FORMAT_OLDEST up; an older
 * capture simply lacks those facts, so the collection-scan and
 * large-document rules stay silent over a version 1 one.
 *
 * Pure: builds and reads documents in memory; files are the writer's and
 * the report's business. */
#ifndef MG_PROTOCOL_CAPTURE_H
#define MG_PROTOCOL_CAPTURE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/request.h"
#include "protocol/value_filter.h"

#define CAPTURE_FORMAT_NAME    "mongoguard-capture"
#define CAPTURE_FORMAT_VERSION 7
#define CAPTURE_FORMAT_OLDEST  1 /* the oldest version this reader reads */

typedef enum {
	CAPTURE_REC_HEADER,
	CAPTURE_REC_REQUEST,
	CAPTURE_REC_REPLY,
	CAPTURE_REC_INDEXES,
	CAPTURE_REC_GAP,
	CAPTURE_REC_FORGET,
	CAPTURE_REC_UNKNOWN, /* a kind a later version added: skipped */
} capture_rec_kind;

/* ---- writing ---- */

/* Where a request or reply came from. */
typedef struct capture_origin {
	int64_t t_us; /* CLOCK_REALTIME, microseconds */
	uint64_t conn;
	const char *client; /* "host:port" */
	const char *app;    /* "" when none */
} capture_origin;

/* instance: the same for every file one mongoguard process writes (pairs
 * a request with its reply across a rotation, never across processes). */
void capture_build_header(bson_t *out, const char *mongoguard_version, const char *instance,
                          bool redact, int64_t start_us, const bson_t *rules);

/* Whether the file's records keep value hashes (a request's "vh", a
 * reply's "vals"), appended to a header as "valueHashes". false
 * (capture.valueHashes: false): none are written, so that a redacted
 * capture shared outside does not tell which reads and replies share a
 * value; a reader then judges client-side-join chains by their counts
 * alone, as over a version 4 capture, which can differ from the live log
 * (the live proxy judged with the values). */
void capture_header_value_hashes(bson_t *header, bool kept);
/* True when a header says its records hold no value hashes
 * (valueHashes: false); a header without the field says nothing. */
bool capture_header_hashes_left_out(const bson_t *rec);

/* A request record from a decoded command (r->view valid). redact: body and
 * kind-1 sequences with literals replaced; else the whole message. */
void capture_build_request(bson_t *out, const capture_origin *o, const request *r, bool redact,
                           const char *outcome);

/* What the writer learned from a reply's bytes. */
typedef struct capture_reply_facts {
	bool read; /* the body was parsed: the fields below mean something */
	bool ok;
	int32_t code;         /* 0 when ok; else the reply's, or its first writeError's */
	int64_t write_errors; /* entries of writeErrors (an ok reply can hold them) */
	int64_t n;            /* documents returned (a batch, OP_REPLY numberReturned, or 1) */
	int64_t cid;          /* cursor id, 0 when exhausted or none */
	bool sampled;         /* docs and arrays are filled */
	int64_t docs_n, docs_max, docs_total;
	bson_t arrays; /* {path: max length}, sampled only; owned */
	/* The values a first batch of two or more documents held, as the
	 * live proxy told client-side-join (value_filter.h: the bits of
	 * salted hashes, never the values), set by the capture's writer. */
	bool has_vals;
	value_filter vals;
} capture_reply_facts;

/* Reads a whole reply (OP_MSG or OP_REPLY). sample: also measure the
 * returned documents. Call capture_reply_facts_free after. */
void capture_reply_inspect(const uint8_t *msg, size_t len, bool sample, capture_reply_facts *f);
void capture_reply_facts_free(capture_reply_facts *f);

void capture_build_reply(bson_t *out, const capture_origin *o, int32_t response_to, size_t len,
                         const capture_reply_facts *f);

/* A reply record's values (capture_reply_facts.vals): "vals": {n, all,
 * bits}, the filter's bits as little-endian words. False when the record
 * has none, or they are not a filter's (vf cleared). */
void capture_append_values(bson_t *out, const value_filter *vf);
bool capture_read_values(const bson_t *rec, value_filter *vf);

/* A request record's keyed values (analyzers/engine/engine.h,
 * engine_value_hashes): "vh", their salted hashes as n little-endian
 * 64-bit words, at most CAPTURE_VALUE_HASHES_MAX. Read: how many (0 when
 * the record has none, or they are not such words). */
enum { CAPTURE_VALUE_HASHES_MAX = 256 };
void capture_append_hashes(bson_t *out, const uint64_t *h, uint32_t n);
uint32_t capture_read_hashes(const bson_t *rec, uint64_t *h, uint32_t max);

/* specs: listIndexes documents (or NULL with opaque set). doc_count: the
 * estimated document count, -1 when unknown (not written). */
void capture_build_indexes(bson_t *out, int64_t t_us, const char *ns, const bson_t *const *specs,
                           size_t n, const char *opaque, int64_t doc_count);

void capture_build_gap(bson_t *out, int64_t t_us, uint64_t dropped, int64_t from_us, int64_t to_us);

/* coll NULL: the whole of db. why: "schema", "written" or "made". */
void capture_build_forget(bson_t *out, int64_t t_us, const char *db, const char *coll,
                          const char *why);

/* The redaction: a copy of a command body (or a kind-1 document) in which
 * every value that can come from application data is replaced by a
 * placeholder of the same BSON type, while the structure the analyzers read
 * is kept (README, "Capture and design review", says exactly what). */
void capture_redact_command(const bson_t *body, bson_t *out);
/* The same for one document of an updates / deletes / ops sequence (or of
 * nsInfo, which names namespaces and is kept whole). */
void capture_redact_statement(const bson_t *doc, bool ns_info, bson_t *out);
/* An index's listIndexes document appended to out (initialised): every
 * field as it is, but the values of its partialFilterExpression, replaced
 * as a filter's are. */
void capture_redact_index_spec(const bson_t *spec, bson_t *out);

/* ---- inserted documents (capture_docs.c) ----
 *
 * An inserted document is data through and through; what the
 * large-document rule reads of it is kept, no value: its size, the field
 * path that holds most of it (followed down while one field holds more
 * than half of its container, as the rule names a document over maxBytes)
 * and the path and length of its longest array (the first of the longest,
 * in document order). Field names and array positions are structure, as
 * everywhere else in a redacted capture. */
#define CAPTURE_PATH_LEN 256

typedef struct capture_doc_facts {
	uint32_t size;
	char big[CAPTURE_PATH_LEN]; /* "" when no field holds most of it */
	char arr[CAPTURE_PATH_LEN]; /* "" when it holds no array */
	uint32_t arr_len;
} capture_doc_facts;

void capture_doc_measure(const bson_t *doc, capture_doc_facts *f);
/* {$size, $len, $arr, $big}: the stub a redacted record holds. */
void capture_doc_stub(const capture_doc_facts *f, bson_t *out);
/* The report's side: a document of exactly the stub's size whose longest
 * array and largest field are at the stub's paths, made of nulls and
 * zero bytes, so the large-document rule judges it as it judged the real
 * one. False (out untouched) for anything but a version-2 stub, or when
 * the stub asks for more than budget bytes. */
bool capture_doc_synthesize(const bson_t *stub, size_t budget, bson_t *out)
    __attribute__((warn_unused_result));

/* ---- reading ---- */

typedef enum {
	CAPTURE_NEXT_OK,
	CAPTURE_NEXT_END,       /* no bytes left */
	CAPTURE_NEXT_TRUNCATED, /* the last record is cut short (*off: where it starts) */
	CAPTURE_NEXT_INVALID,   /* not a BSON document at *off */
} capture_next_status;

/* The next record of buf at *off, as a static view (valid while buf is);
 * *off moves past it on OK. */
capture_next_status capture_next(const uint8_t *buf, size_t len, size_t *off, bson_t *rec)
    __attribute__((warn_unused_result));

capture_rec_kind capture_kind(const bson_t *rec);

/* Checks a header record. False with err set when it is none, or its
 * version is one this reader does not know. */
bool capture_check_header(const bson_t *rec, char *err, size_t errlen)
    __attribute__((warn_unused_result));
int capture_header_version(const bson_t *rec); /* -1 when it says none */

/* Rebuilds the message a request record stands for: the stored one, or an
 * OP_MSG made of the redacted body and sequences (inserted documents'
 * stubs stood back up by capture_doc_synthesize), so the report decodes it
 * with request_decode like the live path. malloc'd; NULL when the record
 * holds neither. */
uint8_t *capture_request_message(const bson_t *rec, size_t *len);

#endif
