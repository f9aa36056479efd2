/* The scan of a statement: one pass over its keys, its filter's members
 * and its update's operators, that reads only what decides whether any
 * check is called on it (the STMT_ bits of its facts, its update's
 * length), whether the multikey learning reads it, and which of its bytes
 * a template of it may leave unread.
 *
 * The full read of a statement (body_walk_cur, then facts_filter and
 * facts_update, analysers.c) keeps everything a check could want: the
 * shape's parts, every member and write with its cursor. Most statements
 * of a bulk update have no check called on them (stmt_gate), and for them
 * that bookkeeping was most of the cost. The scan keeps none of it: it
 * says "no check, nothing to learn" (true), or that the statement must be
 * read in full (false), and the caller then reads it as before, from the
 * start. So a statement some check reads is read exactly as it was, and
 * the scan needs only to agree with the full read on the gate, on the
 * learning and on the spans.
 *
 * Exactness: the scan steps the same elements with the same cursor walks
 * (wire_iter.h), takes the same decisions through the same helpers
 * (facts_steps.h), and stops where the full read stops; what it does not
 * take (a statement's hint, collation, sort, arrayFilters, a repeated q or
 * u, anything but the plain form) sends the statement to the full read.
 * tests/unit/test_stmt_scan.c compares the two over the unit tables and
 * the fuzz corpus, byte by byte mutated.
 *
 * Engine-internal. */
#ifndef MG_ANALYZERS_ENGINE_STMT_SCAN_H
#define MG_ANALYZERS_ENGINE_STMT_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "analyzers/engine/engine_int.h"
#include "analyzers/engine/facts.h"
#include "protocol/wire_iter.h"

/* What the caller's target says of a statement (analysers.c: read_facts
 * and stmt_gate, as they stand before the statement is read). */
typedef struct stmt_scan_in {
	unsigned wanted;    /* the statement's BK bits (commands.c) */
	bool filter;        /* read_facts reads the filter (some rule reads it here) */
	bool update;        /* ... the update (a rule reads it, or the learning) */
	bool update_spans;  /* the update's bytes may be a template's spans */
	bool gate_always;   /* stmt_gate's: some check is always called */
	unsigned gate_when; /* STMT_ bits some check is called for */
	uint32_t gate_floor;
	/* the multikey learning's target (NULL: none), as the statement finds
	 * it: the learning reads the statement unless it passes it over
	 * (engine_arrays_passed_over) */
	const arrays_target *learn;
} stmt_scan_in;

/* Scans the statement doc (a cursor before its first element), spans
 * (NULL: no template is being made) getting the bytes the full read would
 * give it, *upsert its upsert. True when no check would be called on it
 * (stmt_unchecked) and the learning would pass it over; false when it
 * must be read in full (some check is called, the learning reads it, or
 * the scan does not take its form): spans and *upsert then hold nothing
 * the caller may use. */
bool stmt_scan_run(const stmt_scan_in *in, const wire_cur *doc, facts_spans *spans, bool *upsert)
    __attribute__((warn_unused_result));

#endif
