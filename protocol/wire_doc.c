#include "protocol/wire_doc.h"

#include <bson/bson.h>

#include "protocol/frame.h"

bool wire_doc_frame(const uint8_t *p, size_t avail, size_t *doc_len, wire_error *err,
                    const char *what, ...)
{
	int32_t len = avail >= 4 ? wire_read_i32(p) : 0;
	if (avail >= 4 && len >= 5 && (size_t)len <= avail && p[len - 1] == 0) {
		*doc_len = (size_t)len;
		return true;
	}

	char name[96];
	va_list ap;
	va_start(ap, what);
	vsnprintf(name, sizeof(name), what, ap);
	va_end(ap);
	if (avail < 4)
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s is truncated: %zu bytes left, fewer than its 4-byte length",
		               name, avail);
	else if (len < 5)
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s has length %d, below the minimum of 5", name, len);
	else if ((size_t)len > avail)
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s claims %d bytes but only %zu are left", name, len, avail);
	else
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s of %d bytes does not end with a 0x00 terminator", name, len);
	return false;
}

bool wire_doc_validate(const uint8_t *p, size_t len, wire_error *err, const char *what, ...)
{
	bson_t b;
	size_t offset = 0;
	if (bson_init_static(&b, p, len) && bson_validate(&b, BSON_VALIDATE_NONE, &offset))
		return true;

	char name[96];
	va_list ap;
	va_start(ap, what);
	vsnprintf(name, sizeof(name), what, ap);
	va_end(ap);
	wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
	               "%s is not valid BSON: corrupt element at byte %zu of %zu", name, offset,
	               len);
	return false;
}
