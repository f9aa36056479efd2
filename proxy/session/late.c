/* What the proxy counts of late verdicts (see late.h). */
#include "proxy/session/late.h"

void late_count_skipped(metrics_shard *mx, uint32_t rules, mx_skip_reason why)
{
	for (int r = 0; r < RULE_COUNT; r++)
		if (rules >> r & 1)
			mx_add(&mx->skipped[r][why], 1);
}

void late_count_lost(void *mx, uint32_t rules, late_loss why)
{
	late_count_skipped(mx, rules,
	                   why == LATE_LOST_NO_ROOM          ? MX_SKIP_NO_ROOM
	                   : why == LATE_LOST_SCHEMA_CHANGED ? MX_SKIP_SCHEMA_CHANGED
	                                                     : MX_SKIP_NEVER_CAME);
}
