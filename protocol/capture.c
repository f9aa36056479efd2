/* The capture format (capture.h): building records and reading them. The
 * redaction is capture_redact.c's; what is kept of an inserted document,
 * and how the report stands it back up, is capture_docs.c's. */
#include "protocol/capture.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/commands.h"
#include "protocol/frame.h"
#include "protocol/opmsg.h"
#include "protocol/wire_doc.h"

static bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* ---- records ---- */

void capture_build_header(bson_t *out, const char *mongoguard_version, const char *instance,
                          bool redact, int64_t start_us, const bson_t *rules)
{
	bson_init(out);
	BSON_APPEND_UTF8(out, "k", "header");
	BSON_APPEND_UTF8(out, "format", CAPTURE_FORMAT_NAME);
	BSON_APPEND_INT32(out, "v", CAPTURE_FORMAT_VERSION);
	BSON_APPEND_UTF8(out, "mongoguard", mongoguard_version);
	BSON_APPEND_UTF8(out, "instance", instance);
	BSON_APPEND_UTF8(out, "redaction", redact ? "shapes" : "none");
	BSON_APPEND_DATE_TIME(out, "start", start_us / 1000);
	BSON_APPEND_INT64(out, "startUs", start_us);
	if (rules)
		BSON_APPEND_DOCUMENT(out, "rules", rules);
}

void capture_header_value_hashes(bson_t *header, bool kept)
{
	BSON_APPEND_BOOL(header, "valueHashes", kept);
}

bool capture_header_hashes_left_out(const bson_t *rec)
{
	bson_iter_t it;
	return bson_iter_init_find(&it, rec, "valueHashes") && BSON_ITER_HOLDS_BOOL(&it) &&
	       !bson_iter_bool(&it);
}

static void append_origin(bson_t *out, const char *kind, const capture_origin *o)
{
	BSON_APPEND_UTF8(out, "k", kind);
	BSON_APPEND_INT64(out, "t", o->t_us);
	BSON_APPEND_INT64(out, "conn", (int64_t)o->conn);
	BSON_APPEND_UTF8(out, "client", o->client ? o->client : "");
	BSON_APPEND_UTF8(out, "app", o->app ? o->app : "");
}

/* The collection a command names first ("find": "orders"), if any. */
static const char *first_coll(const cmdview *v)
{
	bson_iter_t it;
	if (bson_iter_init(&it, &v->body) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
		return bson_iter_utf8(&it, NULL);
	return NULL;
}

/* Commands that carry a credential or a SASL conversation: the SCRAM
 * client-first and client-final messages, a PLAIN password, a user's new
 * `pwd`, speculative authentication inside a hello. They are stored
 * redacted even when redaction is off: redaction off is for seeing
 * application data, and no one reviewing a design needs a password. */
static bool holds_credentials(const cmdview *v)
{
	if (cmd_rows[cmd_find(v->name)].credentials)
		return true;
	bson_iter_t it;
	if (!bson_iter_init(&it, &v->body))
		return true; /* unreadable: never stored whole */
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		if (streq(k, "pwd") || streq(k, "speculativeAuthenticate") || streq(k, "payload"))
			return true;
	}
	return false;
}

