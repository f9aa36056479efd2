/* JSON log lines read back and rendered as text (see log_text.h). The
 * reader is a small scanner over the line, not a JSON library: it finds a
 * value's extent and decodes strings, and the rendering copies objects (a
 * shape) as they stand, so a shape reads as the JSON log wrote it. */
#include "proxy/sinks/log_text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64 };

static const char *ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	return p;
}

/* p at the opening quote; after the closing one, or NULL. */
static const char *skip_string(const char *p, const char *e)
{
	for (p++; p < e; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

static bool literal_char(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '-' || c == '+' || c == '.';
}

static const char *skip_value(const char *p, const char *e, int depth);

/* p after '{' or '['; after the closing bracket, or NULL. */
static const char *skip_members(const char *p, const char *e, char close, int depth)
{
	p = ws(p, e);
	if (p < e && *p == close)
		return p + 1;
	for (;;) {
		if (close == '}') {
			p = ws(p, e);
			if (p >= e || *p != '"' || !(p = skip_string(p, e)))
				return NULL;
			p = ws(p, e);
			if (p >= e || *p != ':')
				return NULL;
			p++;
		}
		if (!(p = skip_value(p, e, depth + 1)))
			return NULL;
		p = ws(p, e);
		if (p < e && *p == ',') {
			p++;
			continue;
		}
		return p < e && *p == close ? p + 1 : NULL;
	}
}

static const char *skip_value(const char *p, const char *e, int depth)
{
	p = ws(p, e);
	if (p >= e || depth > MAX_DEPTH)
		return NULL;
	if (*p == '"')
		return skip_string(p, e);
	if (*p == '{' || *p == '[')
		return skip_members(p + 1, e, *p == '{' ? '}' : ']', depth);
	const char *s = p;
	while (p < e && literal_char(*p))
		p++;
	return p > s ? p : NULL;
}

/* Walks an object's members one at a time. */
typedef struct obj_iter {
	const char *p, *e;
	bool first;
} obj_iter;

static bool obj_begin(obj_iter *it, log_slice obj)
{
	if (!obj.n)
		return false; /* absent: p is NULL, and NULL + 0 is undefined */
	const char *e = obj.p + obj.n, *p = ws(obj.p, e);
	if (p >= e || *p != '{')
		return false;
	*it = (obj_iter){p + 1, e, true};
	return true;
}

/* 1: a member; 0: the end; -1: not JSON. */
static int obj_next(obj_iter *it, log_slice *key, log_slice *val)
{
	const char *p = ws(it->p, it->e);
	if (p < it->e && *p == '}')
		return 0;
	if (!it->first) {
		if (p >= it->e || *p != ',')
			return -1;
		p = ws(p + 1, it->e);
	}
	it->first = false;
	const char *k = p;
	if (p >= it->e || *p != '"' || !(p = skip_string(p, it->e)))
		return -1;
	*key = (log_slice){k, (size_t)(p - k)};
	p = ws(p, it->e);
	if (p >= it->e || *p != ':')
		return -1;
	const char *v = ws(p + 1, it->e);
	if (!(p = skip_value(v, it->e, 1)))
		return -1;
	*val = (log_slice){v, (size_t)(p - v)};
	it->p = p;
	return 1;
}

static bool key_is(log_slice key, const char *name)
{
	size_t n = strlen(name);
	return key.n == n + 2 && memcmp(key.p + 1, name, n) == 0;
}

static bool is_string(log_slice v)
{
	return v.n >= 2 && v.p[0] == '"';
}

/* The member of obj named key, absent when there is none. */
static log_slice member(log_slice obj, const char *key)
{
	obj_iter it;
	log_slice k, v;
	if (!obj_begin(&it, obj))
		return (log_slice){0};
	while (obj_next(&it, &k, &v) == 1)
		if (key_is(k, key))
			return v;
	return (log_slice){0};
}

bool log_event_parse(const char *line, size_t len, log_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	obj_iter it;
	log_slice k, v;
	if (!obj_begin(&it, (log_slice){line, len}))
		return false;
	int r;
	while ((r = obj_next(&it, &k, &v)) == 1) {
		if (key_is(k, "t"))
			ev->t = member(v, "$date");
		else if (key_is(k, "s"))
			ev->s = v;
		else if (key_is(k, "c"))
			ev->c = v;
		else if (key_is(k, "id"))
			ev->id = v;
		else if (key_is(k, "ctx"))
			ev->ctx = v;
		else if (key_is(k, "msg"))
			ev->msg = v;
		else if (key_is(k, "attr") && v.p[0] == '{')
			ev->attr = v;
	}
	return r == 0 && is_string(ev->t) && is_string(ev->s) && is_string(ev->c) &&
	       is_string(ev->msg);
}

log_slice log_event_attr(const log_event *ev, const char *key)
{
	return member(ev->attr, key);
}

static void put_utf8(text_buf *t, uint32_t cp)
{
	char b[4];
	if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) { /* C0, DEL, C1 */
		text_char(t, '?');
	} else if (cp < 0x80) {
		text_char(t, (char)cp);
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3f));
		text_put(t, b, 2);
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | cp >> 12), b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		text_put(t, b, 3);
	} else {
		b[0] = (char)(0xf0 | cp >> 18), b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (char)(0x80 | (cp & 0x3f));
		text_put(t, b, 4);
	}
}

