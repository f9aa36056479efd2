/* The CPUs `workers: 0` starts (proxy/runtime/cpus.h): the cgroup quota
 * read from a directory laid out as /proc/self and the cgroup mounts are
 * (cgroup v2, v1's cpu controller, both at once, a namespaced view), the
 * least quota on the way from the process's cgroup up to the mount,
 * rounded up. And this process's count under its own affinity mask. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy/runtime/cpus.h"

static char root[64];

/* Writes text to root + path, making its directories. */
static void put(const char *path, const char *text)
{
	char full[512];
	snprintf(full, sizeof(full), "%s%s", root, path);
	for (char *p = full + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(full, 0755);
		*p = '/';
	}
	FILE *f = fopen(full, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int fresh_root(void **state)
{
	char cmd[128];
	if (root[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
		assert_int_equal(system(cmd), 0);
	}
	snprintf(root, sizeof(root), "/tmp/mg-test-cpus-XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static int drop_root(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
	root[0] = '\0';
	return 0;
}

#define V2_MOUNT "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"

/* cgroup v2: the container's limit, and a tighter one on its pod. */
static void test_v2_least_on_the_way_up(void **state)
{
	put("/proc/self/cgroup", "0::/kubepods/pod1/c1\n");
	put("/proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/root rw\n" V2_MOUNT);
	put("/sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "150000 100000\n");
	put("/sys/fs/cgroup/kubepods/pod1/cpu.max", "max 100000\n");
	assert_int_equal(cpus_cgroup_quota(root), 2); /* 1.5 rounded up */
	put("/sys/fs/cgroup/kubepods/pod1/cpu.max", "50000 100000\n");
	assert_int_equal(cpus_cgroup_quota(root), 1); /* the pod's half CPU */
	put("/sys/fs/cgroup/kubepods/pod1/cpu.max", "max 100000\n");
	put("/sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "400000 100000\n");
	assert_int_equal(cpus_cgroup_quota(root), 4); /* whole: not rounded up */
	put("/sys/fs/cgroup/kubepods/pod1/c1/cpu.max", "max 100000\n");
	assert_int_equal(cpus_cgroup_quota(root), 0); /* no limit anywhere */
}

/* cgroup v1: the cpu controller's hierarchy (here shared with cpuacct),
 * a quota of -1 being none. */
static void test_v1_cpu_controller(void **state)
{
	put("/proc/self/cgroup", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n");
	put("/proc/self/mountinfo",
	    "31 23 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
	    "32 23 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
	    "33 23 0:29 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
	put("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "200000\n");
	put("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
	put("/sys/fs/cgroup/memory/docker/abc/cpu.cfs_quota_us", "50000\n"); /* not cpu's */
	put("/sys/fs/cgroup/memory/docker/abc/cpu.cfs_period_us", "100000\n");
	assert_int_equal(cpus_cgroup_quota(root), 2);
	put("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
	assert_int_equal(cpus_cgroup_quota(root), 0);
	/* the unified hierarchy beside it (a hybrid host) sets one: the least */
	put("/sys/fs/cgroup/unified/cpu.max", "300000 100000\n");
	put("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "100000\n");
	assert_int_equal(cpus_cgroup_quota(root), 1);
}

/* A container's own cgroup namespace: the mount's root is the container's
 * cgroup and the process's path is "/", so the mount's own files hold it. */
static void test_namespaced_view(void **state)
{
	put("/proc/self/cgroup", "0::/\n");
	put("/proc/self/mountinfo",
	    "30 23 0:26 /kubepods/pod1/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
	put("/sys/fs/cgroup/cpu.max", "250000 100000\n");
	assert_int_equal(cpus_cgroup_quota(root), 3);
}

/* Nothing to read (not Linux's layout, no cgroup file system): no quota. */
static void test_nothing_to_read(void **state)
{
	assert_int_equal(cpus_cgroup_quota(root), 0);
	put("/proc/self/cgroup", "0::/a\n");
	assert_int_equal(cpus_cgroup_quota(root), 0); /* no mountinfo */
	put("/proc/self/mountinfo", V2_MOUNT);
	put("/sys/fs/cgroup/a/cpu.max", "garbage\n");
	assert_int_equal(cpus_cgroup_quota(root), 0);
}

/* This process: its affinity mask's CPUs, never more than the quota. */
static void test_this_process(void **state)
{
	cpu_set_t set;
	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	cpus_usable c = cpus_usable_now();
	assert_int_equal(c.affinity, (unsigned)CPU_COUNT(&set));
	assert_true(c.n >= 1 && c.n <= c.affinity);
	assert_true(!c.quota || c.n <= c.quota);
	/* one CPU in the mask: one */
	cpu_set_t one;
	CPU_ZERO(&one);
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set)) {
			CPU_SET(i, &one);
			break;
		}
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	cpus_usable c1 = cpus_usable_now();
	assert_int_equal(sched_setaffinity(0, sizeof(set), &set), 0);
	assert_int_equal(c1.affinity, 1);
	assert_int_equal(c1.n, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_v2_least_on_the_way_up, fresh_root, drop_root),
	    cmocka_unit_test_setup_teardown(test_v1_cpu_controller, fresh_root, drop_root),
	    cmocka_unit_test_setup_teardown(test_namespaced_view, fresh_root, drop_root),
	    cmocka_unit_test_setup_teardown(test_nothing_to_read, fresh_root, drop_root),
	    cmocka_unit_test(test_this_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