void capture_build_request(bson_t *out, const capture_origin *o, const request *r, bool redact,
                           const char *outcome)
{
	const cmdview *v = &r->view;
	const char *coll = first_coll(v);
	bson_init(out);
	append_origin(out, "req", o);
	BSON_APPEND_INT32(out, "rid", r->h.request_id);
	BSON_APPEND_UTF8(out, "op", v->name ? v->name : "");
	BSON_APPEND_UTF8(out, "db", v->db ? v->db : "");
	if (coll && v->db) {
		char ns[512];
		snprintf(ns, sizeof ns, "%s.%s", v->db, coll);
		BSON_APPEND_UTF8(out, "ns", ns);
	}
	BSON_APPEND_INT64(out, "len", (int64_t)r->len);
	BSON_APPEND_BOOL(out, "mtc", r->more_to_come);
	BSON_APPEND_UTF8(out, "verdict", outcome ? outcome : "forward");
	if (!redact && !holds_credentials(v)) {
		BSON_APPEND_BINARY(out, "msg", BSON_SUBTYPE_BINARY, r->msg, (uint32_t)r->len);
		return;
	}
	bson_t body, seqs;
	capture_redact_command(&v->body, &body);
	BSON_APPEND_DOCUMENT(out, "body", &body);
	bson_destroy(&body);
	if (!v->nseqs)
		return;
	bson_append_document_begin(out, "seqs", -1, &seqs);
	for (size_t i = 0; i < v->nseqs; i++) {
		const opmsg_sequence *s = &v->seqs[i];
		bool inserts = cmd_key_role_of(s->id) == CMD_KEY_DOCUMENTS;
		bson_t arr;
		bson_append_array_begin(&seqs, s->id, -1, &arr);
		const uint8_t *p = s->docs, *end = s->docs + s->docs_len;
		uint32_t n = 0;
		while (end - p >= 5) {
			uint32_t dl = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			              (uint32_t)p[3] << 24;
			bson_t doc, red;
			if (dl < 5 || dl > (size_t)(end - p) || !bson_init_static(&doc, p, dl))
				break;
			char key[16];
			const char *ks;
			size_t kl = bson_uint32_to_string(n++, &ks, key, sizeof key);
			if (inserts) {
				/* Inserted documents are data through and through:
				 * only what the large-document rule reads is kept. */
				capture_doc_facts df;
				capture_doc_measure(&doc, &df);
				capture_doc_stub(&df, &red);
			} else {
				capture_redact_statement(&doc, streq(s->id, "nsInfo"), &red);
			}
			bson_append_document(&arr, ks, (int)kl, &red);
			bson_destroy(&red);
			p += dl;
		}
		bson_append_array_end(&seqs, &arr);
	}
	bson_append_document_end(out, &seqs);
}

/* ---- replies ---- */

/* Longest array under each path of doc (dotted, arrays' elements not
 * descended into), merged into f->arrays' running maxima. */
typedef struct array_stat {
	char path[128];
	int64_t max;
} array_stat;

enum { MAX_ARRAY_PATHS = 32 };

typedef struct array_stats {
	array_stat a[MAX_ARRAY_PATHS];
	size_t n;
} array_stats;

static void note_array(array_stats *st, const char *path, int64_t len)
{
	for (size_t i = 0; i < st->n; i++)
		if (streq(st->a[i].path, path)) {
			if (len > st->a[i].max)
				st->a[i].max = len;
			return;
		}
	if (st->n < MAX_ARRAY_PATHS) {
		snprintf(st->a[st->n].path, sizeof st->a[st->n].path, "%s", path);
		st->a[st->n++].max = len;
	}
}

static void walk_arrays(array_stats *st, const bson_iter_t *it, const char *prefix, int depth)
{
	bson_iter_t c;
	if (depth > 4 || !bson_iter_recurse(it, &c))
		return;
	while (bson_iter_next(&c)) {
		char path[128];
		snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "",
		         bson_iter_key(&c));
		if (BSON_ITER_HOLDS_ARRAY(&c)) {
			bson_iter_t e;
			int64_t n = 0;
			if (bson_iter_recurse(&c, &e))
				while (bson_iter_next(&e))
					n++;
			note_array(st, path, n);
		} else if (BSON_ITER_HOLDS_DOCUMENT(&c)) {
			walk_arrays(st, &c, path, depth + 1);
		}
	}
}

/* The documents of a batch array (cursor.firstBatch / nextBatch). */
static void measure_batch(capture_reply_facts *f, const bson_iter_t *batch, bool sample,
                          array_stats *st)
{
	bson_iter_t d;
	f->n = 0;
	if (!bson_iter_recurse(batch, &d))
		return;
	while (bson_iter_next(&d)) {
		f->n++;
		if (!sample || !BSON_ITER_HOLDS_DOCUMENT(&d))
			continue;
		uint32_t dl;
		const uint8_t *data;
		bson_iter_document(&d, &dl, &data);
		f->docs_n++;
		f->docs_total += dl;
		if (dl > f->docs_max)
			f->docs_max = dl;
		walk_arrays(st, &d, "", 0);
	}
}

