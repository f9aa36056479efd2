/* Legacy OP_QUERY (2004) and OP_REPLY (1): what is left of them is the
 * handshake. Drivers send their first hello as OP_QUERY against admin.$cmd
 * and expect an OP_REPLY; servers from 5.1 refuse OP_QUERY for anything
 * else. Views point into the caller's message. */
#ifndef MG_PROTOCOL_OPQUERY_H
#define MG_PROTOCOL_OPQUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/wire_error.h"

typedef struct opquery {
	int32_t flags;
	const char *full_collection; /* "admin.$cmd" */
	int32_t skip;
	int32_t nreturn;
	const uint8_t *query;
	size_t query_len;
	const uint8_t *fields; /* NULL when absent */
	size_t fields_len;
} opquery;

typedef struct opreply {
	int32_t flags;
	int64_t cursor_id;
	int32_t starting_from;
	int32_t number_returned;
	const uint8_t *docs;
	size_t docs_len;
} opreply;

#define OPREPLY_QUERY_FAILURE (1 << 1)

bool opquery_parse(const uint8_t *msg, size_t len, opquery *out, wire_error *err)
    __attribute__((warn_unused_result));

bool opreply_parse(const uint8_t *msg, size_t len, opreply *out, wire_error *err)
    __attribute__((warn_unused_result));

/* True when full_collection names a command namespace ("<db>.$cmd"). */
bool opquery_is_command(const opquery *q);

/* Builds a whole OP_REPLY with one document, cursor 0. Caller frees. */
uint8_t *opreply_build(int32_t request_id, int32_t response_to, int32_t flags, const uint8_t *doc,
                       size_t doc_len, size_t *len);

/* Builds a whole OP_QUERY (used to rewrite a handshake). Caller frees. */
uint8_t *opquery_build(int32_t request_id, const opquery *q, const uint8_t *query, size_t query_len,
                       size_t *len);

#endif
