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

/* libbson's bson_validate() recurses once per nesting level with no limit,
 * so a body nested a few hundred thousand deep (a few MB on the wire)
 * overflows the stack, and so would every analyzer that walks it. mongod
 * refuses nesting beyond 200 (BSONDepth::kDefaultMaxAllowableDepth); this
 * walk refuses beyond WIRE_MAX_BSON_DEPTH, which is looser so nothing mongod
 * accepts is refused, and itself uses an explicit stack. It visits what
 * bson_validate visits (arrays, documents, code-with-scope scopes) in the
 * same order, and leaves corrupt elements to bson_validate to report. */
#define WIRE_MAX_BSON_DEPTH 256

/* bson_iter_t is over-aligned, so an array of them needs a wrapper. */
typedef struct level {
	bson_iter_t it;
} level;

static bool depth_ok(const uint8_t *p, size_t len)
{
	level stack[WIRE_MAX_BSON_DEPTH + 1];
	int top = 0;
	if (!bson_iter_init_from_data(&stack[0].it, p, len))
		return true;
	for (;;) {
		bson_iter_t *it = &stack[top].it;
		if (!bson_iter_next(it)) {
			if (top == 0)
				return true;
			top--;
			continue;
		}
		bson_type_t t = bson_iter_type(it);
		if (t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_ARRAY && t != BSON_TYPE_CODEWSCOPE)
			continue;
		if (top == WIRE_MAX_BSON_DEPTH)
			return false;
		bool entered;
		if (t == BSON_TYPE_CODEWSCOPE) {
			uint32_t code_len, scope_len;
			const uint8_t *scope;
			bson_iter_codewscope(it, &code_len, &scope_len, &scope);
			entered = bson_iter_init_from_data(&stack[top + 1].it, scope, scope_len);
		} else {
			entered = bson_iter_recurse(it, &stack[top + 1].it);
		}
		if (entered)
			top++;
	}
}

bool wire_doc_validate(const uint8_t *p, size_t len, wire_error *err, const char *what, ...)
{
	bson_t b;
	size_t offset = 0;
	bool deep = !depth_ok(p, len);
	if (!deep && bson_init_static(&b, p, len) && bson_validate(&b, BSON_VALIDATE_NONE, &offset))
		return true;

	char name[96];
	va_list ap;
	va_start(ap, what);
	vsnprintf(name, sizeof(name), what, ap);
	va_end(ap);
	if (deep)
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s is nested deeper than %d levels", name, WIRE_MAX_BSON_DEPTH);
	else
		wire_error_set(err, WIRE_ERR_INVALID_BSON, "InvalidBSON",
		               "%s is not valid BSON: corrupt element at byte %zu of %zu", name,
		               offset, len);
	return false;
}