static void inspect_body(const bson_t *body, bool sample, capture_reply_facts *f, array_stats *st)
{
	bson_iter_t it, c;
	f->read = true;
	f->n = 1;
	if (bson_iter_init_find(&it, body, "ok"))
		f->ok = bson_iter_as_double(&it) == 1.0;
	if (bson_iter_init_find(&it, body, "code") && BSON_ITER_HOLDS_NUMBER(&it))
		f->code = (int32_t)bson_iter_as_int64(&it);
	if (bson_iter_init_find(&it, body, "writeErrors") && BSON_ITER_HOLDS_ARRAY(&it) &&
	    bson_iter_recurse(&it, &c))
		while (bson_iter_next(&c)) {
			bson_iter_t e;
			if (!f->write_errors++ && !f->code && BSON_ITER_HOLDS_DOCUMENT(&c) &&
			    bson_iter_recurse(&c, &e) && bson_iter_find(&e, "code") &&
			    BSON_ITER_HOLDS_NUMBER(&e))
				f->code = (int32_t)bson_iter_as_int64(&e);
		}
	if (bson_iter_init_find(&it, body, "cursor") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
	    bson_iter_recurse(&it, &c)) {
		while (bson_iter_next(&c)) {
			const char *k = bson_iter_key(&c);
			if ((streq(k, "firstBatch") || streq(k, "nextBatch")) &&
			    BSON_ITER_HOLDS_ARRAY(&c))
				measure_batch(f, &c, sample, st);
			else if (streq(k, "id") && BSON_ITER_HOLDS_NUMBER(&c))
				f->cid = bson_iter_as_int64(&c);
		}
	} else if (bson_iter_init_find(&it, body, "n") && BSON_ITER_HOLDS_NUMBER(&it)) {
		f->n = bson_iter_as_int64(&it); /* writes: documents matched / inserted */
	}
	if (sample && !f->docs_n) {
		f->docs_n = 1;
		f->docs_total = f->docs_max = body->len;
	}
}

void capture_reply_inspect(const uint8_t *msg, size_t len, bool sample, capture_reply_facts *f)
{
	memset(f, 0, sizeof *f);
	bson_init(&f->arrays);
	array_stats st = {.n = 0};
	frame_header h;
	wire_error err;
	if (frame_header_parse(msg, len, &h, &err) != FRAME_OK || (size_t)h.length != len)
		return;
	bson_t body;
	if (h.opcode == OP_MSG) {
		opmsg m;
		if (!opmsg_parse(msg, len, &m, &err) ||
		    !bson_init_static(&body, m.body, m.body_len))
			return;
		inspect_body(&body, sample, f, &st);
	} else if (h.opcode == OP_REPLY && len >= WIRE_HEADER_LEN + 20 + 5) {
		const uint8_t *p = msg + WIRE_HEADER_LEN;
		int32_t nret = wire_read_i32(p + 12);
		const uint8_t *doc = p + 20;
		uint32_t dl = (uint32_t)wire_read_i32(doc);
		/* The decoder's structural check, as opmsg_parse's for an
		 * OP_MSG: libbson's iterator reads some malformed documents
		 * the proxy's own walker steps over, and the two must agree. */
		if (dl < 5 || dl > len - (WIRE_HEADER_LEN + 20) ||
		    !wire_doc_validate(doc, dl, &err, "OP_REPLY document") ||
		    !bson_init_static(&body, doc, dl))
			return;
		inspect_body(&body, sample, f, &st);
		f->n = nret;
	} else {
		return;
	}
	f->sampled = sample;
	for (size_t i = 0; i < st.n; i++)
		BSON_APPEND_INT64(&f->arrays, st.a[i].path, st.a[i].max);
}

void capture_reply_facts_free(capture_reply_facts *f)
{
	bson_destroy(&f->arrays);
}

/* n 64-bit words as little-endian bytes (8 n), and back: how a capture
 * writes a filter's bits and a request's value hashes. */
static void words_out(const uint64_t *w, size_t n, uint8_t *b)
{
	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < 8; k++)
			b[8 * i + k] = (uint8_t)(w[i] >> (8 * k));
}

static void words_in(const uint8_t *b, size_t n, uint64_t *w)
{
	for (size_t i = 0; i < n; i++) {
		w[i] = 0;
		for (int k = 0; k < 8; k++)
			w[i] |= (uint64_t)b[8 * i + k] << (8 * k);
	}
}

void capture_append_values(bson_t *out, const value_filter *vf)
{
	uint8_t bits[VALUE_FILTER_BYTES];
	words_out(vf->w, VALUE_FILTER_WORDS, bits);
	bson_t d;
	bson_append_document_begin(out, "vals", -1, &d);
	BSON_APPEND_INT32(&d, "n", (int32_t)vf->n);
	BSON_APPEND_BOOL(&d, "all", vf->all);
	bson_append_binary(&d, "bits", -1, BSON_SUBTYPE_BINARY, bits, sizeof(bits));
	bson_append_document_end(out, &d);
}

