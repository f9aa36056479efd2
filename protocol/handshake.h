/* The connection handshake (hello / isMaster): what mongoguard reads from it
 * and the one change it makes to it.
 *
 * Compression: mongoguard removes `compression` from the client's hello
 * before forwarding, so neither side negotiates a compressor and every
 * message after the handshake arrives as plain OP_MSG that analysis can read
 * without inflating it, and replies can be framed without inflating them
 * either. A client that sends OP_COMPRESSED anyway is still handled: the
 * proxy inflates a copy for analysis and forwards the original bytes. */
#ifndef MG_PROTOCOL_HANDSHAKE_H
#define MG_PROTOCOL_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/cmdview.h"

/* Copies client.application.name into buf (NUL-terminated, truncated to
 * size). Returns false, leaving buf empty, when the hello has none. */
bool handshake_app_name(const cmdview *v, char *buf, size_t size);

/* True when the hello's body has a top-level `compression` field. */
bool handshake_has_compression(const cmdview *v);

/* When the hello in msg (described by v) carries `compression`, returns a
 * malloc'd copy of the whole message without that field (an OP_MSG loses its
 * checksum flag and checksum, since its bytes changed), else NULL. NULL also
 * comes back when msg cannot be rebuilt (it does not parse, or memory ran
 * out); handshake_has_compression() tells the two apart. */
uint8_t *handshake_strip_compression(const uint8_t *msg, size_t len, const cmdview *v,
                                     size_t *out_len);

#endif
