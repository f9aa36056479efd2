/* Checks shared by every decoder that meets a BSON document on the wire.
 *
 * wire_doc_frame() is the cheap check: the length prefix is sane, the
 * document fits in what is left, and its last byte is the 0x00 terminator.
 * wire_doc_validate() walks every element (nested ones included) the way
 * libbson's iterator would, so a document that passes can be iterated
 * without surprises. `what` is a printf format naming the document in the
 * error message ("OP_MSG body", "document 3 of OP_MSG sequence 'updates'");
 * it is only formatted on failure. */
#ifndef MG_PROTOCOL_WIRE_DOC_H
#define MG_PROTOCOL_WIRE_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/wire_error.h"

/* On success *doc_len is the document's length (<= avail). */
bool wire_doc_frame(const uint8_t *p, size_t avail, size_t *doc_len, wire_error *err,
                    const char *what, ...) __attribute__((format(printf, 5, 6)))
__attribute__((warn_unused_result));

/* p/len must already have passed wire_doc_frame(). */
bool wire_doc_validate(const uint8_t *p, size_t len, wire_error *err, const char *what, ...)
    __attribute__((format(printf, 4, 5))) __attribute__((warn_unused_result));

#endif
