/* SIGUSR1: a new log file (log.rotate) and a new capture file. */
#ifndef MG_PROXY_RUNTIME_ROTATE_H
#define MG_PROXY_RUNTIME_ROTATE_H

#include "proxy/sinks/capture.h"
#include "proxy/sinks/log.h"

/* Says so in the old log file, swaps in the new one, says so again in the
 * new one (naming the old file after a rename); then asks the capture
 * writer (NULL: none) for a new file. A failure is logged; the log stays
 * where it was. Main thread. */
void rotate_logs(log_rotate how, capture_sink *capture);

#endif