static uint32_t hex4(const char *p, const char *e, bool *ok)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p + i < e ? p[i] : 'x';
		int d = c >= '0' && c <= '9'   ? c - '0'
		        : c >= 'a' && c <= 'f' ? c - 'a' + 10
		        : c >= 'A' && c <= 'F' ? c - 'A' + 10
		                               : -1;
		if (d < 0)
			*ok = false;
		v = v << 4 | (uint32_t)(d < 0 ? 0 : d);
	}
	return v;
}

/* \uXXXX at p (after the backslash and 'u'), a surrogate pair joined;
 * returns where the escape ends. */
static const char *put_unicode(text_buf *t, const char *p, const char *e)
{
	bool ok = true;
	uint32_t cp = hex4(p, e, &ok);
	p += 4;
	if (ok && cp >= 0xd800 && cp < 0xdc00 && p + 6 <= e && p[0] == '\\' && p[1] == 'u') {
		uint32_t lo = hex4(p + 2, e, &ok);
		if (ok && lo >= 0xdc00 && lo < 0xe000) {
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			p += 6;
		}
	}
	put_utf8(t, ok && (cp < 0xd800 || cp >= 0xe000) ? cp : 0xfffd);
	return p > e ? e : p;
}

/* A C1 control (U+0080 to U+009F) written as UTF-8 at p: terminals obey
 * those as they do C0 ones (U+009B is CSI, U+009D OSC). */
static bool c1_at(const char *p, const char *e)
{
	return e - p >= 2 && (unsigned char)p[0] == 0xc2 && (unsigned char)p[1] >= 0x80 &&
	       (unsigned char)p[1] <= 0x9f;
}

/* A string value decoded, controls as '?'. */
static void put_decoded(text_buf *t, log_slice v)
{
	const char *p = v.p + 1, *e = v.p + v.n - 1;
	while (p < e) {
		if (c1_at(p, e)) {
			text_char(t, '?');
			p += 2;
			continue;
		}
		unsigned char c = (unsigned char)*p++;
		if (c != '\\') {
			text_char(t, c < 0x20 || c == 0x7f ? '?' : (char)c);
			continue;
		}
		if (p >= e)
			break;
		char x = *p++;
		if (x == 'u')
			p = put_unicode(t, p, e);
		else
			text_char(t, x == '"' || x == '\\' || x == '/' ? x : x == 't' ? ' ' : '?');
	}
}

/* A value other than a string, as it stands, controls as '?'. */
static void put_raw(text_buf *t, log_slice v)
{
	for (size_t i = 0; i < v.n; i++) {
		if (c1_at(v.p + i, v.p + v.n)) {
			text_char(t, '?');
			i++;
			continue;
		}
		unsigned char c = (unsigned char)v.p[i];
		text_char(t, c < 0x20 || c == 0x7f ? '?' : (char)c);
	}
}

static void put_value(text_buf *t, log_slice v)
{
	if (is_string(v))
		put_decoded(t, v);
	else
		put_raw(t, v);
}

void log_slice_text(log_slice v, char *out, size_t cap)
{
	text_buf t;
	text_init(&t, out, cap);
	if (v.n)
		put_value(&t, v);
	text_finish(&t);
}

/* ---- rendering ---- */

#define ESC(code) (color ? "\033[" code "m" : "")

