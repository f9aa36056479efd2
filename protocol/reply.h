/* Replies mongoguard writes itself: errors for blocked or malformed
 * requests. The reply is addressed to the request (responseTo = its
 * requestID) and takes the request's form: OP_MSG for OP_MSG (and for an
 * OP_COMPRESSED OP_MSG), OP_REPLY for OP_QUERY. */
#ifndef MG_PROTOCOL_REPLY_H
#define MG_PROTOCOL_REPLY_H

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
	REPLY_FORM_OPMSG,
	REPLY_FORM_OPREPLY,
} reply_form;

/* Builds {ok: 0, errmsg, code, codeName} plus the fields of `extra` (may be
 * NULL), framed as `form`. Returns a malloc'd whole message; caller frees. */
uint8_t *reply_error(reply_form form, int32_t request_id, int32_t response_to, int code,
                     const char *code_name, const char *errmsg, const bson_t *extra, size_t *len);

#endif
