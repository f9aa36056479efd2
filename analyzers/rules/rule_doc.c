/* large-document (rule_doc.h). */
#include "analyzers/rules/rule_doc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyzers/rules/rule_api.h"
#include "protocol/wire_iter.h"

#define DOC_MAX_DEPTH   200 /* what the server's parser accepts for commands */
#define DOC_EXPR_DEPTH  100 /* update pipeline expressions: each level holds a path */
#define DOC_SHAPE_PARTS 12  /* a statement's parts, and the field */

/* Appends ".key" (or "key" at the top) to path; returns the old length. */
static size_t path_push(char *path, size_t cap, const char *key)
{
	size_t len = strlen(path);
	if (len + 2 < cap)
		snprintf(path + len, cap - len, "%s%s", len ? "." : "", key);
	return len;
}

/* The least bytes an array with more than max elements takes: 5 of header
 * and trailer, and per element a type byte, a key of at least one digit and
 * its NUL (a null value takes no more). */
static uint64_t least_bytes(uint32_t max)
{
	return 5 + 3 * ((uint64_t)max + 1);
}

/* ---- a raw walk over BSON bytes ----
 *
 * bson_iter_next decodes and checks every element, which made walking a
 * large document of many short strings costly (tests/bench/README.md);
 * this walk needs only each element's type, key and extent. Every length is checked
 * against its container, so corrupt bytes end the walk (and report
 * nothing). */

typedef struct raw_el {
	uint8_t type;
	const char *key;      /* NUL-terminated inside the container */
	const uint8_t *value; /* the value's bytes */
	uint32_t len;
} raw_el;

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A length-prefixed value at p with avail bytes left: head bytes (the
 * prefix, and a subtype for binary), a body of l >= min bytes, extra
 * fixed bytes after it. 0 when it does not fit. */
static uint32_t prefixed(const uint8_t *p, uint32_t avail, uint32_t min, uint32_t head,
                         uint32_t extra)
{
	/* the 4-byte prefix must fit too: a document's head is 0 (its length
	 * counts itself), and 1-3 bytes before the container's end are no
	 * length (fuzz_rule_doc: crash-doc-short-length-prefix) */
	if (avail < 4 || avail < head + extra)
		return 0;
	uint32_t l = le32(p);
	if (l < min || l > avail - head - extra)
		return 0;
	return head + l + extra;
}

/* Types whose value takes no bytes: undefined, null, maxKey, minKey. */
static bool empty_value(uint8_t t)
{
	return t == 0x06 || t == 0x0A || t == 0x7F || t == 0xFF;
}

/* The element at *pos of the container d (dlen bytes, its trailing NUL
 * checked by the caller); false at the end or on bytes that do not fit.
 * always_inline: it runs per element in two loops, and the compiler's size
 * heuristics do not always inline it there on their own; a call per
 * element is a measurable share of the walk (tests/bench/README.md). */
static inline __attribute__((always_inline)) bool raw_next(const uint8_t *d, uint32_t dlen,
                                                           uint32_t *pos, raw_el *el)
{
	uint32_t at = *pos, n;
	if (at >= dlen - 1 || d[at] == 0)
		return false;
	el->type = d[at++];
	el->key = (const char *)d + at;
	while (at < dlen - 1 && d[at] != 0) /* keys are short: no memchr call */
		at++;
	if (at >= dlen - 1)
		return false;
	at++;
	uint32_t avail = dlen - 1 - at;
	const uint8_t *v = d + at;
	switch (el->type) {
	case 0x01: /* double */
	case 0x09: /* date */
	case 0x11: /* timestamp */
	case 0x12: /* int64 */
		n = 8;
		break;
	case 0x02: /* string */
	case 0x0D: /* code */
	case 0x0E: /* symbol */
		n = prefixed(v, avail, 1, 4, 0);
		break;
	case 0x03: /* document */
	case 0x04: /* array */
	case 0x0F: /* code with scope: its length counts itself */
		n = prefixed(v, avail, 5, 0, 0);
		break;
	case 0x05: /* binary: length, subtype, bytes */
		n = prefixed(v, avail, 0, 5, 0);
		break;
	case 0x0C: /* DBPointer: a string, then an ObjectId */
		n = prefixed(v, avail, 1, 4, 12);
		break;
	case 0x07: /* ObjectId */
		n = 12;
		break;
	case 0x08: /* bool */
		n = 1;
		break;
	case 0x10: /* int32 */
		n = 4;
		break;
	case 0x13: /* decimal128 */
		n = 16;
		break;
	case 0x0B: { /* regex: pattern and options, two C strings */
		const uint8_t *a = memchr(v, 0, avail);
		const uint8_t *b = a ? memchr(a + 1, 0, avail - (uint32_t)(a + 1 - v)) : NULL;
		if (!b)
			return false;
		n = (uint32_t)(b + 1 - v);
		break;
	}
	default:
		if (!empty_value(el->type))
			return false;
		n = 0;
		break;
	}
	if ((n == 0 && !empty_value(el->type)) || n > avail)
		return false;
	el->value = v;
	el->len = n;
	*pos = at + n;
	return true;
}

