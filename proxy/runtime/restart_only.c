/* The restart-only settings (see restart_only.h). */
#include "proxy/runtime/restart_only.h"

#include <string.h>

/* One setting: where it lives in mg_config. Text compares as a string
 * (bytes after its NUL do not count) and is kept as its whole buffer;
 * anything else compares and is kept as bytes. A setting held in two
 * fields (a list and its length) names the second one too. */
typedef enum { RK_TEXT, RK_BYTES } restart_kind;

typedef struct restart_key {
	const char *key;
	restart_kind kind;
	size_t off, size;
	size_t off2, size2; /* size2 0: no second field */
} restart_key;

#define FIELD(m)  .off = offsetof(mg_config, m), .size = sizeof(((mg_config *)0)->m)
#define FIELD2(m) .off2 = offsetof(mg_config, m), .size2 = sizeof(((mg_config *)0)->m)

static const restart_key keys[] = {
    {.key = "net.listen", .kind = RK_TEXT, FIELD(listen)},
    {.key = "net.maxConnections", .kind = RK_BYTES, FIELD(max_connections)},
    {.key = "upstream.uri", .kind = RK_TEXT, FIELD(upstream_uri)},
    {.key = "upstream.dnsServer", .kind = RK_TEXT, FIELD(dns_server)},
    {.key = "upstream.dnsRefreshSecs", .kind = RK_BYTES, FIELD(dns_refresh_secs)},
    {.key = "workers", .kind = RK_BYTES, FIELD(workers)},
    {.key = "shutdownGraceMS", .kind = RK_BYTES, FIELD(shutdown_grace_ms)},
    {.key = "log.path", .kind = RK_TEXT, FIELD(log_path)},
    {.key = "analysis.enabled", .kind = RK_BYTES, FIELD(analysis_enabled)},
    {.key = "analysis.indexRefreshSecs", .kind = RK_BYTES, FIELD(index_refresh_secs)},
    {.key = "analysis.summaryIntervalSecs", .kind = RK_BYTES, FIELD(summary_interval_secs)},
    {.key = "admin.listen", .kind = RK_TEXT, FIELD(admin_listen)},
    {.key = "admin.tokenFile", .kind = RK_TEXT, FIELD(admin_token_file)},
    {.key = "instanceName", .kind = RK_TEXT, FIELD(instance_name)},
    {.key = "sinks.mongodb", .kind = RK_BYTES, FIELD(sink_mongodb)},
    {.key = "capture", .kind = RK_BYTES, FIELD(capture)},
    {.key = "upstream.members", .kind = RK_BYTES, FIELD(members), FIELD2(nmembers)},
    {.key = "upstream.credentialsFile", .kind = RK_TEXT, FIELD(credentials_file)},
    {.key = "admin.findingsRing", .kind = RK_BYTES, FIELD(findings_ring)},
    {.key = "workload", .kind = RK_BYTES, FIELD(workload)},
};

size_t restart_only_count(void)
{
	return sizeof(keys) / sizeof(keys[0]);
}

const char *restart_only_key(size_t i)
{
	return keys[i].key;
}

bool restart_only_changed(size_t i, const mg_config *was, const mg_config *now)
{
	const restart_key *k = &keys[i];
	const char *a = (const char *)was, *b = (const char *)now;
	if (k->kind == RK_TEXT)
		return strcmp(a + k->off, b + k->off) != 0;
	return memcmp(a + k->off, b + k->off, k->size) != 0 ||
	       (k->size2 && memcmp(a + k->off2, b + k->off2, k->size2) != 0);
}

void restart_only_keep(mg_config *next, const mg_config *running)
{
	char *to = (char *)next;
	const char *from = (const char *)running;
	for (size_t i = 0; i < restart_only_count(); i++) {
		const restart_key *k = &keys[i];
		memcpy(to + k->off, from + k->off, k->size);
		if (k->size2)
			memcpy(to + k->off2, from + k->off2, k->size2);
	}
}
