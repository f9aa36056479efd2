/* The recommendations from a finished model (recommend.h): index
 * candidates merged per collection and collation, design changes grouped
 * by what they ask, then ranked. Runs once, after the last record. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/planner/query_preds.h"
#include "report/hash_map.h"
#include "report/recommend.h"

typedef struct icand {
	const model_finding *f;
	rec_command cmd;
	char ns[MODEL_NS_LEN];
	int64_t us; /* the shape's total time */
} icand;

typedef struct build {
	model *m;
	hash_map shapes; /* hash -> shape index + 1 */
} build;

static int64_t shape_us(const build *b, uint64_t hash)
{
	size_t i = hash_map_get(&b->shapes, hash);
	return i ? b->m->shapes[i - 1].total_us : 0;
}

static model_rec *rec_new(model *m, const char *ns, bool index, rule_id rule)
{
	model_rec *nr = realloc(m->recs, (m->nrecs + 1) * sizeof *nr);
	if (!nr)
		abort();
	m->recs = nr;
	model_rec *r = &m->recs[m->nrecs++];
	memset(r, 0, sizeof *r);
	snprintf(r->ns, sizeof r->ns, "%s", ns);
	r->index = index;
	r->rule = rule;
	return r;
}

/* Adds hash to r's shapes once; its time once. */
static void rec_add_shape(const build *b, model_rec *r, uint64_t hash)
{
	for (size_t i = 0; i < r->nshapes; i++)
		if (r->shapes[i] == hash)
			return;
	uint64_t *ns = realloc(r->shapes, (r->nshapes + 1) * sizeof *ns);
	if (!ns)
		abort();
	r->shapes = ns;
	r->shapes[r->nshapes++] = hash;
	r->total_us += shape_us(b, hash);
}

/* ---- indexes ---- */

static int by_group(const void *x, const void *y)
{
	const icand *a = x, *b = y;
	int c = strcmp(a->ns, b->ns);
	if (!c)
		c = strcmp(a->cmd.opts, b->cmd.opts);
	if (!c && a->us != b->us)
		c = a->us > b->us ? -1 : 1;
	return c;
}

/* The collation of an options document ({"collation": {...}}) or of an
 * index spec's collation JSON; NULL for the simple one. *known false when
 * the text cannot be read (the regex rule writes mongosh, not JSON). */
static bson_t *collation_of(const char *json, bool opts, bool *known)
{
	bson_iter_t it;
	uint32_t l;
	const uint8_t *d;
	*known = true;
	if (!json[0])
		return NULL;
	bson_t *b = bson_new_from_json((const uint8_t *)json, -1, NULL);
	if (!b) {
		*known = false;
		return NULL;
	}
	if (!opts)
		return b;
	bson_t *c = NULL;
	if (bson_iter_init_find(&it, b, "collation") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
		bson_iter_document(&it, &l, &d);
		c = bson_new_from_data(d, l);
	}
	bson_destroy(b);
	return c;
}

static const model_ns *ns_row(const model *m, const char *ns)
{
	for (size_t i = 0; i < m->nnss; i++)
		if (!strcmp(m->nss[i].ns, ns))
			return &m->nss[i];
	return NULL;
}

/* Existing indexes the recommendation makes redundant, and whether one
 * already serves every shape it serves (the capture's last snapshot). */
static void against_existing(model *m, model_rec *r, const rec_key *key, const char *opts,
                             const rec_key *shapes, const size_t *group, size_t n, size_t g)
{
	const model_ns *row = ns_row(m, r->ns);
	bool known;
	bson_t *rc = collation_of(opts, true, &known);
	static rec_key ek;
	for (size_t i = 0; known && row && i < row->nindexes; i++) {
		const model_index *x = &row->indexes[i];
		bool ik;
		bson_t *xc = collation_of(x->collation, false, &ik);
		bool same = ik && query_collation_equal(rc, xc);
		bson_destroy(xc);
		if (!same || !rec_key_from_json(x->key, &ek))
			continue;
		bool serves = true;
		for (size_t j = 0; j < n && serves; j++)
			if (group[j] == g)
				serves = rec_key_serves(&ek, &shapes[j]);
		r->exists = r->exists || serves;
		if (!serves && !x->constraint && strcmp(x->name, "_id_") &&
		    rec_key_is_prefix(&ek, key) && r->nredundant < MODEL_REC_REDUNDANT) {
			snprintf(r->redundant[r->nredundant], sizeof r->redundant[0], "%s",
			         x->name);
			snprintf(r->redundant_key[r->nredundant++], sizeof r->redundant_key[0],
			         "%s", x->key);
		}
	}
	bson_destroy(rc);
}

