/* The structured log (log.h): JSON lines shaped like mongod's, or text
 * for people, each built in a per-thread buffer and written with one
 * write(2) so that lines of different threads never interleave. */
#include "proxy/sinks/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "protocol/text.h"
#include "proxy/sinks/log_text.h"

/* One line is at most this long. A string that does not fit is cut at a
 * character boundary; any other attribute that does not fit is left out;
 * either way the line stays valid JSON and says "truncated": true. The last
 * LOG_RESERVE bytes are the text builder's reserve, kept for the closing
 * quotes and braces. */
#define LOG_LINE_MAX (64 * 1024)
#define LOG_RESERVE  64

struct log_line {
	char buf[LOG_LINE_MAX];
	text_buf t; /* over buf; t.overflow: something was cut or left out,
	               and nothing more is added */
	bool has_attr;
};

/* A text line: the JSON line's text, the fix line and colour codes. */
#define LOG_TEXT_MAX (LOG_LINE_MAX + 4096)

/* log_fd is set by log_open before any other thread runs, and keeps its
 * number for the process's life: log_reopen() swaps the file under it
 * with dup2(), so a thread in write() never sees a closed or reused fd. */
static int log_fd = -1;
static _Atomic int log_max = LOG_INFO; /* a reload may change it from any thread */
static _Atomic int log_fmt = LOG_FORMAT_JSON;
static _Atomic bool log_tty; /* the log is a terminal: text is coloured */
static char log_path[1024];  /* "" for stdout */
static _Thread_local log_line tl_line;
static _Thread_local char tl_text[LOG_TEXT_MAX];

int log_format_from_name(const char *name)
{
	return !strcmp(name, "json")   ? LOG_FORMAT_JSON
	       : !strcmp(name, "text") ? LOG_FORMAT_TEXT
	                               : -1;
}

int log_rotate_from_name(const char *name)
{
	return !strcmp(name, "reopen")   ? LOG_ROTATE_REOPEN
	       : !strcmp(name, "rename") ? LOG_ROTATE_RENAME
	                                 : -1;
}

const char *log_format_name(log_format f)
{
	return f == LOG_FORMAT_TEXT ? "text" : "json";
}

const char *log_rotate_name(log_rotate r)
{
	return r == LOG_ROTATE_RENAME ? "rename" : "reopen";
}

void log_set_format(log_format f)
{
	atomic_store_explicit(&log_fmt, (int)f, memory_order_relaxed);
}

void log_set_max(log_severity max_severity)
{
	atomic_store_explicit(&log_max, (int)max_severity, memory_order_relaxed);
}

bool log_open(const char *path, log_severity max_severity)
{
	log_set_max(max_severity);
	if (!path || strcmp(path, "-") == 0) {
		log_fd = STDOUT_FILENO;
		log_path[0] = '\0';
		atomic_store(&log_tty, isatty(log_fd) == 1);
		return true;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	log_fd = fd;
	snprintf(log_path, sizeof(log_path), "%s", path);
	atomic_store(&log_tty, isatty(log_fd) == 1);
	return true;
}

/* PATH.YYYY-MM-DDTHH-MM-SS (UTC), as mongod names a rotated log. */
static void rotated_name(char *out, size_t cap)
{
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	char stamp[32];
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H-%M-%S", &tm);
	snprintf(out, cap, "%s.%s", log_path, stamp);
}

bool log_reopen(log_rotate how, char *renamed_to, size_t renamed_cap, char *err, size_t errlen)
{
	if (renamed_cap)
		renamed_to[0] = '\0';
	if (!log_path[0] || log_fd < 0) {
		snprintf(err, errlen, "the log is on stdout: nothing to reopen");
		return false;
	}
	if (how == LOG_ROTATE_RENAME) {
		char to[sizeof(log_path) + 32];
		rotated_name(to, sizeof(to));
		/* an existing name (two rotations within a second) is not overwritten */
		bool exists = access(to, F_OK) == 0;
		if (exists || rename(log_path, to) != 0) {
			snprintf(err, errlen, "cannot rename %s to %s: %s", log_path, to,
			         exists ? "it exists" : strerror(errno));
			return false;
		}
		snprintf(renamed_to, renamed_cap, "%s", to);
	}
	int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", log_path, strerror(errno));
		return false;
	}
	bool ok = dup2(fd, log_fd) >= 0;
	if (!ok)
		snprintf(err, errlen, "cannot switch to the new %s: %s", log_path, strerror(errno));
	close(fd);
	return ok;
}

void log_close(void)
{
	if (log_fd > STDERR_FILENO)
		close(log_fd);
	log_fd = -1;
	log_path[0] = '\0';
}

bool log_enabled(log_severity s)
{
	return (int)s <= atomic_load_explicit(&log_max, memory_order_relaxed);
}

/* Client data (field names, app names) is not guaranteed to be UTF-8, and a
 * log line must stay valid JSON: invalid bytes become U+FFFD, and a string
 * that runs out of room is cut between two characters and still closed. */
