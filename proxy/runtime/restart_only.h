/* The settings a reload cannot change while connections run (listeners,
 * workers, the log file, the side connections...): one table, which the
 * reload reads both to name each changed one in the log as needing a
 * restart and to put it back to the running value, so a snapshot never
 * claims a setting that is not in force. */
#ifndef MG_PROXY_RUNTIME_RESTART_ONLY_H
#define MG_PROXY_RUNTIME_RESTART_ONLY_H

#include <stdbool.h>
#include <stddef.h>

#include "proxy/runtime/config.h"

/* How many keys the table holds. */
size_t restart_only_count(void);

/* The YAML key of entry i (i < restart_only_count()), e.g. "net.listen". */
const char *restart_only_key(size_t i);

/* Whether entry i differs between was and now. */
bool restart_only_changed(size_t i, const mg_config *was, const mg_config *now);

/* Puts every restart-only setting of next back to running's. */
void restart_only_keep(mg_config *next, const mg_config *running);

#endif
