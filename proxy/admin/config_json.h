/* The effective configuration as JSON for GET /config, with secrets
 * masked: a password in the upstream URI becomes "****", and token and
 * credential files are shown by path, never by content. */
#ifndef MG_PROXY_ADMIN_CONFIG_JSON_H
#define MG_PROXY_ADMIN_CONFIG_JSON_H

#include "protocol/text.h"
#include "proxy/runtime/config.h"

/* workers_running: the worker threads in force, shown as `workers` (the
 * file's 0 means one per CPU it may use, proxy/runtime/cpus.h; the
 * endpoint says how many that made). */
void config_json(const mg_config *c, unsigned workers_running, text_buf *out);

/* uri with the password of its user info (if any) replaced by "****". */
void config_mask_uri(const char *uri, char *out, size_t size);

#endif