static void put_json_string(log_line *l, const char *s)
{
	text_json_str(&l->t, s, strlen(s), TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
}

log_line *log_begin(log_severity s, const char *component, int id, const char *ctx, const char *msg)
{
	static const char sev[] = {'E', 'W', 'I', 'D'};
	if (!log_enabled(s) || log_fd < 0)
		return NULL;
	log_line *l = &tl_line;
	text_init_reserve(&l->t, l->buf, sizeof(l->buf), LOG_RESERVE);
	l->has_attr = false;

	struct timeval tv;
	gettimeofday(&tv, NULL);
	struct tm tm;
	gmtime_r(&tv.tv_sec, &tm);
	char ts[64];
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03dZ", (int)(tv.tv_usec / 1000));

	text_printf(&l->t, "{\"t\":{\"$date\":\"%s\"},\"s\":\"%c\",\"c\":", ts, sev[s]);
	put_json_string(l, component);
	text_printf(&l->t, ",\"id\":%d,\"ctx\":", id);
	put_json_string(l, ctx ? ctx : "main");
	text_str(&l->t, ",\"msg\":");
	put_json_string(l, msg);
	return l;
}

/* Where an attribute started, to take it back whole if it does not fit. */
typedef struct mark {
	size_t len;
	bool has_attr;
} mark;

static mark put_key(log_line *l, const char *key)
{
	mark m = {text_mark(&l->t), l->has_attr};
	text_str(&l->t, l->has_attr ? "," : ",\"attr\":{");
	l->has_attr = true;
	put_json_string(l, key);
	text_char(&l->t, ':');
	return m;
}

/* Takes an attribute back if it did not fit whole. */
static void settle(log_line *l, mark m)
{
	if (l->t.overflow) {
		text_rewind(&l->t, m.len);
		l->t.overflow = true; /* still: nothing more is added */
		l->has_attr = m.has_attr;
	}
}

void log_attr_str(log_line *l, const char *key, const char *value)
{
	if (!l || l->t.overflow)
		return;
	mark m = put_key(l, key);
	if (l->t.overflow) {
		settle(l, m);
		return;
	}
	size_t at = text_mark(&l->t);
	put_json_string(l, value ? value : ""); /* cut, but closed, if too long */
	if (l->t.overflow && text_mark(&l->t) == at)
		settle(l, m); /* not even its quotes fitted: no key without a value */
}

static void put_value(log_line *l, const char *key, const char *json)
{
	if (!l || l->t.overflow)
		return;
	mark m = put_key(l, key);
	text_str(&l->t, json);
	settle(l, m);
}

void log_attr_int(log_line *l, const char *key, int64_t value)
{
	char num[32];
	snprintf(num, sizeof(num), "%lld", (long long)value);
	put_value(l, key, num);
}

void log_attr_bool(log_line *l, const char *key, bool value)
{
	put_value(l, key, value ? "true" : "false");
}

void log_attr_raw(log_line *l, const char *key, const char *json)
{
	if (!l || l->t.overflow)
		return;
	if (!text_utf8_valid(json)) { /* not valid JSON text: log it as a string */
		log_attr_str(l, key, json);
		return;
	}
	put_value(l, key, json);
	if (l->t.overflow) { /* a cut JSON value would break the line: say so instead */
		l->t.overflow = false;
		put_value(l, key, "\"<too long to log>\"");
		l->t.overflow = true;
	}
}

void log_attr_fmt(log_line *l, const char *key, const char *fmt, ...)
{
	if (!l)
		return;
	char tmp[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	log_attr_str(l, key, tmp);
}

/* The line just closed, rendered for people (log_text.h): the same text
 * `mongoguard log` gives for it, since both read the JSON. */
static size_t as_text(const log_line *l, const char **out)
{
	log_event ev;
	if (!log_event_parse(l->buf, l->t.len, &ev)) {
		*out = l->buf; /* cannot happen for a line built here; keep it anyway */
		return l->t.len;
	}
	text_buf t;
	text_init_reserve(&t, tl_text, sizeof(tl_text), 8);
	log_text_render(&ev, atomic_load_explicit(&log_tty, memory_order_relaxed), &t);
	*out = tl_text;
	return t.len;
}

void log_end(log_line *l)
{
	if (!l)
		return;
	if (l->t.overflow)
		text_close(&l->t, l->has_attr ? ",\"truncated\":true}}\n"
		                              : ",\"attr\":{\"truncated\":true}}\n");
	else
		text_close(&l->t, l->has_attr ? "}}\n" : "}\n");
	const char *p = l->buf;
	size_t left = l->t.len;
	if (atomic_load_explicit(&log_fmt, memory_order_relaxed) == LOG_FORMAT_TEXT)
		left = as_text(l, &p);
	while (left > 0) {
		ssize_t w = write(log_fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* nowhere to report a failing log; drop the line */
		p += w;
		left -= (size_t)w;
	}
}

void log_reason(log_severity s, const char *component, int id, const char *ctx, const char *fmt,
                ...)
{
	if (!log_enabled(s))
		return;
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_end(log_begin(s, component, id, ctx, msg));
}
