/* mongoguard: command line, configuration, start-up. */
#include <errno.h>
#include <getopt.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/value_filter.h"
#include "proxy/admin/top.h"
#include "proxy/sinks/logview.h"
#include "report/report.h"
#include "proxy/runtime/check.h"
#include "proxy/runtime/config.h"
#include "proxy/sinks/log.h"
#include "proxy/runtime/server.h"

#ifndef MG_VERSION
#define MG_VERSION "0.0.0"
#endif

/* libmongoc (the index cache's side connection) logs to stderr by default;
 * its lines join ours instead, at a level that keeps its chatter (e.g. a
 * server without endSessions) out of the info log. */
static void mongoc_log_cb(mongoc_log_level_t level, const char *domain, const char *message,
                          void *arg)
{
	log_severity s = level <= MONGOC_LOG_LEVEL_ERROR ? LOG_WARNING : LOG_DEBUG;
	if (level > MONGOC_LOG_LEVEL_MESSAGE || !log_enabled(s))
		return;
	log_line *l =
	    log_begin(s, "ANALYZER", LOGID_METADATA_CLIENT, NULL, "Index metadata client");
	log_attr_str(l, "domain", domain);
	log_attr_str(l, "message", message);
	log_end(l);
}

static void usage(FILE *out)
{
	fputs("Usage: mongoguard [OPTIONS]                       serve (the default)\n"
	      "       mongoguard report CAPTURE... [OPTIONS]     the offline report over capture\n"
	      "                                                  files (report --help)\n"
	      "       mongoguard log FILE... [--rule R] [--ns NS] [--app A] [--follow]\n"
	      "                                                  a JSON log as text (log --help)\n"
	      "       mongoguard top [--admin HOST:PORT] [--once] the live workload of a running\n"
	      "                                                  mongoguard (top --help)\n"
	      "       mongoguard --check-config [OPTIONS]        validate, try the listen\n"
	      "                                                  addresses and the upstream\n"
	      "\n"
	      "A MongoDB wire-protocol proxy that analyses every request for query and\n"
	      "schema anti-patterns, logging them or blocking them before they reach the\n"
	      "database.\n"
	      "\n"
	      "Options (flags override the configuration file):\n"
	      "  -c, --config FILE      YAML configuration file (see configs/ and README.md)\n"
	      "  -l, --listen HOST:PORT address to accept clients on (default 127.0.0.1:27018)\n"
	      "  -u, --upstream URI     the real server, any mongodb:// URI\n"
	      "                         (default mongodb://127.0.0.1:27017/)\n"
	      "  -L, --log PATH         log file, '-' for stdout (default -)\n"
	      "      --log-format F     json (JSON lines, the default) or text (for people;\n"
	      "                         coloured on a terminal) (log.format)\n"
	      "  -w, --workers N        worker threads, 0 = one per CPU it may use (default 0)\n"
	      "      --capture DIR      record traffic into capture files in DIR (capture.dir)\n"
	      "  -v, --verbose          debug logging (log.verbosity: 1)\n"
	      "      --check-config     validate the configuration, try binding each listen\n"
	      "                         address and ping the upstream (warnings), and exit:\n"
	      "                         0 when the configuration is valid, 2 when not\n"
	      "  -h, --help             this help\n"
	      "  -V, --version          print the version\n"
	      "\n"
	      "Rules (set each under `rules:` to an action, or to a mapping with `action:`\n"
	      "and the rule's parameters). Actions: off; log (forward, log the finding);\n"
	      "dry-run (forward, log it as \"would have been blocked\"); block (answer the\n"
	      "client with an error naming the rule; the request never reaches the server):\n",
	      out);
	for (int r = 0; r < RULE_COUNT; r++) {
		const rule_def *d = rule_table[r];
		fprintf(out, "  %-24s %s\n", d->name, d->summary);
		for (size_t i = 0; i < d->nparams; i++)
			fprintf(out, "    %-22s %s (default %u, %u..%u)\n", d->params[i].name,
			        d->params[i].summary, d->params[i].def, d->params[i].min,
			        d->params[i].max);
	}
	fputs("Signals: SIGTERM/SIGINT stop accepting, let in-flight requests finish\n"
	      "(shutdownGraceMS), then exit 0. SIGHUP re-reads the configuration file\n"
	      "(rules, scopes, parameters, redaction, log verbosity and format, timeouts); a\n"
	      "file that does not load is refused and the running configuration stays.\n"
	      "SIGUSR1 reopens the log file (log.rotate: reopen, or rename it to\n"
	      "FILE.YYYY-MM-DDTHH-MM-SS first) and starts a new capture file.\n",
	      out);
}

/* What the command line says; NULL / -1 / false where it says nothing. */
typedef struct cli {
	const char *config_path, *listen, *upstream, *logp, *capture;
	int log_format; /* -1: as the file says */
	long workers;
	bool verbose, check_only;
} cli;

/* Returns -1 to go on, else the exit status (after --help, --version or a
 * bad flag). */
