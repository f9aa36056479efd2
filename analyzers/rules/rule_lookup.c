/* hot-path-lookup: finding joins in pipelines, and counting executions per
 * shape in a sliding window.
 *
 * The tracker is an lru_map of fixed-size entries keyed by the shape hash.
 * Each entry holds a ring of the last `threshold` execution times. When the
 * table is full the least recently executed shape gives up its entry, which
 * is reused in place, so after warm-up recording never allocates. */
#include "analyzers/rules/rule_lookup.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/catalog/lru_map.h"
#include "analyzers/planner/stages.h"
#include "analyzers/rules/rule_api.h"
#include "protocol/wire_iter.h"

/* The first join of the pipeline's accesses (stages.h), nested ones
 * included. */
typedef struct first_join {
	const char *stage;
	char *from;
	size_t from_len;
} first_join;

static bool on_access(void *arg, const pipe_access *a)
{
	first_join *j = arg;
	if (a->kind != PIPE_JOIN || !a->join->has_from)
		return true; /* a $lookup of $documents joins no collection */
	j->stage = a->join->graph ? "$graphLookup" : "$lookup";
	if (j->from && j->from_len) {
		const char *f = a->join->from ? a->join->from : "";
		size_t n = strlen(f);
		if (n >= j->from_len)
			n = j->from_len - 1;
		memcpy(j->from, f, n);
		j->from[n] = '\0';
	}
	return false;
}

bool rule_lookup_find(const bson_iter_t *pipeline, const char **stage, char *from, size_t from_len)
{
	first_join j = {NULL, from, from_len};
	bool found = !pipeline_walk(pipeline, on_access, &j);
	if (stage)
		*stage = j.stage;
	return found;
}

typedef struct entry {
	lru_map_node node; /* its hash is the shape */
	uint32_t count;    /* filled slots of ring, <= threshold */
	uint32_t head;     /* next slot to write */
	int64_t ring[];    /* threshold slots */
} entry;

struct lookup_tracker {
	pthread_mutex_t lock;
	uint32_t threshold;
	int64_t window_ms;
	lru_map map; /* least recently executed evicted first */
};

static entry *entry_of(lru_map_node *n)
{
	return LRU_MAP_ENTRY(n, entry, node);
}

static void entry_free(lru_map_node *n)
{
	free(entry_of(n));
}

