/* The accesses of an aggregation pipeline (stages.h): one walk. */
#include "analyzers/planner/stages.h"

#include <string.h>

#include "analyzers/planner/query_preds.h"
#include "analyzers/planner/stage_paths.h"
#include "protocol/wire_iter.h"

static void stage_field(lookup_stage *out, const char *k, const bson_iter_t *it)
{
	const char *v = bson_iter_utf8(it, NULL);
	if (strcmp(k, "from") == 0)
		out->from = v;
	else if (strcmp(k, out->graph ? "connectFromField" : "localField") == 0)
		out->local = v;
	else if (strcmp(k, out->graph ? "connectToField" : "foreignField") == 0)
		out->foreign = v;
	else if (strcmp(k, "as") == 0)
		out->as = v;
}

bool lookup_stage_read(const bson_iter_t *stage, bool graph, lookup_stage *out)
{
	bson_iter_t it;
	out->from = out->local = out->foreign = out->as = NULL;
	out->has_pipeline = out->has_from = false;
	out->graph = graph;
	if (!WIRE_ITER_HOLDS_DOCUMENT(stage) || !wire_iter_recurse(stage, &it))
		return false;
	while (wire_iter_next(&it)) {
		const char *k = wire_iter_key(&it);
		out->has_from |= strcmp(k, "from") == 0;
		if (!graph && strcmp(k, "pipeline") == 0 && WIRE_ITER_HOLDS_ARRAY(&it)) {
			out->pipeline = it;
			out->has_pipeline = true;
		} else if (WIRE_ITER_HOLDS_UTF8(&it)) {
			stage_field(out, k, &it);
		}
	}
	return true;
}

/* ---- the walk ---- */

/* The stages the walk reads, told apart by the byte after '$' first:
 * most stages ($group, $project, $sort, ...) cost one comparison. */
typedef enum {
	ST_OTHER,
	ST_MATCH,
	ST_GEO_NEAR,
	ST_LOOKUP,
	ST_GRAPH_LOOKUP,
	ST_UNION_WITH,
	ST_FACET,
} stage_kind;

static stage_kind stage_of(const char *k)
{
	if (k[0] != '$')
		return ST_OTHER;
	switch (k[1]) {
	case 'm':
		return strcmp(k, "$match") == 0 ? ST_MATCH : ST_OTHER;
	case 'g':
		return strcmp(k, "$geoNear") == 0       ? ST_GEO_NEAR
		       : strcmp(k, "$graphLookup") == 0 ? ST_GRAPH_LOOKUP
		                                        : ST_OTHER;
	case 'l':
		return strcmp(k, "$lookup") == 0 ? ST_LOOKUP : ST_OTHER;
	case 'u':
		return strcmp(k, "$unionWith") == 0 ? ST_UNION_WITH : ST_OTHER;
	case 'f':
		return strcmp(k, "$facet") == 0 ? ST_FACET : ST_OTHER;
	default:
		return ST_OTHER;
	}
}

typedef struct walker {
	pipe_visit fn;
	void *arg;
} walker;

static bool walk_pipeline(const walker *w, const bson_iter_t *pipeline, const char *coll, int depth,
                          const pipe_access *parent);

static bool emit(const walker *w, pipe_access_kind kind, int depth, const char *stage,
                 const char *coll, const bson_iter_t *it)
{
	pipe_access a = {kind, depth, stage, coll, it, false, NULL, NULL, 0};
	return w->fn(w->arg, &a);
}

/* A sub-pipeline at depth, run against coll: its SUB, then its stages. */
static bool sub(const walker *w, const char *stage, const char *coll, const bson_iter_t *pipeline,
                const lookup_stage *join, int depth, const bson_iter_t *outer, unsigned index)
{
	pipe_access a = {PIPE_SUB,        depth, stage, coll, pipeline,
	                 stage[1] == 'f', join,  outer, index};
	if (depth > PIPELINE_MAX_DEPTH) {
		a.kind = PIPE_TOO_DEEP;
		return w->fn(w->arg, &a);
	}
	return w->fn(w->arg, &a) && walk_pipeline(w, pipeline, coll, depth, &a);
}

