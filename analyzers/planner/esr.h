/* ESR: the compound index that serves a query with a sort, written as a
 * runnable mongosh command (MongoDB's Equality, Sort, Range guideline for
 * compound indexes): Equality fields first in filter order, then the Sort fields in the
 * query's direction, then Range fields, each field once. For example
 *   find({manufacturer: 'Ford', cost: {$gt: 10000}}).sort({model: 1}) on shop.cars
 * gives
 *   db.getSiblingDB("shop").getCollection("cars").createIndex(
 *       {"manufacturer": 1, "model": 1, "cost": 1})
 * (on one line), plus `, {"collation": {...}}` when the query has a collation
 * other than simple. Also the JSON-ish writers for a sort and a small
 * document that the sort rule's details share. */
#ifndef MG_ANALYZERS_PLANNER_ESR_H
#define MG_ANALYZERS_PLANNER_ESR_H

#include <stdbool.h>
#include <stddef.h>

#include "analyzers/planner/query_preds.h"
#include "analyzers/planner/sort_query.h"
#include "protocol/text.h"

/* {"a": 1, "b": -1} */
void esr_put_sort(text_buf *t, const sort_key *keys, size_t n);
/* A small document as single-line JSON: {"locale": "fr", "strength": 2}. */
void esr_put_doc(text_buf *t, const bson_t *doc);

/* The ESR key of a query, as fields: the first neq are its equality
 * fields (in filter order; any order of them serves the query), the next
 * nsort its sort fields (in order and direction), the rest its range
 * fields. Each field once; names point into preds and sort, or into names
 * (the paths an $elemMatch tests, "arr.f"). This is what
 * esr_suggest_parsed writes, and what the report merges by (report/
 * recommend.c).
 *
 * {arr: {$elemMatch: {f: 1, g: {$gt: 2}}}} gives arr.f (equality) and
 * arr.g (range): mongod compounds the bounds of index keys on fields of
 * one array that one $elemMatch joins (the manual's "Multikey Index
 * Bounds"), and intersects the bounds of {arr: {$elemMatch: {$gte: 3,
 * $lte: 6}}} on an index of arr itself, which the value form gives. A
 * query whose fields give no ESR class at all ($size, $all, $type, $not
 * only) gets those fields, so the key is never empty: mongod refuses
 * createIndex({}). With no field and no sort the key is empty, and
 * esr_suggest_parsed suggests nothing. */
#define ESR_MAX_FIELDS 32  /* the server's limit on compound index keys */
#define ESR_NAMES_LEN  512 /* the composed paths; a path that does not fit is left out */

/* An esr_key's dir beside 1 and -1: a geo key, for a $geoWithin or
 * $geoIntersects that only such an index serves. */
enum { ESR_DIR_2DSPHERE = 2, ESR_DIR_2D = 3 };

/* ": 1", ": -1", ": \"2dsphere\"" or ": \"2d\"", for a key's dir. */
void esr_put_dir(text_buf *b, int dir);

typedef struct esr_key {
	const char *field[ESR_MAX_FIELDS];
	int dir[ESR_MAX_FIELDS];
	size_t n, neq, nsort;
	char names[ESR_NAMES_LEN];
	size_t names_len;
} esr_key;

void esr_key_build(const query_preds *preds, const sort_spec *sort, esr_key *out);

/* The suggestion for an already-parsed query. Returns false (and writes
 * "") when the key is empty or the result does not fit in len. */
bool esr_suggest_parsed(const char *db, const char *coll, const query_preds *preds,
                        const sort_spec *sort, const bson_t *collation, char *out, size_t len);

/* The suggestion for q, parsing its filter and sort. False when q's sort is
 * not an index question or the text does not fit. */
bool esr_suggest(const sort_query *q, char *out, size_t len);

#endif