void capture_append_hashes(bson_t *out, const uint64_t *h, uint32_t n)
{
	uint8_t b[8 * CAPTURE_VALUE_HASHES_MAX];
	if (n > CAPTURE_VALUE_HASHES_MAX)
		n = CAPTURE_VALUE_HASHES_MAX;
	words_out(h, n, b);
	bson_append_binary(out, "vh", -1, BSON_SUBTYPE_BINARY, b, 8 * n);
}

uint32_t capture_read_hashes(const bson_t *rec, uint64_t *h, uint32_t max)
{
	bson_iter_t it;
	const uint8_t *b;
	uint32_t len;
	bson_subtype_t sub;
	if (!bson_iter_init_find(&it, rec, "vh") || !BSON_ITER_HOLDS_BINARY(&it))
		return 0;
	bson_iter_binary(&it, &sub, &len, &b);
	if (!b || len % 8)
		return 0;
	uint32_t n = len / 8 < max ? len / 8 : max;
	words_in(b, n, h);
	return n;
}

bool capture_read_values(const bson_t *rec, value_filter *vf)
{
	bson_iter_t it, d;
	const uint8_t *bits;
	uint32_t len;
	bson_subtype_t sub;
	value_filter_clear(vf);
	if (!bson_iter_init_find(&it, rec, "vals") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
	    !bson_iter_recurse(&it, &d))
		return false;
	int64_t n = -1;
	bits = NULL;
	while (bson_iter_next(&d)) {
		if (!strcmp(bson_iter_key(&d), "n") && BSON_ITER_HOLDS_INT32(&d))
			n = bson_iter_int32(&d);
		else if (!strcmp(bson_iter_key(&d), "all") && BSON_ITER_HOLDS_BOOL(&d))
			vf->all = bson_iter_bool(&d);
		else if (!strcmp(bson_iter_key(&d), "bits") && BSON_ITER_HOLDS_BINARY(&d))
			bson_iter_binary(&d, &sub, &len, &bits);
	}
	if (n < 0 || n > VALUE_FILTER_MAX || !bits || len != VALUE_FILTER_BYTES) {
		vf->all = false;
		return false;
	}
	words_in(bits, VALUE_FILTER_WORDS, vf->w);
	vf->n = (uint32_t)n;
	return true;
}

void capture_build_reply(bson_t *out, const capture_origin *o, int32_t response_to, size_t len,
                         const capture_reply_facts *f)
{
	bson_init(out);
	BSON_APPEND_UTF8(out, "k", "reply");
	BSON_APPEND_INT64(out, "t", o->t_us);
	BSON_APPEND_INT64(out, "conn", (int64_t)o->conn);
	BSON_APPEND_INT32(out, "rt", response_to);
	BSON_APPEND_INT64(out, "len", (int64_t)len);
	if (!f || !f->read)
		return;
	BSON_APPEND_BOOL(out, "ok", f->ok);
	if (f->code)
		BSON_APPEND_INT32(out, "code", f->code);
	if (f->write_errors)
		BSON_APPEND_INT64(out, "we", f->write_errors);
	BSON_APPEND_INT64(out, "n", f->n);
	BSON_APPEND_INT64(out, "cid", f->cid);
	if (f->has_vals)
		capture_append_values(out, &f->vals);
	if (!f->sampled)
		return;
	bson_t d;
	bson_append_document_begin(out, "docs", -1, &d);
	BSON_APPEND_INT64(&d, "n", f->docs_n);
	BSON_APPEND_INT64(&d, "max", f->docs_max);
	BSON_APPEND_INT64(&d, "total", f->docs_total);
	bson_append_document_end(out, &d);
	if (!bson_empty(&f->arrays))
		BSON_APPEND_DOCUMENT(out, "arrays", &f->arrays);
}

void capture_build_indexes(bson_t *out, int64_t t_us, const char *ns, const bson_t *const *specs,
                           size_t n, const char *opaque, int64_t doc_count)
{
	bson_init(out);
	BSON_APPEND_UTF8(out, "k", "indexes");
	BSON_APPEND_INT64(out, "t", t_us);
	BSON_APPEND_UTF8(out, "ns", ns);
	if (doc_count >= 0)
		BSON_APPEND_INT64(out, "count", doc_count);
	if (opaque) {
		BSON_APPEND_UTF8(out, "opaque", opaque);
		return;
	}
	bson_t arr;
	bson_append_array_begin(out, "indexes", -1, &arr);
	for (size_t i = 0; i < n; i++) {
		char key[16];
		const char *ks;
		size_t kl = bson_uint32_to_string((uint32_t)i, &ks, key, sizeof key);
		bson_append_document(&arr, ks, (int)kl, specs[i]);
	}
	bson_append_array_end(out, &arr);
}

