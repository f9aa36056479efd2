/* How many CPUs this process may use (see cpus.h). */
#define _GNU_SOURCE
#include "proxy/runtime/cpus.h"

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { PATH_LEN = 4096, LINE_LEN = 8192 };

/* Whether the comma-separated list holds the word. */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = list;; p++) {
		if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == '\0'))
			return true;
		if (!(p = strchr(p, ',')))
			return false;
	}
}

/* root + path, opened for reading; NULL when absent. */
static FILE *open_under(const char *root, const char *path)
{
	char full[PATH_LEN];
	if ((size_t)snprintf(full, sizeof(full), "%s%s", root, path) >= sizeof(full))
		return NULL;
	return fopen(full, "r");
}

/* The first line of root + path, without its newline; false when absent. */
static bool read_line(const char *root, const char *path, char *out, size_t size)
{
	FILE *f = open_under(root, path);
	if (!f)
		return false;
	bool ok = fgets(out, (int)size, f) != NULL;
	fclose(f);
	if (ok)
		out[strcspn(out, "\n")] = '\0';
	return ok;
}

/* One directory's quota in CPUs (a fraction), or 0 when it sets none. */
static double dir_quota(const char *root, const char *dir, bool v2)
{
	char path[PATH_LEN], line[128];
	double quota = 0, period = 0;
	if (v2) {
		snprintf(path, sizeof(path), "%s/cpu.max", dir);
		char q[32];
		if (!read_line(root, path, line, sizeof(line)) ||
		    sscanf(line, "%31s %lf", q, &period) != 2 || !strcmp(q, "max") ||
		    sscanf(q, "%lf", &quota) != 1)
			return 0;
	} else {
		snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
		if (!read_line(root, path, line, sizeof(line)) || sscanf(line, "%lf", &quota) != 1)
			return 0;
		snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
		if (!read_line(root, path, line, sizeof(line)) || sscanf(line, "%lf", &period) != 1)
			return 0;
	}
	return quota > 0 && period > 0 ? quota / period : 0;
}

/* The least quota from dir up to mount (dir lies under it), or 0. */
static double walk_up(const char *root, char *dir, const char *mount, bool v2)
{
	double least = 0;
	size_t floor = strlen(mount);
	for (;;) {
		double q = dir_quota(root, dir, v2);
		if (q > 0 && (least == 0 || q < least))
			least = q;
		char *slash = strrchr(dir, '/');
		if (strlen(dir) <= floor || !slash || (size_t)(slash - dir) < floor)
			return least;
		*slash = '\0';
	}
}

/* The cgroup path this process has in the hierarchy that is v2 (v2) or
 * holds the cpu controller (v1), from /proc/self/cgroup; false if none. */
static bool own_path(const char *root, bool v2, char *out, size_t size)
{
	FILE *f = open_under(root, "/proc/self/cgroup");
	if (!f)
		return false;
	char line[LINE_LEN];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c1 = *c2 = '\0'; /* hierarchy id : controllers : path */
		bool is_v2 = !strcmp(line, "0") && c1[1] == '\0';
		if (v2 ? is_v2 : (!is_v2 && has_word(c1 + 1, "cpu")))
			found = (size_t)snprintf(out, size, "%s", c2 + 1) < size;
	}
	fclose(f);
	return found;
}

/* The quota of the hierarchy that is v2 or holds v1's cpu controller:
 * its mount from /proc/self/mountinfo, the process's directory under it. */
static double hierarchy_quota(const char *root, bool v2)
{
	char own[PATH_LEN];
	if (!own_path(root, v2, own, sizeof(own)))
		return 0;
	FILE *f = open_under(root, "/proc/self/mountinfo");
	if (!f)
		return 0;
	char line[LINE_LEN];
	double least = 0;
	while (fgets(line, sizeof(line), f)) {
		/* id parent major:minor root mountpoint options ... - fstype source super */
		char mroot[PATH_LEN], mount[PATH_LEN], fstype[64], super[1024];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", mroot, mount) != 2 ||
		    sscanf(dash + 3, "%63s %*s %1023s", fstype, super) != 2)
			continue;
		if (v2 ? strcmp(fstype, "cgroup2") != 0
		       : strcmp(fstype, "cgroup") != 0 || !has_word(super, "cpu"))
			continue;
		if (strchr(mroot, '\\') || strchr(mount, '\\'))
			continue; /* escaped: see cpus.h */
		/* the process's directory: its path below the mount's root; the
		 * mount itself when the path is not below it (a namespace) */
		size_t rl = strcmp(mroot, "/") ? strlen(mroot) : 0;
		const char *rel =
		    !strncmp(own, mroot, rl) && (own[rl] == '/' || own[rl] == '\0') ? own + rl : "";
		char dir[PATH_LEN];
		if ((size_t)snprintf(dir, sizeof(dir), "%s%s", mount,
		                     strcmp(rel, "/") ? rel : "") >= sizeof(dir))
			continue;
		double q = walk_up(root, dir, mount, v2);
		if (q > 0 && (least == 0 || q < least))
			least = q;
	}
	fclose(f);
	return least;
}

unsigned cpus_cgroup_quota(const char *root)
{
	double v2 = hierarchy_quota(root, true), v1 = hierarchy_quota(root, false);
	double q = v2 > 0 && (v1 == 0 || v2 < v1) ? v2 : v1;
	if (q <= 0)
		return 0;
	unsigned n = (unsigned)q;
	return q - n > 1e-9 ? n + 1 : n; /* rounded up: 1.5 CPUs are 2 workers */
}

cpus_usable cpus_usable_now(void)
{
	cpus_usable c = {0};
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		c.affinity = (unsigned)CPU_COUNT(&set);
	if (c.affinity == 0) {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		c.affinity = cores > 0 ? (unsigned)cores : 1;
	}
	c.quota = cpus_cgroup_quota("");
	c.n = c.quota && c.quota < c.affinity ? c.quota : c.affinity;
	if (c.n == 0)
		c.n = 1;
	return c;
}