static int parse_cli(int argc, char **argv, cli *o)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},     {"listen", required_argument, NULL, 'l'},
	    {"upstream", required_argument, NULL, 'u'},   {"log", required_argument, NULL, 'L'},
	    {"workers", required_argument, NULL, 'w'},    {"verbose", no_argument, NULL, 'v'},
	    {"check-config", no_argument, NULL, 'C'},     {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},          {"capture", required_argument, NULL, 'K'},
	    {"log-format", required_argument, NULL, 'F'}, {NULL, 0, NULL, 0},
	};
	*o = (cli){.workers = -1, .log_format = -1};
	char why[600];
	int c;
	while ((c = getopt_long(argc, argv, "c:l:u:L:w:vhV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->config_path = optarg;
			break;
		case 'l':
			if (!check_listen_spec(optarg, "--listen", why, sizeof(why))) {
				fprintf(stderr, "mongoguard: %s\n", why);
				return 2;
			}
			o->listen = optarg;
			break;
		case 'F':
			o->log_format = log_format_from_name(optarg);
			if (o->log_format < 0) {
				fprintf(stderr, "mongoguard: --log-format takes json or text\n");
				return 2;
			}
			break;
		case 'u':
			o->upstream = optarg;
			break;
		case 'L':
			o->logp = optarg;
			break;
		case 'w': {
			char *end;
			o->workers = strtol(optarg, &end, 10);
			if (*end || o->workers < 0 || o->workers > 256) {
				fprintf(stderr,
				        "mongoguard: --workers takes a number from 0 to 256\n");
				return 2;
			}
			break;
		}
		case 'v':
			o->verbose = true;
			break;
		case 'C':
			o->check_only = true;
			break;
		case 'K':
			o->capture = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("mongoguard %s\n", MG_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "mongoguard: unexpected argument '%s' (see --help)\n",
		        argv[optind]);
		return 2;
	}
	return -1;
}

/* Defaults, then the file, then the flags: at start and on every reload. */
static bool load_config(void *arg, mg_config *cfg, char *err, size_t errlen)
{
	const cli *o = arg;
	config_defaults(cfg);
	if (o->config_path && !config_load_file(cfg, o->config_path, err, errlen))
		return false;
#define SET(field, value) snprintf(cfg->field, sizeof(cfg->field), "%s", value)
	if (o->listen)
		SET(listen, o->listen);
	if (o->upstream)
		SET(upstream_uri, o->upstream);
	if (o->logp)
		SET(log_path, o->logp);
	if (o->capture)
		SET(capture.dir, o->capture);
#undef SET
	if (o->workers >= 0)
		cfg->workers = (uint32_t)o->workers;
	if (o->verbose)
		cfg->log_verbosity = 1;
	if (o->log_format >= 0)
		cfg->log_fmt = (log_format)o->log_format;
	return true;
}

static void log_startup(const mg_config *cfg, const char *config_path)
{
	log_line *l = log_begin(LOG_INFO, "CONTROL", LOGID_STARTUP, NULL, "mongoguard starting");
	log_attr_str(l, "version", MG_VERSION);
	log_attr_str(l, "config", config_path ? config_path : "");
	for (int r = 0; r < RULE_COUNT; r++)
		log_attr_str(l, rule_name((rule_id)r),
		             rule_action_name(cfg->engine.rules[r].action));
	log_attr_bool(l, "redactLiterals", cfg->engine.redact_literals);
	log_end(l);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "log") == 0)
		return logview_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "top") == 0)
		return top_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "report") == 0) {
		mongoc_init(); /* --indexes-from */
		int rs = report_main(argc - 1, argv + 1);
		mongoc_cleanup();
		return rs;
	}
	static cli o; /* the reload reads it again */
	int status = parse_cli(argc, argv, &o);
	if (status >= 0)
		return status;
	static mg_config cfg; /* large (it holds rule tables): keep it off the stack */
	char err[1024];
	if (!load_config(&o, &cfg, err, sizeof(err))) {
		fprintf(stderr, "mongoguard: %s\n", err);
		return 2;
	}
	mongoc_init();
	mongoc_log_set_handler(mongoc_log_cb, NULL);
	static server_plan plan;
	if (!server_plan_make(&plan, &cfg, err, sizeof(err))) {
		fprintf(stderr, "mongoguard: %s\n", err);
		return 2;
	}
	plan.version = MG_VERSION;
	plan.config_path = o.config_path;
	plan.load = load_config;
	plan.load_arg = &o;
	if (o.check_only) {
		printf("mongoguard: configuration OK (listen %s, upstream %s)\n", cfg.listen,
		       plan.listeners[0].up.name);
		(void)check_live(&plan,
		                 stdout); /* warnings: a proxy may start before its database */
		mongoc_cleanup();
		return 0;
	}
	if (!log_open(cfg.log_path, cfg.log_verbosity ? LOG_DEBUG : LOG_INFO)) {
		fprintf(stderr, "mongoguard: cannot open log %s: %s\n", cfg.log_path,
		        strerror(errno));
		return 2;
	}
	log_set_format(cfg.log_fmt);
	log_startup(&cfg, o.config_path);
	value_hash_salt_init(); /* the secret of every value hash (value_filter.h) */
	bool ok = server_run(&plan, err, sizeof(err));
	if (!ok) {
		log_reason(LOG_ERROR, "CONTROL", LOGID_FATAL, NULL, "Cannot start: %s", err);
		fprintf(stderr, "mongoguard: %s\n", err);
	}
	mongoc_cleanup();
	log_close();
	return ok ? 0 : 1;
}
