/* client-side-join: separated data joined on the client. On one
 * connection, a read of collection A whose reply held N documents,
 * followed by reads of another collection B by one field's value (an _id,
 * or a single key: `{_id: v}`, `{k: v}`, `{k: {$eq: v}}`) one per parent
 * document (N+1), or by that field's `$in` batches (Mongoose's populate:
 * one batch of the page's ids, or a few smaller ones).
 *
 * The reads are followed through the engine's per-connection hooks
 * (rule_api.h, conn_read / conn_reply): the engine describes every request
 * (rule_read) and every reply's document count; no check is called, so a
 * connection's repeated find by _id (the engine's repeat template, which
 * skips every check) is still counted.
 *
 * A parent is a find, aggregate or getMore whose reply held at least
 * minFanout documents (a getMore adds to its find's count: pagination). A
 * keyed read of another collection within windowMS of the parent's reply,
 * or of the last read of the chain, joins the most recent such parent; a
 * chain whose next read comes later than windowMS after the last is over.
 * A chain is the parent's once one of its reads is by a value the
 * parent's first documents held (value_filter.h; a parent whose values
 * are not known: at once); a read by a value a parent of a few documents,
 * all read, did not hold is none of its, and one by the values of an
 * older parent joins that one. The keys it looked up (1 a keyed read, the
 * array's length an `$in`) add up to the fan-out; the finding is reported at the read whose fan-out
 * reaches max(minFanout, min(ceil(N/2), JOIN_FANOUT_CAP)): about N keyed
 * reads (half of them, for the ids an application caches or dedupes).
 *
 * Silent on: reads by values none of the parent's first documents held
 * (two unrelated reads close in time); a single lookup by _id; keyed reads with no parent read
 * before them (a batch job); a parent that returned fewer than minFanout
 * documents (0 or 1: a plain reference lookup); reads of the parent's own
 * collection; keyed reads spaced more than windowMS apart; writes; reads
 * by other filters (several fields, ranges, no filter).
 *
 * One finding per pair of (parent, child) read shapes per engine: a
 * bounded set (JOIN_DEDUPE_SLOTS) of the pairs reported. Never blocks: the
 * read that completes the pattern is harmless alone, and failing an
 * application's loop midway helps no one; `block` is taken as `dry-run`. */
#ifndef MG_ANALYZERS_RULES_RULE_JOIN_H
#define MG_ANALYZERS_RULES_RULE_JOIN_H

#include <stdint.h>

/* The rule's parameters, as slots of rule_config.params. */
enum {
	JOIN_PARAM_WINDOW_MS,  /* the longest gap in a chain of reads */
	JOIN_PARAM_MIN_FANOUT, /* the fewest parent documents and keyed lookups */
};

/* The fan-out that reports a parent of N documents is at most this: a page
 * of 1,000 documents read one by one for the first 50 is a join too. */
#define JOIN_FANOUT_CAP 50

/* Pairs remembered as reported, per engine; a pair pushed out by others
 * may be reported again. A power of two. */
#define JOIN_DEDUPE_SLOTS 4096

#endif
