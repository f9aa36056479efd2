/* libbson's iterator, stepped without libbson's call overhead.
 *
 * Every analyzer reads BSON with bson_iter_t, and walks a find's body, its
 * filter and each update statement several times over (once per rule).
 * bson_iter_next is a call through the PLT into a wrapper, a call into the
 * decoder, a byte loop for the key and assertions; bson_iter_type and
 * bson_iter_key are calls too. Together they were a large share of what
 * analysing an update statement cost (figures: tests/bench/README.md).
 *
 * wire_iter_next() is a drop-in for bson_iter_next() and
 * wire_iter_recurse() for bson_iter_recurse(): the same checks on the same
 * bytes, in the same order, leaving the bson_iter_t in the same state
 * (every offset, err_off included), so every other bson_iter_* call reads
 * what it would have read, and a corrupt element ends the walk exactly
 * where libbson ends it. They are safe on any bytes libbson's are: nothing
 * here assumes the document passed wire_doc_validate (update statements
 * and other kind-1 documents are only framed).
 *
 * This writes bson_iter_t's fields, which libbson documents as private;
 * the layout has not changed since libbson 1.0. The equivalence is not
 * taken on trust: tests/unit/test_protocol_wire_doc.c and
 * fuzz_bson_validate step both iterators side by side over every input
 * and abort on the first field that differs, against the libbson the
 * build links. If a libbson release changes what its iterator does, those
 * fail, not the analyzers. */
#ifndef MG_PROTOCOL_WIRE_ITER_H
#define MG_PROTOCOL_WIRE_ITER_H

#include <bson/bson.h>
#include <stdbool.h>

/* As bson_iter_next(iter). */
bool wire_iter_next(bson_iter_t *iter);

/* As bson_iter_recurse(iter, child). */
bool wire_iter_recurse(const bson_iter_t *iter, bson_iter_t *child);

/* As bson_iter_type(iter), inline: the type byte of the element iter is on
 * (iter must be on one, as libbson requires). The analyzers ask it of
 * nearly every element they meet, through these macros, libbson's
 * BSON_ITER_HOLDS_* with the same meaning. */
static inline bson_type_t wire_iter_type(const bson_iter_t *iter)
{
	return (bson_type_t)iter->raw[iter->type];
}

/* As bson_iter_key(iter), inline. */
static inline const char *wire_iter_key(const bson_iter_t *iter)
{
	return (const char *)(iter->raw + iter->key);
}

#define WIRE_ITER_HOLDS_DOCUMENT(iter) (wire_iter_type(iter) == BSON_TYPE_DOCUMENT)
#define WIRE_ITER_HOLDS_ARRAY(iter)    (wire_iter_type(iter) == BSON_TYPE_ARRAY)
#define WIRE_ITER_HOLDS_UTF8(iter)     (wire_iter_type(iter) == BSON_TYPE_UTF8)
#define WIRE_ITER_HOLDS_REGEX(iter)    (wire_iter_type(iter) == BSON_TYPE_REGEX)
#define WIRE_ITER_HOLDS_BOOL(iter)     (wire_iter_type(iter) == BSON_TYPE_BOOL)
#define WIRE_ITER_HOLDS_BINARY(iter)   (wire_iter_type(iter) == BSON_TYPE_BINARY)
#define WIRE_ITER_HOLDS_INT(iter)                                                                  \
	(wire_iter_type(iter) == BSON_TYPE_INT32 || wire_iter_type(iter) == BSON_TYPE_INT64)
#define WIRE_ITER_HOLDS_NUMBER(iter)                                                               \
	(WIRE_ITER_HOLDS_INT(iter) || wire_iter_type(iter) == BSON_TYPE_DOUBLE)

#endif
