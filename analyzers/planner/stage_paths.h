/* What pipeline stages change of a document, for a $match after them.
 *
 * mongod's pipeline optimization moves each part of a $match before the
 * stages it does not depend on (DocumentSource::pushMatchBefore: a stage
 * that canSwapWithMatch, split by its getModifiedPaths; the manual's
 * "Aggregation Pipeline Optimization"). Modelled here: $sort (changes
 * nothing: a $limit after it goes into it, and blocks as $limit does),
 * $match (coalesces), the projection stages $project, $unset, $addFields
 * and $set, $unwind (its path and includeArrayIndex) and $lookup (its
 * `as`). Every other stage ($group, $limit, $skip, $facet, ...) blocks:
 * mongod moves a $match past some of them too, so fewer parts are moved
 * here, never more. The model is of plain fields: a $match member that is
 * an operator ($and, $or, $expr, ...) moves only past stages that change
 * nothing ($sort, $match). */
#ifndef MG_ANALYZERS_PLANNER_STAGE_PATHS_H
#define MG_ANALYZERS_PLANNER_STAGE_PATHS_H

#include <bson/bson.h>
#include <stdbool.h>

enum { STAGE_PATHS_MAX = 16, STAGE_PATHS_KEEPS = 4 };

/* The paths the stages added change: the fields $addFields / $set assign,
 * the ones $unset or an exclusion $project removes, an $unwind's, a
 * $lookup's `as`, the computed fields of an inclusion $project, which also
 * changes every field it does not keep (keeps[], per such stage: a field
 * must be kept by every one). The strings point into the stages' bytes. */
typedef struct stage_paths {
	const char *path[STAGE_PATHS_MAX];
	unsigned n;
	struct {
		const char *path[STAGE_PATHS_MAX];
		unsigned n;
		bool id; /* _id kept (unless {_id: 0}) */
	} keeps[STAGE_PATHS_KEEPS];
	unsigned nkeeps;
	bool any; /* some stage added changes something */
} stage_paths;

static inline void stage_paths_init(stage_paths *p)
{
	p->n = p->nkeeps = 0;
	p->any = false;
}

/* Adds the stage named k, v on its value. False when a $match cannot move
 * past it (a blocking stage, one not understood, or more paths than are
 * kept); p is then not to be asked. */
bool stage_paths_add(stage_paths *p, const char *k, const bson_iter_t *v)
    __attribute__((warn_unused_result));

/* Whether a $match member on the plain field f (NULL: an operator member)
 * moves past every stage added. */
bool stage_paths_pass(const stage_paths *p, const char *f);

#endif
