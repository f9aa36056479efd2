/* The log for people: one JSON log line (mongod's shape, log.h) read back
 * and rendered as text. The live log in `log.format: text` and
 * `mongoguard log FILE` both render through log_text_render(), from the
 * same JSON, so the same event reads the same in both.
 *
 *   2026-12-02T13:53:45.123Z I NETWORK  [conn7] Connection accepted remote=127.0.0.1:50012
 *   2026-12-02T13:53:45.200Z W ANALYZER case-insensitive-regex log shop.users app=shop {...}
 *       fix: db.users.createIndex(...) ...
 *
 * A finding is a line with "c":"ANALYZER" and attr.rule: rule, action,
 * namespace, application ("-" for none), the shape, " (repeated N times)"
 * for a summary; then its suggestion on an indented line. Any other line
 * is [ctx] msg and its attributes as key=value (empty strings left out).
 * Control characters from the JSON strings (client text) are shown as '?':
 * bytes below 0x20, DEL, and the C1 controls U+0080 to U+009F (as UTF-8 or
 * \u escapes; terminals obey U+009B as CSI), so nothing from the wire
 * reaches a terminal as a control sequence.
 *
 * Pure: a string in, text out. */
#ifndef MG_PROXY_SINKS_LOG_TEXT_H
#define MG_PROXY_SINKS_LOG_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "protocol/text.h"

/* A JSON value as it stands in the line (a string with its quotes). */
typedef struct log_slice {
	const char *p;
	size_t n; /* 0: absent */
} log_slice;

/* The parts of a log line. */
typedef struct log_event {
	log_slice t; /* t.$date's string */
	log_slice s, c, id, ctx, msg;
	log_slice attr; /* the object, or absent */
} log_event;

/* False when line (len bytes, no newline needed) is not a JSON object with
 * at least t.$date, s, c and msg. */
bool log_event_parse(const char *line, size_t len, log_event *ev)
    __attribute__((warn_unused_result));

/* attr.key as it stands, absent (n 0) when there is none. */
log_slice log_event_attr(const log_event *ev, const char *key);

/* A string value decoded (escapes, \u, controls as '?'), or anything else
 * as it stands; cut to fit cap. "" for an absent value. */
void log_slice_text(log_slice v, char *out, size_t cap);

/* One event as text, ending in '\n'; ANSI colours when color. */
void log_text_render(const log_event *ev, bool color, text_buf *out);

#endif