static void index_rec(build *b, const icand *c0, const rec_key *key, const rec_key *shapes,
                      const icand *const *who, const size_t *group, size_t n, size_t g)
{
	size_t first = 0;
	while (group[first] != g) /* the group's costliest shape (who[] is by time) */
		first++;
	model_rec *r = rec_new(b->m, c0->ns, true, who[first]->f->rule);
	text_buf t;
	text_init(&t, r->key, sizeof r->key);
	rec_key_put(&t, key);
	text_finish(&t);
	text_init(&t, r->command, sizeof r->command);
	text_str(&t, "db.getSiblingDB(");
	text_json(&t, c0->cmd.db);
	text_str(&t, ").getCollection(");
	text_json(&t, c0->cmd.coll);
	text_str(&t, ").createIndex(");
	rec_key_put(&t, key);
	if (c0->cmd.opts[0]) {
		text_str(&t, ", ");
		text_str(&t, c0->cmd.opts);
	}
	text_char(&t, ')');
	text_finish(&t);
	for (size_t j = 0; j < n; j++) {
		if (group[j] != g)
			continue;
		rec_add_shape(b, r, who[j]->f->hash);
		r->rules |= 1u << who[j]->f->rule;
		const char *rest = who[j]->f->suggestion + who[j]->cmd.len;
		while (*rest == ' ')
			rest++;
		if (!strncmp(rest, "and ", 4))
			rest += 4;
		if (*rest && !r->change[0]) /* the words after the command: what else to do */
			snprintf(r->change, sizeof r->change, "%s", rest);
	}
	against_existing(b->m, r, key, c0->cmd.opts, shapes, group, n, g);
}

/* One run of candidates with the same namespace and options. */
static void merge_run(build *b, const icand *c, size_t n)
{
	rec_key *shapes = malloc(n * sizeof *shapes), *keys = malloc(n * sizeof *keys);
	const icand **who = malloc(n * sizeof *who);
	size_t *group = malloc(n * sizeof *group), k = 0;
	if (!shapes || !keys || !who || !group)
		abort();
	for (size_t i = 0; i < n; i++) {
		rec_key s = c[i].cmd.key;
		const model_finding *f = c[i].f;
		if (f->esr_neq >= 0 && (size_t)(f->esr_neq + f->esr_nsort) <= s.n) {
			s.neq = (size_t)f->esr_neq;
			s.nsort = (size_t)f->esr_nsort;
		}
		shapes[k] = s;
		who[k++] = &c[i];
	}
	size_t ng = rec_merge(shapes, k, keys, group);
	for (size_t g = 0; g < ng; g++)
		index_rec(b, c, &keys[g], shapes, who, group, k, g);
	free(shapes);
	free(keys);
	free(who);
	free(group);
}

static void index_recs(build *b)
{
	model *m = b->m;
	icand *c = malloc((m->nfindings ? m->nfindings : 1) * sizeof *c);
	size_t n = 0;
	if (!c)
		abort();
	for (size_t i = 0; i < m->nfindings; i++) {
		if (!rec_parse_command(m->findings[i].suggestion, &c[n].cmd))
			continue;
		c[n].f = &m->findings[i];
		c[n].us = shape_us(b, m->findings[i].hash);
		snprintf(c[n].ns, sizeof c[n].ns, "%s.%s", c[n].cmd.db, c[n].cmd.coll);
		n++;
	}
	qsort(c, n, sizeof *c, by_group);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1;
		     j < n && !strcmp(c[j].ns, c[i].ns) && !strcmp(c[j].cmd.opts, c[i].cmd.opts);
		     j++)
			;
		merge_run(b, &c[i], j - i);
	}
	free(c);
}

