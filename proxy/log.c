#include "proxy/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* One line is at most this long; a longer attribute is cut and the line
 * says so ("truncated": true) rather than growing without bound. */
#define LOG_LINE_MAX (64 * 1024)

struct log_line {
	char buf[LOG_LINE_MAX];
	size_t len;
	bool truncated;
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

static void put_raw(log_line *l, const char *s, size_t n)
{
	if (l->len + n > LOG_LINE_MAX - 64) { /* keep room for the closing */
		n = LOG_LINE_MAX - 64 > l->len ? LOG_LINE_MAX - 64 - l->len : 0;
		l->truncated = true;
	}
	memcpy(l->buf + l->len, s, n);
	l->len += n;
}

static void put_str(log_line *l, const char *s)
{
	put_raw(l, s, strlen(s));
}

/* Writes s as a JSON string, escaping what JSON requires. */
static void put_json_string(log_line *l, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	put_raw(l, "\"", 1);
	const char *run = s;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put_raw(l, run, (size_t)(s - run));
		char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
		switch (c) {
		case '"':
			put_raw(l, "\\\"", 2);
			break;
		case '\\':
			put_raw(l, "\\\\", 2);
			break;
		case '\n':
			put_raw(l, "\\n", 2);
			break;
		case '\t':
			put_raw(l, "\\t", 2);
			break;
		default:
			put_raw(l, esc, 6);
		}
		run = s + 1;
	}
	put_raw(l, run, (size_t)(s - run));
	put_raw(l, "\"", 1);
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

static void put_key(log_line *l, const char *key)
{
	put_str(l, l->has_attr ? "," : ",\"attr\":{");
	l->has_attr = true;
	put_json_string(l, key);
	put_raw(l, ":", 1);
}

void log_attr_str(log_line *l, const char *key, const char *value)
{
	if (!l)
		return;
	put_key(l, key);
	put_json_string(l, value ? value : "");
}

void log_attr_int(log_line *l, const char *key, int64_t value)
{
	if (!l)
		return;
	char num[32];
	snprintf(num, sizeof(num), "%lld", (long long)value);
	put_key(l, key);
	put_str(l, num);
}

void log_attr_bool(log_line *l, const char *key, bool value)
{
	if (!l)
		return;
	put_key(l, key);
	put_str(l, value ? "true" : "false");
}

void log_attr_raw(log_line *l, const char *key, const char *json)
{
	if (!l)
		return;
	size_t before = l->len;
	put_key(l, key);
	put_str(l, json);
	if (l->truncated) { /* a cut JSON value would break the line: say so instead */
		l->len = before;
		put_key(l, key);
		put_str(l, "\"<too long to log>\"");
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
	if (l->truncated) {
		l->truncated = false;
		put_key(l, "truncated");
		put_str(l, "true");
	}
	put_str(l, l->has_attr ? "}}\n" : "}\n");
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
