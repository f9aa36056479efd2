/* Inserted documents in a capture (capture.h): what is measured of one in
 * the writer's thread, the stub a record keeps, and the stand-in the
 * report builds from the stub.
 *
 * The stand-in only has to get the same answers from the large-document
 * rule (analyzers/rules/rule_doc.c): the same byte size (maxBytes), the same
 * field when one holds most of the document (the finding names it), and
 * an array of the same length at the same path (maxArrayLength). It is
 * built from two paths, the array's and the padding's: nested documents
 * down each path, the array of nulls at its end, and zero bytes wherever
 * the original's bulk was. Its keys are the original's structure, never
 * its values. */
#include <stdlib.h>
#include <string.h>

#include "protocol/capture.h"
#include "protocol/wire_iter.h"

#define DOC_DEPTH_MAX     100      /* deeper parts of a document are not measured */
#define DOC_SIZE_MAX      48000000 /* a message's limit: no stand-in is bigger */
#define DOC_ARRAY_LEN_MAX 16000000 /* each element takes at least 3 bytes */

/* Appends ".key" (or "key" at the top) to path; returns the old length. */
static size_t path_push(char *path, size_t cap, const char *key)
{
	size_t len = strlen(path);
	if (len + strlen(key) + 2 < cap)
		snprintf(path + len, cap - len, "%s%s", len ? "." : "", key);
	return len;
}

/* ---- measuring (the writer's thread) ---- */

static void longest_array(bson_iter_t *c, char *path, capture_doc_facts *f, int depth)
{
	while (depth < DOC_DEPTH_MAX && wire_iter_next(c)) {
		bool array = WIRE_ITER_HOLDS_ARRAY(c);
		bson_iter_t sub;
		if (!(array || WIRE_ITER_HOLDS_DOCUMENT(c)) || !wire_iter_recurse(c, &sub))
			continue;
		size_t at = path_push(path, CAPTURE_PATH_LEN, wire_iter_key(c));
		if (array) {
			bson_iter_t e = sub;
			uint32_t n = 0;
			while (wire_iter_next(&e))
				n++;
			if (n > f->arr_len) { /* strictly: the first of the longest */
				f->arr_len = n;
				snprintf(f->arr, sizeof f->arr, "%s", path);
			}
		}
		longest_array(&sub, path, f, depth + 1);
		path[at] = '\0';
	}
}

/* The rule's own walk for a document over maxBytes: down while one field
 * holds more than half of its container. */
static void largest_path(const bson_t *doc, capture_doc_facts *f)
{
	bson_iter_t it, best;
	uint64_t whole = doc->len;
	f->big[0] = '\0';
	if (!bson_iter_init(&it, doc))
		return;
	for (int depth = 0; depth < DOC_DEPTH_MAX; depth++) {
		uint64_t best_size = 0;
		while (wire_iter_next(&it)) {
			uint64_t size = it.next_off - it.off;
			if (size > best_size) {
				best_size = size;
				best = it;
			}
		}
		if (best_size == 0 || best_size * 2 <= whole)
			return;
		path_push(f->big, sizeof f->big, wire_iter_key(&best));
		whole = best_size;
		if (!(WIRE_ITER_HOLDS_DOCUMENT(&best) || WIRE_ITER_HOLDS_ARRAY(&best)) ||
		    !wire_iter_recurse(&best, &it))
			return;
	}
}

void capture_doc_measure(const bson_t *doc, capture_doc_facts *f)
{
	memset(f, 0, sizeof *f);
	f->size = doc->len;
	char path[CAPTURE_PATH_LEN] = "";
	bson_iter_t it;
	if (bson_iter_init(&it, doc))
		longest_array(&it, path, f, 0);
	largest_path(doc, f);
}

void capture_doc_stub(const capture_doc_facts *f, bson_t *out)
{
	bson_init(out);
	BSON_APPEND_INT32(out, "$size", (int32_t)f->size);
	BSON_APPEND_INT32(out, "$len", (int32_t)f->arr_len);
	BSON_APPEND_UTF8(out, "$arr", f->arr);
	BSON_APPEND_UTF8(out, "$big", f->big);
}

/* ---- standing a document back up (the report) ---- */

typedef enum {
	PAD_LEAF,   /* the bulk was one field off the array's path: a binary there */
	PAD_SPLIT,  /* no field held most of its container: three equal binaries */
	PAD_SPREAD, /* the array itself held most: its elements carry the bytes */
} pad_mode;

typedef struct synth {
	uint32_t arr_len;
	pad_mode mode;
	uint32_t pad; /* bytes of padding in all */
	const uint8_t *zeros;
} synth;

/* The first component of path ("a" of "a.b"); *rest: after it, NULL at the last. */
static size_t first_part(const char *path, const char **rest)
{
	const char *dot = strchr(path, '.');
	*rest = dot ? dot + 1 : NULL;
	return dot ? (size_t)(dot - path) : strlen(path);
}