/* Whether d (dlen bytes) is framed as a document or array: its length
 * prefix is its size and it ends in a NUL. */
static bool framed(const uint8_t *d, uint32_t dlen)
{
	return dlen >= 5 && le32(d) == dlen && d[dlen - 1] == 0;
}

/* The elements of the container d (dlen bytes); 0 when it is not framed. */
static uint64_t count_elements(const uint8_t *d, uint32_t dlen)
{
	raw_el el;
	uint64_t n = 0;
	if (!framed(d, dlen))
		return 0;
	for (uint32_t pos = 4; raw_next(d, dlen, &pos, &el);)
		n++;
	return n;
}

/* The container d of dlen bytes (an array when is_array): the first array
 * under it, itself included, with more than max elements. Containers
 * smaller than least cannot hold one and are not entered. */
static bool long_array(const uint8_t *d, uint32_t dlen, bool is_array, uint32_t max, uint64_t least,
                       char *path, size_t cap, doc_hit *hit, int depth)
{
	raw_el el;
	uint32_t pos;
	if (depth > DOC_MAX_DEPTH || !framed(d, dlen))
		return false;
	if (is_array) {
		uint64_t n = count_elements(d, dlen);
		if (n > max) {
			hit->too_big = false;
			hit->size = n;
			snprintf(hit->path, sizeof hit->path, "%s", path);
			return true;
		}
	}
	for (pos = 4; raw_next(d, dlen, &pos, &el);) {
		if ((el.type != 0x03 && el.type != 0x04) || el.len < least)
			continue; /* strings, binaries, small containers: skipped */
		size_t at = path_push(path, cap, el.key);
		bool found = long_array(el.value, el.len, el.type == 0x04, max, least, path, cap,
		                        hit, depth + 1);
		path[at] = '\0';
		if (found)
			return true;
	}
	return false;
}

/* The field holding most of doc, followed down while one field holds more
 * than half of its container: appended to hit->path (doc's own path), and
 * its size in hit->size (doc's size when no field holds that much). */
static void largest_under(const bson_t *doc, doc_hit *hit)
{
	bson_iter_t it, best;
	uint64_t whole = doc->len, best_size;
	hit->size = doc->len;
	if (!bson_iter_init(&it, doc))
		return;
	for (int depth = 0; depth < DOC_MAX_DEPTH; depth++) {
		best_size = 0;
		while (wire_iter_next(&it)) {
			uint64_t size = it.next_off - it.off; /* the whole element */
			if (size > best_size) {
				best_size = size;
				best = it;
			}
		}
		if (best_size == 0 || best_size * 2 <= whole)
			return;
		path_push(hit->path, sizeof hit->path, wire_iter_key(&best));
		hit->size = best_size;
		whole = best_size;
		if (!(WIRE_ITER_HOLDS_DOCUMENT(&best) || WIRE_ITER_HOLDS_ARRAY(&best)) ||
		    !wire_iter_recurse(&best, &it))
			return;
	}
}

static void hit_init(doc_hit *hit)
{
	hit->path[0] = '\0';
	hit->write = DOC_WRITE_DOCUMENT;
	hit->op = NULL;
	hit->each = hit->concat = false;
	hit->slice = 0;
}

bool rule_doc_check(const bson_t *doc, uint32_t max_bytes, uint32_t max_array, doc_hit *hit)
{
	hit_init(hit);
	hit->bytes = doc->len;
	if (doc->len > max_bytes) {
		hit->too_big = true;
		largest_under(doc, hit);
		return true;
	}
	uint64_t least = least_bytes(max_array);
	if (doc->len < least)
		return false; /* too small to hold such an array: the common case */
	char path[sizeof hit->path] = "";
	return long_array(bson_get_data(doc), doc->len, false, max_array, least, path, sizeof path,
	                  hit, 0);
}