void capture_build_gap(bson_t *out, int64_t t_us, uint64_t dropped, int64_t from_us, int64_t to_us)
{
	bson_init(out);
	BSON_APPEND_UTF8(out, "k", "gap");
	BSON_APPEND_INT64(out, "t", t_us);
	BSON_APPEND_INT64(out, "dropped", (int64_t)dropped);
	BSON_APPEND_INT64(out, "from", from_us);
	BSON_APPEND_INT64(out, "to", to_us);
}

void capture_build_forget(bson_t *out, int64_t t_us, const char *db, const char *coll,
                          const char *why)
{
	bson_init(out);
	BSON_APPEND_UTF8(out, "k", "forget");
	BSON_APPEND_INT64(out, "t", t_us);
	BSON_APPEND_UTF8(out, "db", db);
	if (coll)
		BSON_APPEND_UTF8(out, "coll", coll);
	BSON_APPEND_UTF8(out, "why", why);
}

/* ---- reading ---- */

capture_next_status capture_next(const uint8_t *buf, size_t len, size_t *off, bson_t *rec)
{
	size_t at = *off;
	if (at >= len)
		return CAPTURE_NEXT_END;
	if (len - at < 4)
		return CAPTURE_NEXT_TRUNCATED;
	uint32_t dl = (uint32_t)wire_read_i32(buf + at);
	if (dl < 5 || dl > 48000000)
		return CAPTURE_NEXT_INVALID;
	if (dl > len - at)
		return CAPTURE_NEXT_TRUNCATED;
	if (buf[at + dl - 1] != 0 || !bson_init_static(rec, buf + at, dl))
		return CAPTURE_NEXT_INVALID;
	*off = at + dl;
	return CAPTURE_NEXT_OK;
}

capture_rec_kind capture_kind(const bson_t *rec)
{
	bson_iter_t it;
	/* "k" is the first field of every record the writer makes. */
	if (!bson_iter_init(&it, rec) || !bson_iter_next(&it) || !streq(bson_iter_key(&it), "k") ||
	    !BSON_ITER_HOLDS_UTF8(&it))
		return CAPTURE_REC_UNKNOWN;
	const char *k = bson_iter_utf8(&it, NULL);
	if (streq(k, "req"))
		return CAPTURE_REC_REQUEST;
	if (streq(k, "reply"))
		return CAPTURE_REC_REPLY;
	if (streq(k, "indexes"))
		return CAPTURE_REC_INDEXES;
	if (streq(k, "gap"))
		return CAPTURE_REC_GAP;
	if (streq(k, "forget"))
		return CAPTURE_REC_FORGET;
	if (streq(k, "header"))
		return CAPTURE_REC_HEADER;
	return CAPTURE_REC_UNKNOWN;
}

bool capture_check_header(const bson_t *rec, char *err, size_t errlen)
{
	bson_iter_t it;
	if (capture_kind(rec) != CAPTURE_REC_HEADER || !bson_iter_init_find(&it, rec, "format") ||
	    !BSON_ITER_HOLDS_UTF8(&it) || !streq(bson_iter_utf8(&it, NULL), CAPTURE_FORMAT_NAME)) {
		snprintf(err, errlen, "not a mongoguard capture (no header record)");
		return false;
	}
	int v = capture_header_version(rec);
	if (v < CAPTURE_FORMAT_OLDEST || v > CAPTURE_FORMAT_VERSION) {
		snprintf(err, errlen,
		         "capture format version %d is not one this mongoguard reads (it reads "
		         "versions %d to %d); use the mongoguard version that wrote it",
		         v, CAPTURE_FORMAT_OLDEST, CAPTURE_FORMAT_VERSION);
		return false;
	}
	return true;
}

int capture_header_version(const bson_t *rec)
{
	bson_iter_t it;
	if (!bson_iter_init_find(&it, rec, "v") || !BSON_ITER_HOLDS_NUMBER(&it))
		return -1;
	int64_t v = bson_iter_as_int64(&it);
	return v < 0 || v > 1000000 ? -1 : (int)v;
}

/* A message being put together; failed once memory ran out. */
typedef struct msg_buf {
	uint8_t *p;
	size_t len, cap;
	bool failed;
} msg_buf;

