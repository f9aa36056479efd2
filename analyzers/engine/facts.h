/* A statement's facts: the top level of its filter and of its update, read
 * once by the engine and handed to every rule's check through the site.
 *
 * Without them every rule would walk every update and delete statement
 * (and every find, count, distinct and findAndModify body) on its own: the
 * case-insensitive-regex rule stepping the filter for regexes, the
 * collection-scan rule stepping it again for its bounds, the unbounded-push
 * rule stepping the update for $push, each with its own iterator. The
 * facts are that common first step, taken once:
 * each top-level member of the filter (where it is, which kind of value it
 * holds, and for an operator document which operators it names) and the
 * update's form and top-level operators. A rule reads the members instead
 * of stepping the filter, skips outright what the facts show it cannot
 * match (no regex anywhere a pattern is matched; no $push), and walks on
 * only into the parts that are its own (an operator document's operands,
 * an $or's branches, an update pipeline).
 *
 * Exactness: the members are the elements a rule's own walk would step
 * through, in the same order, stopping where it stops on corrupt bytes;
 * each FOP_ and UOP_ bit is set exactly when a key the rules name is
 * present. A filter with more than FACTS_MEMBERS members is marked
 * incomplete, and the rules then read the BSON as before. So a rule with
 * facts decides what it decided without them (tests/unit/test_facts.c
 * checks that over every rule's unit table and the fuzz corpus).
 *
 * Nothing is copied or allocated: the members' iterators and the writes'
 * cursors point into the request, which outlives the checks. The facts
 * are read with cursors (wire_iter.h), and kept as cursors: the three
 * rules that read a member as an iterator make it (wire_cur_iter) when
 * they read it; a write keeps its cursor, which its two readers read as
 * one. Engine-internal and read by the rule
 * files through rule_site.facts. */
#ifndef MG_ANALYZERS_ENGINE_FACTS_H
#define MG_ANALYZERS_ENGINE_FACTS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "analyzers/engine/keys.h"
#include "protocol/byte_template.h"
#include "protocol/wire_iter.h"

/* Members kept; a filter with more is read by the rules themselves. Real
 * filters have one to four. */
#define FACTS_MEMBERS 8

/* What a member of a filter holds. */
typedef enum {
	FM_VALUE, /* {f: 5}, {f: [..]}, {f: "x"}: an equality */
	FM_REGEX, /* {f: /x/}: a BSON regex */
	FM_OPS,   /* {f: {$op: ..}}: its first key starts with '$' */
	FM_DOC,   /* {f: {a: 1}} or {f: {}}: an equality on an embedded document */
	FM_TOP,   /* {$and: ..}, {$or: ..}, {$expr: ..}, ...: a top-level operator */
} fact_kind;

/* The operators an FM_OPS member names (FOP_OTHER: any other). */
enum {
	FOP_REGEX = 1u << 0,      /* $regex */
	FOP_LIST = 1u << 1,       /* $in, $nin, $all */
	FOP_NOT = 1u << 2,        /* $not */
	FOP_ELEM_MATCH = 1u << 3, /* $elemMatch */
	FOP_OPTIONS = 1u << 4,    /* $options */
	FOP_OTHER = 1u << 5,
};

/* The operators a regex can hide behind: a member naming none of them
 * matches no pattern. */
#define FOP_PATTERN (FOP_REGEX | FOP_LIST | FOP_NOT | FOP_ELEM_MATCH)

typedef struct fact_member {
	wire_cur at;  /* on the member: its key, type and value (wire_cur_iter
	               * makes the iterator a walk of the filter would have had) */
	uint8_t kind; /* fact_kind */
	uint8_t ops;  /* FM_OPS: FOP_* of its keys */
	bool dbref;   /* FM_OPS whose first key is $ref, $id or $db: a value */
} fact_member;

