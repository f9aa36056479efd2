/* The dedupe table between the rules and the sink: same rule, same query
 * shape, reported once at once, then counted.
 *
 * The key is (rule, shapeHash, action, application name): scopes make the
 * same shape blocked for one service and logged for another, and each of
 * those must show in the log, not hide in the other's counts.
 *
 * findings_table_report() sends the first occurrence of a key
 * to the sink immediately (repeats = 0) and only counts later ones;
 * findings_table_flush() sends one finding per key counted since the last
 * flush (repeats = that count) and zeroes the counts. The table keeps at
 * most max_keys keys; the least recently reported one makes room, and its
 * pending count, if any, is sent as a summary first so no repeat is lost.
 * The sink is never called with the table's lock held. */
#ifndef MG_ANALYZERS_ENGINE_FINDINGS_H
#define MG_ANALYZERS_ENGINE_FINDINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "analyzers/engine/finding.h"

#define FINDINGS_MAX_KEYS 4096

typedef struct findings_table findings_table;

findings_table *findings_table_new(size_t max_keys);
void findings_table_free(findings_table *t);

void findings_table_report(findings_table *t, const finding *f, engine_sink_fn sink, void *arg);
void findings_table_flush(findings_table *t, engine_sink_fn sink, void *arg);

/* When f's key (rule, shapeHash, action, application) is held, counts a
 * repeat, exactly as findings_table_report would, and returns true; the
 * engine then need not render the words of a finding nobody will read. */
bool findings_table_count_repeat(findings_table *t, const finding *f);

#endif
