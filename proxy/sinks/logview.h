/* `mongoguard log FILE... [--rule R] [--ns NS] [--app A] [--follow]`: JSON
 * log files rendered as text for people, through the same renderer as the
 * live `log.format: text` (proxy/sinks/log_text.h). */
#ifndef MG_PROXY_SINKS_LOGVIEW_H
#define MG_PROXY_SINKS_LOGVIEW_H

/* argv[0] is "log". Exit status: 0, 1 when a file cannot be read, 2 for a
 * usage error. */
int logview_main(int argc, char **argv);

#endif
