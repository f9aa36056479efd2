/* The YAML configuration: every documented key, the shipped examples, and
 * errors that name the line. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyzers/rules/rule_lookup.h"
#include "proxy/runtime/config.h"

#ifndef MG_SOURCE_DIR
#define MG_SOURCE_DIR "."
#endif

/* Loads text as a config file over the defaults. */
static bool load(const char *text, mg_config *c, char *err, size_t errlen)
{
	char path[] = "/tmp/mg-test-config-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	config_defaults(c);
	err[0] = 0;
	bool ok = config_load_file(c, path, err, errlen);
	unlink(path);
	return ok;
}

static void test_every_key(void **state)
{
	static mg_config c;
	char err[1024];
	assert_true(load("net:\n"
	                 "  listen: \"[::1]:28000\"\n"
	                 "  maxConnections: 50\n"
	                 "  maxFrameWaitMS: 2500\n"
	                 "upstream:\n"
	                 "  uri: mongodb://db.example:27019/?directConnection=true\n"
	                 "  connectTimeoutMS: 700\n"
	                 "workers: 3\n"
	                 "shutdownGraceMS: 1234\n"
	                 "log: {path: /tmp/x.log, verbosity: 1, connections: false}\n"
	                 "analysis:\n"
	                 "  enabled: false\n"
	                 "  redactLiterals: false\n"
	                 "  indexRefreshSecs: 9\n"
	                 "  indexWaitMS: 250\n"
	                 "  summaryIntervalSecs: 7\n"
	                 "admin: {listen: \"127.0.0.1:9216\", tokenFile: /etc/mg/token}\n",
	                 &c, err, sizeof(err)));
	assert_string_equal(c.listen, "[::1]:28000");
	assert_int_equal(c.max_connections, 50);
	assert_int_equal(c.max_frame_wait_ms, 2500);
	assert_string_equal(c.upstream_uri, "mongodb://db.example:27019/?directConnection=true");
	assert_int_equal(c.connect_timeout_ms, 700);
	assert_int_equal(c.workers, 3);
	assert_int_equal(c.shutdown_grace_ms, 1234);
	assert_string_equal(c.log_path, "/tmp/x.log");
	assert_int_equal(c.log_verbosity, 1);
	assert_false(c.log_connections);
	assert_false(c.analysis_enabled);
	assert_false(c.engine.redact_literals);
	assert_int_equal(c.index_refresh_secs, 9);
	assert_int_equal(c.engine.index_wait_ms, 250);
	assert_int_equal(c.summary_interval_secs, 7);
	assert_string_equal(c.admin_listen, "127.0.0.1:9216");
	assert_string_equal(c.admin_token_file, "/etc/mg/token");
}

static void test_rules_only_file_and_scopes(void **state)
{
	static mg_config c;
	char err[1024];
	assert_true(load("rules:\n"
	                 "  unbounded-push: block\n"
	                 "  index-mismatched-sort: off\n"
	                 "  case-insensitive-regex:\n"
	                 "    action: log\n"
	                 "    scopes:\n"
	                 "      - namespaces: [\"shop.*\", \"crm.users\"]\n"
	                 "        apps: checkout*\n"
	                 "        action: block\n"
	                 "      - apps: [reporting]\n"
	                 "        action: off\n"
	                 "      - apps: [batch]\n"
	                 "        action: block\n"
	                 "        sample: 25\n"
	                 "  hot-path-lookup: {action: block, threshold: 5, windowSeconds: 10}\n"
	                 "  collection-scan: {action: dry-run}\n",
	                 &c, err, sizeof(err)));
	const rule_config *r = c.engine.rules;
	assert_int_equal(r[RULE_UNBOUNDED_PUSH].action, RULE_BLOCK);
	assert_int_equal(r[RULE_INDEX_MISMATCHED_SORT].action, RULE_OFF);
	assert_int_equal(r[RULE_CASE_INSENSITIVE_REGEX].action, RULE_LOG);
	assert_int_equal(r[RULE_CASE_INSENSITIVE_REGEX].nscopes, 3);
	assert_int_equal(r[RULE_CASE_INSENSITIVE_REGEX].scopes[2].sample, 25);
	assert_int_equal(r[RULE_CASE_INSENSITIVE_REGEX].scopes[0].sample, 0); /* unset: all */
	assert_int_equal(r[RULE_COLLECTION_SCAN].action, RULE_DRY_RUN);
	const rule_scope *s = &r[RULE_CASE_INSENSITIVE_REGEX].scopes[0];
	assert_int_equal(s->nnamespaces, 2);
	assert_string_equal(s->namespaces[1], "crm.users");
	assert_int_equal(s->napps, 1);
	assert_string_equal(s->apps[0], "checkout*");
	assert_int_equal(s->action, RULE_BLOCK);
	assert_int_equal(r[RULE_CASE_INSENSITIVE_REGEX].scopes[1].action, RULE_OFF);
	assert_int_equal(r[RULE_HOT_PATH_LOOKUP].action, RULE_BLOCK);
	assert_int_equal(r[RULE_HOT_PATH_LOOKUP].params[LOOKUP_PARAM_THRESHOLD], 5);
	assert_int_equal(r[RULE_HOT_PATH_LOOKUP].params[LOOKUP_PARAM_WINDOW_SECONDS], 10);
	/* everything not in the file keeps its default */
	assert_string_equal(c.listen, "127.0.0.1:27018");
	assert_true(c.engine.redact_literals);
}

