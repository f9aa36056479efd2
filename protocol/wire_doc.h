/* Checks shared by every decoder that meets a BSON document on the wire.
 *
 * wire_doc_frame() is the cheap check: the length prefix is sane, the
 * document fits in what is left, and its last byte is the 0x00 terminator.
 *
 * wire_doc_validate() is the structural check, one pass with an explicit
 * stack, no allocation, no recursion. A document that passes can be walked
 * with every bson_iter_* call (bson_iter_recurse included, into documents,
 * arrays and code-with-scope scopes) without an out-of-bounds read and
 * without bson_iter_next stopping early on a corrupt element, which an
 * analyzer would mistake for the end of the document. It checks exactly
 * what libbson's bson_iter_next checks (the reader every analyzer uses),
 * plus what libbson only checks when a bson_t is made of a nested document
 * (length at least 5, own 0x00 terminator), plus the NUL ending a
 * code-with-scope's code string, plus nesting: more than
 * WIRE_MAX_BSON_DEPTH levels below the top document is refused. Every
 * element type is known, deprecated ones included (undefined, DBPointer,
 * symbol, code with scope, min/max key, decimal128); anything else is
 * refused.
 *
 * UTF-8 is not validated, on purpose. mongod's own validateBSON checks
 * structure only in its default mode (the one OP_MSG parsing uses, with
 * net.wireObjectCheck on); UTF-8 is checked only by the full mode of the
 * validate command, so a command carrying invalid UTF-8 reaches mongod's
 * command code anyway, and refusing it here would make mongoguard stricter
 * than the server it fronts. Nothing mongoguard does with a string needs
 * it to be UTF-8: the analyzers compare keys and values as bytes, and the
 * log writer escapes any byte into valid JSON (proxy/sinks/log.c).
 * libbson's bson_validate(BSON_VALIDATE_NONE) checks the UTF-8 of every
 * key (not of string values) byte by byte, which on a large insert is
 * most of the work. If something ever needs valid UTF-8, it should
 * validate the one string it reads, not every document.
 *
 * `what` is a printf format naming the document in the error message
 * ("OP_MSG body", "document 3 of OP_MSG sequence 'updates'"); it is only
 * formatted on failure. */
#ifndef MG_PROTOCOL_WIRE_DOC_H
#define MG_PROTOCOL_WIRE_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/frame.h"
#include "protocol/byte_template.h"
#include "protocol/wire_error.h"

/* mongod refuses nesting beyond 200 (BSONDepth::kDefaultMaxAllowableDepth);
 * this is looser, so nothing mongod accepts is refused, and bounds the
 * recursion of anything that walks a document that passed. */
#define WIRE_MAX_BSON_DEPTH 256

/* The check itself, inline: a batch's every statement is framed here. */
static inline bool wire_doc_fits(const uint8_t *p, size_t avail, size_t *doc_len)
{
	if (avail < 5)
		return false;
	uint32_t len = wire_read_u32(p);
	if (len < 5 || len > avail || p[len - 1] != 0)
		return false;
	*doc_len = len;
	return true;
}

/* Says why p does not frame (err; `what` names the document). */
void wire_doc_frame_fail(const uint8_t *p, size_t avail, wire_error *err, const char *what, ...)
    __attribute__((format(printf, 4, 5)));

/* On success *doc_len is the document's length (<= avail); else err says
 * why. The message is formatted only then: a variadic call per document
 * would cost more than framing it. p and avail are evaluated twice. */
#define wire_doc_frame(p, avail, doc_len, err, ...)                                                \
	(wire_doc_fits((p), (avail), (doc_len)) ||                                                 \
	 (wire_doc_frame_fail((p), (avail), (err), __VA_ARGS__), false))

/* p/len must already have passed wire_doc_frame(). The error names the
 * byte offset of the offending element ("corrupt element at byte N of M"). */
bool wire_doc_validate(const uint8_t *p, size_t len, wire_error *err, const char *what, ...)
    __attribute__((format(printf, 4, 5))) __attribute__((warn_unused_result));

/* The top-level keys of a document that passed wire_doc_validate(), in
 * order, without checking anything again: keys[i] points at the i-th key
 * (NUL-terminated, in p), lens[i] is its length, for the first `cap` keys.
 * Returns how many keys the document has, which may exceed cap (call again
 * with room for all). A bare pass over element sizes: about a third of what
 * bson_iter_next costs per element, which re-checks each one. */
size_t wire_doc_keys(const uint8_t *p, size_t len, const char **keys, uint32_t *lens, size_t cap);

/* The first top-level element of a document that passed wire_doc_validate()
 * whose key is the keylen bytes of key: a pointer at its type byte (the key
 * follows it, then the value), or NULL. The same bare pass. */
const uint8_t *wire_doc_find(const uint8_t *p, size_t len, const char *key, size_t keylen);

/* The values of a validated document whose every byte pattern is a value
 * (double, ObjectId, datetime, timestamp, int32, int64, decimal128), at
 * any depth, added to sp as spans (sp->base: where its offsets count
 * from). False, and sp->full, when sp had no room for them all. */
bool wire_doc_fixed_spans(const uint8_t *p, size_t len, byte_spans *sp);

#endif
