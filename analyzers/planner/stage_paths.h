/* What pipeline stages change of a document, for a $match after them.
 *
 * mongod's pipeline optimization moves each part of a $match before the
 * stages it does not depend on (DocumentSource::pushMatchBefore: a stage
 * that canSwapWithMatch, split by its getModifiedPaths, renamed by its
 * renames; the manual's "Aggregation Pipeline Optimization"). Modelled
 * here: $sort and $match (change nothing: a $limit after a $sort goes
 * into it, and blocks as $limit does), the projection stages $project,
 * $unset, $addFields and $set, $unwind (its path and includeArrayIndex),
 * $lookup (its `as`) and $group (every field changes but its _id, which
 * renames the fields its _id names). Every other stage ($limit, $skip,
 * $facet, ...) blocks: mongod moves a $match past some of them too, so
 * fewer parts are moved here, never more.
 *
 * A rename is a field computed as "$a" (one component, the current
 * document's: ExpressionFieldPath::getComputedPaths): {$project: {b:
 * "$a"}}, {$addFields: {b: "$a"}}, {$group: {_id: "$a"}}, {$group: {_id:
 * {x: "$a"}}} ("_id.x" is a). A $match on b there is a $match on a before
 * it. Only a member on the renamed field itself is renamed; one under it
 * ("b.c") stays, where mongod renames it too.
 *
 * The model is of plain fields: a $match member that is an operator
 * ($and, $or, $expr, ...) moves only past stages that change nothing. Past
 * a $group, a $match moves only when it names no operator at its top
 * level and no $exists or $type anywhere (mongod's groupMatchSwapVerified
 * refuses an existence or type predicate on the group key, and some $expr
 * shapes). */
#ifndef MG_ANALYZERS_PLANNER_STAGE_PATHS_H
#define MG_ANALYZERS_PLANNER_STAGE_PATHS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

enum { STAGE_PATHS_MAX = 32, STAGE_PATHS_RENAMES = 16, STAGE_PATHS_STAGES = 16 };

/* A field a stage computes from another: `to` after it (under "_id." when
 * under_id) is `from` before it. The strings point into the stages. */
typedef struct stage_rename {
	const char *to, *from;
	bool under_id;
} stage_rename;

/* One stage: its paths (path[first .. first + n)) are the ones it
 * changes, or when keeps, the only ones it keeps (with _id when id); its
 * renames, rename[rfirst .. rfirst + rn). */
typedef struct stage_change {
	uint8_t first, n, rfirst, rn;
	bool keeps, id;
	bool group; /* a $group: the $match's own condition (above) */
} stage_change;

/* The stages added, in the pipeline's order. */
typedef struct stage_paths {
	const char *path[STAGE_PATHS_MAX];
	unsigned n;
	stage_rename rename[STAGE_PATHS_RENAMES];
	unsigned nrenames;
	stage_change stage[STAGE_PATHS_STAGES];
	unsigned nstages;
	bool groups; /* some stage added is a $group */
} stage_paths;

static inline void stage_paths_init(stage_paths *p)
{
	p->n = p->nrenames = p->nstages = 0;
	p->groups = false;
}

/* Adds the stage named k, v on its value. False when a $match cannot move
 * past it (a blocking stage, one not understood, or more stages, paths or
 * renames than are kept); p is then not to be asked. */
bool stage_paths_add(stage_paths *p, const char *k, const bson_iter_t *v)
    __attribute__((warn_unused_result));

/* Whether the members of the $match whose value is match (its document)
 * move past the $group stages added (stage_paths.c: mongod moves a $match
 * past a $group only when it names no top-level operator, $exists or
 * $type): asked once per $match, for stage_paths_back. */
bool stage_paths_group_ok(const stage_paths *p, const bson_iter_t *match);

/* How many of the stages added last a $match member on the plain field f
 * (NULL: an operator member) moves back past; group_ok:
 * stage_paths_group_ok of its $match. When name is not NULL it is set to
 * the member's field where it lands (f, or the field a rename computed it
 * from). */
unsigned stage_paths_back(const stage_paths *p, const char *f, bool group_ok, const char **name);

/* Whether such a member moves past every stage added. */
static inline bool stage_paths_pass(const stage_paths *p, const char *f, bool group_ok,
                                    const char **name)
{
	return stage_paths_back(p, f, group_ok, name) == p->nstages;
}

#endif
