/* How many CPUs this process may use: the worker count `workers: 0`
 * starts. The node's cores (sysconf) are the wrong count under taskset, in
 * a cpuset, or in a container with a CPU limit: a proxy given 2 CPUs of a
 * 64-core node would start 64 workers for the quota to throttle. So the
 * count is the CPUs of the process's affinity mask, capped by the CPU
 * quota of its cgroup and of every ancestor up to the hierarchy's mount
 * (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over `cpu.cfs_period_us`),
 * rounded up: a limit of 1.5 CPUs gives 2 workers. That is how Go's
 * runtime and the JVM size themselves in a container. A path that
 * mountinfo escapes (a space in a cgroup's name) is not followed: no
 * quota is read from it. */
#ifndef MG_PROXY_RUNTIME_CPUS_H
#define MG_PROXY_RUNTIME_CPUS_H

typedef struct cpus_usable {
	unsigned affinity; /* CPUs in the affinity mask (the online cores if it cannot be read) */
	unsigned quota;    /* the cgroup quota in CPUs, rounded up; 0: none */
	unsigned n;        /* the lesser of the two, at least 1 */
} cpus_usable;

/* The CPU quota of the cgroups the files under root describe (root ""
 * for this process: /proc/self/cgroup, /proc/self/mountinfo and the
 * cgroup files they lead to; a test's directory otherwise), in CPUs
 * rounded up; 0 when no cgroup on the way sets one. */
unsigned cpus_cgroup_quota(const char *root);

/* This process's count. */
cpus_usable cpus_usable_now(void);

#endif
