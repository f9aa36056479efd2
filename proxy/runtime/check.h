/* A checked start: what is refused before anything runs (listen addresses
 * that cannot be right), and what `--check-config` tries beyond parsing
 * (binding each listen address, asking the upstream) and reports as
 * warnings, since a proxy may well start before its database. */
#ifndef MG_PROXY_RUNTIME_CHECK_H
#define MG_PROXY_RUNTIME_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct server_plan server_plan; /* proxy/runtime/server.h */

/* "HOST:PORT" or "[v6]:PORT" with PORT a number from 1 to 65535. what names
 * the flag or key ("--listen", "net.listen") in err. Nothing is resolved:
 * net_parse_listen does that when the plan is made. */
bool check_listen_spec(const char *spec, const char *what, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* --check-config's live half: binds (and closes) every listener and the
 * admin endpoint, and sends the upstream a ping with a short timeout. One
 * line per check on out; returns how many warned. */
int check_live(const server_plan *p, FILE *out);

#endif