typedef struct filter_facts {
	fact_member m[FACTS_MEMBERS]; /* the first n, in the filter's order */
	uint8_t n;
	bool complete; /* every member is in m; else the rules read the filter */
	uint8_t ops;   /* the FOP_ bits of every FM_OPS member */
	bool regexes;  /* some FM_REGEX member */
	bool tops;     /* some FM_TOP member */
	/* An equality on _id at the top level (a plain value, an embedded
	 * document or a DBRef): the _id index, which every collection has,
	 * bounds the query whatever else the filter says. */
	bool id_eq;
	/* That equality's value compares by collation (a string, a document,
	 * an array): with a collation given, the _id index (the collection's
	 * default's) may not bound it. */
	bool id_collatable;
	/* The filter's bytes make a document view (bson_init_static's test:
	 * at least 5 bytes, the last 0). A rule handed the filter as a view
	 * gets none otherwise, and reads no facts then. */
	bool viewable;
} filter_facts;

/* An update's form. */
typedef enum {
	FU_OPERATORS,   /* {$set: .., $push: ..} */
	FU_REPLACEMENT, /* {a: 1}: its first key is not an operator */
	FU_EMPTY,       /* {} */
	FU_PIPELINE,    /* [{$set: ..}, ..] */
	FU_OTHER,       /* not a document or an array: the server refuses it */
} fact_update_form;

/* The top-level operators of an FU_OPERATORS update (UOP_OTHER: any other). */
enum {
	UOP_PUSH = 1u << 0, /* $push */
	UOP_INC = 1u << 1,  /* $inc */
	UOP_OTHER = 1u << 2,
	/* a member of some $push may grow its array without a bound of its
	 * own: its value is not a document naming both $each and $slice
	 * (facts_push_bounded) */
	UOP_PUSH_OPEN = 1u << 3,
};

/* Whether the value v of a $push member bounds the array it grows: a
 * document naming both $each and $slice. Otherwise *each and *slice say
 * which of the two it names (neither for a value that is not a document).
 * The facts and the unbounded-push rule's words read it alike. */
static inline __attribute__((always_inline)) bool facts_push_bounded(const wire_cur *v, bool *each,
                                                                     bool *slice)
{
	wire_cur c;
	*each = *slice = false;
	if (wire_cur_type(v) != BSON_TYPE_DOCUMENT || !wire_cur_recurse(v, &c))
		return false;
	while (wire_cur_walk(&c)) {
		if (CUR_KEY_IS(&c, "$each"))
			*each = true;
		else if (CUR_KEY_IS(&c, "$slice"))
			*slice = true;
	}
	return *each && *slice;
}

/* The paths of an FU_OPERATORS update that can put an array somewhere:
 * each member of a $push or $addToSet (it grows the array at its path),
 * and each member of a $set or $setOnInsert whose value is an array or a
 * document or whose path is positional ("a.$.b", "a.$[e]": "a" is an
 * array). A $set of a scalar at a plain path, $inc, $unset and the others
 * never make an array and are not kept. Two readers: the unbounded-push
 * rule (each $push member, in the update's order) and the engine's
 * multikey learning (arrays_seen.c), which both stepped the update's
 * operators themselves before. */
#define FACTS_WRITES 16

typedef enum {
	FW_PUSH,       /* a member of $push */
	FW_ADD_TO_SET, /* a member of $addToSet */
	FW_SET,        /* a member of $set or $setOnInsert */
} fact_write_op;

typedef struct fact_write {
	wire_cur at;       /* on the member: its path (key) and value */
	uint32_t len;      /* strlen of the path */
	uint32_t position; /* the length of the path before its first positional
	                      component, 0 when it has none */
	uint8_t op;        /* fact_write_op */
	/* FW_PUSH: what facts_push_bounded found in its value */
	bool each, slice;
} fact_write;

typedef struct update_facts {
	uint8_t form; /* fact_update_form */
	uint8_t ops;  /* UOP_* */
	uint32_t len; /* a document's or pipeline's bytes; 0 for any other value */
	/* FU_OPERATORS: the writes above, the first nwrites in the update's
	 * order; writes_complete when every one is there (else a reader walks
	 * the update itself, or learns nothing from it). */
	uint8_t nwrites;
	bool writes_complete;
	fact_write writes[FACTS_WRITES];
} update_facts;

