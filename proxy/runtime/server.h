/* The running proxy: the listener, signals and timers on the main thread,
 * the workers, and what they share (the configuration snapshot, the index
 * cache, the upstream target, id counters). */
#ifndef MG_PROXY_RUNTIME_SERVER_H
#define MG_PROXY_RUNTIME_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "protocol/hello_rewrite.h"
#include "proxy/runtime/config.h"
#include "proxy/net/address.h"
#include "proxy/net/routes.h"
#include "proxy/net/tls.h"
#include "proxy/net/upstream.h"

/* Loads the configuration the way start-up did (defaults, file, flags),
 * for a reload. False with err set. */
typedef bool (*config_loader)(void *arg, mg_config *out, char *err, size_t errlen);

/* A listener. Which upstream server its clients are paired with, and the
 * hello mapping, live in the routes (they follow DNS). */
typedef struct plan_listener {
	net_addr listen;
	upstream_target up;             /* its server at start-up (for --check-config, /readyz) */
	char advertise[HELLO_HOST_LEN]; /* what hello replies call this listener */
} plan_listener;

enum { PLAN_MAX_LISTENERS = MG_MAX_MEMBERS + 1 };
_Static_assert((int)PLAN_MAX_LISTENERS <= (int)ROUTES_MAX, "routes hold every listener");

/* Everything resolved before anything starts, once: `--check-config`
 * stops after making it, `server_run` starts from it.
 *
 * Listeners: net.listen, paired with the URI's first host (unless an
 * upstream.members entry claims net.listen's address), then one per
 * upstream.members entry. Every hello reply a client gets is rewritten
 * with map, so the set's members are named by their listeners. */
typedef struct server_plan {
	const mg_config *cfg;
	plan_listener listeners[PLAN_MAX_LISTENERS];
	size_t nlisteners;
	/* What to resolve, and the first answer (a mongodb+srv:// URI already
	 * expanded in routes->uri); the resolver publishes the later ones. */
	routes_spec spec;
	upstream_routes *routes;
	upstream_uri_info uri;
	/* The index cache's side connection: the upstream URI (SRV expanded;
	 * with upstream.dnsServer, its hosts as addresses, since libmongoc
	 * resolves names through the system's resolver), with the
	 * credentials of upstream.credentialsFile when given. Never logged. */
	char side_uri[4096];
	bool side_has_credentials;
	/* TLS contexts for both sides, built once (a reload would build a new
	 * one; sessions hold the one they started with). */
	net_tls tls;
	/* Reload: how start-up loaded the configuration, to do it again. */
	const char *config_path; /* NULL: no file, nothing to reload */
	config_loader load;
	void *load_arg;
	const char *version; /* for logs and mongoguard_build_info */
	/* The admin endpoint. */
	bool admin; /* admin.listen is set */
	net_addr admin_listen;
	char admin_token[256]; /* read from admin.tokenFile; "" = none */
} server_plan;

/* Resolves cfg's listen addresses and upstream, reads the admin token
 * file. Clears *p first: the caller sets version and the reload fields
 * after. False with err set. */
bool server_plan_make(server_plan *p, const mg_config *cfg, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/* Runs until SIGTERM/SIGINT and a graceful drain. False with err set when
 * start-up fails. */
bool server_run(const server_plan *p, char *err, size_t errlen) __attribute__((warn_unused_result));

#endif
