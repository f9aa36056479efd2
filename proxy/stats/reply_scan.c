/* A whole reply's ok, code and documents in one pass (see reply_scan.h). */
#include "proxy/stats/reply_scan.h"

#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "protocol/value_filter.h"

enum {
	HEADER_LEN = 16,
	OP_REPLY_CODE = 1,
	OP_MSG_CODE = 2013,
	CHECKSUM_PRESENT = 1,
	NO_VALUE = -1, /* value_len: malformed */
};

static int32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return (int32_t)le32toh(v);
}

static int64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return (int64_t)le64toh(v);
}

static double rddbl(const uint8_t *p)
{
	uint64_t v;
	double d;
	memcpy(&v, p, 8);
	v = le64toh(v);
	memcpy(&d, &v, 8);
	return d;
}

/* The bytes of a value of type t at p (avail bytes there); NO_VALUE when
 * it does not fit or is malformed. */
static int64_t value_len(uint8_t t, const uint8_t *p, size_t avail)
{
	int32_t l;
	switch (t) {
	case 0x01: /* double */
	case 0x09: /* date */
	case 0x11: /* timestamp */
	case 0x12: /* int64 */
		return avail >= 8 ? 8 : NO_VALUE;
	case 0x13: /* decimal128 */
		return avail >= 16 ? 16 : NO_VALUE;
	case 0x10: /* int32 */
		return avail >= 4 ? 4 : NO_VALUE;
	case 0x08: /* bool */
		return avail >= 1 ? 1 : NO_VALUE;
	case 0x07: /* ObjectId */
		return avail >= 12 ? 12 : NO_VALUE;
	case 0x06: /* undefined */
	case 0x0A: /* null */
	case 0x7F: /* maxKey */
	case 0xFF: /* minKey */
		return 0;
	case 0x02: /* string */
	case 0x0D: /* code */
	case 0x0E: /* symbol */
		/* its last byte a NUL, as libbson's iterator (the capture's
		 * reader) and mongod require: past one that is not, neither
		 * reads on */
		if (avail < 5 || (l = rd32(p)) < 1 || (size_t)l > avail - 4 || p[4 + l - 1] != 0)
			return NO_VALUE;
		return 4 + (int64_t)l;
	case 0x03: /* document */
	case 0x04: /* array */
	case 0x0F: /* code with scope */
		if (avail < 5 || (l = rd32(p)) < 5 || (size_t)l > avail)
			return NO_VALUE;
		return l;
	case 0x05: /* binary */
		if (avail < 5 || (l = rd32(p)) < 0 || (size_t)l > avail - 5)
			return NO_VALUE;
		return 5 + (int64_t)l;
	case 0x0B: { /* regex: two C strings */
		const uint8_t *a = memchr(p, 0, avail);
		const uint8_t *b = a ? memchr(a + 1, 0, avail - (size_t)(a + 1 - p)) : NULL;
		return b ? (int64_t)(b + 1 - p) : NO_VALUE;
	}
	case 0x0C: /* DBPointer */
		if (avail < 5 || (l = rd32(p)) < 1 || (size_t)l > avail - 4 - 12)
			return NO_VALUE;
		return 4 + (int64_t)l + 12;
	default:
		return NO_VALUE;
	}
}

/* One element of a document: its type, key and value. */
typedef struct elem {
	uint8_t type;
	const char *key;
	size_t keylen;
	const uint8_t *val;
	size_t vlen;
} elem;

/* A document's elements, one at a time: doc/len its bytes (len checked by
 * the caller: at least 5, ending in NUL). */
typedef struct walk {
	const uint8_t *p, *end; /* end: the document's last byte (its NUL) */
} walk;

static void walk_init(walk *w, const uint8_t *doc, size_t len)
{
	w->p = doc + 4;
	w->end = doc + len - 1;
}

/* The next element; false at the end or on malformed bytes. */
static bool walk_next(walk *w, elem *e)
{
	if (w->p >= w->end)
		return false;
	e->type = *w->p++;
	/* the key's NUL found inline: keys are short, shorter than a call
	 * to memchr (a batch's "0", "1", ...; a document's field names) */
	const uint8_t *z = w->p;
	while (z < w->end && *z)
		z++;
	if (z >= w->end)
		return false;
	e->key = (const char *)w->p;
	e->keylen = (size_t)(z - w->p);
	e->val = z + 1;
	int64_t l = value_len(e->type, e->val, (size_t)(w->end - e->val));
	if (l < 0)
		return false;
	e->vlen = (size_t)l;
	w->p = e->val + l;
	return true;
}

static bool key_is(const elem *e, const char *k, size_t n)
{
	return e->keylen == n && !memcmp(e->key, k, n);
}

#define KEY_IS(e, lit) key_is((e), (lit), sizeof(lit) - 1)