/* ---- writes that grow a document in place ----
 *
 * Update operators and update pipelines, read for the values they write
 * as the request spells them: a value, an $each, a literal. Paths are
 * built only on the way to a value big enough to matter. */

typedef struct doc_limits {
	uint32_t max_bytes, max_array;
	uint64_t least; /* least_bytes(max_array) */
} doc_limits;

/* The bytes of the value an iterator is on, and its type. */
typedef struct doc_val {
	const uint8_t *p;
	uint32_t len;
	bson_type_t type;
} doc_val;

static doc_val val_of(const bson_iter_t *it)
{
	const char *k = wire_iter_key(it);
	uint32_t off = it->key + (uint32_t)strlen(k) + 1;
	doc_val v = {it->raw + off, it->next_off - off, wire_iter_type(it)};
	return v;
}

static bool is_container(bson_type_t t)
{
	return t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY;
}

static void set_path(doc_hit *hit, const char *prefix, const char *key)
{
	if (!prefix[0] || !key)
		snprintf(hit->path, sizeof hit->path, "%s", prefix[0] ? prefix : key ? key : "");
	else
		snprintf(hit->path, sizeof hit->path, "%s.%s", prefix, key);
}

/* v, written at path, is over maxBytes: the hit, down to its largest part
 * when descend (a pushed value's parts have no path in the document). */
static bool too_big_at(const char *path, doc_val v, bool descend, doc_hit *hit)
{
	bson_t view;
	hit->too_big = true;
	hit->bytes = v.len;
	set_path(hit, path, NULL);
	hit->size = v.len;
	if (descend && is_container(v.type) && bson_init_static(&view, v.p, v.len))
		largest_under(&view, hit);
	return true;
}

/* A value stored as it is written ($set's, $literal's) at path: over
 * maxBytes, or holding an over-long array, as an inserted document's. */
static bool judge_stored(const char *path, const bson_iter_t *it, const doc_limits *L, doc_hit *hit)
{
	doc_val v = val_of(it);
	if (v.len > L->max_bytes)
		return too_big_at(path, v, true, hit);
	if (!is_container(v.type) || v.len < L->least)
		return false;
	char buf[sizeof hit->path];
	snprintf(buf, sizeof buf, "%s", path);
	if (!long_array(v.p, v.len, v.type == BSON_TYPE_ARRAY, L->max_array, L->least, buf,
	                sizeof buf, hit, 0))
		return false;
	hit->bytes = v.len;
	return true;
}

/* One member of $push / $addToSet: {field: value} appends one value (its
 * bytes judged), {field: {$each: [...], $slice: n}} appends every element
 * of $each, of which $push keeps |n| at most. */
static bool judge_push(bool push, const bson_iter_t *f, const doc_limits *L, doc_hit *hit)
{
	bson_iter_t c, each;
	bool has_each = false, has_slice = false;
	int64_t slice = 0;
	if (WIRE_ITER_HOLDS_DOCUMENT(f) && wire_iter_recurse(f, &c)) {
		while (wire_iter_next(&c)) {
			const char *k = wire_iter_key(&c);
			if (key_eq(k, "$each") && WIRE_ITER_HOLDS_ARRAY(&c)) {
				each = c;
				has_each = true;
			} else if (key_eq(k, "$slice") && WIRE_ITER_HOLDS_NUMBER(&c)) {
				slice = bson_iter_as_int64(&c);
				has_slice = push;
			}
		}
	}
	const char *field = wire_iter_key(f);
	doc_val v = val_of(has_each ? &each : f);
	if (!has_each)
		return v.len > L->max_bytes && too_big_at(field, v, false, hit);
	uint64_t added = v.len < L->least ? 0 : count_elements(v.p, v.len), kept = added;
	if (has_slice) {
		uint64_t cap = slice == INT64_MIN ? (uint64_t)INT64_MAX + 1
		               : slice < 0        ? (uint64_t)-slice
		                                  : (uint64_t)slice;
		if (cap < kept)
			kept = cap;
	}
	hit->each = true;
	if (kept > L->max_array) {
		hit->too_big = false;
		hit->size = added;
		hit->slice = kept < added ? slice : 0;
		set_path(hit, field, NULL);
		return true;
	}
	/* $slice dropping elements: what stays is not known, nor its bytes */
	if (kept == added && v.len > L->max_bytes)
		return too_big_at(field, v, false, hit);
	hit->each = false;
	return false;
}

