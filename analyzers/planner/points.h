/* Points that decide a read: a filter's point predicates (an equality, an
 * $in or $all of literals, $text, an $expr $eq of a field) through which
 * an index reads only the documents they name, so that another predicate
 * beside them (a case-insensitive regex) filters those documents and is
 * not what scans. The case-insensitive-regex rule asks them of every
 * pattern it finds; the pipeline's bounded-read test (stages) of a head
 * $match. */
#ifndef MG_ANALYZERS_PLANNER_POINTS_H
#define MG_ANALYZERS_PLANNER_POINTS_H

#include <bson/bson.h>
#include <stdbool.h>

/* Whether the value it is on, of a member {k: value}, is a point on k: an
 * equality, $eq, or an $in or $all of literal values (not a regex, not an
 * $elemMatch). */
bool query_point_value(const bson_iter_t *it);

/* Whether the filter (an iterator on the document) holds, in its top-level
 * conjunction (its members and those of a top-level $and, nested), a point
 * on another field than field ("": any field), or $text, or an $expr $eq of
 * another field with a constant or a variable. */
bool query_point_beside(const bson_iter_t *filter, const char *field);

/* The last two alone, at the filter's top level. */
bool query_operator_point(const bson_iter_t *filter, const char *field);

#endif
