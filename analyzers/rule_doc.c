/* large-document (rule_doc.h). */
#include "analyzers/rule_doc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyzers/rule_api.h"

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

static bool long_array_in(bson_iter_t *it, uint32_t max, uint64_t least, char *path, size_t cap,
                          doc_hit *hit, int depth);

/* The value under it, when it is a container big enough to matter. */
static bool worth_entering(const bson_iter_t *it, uint64_t least)
{
	uint32_t len;
	const uint8_t *data;
	if (BSON_ITER_HOLDS_DOCUMENT(it))
		bson_iter_document(it, &len, &data);
	else if (BSON_ITER_HOLDS_ARRAY(it))
		bson_iter_array(it, &len, &data);
	else
		return false;
	return len >= least;
}

/* it: positioned on an array or document value. */
static bool long_array_at(const bson_iter_t *it, uint32_t max, uint64_t least, char *path,
                          size_t cap, doc_hit *hit, int depth)
{
	bson_iter_t c;
	if (depth > DOC_MAX_DEPTH || !bson_iter_recurse(it, &c))
		return false;
	if (BSON_ITER_HOLDS_ARRAY(it)) {
		uint64_t n = 0;
		bson_iter_t count = c;
		while (bson_iter_next(&count))
			n++;
		if (n > max) {
			hit->too_big = false;
			hit->size = n;
			snprintf(hit->path, sizeof hit->path, "%s", path);
			return true;
		}
	}
	return long_array_in(&c, max, least, path, cap, hit, depth);
}

static bool long_array_in(bson_iter_t *c, uint32_t max, uint64_t least, char *path, size_t cap,
                          doc_hit *hit, int depth)
{
	while (bson_iter_next(c)) {
		if (!worth_entering(c, least))
			continue; /* strings, binaries, small containers: skipped */
		size_t at = path_push(path, cap, bson_iter_key(c));
		bool found = long_array_at(c, max, least, path, cap, hit, depth + 1);
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
		while (bson_iter_next(&it)) {
			uint64_t size = it.next_off - it.off; /* the whole element */
			if (size > best_size) {
				best_size = size;
				best = it;
			}
		}
		if (best_size == 0 || best_size * 2 <= whole)
			return;
		path_push(hit->path, sizeof hit->path, bson_iter_key(&best));
		hit->size = best_size;
		whole = best_size;
		if (!(BSON_ITER_HOLDS_DOCUMENT(&best) || BSON_ITER_HOLDS_ARRAY(&best)) ||
		    !bson_iter_recurse(&best, &it))
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
	bson_iter_t it;
	char path[sizeof hit->path] = "";
	return bson_iter_init(&it, doc) &&
	       long_array_in(&it, max_array, least, path, sizeof path, hit, 0);
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
	if (!BSON_ITER_HOLDS_DOCUMENT(u) || !bson_iter_recurse(u, &first) ||
	    !bson_iter_next(&first) || bson_iter_key(&first)[0] == '$')
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
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .checks = &checks,
};
