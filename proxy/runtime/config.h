/* mongoguard's configuration: defaults, the YAML file, then command-line
 * flags, in that order of precedence (last wins). Keys are camelCase like
 * mongod.conf; every key is documented in README.md ("Configuration"). */
#ifndef MG_PROXY_RUNTIME_CONFIG_H
#define MG_PROXY_RUNTIME_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzers/engine/rule_config.h"
#include "proxy/sinks/mongo_sink.h"
#include "proxy/sinks/capture.h"
#include "proxy/net/tls.h"
#include "proxy/sinks/log.h"

/* A replica-set member and the listener that serves it (upstream.members). */
enum { MG_MAX_MEMBERS = 16 };
typedef struct mg_member {
	char host[256];   /* "db1.example:27017", as the set's config (and hello) names it */
	char listen[256]; /* "127.0.0.1:27019": clients reach that member here */
} mg_member;

/* workload: live statistics per query shape and collection
 * (proxy/stats/workload.h); every setting needs a restart. */
typedef struct workload_settings {
	bool enabled;
	uint32_t shapes;              /* entries per worker */
	uint32_t collections;         /* collections per worker; the rest are "other" */
	uint32_t metrics_collections; /* labelled in /metrics; the rest ns="other" */
	uint32_t reply_sample;        /* read one reply body in this many (writes: all) */
} workload_settings;

typedef struct mg_config {
	/* net */
	char listen[256]; /* "HOST:PORT", "[v6]:PORT" */
	uint32_t max_connections;
	uint32_t max_frame_wait_ms; /* a started request must complete within this */
	/* net.proxyProtocol: every connection begins with a PROXY protocol
	 * header (v1 or v2) naming the real client (proxy/net/proxy_proto.h) */
	bool proxy_protocol;
	tls_client_side_config tls; /* net.tls.* */
	/* upstream */
	char upstream_uri[2048];
	uint32_t connect_timeout_ms;
	uint32_t reply_timeout_ms;   /* 0: wait as long as the server takes */
	char credentials_file[1024]; /* the side connection's "username:password" */
	mg_member members[MG_MAX_MEMBERS];
	size_t nmembers;
	char dns_server[64]; /* upstream.dnsServer: "" = the system's resolver */
	uint32_t
	    dns_refresh_secs; /* re-resolve host names (and SRV) this often; 0 = on failure only */
	/* process */
	uint32_t workers; /* 0: one per CPU it may use (cpus.h) */
	uint32_t shutdown_grace_ms;
	/* log */
	char log_path[1024]; /* "-" = stdout */
	int log_verbosity;   /* 0 info, 1 debug */
	log_format log_fmt;  /* log.format: json (the default) or text */
	log_rotate log_rot;  /* log.rotate: what SIGUSR1 does to the file */
	/* log.connections: each connection's accept and end at info (true,
	 * the default) or at debug (false); an end with a warning (bad input,
	 * a lost upstream) is logged either way */
	bool log_connections;
	/* analysis */
	bool analysis_enabled;
	uint32_t index_refresh_secs;
	uint32_t summary_interval_secs;
	engine_config engine;
	/* admin endpoint */
	char admin_listen[256];      /* "" = off */
	char admin_token_file[1024]; /* "" = no token required */
	uint32_t findings_ring;      /* admin.findingsRing: findings /findings keeps */
	/* sinks */
	char instance_name[256]; /* on every sink record; "" = host:port of net.listen */
	mongo_sink_config sink_mongodb;
	/* capture (off while capture.dir is "") */
	capture_settings capture;
	workload_settings workload;
} mg_config;

void config_defaults(mg_config *c);

/* Reads a YAML file over c. Unknown keys and wrong types are errors, with
 * the file's line number in err. */
bool config_load_file(mg_config *c, const char *path, char *err, size_t errlen)
    __attribute__((warn_unused_result));

#endif
