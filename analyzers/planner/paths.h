/* Dotted paths compared as the server compares them: component by
 * component, "a.b" under "a" and "ab" not. Inline: the planner, the
 * stages model and the engine's multikey learning ask on every request. */
#ifndef MG_ANALYZERS_PLANNER_PATHS_H
#define MG_ANALYZERS_PLANNER_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* field is the path p[0..n) or lies under it (n 0: never). */
static inline bool path_at_or_under(const char *field, const char *p, size_t n)
{
	return n > 0 && strncmp(field, p, n) == 0 && (field[n] == '\0' || field[n] == '.');
}

/* One of a and b is the other or lies under it: a change to either
 * changes the other. */
static inline bool paths_overlap(const char *a, const char *b)
{
	return path_at_or_under(a, b, strlen(b)) || path_at_or_under(b, a, strlen(a));
}

#endif
