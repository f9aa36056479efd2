/* Why a decode failed, in words a log line and an error reply can carry.
 * Codes are MongoDB's own where one fits, so an error reply built from a
 * wire_error reads like the one mongod would send. */
#ifndef MG_PROTOCOL_WIRE_ERROR_H
#define MG_PROTOCOL_WIRE_ERROR_H

#include <stdarg.h>
#include <stdio.h>

enum {
	WIRE_ERR_PROTOCOL = 17,             /* ProtocolError */
	WIRE_ERR_INVALID_BSON = 22,         /* InvalidBSON */
	WIRE_ERR_BAD_VALUE = 2,             /* BadValue */
	WIRE_ERR_CHECKSUM = 40422,          /* mongod's code for a bad OP_MSG checksum */
	WIRE_ERR_UNSUPPORTED_OPQUERY = 352, /* UnsupportedOpQueryCommand */
};

typedef struct wire_error {
	int code;
	const char *code_name;
	char msg[256];
} wire_error;

__attribute__((format(printf, 4, 5))) static inline void
wire_error_set(wire_error *err, int code, const char *code_name, const char *fmt, ...)
{
	if (!err)
		return;
	err->code = code;
	err->code_name = code_name;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

#endif