static bool is_number(uint8_t t)
{
	return t == 0x01 || t == 0x10 || t == 0x12;
}

/* A double as an int64: NaN or out of range gives INT64_MIN, which is
 * what x86's conversion gives for libbson's cast (the capture's reader),
 * without C's undefined conversion (an upstream's n: 1e228, found by
 * fuzz_reply_scan under UBSan). */
static int64_t dbl_to_i64(double d)
{
	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
		return INT64_MIN;
	return (int64_t)d;
}

/* As libbson's bson_iter_as_int64 / _as_double on the numeric and boolean
 * types; 0 for the rest. */
static int64_t as_int64(const elem *e)
{
	switch (e->type) {
	case 0x01:
		return dbl_to_i64(rddbl(e->val));
	case 0x10:
		return rd32(e->val);
	case 0x12:
		return rd64(e->val);
	case 0x08:
		return e->val[0] != 0;
	default:
		return 0;
	}
}

static double as_double(const elem *e)
{
	switch (e->type) {
	case 0x01:
		return rddbl(e->val);
	case 0x10:
		return rd32(e->val);
	case 0x12:
		return (double)rd64(e->val);
	case 0x08:
		return e->val[0] != 0;
	default:
		return 0;
	}
}

/* An array's elements, counted. */
static int64_t count_elems(const elem *arr)
{
	walk w;
	elem e;
	int64_t n = 0;
	walk_init(&w, arr->val, arr->vlen);
	while (walk_next(&w, &e))
		n++;
	return n;
}

/* The code of a document (a writeError), 0 when none. */
static int32_t code_of(const elem *doc)
{
	walk w;
	elem e;
	walk_init(&w, doc->val, doc->vlen);
	while (walk_next(&w, &e))
		if (KEY_IS(&e, "code"))
			return is_number(e.type) ? (int32_t)as_int64(&e) : 0;
	return 0;
}

/* writeErrors: counted, and the first one's code. */
static int32_t scan_write_errors(const elem *arr, reply_scan *out)
{
	walk w;
	elem e;
	int32_t code = 0;
	walk_init(&w, arr->val, arr->vlen);
	while (walk_next(&w, &e))
		if (!out->write_errors++ && e.type == 0x03)
			code = code_of(&e);
	return code;
}

/* A cursor's batch: its documents. */
static void scan_cursor(const elem *cur, reply_scan *out)
{
	walk w;
	elem e;
	walk_init(&w, cur->val, cur->vlen);
	while (walk_next(&w, &e))
		if (e.type == 0x04 && (KEY_IS(&e, "firstBatch") || KEY_IS(&e, "nextBatch"))) {
			out->n = count_elems(&e);
			out->batch = e.val;
			out->batch_len = e.vlen;
			out->first = e.key[0] == 'f';
		}
}

/* The top level of a reply's body: the first of each key counts, as a
 * lookup from the start finds it. */
static void scan_body(const uint8_t *doc, size_t len, reply_scan *out)
{
	walk w;
	elem e;
	bool seen_ok = false, seen_code = false, seen_we = false, seen_cursor = false,
	     seen_n = false, cursor_doc = false;
	int64_t n = 1;
	int32_t code = 0, we_code = 0;
	out->n = 1;
	walk_init(&w, doc, len);
	while (walk_next(&w, &e)) {
		if (!seen_ok && KEY_IS(&e, "ok")) {
			seen_ok = true;
			out->ok = as_double(&e) == 1.0;
		} else if (!seen_code && KEY_IS(&e, "code")) {
			seen_code = true;
			if (is_number(e.type))
				code = (int32_t)as_int64(&e);
		} else if (!seen_we && KEY_IS(&e, "writeErrors")) {
			seen_we = true;
			if (e.type == 0x04)
				we_code = scan_write_errors(&e, out);
		} else if (!seen_cursor && KEY_IS(&e, "cursor")) {
			seen_cursor = true;
			if ((cursor_doc = e.type == 0x03))
				scan_cursor(&e, out);
		} else if (!seen_n && KEY_IS(&e, "n")) {
			seen_n = true;
			if (is_number(e.type))
				n = as_int64(&e);
		}
	}
	out->code = code ? code : we_code; /* the reply's own first */
	if (!cursor_doc)
		out->n = n; /* writes: documents matched / inserted */
}

/* A BSON document's length at p, checked against avail; 0 when it is not one. */
static inline size_t doc_at(const uint8_t *p, size_t avail)
{
	if (avail < 5)
		return 0;
	int32_t l = rd32(p);
	if (l < 5 || (size_t)l > avail || p[l - 1] != 0)
		return 0;
	return (size_t)l;
}

/* ---- the usual layouts, read without the walk ---- */

/* The elements of an array of documents (a batch), counted; -1 when an
 * element is not a document or does not fit. */
