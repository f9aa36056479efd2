/* The structured log: JSON lines in the shape of mongod's
 * ({"t":{"$date":...},"s":"I","c":"NETWORK","id":N,"ctx":"conn7","msg":"...","attr":{...}}).
 *
 * A line is built in a per-thread buffer and written with one write(2), so
 * lines from different threads never interleave. log_begin() tests the level
 * before anything is formatted and returns NULL when the line is not wanted;
 * every log_attr_*() accepts that NULL, so call sites stay flat:
 *
 *	log_line *l = log_begin(LOG_INFO, "NETWORK", LOGID_CONN_ACCEPTED, ctx, "Connection
 *accepted"); log_attr_str(l, "remote", addr); log_end(l);
 */
#ifndef MG_PROXY_SINKS_LOG_H
#define MG_PROXY_SINKS_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
	LOG_ERROR = 0,
	LOG_WARNING = 1,
	LOG_INFO = 2,
	LOG_DEBUG = 3,
} log_severity;

/* Message ids: stable numbers a log pipeline can match on, like mongod's. */
enum {
	LOGID_STARTUP = 1000,
	LOGID_LISTENING = 1001,
	LOGID_CONFIG = 1002,
	LOGID_SHUTDOWN_BEGIN = 1003,
	LOGID_SHUTDOWN_DONE = 1004,
	LOGID_FATAL = 1005,
	LOGID_RELOAD = 1006,
	LOGID_RELOAD_FAILED = 1007,
	LOGID_ADMIN = 1008,
	LOGID_INTERNAL = 1009,
	LOGID_LOG_ROTATED = 1010,
	LOGID_UPSTREAM_REACHABLE = 1011, /* the upstream answers again, or at start */
	LOGID_UPSTREAM_UNREACHABLE = 1012,
	LOGID_CONN_ACCEPTED = 2000,
	LOGID_CONN_ENDED = 2001,
	LOGID_CONN_REFUSED = 2002,
	LOGID_UPSTREAM_CONNECTED = 2003,
	LOGID_UPSTREAM_FAILED = 2004,
	LOGID_HELLO_REWRITE = 2005, /* hello replies: members without a listener */
	LOGID_TLS = 2006,           /* TLS set-up and handshakes, either side */
	LOGID_PROXY_HEADER = 2007,  /* net.proxyProtocol: the client a header named */
	LOGID_BAD_REQUEST = 3000,
	LOGID_BAD_REPLY = 3001,
	LOGID_COMPRESSION_STRIPPED = 3002,
	LOGID_LEGACY_OPCODE = 3003,
	LOGID_FINDING = 4000,
	LOGID_FINDING_SUMMARY = 4001,
	LOGID_INDEX_WAIT = 4003,
	LOGID_METADATA_CLIENT = 4004,
	LOGID_SINK = 4005,
};

/* log.format: JSON lines (the contract other tools read), or text for
 * people (log_text.h; one line per event, coloured on a terminal). */
typedef enum { LOG_FORMAT_JSON = 0, LOG_FORMAT_TEXT = 1 } log_format;
/* log.rotate, what SIGUSR1 does with the file (mongod's systemLog.logRotate):
 * reopen the path (logrotate's `create` mode has moved the file already),
 * or rename the file to PATH.YYYY-MM-DDTHH-MM-SS and open a new one. */
typedef enum { LOG_ROTATE_REOPEN = 0, LOG_ROTATE_RENAME = 1 } log_rotate;

int log_format_from_name(const char *name); /* -1 when unknown */
int log_rotate_from_name(const char *name);
const char *log_format_name(log_format f);
const char *log_rotate_name(log_rotate r);

typedef struct log_line log_line;

/* path: a file (appended) or "-" for stdout. Returns false with errno set. */
bool log_open(const char *path, log_severity max_severity);
void log_close(void);
/* Any thread, at any time (a reload). Text is coloured when the log is a
 * terminal. */
void log_set_format(log_format f);
/* SIGUSR1: a new file at the log's path, swapped in under the lines being
 * written (each goes whole to the old file or the new one). With rename,
 * renamed_to gets the old file's new name. A log on stdout is left alone
 * (false, err says so). False with err set when the new file cannot be
 * opened: the log stays where it was. One caller at a time. */
bool log_reopen(log_rotate how, char *renamed_to, size_t renamed_cap, char *err, size_t errlen)
    __attribute__((warn_unused_result));
/* Changes the level at run time (a reload); any thread. */
void log_set_max(log_severity max_severity);
bool log_enabled(log_severity s);

log_line *log_begin(log_severity s, const char *component, int id, const char *ctx,
                    const char *msg);
void log_attr_str(log_line *l, const char *key, const char *value);
void log_attr_int(log_line *l, const char *key, int64_t value);
void log_attr_bool(log_line *l, const char *key, bool value);
/* value is already JSON (an object, array, number...): copied verbatim. */
void log_attr_raw(log_line *l, const char *key, const char *json);
__attribute__((format(printf, 3, 4))) void log_attr_fmt(log_line *l, const char *key,
                                                        const char *fmt, ...);
void log_end(log_line *l);

/* Shorthand for a line whose message is formatted and has no attributes. */
__attribute__((format(printf, 5, 6))) void log_reason(log_severity s, const char *component, int id,
                                                      const char *ctx, const char *fmt, ...);

#endif
