/* unbounded-push: an update that appends to an array with nothing bounding
 * its length. Arrays that grow forever make documents grow towards the
 * 16 MiB limit, and every write and index update on them gets slower.
 *
 * Caught in an update document (update's u, findAndModify's update,
 * bulkWrite's updateMods; upserts alike):
 *   $push: {f: v}                      v is not a modifier document
 *   $push: {f: {$each: [...]}}         $each without $slice
 *   $push: {f: {$slice: 3}}            no $each: the server pushes the
 *                                      document {$slice: 3} itself
 * each field of a $push checked. In a pipeline-style update (an array of
 * stages), a $set / $addFields that assigns f from $concatArrays with "$f"
 * among the operands, unless a $slice expression bounds the result (or
 * bounds "$f" before it is concatenated).
 *
 * Fine: $each together with $slice (any value, 0 and negative included).
 * Deliberately not caught: $addToSet (it only adds values not yet present,
 * so its growth is bounded by the distinct values the application has, and
 * it has no $slice to suggest); $push in $group / $setWindowFields (an
 * accumulator, not a write); $set of a whole array (the application chose
 * its length); $concatArrays in $project / $replaceRoot / $replaceWith
 * stages of update pipelines (the field assigned is not a single path). */
#ifndef MG_ANALYZERS_RULE_PUSH_H
#define MG_ANALYZERS_RULE_PUSH_H

#include <bson/bson.h>
#include <stdbool.h>

typedef struct push_hit {
	char fields[160]; /* "\"comments\", \"tags\"": each field appended to */
	bool pipeline;    /* found as $concatArrays in an update pipeline */
	const char *form; /* "has no $each + $slice", "has $each but no $slice", ... */
} push_hit;

/* u: an iterator positioned on an update (a document or a pipeline array). */
bool rule_push_update(const bson_iter_t *u, push_hit *hit);

#endif
