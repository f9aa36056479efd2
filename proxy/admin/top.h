/* mongoguard top: a terminal view of a running mongoguard's GET /workload,
 * refreshed like top or mongotop (shapes by total time, with the rules that
 * fired on them, and the collections' reads and writes per second), or one
 * snapshot printed with --once. */
#ifndef MG_PROXY_ADMIN_TOP_H
#define MG_PROXY_ADMIN_TOP_H

/* argv[0] is "top". Returns the exit status. */
int top_main(int argc, char **argv);

#endif
