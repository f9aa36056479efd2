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
 *
 * Deliberately not caught: documents built by update operators ($set of a
 * large value, $push: unbounded-push judges growth), update pipelines,
 * what a document becomes on the server after many updates.
 *
 * Cost: it reads every inserted document, so it walks structure only. The
 * size is the document's header; string and binary contents are skipped by
 * their length; a document or array smaller than the least bytes an array of
 * maxArrayLength + 1 elements needs (3 bytes an element) is skipped whole,
 * so a typical document costs one comparison. */
#ifndef MG_ANALYZERS_RULE_DOC_H
#define MG_ANALYZERS_RULE_DOC_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

enum { DOC_PARAM_MAX_BYTES = 0, DOC_PARAM_MAX_ARRAY_LENGTH = 1 };

typedef struct doc_hit {
	bool too_big;   /* else an array too long */
	uint32_t bytes; /* the whole document */
	char path[256]; /* the field ("" for the document itself) */
	uint64_t size;  /* that field's bytes (too_big) or the array's elements */
} doc_hit;

/* Judges one document against the two limits. */
bool rule_doc_check(const bson_t *doc, uint32_t max_bytes, uint32_t max_array, doc_hit *hit);

#endif
