/* Which field a filter of several fields reads by: what client-side-join
 * (analyzers/engine/conn_track.c, rule_read_filter) and the report's
 * relationships (report/relationships.c) take for a keyed read's key when
 * the key has conditions beside it. A soft-delete plugin adds one to every
 * read (mongoose-delete's populate: {_id: {$in: [ids]}, deleted: {$ne:
 * false}}), and populate's `match` option another ({_id: {$in: [ids]},
 * status: "published"}): still one read per page of a parent's values.
 *
 * A filter's fields are its top-level ones and, in KEYED_FLAT, those of
 * the documents of a top-level $and, in order, as mongod reads them (one
 * conjunction): ODMantic sends every query of two conditions as {$and:
 * [{customer: {$eq: v}}, {deleted: {$eq: false}}]}. A $and inside one of
 * those documents, or one holding anything but documents, is a field of
 * its own (an operator).
 *
 * The key is the fields' one $in, or, with no $in, their one equality to
 * a value another document could hold as a reference: not a boolean,
 * null, undefined, minKey or maxKey (a flag's value, read the same for
 * every document), not a regex (a query). The other fields are conditions
 * beside it, whatever they are. Fields with two $in, or no $in and two
 * such equalities ({tenant: t, customerId: v}), or an operator ($or,
 * $expr, $comment, a $and not walked, ...) have no one key. One field is
 * the key whatever it is (its caller reads it as a value or a query). */
#ifndef MG_PROTOCOL_KEYED_FILTER_H
#define MG_PROTOCOL_KEYED_FILTER_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

/* How a keyed read's key is taken, by the capture format that recorded
 * it (protocol/capture.h): the live proxy's way is 0. */
typedef enum {
	KEYED_FLAT,  /* among the fields, a top-level $and's included (format 7) */
	KEYED_TOP,   /* among the top-level fields only (format 6) */
	KEYED_ALONE, /* only a filter of one field (format 5 and older) */
} keyed_mode;

/* The walk of a filter's fields. */
typedef struct keyed_walk {
	bson_iter_t top, and_arr, elem;
	bool flat, in_and, elem_open;
} keyed_walk;

/* doc: a filter document, validated (len its bytes). */
void keyed_walk_init(keyed_walk *w, const uint8_t *doc, uint32_t len, keyed_mode mode);

/* The next field, *at on it; false after the last. */
bool keyed_walk_next(keyed_walk *w, const bson_iter_t **at);

/* doc: as keyed_walk_init. The key's position among the fields (0 the
 * first); -1: no one key (also for no field, and always in KEYED_ALONE
 * with more than one). */
int keyed_filter_pick(const uint8_t *doc, uint32_t len, keyed_mode mode);

/* An aggregate's pipeline (an array, validated; len its bytes) that reads
 * as a find: a leading {$match: {...}} and after it only stages that
 * shape, order or cut what it read ($sort, $skip, $limit, $project,
 * $addFields, $set, $unset). Django's ORM reads every model so ({$match},
 * {$limit: 21}), ODMantic its find_one. The $match's document, or NULL. */
const uint8_t *keyed_aggregate_match(const uint8_t *pipeline, uint32_t len);

#endif
