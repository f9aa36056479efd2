/* One recommendation per collection (recommend.c): the index suggestions
 * of the findings merged into as few indexes as serve every shape, and the
 * design changes the other findings ask for, ranked by the time their
 * shapes spent.
 *
 * The merge rule. A shape's suggested key is its ESR key (analyzers/planner/esr.h):
 * E equality fields, then S sort fields, then R range fields. An index
 * serves the shape when its first |E| fields are E in any order, its next
 * |S| fields are S in order (every direction as the sort's, or every one
 * reversed: the index is then walked backwards), its next |R| fields are R
 * in any order, and whatever follows is extra: the shape's key is a prefix
 * of the index, or equal to one once its equality fields are reordered. A
 * key whose classes are not known (the request that gave it could not be
 * re-read) is taken as written: all of it in order, as if every field
 * were a sort field.
 *
 * Merging, per collection and collation: the shapes' keys longest first
 * (the costliest first among equals); each joins the first index that
 * serves it, or the first whose fields, with this shape's equality fields
 * moved to the front, still serve every shape it already serves and this
 * one too; otherwise it starts an index of its own. An existing index is
 * made redundant by a recommendation when its key (fields and directions)
 * is a prefix of the recommendation's, it has the same collation, and it
 * is no constraint (unique, partial, sparse, TTL, hidden) and not _id_. */
#ifndef MG_REPORT_RECOMMEND_H
#define MG_REPORT_RECOMMEND_H

#include <stdbool.h>
#include <stddef.h>

#include "protocol/cmdview.h"
#include "protocol/text.h"
#include "report/model.h"

#define REC_KEY_MAX 32 /* the server's limit on compound index keys */

typedef struct rec_key {
	char field[REC_KEY_MAX][128];
	int dir[REC_KEY_MAX]; /* 1 or -1 */
	size_t n;
	size_t neq, nsort; /* a shape's classes (esr_key); an index's are not read */
} rec_key;

/* Whether an index with key ix serves a shape whose ESR key is s. */
bool rec_key_serves(const rec_key *ix, const rec_key *s);
/* Whether a's fields and directions are b's first ones. */
bool rec_key_is_prefix(const rec_key *a, const rec_key *b);
/* The merge: shapes[0..n) in the caller's order of preference; group[i]
 * gets the index serving shape i, keys[0..returned) the indexes (keys has
 * room for n). */
size_t rec_merge(const rec_key *shapes, size_t n, rec_key *keys, size_t *group);

/* A createIndex command as esr.c and the rules write it:
 * db.getSiblingDB("d").getCollection("c").createIndex({...}[, {...}]). */
typedef struct rec_command {
	char db[128], coll[128];
	rec_key key;    /* classes unknown: neq 0, nsort n */
	char opts[256]; /* the options document as written, "" for none */
	size_t len;     /* the command's length in the text; what follows is words */
} rec_command;

bool rec_parse_command(const char *text, rec_command *out);
/* A key pattern as JSON ({"a": 1, "b": -1}); false for anything but
 * 1/-1 fields (a text, hashed or geo index). */
bool rec_key_from_json(const char *json, rec_key *k);
/* k as JSON, as esr.c writes a key. */
void rec_key_put(text_buf *t, const rec_key *k);

/* The classes of c's key, from the request v that gave it: the filter and
 * sort (of the body, its pipeline's leading $match and $sort, or a
 * statement) whose ESR key is c's. Left alone when none is. */
void rec_classify(const cmdview *v, const rec_command *c, int *neq, int *nsort);

/* After aggregation: m->recs from m's findings, shapes and indexes. */
void report_recommend_build(model *m);

#endif
