/* Which field a filter of several fields reads by: what client-side-join
 * (analyzers/engine/conn_track.c, rule_read_filter) and the report's
 * relationships (report/relationships.c) take for a keyed read's key when
 * the key has conditions beside it. A soft-delete plugin adds one to every
 * read (mongoose-delete's populate: {_id: {$in: [ids]}, deleted: {$ne:
 * false}}), and populate's `match` option another ({_id: {$in: [ids]},
 * status: "published"}): still one read per page of a parent's values.
 *
 * The key is the filter's one $in, or, with no $in, its one equality to a
 * value another document could hold as a reference: not a boolean, null,
 * undefined, minKey or maxKey (a flag's value, read the same for every
 * document), not a regex (a query). The other fields are conditions
 * beside it, whatever they are. A filter with two $in, or no $in and two
 * such equalities ({tenant: t, customerId: v}), or a top-level operator
 * ($and, $or, $expr, ...) has no one key. */
#ifndef MG_PROTOCOL_KEYED_FILTER_H
#define MG_PROTOCOL_KEYED_FILTER_H

#include <stdint.h>

/* doc: a filter document, validated (len its bytes). The key's position
 * among its top-level fields (0 the first); -1: no one key. A filter of
 * one field is left to the caller (-1 for it too unless that field is a
 * key by the rule above). */
int keyed_filter_pick(const uint8_t *doc, uint32_t len);

#endif
