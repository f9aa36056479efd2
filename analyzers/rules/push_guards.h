/* unbounded-push's guards (push_guards.c): what in a statement's filter
 * bounds the array a $push grows, read for the rule's check (rule_push.c),
 * with the expression helpers both read update pipelines with. Only those
 * two include this. */
#ifndef MG_ANALYZERS_RULES_PUSH_GUARDS_H
#define MG_ANALYZERS_RULES_PUSH_GUARDS_H

#include <stdbool.h>
#include <stddef.h>

#include "analyzers/rules/rule_api.h"
#include "protocol/wire_iter.h"

/* How deep update expressions are walked. Beyond it (and for an assigned
 * path too long for the buffers below) the walk cannot tell whether the
 * array is appended to, so it says it is: mongod runs pipeline updates
 * nested deeper than this, and passing over them let an unbounded
 * $concatArrays through a rule set to block. */
#define PUSH_MAX_DEPTH 100

/* ---- guards: what in the statement's filter bounds the array ----
 *
 * Read from the conjunctive part of the filter only (top level and $and,
 * nested): a guard under $or or $nor holds on some branch, so it bounds
 * nothing. Paths point into the filter. More guards than fit are ignored,
 * which can only keep a finding, never hide one. */

#define GUARDS_MAX 16

typedef struct guard_path {
	const char *p;
	size_t len;
} guard_path;

/* A set guard: a path the filter holds away from given values, {f: {$ne:
 * v}} or {f: {$nin: [...]}} (or their $not forms, {$not: {$eq: v}} and
 * {$not: {$in: [...]}}). A $push of those values to f (or of
 * documents whose key k holds them, with the guard on "f.k") then adds
 * each at most once: the array is a set, bounded by its domain, as one
 * that $addToSet grows. vals: the $ne or $nin element. */
typedef struct set_guard {
	guard_path path;
	wire_cur vals;
	bool list; /* $nin: vals is an array of values; $ne: vals is the value */
} set_guard;

typedef struct push_guards {
	guard_path counters[GUARDS_MAX]; /* fields held below a bound: $lt, $lte, $not {$gte} */
	size_t ncounters;
	guard_path floors[GUARDS_MAX]; /* fields held above a bound: $gt, $gte, $not {$lte} */
	size_t nfloors;
	guard_path arrays[GUARDS_MAX]; /* arrays held below a length: "a.N" $exists false, $size */
	size_t narrays;
	set_guard sets[GUARDS_MAX];
	size_t nsets;
	/* some counter is also incremented by the update, or some floor
	 * decremented */
	bool counted;
} push_guards;

/* A finite number: the only bound a counter can be compared with. */
bool push_is_number(const bson_iter_t *it);

/* {$size: "$arr"} or {$size: ["$arr"]}: the array's path, or NULL. */
const char *push_size_of_path(const bson_iter_t *v);

/* {op: [x, y]}, e on it: the operator's name, with x and y on its two
 * operands; NULL for anything else (more keys or operands: the server
 * refuses it). */
const char *push_two_operands(const bson_iter_t *e, bson_iter_t *x, bson_iter_t *y);

/* The guards of the statement's filter: from the facts when the engine read
 * it (ff), else from the filter itself (NULL: none). Added to g. */
void push_guards_of(push_guards *g, const bson_iter_t *filter, const filter_facts *ff);

/* The guards of an operator update's statement: its filter's, and whether
 * the update moves a guarded counter towards its bound. */
void push_update_guards(push_guards *g, const bson_iter_t *u, const bson_iter_t *filter,
                        const filter_facts *ff);

/* Whether field's array is bounded by a guard: a counter the update moves
 * towards its bound, or a length the filter holds it below. */
bool push_guarded(const push_guards *g, const char *field);

/* Whether every value a $push member (c on it) appends is kept out of its
 * array by a set guard, so the push grows a set: the member's value, or
 * with each the elements of its $each (at least one). */
bool push_set_guarded(const push_guards *g, const wire_cur *c, bool each);

#endif
