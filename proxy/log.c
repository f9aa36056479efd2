#include "proxy/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* One line is at most this long. A string that does not fit is cut at a
 * character boundary; any other attribute that does not fit is left out;
 * either way the line stays valid JSON and says "truncated": true. The last
 * LOG_RESERVE bytes are kept for the closing quotes and braces. */
#define LOG_LINE_MAX (64 * 1024)
#define LOG_RESERVE  64

struct log_line {
	char buf[LOG_LINE_MAX];
	size_t len;
	bool truncated; /* something was cut or left out; nothing more is added */
	bool has_attr;
};

static int log_fd = -1;
static log_severity log_max = LOG_INFO;
static _Thread_local log_line tl_line;

bool log_open(const char *path, log_severity max_severity)
{
	log_max = max_severity;
	if (!path || strcmp(path, "-") == 0) {
		log_fd = STDOUT_FILENO;
		return true;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	log_fd = fd;
	return true;
}

void log_close(void)
{
	if (log_fd > STDERR_FILENO)
		close(log_fd);
	log_fd = -1;
}

bool log_enabled(log_severity s)
{
	return s <= log_max;
}

static bool room(const log_line *l, size_t n)
{
	return !l->truncated && l->len + n <= LOG_LINE_MAX - LOG_RESERVE;
}

/* Appends all of s or, when it does not fit, nothing (and marks the line). */
static void put_raw(log_line *l, const char *s, size_t n)
{
	if (!room(l, n)) {
		l->truncated = true;
		return;
	}
	memcpy(l->buf + l->len, s, n);
	l->len += n;
}

/* Appends into the reserve: only for the closing of what is already open. */
static void put_closing(log_line *l, const char *s)
{
	size_t n = strlen(s);
	if (l->len + n <= LOG_LINE_MAX) {
		memcpy(l->buf + l->len, s, n);
		l->len += n;
	}
}

static void put_str(log_line *l, const char *s)
{
	put_raw(l, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when the bytes there
 * are not one. Client data (field names, app names) is not guaranteed to be
 * UTF-8, and a log line must stay valid JSON. */
static size_t utf8_seq_len(const unsigned char *p)
{
	if (p[0] < 0x80)
		return 1;
	size_t n = (p[0] & 0xe0) == 0xc0   ? 2
	           : (p[0] & 0xf0) == 0xe0 ? 3
	           : (p[0] & 0xf8) == 0xf0 ? 4
	                                   : 0;
	if (n == 0 || (n == 2 && p[0] < 0xc2) || (n == 4 && p[0] > 0xf4))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0; /* also stops at the terminating NUL */
	if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
	    (n == 4 && p[0] == 0xf0 && p[1] < 0x90) || (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
		return 0; /* overlong, surrogate, or beyond U+10FFFF */
	return n;
}

static bool utf8_valid(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = utf8_seq_len(p);
		if (n == 0)
			return false;
		p += n;
	}
	return true;
}

/* Writes s as a JSON string, escaping what JSON requires; a byte that is
 * not part of valid UTF-8 becomes U+FFFD. When the line runs out of room the
 * string is cut between two characters and still closed. */
static void put_json_string(log_line *l, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	if (!room(l, 2)) {
		l->truncated = true;
		return;
	}
	put_raw(l, "\"", 1);
	while (*s && !l->truncated) {
		unsigned char c = (unsigned char)*s;
		size_t n = utf8_seq_len((const unsigned char *)s);
		char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
		if (n > 1 || (n == 1 && c >= 0x20 && c != '"' && c != '\\'))
			put_raw(l, s, n);
		else if (n == 0)
			put_raw(l, "\\ufffd", 6);
		else if (c == '"')
			put_raw(l, "\\\"", 2);
		else if (c == '\\')
			put_raw(l, "\\\\", 2);
		else if (c == '\n')
			put_raw(l, "\\n", 2);
		else if (c == '\t')
			put_raw(l, "\\t", 2);
		else
			put_raw(l, esc, 6);
		s += n ? n : 1;
	}
	put_closing(l, "\"");
}

log_line *log_begin(log_severity s, const char *component, int id, const char *ctx, const char *msg)
{
	static const char sev[] = {'E', 'W', 'I', 'D'};
	if (!log_enabled(s) || log_fd < 0)
		return NULL;
	log_line *l = &tl_line;
	l->len = 0;
	l->truncated = false;
	l->has_attr = false;

	struct timeval tv;
	gettimeofday(&tv, NULL);
	struct tm tm;
	gmtime_r(&tv.tv_sec, &tm);
	char ts[64];
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03dZ", (int)(tv.tv_usec / 1000));

	char head[128];
	snprintf(head, sizeof(head), "{\"t\":{\"$date\":\"%s\"},\"s\":\"%c\",\"c\":", ts, sev[s]);
	put_str(l, head);
	put_json_string(l, component);
	snprintf(head, sizeof(head), ",\"id\":%d,\"ctx\":", id);
	put_str(l, head);
	put_json_string(l, ctx ? ctx : "main");
	put_str(l, ",\"msg\":");
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
	mark m = {l->len, l->has_attr};
	put_raw(l, l->has_attr ? "," : ",\"attr\":{", l->has_attr ? 1 : 9);
	l->has_attr = true;
	put_json_string(l, key);
	put_raw(l, ":", 1);
	return m;
}

/* Takes an attribute back if it did not fit whole. */
static void settle(log_line *l, mark m)
{
	if (l->truncated) {
		l->len = m.len;
		l->has_attr = m.has_attr;
	}
}

void log_attr_str(log_line *l, const char *key, const char *value)
{
	if (!l || l->truncated)
		return;
	mark m = put_key(l, key);
	if (l->truncated) {
		settle(l, m);
		return;
	}
	put_json_string(l, value ? value : ""); /* cut, but closed, if too long */
}

static void put_value(log_line *l, const char *key, const char *json)
{
	if (!l || l->truncated)
		return;
	mark m = put_key(l, key);
	put_raw(l, json, strlen(json));
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
	if (!l || l->truncated)
		return;
	if (!utf8_valid(json)) { /* not valid JSON text: log it as a string */
		log_attr_str(l, key, json);
		return;
	}
	put_value(l, key, json);
	if (l->truncated) { /* a cut JSON value would break the line: say so instead */
		l->truncated = false;
		put_value(l, key, "\"<too long to log>\"");
		l->truncated = true;
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

void log_end(log_line *l)
{
	if (!l)
		return;
	if (l->truncated)
		put_closing(l, l->has_attr ? ",\"truncated\":true}}\n"
		                           : ",\"attr\":{\"truncated\":true}}\n");
	else
		put_closing(l, l->has_attr ? "}}\n" : "}\n");
	const char *p = l->buf;
	size_t left = l->len;
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