static int64_t count_docs(const uint8_t *a, size_t al)
{
	const uint8_t *p = a + 4, *end = a + al - 1;
	int64_t n = 0;
	while (p < end) {
		if (*p != 0x03)
			return -1;
		const uint8_t *k = p + 1;
		while (k < end && *k)
			k++;
		if (k >= end)
			return -1;
		size_t dl = doc_at(k + 1, (size_t)(end - k - 1));
		if (!dl)
			return -1;
		p = k + 1 + dl;
		n++;
	}
	return n;
}

/* The n bytes at p as a little-endian number, to compare a type byte and
 * a key with one load (the bytes are known to be there). */
static uint64_t ld(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	memcpy(&v, p, n);
	return le64toh(v);
}

/* A type byte and a key as ld() reads them: bytes a.. in little-endian
 * order. */
#define LE4(a, b, c, d)                                                                            \
	((uint64_t)(a) | (uint64_t)(b) << 8 | (uint64_t)(c) << 16 | (uint64_t)(d) << 24)
#define LE8(a, b, c, d, e, f, g, h) (LE4(a, b, c, d) | LE4(e, f, g, h) << 32)

static const uint64_t K_CURSOR = LE8(0x03, 'c', 'u', 'r', 's', 'o', 'r', 0),
                      K_FIRSTBA = LE8(0x04, 'f', 'i', 'r', 's', 't', 'B', 'a'),
                      K_TCH = LE4('t', 'c', 'h', 0),
                      K_NEXTBAT = LE8(0x04, 'n', 'e', 'x', 't', 'B', 'a', 't'),
                      K_CH = LE4('c', 'h', 0, 0), K_OK = LE4(0x01, 'o', 'k', 0),
                      K_N = LE4(0x10, 'n', 0, 0),
                      K_NMODIFI = LE8(0x10, 'n', 'M', 'o', 'd', 'i', 'f', 'i'),
                      K_ED = LE4('e', 'd', 0, 0);

/* "ok" as a double at p (end: the body's NUL), and 1.0. */
static bool ok_one_at(const uint8_t *p, const uint8_t *end)
{
	return end - p >= 1 + 3 + 8 && ld(p, 4) == K_OK && rddbl(p + 4) == 1.0;
}

/* The key of the batch at c + 4 (a cursor document of at least 20 bytes):
 * its length with the NUL, 0 when it is no batch. */
static size_t batch_key(const uint8_t *c)
{
	uint64_t head = ld(c + 4, 8), tail = ld(c + 12, 4);
	if (head == K_FIRSTBA && tail == K_TCH)
		return 11;
	if (head == K_NEXTBAT && (tail & 0xffffff) == K_CH)
		return 10;
	return 0;
}

/* A successful reply in the layout servers write: {cursor: {firstBatch or
 * nextBatch: [documents], ...}, ok: 1, ...}, where reading stops at ok
 * (what follows, $clusterTime and operationTime, says nothing kept here,
 * and a cursor's reply holds no writeErrors), or a write's {n: N,
 * [nModified: M,] ok: 1} with ok last (else writeErrors could follow). An
 * error (ok: 0, code) is not this layout. False: read it the long way. */
static bool scan_usual(const uint8_t *b, size_t bl, reply_scan *out)
{
	const uint8_t *p = b + 4, *end = b + bl - 1;
	if (end - p > 8 + 5 && ld(p, 8) == K_CURSOR) {
		const uint8_t *c = p + 8;
		size_t cl = doc_at(c, (size_t)(end - c));
		size_t kl = cl >= 4 + 1 + 10 + 5 ? batch_key(c) : 0;
		const uint8_t *a = c + 5 + kl;
		size_t al = kl ? doc_at(a, (size_t)(c + cl - 1 - a)) : 0;
		int64_t n = al ? count_docs(a, al) : -1;
		if (n < 0 || !ok_one_at(c + cl, end))
			return false;
		out->ok = true;
		out->n = n;
		out->batch = a;
		out->batch_len = al;
		out->first = kl == 11;
		return true;
	}
	if (end - p >= 1 + 2 + 4 && ld(p, 3) == K_N) {
		int64_t n = rd32(p + 3);
		p += 7;
		if (end - p >= 1 + 10 + 4 && ld(p, 8) == K_NMODIFI && ld(p + 8, 3) == K_ED)
			p += 15;
		if (!ok_one_at(p, end) || p + 1 + 3 + 8 != end)
			return false;
		out->ok = true;
		out->n = n;
		return true;
	}
	return false;
}

/* The body of a whole reply: an OP_MSG's kind-0 section (first, as
 * servers send it), or an OP_REPLY's first document. Returns its opcode,
 * 0 when msg/len is neither or its body is not a document. */