/* An iterator on the member `key` of the document it is on. */
static bool member(const bson_iter_t *doc, const char *key, bson_iter_t *out)
{
	return WIRE_ITER_HOLDS_DOCUMENT(doc) && wire_iter_recurse(doc, out) &&
	       bson_iter_find(out, key);
}

static bool join(const walker *w, const bson_iter_t *c, const char *k, const char *coll, int depth)
{
	lookup_stage lk;
	bson_iter_t r;
	bool graph = k[1] == 'g';
	if (!lookup_stage_read(c, graph, &lk))
		return true;
	pipe_access a = {PIPE_JOIN, depth, k, lk.from, c, false, &lk, NULL, 0};
	if (!w->fn(w->arg, &a))
		return false;
	const char *inner = lk.from ? lk.from : coll;
	if (graph)
		return !member(c, "restrictSearchWithMatch", &r) ||
		       emit(w, PIPE_MATCH, depth, k, inner, &r);
	return !lk.has_pipeline || sub(w, k, inner, &lk.pipeline, &lk, depth + 1, NULL, 0);
}

/* {"p": []}: the pipeline of a $unionWith that names none. */
static const uint8_t no_pipeline[] = {13, 0, 0, 0, BSON_TYPE_ARRAY, 'p', 0, 5, 0, 0, 0, 0, 0};

/* {$unionWith: {coll, pipeline}}; {$unionWith: "coll"} and one without a
 * pipeline are mongod's {coll, pipeline: []}, every document of coll. */
static bool union_with(const walker *w, const bson_iter_t *c, const char *coll, int depth)
{
	bson_iter_t it, pipeline;
	const char *into = NULL;
	bool has_pipeline = false;
	if (WIRE_ITER_HOLDS_UTF8(c)) {
		into = bson_iter_utf8(c, NULL);
	} else if (WIRE_ITER_HOLDS_DOCUMENT(c) && wire_iter_recurse(c, &it)) {
		while (wire_iter_next(&it)) {
			const char *k = wire_iter_key(&it);
			if (strcmp(k, "coll") == 0 && WIRE_ITER_HOLDS_UTF8(&it))
				into = bson_iter_utf8(&it, NULL);
			else if (strcmp(k, "pipeline") == 0 && WIRE_ITER_HOLDS_ARRAY(&it))
				pipeline = it, has_pipeline = true;
		}
	} else {
		return true; /* refused by mongod */
	}
	if (!has_pipeline &&
	    !(into && wire_iter_init_raw(&pipeline, no_pipeline, sizeof no_pipeline) &&
	      wire_iter_next(&pipeline)))
		return true;
	return sub(w, "$unionWith", into ? into : coll, &pipeline, NULL, depth + 1, NULL, 0);
}

/* The stage at index of pipeline (its iterator on the stage). */
static bool walk_stage(const walker *w, const bson_iter_t *pipeline, unsigned index,
                       const bson_iter_t *stage, const char *coll, int depth,
                       const pipe_access *parent)
{
	bson_iter_t c, r;
	if (!WIRE_ITER_HOLDS_DOCUMENT(stage) || !wire_iter_recurse(stage, &c))
		return true;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c);
		bool ok = true;
		switch (stage_of(k)) {
		case ST_MATCH: {
			pipe_access a = {PIPE_MATCH,
			                 depth,
			                 k,
			                 coll,
			                 &c,
			                 parent && parent->facet,
			                 parent ? parent->join : NULL,
			                 pipeline,
			                 index};
			ok = w->fn(w->arg, &a);
			break;
		}
		case ST_GEO_NEAR:
			ok = !member(&c, "query", &r) || emit(w, PIPE_MATCH, depth, k, coll, &r);
			break;
		case ST_LOOKUP:
		case ST_GRAPH_LOOKUP:
			ok = join(w, &c, k, coll, depth);
			break;
		case ST_UNION_WITH:
			ok = union_with(w, &c, coll, depth);
			break;
		case ST_FACET:
			if (WIRE_ITER_HOLDS_DOCUMENT(&c) && wire_iter_recurse(&c, &r))
				while (ok && wire_iter_next(&r))
					ok = !WIRE_ITER_HOLDS_ARRAY(&r) ||
					     sub(w, "$facet", coll, &r, NULL, depth + 1, pipeline,
					         index);
			break;
		case ST_OTHER:
			break;
		}
		if (!ok)
			return false;
	}
	return true;
}