/* ---- design changes ---- */

/* The pattern a finding's fix applies: its rule's, from what it saw. */
static const char *pattern_of(const model_finding *f)
{
	const rule_def *d = rule_table[f->rule];
	rule_report_finding rf = {
	    .shape = f->shape, .suggestion = f->suggestion, .arrays_seen_small = f->array_bounded};
	const char *p = d->design_pattern ? d->design_pattern(&rf) : NULL;
	return p ? p : "query change";
}

static void design_recs(build *b)
{
	model *m = b->m;
	size_t first = m->nrecs;
	for (size_t i = 0; i < m->nfindings; i++) {
		const model_finding *f = &m->findings[i];
		rec_command cmd;
		if (rec_parse_command(f->suggestion, &cmd))
			continue;
		const char *pat = pattern_of(f);
		const char *change =
		    f->suggestion[0] ? f->suggestion : rule_table[f->rule]->fix_kind;
		model_rec *r = NULL;
		for (size_t k = first; k < m->nrecs && !r; k++)
			if (!strcmp(m->recs[k].ns, f->ns) && m->recs[k].rule == f->rule &&
			    !strcmp(m->recs[k].pattern, pat) && !strcmp(m->recs[k].change, change))
				r = &m->recs[k];
		if (!r) {
			r = rec_new(m, f->ns, false, f->rule);
			snprintf(r->pattern, sizeof r->pattern, "%s", pat);
			snprintf(r->change, sizeof r->change, "%s", change);
		}
		rec_add_shape(b, r, f->hash);
		r->rules |= 1u << f->rule;
	}
}

/* ---- ranking ---- */

static void ns_totals(build *b)
{
	model *m = b->m;
	for (size_t i = 0; i < m->nrecs; i++) {
		model_rec *r = &m->recs[i];
		int64_t total = 0;
		/* every distinct shape the collection's fixes name, once */
		for (size_t k = 0; k < m->nrecs; k++) {
			if (strcmp(m->recs[k].ns, r->ns))
				continue;
			for (size_t s = 0; s < m->recs[k].nshapes; s++) {
				uint64_t h = m->recs[k].shapes[s];
				bool seen = false;
				for (size_t k2 = 0; k2 <= k && !seen; k2++) {
					if (strcmp(m->recs[k2].ns, r->ns))
						continue;
					size_t lim = k2 == k ? s : m->recs[k2].nshapes;
					for (size_t s2 = 0; s2 < lim && !seen; s2++)
						seen = m->recs[k2].shapes[s2] == h;
				}
				if (!seen)
					total += shape_us(b, h);
			}
		}
		r->ns_total_us = total;
	}
}

static int by_rank(const void *x, const void *y)
{
	const model_rec *a = x, *b = y;
	if (a->ns_total_us != b->ns_total_us)
		return a->ns_total_us > b->ns_total_us ? -1 : 1;
	int c = strcmp(a->ns, b->ns);
	if (c)
		return c;
	if (a->total_us != b->total_us)
		return a->total_us > b->total_us ? -1 : 1;
	if (a->index != b->index) /* an index before a redesign: it is one command */
		return a->index ? -1 : 1;
	return 0;
}

void report_recommend_build(model *m)
{
	build b = {.m = m};
	for (size_t i = 0; i < m->nshapes; i++)
		hash_map_put(&b.shapes, m->shapes[i].hash, i + 1);
	index_recs(&b);
	design_recs(&b);
	ns_totals(&b);
	if (m->nrecs > 1) /* recs is NULL when there are none */
		qsort(m->recs, m->nrecs, sizeof *m->recs, by_rank);
	hash_map_free(&b.shapes);
}
