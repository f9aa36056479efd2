/* Comparing BSON keys with literals on the request path.
 *
 * Analyzers compare every key they meet against a handful of names. Most
 * keys differ from the wanted name in one of the first two bytes (operator
 * and stage names all start with '$', so the first alone is not enough);
 * checking those before strcmp keeps the common case free of calls. */
#ifndef MG_ANALYZERS_KEYS_H
#define MG_ANALYZERS_KEYS_H

#include <stdbool.h>
#include <string.h>

/* lit must be a non-empty literal. */
static inline bool key_eq(const char *k, const char *lit)
{
	return k[0] == lit[0] && (lit[0] == '\0' || k[1] == lit[1]) && strcmp(k, lit) == 0;
}

#endif