/* The literal that an update operator writes: its name, or NULL. */
static const char *write_op(const char *k, bool *push)
{
	*push = false;
	if (k[0] != '$')
		return NULL;
	if (key_eq(k, "$set"))
		return "$set";
	if (key_eq(k, "$setOnInsert"))
		return "$setOnInsert";
	*push = true;
	if (key_eq(k, "$push"))
		return "$push";
	if (key_eq(k, "$addToSet"))
		return "$addToSet";
	return NULL;
}

/* Every operator of the document (mongod applies a repeated one each time). */
static bool operator_update(const bson_iter_t *u, const doc_limits *L, doc_hit *hit)
{
	bson_iter_t op, f;
	bool push;
	if (!wire_iter_recurse(u, &op))
		return false;
	while (wire_iter_next(&op)) {
		const char *name = write_op(wire_iter_key(&op), &push);
		if (!name || !WIRE_ITER_HOLDS_DOCUMENT(&op) || !wire_iter_recurse(&op, &f))
			continue;
		while (wire_iter_next(&f)) {
			if (push ? judge_push(key_eq(name, "$push"), &f, L, hit)
			         : judge_stored(wire_iter_key(&f), &f, L, hit)) {
				hit->write = push ? DOC_WRITE_PUSH : DOC_WRITE_SET;
				hit->op = name;
				return true;
			}
		}
	}
	return false;
}

static bool judge_expr(const char *path, const bson_iter_t *e, const doc_limits *L, doc_hit *hit,
                       int depth);

/* An object literal's fields, each assigned at path.field. */
static bool judge_fields(const char *path, const bson_iter_t *obj, const doc_limits *L,
                         doc_hit *hit, int depth)
{
	bson_iter_t c;
	char sub[sizeof hit->path];
	if (depth > DOC_EXPR_DEPTH || !wire_iter_recurse(obj, &c))
		return false;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		if (path[0])
			snprintf(sub, sizeof sub, "%s.%s", path, k);
		else
			snprintf(sub, sizeof sub, "%s", k);
		if (judge_expr(sub, &c, L, hit, depth + 1))
			return true;
	}
	return false;
}

/* An array literal, or {$literal: [...]}: its elements; else 0. */
static uint64_t literal_elements(const bson_iter_t *operand)
{
	bson_iter_t c;
	const bson_iter_t *a = operand;
	if (WIRE_ITER_HOLDS_DOCUMENT(operand)) {
		if (!wire_iter_recurse(operand, &c) || !wire_iter_next(&c) ||
		    !key_eq(wire_iter_key(&c), "$literal"))
			return 0;
		a = &c;
	}
	if (!WIRE_ITER_HOLDS_ARRAY(a))
		return 0;
	doc_val v = val_of(a);
	return count_elements(v.p, v.len);
}

/* {$concatArrays: [...]}: the result holds at least its literal operands'
 * elements (a field operand adds an unknown number). */
static bool judge_concat(const char *path, const bson_iter_t *args, const doc_limits *L,
                         doc_hit *hit)
{
	bson_iter_t c;
	uint64_t n = 0;
	if (!WIRE_ITER_HOLDS_ARRAY(args) || !wire_iter_recurse(args, &c))
		return false;
	while (wire_iter_next(&c))
		n += literal_elements(&c);
	if (n <= L->max_array)
		return false;
	hit->too_big = false;
	hit->concat = true;
	hit->size = n;
	set_path(hit, path, NULL);
	return true;
}

/* {$mergeObjects: [...]} (or one operand): each object literal's fields
 * land at path. */
static bool judge_merge(const char *path, const bson_iter_t *args, const doc_limits *L,
                        doc_hit *hit, int depth)
{
	bson_iter_t c;
	if (!WIRE_ITER_HOLDS_ARRAY(args))
		return judge_expr(path, args, L, hit, depth + 1);
	if (!wire_iter_recurse(args, &c))
		return false;
	while (wire_iter_next(&c))
		if (WIRE_ITER_HOLDS_DOCUMENT(&c) && judge_expr(path, &c, L, hit, depth + 1))
			return true;
	return false;
}

