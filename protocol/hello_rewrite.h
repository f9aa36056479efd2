/* The hello rewriter: a replica-set member's hello (or isMaster) reply
 * lists the real hosts, and a driver that sees them dials them and leaves
 * the proxy. This rewrites `hosts`, `passives`, `arbiters`, `primary` and
 * `me` so each names the mongoguard listener paired with that member.
 *
 * Bytes of one whole reply in (OP_MSG or OP_REPLY), a rewritten reply out;
 * everything else in the reply is copied as it was, in its order. Pure: no
 * I/O, no logging; what the caller should warn about comes back in the
 * result.
 *
 * A host that no listener serves (a member added after start-up, or a
 * mapping that leaves one out) is removed from the lists, and an unmapped
 * `primary` is removed, rather than passed on: passing it on would send the
 * driver around the proxy. The caller logs the names it is given. */
#ifndef MG_PROTOCOL_HELLO_REWRITE_H
#define MG_PROTOCOL_HELLO_REWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/wire_error.h"

enum { HELLO_HOST_LEN = 300 };

/* One member and the listener that serves it, both "host:port". */
typedef struct hello_map_entry {
	char member[HELLO_HOST_LEN];
	char listen[HELLO_HOST_LEN];
} hello_map_entry;

typedef struct hello_map {
	const hello_map_entry *v;
	size_t n;
	/* This connection's own listener, and the member it is paired with
	 * (may be ""): the reply's `me`, and that member's name wherever it
	 * appears, become self_listen even when v does not list them. */
	const char *self_listen;
	const char *self_member;
} hello_map;

typedef enum {
	HELLO_UNCHANGED, /* nothing to rewrite: forward the original bytes */
	HELLO_REWRITTEN, /* out->msg holds the reply to forward instead */
	HELLO_INVALID,   /* not a reply this can read (err says why): forward as is */
} hello_rewrite_status;

enum { HELLO_MAX_UNMAPPED = 8 };

typedef struct hello_rewrite_result {
	uint8_t *msg; /* HELLO_REWRITTEN: malloc'd, the caller frees */
	size_t len;
	bool replica_set;   /* setName present */
	bool mongos;        /* msg: "isdbgrid" */
	bool load_balanced; /* serviceId present: a load balancer's reply */
	unsigned nunmapped; /* hosts removed because no listener serves them */
	char unmapped[HELLO_MAX_UNMAPPED][HELLO_HOST_LEN]; /* the first of them */
	bool primary_dropped;                              /* `primary` named an unmapped host */
} hello_rewrite_result;

/* msg/len: one whole reply to a hello/isMaster (OP_MSG, flags kept except
 * the checksum, which is dropped since the bytes change; or OP_REPLY). */
hello_rewrite_status hello_rewrite(const uint8_t *msg, size_t len, const hello_map *map,
                                   hello_rewrite_result *out, wire_error *err)
    __attribute__((warn_unused_result));

/* The listener for host under map, or NULL. Host names compare without
 * case; a host without a port means :27017. */
const char *hello_map_lookup(const hello_map *map, const char *host);

#endif
