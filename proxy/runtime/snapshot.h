/* The configuration in force, as one immutable object: the settings and
 * the rule engine built from them. Workers read it through one pointer
 * (worker.snap), so a reload can publish a new snapshot whole while
 * connections keep running: each worker moves to it between events, and
 * the old one is freed when the last worker lets go of it.
 *
 * Counted references: the server holds one for the snapshot it publishes,
 * each worker one for the snapshot it uses. */
#ifndef MG_PROXY_RUNTIME_SNAPSHOT_H
#define MG_PROXY_RUNTIME_SNAPSHOT_H

#include <stdatomic.h>

#include "analyzers/engine/engine.h"
#include "proxy/net/tls.h"
#include "proxy/runtime/config.h"
#include "proxy/ref_slot.h"

typedef struct snapshot {
	mg_config cfg;
	engine *engine; /* NULL when analysis is disabled */
	/* Both sides' TLS contexts, built from cfg (certificate files are read
	 * anew for every snapshot). A session takes its own reference to the
	 * SSL_CTXs it uses, so a snapshot may go while sessions run. */
	net_tls tls;
	atomic_uint refs;
	unsigned generation; /* 1 for the first, +1 per publication */
} snapshot;

/* Copies cfg and takes ownership of e (may be NULL) and of tls's contexts.
 * One reference, the caller's. NULL when memory runs out (e and tls are
 * then freed). */
snapshot *snapshot_new(const mg_config *cfg, engine *e, const net_tls *tls, unsigned generation);

snapshot *snapshot_ref(snapshot *s);

/* Drops a reference; the last one frees the snapshot and its engine. */
void snapshot_unref(snapshot *s);

/* Where the snapshot in force is published (proxy/ref_slot.h). A worker takes
 * it once at start and once per publication. */
typedef struct snapshot_slot {
	ref_slot s;
} snapshot_slot;

void snapshot_slot_init(snapshot_slot *slot, snapshot *first);
void snapshot_slot_destroy(snapshot_slot *slot);

/* A new reference to the snapshot in force. */
snapshot *snapshot_slot_get(snapshot_slot *slot);

/* Makes s (whose reference the slot takes over) the snapshot in force. */
void snapshot_slot_publish(snapshot_slot *slot, snapshot *s);

#endif
