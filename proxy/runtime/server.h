/* The running proxy: the listener, signals and timers on the main thread,
 * the workers, and what they share (the configuration snapshot, the index
 * cache, the upstream target, id counters). */
#ifndef MG_PROXY_RUNTIME_SERVER_H
#define MG_PROXY_RUNTIME_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "proxy/runtime/config.h"
#include "proxy/net/address.h"
#include "proxy/net/upstream.h"

/* Everything resolved before anything starts, once: `--check-config`
 * stops after making it, `server_run` starts from it. */
/* Loads the configuration the way start-up did (defaults, file, flags),
 * for a reload. False with err set. */
typedef bool (*config_loader)(void *arg, mg_config *out, char *err, size_t errlen);

typedef struct server_plan {
	const mg_config *cfg;
	const char *config_path; /* NULL: no file, nothing to reload */
	config_loader load;
	void *load_arg;
	const char *version; /* for logs and mongoguard_build_info */
	net_addr listen;
	upstream_target up;
	bool admin; /* admin.listen is set */
	net_addr admin_listen;
	char admin_token[256]; /* read from admin.tokenFile; "" = none */
} server_plan;

/* Resolves cfg's listen addresses and upstream, reads the admin token
 * file. False with err set. */
bool server_plan_make(server_plan *p, const mg_config *cfg, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Runs until SIGTERM/SIGINT and a graceful drain. False with err set when
 * start-up fails. */
bool server_run(const server_plan *p, char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