static void test_defaults(void **state)
{
	static mg_config c;
	char err[1024];
	assert_true(load("workers: 2\n# a comment after the document\n\n", &c, err, sizeof(err)));
	assert_true(c.log_connections);
}

static void test_empty_file_is_valid(void **state)
{
	static mg_config c;
	char err[1024];
	assert_true(load("", &c, err, sizeof(err)));
	assert_true(load("# only a comment\n", &c, err, sizeof(err)));
}

static void test_errors_name_the_line(void **state)
{
	static const struct {
		const char *yaml;
		const char *expect; /* substring of the error */
	} cases[] = {
	    {"net:\n  lisen: x\n", "line 2: unknown key 'lisen' in net"},
	    {"rules:\n  unbounded-pus: log\n", "unknown rule 'unbounded-pus'"},
	    {"rules:\n  unbounded-push: warn\n", "must be one of off, log, dry-run, block"},
	    {"rules:\n  unbounded-push: {action: block, sample: 101}\n",
	     "line 2: rule sample must be a whole number from 1 to 100"},
	    {"rules:\n  unbounded-push:\n    scopes:\n      - {action: block, sample: 0}\n",
	     "scope sample must be a whole number from 1 to 100"},
	    {"workers: many\n", "workers must be a whole number"},
	    {"workers: -1\n", "workers must be a whole number"},
	    {"net:\n  maxConnections: 0\n", "net.maxConnections must be a whole number from 1"},
	    {"analysis:\n  redactLiterals: maybe\n", "must be true or false"},
	    {"rules:\n  case-insensitive-regex:\n    scopes:\n      - apps: [a]\n",
	     "a rule scope needs an action"},
	    {"rules:\n  unbounded-push: {threshold: 3}\n",
	     "unknown key 'threshold' in rule unbounded-push"},
	    {"net: [1, 2]\n", "net must be a mapping"},
	    {"net:\n  listen: [a\n", "line"},
	    {"- a\n- b\n", "the file must be a mapping"},
	    {"log: {connections: sometimes}\n", "must be true or false"},
	    /* what follows the first document is never dropped in silence */
	    {"{\"rules\": {\"unbounded-push\": \"log\"}}\nlog: {connections: false}\n",
	     "line 2: did not find expected <document start> (after the first YAML document)"},
	    {"workers: 2\n---\nworkers: 3\n", "line 2: a second YAML document"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		static mg_config c;
		char err[1024];
		if (load(cases[i].yaml, &c, err, sizeof(err)))
			fail_msg("accepted: %s", cases[i].yaml);
		if (!strstr(err, cases[i].expect))
			fail_msg("error for %s is '%s', expected '%s'", cases[i].yaml, err,
			         cases[i].expect);
	}
}

/* The connectivity keys: net.tls.*, upstream.members, credentialsFile. */
static void test_topology_tls_keys(void **state)
{
	static mg_config c;
	char err[1024];
	assert_true(load("net:\n  tls:\n    mode: preferTLS\n    certificateKeyFile: /a.pem\n"
	                 "    CAFile: /ca.pem\n    allowConnectionsWithoutCertificates: true\n"
	                 "    disabledProtocols: TLS1_2\n    ciphers: HIGH\n"
	                 "upstream:\n  credentialsFile: /run/side\n  members:\n"
	                 "    - {host: \"db2:27017\", listen: \"127.0.0.1:27019\"}\n"
	                 "    - {host: \"db3:27017\", listen: \"127.0.0.1:27020\"}\n",
	                 &c, err, sizeof(err)));
	assert_int_equal(c.tls.mode, TLS_MODE_PREFER);
	assert_string_equal(c.tls.certificate_key_file, "/a.pem");
	assert_string_equal(c.tls.ca_file, "/ca.pem");
	assert_true(c.tls.allow_without_certificates);
	assert_string_equal(c.tls.disabled_protocols, "TLS1_2");
	assert_string_equal(c.tls.ciphers, "HIGH");
	assert_string_equal(c.credentials_file, "/run/side");
	assert_int_equal(c.nmembers, 2);
	assert_string_equal(c.members[1].host, "db3:27017");
	assert_string_equal(c.members[1].listen, "127.0.0.1:27020");

	static const struct {
		const char *yaml, *expect;
	} bad[] = {
	    {"net:\n  tls:\n    mode: on\n", "net.tls.mode must be one of disabled"},
	    {"net:\n  tls:\n    CAfile: x\n", "unknown key 'CAfile' in net.tls"},
	    {"upstream:\n  members: {host: a}\n", "must be a list"},
	    {"upstream:\n  members:\n    - {host: \"a:1\"}\n", "needs both host and listen"},
	    {"upstream:\n  members:\n    - {host: \"a:1\", listen: \":2\"}\n"
	     "    - {host: \"a:1\", listen: \":3\"}\n",
	     "line 4: upstream.members repeats a:1"},
	    {"upstream:\n  members:\n    - {host: \"a:1\", listen: \":2\", port: 3}\n",
	     "unknown key 'port' in upstream.members"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (load(bad[i].yaml, &c, err, sizeof(err)))
			fail_msg("accepted: %s", bad[i].yaml);
		if (!strstr(err, bad[i].expect))
			fail_msg("error for %s is '%s', expected '%s'", bad[i].yaml, err,
			         bad[i].expect);
	}
}

/* upstream.dnsServer and upstream.dnsRefreshSecs (mongodb+srv:// and
 * re-resolution). */
static void test_dns_keys(void **state)
{
	static mg_config c;
	char err[1024];
	config_defaults(&c);
	assert_string_equal(c.dns_server, "");
	assert_int_equal(c.dns_refresh_secs, 60);
	assert_true(load("upstream:\n  uri: mongodb+srv://rs.example.com/\n"
	                 "  dnsServer: \"127.0.0.1:5353\"\n  dnsRefreshSecs: 0\n",
	                 &c, err, sizeof(err)));
	assert_string_equal(c.upstream_uri, "mongodb+srv://rs.example.com/");
	assert_string_equal(c.dns_server, "127.0.0.1:5353");
	assert_int_equal(c.dns_refresh_secs, 0);
	assert_false(load("upstream:\n  dnsServer: ns.example.com\n", &c, err, sizeof(err)));
	assert_non_null(strstr(err, "line 2"));
	assert_non_null(strstr(err, "must be an IPv4 address"));
	assert_false(load("upstream:\n  dnsRefreshSecs: 100000\n", &c, err, sizeof(err)));
	assert_non_null(strstr(err, "upstream.dnsRefreshSecs"));
}

/* capture.valueHashes: true unless set (salted value hashes kept, as
 * since format version 5); true or false; anything else refused by name. */
static void test_capture_value_hashes(void **state)
{
	static mg_config c;
	char err[1024];
	assert_true(load("capture:\n  dir: /tmp/cap\n", &c, err, sizeof(err)));
	assert_true(c.capture.value_hashes);
	assert_true(load("capture:\n  dir: /tmp/cap\n  redactLiterals: false\n"
	                 "  valueHashes: false\n",
	                 &c, err, sizeof(err)));
	assert_string_equal(c.capture.dir, "/tmp/cap");
	assert_false(c.capture.redact_literals);
	assert_false(c.capture.value_hashes);
	assert_true(c.engine.redact_literals); /* the log's redaction is another key */
	assert_true(load("capture: {valueHashes: true}\n", &c, err, sizeof(err)));
	assert_true(c.capture.value_hashes);
	assert_false(load("capture:\n  valueHashes: sometimes\n", &c, err, sizeof(err)));
	assert_non_null(strstr(err, "line 2: capture.valueHashes must be true or false"));
	assert_false(load("capture:\n  valueHashes: [false]\n", &c, err, sizeof(err)));
	assert_non_null(strstr(err, "capture.valueHashes must be true or false"));
	assert_false(load("capture:\n  valueHash: false\n", &c, err, sizeof(err)));
	assert_non_null(strstr(err, "unknown key 'valueHash' in capture"));
}

static void test_shipped_configs_load(void **state)
{
	static const char *files[] = {"configs/staging.yaml", "configs/production.yaml",
	                              "configs/capture.yaml"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		static mg_config c;
		char path[1024], err[1024];
		snprintf(path, sizeof(path), "%s/%s", MG_SOURCE_DIR, files[i]);
		config_defaults(&c);
		if (!config_load_file(&c, path, err, sizeof(err)))
			fail_msg("%s: %s", path, err);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_key),
	    cmocka_unit_test(test_rules_only_file_and_scopes),
	    cmocka_unit_test(test_empty_file_is_valid),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_errors_name_the_line),
	    cmocka_unit_test(test_capture_value_hashes),
	    cmocka_unit_test(test_shipped_configs_load),
	    cmocka_unit_test(test_topology_tls_keys),
	    cmocka_unit_test(test_dns_keys),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
