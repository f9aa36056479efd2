/* The model's namespace rows (model_ns), each made on first use, and the
 * database rows that count their collections; and the field lists a row
 * keeps (fields filters use, $push targets, array lengths in replies). */
#ifndef MG_REPORT_NAMESPACES_H
#define MG_REPORT_NAMESPACES_H

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

#include "report/hash_map.h"
#include "report/model.h"

typedef struct ns_table {
	model *m; /* its rows are m->nss and m->dbs */
	hash_map rows, dbs;
} ns_table;

/* The row of ns, made (and its database counted) on first use: a new row
 * may move t->m->nss, so a pointer to another row is then stale. */
model_ns *ns_table_get(ns_table *t, const char *ns);
/* The row of ns, or NULL when none was made. */
model_ns *ns_table_find(const ns_table *t, const char *ns);
/* Its index in t->m->nss + 1: a handle that outlives a move. */
size_t ns_table_index(const ns_table *t, const model_ns *n);
void ns_table_free(ns_table *t);

/* path seen once more in arr (len: an array's length, -1 for none). */
void ns_field_note(model_field **arr, size_t *n, const char *path, int64_t len);

/* What makes an index no candidate for "redundant": a constraint or an
 * option a plain key prefix does not give; and its collation. */
void ns_index_spec_facts(const bson_t *spec, model_index *mi);

/* Whether a captured shape can use an index: its first key is a field some
 * filter or sort on the collection names (an index is scanned from its
 * first key, the planner's prefix rule), or a hint names it; _id_ is always
 * kept. */
void ns_mark_used(model_ns *n);

#endif
