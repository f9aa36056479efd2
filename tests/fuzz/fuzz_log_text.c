/* libFuzzer target: the text log (log.format: text) and `mongoguard log`,
 * which render the same JSON line through proxy/sinks/log_text.c.
 *
 * The input's first byte picks a mode:
 *
 *   0  (even) the rest is one line of anything: log_event_parse (on an
 *      exact-size heap copy, no NUL after it) and, when it is a log line,
 *      log_text_render with and without colour, into a buffer as large as
 *      the log's and into a small one (cut).
 *   1  a finding from the input's fields, logged as the engine's sink logs
 *      it (server_log_finding, proxy/sinks/finding_log.c) twice: with
 *      log.format json and with text, into a memfd; the JSON line is then
 *      given to `mongoguard log` (logview_main, stdout on another memfd).
 *   3  any other line (log_begin, the log_attr_* kinds, log_end), the same
 *      way.
 *
 * Checked:
 *   - every text is one line per event, ending in a newline: a finding's
 *     fix alone goes on a second line, which starts "    fix: "; no byte
 *     below 0x20 but those newlines, no DEL, no C1 control (U+0080 to
 *     U+009F, which terminals also obey); without colour no ESC at all,
 *     with colour only the SGR codes the renderer writes, and taking those
 *     out gives the text without colour;
 *   - the JSON log line is strict JSON (json_check.h), one line, and a log
 *     line by log_event_parse; a client string that is valid UTF-8 with no
 *     control character reads back from it unchanged;
 *   - the live text line and `mongoguard log`'s rendering of the JSON line
 *     are the same text, the time stamps aside (two calls, two times). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "protocol/text.h"
#include "proxy/sinks/logview.h"
#include "proxy/sinks/finding_log.h"
#include "proxy/sinks/log.h"
#include "proxy/sinks/log_text.h"
#include "tests/fuzz/json_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { TEXT_CAP = 64 * 1024 + 4096, TIME_LEN = 24 }; /* log.c's LOG_TEXT_MAX; "....Z" */

/* ---- the checks on a text ---- */

/* Whether s[i..] starts one of the SGR codes log_text.c writes:
 * ESC '[' digits and ';' 'm'. Its length, or 0. */
static size_t sgr_len(const char *s, size_t n, size_t i)
{
	if (i + 2 >= n || s[i] != '\033' || s[i + 1] != '[')
		return 0;
	size_t k = i + 2;
	while (k < n && ((s[k] >= '0' && s[k] <= '9') || s[k] == ';'))
		k++;
	return k < n && s[k] == 'm' ? k + 1 - i : 0;
}

/* s[0..n) as text for a terminal: see the file's comment. finding: the
 * event is a finding (a fix line may follow). Returns the text without
 * its colour codes (malloc'd) for the caller to compare. */
static char *check_text(const char *s, size_t n, bool a_finding, bool color, size_t *plain_len)
{
	if (n == 0 || s[n - 1] != '\n') {
		fprintf(stderr, "text does not end in a newline: %.*s\n", (int)n, s);
		abort();
	}
	char *plain = malloc(n + 1);
	if (!plain)
		abort();
	size_t len = 0, lines = 0;
	for (size_t i = 0; i < n;) {
		size_t k = color ? sgr_len(s, n, i) : 0;
		if (k) {
			i += k;
			continue;
		}
		unsigned char c = (unsigned char)s[i];
		bool c1 = c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
		          (unsigned char)s[i + 1] <= 0x9f;
		if ((c < 0x20 && c != '\n') || c == 0x7f || c1) {
			fprintf(stderr, "a control character (0x%02x%s) in the text at %zu: %.*s\n",
			        c, c1 ? " and a C1 byte" : "", i, (int)n, s);
			abort();
		}
		if (c == '\n') {
			lines++;
			if (i + 1 < n) { /* more lines: a finding's why and fix, indented */
				if (!a_finding || lines > 2) {
					fprintf(stderr, "more lines than events: %.*s\n", (int)n,
					        s);
					abort();
				}
				/* the colour codes around "fix:" are out of plain already */
			}
		}
		plain[len++] = (char)c;
		i++;
	}
	plain[len] = '\0';
	/* a finding's lines after its first: "    why: " then "    fix: ", each
	 * at most once, in that order */
	const char *want[] = {"    why: ", "    fix: "};
	size_t next = 0;
	for (char *nl = memchr(plain, '\n', len); nl && nl + 1 < plain + len;
	     nl = memchr(nl + 1, '\n', (size_t)(plain + len - nl - 1))) {
		while (next < 2 && strncmp(nl + 1, want[next], 9) != 0)
			next++;
		if (next == 2) {
			fprintf(stderr, "a line under a finding that is not its why or fix: %s\n",
			        plain);
			abort();
		}
		next++;
	}
	*plain_len = len;
	return plain;
}

