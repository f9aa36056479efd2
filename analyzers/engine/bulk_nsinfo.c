/* bulkWrite's nsInfo table (bulk_nsinfo.h). */
#include "analyzers/engine/bulk_nsinfo.h"

#include <stdio.h>
#include <stdlib.h>

#include "protocol/wire_iter.h"

bool bulk_nsinfo_init(bulk_nsinfo *b, const cmdview *v)
{
	cmdview_docs d;
	bson_t doc;
	size_t count = 0;
	cmdview_docs_init(&d, v, "nsInfo");
	while (cmdview_docs_next(&d, &doc))
		count++;
	b->n = 0;
	b->ns = count <= BULK_NS_INLINE ? b->inline_ns : malloc(count * sizeof(*b->ns));
	if (!b->ns)
		return false;
	cmdview_docs_init(&d, v, "nsInfo");
	while (b->n < count && cmdview_docs_next(&d, &doc)) {
		bson_iter_t it;
		b->ns[b->n++] = bson_iter_init_find(&it, &doc, "ns") && WIRE_ITER_HOLDS_UTF8(&it)
		                    ? bson_iter_utf8(&it, NULL)
		                    : NULL;
	}
	return true;
}

void bulk_nsinfo_free(bulk_nsinfo *b)
{
	if (b->ns != b->inline_ns)
		free(b->ns);
}

bool bulk_ns(const bulk_nsinfo *b, int64_t idx, char *ns, size_t cap)
{
	if (idx < 0 || (uint64_t)idx >= b->n || !b->ns[idx])
		return false;
	snprintf(ns, cap, "%s", b->ns[idx]);
	return true;
}