static bool walk_pipeline(const walker *w, const bson_iter_t *pipeline, const char *coll, int depth,
                          const pipe_access *parent)
{
	bson_iter_t s;
	if (!WIRE_ITER_HOLDS_ARRAY(pipeline) || !wire_iter_recurse(pipeline, &s))
		return true;
	for (unsigned i = 0; wire_iter_next(&s); i++)
		if (!walk_stage(w, pipeline, i, &s, coll, depth, parent))
			return false;
	return true;
}

/* The stages before the $match at index of pipeline, as its members move
 * back past them (stage_paths.h): only those after the last stage no
 * member moves past (base: its index + 1; a stage the model cannot hold
 * counts as one). Built once per $match; match on that stage's value. */
typedef struct slot_model {
	stage_paths p;
	unsigned base;
	bool group_ok;
} slot_model;

static void slot_model_build(slot_model *sm, const bson_iter_t *pipeline, unsigned index,
                             const bson_iter_t *match)
{
	bson_iter_t s, c;
	stage_paths_init(&sm->p);
	sm->base = index; /* unreadable: no member moves */
	if (!wire_iter_recurse(pipeline, &s))
		return;
	sm->base = 0;
	for (unsigned i = 0; i < index && wire_iter_next(&s); i++) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&s) || !wire_iter_recurse(&s, &c) ||
		    !wire_iter_next(&c) || !stage_paths_add(&sm->p, wire_iter_key(&c), &c)) {
			stage_paths_init(&sm->p);
			sm->base = i + 1;
		}
	}
	sm->group_ok = stage_paths_group_ok(&sm->p, match);
}

/* Where mongod's optimization moves a member on f (NULL: an operator
 * member) of that $match: just past the last stage before it that the
 * member cannot move past. at: its field there. */
static unsigned member_slot(const slot_model *sm, const char *f, const char **at)
{
	*at = f;
	return sm->base + sm->p.nstages - stage_paths_back(&sm->p, f, sm->group_ok, at);
}

typedef struct members {
	const slot_model *sm; /* of the $match being read */
	unsigned slot;        /* where a's member lands */
	const char *at;       /* a's member's field there */
	bool (*fn)(void *arg, const char *field, const bson_iter_t *member);
	void *arg;
} members;

/* The plain members of a $match's filter (and of a top-level $and in it,
 * nested) that land where a's does, on another field there: fn on each,
 * with that field, until it says true. */
static bool each_member(const members *m, const bson_iter_t *filter, int depth)
{
	bson_iter_t c, e;
	if (depth > 4 || !WIRE_ITER_HOLDS_DOCUMENT(filter) || !wire_iter_recurse(filter, &c))
		return false;
	while (wire_iter_next(&c)) {
		const char *k = wire_iter_key(&c), *at;
		if (strcmp(k, "$and") == 0 && WIRE_ITER_HOLDS_ARRAY(&c) &&
		    wire_iter_recurse(&c, &e)) {
			while (wire_iter_next(&e))
				if (each_member(m, &e, depth + 1))
					return true;
		} else if (k[0] != '$' && member_slot(m->sm, k, &at) == m->slot &&
		           !(m->at && strcmp(at, m->at) == 0) && m->fn(m->arg, at, &c)) {
			return true;
		}
	}
	return false;
}

