/* What the proxy counts of verdicts given late or never
 * (mongoguard_verdicts_skipped_total): the worker's late queue
 * (analyzers/engine/late_queue.h) tells late_count_lost, a request whose
 * wait ran out tells late_count_skipped. */
#ifndef MG_PROXY_SESSION_LATE_H
#define MG_PROXY_SESSION_LATE_H

#include <stdint.h>

#include "analyzers/engine/late_queue.h"
#include "proxy/admin/metrics.h"

/* Counts rules (bit r: rule r) as given no verdict, for why. */
void late_count_skipped(metrics_shard *mx, uint32_t rules, mx_skip_reason why);

/* A late_lost_fn whose arg is the worker's metrics_shard. */
void late_count_lost(void *mx, uint32_t rules, late_loss why);

#endif
