/* large-document (rule_doc.h). */
#include "analyzers/rule_doc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyzers/rule_api.h"
#include "protocol/wire_iter.h"

#define DOC_MAX_DEPTH   200 /* what the server's parser accepts for commands */
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
 * checked by the caller); false at the end or on bytes that do not fit. */
static bool raw_next(const uint8_t *d, uint32_t dlen, uint32_t *pos, raw_el *el)
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

/* The container d of dlen bytes (an array when is_array): the first array
 * under it, itself included, with more than max elements. Containers
 * smaller than least cannot hold one and are not entered. */
static bool long_array(const uint8_t *d, uint32_t dlen, bool is_array, uint32_t max, uint64_t least,
                       char *path, size_t cap, doc_hit *hit, int depth)
{
	raw_el el;
	uint32_t pos;
	if (depth > DOC_MAX_DEPTH || dlen < 5 || le32(d) != dlen || d[dlen - 1] != 0)
		return false;
	if (is_array) {
		uint64_t n = 0;
		for (pos = 4; raw_next(d, dlen, &pos, &el);)
			n++;
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

/* The field holding most of the document, followed down while one field
 * holds more than half of its container. */
static void largest_path(const bson_t *doc, doc_hit *hit)
{
	bson_iter_t it, best;
	uint64_t whole = doc->len, best_size;
	hit->path[0] = '\0';
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

bool rule_doc_check(const bson_t *doc, uint32_t max_bytes, uint32_t max_array, doc_hit *hit)
{
	hit->bytes = doc->len;
	if (doc->len > max_bytes) {
		hit->too_big = true;
		largest_path(doc, hit);
		return true;
	}
	uint64_t least = least_bytes(max_array);
	if (doc->len < least)
		return false; /* too small to hold such an array: the common case */
	char path[sizeof hit->path] = "";
	return long_array(bson_get_data(doc), doc->len, false, max_array, least, path, sizeof path,
	                  hit, 0);
}

/* ---- the rule ---- */

typedef struct doc_facts {
	doc_hit hit;
	bool replacement;
	uint32_t max_bytes, max_array;
} doc_facts;

static void judge(rule_ctx *c, const rule_site *s, const bson_t *doc, bool replacement)
{
	if (!rule_wanted(c, s, RULE_LARGE_DOCUMENT))
		return;
	const rule_config *rc = rule_ctx_config(c, RULE_LARGE_DOCUMENT);
	doc_facts f = {.replacement = replacement,
	               .max_bytes = rc->params[DOC_PARAM_MAX_BYTES],
	               .max_array = rc->params[DOC_PARAM_MAX_ARRAY_LENGTH]};
	if (!rule_doc_check(doc, f.max_bytes, f.max_array, &f.hit))
		return;
	/* The shape names the field too: a document is data, so without it
	 * every large document of a collection would be one finding, and a
	 * second field's problem would hide in the first one's count. */
	shape_part parts[DOC_SHAPE_PARTS];
	size_t n = s->shape->nparts < DOC_SHAPE_PARTS - 1 ? s->shape->nparts : DOC_SHAPE_PARTS - 1;
	if (n) /* an insert's shape has no parts (and parts is NULL) */
		memcpy(parts, s->shape->parts, n * sizeof(*parts));
	parts[n].key = f.hit.too_big ? "largeDocument" : "longArray";
	parts[n].mode = SHAPE_VERBATIM;
	parts[n].str = f.hit.path[0] ? f.hit.path : "(the whole document)";
	shape_spec spec = *s->shape;
	spec.parts = parts;
	spec.nparts = n + 1;
	rule_site site = *s;
	site.shape = &spec;
	rule_report(c, &site, RULE_LARGE_DOCUMENT, &f);
}

static void check_document(rule_ctx *c, const rule_site *s, const bson_t *doc)
{
	judge(c, s, doc, false);
}

/* Only a replacement document: its first key is not an operator. */
static void check_update(rule_ctx *c, const rule_site *s, const bson_iter_t *u)
{
	bson_iter_t first;
	uint32_t len;
	const uint8_t *data;
	bson_t doc;
	if (!WIRE_ITER_HOLDS_DOCUMENT(u) || !wire_iter_recurse(u, &first) ||
	    !wire_iter_next(&first) || wire_iter_key(&first)[0] == '$')
		return;
	bson_iter_document(u, &len, &data);
	if (bson_init_static(&doc, data, len))
		judge(c, s, &doc, true);
}

static void words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w)
{
	const doc_facts *f = facts;
	const char *what = f->replacement ? "replacement document" : "inserted document";
	text_buf t;
	text_init(&t, w->buf, sizeof(w->buf));
	size_t start = text_mark(&t);
	if (f->hit.too_big) {
		text_printf(&t, "%s of %" PRIu32 " bytes for %s is over maxBytes %" PRIu32, what,
		            f->hit.bytes, s->ns, f->max_bytes);
		if (f->hit.path[0])
			text_printf(&t, "; field \"%s\" holds %" PRIu64 " bytes of it", f->hit.path,
			            f->hit.size);
		w->detail = rule_words_piece(&t, start);
		start = text_mark(&t);
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
	text_printf(&t,
	            "%s for %s holds array \"%s\" of %" PRIu64
	            " elements, over maxArrayLength %" PRIu32,
	            what, s->ns, f->hit.path, f->hit.size, f->max_array);
	w->detail = rule_words_piece(&t, start);
	start = text_mark(&t);
	text_printf(&t,
	            "bound \"%s\": keep the newest N in the document ($push with $each and "
	            "$slice: -N, subset pattern), group the items into bucket documents of a "
	            "fixed size (bucket pattern), or move the overflow beyond N to extra "
	            "documents flagged on the parent (outlier pattern)",
	            f->hit.path);
	w->suggestion = rule_words_piece(&t, start);
	w->fix = "keep the newest N elements (subset pattern), bucket the items, or move the "
	         "overflow to extra documents (outlier pattern)";
}

static const rule_param params[] = {
    {"maxBytes", RULE_PARAM_U32, 2097152, 1, 48000000, DOC_PARAM_MAX_BYTES,
     "documents larger than this many bytes are reported"},
    {"maxArrayLength", RULE_PARAM_U32, 1000, 1, 16777216, DOC_PARAM_MAX_ARRAY_LENGTH,
     "arrays with more elements than this, at any depth, are reported"},
};

/* A document over maxBytes, or big enough to hold an over-long array. */
static uint32_t document_floor(const rule_config *rc)
{
	uint64_t bytes = (uint64_t)rc->params[DOC_PARAM_MAX_BYTES] + 1;
	uint64_t array = least_bytes(rc->params[DOC_PARAM_MAX_ARRAY_LENGTH]);
	uint64_t floor = bytes < array ? bytes : array;
	return floor > UINT32_MAX ? UINT32_MAX : (uint32_t)floor;
}

static const rule_checks checks = {
    .update = check_update,
    .document = check_document,
    .document_floor = document_floor,
    .words = words,
};

const rule_def rule_doc_def = {
    .id = RULE_LARGE_DOCUMENT,
    .name = "large-document",
    .summary = "an inserted or replacement document is over maxBytes or holds an array over "
               "maxArrayLength",
    .fix_kind = "subset, bucket or outlier pattern; GridFS for blobs",
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .checks = &checks,
};
