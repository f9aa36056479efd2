/* bulkWrite's nsInfo, read once per request (analysers.c,
 * analyze_bulk_write). Engine-internal. */
#ifndef MG_ANALYZERS_ENGINE_BULK_NSINFO_H
#define MG_ANALYZERS_ENGINE_BULK_NSINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/cmdview.h"

/* bulkWrite (admin): ops name their namespace by index into nsInfo.
 * nsInfo is read once per request into a table of its "ns" strings
 * (pointers into the message; NULL for an entry without one): scanning
 * nsInfo again for every op would be quadratic in a message a client
 * controls (many ops naming the last of many entries compress to almost
 * nothing). The table lives on the stack for the namespaces a real
 * bulkWrite names; only a larger nsInfo allocates. */
#define BULK_NS_INLINE 64

typedef struct bulk_nsinfo {
	const char *inline_ns[BULK_NS_INLINE];
	const char **ns; /* inline_ns, or malloc'd when nsInfo is larger */
	size_t n;
} bulk_nsinfo;

/* False only when memory runs out; the ops then go unanalyzed. */
bool bulk_nsinfo_init(bulk_nsinfo *b, const cmdview *v) __attribute__((warn_unused_result));

void bulk_nsinfo_free(bulk_nsinfo *b);

/* The namespace of entry idx into ns (cap bytes): false when there is
 * none. */
bool bulk_ns(const bulk_nsinfo *b, int64_t idx, char *ns, size_t cap);

#endif