/* An array literal: over the limits itself, or in one of its elements. */
static bool judge_array_literal(const char *path, const bson_iter_t *e, doc_val v,
                                const doc_limits *L, doc_hit *hit, int depth)
{
	bson_iter_t c;
	if (v.len > L->max_bytes)
		return too_big_at(path, v, true, hit);
	if (v.len < L->least)
		return false;
	uint64_t n = count_elements(v.p, v.len);
	if (n > L->max_array) {
		hit->too_big = false;
		hit->size = n;
		set_path(hit, path, NULL);
		return true;
	}
	if (!wire_iter_recurse(e, &c))
		return false;
	while (wire_iter_next(&c)) {
		char sub[sizeof hit->path];
		snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", wire_iter_key(&c));
		if (is_container(wire_iter_type(&c)) && judge_expr(sub, &c, L, hit, depth + 1))
			return true;
	}
	return false;
}

/* An aggregation expression assigned at path by an update pipeline: what
 * it spells out literally (see rule_doc.h). */
static bool judge_expr(const char *path, const bson_iter_t *e, const doc_limits *L, doc_hit *hit,
                       int depth)
{
	bson_iter_t c;
	if (depth > DOC_EXPR_DEPTH)
		return false;
	doc_val v = val_of(e);
	if (v.len < L->least && v.len <= L->max_bytes)
		return false; /* too small to hold either */
	switch (v.type) {
	case BSON_TYPE_ARRAY:
		return judge_array_literal(path, e, v, L, hit, depth);
	case BSON_TYPE_DOCUMENT:
		if (!wire_iter_recurse(e, &c) || !wire_iter_next(&c))
			return false;
		if (wire_iter_key(&c)[0] != '$') /* an object literal */
			return v.len > L->max_bytes ? too_big_at(path, v, true, hit)
			                            : judge_fields(path, e, L, hit, depth);
		if (key_eq(wire_iter_key(&c), "$literal"))
			return judge_stored(path, &c, L, hit);
		if (key_eq(wire_iter_key(&c), "$concatArrays"))
			return judge_concat(path, &c, L, hit);
		if (key_eq(wire_iter_key(&c), "$mergeObjects"))
			return judge_merge(path, &c, L, hit, depth);
		return false;
	case BSON_TYPE_UTF8:
		if (v.len > 5 && v.p[4] == '$')
			return false; /* a field path or a variable */
		                      /* fall through */
	default:
		return v.len > L->max_bytes && too_big_at(path, v, true, hit);
	}
}

/* The stages that write: $set / $addFields assign fields, $replaceWith and
 * $replaceRoot's newRoot give the whole document. */
static bool pipeline_update(const bson_iter_t *u, const doc_limits *L, doc_hit *hit)
{
	bson_iter_t st, c, root;
	if (!wire_iter_recurse(u, &st))
		return false;
	while (wire_iter_next(&st)) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&st) || !wire_iter_recurse(&st, &c) ||
		    !wire_iter_next(&c))
			continue;
		const char *k = wire_iter_key(&c), *name = NULL;
		bool found = false;
		if (key_eq(k, "$set") || key_eq(k, "$addFields")) {
			name = k[1] == 's' ? "$set" : "$addFields";
			found = WIRE_ITER_HOLDS_DOCUMENT(&c) && judge_fields("", &c, L, hit, 0);
		} else if (key_eq(k, "$replaceWith")) {
			name = "$replaceWith";
			found = judge_expr("", &c, L, hit, 0);
		} else if (key_eq(k, "$replaceRoot")) {
			name = "$replaceRoot";
			found = WIRE_ITER_HOLDS_DOCUMENT(&c) && wire_iter_recurse(&c, &root) &&
			        bson_iter_find(&root, "newRoot") &&
			        judge_expr("", &root, L, hit, 0);
		}
		if (found) {
			hit->write = DOC_WRITE_STAGE;
			hit->op = name;
			return true;
		}
	}
	return false;
}

bool rule_doc_update(const bson_iter_t *u, uint32_t max_bytes, uint32_t max_array, doc_hit *hit)
{
	bson_iter_t first;
	doc_limits L = {max_bytes, max_array, least_bytes(max_array)};
	hit_init(hit);
	hit->bytes = 0;
	if (WIRE_ITER_HOLDS_ARRAY(u))
		return pipeline_update(u, &L, hit);
	if (!WIRE_ITER_HOLDS_DOCUMENT(u) || !wire_iter_recurse(u, &first) ||
	    !wire_iter_next(&first) || wire_iter_key(&first)[0] != '$')
		return false; /* a replacement document: rule_doc_check's */
	return operator_update(u, &L, hit);
}

/* ---- the rule ---- */

typedef struct doc_facts {
	doc_hit hit;
	bool replacement;
	uint32_t max_bytes, max_array;
} doc_facts;

