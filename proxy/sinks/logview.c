/* mongoguard log (see logview.h). Lines that are not JSON log lines pass
 * through as they stand (unless a filter is set), so a text log or a
 * stray line from a wrapper script is not lost. */
#include "proxy/sinks/logview.h"

#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analyzers/rules/rules.h"
#include "proxy/sinks/log_text.h"

enum { FOLLOW_POLL_MS = 200, OUT_MAX = 64 * 1024 + 4096 };

typedef struct view {
	const char *rule, *ns, *app; /* NULL: any */
	bool follow, color;
	char out[OUT_MAX];
} view;

static void usage(FILE *out)
{
	fputs("Usage: mongoguard log FILE... [--rule RULE] [--ns NS] [--app APP] [--follow]\n"
	      "\n"
	      "Renders mongoguard's JSON log as text, one line per event and a finding's fix\n"
	      "on the next, as `log.format: text` writes it. FILE '-' reads stdin.\n"
	      "\n"
	      "  --rule RULE   only findings of this rule\n"
	      "  --ns NS       only lines whose namespace matches (a glob: 'shop.*')\n"
	      "  --app APP     only lines whose client application matches (a glob)\n"
	      "  -f, --follow  after the last file's end, wait for more, as tail -f does;\n"
	      "                a rotated file (a new file at the path) is reopened\n"
	      "  -h, --help    this help\n",
	      out);
}

/* A filter on an attribute: set, the line must have it and match. */
static bool attr_matches(const log_event *ev, const char *key, const char *pattern, bool glob)
{
	if (!pattern)
		return true;
	log_slice v = log_event_attr(ev, key);
	if (!v.n)
		return false;
	char text[1024];
	log_slice_text(v, text, sizeof(text));
	return glob ? fnmatch(pattern, text, 0) == 0 : strcmp(pattern, text) == 0;
}

static void show(view *vw, const char *line, size_t len)
{
	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	log_event ev;
	if (!log_event_parse(line, len, &ev)) {
		if (!vw->rule && !vw->ns && !vw->app)
			printf("%.*s\n", (int)len, line);
		return;
	}
	if (!attr_matches(&ev, "rule", vw->rule, false) || !attr_matches(&ev, "ns", vw->ns, true) ||
	    !attr_matches(&ev, "appName", vw->app, true))
		return;
	text_buf t;
	text_init_reserve(&t, vw->out, sizeof(vw->out), 8);
	log_text_render(&ev, vw->color, &t);
	fwrite(vw->out, 1, t.len, stdout);
}

/* Every whole line from f; a last line without its newline is shown too,
 * unless following (the writer may be in the middle of it). */
static void drain(view *vw, FILE *f, char **buf, size_t *cap, bool hold_partial)
{
	ssize_t n;
	while ((n = getline(buf, cap, f)) > 0) {
		if ((*buf)[n - 1] != '\n' && hold_partial) {
			/* back to the line's start: read again when it is whole */
			fseeko(f, -(off_t)n, SEEK_CUR);
			break;
		}
		show(vw, *buf, (size_t)n);
	}
	clearerr(f);
	fflush(stdout);
}

/* A new file at path (rotated away, or recreated): different inode, or a
 * file shorter than what was read (truncated in place). */
static bool replaced(FILE *f, const char *path)
{
	struct stat now, was;
	if (stat(path, &now) != 0 || fstat(fileno(f), &was) != 0)
		return false; /* gone for now: keep reading the old one */
	return now.st_ino != was.st_ino || now.st_dev != was.st_dev || now.st_size < ftello(f);
}

static void follow(view *vw, FILE *f, const char *path, char **buf, size_t *cap)
{
	struct timespec pause = {0, FOLLOW_POLL_MS * 1000000L};
	for (;;) {
		drain(vw, f, buf, cap, true);
		nanosleep(&pause, NULL);
		if (!replaced(f, path))
			continue;
		drain(vw, f, buf, cap, false); /* what the old file still held */
		FILE *g = fopen(path, "r");
		if (!g)
			continue;
		fclose(f);
		f = g;
	}
}

static int view_file(view *vw, const char *path, bool last)
{
	bool is_stdin = !strcmp(path, "-");
	struct stat st;
	if (!is_stdin && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "mongoguard log: cannot read %s: it is a directory\n", path);
		return 1;
	}
	FILE *f = is_stdin ? stdin : fopen(path, "r");
	if (!f) {
		fprintf(stderr, "mongoguard log: cannot read %s: %s\n", path, strerror(errno));
		return 1;
	}
	char *buf = NULL;
	size_t cap = 0;
	if (last && vw->follow && !is_stdin)
		follow(vw, f, path, &buf, &cap); /* until interrupted */
	drain(vw, f, &buf, &cap, false);
	free(buf);
	if (!is_stdin)
		fclose(f);
	return 0;
}

int logview_main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"rule", required_argument, NULL, 'r'}, {"ns", required_argument, NULL, 'n'},
	    {"app", required_argument, NULL, 'a'},  {"follow", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0},
	};
	static view vw;
	vw = (view){.color = isatty(STDOUT_FILENO) == 1};
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			/* A misspelt rule would filter every line out and exit 0, as if
			 * the log held no finding of it. */
			if (rule_from_name(optarg) < 0) {
				fprintf(stderr,
				        "mongoguard log: --rule %s: no such rule; the rules are",
				        optarg);
				for (int r = 0; r < RULE_COUNT; r++)
					fprintf(stderr, "%s %s", r ? "," : "",
					        rule_name((rule_id)r));
				fputc('\n', stderr);
				return 2;
			}
			vw.rule = optarg;
			break;
		case 'n':
			vw.ns = optarg;
			break;
		case 'a':
			vw.app = optarg;
			break;
		case 'f':
			vw.follow = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "mongoguard log: no FILE given ('-' reads stdin)\n");
		usage(stderr);
		return 2;
	}
	int status = 0;
	for (int i = optind; i < argc; i++)
		if (view_file(&vw, argv[i], i == argc - 1))
			status = 1;
	return status;
}
