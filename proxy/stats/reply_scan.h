/* What the workload learns from a whole reply's bytes, read in one pass
 * over the body's top level (and its cursor's batch): ok, the error code,
 * how many documents it held. The same answers as the capture's reader
 * (protocol/capture.h, capture_reply_inspect; tests/unit/test_proxy_workload.c
 * compares the two), at a small part of its cost: that one validates the
 * whole body and looks each field up from the start, some 3,900
 * instructions a find by _id (tests/bench/README.md), which the request
 * path cannot pay on every reply. Safe on any bytes: every length is
 * checked against what is there before it is followed. */
#ifndef MG_PROXY_STATS_REPLY_SCAN_H
#define MG_PROXY_STATS_REPLY_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct reply_scan {
	bool ok;
	int32_t code;         /* 0 when ok; else the reply's, or its first writeError's */
	int64_t write_errors; /* entries of writeErrors */
	int64_t
	    n; /* documents: a cursor's batch, an OP_REPLY's numberReturned, a write's n, else 1 */
	/* An OP_MSG cursor's batch (the array's bytes, within msg), or NULL;
	 * whether it is a firstBatch (a find's or aggregate's) */
	const uint8_t *batch;
	size_t batch_len;
	bool first;
} reply_scan;

/* msg/len: one whole reply (OP_MSG or OP_REPLY). False when it is neither,
 * or its body cannot be read (out left zeroed then). */
bool reply_scan_read(const uint8_t *msg, size_t len, reply_scan *out);

/* Whether msg/len, a whole reply to createIndexes, says that it made no
 * index: numIndexesBefore and numIndexesAfter at its top level, numbers,
 * equal (every index asked for existed; "all indexes already exist"). A
 * reply without them (mongos' per-shard "raw") is not taken as unchanged. */
bool reply_scan_indexes_unchanged(const uint8_t *msg, size_t len);

/* The values a first batch's first documents hold (protocol/value_filter.h:
 * up to VALUE_FILTER_DOCS documents, VALUE_FILTER_MAX values): each one's
 * fields, its arrays' elements and its sub-documents' fields, two levels
 * down (a DBRef's $id, an array of {author: id}), an ObjectId's hex string
 * and a hex string's ObjectId too (value_twin), into vf (cleared first);
 * vf->all when that is every value of the batch. False when they are not
 * known: no first batch, malformed bytes, or a first document of more
 * values than that (its reference may be past them). A bounded walk (some 100
 * instructions a value), worth it only for a batch of two documents or
 * more. */
typedef struct value_filter value_filter;
bool reply_scan_values(const reply_scan *sc, value_filter *vf);

#endif