/* GridFS keeps a file as chunks of chunkSizeBytes in "<bucket>.chunks":
 * large by design, and what the rule's own advice points to. */
static bool gridfs_chunks(const char *coll)
{
	size_t n = coll ? strlen(coll) : 0;
	return n > 7 && memcmp(coll + n - 7, ".chunks", 7) == 0;
}

/* The rule's limits at s: its parameters, with no size limit on GridFS
 * chunks. */
static void limits_at(rule_ctx *c, const rule_site *s, doc_facts *f)
{
	const rule_config *rc = rule_ctx_config(c, RULE_LARGE_DOCUMENT);
	f->max_bytes = gridfs_chunks(s->coll) ? UINT32_MAX : rc->params[DOC_PARAM_MAX_BYTES];
	f->max_array = rc->params[DOC_PARAM_MAX_ARRAY_LENGTH];
}

/* Reports f with the offending field's path added to the shape. */
static void report_with_field(rule_ctx *c, const rule_site *s, const doc_facts *f)
{
	/* The shape names the field too: a document is data, so without it
	 * every large document of a collection would be one finding, and a
	 * second field's problem would hide in the first one's count. */
	shape_part parts[DOC_SHAPE_PARTS];
	size_t n = s->shape->nparts < DOC_SHAPE_PARTS - 1 ? s->shape->nparts : DOC_SHAPE_PARTS - 1;
	if (n) /* an insert's shape has no parts (and parts is NULL) */
		memcpy(parts, s->shape->parts, n * sizeof(*parts));
	parts[n].key = f->hit.too_big ? "largeDocument" : "longArray";
	parts[n].mode = SHAPE_VERBATIM;
	parts[n].str = f->hit.path[0] ? f->hit.path : "(the whole document)";
	shape_spec spec = *s->shape;
	spec.parts = parts;
	spec.nparts = n + 1;
	rule_site site = *s;
	site.shape = &spec;
	rule_report(c, &site, RULE_LARGE_DOCUMENT, f);
}

/* An inserted document, against the limits at s: walked only when a
 * finding could still change something (rule_wanted). */
static void check_document(rule_ctx *c, const rule_site *s, const bson_t *doc)
{
	if (!rule_wanted(c, s, RULE_LARGE_DOCUMENT))
		return;
	doc_facts f = {.replacement = false};
	limits_at(c, s, &f);
	if (rule_doc_check(doc, f.max_bytes, f.max_array, &f.hit))
		report_with_field(c, s, &f);
}

/* The least bytes a document or update must have to be over either limit. */
static uint64_t floor_of(uint32_t max_bytes, uint32_t max_array)
{
	uint64_t bytes = (uint64_t)max_bytes + 1, array = least_bytes(max_array);
	return bytes < array ? bytes : array;
}

/* A replacement document is judged as an inserted one; an operator update
 * or a pipeline by what it writes. Most updates are smaller than either
 * limit: one comparison. */
static void check_update(rule_ctx *c, const rule_site *s, const bson_iter_t *u)
{
	bson_iter_t first;
	bson_t doc;
	/* Written only past the floor: the hit holds a path buffer, and
	 * zeroing it on every statement would cost more than the rest of this
	 * check. */
	doc_facts f;
	if (!WIRE_ITER_HOLDS_DOCUMENT(u) && !WIRE_ITER_HOLDS_ARRAY(u))
		return;
	const rule_config *rc = rule_ctx_config(c, RULE_LARGE_DOCUMENT);
	doc_val v = val_of(u);
	/* the parameters' floor: GridFS's exemption only raises it */
	if (v.len <
	        floor_of(rc->params[DOC_PARAM_MAX_BYTES], rc->params[DOC_PARAM_MAX_ARRAY_LENGTH]) ||
	    !rule_wanted(c, s, RULE_LARGE_DOCUMENT))
		return;
	memset(&f, 0, sizeof(f));
	limits_at(c, s, &f);
	if (WIRE_ITER_HOLDS_DOCUMENT(u) && wire_iter_recurse(u, &first) && wire_iter_next(&first) &&
	    wire_iter_key(&first)[0] != '$') {
		f.replacement = true;
		if (bson_init_static(&doc, v.p, v.len) &&
		    rule_doc_check(&doc, f.max_bytes, f.max_array, &f.hit))
			report_with_field(c, s, &f);
		return;
	}
	if (rule_doc_update(u, f.max_bytes, f.max_array, &f.hit))
		report_with_field(c, s, &f);
}

