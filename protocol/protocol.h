/* protocol/: pure wire code. Framing, OP_MSG, OP_QUERY/OP_REPLY,
 * OP_COMPRESSED, the handshake, replies mongoguard builds, and the command
 * view analyzers read. No I/O, no logging, no globals: bytes in, a result
 * out. Depends on libbson and the compression libraries only. */
#ifndef MG_PROTOCOL_PROTOCOL_H
#define MG_PROTOCOL_PROTOCOL_H
#include "protocol/cmdview.h"
#include "protocol/compress.h"
#include "protocol/frame.h"
#include "protocol/handshake.h"
#include "protocol/opmsg.h"
#include "protocol/opquery.h"
#include "protocol/reply.h"
#endif