lookup_tracker *lookup_tracker_new(uint32_t threshold, uint32_t window_seconds, size_t max_shapes)
{
	lookup_tracker *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->threshold = threshold ? threshold : 1;
	t->window_ms = (int64_t)window_seconds * 1000;
	if (!lru_map_init(&t->map, max_shapes)) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void lookup_tracker_free(lookup_tracker *t)
{
	if (!t)
		return;
	lru_map_destroy(&t->map, entry_free);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* The shape is already an FNV hash, so it serves as the map's hash and, with
 * no comparison callback, as the key. */
static entry *find_or_add(lookup_tracker *t, uint64_t shape)
{
	lru_map_node *n = lru_map_find(&t->map, shape, NULL, NULL);
	if (n)
		return entry_of(n);
	entry *e;
	if (lru_map_full(&t->map)) {
		/* least recently executed: reuse its memory */
		e = entry_of(lru_map_oldest(&t->map));
		lru_map_remove(&t->map, &e->node);
	} else {
		e = malloc(sizeof(*e) + sizeof(int64_t) * t->threshold);
		if (!e)
			return NULL;
	}
	e->count = 0;
	e->head = 0;
	lru_map_insert(&t->map, &e->node, shape);
	return e;
}

bool lookup_tracker_record(lookup_tracker *t, uint64_t shape, int64_t now_ms, uint32_t *runs)
{
	pthread_mutex_lock(&t->lock);
	entry *e = find_or_add(t, shape);
	if (!e) {
		pthread_mutex_unlock(&t->lock);
		if (runs)
			*runs = 0;
		return false;
	}
	lru_map_touch(&t->map, &e->node);
	e->ring[e->head] = now_ms;
	e->head = (e->head + 1) % t->threshold;
	if (e->count < t->threshold)
		e->count++;
	/* Full ring: slot head holds the oldest of the last `threshold`
	 * executions; all of them lie in the window iff it does. */
	bool hot = e->count == t->threshold && now_ms - e->ring[e->head] < t->window_ms;
	uint32_t count = e->count;
	pthread_mutex_unlock(&t->lock);
	if (runs)
		*runs = hot ? t->threshold : count;
	return hot;
}

size_t lookup_tracker_size(lookup_tracker *t)
{
	pthread_mutex_lock(&t->lock);
	size_t n = lru_map_count(&t->map);
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* ---- the rule: parameters, check and words ---- */

typedef struct lookup_facts {
	const char *stage; /* "$lookup" or "$graphLookup" */
	char from[128];    /* "" when not a plain name */
	uint32_t runs;
	uint32_t window_seconds;
} lookup_facts;

/* Explain runs nothing, so it is never an execution; every real one is
 * counted, reported or not, which is why this check does not ask
 * rule_wanted() first. */
static void check_pipeline(rule_ctx *c, const rule_site *s, const bson_iter_t *pipeline)
{
	lookup_facts f;
	uint32_t len;
	const uint8_t *data;
	if (rule_ctx_explain(c) || !WIRE_ITER_HOLDS_ARRAY(pipeline))
		return;
	/* Most pipelines join nothing: a byte search says so without a walk. */
	bson_iter_array(pipeline, &len, &data);
	if (!join_maybe_in(data, len))
		return;
	if (!rule_lookup_find(pipeline, &f.stage, f.from, sizeof(f.from)))
		return;
	char shape[SHAPE_BUF_LEN];
	uint64_t hash = rule_shape_redacted(c, s, shape);
	if (!lookup_tracker_record(rule_ctx_state(c, RULE_HOT_PATH_LOOKUP), hash,
	                           rule_ctx_now_ms(c), &f.runs))
		return;
	f.window_seconds =
	    rule_ctx_config(c, RULE_HOT_PATH_LOOKUP)->params[LOOKUP_PARAM_WINDOW_SECONDS];
	rule_report_shaped(c, s, RULE_HOT_PATH_LOOKUP, &f, shape, hash);
}

/* ` from "coll"`, or nothing when the join names no plain collection. */
static void from_clause(text_buf *t, const char *from)
{
	if (!from[0])
		return;
	text_str(t, " from \"");
	text_json_str(t, from, strlen(from), 0);
	text_char(t, '"');
}

static void words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w)
{
	const lookup_facts *f = facts;
	text_buf t;
	text_init(&t, w->buf, sizeof(w->buf));
	size_t start = text_mark(&t);
	text_printf(&t, "this aggregation joins with %s", f->stage);
	from_clause(&t, f->from);
	text_printf(&t, " and its shape ran %u times within %u s", f->runs, f->window_seconds);
	w->detail = rule_words_piece(&t, start);
	start = text_mark(&t);
	text_str(&t, "embed the joined data");
	from_clause(&t, f->from);
	text_str(&t, " in the documents this query reads, or keep an extended reference (copy the "
	             "few fields the query needs next to the reference), so this hot query needs "
	             "no join");
	w->suggestion = rule_words_piece(&t, start);
	w->fix = "embed the joined data, or keep an extended reference (the fields the query needs "
	         "copied next to the reference), so the hot path needs no join";
}

static void *state_new(const rule_config *rc)
{
	return lookup_tracker_new(rc->params[LOOKUP_PARAM_THRESHOLD],
	                          rc->params[LOOKUP_PARAM_WINDOW_SECONDS], LOOKUP_MAX_SHAPES);
}

static void state_free(void *state)
{
	lookup_tracker_free(state);
}

static const rule_param params[] = {
    {"threshold", RULE_PARAM_U32, 60, 1, 1000000, LOOKUP_PARAM_THRESHOLD,
     "executions of one shape that make it hot"},
    {"windowSeconds", RULE_PARAM_U32, 60, 1, 86400, LOOKUP_PARAM_WINDOW_SECONDS,
     "the window those executions fall in"},
};

static const rule_checks checks = {
    .pipeline = check_pipeline,
    .words = words,
    .state_new = state_new,
    .state_free = state_free,
};

/* The report's design change: copy the fields the join reads into the
 * document that joins. */
static const char *lookup_design_pattern(const rule_report_finding *f)
{
	(void)f;
	return "extended reference pattern";
}

const rule_def rule_lookup_def = {
    .id = RULE_HOT_PATH_LOOKUP,
    .name = "hot-path-lookup",
    .summary = "an aggregation with $lookup / $graphLookup runs often (threshold in window)",
    .fix_kind = "embedding / extended reference",
    .design_pattern = lookup_design_pattern,
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .checks = &checks,
};