/* ---- mode 0: a line of anything ---- */

static void render_into(const log_event *ev, bool color, char *buf, size_t cap, size_t *len)
{
	text_buf t;
	text_init_reserve(&t, buf, cap, 8); /* as logview.c and log.c do */
	log_text_render(ev, color, &t);
	if (t.len >= cap || buf[t.len] != '\0')
		abort(); /* text_close terminates within the buffer */
	*len = t.len;
}

static bool is_finding(const log_event *ev)
{
	char comp[32];
	log_slice_text(ev->c, comp, sizeof comp);
	return !strcmp(comp, "ANALYZER") && log_event_attr(ev, "rule").n;
}

static void any_line(const uint8_t *data, size_t size)
{
	char *line = malloc(size ? size : 1);
	if (!line)
		abort();
	memcpy(line, data, size);
	log_event ev;
	if (!log_event_parse(line, size, &ev)) {
		free(line);
		return;
	}
	static char a[TEXT_CAP], b[TEXT_CAP], small[160];
	size_t na, nb, ns, pa, pb;
	render_into(&ev, false, a, sizeof a, &na);
	render_into(&ev, true, b, sizeof b, &nb);
	render_into(&ev, false, small, sizeof small, &ns);
	bool a_finding = is_finding(&ev);
	char *plain_a = check_text(a, na, a_finding, false, &pa);
	char *plain_b = check_text(b, nb, a_finding, true, &pb);
	free(check_text(small, ns, a_finding, false, &ns));
	/* colour changes nothing but the codes, unless it made the text cut */
	bool cut = na + 1024 > sizeof a || nb + 1024 > sizeof b;
	if (!cut && (pa != pb || memcmp(plain_a, plain_b, pa) != 0)) {
		fprintf(stderr, "with colour, less the codes:\n%s\nwithout:\n%s\n", plain_b,
		        plain_a);
		abort();
	}
	free(plain_a);
	free(plain_b);
	/* every slice the renderer reads decodes, terminated, into any cap */
	char tiny[5];
	log_slice_text(log_event_attr(&ev, "shape"), tiny, sizeof tiny);
	if (strnlen(tiny, sizeof tiny) == sizeof tiny)
		abort();
	free(line);
}

/* ---- modes 1 and 3: lines the proxy writes ---- */

typedef struct reader {
	const uint8_t *p, *e;
} reader;

static unsigned u8(reader *r)
{
	return r->p < r->e ? *r->p++ : 0;
}

/* A client string: a length (one byte; 255: two more), then the bytes; a
 * NUL among them ends it. malloc'd. */
static char *str(reader *r)
{
	size_t n = u8(r);
	if (n == 255)
		n = u8(r) | u8(r) << 8;
	size_t avail = (size_t)(r->e - r->p);
	if (n > avail)
		n = avail;
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, r->p, n);
	s[n] = '\0';
	r->p += n;
	return s;
}

/* A shape as the engine writes one: a JSON object (strings escaped as the
 * shape renderer's are), or, rarely, plain text. malloc'd. */