/* What the facts show, as the bits a rule's check asks for
 * (rule_checks.filter_when, update_when, query_when in rule_api.h): the
 * engine calls a check only when the statement has one of them. Each bit
 * is set whenever the facts cannot rule out what it names. */
enum {
	/* The filter may match by pattern: a regex value, an operator
	 * document naming FOP_PATTERN operators, or a top-level operator
	 * ($and, $or, $nor, $expr, ...). */
	STMT_PATTERN = 1u << 0,
	/* The query's plan is a question: no equality on _id answers it, or
	 * it has a hint, or no filter. */
	STMT_PLAN = 1u << 1,
	/* The query has a collation. */
	STMT_COLLATED = 1u << 2,
	/* The update may append to an array: a $push whose members do not
	 * all bound their arrays, or a pipeline. */
	STMT_PUSH = 1u << 3,
};

typedef struct stmt_facts {
	bool has_filter, has_update; /* which of the two were read */
	filter_facts filter;
	update_facts update;
	unsigned have; /* STMT_* */
} stmt_facts;

/* The bytes of a statement its read did not look at (a template of it,
 * for the statements after it: protocol/byte_template.h). Only value
 * bytes no step checks and no rule decision of the read depends on are
 * recorded: the value of a number, date, ObjectId or timestamp compared
 * for equality in the filter or set by a $set or $setOnInsert at a plain
 * path, the inside of such a string (not its length or its NUL), and the
 * inside of the document or array of an update operator that writes no
 * array (not $push, $addToSet, $set or $setOnInsert; not its length, not
 * its last byte). A $push's members are read for their bounds and every
 * write for the arrays it makes (the multikey learning): none of their
 * bytes is a span. Offsets are from base, the statement's first byte. */
typedef byte_spans facts_spans;

/* Reads filter (a cursor on a document) into f; spans (may be NULL)
 * gets the filter's unread value bytes. A cursor, as the walk of a
 * statement keeps its parts: no iterator is made for a statement no check
 * is called on. */
void facts_filter(filter_facts *f, const wire_cur *filter, facts_spans *spans);

/* Reads update (a cursor on the update's value) into u; spans as above. */
void facts_update(update_facts *u, const wire_cur *update, facts_spans *spans);

/* Whether mongod refuses update (an iterator on an update's value, or on
 * $merge's whenMatched) for a modifier, or an update pipeline's stage, it
 * does not know: it applies none of it. Read only when a finding is about
 * to be reported (verdict.c). */
bool facts_update_refused(const bson_iter_t *update);

/* The STMT_* bits of f (both parts read, or marked unread), for a query
 * with a hint and with a collation as given. Inline: on every statement,
 * right after its read, whose fields it mostly still has at hand. */
static inline unsigned facts_have(const stmt_facts *f, bool hinted, bool collated)
{
	unsigned have = 0;
	const filter_facts *ff = &f->filter;
	if (!f->has_filter || !ff->complete || !ff->viewable) {
		have |= STMT_PATTERN | STMT_PLAN;
	} else {
		if (ff->regexes || ff->tops || (ff->ops & FOP_PATTERN))
			have |= STMT_PATTERN;
		if (!ff->id_eq || (collated && ff->id_collatable))
			have |= STMT_PLAN;
	}
	if (hinted)
		have |= STMT_PLAN;
	if (collated)
		have |= STMT_COLLATED;
	const update_facts *u = &f->update;
	if (!f->has_update || u->form == FU_PIPELINE ||
	    (u->form == FU_OPERATORS && (u->ops & UOP_PUSH) &&
	     ((u->ops & UOP_PUSH_OPEN) || !u->writes_complete)))
		have |= STMT_PUSH;
	return have;
}

#endif
