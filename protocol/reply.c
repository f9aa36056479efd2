/* Error replies mongoguard writes itself, shaped like mongod's own:
 * {ok: 0.0, errmsg, code, codeName, ...}. */
#include "protocol/reply.h"

#include <string.h>

#include "protocol/opmsg.h"
#include "protocol/opquery.h"

/* The four fields every error reply has; `extra` cannot override them, so a
 * caller's detail never turns a refusal into something that reads as ok. */
static bool is_reserved(const char *key)
{
	return strcmp(key, "ok") == 0 || strcmp(key, "errmsg") == 0 || strcmp(key, "code") == 0 ||
	       strcmp(key, "codeName") == 0;
}

uint8_t *reply_error(reply_form form, int32_t request_id, int32_t response_to, int code,
                     const char *code_name, const char *errmsg, const bson_t *extra, size_t *len)
{
	bson_t doc;
	bson_init(&doc);
	bool ok = BSON_APPEND_DOUBLE(&doc, "ok", 0.0) &&
	          BSON_APPEND_UTF8(&doc, "errmsg", errmsg ? errmsg : "") &&
	          BSON_APPEND_INT32(&doc, "code", code) &&
	          BSON_APPEND_UTF8(&doc, "codeName", code_name ? code_name : "");
	bson_iter_t it;
	if (ok && extra && bson_iter_init(&it, extra))
		while (ok && bson_iter_next(&it))
			if (!is_reserved(bson_iter_key(&it)))
				ok = bson_append_iter(&doc, NULL, 0, &it);

	uint8_t *out = NULL;
	if (ok) {
		if (form == REPLY_FORM_OPREPLY)
			out = opreply_build(request_id, response_to, 0, bson_get_data(&doc),
			                    doc.len, len);
		else
			out = opmsg_build(request_id, response_to, 0, bson_get_data(&doc), doc.len,
			                  len);
	}
	bson_destroy(&doc);
	return out;
}