/* The detail of a write by an update operator or pipeline stage. */
static void update_detail(text_buf *t, const rule_site *s, const doc_facts *f)
{
	const doc_hit *h = &f->hit;
	bool add_to_set = h->write == DOC_WRITE_PUSH && key_eq(h->op, "$addToSet");
	text_printf(t, "%s%s", h->write == DOC_WRITE_STAGE ? "update pipeline stage " : "", h->op);
	if (h->too_big && h->write == DOC_WRITE_PUSH) {
		text_printf(
		    t, " appends %s%" PRIu32 " bytes to \"%s\"%s for %s, over maxBytes %" PRIu32,
		    h->each ? "" : "a value of ", h->bytes, h->path,
		    h->each ? " in one write ($each)" : "", s->ns, f->max_bytes);
	} else if (h->too_big) {
		text_printf(t, " writes %s of %" PRIu32 " bytes for %s, over maxBytes %" PRIu32,
		            key_eq(h->op, "$replaceWith") || key_eq(h->op, "$replaceRoot")
		                ? "a document"
		                : "a value",
		            h->bytes, s->ns, f->max_bytes);
		if (h->path[0])
			text_printf(t, "; field \"%s\" holds %" PRIu64 " bytes of it", h->path,
			            h->size);
	} else if (h->write == DOC_WRITE_PUSH) {
		text_printf(t, " %s %" PRIu64 " elements to \"%s\" in one write",
		            add_to_set ? "adds up to" : "appends", h->size, h->path);
		if (h->slice)
			text_printf(t, " and its $slice: %" PRId64 " keeps more than", h->slice);
		else
			text_printf(t, " ($each%s) for %s, over",
			            add_to_set ? "; $addToSet has no $slice" : " with no $slice",
			            s->ns);
		text_printf(t, " maxArrayLength %" PRIu32, f->max_array);
		if (h->slice)
			text_printf(t, ", for %s", s->ns);
	} else if (h->concat) {
		text_printf(t,
		            " appends at least %" PRIu64 " literal elements to \"%s\" with "
		            "$concatArrays for %s, over maxArrayLength %" PRIu32,
		            h->size, h->path, s->ns, f->max_array);
	} else {
		text_printf(t,
		            " writes array \"%s\" of %" PRIu64 " elements for %s, over "
		            "maxArrayLength %" PRIu32,
		            h->path, h->size, s->ns, f->max_array);
	}
}

/* The suggestion for an over-long array: where it is appended to in one
 * write, the bound that write can carry. */
static void array_suggestion(text_buf *t, const doc_hit *h)
{
	if (h->write == DOC_WRITE_PUSH && key_eq(h->op, "$addToSet"))
		text_printf(t,
		            "$addToSet has no $slice: add fewer than maxArrayLength elements to "
		            "\"%s\" at a time and bound the set, or",
		            h->path);
	else if (h->write == DOC_WRITE_PUSH)
		text_printf(t,
		            "cap \"%s\" in the same write: {$push: {\"%s\": {$each: [...], "
		            "$slice: -N}}} keeps the newest N (subset pattern); or",
		            h->path, h->path);
	else if (h->concat)
		text_printf(t,
		            "cap \"%s\" in the same write: {$slice: [{$concatArrays: [...]}, -N]} "
		            "keeps the newest N (subset pattern); or",
		            h->path);
	else
		text_printf(t,
		            "bound \"%s\": keep the newest N in the document ($push with $each and "
		            "$slice: -N, subset pattern),",
		            h->path);
	text_str(t, " group the items into bucket documents of a fixed size (bucket pattern), or "
	            "move the overflow beyond N to extra documents flagged on the parent (outlier "
	            "pattern)");
}