static char *shape_of(reader *r)
{
	unsigned how = u8(r);
	if (how % 4 == 0) {
		char *s = str(r);
		if (s[0] == '{')
			s[0] = '('; /* only a whole object is logged as JSON */
		return s;
	}
	static char buf[16384];
	text_buf t;
	text_init(&t, buf, sizeof buf);
	unsigned n = how % 8, depth = 0;
	text_char(&t, '{');
	for (unsigned i = 0; i < n; i++) {
		char *k = str(r), *v = str(r);
		if (i)
			text_char(&t, ',');
		text_json_str(&t, k, strlen(k), TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
		text_char(&t, ':');
		if (u8(r) & 1) {
			text_char(&t, '{');
			depth++;
			text_json_str(&t, v, strlen(v), TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
			text_str(&t, ":\"?\"");
		} else {
			text_json_str(&t, v, strlen(v), TEXT_JSON_QUOTED | TEXT_JSON_UTF8);
		}
		free(k);
		free(v);
	}
	while (depth--)
		text_char(&t, '}');
	text_char(&t, '}');
	if (t.overflow)
		return strdup("{\"cut\":\"?\"}"); /* the renderer never writes a cut object */
	text_finish(&t);
	return strdup(buf);
}

static int log_memfd = -1, out_memfd = -1, in_memfd = -1;
static char in_path[64];

static void setup(void)
{
	if (log_memfd >= 0)
		return;
	log_memfd = memfd_create("fuzz_log_text.log", 0);
	out_memfd = memfd_create("fuzz_log_text.out", 0);
	in_memfd = memfd_create("fuzz_log_text.in", 0);
	if (log_memfd < 0 || out_memfd < 0 || in_memfd < 0)
		abort();
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", log_memfd);
	if (!log_open(path, LOG_DEBUG))
		abort();
	snprintf(in_path, sizeof in_path, "/proc/self/fd/%d", in_memfd);
	/* `mongoguard log` writes to stdout: here, a memfd */
	fflush(stdout);
	if (dup2(out_memfd, STDOUT_FILENO) < 0)
		abort();
}

/* What fd holds (malloc'd, NUL after it); then empties it. */
static char *take(int fd, size_t *len)
{
	off_t n = lseek(fd, 0, SEEK_END);
	char *s = malloc((size_t)n + 1);
	if (n < 0 || !s || pread(fd, s, (size_t)n, 0) != n)
		abort();
	s[n] = '\0';
	*len = (size_t)n;
	if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0)
		abort();
	return s;
}

/* A string the JSON line should carry unchanged: valid UTF-8, no control
 * character (C0, DEL, C1: the text shows those as '?'). */
static bool plain_client_text(const char *s)
{
	if (!text_utf8_valid(s))
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f || (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
			return false;
	return true;
}

typedef struct fields {
	char *ns, *command, *shape, *suggestion, *detail, *client, *app, *would_block;
} fields;

static void log_one(bool a_finding, reader r0, const fields *fd)
{
	reader r = r0; /* both formats read the same bytes */
	if (a_finding) {
		unsigned flags = u8(&r);
		finding f = {
		    .rule = (rule_id)(u8(&r) % RULE_COUNT),
		    .action = (rule_action)(flags % 4),
		    .ns = fd->ns,
		    .command = fd->command,
		    .shape_hash = (uint64_t)u8(&r) * 0x0101010101010101ull,
		    .shape = fd->shape,
		    .suggestion = fd->suggestion,
		    .detail = fd->detail,
		    .app_name = fd->app,
		    .client = fd->client,
		    .repeats = flags & 4 ? u8(&r) : 0,
		    .would_block = flags & 8 ? fd->would_block : NULL,
		    .sampled_out = flags & 16,
		    .late = flags & 32,
		};
		server_log_finding(NULL, &f);
		return;
	}
	static const char *const comps[] = {"NETWORK", "ANALYZER", "CONTROL", "ADMIN", "SINK"};
	static const char *const keys[] = {"remote", "rule", "ns",  "appName", "shape",
	                                   "n",      "ok",   "why", "repeats", "suggestion"};
	unsigned sev = u8(&r) % 4, comp = u8(&r) % 5;
	log_line *l = log_begin((log_severity)sev, comps[comp], 2000 + (int)u8(&r),
	                        u8(&r) & 1 ? fd->client : NULL, fd->detail);
	if (!l)
		abort(); /* LOG_DEBUG: every line is wanted */
	for (unsigned i = 0, n = u8(&r) % 8; i < n; i++) {
		const char *key = keys[u8(&r) % 10];
		switch (u8(&r) % 5) {
		case 0:
			log_attr_str(l, key, i & 1 ? fd->ns : fd->app);
			break;
		case 1:
			log_attr_int(l, key, (int64_t)(int8_t)u8(&r) * 1000003);
			break;
		case 2:
			log_attr_bool(l, key, u8(&r) & 1);
			break;
		case 3:
			log_attr_raw(l, key, fd->shape[0] == '{' ? fd->shape : "[1,2]");
			break;
		default:
			log_attr_fmt(l, key, "%s/%u", fd->command, u8(&r));
			break;
		}
	}
	log_end(l);
}

static void proxy_line(bool a_finding, reader *r)
{
	setup();
	fields fd;
	fd.ns = str(r);
	fd.command = str(r);
	fd.shape = shape_of(r);
	fd.suggestion = str(r);
	fd.detail = str(r);
	fd.client = str(r);
	fd.app = str(r);
	fd.would_block = str(r);
	size_t jn, tn, vn, pt, pv;
	log_set_format(LOG_FORMAT_JSON);
	log_one(a_finding, *r, &fd);
	char *json = take(log_memfd, &jn);
	log_set_format(LOG_FORMAT_TEXT);
	log_one(a_finding, *r, &fd);
	char *text = take(log_memfd, &tn);

	/* the JSON line: one line of strict JSON (shapes may repeat a key,
	 * as BSON filters may), and a log line */
	if (jn < 2 || json[jn - 1] != '\n' || memchr(json, '\n', jn - 1))
		abort();
	json_must_check("the JSON log line", json, jn - 1, JC_DUP_KEYS_OK);
	log_event ev;
	if (!log_event_parse(json, jn - 1, &ev))
		abort();
	bool as_finding = is_finding(&ev); /* any line can be ANALYZER with a rule */
	if (a_finding && !as_finding)
		abort();
	static char back[70000];
	log_slice_text(a_finding ? log_event_attr(&ev, "ns") : ev.msg, back, sizeof back);
	const char *sent = a_finding ? fd.ns : fd.detail;
	bool cut = jn > 60000; /* a line over 64 KiB is cut and says so */
	if (!cut && plain_client_text(sent) && strcmp(back, sent) != 0) {
		fprintf(stderr, "\"%s\" came back from the JSON line as \"%s\"\n", sent, back);
		abort();
	}

	/* `mongoguard log` over the JSON line */
	if (ftruncate(in_memfd, 0) != 0 || pwrite(in_memfd, json, jn, 0) != (ssize_t)jn)
		abort();
	char *argv[] = {"log", in_path, NULL};
	if (logview_main(2, argv) != 0)
		abort();
	fflush(stdout);
	char *view = take(out_memfd, &vn);

	/* both: text for people, the same text */
	char *plain_t = check_text(text, tn, as_finding, false, &pt);
	char *plain_v = check_text(view, vn, as_finding, false, &pv);
	if (pt < TIME_LEN || pv < TIME_LEN || pt != pv ||
	    memcmp(plain_t + TIME_LEN, plain_v + TIME_LEN, pt - TIME_LEN) != 0) {
		fprintf(stderr, "the live text and `mongoguard log` differ:\n%s%s", plain_t,
		        plain_v);
		abort();
	}
	for (size_t i = 0; i < TIME_LEN; i++) {
		char c = plain_t[i];
		bool digit = c >= '0' && c <= '9';
		if (!(i == 4 || i == 7     ? c == '-'
		      : i == 10            ? c == 'T'
		      : i == 13 || i == 16 ? c == ':'
		      : i == 19            ? c == '.'
		      : i == 23            ? c == 'Z'
		                           : digit))
			abort(); /* the line starts with its time */
	}
	free(plain_t);
	free(plain_v);
	free(json);
	free(text);
	free(view);
	char **all[] = {&fd.ns,     &fd.command, &fd.shape, &fd.suggestion,
	                &fd.detail, &fd.client,  &fd.app,   &fd.would_block};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		free(*all[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (!(data[0] & 1)) {
		any_line(data + 1, size - 1);
		return 0;
	}
	reader r = {data + 1, data + size};
	proxy_line(!(data[0] & 2), &r);
	return 0;
}
