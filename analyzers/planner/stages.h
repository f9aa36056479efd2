/* The accesses of an aggregation pipeline, found by one walk that every
 * reader shares (the engine's sub-pipeline queries and sorts, and the
 * rules' joins and filters): each stage that reads another collection
 * ($lookup, $graphLookup, $unionWith), each sub-pipeline and the
 * collection it runs against ($lookup's and $unionWith's pipelines, the
 * branches of $facet), and each filter a stage applies ($match, $geoNear's
 * query, $graphLookup's restrictSearchWithMatch). A form learnt here is
 * seen by every rule that reads pipelines. */
#ifndef MG_ANALYZERS_PLANNER_STAGES_H
#define MG_ANALYZERS_PLANNER_STAGES_H

#include <bson/bson.h>
#include <stdbool.h>

/* mongod's own limit on nested sub-pipelines ($lookup, $unionWith,
 * $facet: kMaxSubPipelineDepth); deeper is refused by the server. */
#define PIPELINE_MAX_DEPTH 20

/* {$lookup: {from, localField, foreignField, as, pipeline, ...}}: each
 * string field (NULL when absent or not a string), and the pipeline when
 * it is an array. {$graphLookup: {from, connectFromField, connectToField, ...}}
 * reads the same way: connectToField is the field of `from` each
 * iteration matches ($in of the values reached), connectFromField the one
 * it follows (local). */
typedef struct lookup_stage {
	const char *from, *local, *foreign;
	const char *as; /* the field the stage writes its results to */
	bool has_pipeline;
	bson_iter_t pipeline; /* valid when has_pipeline */
	bool graph;           /* $graphLookup */
	/* a from field of any type ({db, coll} names a collection too); a
	 * $lookup without one reads no collection: its pipeline starts with
	 * $documents */
	bool has_from;
} lookup_stage;

/* stage: an iterator on the $lookup's (graph: $graphLookup's) value.
 * False when it is no document. */
bool lookup_stage_read(const bson_iter_t *stage, bool graph, lookup_stage *out);

typedef enum {
	PIPE_MATCH,    /* a filter a stage applies: $match, $geoNear's query,
	                  $graphLookup's restrictSearchWithMatch */
	PIPE_JOIN,     /* $lookup or $graphLookup: `from` read per input document */
	PIPE_SUB,      /* a sub-pipeline, before its own stages are walked */
	PIPE_TOO_DEEP, /* sub-pipelines nested past PIPELINE_MAX_DEPTH: not walked */
} pipe_access_kind;

typedef struct pipe_access {
	pipe_access_kind kind;
	int depth;         /* 0: the request's pipeline; one more per sub-pipeline */
	const char *stage; /* the stage's name: "$match", "$lookup", "$facet", ... */
	/* The collection read: JOIN and a $lookup's or $unionWith's SUB, the
	 * one the stage names; MATCH, the one its pipeline runs against (the
	 * innermost named; NULL: the request's own); a $facet branch, its
	 * pipeline's. */
	const char *coll;
	const bson_iter_t *it; /* MATCH: the filter; SUB: the pipeline (an array) */
	/* SUB: a $facet branch (runs on its input: no index); a $match stage's
	 * MATCH: in such a branch (its nearest enclosing sub-pipeline is one) */
	bool facet;
	/* JOIN, and a $lookup's SUB: the stage's fields; a $match stage's
	 * MATCH: the $lookup whose pipeline it is in (nearest; NULL: none) */
	const lookup_stage *join;
	/* MATCH of a $match stage: the pipeline it is in (an iterator on the
	 * array) and its place there, for pipe_match_members; a $facet
	 * branch's SUB: the pipeline the $facet stage is in, and its place;
	 * NULL otherwise. */
	const bson_iter_t *pipeline;
	unsigned index;
} pipe_access;

/* The $match members mongod's pipeline optimization brings into the one
 * $match where a's member on the plain field f lands (f NULL: a member
 * that is an operator, $or, $expr, ...), a's own stage included. Each part
 * of a $match moves before the stages that do not change what it reads,
 * renamed by those that rename it (stage_paths.h: $sort, projections,
 * $unwind, $lookup, $group), and the parts that land in one place
 * coalesce. Calls fn(arg, field, member) on each plain member (a field:
 * value at a $match's top level, or in a top-level $and, nested) that
 * lands where a's does on another field than a's there, field being its
 * name there, until fn returns true; true then. a: a MATCH of a $match
 * stage. Only the first PIPE_MERGE_STAGES stages are read, and a's must
 * be one of them: fewer members merge past them, never more. */
enum { PIPE_MERGE_STAGES = 64 };
bool pipe_match_members(const pipe_access *a, const char *f,
                        bool (*fn)(void *arg, const char *field, const bson_iter_t *member),
                        void *arg);

/* Where mongod's optimization lands a's member on the plain field f (NULL:
 * an operator member), a a $match stage's MATCH: the index of the first
 * stage it cannot move before (0: the pipeline's head, where the query
 * layer reads it; past PIPE_MERGE_STAGES, a's own index). */
unsigned pipe_match_slot(const pipe_access *a, const char *f);

/* Calls fn for each access of pipeline (an iterator on an array of
 * stages), in stage order, a sub-pipeline's after its SUB; fn returns
 * false to stop the walk, which then returns false. */
typedef bool (*pipe_visit)(void *arg, const pipe_access *a);
bool pipeline_walk(const bson_iter_t *pipeline, pipe_visit fn, void *arg);

/* Whether mongod refuses pipeline for an operator it does not know in a
 * filter some stage applies, at any depth (query_filter_refused): it
 * parses every stage, sub-pipelines included, before it runs any. */
bool pipeline_refused(const bson_iter_t *pipeline);

/* Whether the array's bytes may hold a stage pipeline_walk reports
 * anything but $match for (a byte search; false: certainly none). */
bool pipeline_maybe_nested(const bson_iter_t *pipeline);

/* Whether a stage after the one s is on (an iterator on a pipeline's
 * stages) may be a $match (a byte search of their names; false: certainly
 * none). */
bool pipeline_match_after(const bson_iter_t *s);

#endif