static int32_t reply_body(const uint8_t *msg, size_t len, const uint8_t **doc, size_t *dl)
{
	if (len < HEADER_LEN + 5 || (size_t)rd32(msg) != len)
		return 0;
	int32_t op = rd32(msg + 12);
	if (op == OP_MSG_CODE) {
		uint32_t flags = (uint32_t)rd32(msg + HEADER_LEN);
		size_t end = len - ((flags & CHECKSUM_PRESENT) ? 4 : 0);
		const size_t at = HEADER_LEN + 4;
		if (end <= at + 1 || msg[at] != 0)
			return 0;
		*doc = msg + at + 1;
		*dl = doc_at(*doc, end - at - 1);
	} else if (op == OP_REPLY_CODE && len >= HEADER_LEN + 20 + 5) {
		*doc = msg + HEADER_LEN + 20;
		*dl = doc_at(*doc, len - HEADER_LEN - 20);
	} else {
		return 0;
	}
	return *dl ? op : 0;
}

bool reply_scan_read(const uint8_t *msg, size_t len, reply_scan *out)
{
	out->ok = false;
	out->code = 0;
	out->write_errors = 0;
	out->n = 0;
	out->batch = NULL;
	out->batch_len = 0;
	out->first = false;
	const uint8_t *doc;
	size_t dl;
	int32_t op = reply_body(msg, len, &doc, &dl);
	if (op == OP_MSG_CODE) {
		if (!scan_usual(doc, dl, out))
			scan_body(doc, dl, out);
		return true;
	}
	if (op == OP_REPLY_CODE) {
		scan_body(doc, dl, out);
		out->n = rd32(msg + HEADER_LEN + 12);
		return true;
	}
	return false;
}

bool reply_scan_indexes_unchanged(const uint8_t *msg, size_t len)
{
	const uint8_t *doc;
	size_t dl;
	if (!reply_body(msg, len, &doc, &dl))
		return false;
	walk w;
	elem e;
	bool seen_before = false, seen_after = false, before_n = false, after_n = false;
	int64_t before = 0, after = 0;
	walk_init(&w, doc, dl);
	while (walk_next(&w, &e)) {
		if (!seen_before && KEY_IS(&e, "numIndexesBefore")) {
			seen_before = true;
			if ((before_n = is_number(e.type)))
				before = as_int64(&e);
		} else if (!seen_after && KEY_IS(&e, "numIndexesAfter")) {
			seen_after = true;
			if ((after_n = is_number(e.type)))
				after = as_int64(&e);
		}
	}
	return before_n && after_n && before == after;
}

/* ---- the values a batch holds ---- */

/* A document's or array's values into vf, and below them depth levels
 * more. VALUE_WALK_FULL when every value is in; VALUE_WALK_CUT when
 * VALUE_FILTER_MAX values were reached first; VALUE_WALK_BAD on
 * malformed bytes. */
enum { VALUE_WALK_FULL, VALUE_WALK_CUT, VALUE_WALK_BAD };

static int add_values(value_filter *vf, const uint8_t *doc, size_t len, int depth)
{
	walk w;
	elem e;
	walk_init(&w, doc, len);
	while (walk_next(&w, &e)) {
		if (value_checkable(e.type, e.vlen)) {
			uint8_t twin[29], t2;
			size_t l2;
			if (vf->n >= VALUE_FILTER_MAX)
				return VALUE_WALK_CUT;
			value_filter_add(vf, value_hash(e.type, e.val, e.vlen));
			if (value_twin(e.type, e.val, e.vlen, twin, &t2, &l2)) {
				if (vf->n >= VALUE_FILTER_MAX)
					return VALUE_WALK_CUT;
				value_filter_add(vf, value_hash(t2, twin, l2));
			}
		}
		if ((e.type == 0x03 || e.type == 0x04) && depth > 0) {
			int r = add_values(vf, e.val, e.vlen, depth - 1);
			if (r != VALUE_WALK_FULL)
				return r;
		}
	}
	return w.p == w.end ? VALUE_WALK_FULL : VALUE_WALK_BAD;
}

bool reply_scan_values(const reply_scan *sc, value_filter *vf)
{
	walk w;
	elem e;
	value_filter_clear(vf);
	if (!sc->batch || !sc->first)
		return false;
	walk_init(&w, sc->batch, sc->batch_len);
	for (int docs = 0; walk_next(&w, &e); docs++) {
		if (e.type != 0x03)
			return false;
		if (docs == VALUE_FILTER_DOCS)
			return true; /* the first ones: not all */
		int r = add_values(vf, e.val, e.vlen, 2);
		if (r == VALUE_WALK_BAD)
			return false;
		if (r == VALUE_WALK_CUT) /* not known when the first is cut short */
			return docs > 0;
	}
	vf->all = w.p == w.end;
	return vf->all;
}