static void put_pad(bson_t *c, const char *key, uint32_t n, const synth *s)
{
	bson_append_binary(c, key, -1, BSON_SUBTYPE_BINARY, s->zeros, n);
}

static void put_array(bson_t *c, const char *key, int klen, bool spread, const synth *s)
{
	bson_t arr;
	bson_append_array_begin(c, key, klen, &arr);
	for (uint32_t i = 0; i < s->arr_len; i++) {
		char kb[16];
		const char *ks;
		size_t kl = bson_uint32_to_string(i, &ks, kb, sizeof kb);
		if (spread)
			bson_append_binary(&arr, ks, (int)kl, BSON_SUBTYPE_BINARY, s->zeros,
			                   s->pad / s->arr_len + (i ? 0 : s->pad % s->arr_len));
		else
			bson_append_null(&arr, ks, (int)kl);
	}
	bson_append_array_end(c, &arr);
}

/* The members of one container: a (the rest of the array's path, NULL off
 * it) and b (the rest of the padding's path; "" here, NULL off it). */
static void emit(bson_t *c, const char *a, const char *b, const synth *s, int depth)
{
	if (depth > DOC_DEPTH_MAX)
		return;
	if (b && !*b && s->mode == PAD_SPLIT) {
		put_pad(c, "_0", s->pad / 3 + s->pad % 3, s);
		put_pad(c, "_1", s->pad / 3, s);
		put_pad(c, "_2", s->pad / 3, s);
		b = NULL;
	}
	if (a && *a) {
		const char *ra, *rb = NULL;
		size_t n = first_part(a, &ra);
		bool shared = b && *b && strncmp(a, b, n) == 0 && (b[n] == '.' || !b[n]);
		if (shared)
			rb = b[n] ? b + n + 1 : "";
		if (!ra) {
			put_array(c, a, (int)n, shared && s->mode == PAD_SPREAD, s);
		} else {
			bson_t sub;
			bson_append_document_begin(c, a, (int)n, &sub);
			emit(&sub, ra, rb, s, depth + 1);
			bson_append_document_end(c, &sub);
		}
		if (shared)
			b = NULL;
	}
	if (b && *b) {
		const char *rb;
		size_t n = first_part(b, &rb);
		bson_t sub;
		if (!rb) {
			bson_append_binary(c, b, (int)n, BSON_SUBTYPE_BINARY, s->zeros, s->pad);
			return;
		}
		bson_append_document_begin(c, b, (int)n, &sub);
		emit(&sub, NULL, rb, s, depth + 1);
		bson_append_document_end(c, &sub);
	}
}

static const char *stub_str(const bson_t *stub, const char *key)
{
	bson_iter_t it;
	return bson_iter_init_find(&it, stub, key) && BSON_ITER_HOLDS_UTF8(&it)
	           ? bson_iter_utf8(&it, NULL)
	           : NULL;
}

static int64_t stub_int(const bson_t *stub, const char *key)
{
	bson_iter_t it;
	return bson_iter_init_find(&it, stub, key) && BSON_ITER_HOLDS_NUMBER(&it)
	           ? bson_iter_as_int64(&it)
	           : -1;
}

/* Where the bulk goes, from the two paths (see pad_mode). */
static pad_mode pad_mode_of(const char *arr, uint32_t len, const char *big, const char **site)
{
	size_t al = strlen(arr), bl = strlen(big);
	*site = big;
	if (!*big) {
		*site = "";
		return PAD_SPLIT;
	}
	if (len && (!strcmp(big, arr) || (bl > al && !strncmp(big, arr, al) && big[al] == '.'))) {
		*site = arr; /* the array, or one of its elements, held most */
		return PAD_SPREAD;
	}
	if (al > bl && !strncmp(arr, big, bl) && arr[bl] == '.')
		return PAD_SPLIT; /* a container on the array's path: spread inside it */
	return PAD_LEAF;
}

bool capture_doc_synthesize(const bson_t *stub, size_t budget, bson_t *out)
{
	int64_t size = stub_int(stub, "$size"), len = stub_int(stub, "$len");
	const char *arr = stub_str(stub, "$arr"), *big = stub_str(stub, "$big");
	if (size < 5 || len < 0 || !arr || !big || size > DOC_SIZE_MAX || (size_t)size > budget)
		return false;
	if (len > DOC_ARRAY_LEN_MAX || len * 3 > size)
		return false; /* no document of that size holds such an array */
	synth s = {.arr_len = (uint32_t)len, .pad = 0};
	const char *site;
	s.mode = pad_mode_of(arr, s.arr_len, big, &site);
	const char *a = len ? arr : NULL;
	bson_t probe;
	bson_init(&probe);
	emit(&probe, a, site, &s, 0);
	uint32_t bare = probe.len;
	bson_destroy(&probe);
	if ((int64_t)bare < size)
		s.pad = (uint32_t)(size - bare);
	uint8_t *zeros = calloc(1, s.pad + 1);
	if (!zeros)
		return false;
	s.zeros = zeros;
	bson_init(out);
	emit(out, a, site, &s, 0);
	free(zeros);
	return true;
}
