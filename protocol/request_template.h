/* A connection's last decoded command as the template of its next
 * messages (request.h). Drivers send a few request shapes over and over
 * with other values: a find by _id, an update by _id, each with the same
 * lsid and $db. A message of the template's length whose bytes after the
 * header are the template's but in the body's fixed-size values (double,
 * ObjectId, datetime, timestamp, int32, int64 and decimal128 values at any
 * depth: any bytes of such a value are a value, so nothing the decoder
 * checks lies in them) decodes to what the template decoded to, at the
 * same offsets: request_decode_repeat() fills the request from the
 * template's offsets instead of decoding the message again (the framing,
 * the structural check of the body, its keys and their uniqueness, the
 * view).
 *
 * Templates are made of OP_MSG commands whose bytes after the header are 8
 * to 512 (byte_template.h: matched by words), with one kind-0 section and
 * nothing else (no document sequence, no checksum), that are not a
 * handshake, with at most CMDVIEW_TOP_KEYS top-level keys and BYTE_SPANS
 * fixed-size values. A connection keeps one, made on first use (about
 * 1.4 KiB), and replaces it after two messages in a row that did not match
 * it, so a connection that alternates two shapes keeps matching one of
 * them instead of making a template for every message. */
#ifndef MG_PROTOCOL_REQUEST_TEMPLATE_H
#define MG_PROTOCOL_REQUEST_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/byte_template.h"
#include "protocol/request.h"

typedef struct request_template request_template;

/* Where the body (the kind-0 section's document) of a message that matched
 * a template starts: after the header, the flag bits and the kind byte. */
#define REQUEST_TEMPLATE_BODY_AT (WIRE_HEADER_LEN + 4 + 1)

/* Fills r as request_decode(r, msg, len, ...) would, and true, when
 * msg/len matches t (NULL: no template); else false, r untouched. Counts a
 * miss in t. */
bool request_decode_repeat(request *r, const uint8_t *msg, size_t len, request_template *t);

/* The two halves of request_decode_repeat() for a caller that needs no
 * request filled (a pipelined run's next request that its templates judge
 * whole, requests.c): does msg/len match t (changing nothing), and t
 * counting a message it decoded. */
bool request_template_matches(const request_template *t, const uint8_t *msg, size_t len);
void request_template_hit(request_template *t);

/* After request_decode() gave REQUEST_COMMAND for r: makes r the
 * connection's template in *slot (allocating it the first time) when
 * there is none or the last two messages missed it, and r can be one. */
void request_template_keep(request_template **slot, const request *r);

void request_template_free(request_template *t);

/* How many messages t's templates decoded (NULL: 0). */
uint64_t request_template_hits(const request_template *t);

/* How many templates were made in t (NULL: 0): a message that matched t
 * matched the one made of the message decoded when this last moved. */
uint64_t request_template_sets(const request_template *t);

/* Where the bytes of two messages that matched t's template may differ:
 * its spans, as offsets into the body (the kind-0 section's document; a
 * span's bytes all lie in it). NULL when t has none. */
const byte_spans *request_template_body_spans(const request_template *t);

#endif
