/* What the report is given to read (report.h, report_inputs_expand): a
 * capture file, or a capture directory (capture.dir) whose capture files
 * are read in name order, which is the order the writer made them in.
 *
 * Every file is looked at before anything is read: a name that is no
 * capture (a configuration file, a log, an empty file) is a mistake on
 * the command line, refused by name before any report is written, so a
 * typo never yields an empty report and exit status 0. A name that cannot
 * be read at all (missing, no permission) is refused the same way, but as
 * an input that failed (exit status 1, as bsondump's for a missing file),
 * not as a usage error. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/capture.h"
#include "report/report.h"

typedef struct names {
	char **v;
	size_t n, cap;
} names;

static bool add(names *l, const char *path)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		char **nv = realloc(l->v, nc * sizeof *nv);
		if (!nv)
			return false;
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->n] = strdup(path);
	if (!l->v[l->n])
		return false;
	l->n++;
	return true;
}

/* Whether path starts with a capture header (the first 64 KiB are
 * plenty: a header is a few hundred bytes). */
static bool is_capture(const char *path, bool *unreadable, char *why, size_t whylen)
{
	uint8_t buf[65536];
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		snprintf(why, whylen, "cannot read it: %s", strerror(errno));
		*unreadable = true;
		return false;
	}
	ssize_t got = read(fd, buf, sizeof buf);
	int rerr = errno;
	close(fd);
	size_t off = 0;
	bson_t rec;
	if (got < 0) {
		snprintf(why, whylen, "cannot read it: %s", strerror(rerr));
		*unreadable = true;
		return false;
	}
	if (got == 0) {
		snprintf(why, whylen, "empty, not a mongoguard capture");
		return false;
	}
	if (capture_next(buf, (size_t)got, &off, &rec) != CAPTURE_NEXT_OK ||
	    capture_kind(&rec) != CAPTURE_REC_HEADER) {
		snprintf(why, whylen,
		         "not a mongoguard capture (it does not start with a capture "
		         "header record)");
		return false;
	}
	return true;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directory's capture files (*.bson), in name order. */
static bool add_dir(names *l, const char *dir, bool *unreadable, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "%s: cannot read the directory: %s", dir, strerror(errno));
		*unreadable = true;
		return false;
	}
	size_t first = l->n;
	struct dirent *e;
	bool ok = true;
	while (ok && (e = readdir(d))) {
		size_t nl = strlen(e->d_name);
		char p[4096];
		struct stat sb;
		if (nl < 6 || strcmp(e->d_name + nl - 5, ".bson") != 0)
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
			ok = add(l, p);
	}
	closedir(d);
	if (!ok) {
		snprintf(err, errlen, "out of memory");
		return false;
	}
	if (l->n == first) {
		snprintf(err, errlen, "%s: a directory with no capture files (*.bson) in it", dir);
		return false;
	}
	qsort(l->v + first, l->n - first, sizeof *l->v, cmp_names);
	return true;
}

bool report_inputs_expand(const char *const *args, size_t n, char ***out, size_t *nout,
                          bool *unreadable, char *err, size_t errlen)
{
	names l = {0};
	bool ok = true;
	*unreadable = false;
	for (size_t i = 0; ok && i < n; i++) {
		struct stat sb;
		if (stat(args[i], &sb) != 0) {
			snprintf(err, errlen, "%s: %s", args[i], strerror(errno));
			*unreadable = true;
			ok = false;
		} else if (S_ISDIR(sb.st_mode)) {
			ok = add_dir(&l, args[i], unreadable, err, errlen);
		} else if (!(ok = add(&l, args[i]))) {
			snprintf(err, errlen, "out of memory");
		}
	}
	for (size_t i = 0; ok && i < l.n; i++) {
		char why[256];
		if (!is_capture(l.v[i], unreadable, why, sizeof why)) {
			snprintf(err, errlen, "%s: %s", l.v[i], why);
			ok = false;
		}
	}
	if (!ok) {
		report_inputs_free(l.v, l.n);
		return false;
	}
	*out = l.v;
	*nout = l.n;
	return true;
}

void report_inputs_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}