static void words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w)
{
	const doc_facts *f = facts;
	const char *what = f->replacement ? "replacement document" : "inserted document";
	bool update = f->hit.write != DOC_WRITE_DOCUMENT;
	text_buf t;
	text_init(&t, w->buf, sizeof(w->buf));
	size_t start = text_mark(&t);
	if (update) {
		update_detail(&t, s, f);
	} else if (f->hit.too_big) {
		text_printf(&t, "%s of %" PRIu32 " bytes for %s is over maxBytes %" PRIu32, what,
		            f->hit.bytes, s->ns, f->max_bytes);
		if (f->hit.path[0])
			text_printf(&t, "; field \"%s\" holds %" PRIu64 " bytes of it", f->hit.path,
			            f->hit.size);
	} else {
		text_printf(&t,
		            "%s for %s holds array \"%s\" of %" PRIu64
		            " elements, over maxArrayLength %" PRIu32,
		            what, s->ns, f->hit.path, f->hit.size, f->max_array);
	}
	w->detail = rule_words_piece(&t, start);
	start = text_mark(&t);
	if (f->hit.too_big) {
		text_str(&t, "keep documents small: move rarely read fields to a second collection "
		             "(subset pattern), split growing lists into bucket documents (bucket "
		             "pattern), and store files and blobs in GridFS");
		if (f->hit.path[0])
			text_printf(&t, " (start with \"%s\")", f->hit.path);
		w->suggestion = rule_words_piece(&t, start);
		w->fix = "move rarely read fields to another collection (subset pattern), bucket "
		         "growing lists, or store blobs in GridFS";
		return;
	}
	array_suggestion(&t, &f->hit);
	w->suggestion = rule_words_piece(&t, start);
	if (f->hit.write == DOC_WRITE_PUSH && key_eq(f->hit.op, "$addToSet")) {
		w->fix =
		    "add fewer elements per write and bound the set, bucket the items, or move "
		    "the overflow to extra documents (outlier pattern)";
		return;
	}
	w->fix = f->hit.each || f->hit.concat
	             ? "cap the array in the write ($slice: -N, subset pattern), bucket the items, "
	               "or move the overflow to extra documents (outlier pattern)"
	             : "keep the newest N elements (subset pattern), bucket the items, or move the "
	               "overflow to extra documents (outlier pattern)";
}

static const rule_param params[] = {
    {"maxBytes", RULE_PARAM_U32, 2097152, 1, 48000000, DOC_PARAM_MAX_BYTES,
     "documents, and values an update writes, larger than this many bytes are reported "
     "(not in <bucket>.chunks, GridFS's chunks)"},
    {"maxArrayLength", RULE_PARAM_U32, 1000, 1, 16777216, DOC_PARAM_MAX_ARRAY_LENGTH,
     "arrays with more elements than this, at any depth, are reported; so are $push / "
     "$addToSet $each lists and $concatArrays literals adding more in one write"},
};

/* A document over maxBytes, or big enough to hold an over-long array. */
static uint32_t document_floor(const rule_config *rc)
{
	uint64_t floor =
	    floor_of(rc->params[DOC_PARAM_MAX_BYTES], rc->params[DOC_PARAM_MAX_ARRAY_LENGTH]);
	return floor > UINT32_MAX ? UINT32_MAX : (uint32_t)floor;
}

static const rule_checks checks = {
    .update = check_update,
    .document = check_document,
    .document_floor = document_floor,
    .words = words,
};

/* The report's design change is titled by the patterns its words (the
 * suggestion) offer, in the order they offer them, so title and text
 * agree: an over-long array is capped (subset), bucketed or split
 * (outlier); a large document moves its rarely read fields out (subset),
 * buckets its lists, or keeps its blobs in GridFS. The words always name
 * them in that order. */
static const char *doc_design_pattern(const rule_report_finding *f)
{
	enum { SUBSET = 1, BUCKET = 2, OUTLIER = 4, GRIDFS = 8 };
	unsigned named = (strstr(f->suggestion, "subset pattern") ? SUBSET : 0) |
	                 (strstr(f->suggestion, "bucket pattern") ? BUCKET : 0) |
	                 (strstr(f->suggestion, "outlier pattern") ? OUTLIER : 0) |
	                 (strstr(f->suggestion, "GridFS") ? GRIDFS : 0);
	switch (named) {
	case SUBSET:
		return "subset pattern";
	case BUCKET:
		return "bucket pattern";
	case SUBSET | BUCKET:
		return "subset or bucket pattern";
	case BUCKET | OUTLIER:
		return "bucket or outlier pattern";
	case SUBSET | BUCKET | GRIDFS:
		return "subset or bucket pattern, or GridFS";
	case GRIDFS:
		return "GridFS";
	default: /* what the row's fix_kind says of the rule */
		return "subset, bucket or outlier pattern";
	}
}

const rule_def rule_doc_def = {
    .id = RULE_LARGE_DOCUMENT,
    .name = "large-document",
    .summary = "an inserted or replacement document, or a value an update writes, is over "
               "maxBytes or holds an array over maxArrayLength",
    .fix_kind = "subset, bucket or outlier pattern; GridFS for blobs",
    .design_pattern = doc_design_pattern,
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .checks = &checks,
};
