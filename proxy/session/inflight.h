/* The in-flight queue of one session: an entry per request that will get a
 * reply, in request order, so replies (the server's and mongoguard's own)
 * reach the client in the order it asked.
 *
 * An entry either waits for the upstream (answer == NULL) or carries an
 * answer mongoguard wrote itself (a block, an error), which the session
 * writes when the entry reaches the head at a reply boundary. Requests with
 * moreToCome get no entry: nothing will answer them. A full queue stops the
 * session reading from its client. Pure: no I/O, no libevent. */
#ifndef MG_PROXY_SESSION_INFLIGHT_H
#define MG_PROXY_SESSION_INFLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/reply.h"
#include "proxy/stats/workload.h"

enum { INFLIGHT_MAX = 64 }; /* a client pipelining more waits for replies */

typedef enum {
	INFLIGHT_PLAIN,
	INFLIGHT_DDL,    /* changes indexes/collections: tell the index cache on reply */
	INFLIGHT_AWAIT,  /* awaitable hello (a hello too): the reply may take seconds; not "work" */
	INFLIGHT_HELLO,  /* hello / isMaster: its reply names hosts, which may be rewritten */
	INFLIGHT_INSERT, /* its reply's n: documents the index cache's count gains */
	INFLIGHT_DELETE, /* ... or loses */
	INFLIGHT_UPSERT, /* may make its collection: tell the index cache on reply */
} inflight_kind;

/* A write whose reply says how many documents it inserted or deleted. */
static inline bool inflight_is_write(inflight_kind k)
{
	return k == INFLIGHT_INSERT || k == INFLIGHT_DELETE;
}

/* Both kinds of hello get replies that list the set's hosts. */
static inline bool inflight_is_hello(inflight_kind k)
{
	return k == INFLIGHT_HELLO || k == INFLIGHT_AWAIT;
}

typedef struct inflight {
	int32_t request_id;
	inflight_kind kind;
	reply_form form;
	uint8_t *answer; /* owned: mongoguard's own reply, or NULL: upstream answers */
	size_t answer_len;
	/* owned: what completing the entry reads (INFLIGHT_DDL: the request;
	 * INFLIGHT_INSERT / _DELETE / _UPSERT: "db.coll", NUL-terminated) */
	uint8_t *kept;
	size_t kept_len;
	/* INFLIGHT_DDL: its reply said it changed nothing (ok: 0, or a
	 * createIndexes whose indexes all existed), and the index cache is
	 * not told (read when the reply is whole) */
	bool ddl_noop;
	int64_t sent_ns; /* when forwarded (monotonic); 0 once its first reply began */
	/* The workload entry it counts in (gen 0: none) and when it was read
	 * (monotonic); wl.gen is cleared once its first reply is counted. */
	wl_ref wl;
	int64_t read_ns;
	/* A schema change in flight that keeps the index cache's side
	 * connection out of its database (index_cache_client_begin): slot + 1,
	 * 0 for none; ended when the entry goes, however it goes. */
	struct index_cache *gate_ic;
	int gate;
	uint32_t no_reply_mark; /* session no_reply_sent when it was sent */
} inflight;

/* A closed-loop client has one request in flight; only pipelining needs
 * more. So the ring starts in INFLIGHT_INLINE slots inside the session and
 * moves to the heap, doubling up to INFLIGHT_MAX, only when a client
 * pipelines: 64 slots for every idle connection would be 3.5 KiB each. */
enum { INFLIGHT_INLINE = 4 };

/* Invariant: count <= cap <= INFLIGHT_MAX, cap a power of two; entries
 * head .. head+count-1 (mod cap) of slot are live, every other slot is
 * zeroed; slot is inline_slot or a heap array of cap entries. */
typedef struct inflight_ring {
	inflight *slot;
	unsigned cap, head, count;
	inflight inline_slot[INFLIGHT_INLINE];
} inflight_ring;

void inflight_init(inflight_ring *r);

/* Frees every entry's buffers (and a heap array). The ring stays usable. */
void inflight_clear(inflight_ring *r);

static inline unsigned inflight_count(const inflight_ring *r)
{
	return r->count;
}

static inline bool inflight_full(const inflight_ring *r)
{
	return r->count == INFLIGHT_MAX;
}

/* The i-th oldest entry, i < count. Inline, as the next three: a
 * pipelining client asks them several times a message. */
static inline inflight *inflight_at(inflight_ring *r, unsigned i)
{
	return &r->slot[(r->head + i) & (r->cap - 1)];
}

/* The oldest entry, or NULL when none. */
static inline inflight *inflight_head(inflight_ring *r)
{
	return r->count ? &r->slot[r->head] : NULL;
}

/* A new entry at the tail, zeroed but for its fields; NULL when full (or
 * out of memory growing). Growing moves the entries: a pointer taken
 * before a push is stale after it. */
inflight *inflight_push(inflight_ring *r, int32_t request_id, inflight_kind kind, reply_form form);

/* Removes the head (which must exist), freeing its buffers. */
void inflight_pop(inflight_ring *r);

/* The request id the upstream's next reply must answer: the head's, when
 * the head waits for the upstream; NULL when no request does. */
static inline const int32_t *inflight_expect(const inflight_ring *r)
{
	const inflight *f = &r->slot[r->head];
	return r->count && !f->answer ? &f->request_id : NULL;
}

/* True when nothing but awaitable hellos is in flight. */
bool inflight_only_awaiting(const inflight_ring *r);

#endif
