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
 * stages; also the whenMatched pipeline of an aggregation's $merge, which
 * the engine gives as an update of its into collection), a $set /
 * $addFields that assigns f from $concatArrays with "$f" among the
 * operands, unless what the stages leave in f is bounded: a $slice, $firstN
 * or $lastN around the result (or around "$f" before it is concatenated),
 * a later stage that slices f or assigns it a value not read from f, or an
 * earlier one that sliced f before the append. The last stage assigning f
 * decides (rule_push.c, "update pipelines").
 *
 * Fine: $each together with $slice (any value, 0 and negative included).
 * Fine too: a push the statement's filter bounds (a guard), read from the
 * filter's conjunctive part only (top level and $and; a guard under $or or
 * $nor holds on one branch and bounds nothing):
 *   counter guard   {n: {$lt: N}} / {$lte: N} / {$not: {$gte: N}} (or $gt),
 *                   N a number, on a field n that the same update document
 *                   increments with a positive number ($inc: {n: 1}). Each
 *                   application raises n, and the write stops matching at N,
 *                   so every field that update pushes to is bounded (the
 *                   bucket and outlier patterns). The counter is judged by
 *                   name only: that n counts the array's elements is the
 *                   application's contract, which the pattern makes.
 *                   The same the other way: {n: {$gt: N}} / {$gte: N} /
 *                   {$not: {$lte: N}} with $inc: {n: <negative>}, a
 *                   remaining-capacity counter (seatsLeft).
 *   existence guard {"f.K": {$exists: false}}, K a plain array index: f has
 *                   at most K elements before the push. Bounds f only.
 *   size guard      {$expr: {$lt: [{$size: "$f"}, N]}} ($lte; or $gt/$gte
 *                   with the operands swapped; inside $expr's $and too), N a
 *                   number. Bounds f only.
 * The existence and size guards also bound $concatArrays in update
 * pipelines; the counter guard needs $inc, which pipelines do not have.
 * Deliberately not caught: $addToSet, and $setUnion in pipelines (it only adds values not yet
 * present, so its growth is bounded by the distinct values the application has, and it has no
 * $slice to suggest); $push in $group / $setWindowFields (an accumulator, not a write); $set of a
 * whole array (the application chose its length); $concatArrays in $project / $replaceRoot /
 * $replaceWith stages of update pipelines (the field assigned is not a single path). */
#ifndef MG_ANALYZERS_RULES_RULE_PUSH_H
#define MG_ANALYZERS_RULES_RULE_PUSH_H

#include <bson/bson.h>
#include <stdbool.h>

typedef struct push_hit {
	char fields[160]; /* "\"comments\", \"tags\"": each field appended to */
	bool pipeline;    /* found as $concatArrays in an update pipeline */
	const char *form; /* "has no $each + $slice", "has $each but no $slice", ... */
	bool unjudged;    /* a pipeline assignment too deep or too long to walk */
} push_hit;

/* u: an iterator positioned on an update (a document or a pipeline array);
 * filter: one positioned on the same statement's filter, or NULL. */
bool rule_push_update(const bson_iter_t *u, const bson_iter_t *filter, push_hit *hit);

#endif
