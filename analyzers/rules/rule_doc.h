/* large-document: the write side of bloated documents and unbounded arrays.
 * An inserted document (insert's documents, bulkWrite insert ops) or a
 * replacement document (an update statement's u, findAndModify's update,
 * bulkWrite's updateMods, when it holds no update operator), upserts alike,
 * that is larger than maxBytes (default 2 MiB, an eighth of the 16 MiB
 * limit), or that holds an array of more than maxArrayLength elements
 * (default 1,000) at any depth. Documents that size make every read, write,
 * replication and cache page costlier and run into the 16 MiB limit; arrays
 * that long make each update and each multikey index entry costlier.
 *
 * The finding names the field: for a large document the path down to the
 * field that holds most of it (the largest field, followed while it holds
 * more than half of its parent), with its size in bytes; for a long array
 * its path (array positions included, e.g. "orders.3.items") and length.
 * One finding per document: the size first, else the first long array met.
 * An update statement gives one finding too: the first write over a limit.
 *
 * Writes that grow a document in place, in the same statements (upserts
 * alike; `<bucket>.chunks`, GridFS's chunks, excepted as for inserts):
 *   - $set / $setOnInsert of a value over maxBytes, or holding an array of
 *     more than maxArrayLength elements (the field's path, e.g. "a.b.0.c");
 *   - $push / $addToSet of one value over maxBytes, or with an $each of more
 *     than maxArrayLength elements (or over maxBytes) in one write; a
 *     $push whose $slice keeps at most maxArrayLength is bounded, silent;
 *   - update pipelines: $set / $addFields stages (object literals followed
 *     into their fields), $replaceWith and $replaceRoot's newRoot (an
 *     object literal over maxBytes, or its fields; $mergeObjects' literal
 *     operands): an array literal or $literal over the limits, a literal
 *     string or binary over maxBytes, a $concatArrays whose literal
 *     operands alone hold more than maxArrayLength elements.
 *
 * Deliberately not caught: what a document becomes after many small
 * updates (unbounded-push judges unbounded growth); the elements of a
 * pushed array (only its length and bytes); expressions whose result the
 * request does not spell out (a field reference, $map, $range, a
 * $concatArrays under $slice, whatever wraps the literal); the size of
 * $concatArrays' literals; deeper than 200 levels.
 *
 * GridFS: a collection named "<bucket>.chunks" holds file chunks of
 * chunkSizeBytes each (255 KiB by default, up to 16 MiB), which is what
 * GridFS is for, so sizes there are not reported (arrays still are).
 *
 * Cost: it reads every inserted document, so it walks structure only. The
 * size is the document's header; string and binary contents are skipped by
 * their length; a document or array smaller than the least bytes an array of
 * maxArrayLength + 1 elements needs (3 bytes an element) is skipped whole,
 * so a typical document costs one comparison; so does a typical update
 * statement (the whole update is smaller than either limit). */
#ifndef MG_ANALYZERS_RULES_RULE_DOC_H
#define MG_ANALYZERS_RULES_RULE_DOC_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

enum { DOC_PARAM_MAX_BYTES = 0, DOC_PARAM_MAX_ARRAY_LENGTH = 1 };

/* What wrote the document or value a finding is about. */
typedef enum {
	DOC_WRITE_DOCUMENT, /* an inserted or replacement document */
	DOC_WRITE_SET,      /* $set / $setOnInsert (op) of one value */
	DOC_WRITE_PUSH,     /* $push / $addToSet (op) of one value, or of an $each */
	DOC_WRITE_STAGE,    /* an update pipeline stage (op: its name) */
} doc_write;

typedef struct doc_hit {
	bool too_big;   /* else an array too long */
	uint32_t bytes; /* the whole document, or the value written */
	char path[256]; /* the field ("" for the document itself) */
	uint64_t size;  /* that field's bytes (too_big) or the array's elements */
	/* Set by rule_doc_update (DOC_WRITE_DOCUMENT otherwise). */
	doc_write write;
	const char *op; /* "$set", "$push", a stage name, ...: a literal */
	bool each;      /* DOC_WRITE_PUSH with $each: size counts the elements added */
	bool concat;    /* DOC_WRITE_STAGE: size counts $concatArrays' literal elements */
	int64_t slice;  /* $push's $slice, when it keeps more than maxArrayLength; 0 none */
} doc_hit;

/* Judges one document against the two limits. */
bool rule_doc_check(const bson_t *doc, uint32_t max_bytes, uint32_t max_array, doc_hit *hit);

/* Judges an update statement's update (an iterator on it): an operator
 * document or a pipeline, as listed above; a replacement document (first
 * key not an operator) is rule_doc_check's and gives false here. */
bool rule_doc_update(const bson_iter_t *u, uint32_t max_bytes, uint32_t max_array, doc_hit *hit);

#endif
