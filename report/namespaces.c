/* The model's namespace and database rows (namespaces.h). */
#include "report/namespaces.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/planner/query_preds.h"
#include "report/grow.h"

/* One more collection seen in ns's database, for "too many
 * collections". */
static void count_db(ns_table *t, const char *ns)
{
	model *m = t->m;
	char db[128];
	const char *dot = strchr(ns, '.');
	size_t dl = dot ? (size_t)(dot - ns) : strlen(ns);
	if (dl >= sizeof db)
		dl = sizeof db - 1;
	memcpy(db, ns, dl);
	db[dl] = '\0';
	uint64_t dk = hash_map_str_key(db);
	size_t di = hash_map_get(&t->dbs, dk);
	if (!di) {
		size_t cap = m->ndbs; /* grows one at a time: few databases */
		model_db *nd = realloc(m->dbs, (cap + 1) * sizeof *nd);
		if (!nd)
			abort();
		m->dbs = nd;
		memset(&m->dbs[m->ndbs], 0, sizeof *m->dbs);
		snprintf(m->dbs[m->ndbs].db, sizeof m->dbs->db, "%s", db);
		hash_map_put(&t->dbs, dk, ++m->ndbs);
		di = m->ndbs;
	}
	m->dbs[di - 1].collections++;
}

model_ns *ns_table_get(ns_table *t, const char *ns)
{
	model *m = t->m;
	uint64_t k = hash_map_str_key(ns);
	size_t i = hash_map_get(&t->rows, k);
	if (i)
		return &m->nss[i - 1];
	REPORT_GROW(m->nss, m->nnss, m->capnss);
	model_ns *n = &m->nss[m->nnss++];
	memset(n, 0, sizeof *n);
	snprintf(n->ns, sizeof n->ns, "%s", ns);
	n->doc_max = -1;
	n->doc_count = -1;
	hash_map_put(&t->rows, k, m->nnss);
	count_db(t, ns);
	return n;
}

model_ns *ns_table_find(const ns_table *t, const char *ns)
{
	size_t i = hash_map_get(&t->rows, hash_map_str_key(ns));
	return i ? &t->m->nss[i - 1] : NULL;
}

size_t ns_table_index(const ns_table *t, const model_ns *n)
{
	return (size_t)(n - t->m->nss) + 1;
}

void ns_table_free(ns_table *t)
{
	hash_map_free(&t->rows);
	hash_map_free(&t->dbs);
}

void ns_field_note(model_field **arr, size_t *n, const char *path, int64_t len)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*arr)[i].path, path) == 0) {
			(*arr)[i].count++;
			if (len > (*arr)[i].max_len)
				(*arr)[i].max_len = len;
			return;
		}
	if (*n >= 256)
		return; /* enough to show; the rest would not be read */
	model_field *na = realloc(*arr, (*n + 1) * sizeof **arr);
	if (!na)
		abort();
	*arr = na;
	memset(&na[*n], 0, sizeof na[*n]);
	snprintf(na[*n].path, sizeof na[*n].path, "%s", path);
	na[*n].count = 1;
	na[*n].max_len = len;
	(*n)++;
}

void ns_index_spec_facts(const bson_t *spec, model_index *mi)
{
	static const char *const opts[] = {"unique", "sparse", "hidden"};
	bson_iter_t it;
	for (size_t k = 0; k < sizeof opts / sizeof *opts; k++)
		if (bson_iter_init_find(&it, spec, opts[k]) && bson_iter_as_bool(&it))
			mi->constraint = true;
	if (bson_iter_init_find(&it, spec, "partialFilterExpression") ||
	    bson_iter_init_find(&it, spec, "expireAfterSeconds"))
		mi->constraint = true;
	mi->collation[0] = '\0';
	if (bson_iter_init_find(&it, spec, "collation") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		uint32_t l;
		const uint8_t *d;
		bson_t c;
		bson_iter_document(&it, &l, &d);
		if (bson_init_static(&c, d, l) && !query_collation_is_simple(&c)) {
			char *j = bson_as_relaxed_extended_json(&c, NULL);
			snprintf(mi->collation, sizeof mi->collation, "%s", j ? j : "");
			bson_free(j);
		}
	}
}

void ns_mark_used(model_ns *n)
{
	for (size_t i = 0; i < n->nindexes; i++) {
		model_index *mi = &n->indexes[i];
		mi->used = !strcmp(mi->name, "_id_");
		for (size_t f = 0; f < n->nused && !mi->used; f++) {
			const char *p = n->used[f].path;
			if (!strcmp(p, mi->first) ||
			    (!strncmp(p, "hint:", 5) && !strcmp(p + 5, mi->name)))
				mi->used = true;
		}
	}
}