unsigned pipe_match_slot(const pipe_access *a, const char *f)
{
	if (a->kind != PIPE_MATCH || !a->pipeline)
		return 0;
	if (a->index >= PIPE_MERGE_STAGES)
		return a->index;
	slot_model sm;
	const char *at;
	slot_model_build(&sm, a->pipeline, a->index, a->it);
	return member_slot(&sm, f, &at);
}

bool pipe_match_members(const pipe_access *a, const char *f,
                        bool (*fn)(void *arg, const char *field, const bson_iter_t *member),
                        void *arg)
{
	bson_iter_t s, c;
	if (a->kind != PIPE_MATCH || !a->pipeline || a->index >= PIPE_MERGE_STAGES ||
	    !wire_iter_recurse(a->pipeline, &s))
		return false;
	slot_model sm; /* a's $match's, then each later $match's */
	slot_model_build(&sm, a->pipeline, a->index, a->it);
	members m = {&sm, 0, NULL, fn, arg};
	m.slot = member_slot(&sm, f, &m.at);
	/* a member lands at its own stage or before: only stages from a's
	 * slot on, and only up to a stage no member moves past */
	for (unsigned i = 0; i < PIPE_MERGE_STAGES && wire_iter_next(&s); i++) {
		if (!WIRE_ITER_HOLDS_DOCUMENT(&s) || !wire_iter_recurse(&s, &c) ||
		    !wire_iter_next(&c))
			return false;
		const char *k = wire_iter_key(&c);
		if (i < m.slot)
			continue;
		if (stage_of(k) == ST_MATCH) {
			slot_model_build(&sm, a->pipeline, i, &c);
			if (each_member(&m, &c, 0))
				return true;
			continue;
		}
		stage_paths p;
		stage_paths_init(&p);
		if (!stage_paths_add(&p, k, &c))
			return false;
	}
	return false;
}

bool pipeline_walk(const bson_iter_t *pipeline, pipe_visit fn, void *arg)
{
	walker w = {fn, arg};
	return walk_pipeline(&w, pipeline, NULL, 0, NULL);
}

/* Stops the walk at a filter mongod refuses. */
static bool filter_accepted(void *arg, const pipe_access *a)
{
	bson_t f;
	(void)arg;
	return a->kind != PIPE_MATCH || !wire_iter_doc_view(a->it, &f) || !query_filter_refused(&f);
}

bool pipeline_refused(const bson_iter_t *pipeline)
{
	return !pipeline_walk(pipeline, filter_accepted, NULL);
}

static bool nesting(const char *k)
{
	stage_kind s = stage_of(k);
	return s != ST_OTHER && s != ST_MATCH;
}

/* Each stage's name read in place, as the first key of its document,
 * walking the array's bytes (the body was validated, so every length and
 * key ends inside it). Anything but a document among the stages ends the
 * walk with "maybe": the server refuses such a pipeline anyway. */
bool pipeline_maybe_nested(const bson_iter_t *pipeline)
{
	if (!WIRE_ITER_HOLDS_ARRAY(pipeline))
		return false;
	const uint8_t *p = pipeline->raw + pipeline->d1 + 4; /* the first element */
	while (*p) {
		if (*p != BSON_TYPE_DOCUMENT)
			return true;
		p += 1 + strlen((const char *)p + 1) + 1; /* type, index key */
		uint32_t len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		               (uint32_t)p[3] << 24;
		if (len > 5 && nesting((const char *)p + 5))
			return true;
		p += len;
	}
	return false;
}

bool pipeline_match_after(const bson_iter_t *s)
{
	const uint8_t *p = s->raw + s->next_off, *end = s->raw + s->len - 1;
	while (p < end && *p) {
		if (*p != BSON_TYPE_DOCUMENT)
			return true;
		p += 1 + strlen((const char *)p + 1) + 1; /* type, index key */
		if (p + 5 > end)
			return true;
		uint32_t len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		               (uint32_t)p[3] << 24;
		if (len < 5 || len > (size_t)(end - p))
			return true;
		if (len > 5 && strcmp((const char *)p + 5, "$match") == 0)
			return true;
		p += len;
	}
	return false;
}