static void put(msg_buf *m, const void *d, size_t n)
{
	if (m->failed)
		return;
	if (m->len + n > m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 4096;
		while (nc < m->len + n)
			nc *= 2;
		uint8_t *np = realloc(m->p, nc);
		if (!np) {
			m->failed = true;
			return;
		}
		m->p = np;
		m->cap = nc;
	}
	memcpy(m->p + m->len, d, n);
	m->len += n;
}

static void put_i32(msg_buf *m, int32_t v)
{
	uint8_t b[4];
	wire_write_i32(b, v);
	put(m, b, 4);
}

/* One kind-1 section from an array of documents; an inserted document's
 * stub is stood back up (a stub of an older capture stays as it is). */
static void put_sequence(msg_buf *m, const char *id, const bson_iter_t *docs)
{
	bson_iter_t e;
	bool inserts = cmd_key_role_of(id) == CMD_KEY_DOCUMENTS;
	size_t start = m->len;
	put(m, "\x01", 1);
	put_i32(m, 0);
	put(m, id, strlen(id) + 1);
	if (BSON_ITER_HOLDS_ARRAY(docs) && bson_iter_recurse(docs, &e))
		while (bson_iter_next(&e)) {
			uint32_t al;
			const uint8_t *ad;
			bson_t stub, doc;
			if (!BSON_ITER_HOLDS_DOCUMENT(&e))
				continue;
			bson_iter_document(&e, &al, &ad);
			if (inserts && bson_init_static(&stub, ad, al) &&
			    capture_doc_synthesize(&stub, m->len < 48000000 ? 48000000 - m->len : 0,
			                           &doc)) {
				put(m, bson_get_data(&doc), doc.len);
				bson_destroy(&doc);
			} else {
				put(m, ad, al);
			}
		}
	if (!m->failed)
		wire_write_i32(m->p + start + 1, (int32_t)(m->len - start - 1));
}

/* An OP_MSG of body (with $db added if absent) and the sequences of seqs. */
static uint8_t *rebuild_opmsg(const bson_t *body, const char *db, const bson_t *seqs, size_t *len)
{
	bson_t b;
	bson_iter_t it;
	msg_buf m = {0};
	bson_copy_to(body, &b);
	if (!bson_iter_init_find(&it, body, "$db"))
		BSON_APPEND_UTF8(&b, "$db", db);
	uint8_t head[WIRE_HEADER_LEN + 4] = {0};
	wire_write_i32(head + 12, OP_MSG);
	put(&m, head, sizeof head);
	put(&m, "", 1); /* kind 0 */
	put(&m, bson_get_data(&b), b.len);
	bson_destroy(&b);
	bson_iter_t s;
	if (seqs && bson_iter_init(&s, seqs))
		while (bson_iter_next(&s))
			put_sequence(&m, bson_iter_key(&s), &s);
	if (m.failed || m.len > INT32_MAX) {
		free(m.p);
		return NULL;
	}
	wire_write_i32(m.p, (int32_t)m.len);
	*len = m.len;
	return m.p;
}

uint8_t *capture_request_message(const bson_t *rec, size_t *len)
{
	bson_iter_t it;
	if (bson_iter_init_find(&it, rec, "msg") && BSON_ITER_HOLDS_BINARY(&it)) {
		bson_subtype_t st;
		uint32_t n;
		const uint8_t *b;
		bson_iter_binary(&it, &st, &n, &b);
		uint8_t *m = malloc(n ? n : 1);
		if (m)
			memcpy(m, b, n);
		*len = n;
		return m;
	}
	bson_t body, seqs;
	uint32_t bl;
	const uint8_t *bd;
	if (!bson_iter_init_find(&it, rec, "body") || !BSON_ITER_HOLDS_DOCUMENT(&it))
		return NULL;
	bson_iter_document(&it, &bl, &bd);
	if (!bson_init_static(&body, bd, bl))
		return NULL;
	const char *db = "";
	if (bson_iter_init_find(&it, rec, "db") && BSON_ITER_HOLDS_UTF8(&it))
		db = bson_iter_utf8(&it, NULL);
	bool has_seqs = false;
	if (bson_iter_init_find(&it, rec, "seqs") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &bl, &bd);
		has_seqs = bson_init_static(&seqs, bd, bl);
	}
	return rebuild_opmsg(&body, db, has_seqs ? &seqs : NULL, len);
}