static const char *severity_colour(char s, bool color)
{
	return s == 'E' || s == 'F' ? ESC("31") : s == 'W' ? ESC("33") : s == 'D' ? ESC("2") : "";
}

/* "TIME S COMPONENT " */
static void put_head(text_buf *t, const log_event *ev, bool color)
{
	char sev[8], comp[32];
	log_slice_text(ev->s, sev, sizeof(sev));
	log_slice_text(ev->c, comp, sizeof(comp));
	text_str(t, ESC("2"));
	put_decoded(t, ev->t);
	text_printf(t, "%s %s%s%s %-8s ", ESC("0"), severity_colour(sev[0], color), sev, ESC("0"),
	            comp);
}

static const char *action_colour(const char *action, bool color)
{
	return !strcmp(action, "block")     ? ESC("1;31")
	       : !strcmp(action, "dry-run") ? ESC("35")
	                                    : ESC("33");
}

/* "[conn7] " for a line about one connection; nothing for "main". */
static void put_ctx(text_buf *t, const log_event *ev)
{
	char ctx[128];
	log_slice_text(ev->ctx, ctx, sizeof(ctx));
	if (ctx[0] && strcmp(ctx, "main"))
		text_printf(t, "[%s] ", ctx);
}

/* A finding: what, where and who on its line; why it matched and the fix
 * indented under it, so a person reads the reason without the JSON. */
static void put_finding(text_buf *t, const log_event *ev, bool color)
{
	char action[32], repeats[32], app[512], client[128];
	log_slice_text(log_event_attr(ev, "action"), action, sizeof(action));
	log_slice_text(log_event_attr(ev, "repeats"), repeats, sizeof(repeats));
	log_slice_text(log_event_attr(ev, "appName"), app, sizeof(app));
	log_slice_text(log_event_attr(ev, "client"), client, sizeof(client));
	put_ctx(t, ev);
	text_str(t, ESC("1"));
	put_value(t, log_event_attr(ev, "rule"));
	text_printf(t, "%s %s%s%s ", ESC("0"), action_colour(action, color), action, ESC("0"));
	put_value(t, log_event_attr(ev, "ns"));
	text_str(t, " app=");
	text_str(t, app[0] ? app : "-");
	if (client[0]) {
		text_str(t, " client=");
		text_str(t, client);
	}
	text_char(t, ' ');
	put_value(t, log_event_attr(ev, "shape"));
	long long n = strtoll(repeats, NULL, 10);
	if (n > 0)
		text_printf(t, " (repeated %lld time%s)", n, n == 1 ? "" : "s");
	log_slice why = log_event_attr(ev, "detail");
	if (why.n > 2) {
		text_printf(t, "\n    %swhy:%s ", ESC("36"), ESC("0"));
		put_value(t, why);
	}
	log_slice fix = log_event_attr(ev, "suggestion");
	if (fix.n > 2) {
		text_printf(t, "\n    %sfix:%s ", ESC("36"), ESC("0"));
		put_value(t, fix);
	}
}

/* An attribute value: strings decoded, in quotes when they hold a space. */
static void put_attr(text_buf *t, log_slice k, log_slice v)
{
	bool quote = false;
	for (size_t i = 0; is_string(v) && i < v.n; i++)
		quote |= v.p[i] == ' ';
	text_char(t, ' ');
	put_decoded(t, k);
	text_str(t, quote ? "=\"" : "=");
	put_value(t, v);
	if (quote)
		text_char(t, '"');
}

static void put_other(text_buf *t, const log_event *ev, bool color)
{
	put_ctx(t, ev);
	put_decoded(t, ev->msg);
	obj_iter it;
	log_slice k, v;
	if (!obj_begin(&it, ev->attr))
		return;
	while (obj_next(&it, &k, &v) == 1)
		if (!(is_string(v) && v.n == 2)) /* empty strings say nothing */
			put_attr(t, k, v);
}

void log_text_render(const log_event *ev, bool color, text_buf *out)
{
	char comp[32];
	log_slice_text(ev->c, comp, sizeof(comp));
	put_head(out, ev, color);
	if (!strcmp(comp, "ANALYZER") && log_event_attr(ev, "rule").n)
		put_finding(out, ev, color);
	else
		put_other(out, ev, color);
	text_close(out, "\n");
}
