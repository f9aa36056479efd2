/* Which indexes a filter's predicates can bound, by index kind, as mongod's
 * planner decides (planner_ixselect: which predicate an index is
 * "compatible" with, and the kinds that need more than that: sparse, hashed,
 * wildcard, geo, text, multikey for negations of null and $expr, collation
 * for predicates that compare strings).
 *
 * A predicate on one field is read into a set of IXB_* kinds (the indexes
 * whose key on that field it bounds) and whether it compares collatable
 * values (strings, objects, arrays: an index of another collation than the
 * query's cannot bound those). A field's predicates are a conjunction: the
 * union of their kinds. Then an index is bounded when its leading key (a
 * geo key, for a 2d / 2dsphere index; any field a wildcard index holds) has
 * a kind it accepts. Pure; nothing allocated. */
#ifndef MG_ANALYZERS_PLANNER_IXSELECT_H
#define MG_ANALYZERS_PLANNER_IXSELECT_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "analyzers/planner/index_set.h"

enum {
	IXB_BTREE = 1u << 0,         /* a non-sparse btree key */
	IXB_SPARSE = 1u << 1,        /* a sparse btree key */
	IXB_BTREE_NM = 1u << 2,      /* a non-sparse btree key not multikey ($ne: null, $expr) */
	IXB_SPARSE_NM = 1u << 3,     /* a sparse btree key not multikey */
	IXB_HASHED = 1u << 4,        /* a non-sparse hashed key */
	IXB_HASHED_SPARSE = 1u << 5, /* a sparse hashed key */
	IXB_WILD = 1u << 6,          /* a wildcard index holding the field (always sparse) */
	IXB_ELEM = 1u << 7,          /* $elemMatch on an array of documents: a key under it */
	IXB_SPHERE = 1u << 8,        /* a 2dsphere key: $geoIntersects, $geoWithin S2 shapes */
	IXB_FLAT = 1u << 9,          /* a 2d key: $geoWithin $box, $center, $polygon, ... */
	/* every key of a leading btree or hashed key that is not sparse
	 * ($exists: true): no bounds of its own, but the index is used, with
	 * the bounds a later key of it gets */
	IXB_ALL_KEYS = 1u << 10,
	/* a sparse btree key not multikey, and a sparse hashed key, only when
	 * the index is hinted: an $expr comparison, which matches a missing
	 * field as null (no type bracketing), so mongod keeps it off any sparse
	 * index it chooses (Indexability::nodeSupportedBySparseIndex; jstests
	 * sparse_index_internal_expr.js) and takes the hinted one's bounds */
	IXB_SPARSE_HINTED = 1u << 11,
	IXB_HASHED_SPARSE_HINTED = 1u << 12,
	/* a non-sparse btree key, by the complement of a set of non-null
	 * points ($ne v, $nin [...], $not of $eq or $in): what IXB_BTREE
	 * bounds, kept apart because on a unique single-key index those
	 * bounds are every key but the excluded few (ixselect_complements) */
	IXB_BTREE_CO = 1u << 13,
};

/* What one predicate gives: kinds it bounds (0: none), and whether its
 * bounds compare collatable values. */
typedef struct ixselect_pred {
	unsigned kinds;
	bool collated;
	/* a regex's bounds (raw strings): only an index with the simple
	 * collation holds them, whatever the query's collation
	 * (planner_ixselect; since 8.0 another index is not used at all, before
	 * it was scanned over every string) */
	bool simple_only;
} ixselect_pred;

/* {f: v}: v a value (equality) or a regex; not an operator document. */
ixselect_pred ixselect_value(const bson_iter_t *v);

/* One operator of {f: {op: v, ...}}; options: the document's $options
 * (NULL: none), for $regex, whose kinds they do not change (any regex
 * bounds a btree key). $options itself gives nothing. */
ixselect_pred ixselect_operator(const char *op, const bson_iter_t *v, const char *options);

/* A field's predicates, as the rule collected them: kinds bounded when the
 * index's collation is the query's (any), and whatever it is (nc). */
typedef struct ixselect_field {
	const char *field;
	unsigned any;
	unsigned nc;
	/* kinds bounded only when the index has the simple collation (simple),
	 * and only when it also has the query's (both: a $in of regexes and
	 * strings) */
	unsigned simple, both;
	/* The operand of an $elemMatch on documents ({b: .., c: ..}), which
	 * bounds a key under the field by what it puts on that sub-field; NULL:
	 * none read. */
	const uint8_t *elem;
	uint32_t elem_len;
} ixselect_field;

/* Adds one predicate's kinds to its field's. */
static inline void ixselect_field_add(ixselect_field *f, ixselect_pred p)
{
	if (!p.simple_only) {
		f->any |= p.kinds;
		f->nc |= p.collated ? 0u : p.kinds;
	} else if (p.collated) {
		f->both |= p.kinds;
	} else {
		f->simple |= p.kinds;
	}
}

/* For {f: {op: v}}: the operand of an $elemMatch on documents, op itself
 * or the first of an $all of them. False when there is none. */
bool ixselect_elem_operand(const char *op, const bson_iter_t *v, const uint8_t **data,
                           uint32_t *len);

typedef enum {
	IXSELECT_NO,      /* d gets no bounds from these predicates */
	IXSELECT_YES,     /* d gets bounds */
	IXSELECT_UNKNOWN, /* a kind this model does not judge (2dsphere v1, an unknown key
	                     type) */
} ixselect_verdict;

/* Whether index d (not hidden, usable for the filter: partial checked by
 * the caller) gets bounds from fields (n of them), given whether its
 * collation is the query's (collation_same). */
ixselect_verdict ixselect_index(const index_def *d, const ixselect_field *fields, size_t n,
                                bool collation_same);

/* Whether index d, which ixselect_index says is bounded, is bounded only
 * by complements of points (IXB_BTREE_CO) while it is unique on its one
 * key (the _id index, or a unique single-field one): the scan then reads
 * every key but the excluded ones, every document but a few. */
bool ixselect_complements(const index_def *d, const ixselect_field *fields, size_t n,
                          bool collation_same);

/* fields as a hint to one index reads them (n of them, changed in place):
 * the kinds that only a hinted index takes (IXB_*_HINTED) become the ones
 * it then takes. */
void ixselect_fields_hinted(ixselect_field *fields, size_t n);

#endif
