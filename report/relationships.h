/* Relationships (relationships.c): which collections are read together,
 * by a $lookup or on the client, and the data-modelling method's advice
 * for each pair. The parameters below are the one place the report's
 * detection and advice are tuned (docs/report.md states them). */
#ifndef MG_REPORT_RELATIONSHIPS_H
#define MG_REPORT_RELATIONSHIPS_H

#include <stdint.h>

#include "protocol/cmdview.h"
#include "protocol/keyed_filter.h"
#include "protocol/value_filter.h"
#include "report/model.h"

/* ---- a client-side join ----
 * On one connection (of one instance), a find or aggregate on the parent
 * whose reply held N >= REL_MIN_FANOUT documents, followed by reads of a
 * child collection (another one) by one field (_id, or the first key of
 * one of its indexes) with each read within REL_WINDOW_US of the previous
 * event (the parent's reply, a child's request or reply): either one read
 * per parent document (N+1: at least REL_MIN_FANOUT of them, between
 * REL_EACH_LOW and REL_EACH_HIGH times N), or at most REL_MAX_IN_BATCHES
 * $in batches and no single reads (an ODM's populate), of at least
 * REL_MIN_FANOUT distinct values (protocol/key_set.h), one of whose reads
 * is by a value the parent's first documents held, as the rule requires
 * (its reply's `vals`, the read's `vh`: protocol/value_filter.h; when
 * those are not known, any); a read by a value a parent all of whose
 * values are known did not hold is no child of it. A getMore of the
 * parent's collection adds its documents to N; a write or a schema change
 * on the connection ends the chain, as the live rule's. Up to
 * REL_MAX_CHILDREN child collections per parent read (populate of
 * several paths). */
/* The same defaults as the client-side-join rule's windowMS and minFanout
 * (analyzers/rules/rule_join.c), so the relationships table and the
 * report's findings of that rule see the same pairs. */
#define REL_WINDOW_US      100000
#define REL_MIN_FANOUT     3
#define REL_EACH_LOW       0.5
#define REL_EACH_HIGH      1.5
#define REL_MAX_IN_BATCHES 4
#define REL_MAX_CHILDREN   4

/* ---- the advice (the method: embed, extended reference, reference) ----
 * Rates are per second of the capture's covered time; "per joint read"
 * is against the pair's own rate. In this order:
 *   fan-out above REL_UNBOUNDED_FANOUT: unbounded, reference;
 *   child writes >= REL_WRITE_OFTEN per joint read: changes often, reference;
 *   child reads on its own >= REL_SOLO_OFTEN per joint read: reference;
 *   share of the parent's reads followed by the child's >= REL_TOGETHER
 *   and child writes <= REL_WRITE_RARE per joint read: embed;
 *   share >= REL_OFTEN and the child read through a projection of at most
 *   REL_FEW_FIELDS fields: extended reference (copy those fields);
 *   otherwise: reference. */
#define REL_UNBOUNDED_FANOUT 100
#define REL_WRITE_OFTEN      0.1
#define REL_WRITE_RARE       0.01
#define REL_SOLO_OFTEN       0.5
#define REL_TOGETHER         0.8
#define REL_OFTEN            0.5
#define REL_FEW_FIELDS       5

/* What the tracker needs of one request: where it came from and its row
 * handles (+ 1, 0: none), as aggregate.c has them. */
typedef struct rel_req {
	uint64_t instance;
	int64_t conn, rid, t;
	const cmdview *v;
	const char *cmd;   /* the canonical command name */
	size_t ns;         /* the collection's row + 1 */
	uint64_t shape;    /* its shape hash */
	int proj;          /* its projection's fields (model_shape.proj_fields) */
	bool placeholders; /* its literals are placeholders: each value counts */
	/* its keyed values' hashes as the capture kept them (its `vh`), or
	 * NULL: none can be looked up in a parent's values */
	const uint64_t *vh;
	uint32_t nvh;
	keyed_mode key_mode; /* how the capture's proxy took a key (protocol/keyed_filter.h) */
} rel_req;

typedef struct rel_tracker rel_tracker;

rel_tracker *rel_tracker_new(void);
void rel_tracker_free(rel_tracker *r);
void rel_request(rel_tracker *r, model *m, const rel_req *q);
/* A reply: rt its responseTo, n the documents it returned (-1: not read),
 * vals the values its first documents held (NULL: not known). */
void rel_reply(rel_tracker *r, model *m, uint64_t instance, int64_t conn, int64_t rt, int64_t t,
               int64_t n, const value_filter *vals);
/* After the last record (and after workload_finish: the rates need the
 * covered time): open chains closed, rates, shares, advice, ranking. */
void rel_finish(rel_tracker *r, model *m);

/* The workload (workload.c): a request's kind, projection, its
 * collection's writes and its instance's time range (rows + 1). */
void workload_note(model *m, uint64_t instance, int64_t t, const cmdview *v, const char *cmd,
                   size_t shape, size_t ns);
void workload_finish(model *m); /* m->covered_s */
/* A reply's time in its instance's range. */
void workload_span(model *m, uint64_t instance, int64_t t);

#endif
