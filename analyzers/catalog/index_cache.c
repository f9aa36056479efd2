/* The index cache: namespace -> index_set, filled by one metadata thread.
 *
 * Entries live in an lru_map (hash plus use order); an entry waiting for a
 * fetch is also on the fetch queue, a FIFO of its own. Everything is guarded by one mutex
 * (mu), held only for map work, never across network I/O: the thread copies
 * the namespace out, unlocks, runs listIndexes, and relocks to land the
 * answer. The condition variable (cv) wakes the thread for queued work, for
 * the once-a-second refresh scan, and for shutdown.
 *
 * Entry states:
 *   PENDING  no list yet; queued or being fetched. Lookups answer PENDING.
 *   KNOWN    set holds the list. A background refresh (every refresh_secs)
 *            keeps serving the old set until the new one lands.
 *   FAILED   the last fetch failed; lookups answer UNAVAILABLE until
 *            INDEX_CACHE_RETRY_MS has passed, then the next lookup retries.
 *
 * Generations: every entry gets a fresh number from a counter when it is
 * created or overwritten. A fetch remembers the number it started with and
 * lands only if the entry still has it, so an invalidation (which drops the
 * entry) or a put that happens while listIndexes is on the wire makes that
 * answer stale instead of resurrecting the old index list. */
#include "analyzers/catalog/index_cache.h"

#include "analyzers/catalog/index_fetch.h"
#include "analyzers/catalog/index_landings.h"

#include <mongoc/mongoc.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analyzers/catalog/lru_map.h"
#include "analyzers/catalog/schema_ring.h"
#include "analyzers/catalog/side_gates.h"

_Static_assert(SCHEMA_RING_SLOTS == INDEX_CACHE_SCHEMA_RING, "the schema ring's size");
_Static_assert(SIDE_GATES == INDEX_CACHE_GATES, "the side connection's gates");

#define IC_NS_MAX  512  /* "db.coll"; the server allows 255 */
#define IC_SCAN_MS 1000 /* how often due refreshes are looked for */

typedef enum { ENTRY_PENDING, ENTRY_KNOWN, ENTRY_FAILED } entry_state;

typedef struct ic_entry {
	lru_map_node node; /* hash: fnv1a of ns */
	struct ic_entry *q_prev, *q_next;
	bool queued;
	bool fetching; /* a fetch started at generation fetch_gen is out */
	uint64_t fetch_gen;
	bool written_in_fetch;  /* writes noted while that fetch was out */
	int64_t moved_in_fetch; /* and the documents they moved, inserted plus deleted */
	bool made_in_fetch;     /* a write made the collection while that fetch was out */
	bool recount_again;     /* this fetch is the one re-run for them */
	entry_state state;
	index_set *set;     /* KNOWN: the list in use */
	int64_t fetched_at; /* when the last fetch landed (FAILED: when it failed) */
	int64_t due_at;     /* KNOWN: when to refresh in the background */
	uint64_t generation;
	char ns[];
} ic_entry;

struct index_cache {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	lru_map map; /* at most INDEX_CACHE_MAX_ENTRIES */
	ic_entry *q_head, *q_tail;
	uint64_t next_generation;
	_Atomic uint64_t changes; /* lists landed or forgotten (index_cache_changes); under mu */
	uint64_t id;              /* this cache among every one made (the thread's memo) */
	int64_t refresh_ms;       /* 0: never */
	int64_t next_scan;
	bool stop;
	bool started;
	bool exited; /* metadata_main has returned (index_cache_stop waits for it) */
	pthread_t thread;
	mongoc_uri_t *uri; /* NULL: a cache that never connects */
	mongoc_client_t *client;
	index_cache_notify_fn notify;
	void *notify_arg;
	index_cache_clock_fn clock;
	void *clock_arg;
	index_cache_error_fn on_error;
	void *error_arg;
	index_cache_landed_fn on_landed; /* index_cache_set_hooks */
	index_cache_forget_fn on_forget;
	bool replay; /* index_cache_set_replay */
	void *hooks_arg;
	/* The database the thread is fetching from ("" when idle), and the
	 * databases with a client's schema change in flight (n > 0; a slot
	 * with n 0 is free): see index_cache.h. */
	side_gates gates;
	/* The last INDEX_CACHE_SCHEMA_RING schema changes, keyed by fnv1a of
	 * "db.coll", or of "db" for a whole database. */
	schema_ring schema;
	index_landings landings; /* the lists that landed last, for late verdicts */
};

static pthread_once_t mongoc_once = PTHREAD_ONCE_INIT;

/* mongoc_init is process-wide; mongoc_cleanup is never called because other
 * caches (or the program) may still be using the driver. */
static void init_mongoc(void)
{
	mongoc_init();
}

static int64_t monotonic_ms(void *arg)
{
	struct timespec ts;
	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_ms(const index_cache *ic)
{
	return ic->clock(ic->clock_arg);
}

/* fnv1a of s up to its NUL or the first stop byte (0: none). */
static uint32_t fnv1a_to(const char *s, char stop)
{
	uint32_t h = 2166136261u;
	for (; *s != '\0' && *s != stop; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

static uint32_t fnv1a(const char *s)
{
	return fnv1a_to(s, '\0');
}

/* fnv1a of ns's database, as a change to a whole database is keyed. */
static uint32_t db_hash(const char *ns)
{
	return fnv1a_to(ns, '.');
}

static void set_err(char *err, size_t errlen, const char *msg, const char *detail)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s%s%s", msg, detail != NULL ? ": " : "",
		         detail != NULL ? detail : "");
}

/* On every lookup, so no snprintf. */
static bool make_ns(char *ns, const char *db, const char *coll)
{
	if (db == NULL || coll == NULL || db[0] == '\0' || coll[0] == '\0')
		return false;
	size_t a = strlen(db), b = strlen(coll);
	if (a + b + 2 > IC_NS_MAX)
		return false;
	memcpy(ns, db, a);
	ns[a] = '.';
	memcpy(ns + a + 1, coll, b + 1);
	return true;
}

/* ---- a thread's last answer (index_cache_get_ns) ----
 * Most lookups are of the list the thread looked up last, and the lock,
 * hash and map walk cost more than the analysis of a small find. While the
 * change count stands where it stood at that answer (every landing and
 * every forgetting moves it, an eviction too), the lock would give the
 * same set and index_cache_at. A hit does not move the entry to the front
 * of the LRU order, which only the choice of an eviction's victim reads. */
static atomic_uint_fast64_t cache_ids;

typedef struct ic_memo {
	uint64_t id; /* the cache's; 0: none */
	index_cache_at at;
	index_set *set; /* a reference of the memo's own */
	size_t len;
	char ns[IC_NS_MAX];
} ic_memo;

static _Thread_local ic_memo memo;

static void memo_drop(void)
{
	index_set *s = memo.set;
	memo.id = 0;
	memo.set = NULL;
	index_set_release(s);
}

static void memo_keep(const index_cache *ic, const char *ns, size_t len, index_set *set,
                      const index_cache_at *at)
{
	if (len >= IC_NS_MAX)
		return;
	memo_drop();
	memo.id = ic->id;
	memo.at = *at;
	memo.set = index_set_retain(set);
	memo.len = len;
	memcpy(memo.ns, ns, len + 1);
}

void index_cache_thread_end(void)
{
	memo_drop();
}

/* ---- map, LRU and queue; all with mu held ---- */

static ic_entry *entry_of(lru_map_node *n)
{
	return n != NULL ? LRU_MAP_ENTRY(n, ic_entry, node) : NULL;
}

static bool ns_is(const lru_map_node *n, const void *ns)
{
	return strcmp(LRU_MAP_ENTRY(n, const ic_entry, node)->ns, ns) == 0;
}

static ic_entry *find_locked(index_cache *ic, const char *ns, uint32_t hash)
{
	return entry_of(lru_map_find(&ic->map, hash, ns_is, ns));
}

static void enqueue_locked(index_cache *ic, ic_entry *e)
{
	if (e->queued || e->fetching)
		return;
	e->queued = true;
	e->q_next = NULL;
	e->q_prev = ic->q_tail;
	if (ic->q_tail != NULL)
		ic->q_tail->q_next = e;
	else
		ic->q_head = e;
	ic->q_tail = e;
	pthread_cond_signal(&ic->cv);
}

static void dequeue_locked(index_cache *ic, ic_entry *e)
{
	if (!e->queued)
		return;
	if (e->q_prev != NULL)
		e->q_prev->q_next = e->q_next;
	else
		ic->q_head = e->q_next;
	if (e->q_next != NULL)
		e->q_next->q_prev = e->q_prev;
	else
		ic->q_tail = e->q_prev;
	e->q_prev = e->q_next = NULL;
	e->queued = false;
}

/* A list lands or is forgotten: the count after it (index_cache_changes),
 * a landed list's stamp. */
static uint64_t change_locked(index_cache *ic)
{
	return atomic_fetch_add_explicit(&ic->changes, 1, memory_order_release) + 1;
}

static bool opaque_set(const index_set *s)
{
	return s != NULL && index_set_is_opaque(s, NULL);
}

/* Waiting for a list, or holding one that says the collection is missing
 * (or a view): a write may be making the collection (index_cache.h,
 * index_cache_note_made). */
static bool unsettled(entry_state state, const index_set *set)
{
	return state == ENTRY_PENDING || (state == ENTRY_KNOWN && opaque_set(set));
}

/* e moves to state with set (the caller releases the old set). */
static void entry_move_locked(ic_entry *e, entry_state state, index_set *set)
{
	e->state = state;
	e->set = set;
}

/* Unlinks e everywhere and frees it. A fetch in flight for it keeps only a
 * copy of the namespace and the generation, so nothing dangles. */
static void remove_locked(index_cache *ic, ic_entry *e)
{
	lru_map_remove(&ic->map, &e->node);
	dequeue_locked(ic, e);
	index_set *s = e->set;
	entry_move_locked(e, ENTRY_FAILED, NULL); /* settled: out of the count */
	index_set_release(s);
	free(e);
}

/* For index_cache_free: the queue goes with the cache. */
static void entry_free(lru_map_node *n)
{
	ic_entry *e = entry_of(n);
	index_set_release(e->set);
	free(e);
}

static ic_entry *create_locked(index_cache *ic, const char *ns, uint32_t hash)
{
	if (lru_map_full(&ic->map)) {
		/* The least recently used entry that no fetch is out for: the
		 * fetch would land on nothing, and be asked for again. */
		lru_map_node *victim = lru_map_oldest(&ic->map);
		while (victim != NULL && entry_of(victim)->fetching)
			victim = lru_map_newer(victim);
		if (victim == NULL)
			return NULL;
		remove_locked(ic, entry_of(victim));
		(void)change_locked(ic); /* forgotten: a thread's memo of it goes */
	}
	size_t len = strlen(ns);
	ic_entry *e = calloc(1, sizeof *e + len + 1);
	if (e == NULL)
		return NULL;
	memcpy(e->ns, ns, len + 1);
	e->state = ENTRY_FAILED; /* settled until it moves (calloc'd: no set) */
	entry_move_locked(e, ENTRY_PENDING, NULL);
	e->generation = ++ic->next_generation;
	lru_map_insert(&ic->map, &e->node, hash);
	return e;
}

/* ---- lifecycle ---- */

index_cache *index_cache_new(const char *uri, uint32_t refresh_secs, index_cache_notify_fn notify,
                             void *notify_arg, char *err, size_t errlen)
{
	index_cache *ic = calloc(1, sizeof *ic);
	pthread_condattr_t attr;
	bson_error_t error;

	if (ic == NULL) {
		set_err(err, errlen, "out of memory", NULL);
		return NULL;
	}
	ic->id = atomic_fetch_add(&cache_ids, 1) + 1;
	if (!lru_map_init(&ic->map, INDEX_CACHE_MAX_ENTRIES)) {
		free(ic);
		set_err(err, errlen, "out of memory", NULL);
		return NULL;
	}
	if (uri != NULL) {
		pthread_once(&mongoc_once, init_mongoc);
		ic->uri = index_fetch_uri(uri, &error);
		if (ic->uri == NULL) {
			set_err(err, errlen, "invalid upstream URI", error.message);
			lru_map_destroy(&ic->map, NULL);
			free(ic);
			return NULL;
		}
	}
	pthread_mutex_init(&ic->mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&ic->cv, &attr);
	pthread_condattr_destroy(&attr);
	ic->refresh_ms = (int64_t)refresh_secs * 1000;
	ic->notify = notify;
	ic->notify_arg = notify_arg;
	ic->clock = monotonic_ms;
	return ic;
}

void index_cache_set_clock(index_cache *ic, index_cache_clock_fn fn, void *arg)
{
	pthread_mutex_lock(&ic->mu);
	ic->clock = fn != NULL ? fn : monotonic_ms;
	ic->clock_arg = fn != NULL ? arg : NULL;
	pthread_mutex_unlock(&ic->mu);
}

/* ---- the request path ---- */

/* On the request path, under the lock only to find or create the entry:
 * an unknown namespace is queued for the metadata thread and answers
 * INDEXES_PENDING at once, never a wait. */
index_lookup index_cache_get(index_cache *ic, const char *db, const char *coll, index_set **out)
{
	return index_cache_get_at(ic, db, coll, out, NULL);
}

/* Under the lock: where the cache stands (index_cache_get_at). */
static void at_locked(index_cache *ic, index_cache_at *at)
{
	if (at != NULL) {
		at->changes = atomic_load_explicit(&ic->changes, memory_order_relaxed);
		at->schema_seq = schema_ring_seq(&ic->schema);
	}
}

index_lookup index_cache_get_at(index_cache *ic, const char *db, const char *coll, index_set **out,
                                index_cache_at *at)
{
	char ns[IC_NS_MAX];

	*out = NULL;
	if (ic == NULL || !make_ns(ns, db, coll))
		return INDEXES_UNAVAILABLE;
	return index_cache_get_ns(ic, ns, strlen(ns), out, at);
}

index_lookup index_cache_get_ns(index_cache *ic, const char *ns, size_t len, index_set **out,
                                index_cache_at *at)
{
	index_lookup r;
	index_cache_at here;

	*out = NULL;
	if (ic == NULL)
		return INDEXES_UNAVAILABLE;
	if (memo.id == ic->id && memo.len == len &&
	    atomic_load_explicit(&ic->changes, memory_order_acquire) == memo.at.changes &&
	    memcmp(memo.ns, ns, len) == 0) {
		*out = index_set_retain(memo.set);
		if (at != NULL)
			*at = memo.at;
		return INDEXES_KNOWN;
	}
	if (at == NULL)
		at = &here;
	uint32_t hash = fnv1a(ns);

	pthread_mutex_lock(&ic->mu);
	ic_entry *e = find_locked(ic, ns, hash);
	if (e == NULL) {
		e = create_locked(ic, ns, hash);
		if (e == NULL) {
			pthread_mutex_unlock(&ic->mu);
			return INDEXES_UNAVAILABLE;
		}
		enqueue_locked(ic, e);
		at_locked(ic, at);
		pthread_mutex_unlock(&ic->mu);
		return INDEXES_PENDING;
	}
	lru_map_touch(&ic->map, &e->node);
	switch (e->state) {
	case ENTRY_KNOWN:
		*out = index_set_retain(e->set);
		r = INDEXES_KNOWN;
		break;
	case ENTRY_FAILED:
		if (now_ms(ic) - e->fetched_at < INDEX_CACHE_RETRY_MS) {
			r = INDEXES_UNAVAILABLE;
			break;
		}
		entry_move_locked(e, ENTRY_PENDING, e->set);
		enqueue_locked(ic, e);
		r = INDEXES_PENDING;
		break;
	case ENTRY_PENDING:
	default:
		r = INDEXES_PENDING;
		break;
	}
	at_locked(ic, at);
	pthread_mutex_unlock(&ic->mu);
	if (r == INDEXES_KNOWN)
		memo_keep(ic, ns, len, *out, at);
	return r;
}

/* The collection ns ("db.coll") exists: a write made it, or a list shows
 * it. When the newest schema change naming it (or its database) was a
 * drop, it came into existence: a schema change of its own (SCHEMA_MADE),
 * so a late verdict owed for a request sent before gives none, whichever
 * of this and the first list after the drop the cache heard first. Not in
 * the report's replay: its records say where. */
static bool remade_locked(index_cache *ic, const char *ns)
{
	if (ic->replay || !schema_ring_dropped(&ic->schema, fnv1a(ns), db_hash(ns)))
		return false;
	(void)schema_ring_add(&ic->schema, fnv1a(ns), false, SCHEMA_MADE);
	return true;
}

static void tell_forget_locked(index_cache *ic, const char *ns, bool whole_db, index_forget why)
{
	uint64_t stamp = change_locked(ic); /* a request after this one may wait for a list */
	if (ic->on_forget)                  /* under the lock: in order with the landings */
		ic->on_forget(ic->hooks_arg, ns, whole_db, stamp, why);
}

/* Documents were written into ns, listed missing, or whose first list is
 * still to come (e; NULL: not known): a list that says "does not exist" is
 * forgotten, the list fetched anew, and a lookup meanwhile waits for it
 * (PENDING) rather than judging with it; an answer out now that says so is
 * dropped when it lands (made_in_fetch), one that lists the collection is
 * kept. Not every answer out is dropped: under a stream of upserts, each
 * reply would drop the next fetch's, and the list would never land.
 * remade: remade_locked said the write made a dropped collection. */
static void made_locked(index_cache *ic, const char *ns, ic_entry *e, bool remade)
{
	bool forgot = false;
	if (e != NULL && e->fetching)
		e->made_in_fetch = true;
	/* a PENDING one stays: a fetch queued starts after the write and sees it */
	if (e != NULL && e->state != ENTRY_PENDING) {
		index_set *old = e->set;
		entry_move_locked(e, ENTRY_PENDING, NULL);
		index_set_release(old);
		enqueue_locked(ic, e);
		forgot = true;
	}
	if (forgot || remade)
		tell_forget_locked(ic, ns, false,
		                   remade ? INDEX_FORGET_MADE : INDEX_FORGET_WRITTEN);
}

void index_cache_note_made(index_cache *ic, const char *db, const char *coll)
{
	char ns[IC_NS_MAX];
	if (ic == NULL || !make_ns(ns, db, coll))
		return;
	pthread_mutex_lock(&ic->mu);
	ic_entry *e = find_locked(ic, ns, fnv1a(ns));
	if (!ic->replay && (e == NULL || unsettled(e->state, e->set)))
		made_locked(ic, ns, e, remade_locked(ic, ns));
	pthread_mutex_unlock(&ic->mu);
}

void index_cache_set_replay(index_cache *ic, bool replay)
{
	pthread_mutex_lock(&ic->mu);
	ic->replay = replay;
	pthread_mutex_unlock(&ic->mu);
}

void index_cache_forget(index_cache *ic, const char *db, const char *coll, index_forget why)
{
	char ns[IC_NS_MAX];
	if (why == INDEX_FORGET_SCHEMA) {
		index_cache_invalidate(ic, db, coll);
		return;
	}
	if (ic == NULL || coll == NULL || !make_ns(ns, db, coll))
		return;
	pthread_mutex_lock(&ic->mu);
	ic_entry *e = find_locked(ic, ns, fnv1a(ns));
	if (why == INDEX_FORGET_MADE)
		(void)schema_ring_add(&ic->schema, fnv1a(ns), false, SCHEMA_MADE);
	if (e != NULL || why == INDEX_FORGET_MADE)
		made_locked(ic, ns, e, why == INDEX_FORGET_MADE);
	pthread_mutex_unlock(&ic->mu);
}

void index_cache_note_docs(index_cache *ic, const char *db, const char *coll, int64_t delta)
{
	char ns[IC_NS_MAX];
	if (ic == NULL || delta == 0 || !make_ns(ns, db, coll))
		return;
	pthread_mutex_lock(&ic->mu);
	ic_entry *e = find_locked(ic, ns, fnv1a(ns));
	if (delta > 0 && (e == NULL || unsettled(e->state, e->set))) {
		if (!ic->replay)
			made_locked(ic, ns, e, remade_locked(ic, ns));
	} else if (e != NULL && e->state == ENTRY_KNOWN && e->set != NULL) {
		int64_t moved = index_set_note_docs(e->set, delta);
		if (e->fetching) {
			e->written_in_fetch = true;
			e->moved_in_fetch += delta < 0 ? -delta : delta;
		}
		int64_t read = index_set_read_count(e->set);
		int64_t far = (int64_t)((double)(read > 0 ? read : 0) * INDEX_CACHE_RECOUNT);
		if (far < INDEX_CACHE_RECOUNT_MIN)
			far = INDEX_CACHE_RECOUNT_MIN;
		if (moved > far || moved < -far)
			enqueue_locked(ic, e); /* a refresh: the old set serves meanwhile */
	} else if (e != NULL && delta < 0 && e->state == ENTRY_PENDING && e->fetching &&
	           !ic->replay) {
		e->written_in_fetch = true; /* its first list's count may predate them */
	}
	pthread_mutex_unlock(&ic->mu);
}

static void invalidate_as(index_cache *ic, const char *db, const char *coll, schema_kind kind)
{
	char ns[IC_NS_MAX];

	if (ic == NULL || db == NULL)
		return;
	bool one = coll != NULL && make_ns(ns, db, coll); /* else all of db, for the record */
	pthread_mutex_lock(&ic->mu);
	if (one) {
		ic_entry *e = find_locked(ic, ns, fnv1a(ns));
		if (e != NULL)
			remove_locked(ic, e);
	} else if (coll == NULL) {
		size_t dblen = strlen(db);
		lru_map_node *n = lru_map_newest(&ic->map);
		while (n != NULL) {
			lru_map_node *next = lru_map_older(n);
			ic_entry *e = entry_of(n);
			if (strncmp(e->ns, db, dblen) == 0 && e->ns[dblen] == '.')
				remove_locked(ic, e);
			n = next;
		}
	}
	(void)schema_ring_add(&ic->schema, fnv1a(one ? ns : db), !one, kind);
	tell_forget_locked(ic, one ? ns : db, !one, INDEX_FORGET_SCHEMA);
	pthread_mutex_unlock(&ic->mu);
}

void index_cache_invalidate(index_cache *ic, const char *db, const char *coll)
{
	invalidate_as(ic, db, coll, SCHEMA_CHANGED);
}

void index_cache_drop(index_cache *ic, const char *db, const char *coll)
{
	invalidate_as(ic, db, coll, SCHEMA_DROPPED);
}

uint64_t index_cache_schema_seq(index_cache *ic)
{
	return ic ? schema_ring_seq(&ic->schema) : 0;
}

bool index_cache_schema_changed(index_cache *ic, const char *db, const char *coll, uint64_t since,
                                uint64_t until)
{
	char ns[IC_NS_MAX];
	if (ic == NULL || index_cache_schema_seq(ic) == since || until <= since)
		return false;
	if (!make_ns(ns, db, coll))
		return true;
	uint32_t in_coll = fnv1a(ns), in_db = fnv1a(db);
	pthread_mutex_lock(&ic->mu);
	bool changed = schema_ring_named(&ic->schema, in_coll, in_db, since, until);
	pthread_mutex_unlock(&ic->mu);
	return changed;
}

uint64_t index_cache_changes(index_cache *ic)
{
	return ic ? atomic_load_explicit(&ic->changes, memory_order_acquire) : 0;
}

/* A list lands for ns: stamped, and kept for the late verdicts. One that
 * shows a dropped collection says it was made again (remade_locked). */
static void landed_locked(index_cache *ic, const char *ns, index_set *set, index_set **gone)
{
	if (!opaque_set(set) && remade_locked(ic, ns))
		tell_forget_locked(ic, ns, false, INDEX_FORGET_MADE);
	uint64_t stamp = change_locked(ic);
	index_set_set_stamp(set, stamp);
	*gone = index_landings_add(&ic->landings, ns, stamp, schema_ring_seq(&ic->schema), set);
}

bool index_cache_landed_after(index_cache *ic, const char *db, const char *coll, uint64_t after,
                              index_set **set, uint64_t *schema_seq)
{
	char ns[IC_NS_MAX];
	if (ic == NULL || !make_ns(ns, db, coll))
		return false;
	pthread_mutex_lock(&ic->mu);
	bool found = index_landings_first_after(&ic->landings, ns, after, set, schema_seq);
	pthread_mutex_unlock(&ic->mu);
	return found;
}

void index_cache_put(index_cache *ic, const char *db, const char *coll, index_set *s)
{
	char ns[IC_NS_MAX];
	index_set *old = NULL, *gone = NULL;

	if (ic == NULL || !make_ns(ns, db, coll))
		return;
	uint32_t hash = fnv1a(ns);
	pthread_mutex_lock(&ic->mu);
	ic_entry *e = find_locked(ic, ns, hash);
	if (s == NULL) {
		if (e != NULL) {
			remove_locked(ic, e);
			(void)change_locked(ic); /* forgotten: a thread's memo of it goes */
		}
		pthread_mutex_unlock(&ic->mu);
		return;
	}
	if (e == NULL)
		e = create_locked(ic, ns, hash);
	if (e != NULL) {
		int64_t now = now_ms(ic);
		dequeue_locked(ic, e);
		old = e->set;
		index_set_carry_multikey(s, old);
		landed_locked(ic, ns, s, &gone);
		entry_move_locked(e, ENTRY_KNOWN, index_set_retain(s));
		e->generation = ++ic->next_generation;
		e->recount_again = false;
		e->fetched_at = now;
		e->due_at = now + ic->refresh_ms;
	}
	pthread_mutex_unlock(&ic->mu);
	index_set_release(old);
	index_set_release(gone);
}

/* ---- the metadata thread's two halves ---- */

/* The first queued entry whose database has no client schema change in
 * flight; the others keep their place. */
static bool take_locked(index_cache *ic, char *ns, size_t nslen, uint64_t *gen)
{
	ic_entry *e = ic->q_head;
	while (e != NULL && side_gates_held(&ic->gates, e->ns))
		e = e->q_next;
	if (e == NULL || strlen(e->ns) >= nslen)
		return false;
	side_gates_fetching(&ic->gates, e->ns);
	dequeue_locked(ic, e);
	e->fetching = true;
	e->fetch_gen = e->generation;
	e->written_in_fetch = false;
	e->moved_in_fetch = 0;
	e->made_in_fetch = false;
	memcpy(ns, e->ns, strlen(e->ns) + 1);
	*gen = e->generation;
	return true;
}

bool index_cache_fetch_begin(index_cache *ic, char *ns, size_t nslen, uint64_t *gen)
{
	pthread_mutex_lock(&ic->mu);
	bool ok = take_locked(ic, ns, nslen, gen);
	pthread_mutex_unlock(&ic->mu);
	return ok;
}

/* A re-run refresh lands whatever was relayed meanwhile (else a collection
 * written without a pause never lands one), its count perhaps from before:
 * within the documents those writes moved of the estimate, which has them,
 * the estimate is kept; further off is drift the proxy did not see. */
static void keep_estimate(index_set *fresh, const index_set *old, int64_t moved)
{
	int64_t est = index_set_doc_count(old), read = index_set_read_count(fresh);
	if (moved > 0 && est >= 0 && read >= 0 && read - est <= moved && est - read <= moved)
		index_set_set_doc_count(fresh, est);
}

bool index_cache_fetch_end(index_cache *ic, const char *ns, uint64_t gen, index_set *set)
{
	index_set *drop = NULL, *gone = NULL;
	bool landed = false;

	pthread_mutex_lock(&ic->mu);
	side_gates_fetching(&ic->gates, NULL); /* the side connection is idle again */
	ic_entry *e = find_locked(ic, ns, fnv1a(ns));
	if (e != NULL && e->fetching && e->fetch_gen == gen)
		e->fetching = false;
	if (e == NULL || e->generation != gen) {
		/* Invalidated (or put) while the answer was on the wire. An entry
		 * asked for since then was queued by that lookup; an entry that
		 * was put holds a newer list. Either way this answer is stale;
		 * an entry still waiting for a list is fetched again. */
		drop = set;
		if (e != NULL && e->state == ENTRY_PENDING)
			enqueue_locked(ic, e);
	} else {
		int64_t now = now_ms(ic);
		landed = true;
		if (set != NULL && e->made_in_fetch && opaque_set(set)) {
			/* "does not exist", read before a write made it: fetched
			 * again, the entry waiting (made_locked) */
			drop = set;
			landed = false;
			e->made_in_fetch = false;
			enqueue_locked(ic, e);
		} else if (set != NULL && e->written_in_fetch && !e->recount_again &&
		           (e->state == ENTRY_KNOWN ||
		            (e->state == ENTRY_PENDING && !opaque_set(set)))) {
			/* Writes were relayed while this refresh was on the wire:
			 * its count may predate them, and landing it would forget
			 * them (the old set's estimate has them). The old set serves
			 * on and the refresh runs once more; that one lands. So for
			 * a first list and the deletes relayed while it was out
			 * (the inserts forget it: made_locked), the requests
			 * waiting for it wait for the second. */
			drop = set;
			landed = false;
			e->recount_again = true;
			enqueue_locked(ic, e);
		} else if (set != NULL) {
			e->recount_again = false;
			if (e->state == ENTRY_KNOWN && e->set != NULL)
				keep_estimate(set, e->set, e->moved_in_fetch);
			drop = e->set;
			index_set_carry_multikey(set, drop);
			landed_locked(ic, ns, set, &gone);
			entry_move_locked(e, ENTRY_KNOWN, set);
			if (ic->on_landed) /* under the lock: unset, no call is in flight */
				ic->on_landed(ic->hooks_arg, ns, index_set_retain(set));
			e->fetched_at = now;
			e->due_at = now + ic->refresh_ms;
		} else if (e->state == ENTRY_KNOWN) {
			/* A refresh failed: the old list is still the best answer
			 * there is; try again after the back-off. */
			e->due_at = now + INDEX_CACHE_RETRY_MS;
		} else {
			entry_move_locked(e, ENTRY_FAILED, e->set);
			e->fetched_at = now;
		}
	}
	pthread_mutex_unlock(&ic->mu);
	index_set_release(drop);
	index_set_release(gone);
	return landed;
}

void index_cache_set_hooks(index_cache *ic, index_cache_landed_fn landed,
                           index_cache_forget_fn forget, void *arg)
{
	pthread_mutex_lock(&ic->mu);
	ic->on_landed = landed;
	ic->on_forget = forget;
	ic->hooks_arg = arg;
	pthread_mutex_unlock(&ic->mu);
}

static void schedule_refreshes_locked(index_cache *ic, int64_t now)
{
	if (ic->refresh_ms <= 0)
		return;
	for (lru_map_node *n = lru_map_newest(&ic->map); n != NULL; n = lru_map_older(n)) {
		ic_entry *e = entry_of(n);
		if (e->state == ENTRY_KNOWN && e->due_at <= now)
			enqueue_locked(ic, e);
	}
}

static struct timespec deadline(int64_t ms_from_now)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms_from_now / 1000;
	ts.tv_nsec += (ms_from_now % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

/* The metadata thread: the one place the side connection is used, so no
 * worker ever waits on the network for an index list. It drops the lock
 * around each fetch, and sleeps until a fetch is queued or the next
 * refresh scan is due. */
static void *metadata_main(void *arg)
{
	index_cache *ic = arg;
	char ns[IC_NS_MAX];
	uint64_t gen;

	pthread_mutex_lock(&ic->mu);
	while (!ic->stop) {
		/* The refresh scan runs on the real clock: a test clock only
		 * moves entries' ages, it cannot stall the thread. */
		int64_t real = monotonic_ms(NULL);
		if (real >= ic->next_scan) {
			schedule_refreshes_locked(ic, now_ms(ic));
			ic->next_scan = real + IC_SCAN_MS;
		}
		if (!take_locked(ic, ns, sizeof ns, &gen)) {
			struct timespec ts = deadline(ic->next_scan - real);
			pthread_cond_timedwait(&ic->cv, &ic->mu, &ts);
			continue;
		}
		pthread_mutex_unlock(&ic->mu);
		char why[256];
		index_set *set = index_fetch(ic->client, ns, why, sizeof why);
		if (set == NULL && why[0] && ic->on_error)
			ic->on_error(ic->error_arg, ns, why);
		index_cache_fetch_end(ic, ns, gen, set);
		if (ic->notify != NULL)
			ic->notify(ic->notify_arg);
		pthread_mutex_lock(&ic->mu);
	}
	ic->exited = true;
	pthread_cond_broadcast(&ic->cv);
	pthread_mutex_unlock(&ic->mu);
	return NULL;
}

bool index_cache_start(index_cache *ic, char *err, size_t errlen)
{
	if (ic->uri == NULL) {
		set_err(err, errlen, "index cache has no upstream URI", NULL);
		return false;
	}
	if (ic->started) {
		set_err(err, errlen, "index cache already started", NULL);
		return false;
	}
	ic->client = mongoc_client_new_from_uri(ic->uri);
	if (ic->client == NULL) {
		set_err(err, errlen, "cannot create the metadata client", NULL);
		return false;
	}
	mongoc_client_set_error_api(ic->client, MONGOC_ERROR_API_VERSION_2);
	int rc = pthread_create(&ic->thread, NULL, metadata_main, ic);
	if (rc != 0) {
		set_err(err, errlen, "cannot start the metadata thread", strerror(rc));
		mongoc_client_destroy(ic->client);
		ic->client = NULL;
		return false;
	}
	ic->started = true;
	return true;
}

bool index_cache_stop(index_cache *ic, uint32_t wait_ms)
{
	if (ic == NULL || !ic->started)
		return true;
	struct timespec until = deadline(wait_ms == INDEX_CACHE_WAIT_FOREVER ? 0 : wait_ms);
	pthread_mutex_lock(&ic->mu);
	ic->stop = true;
	pthread_cond_broadcast(&ic->cv);
	while (!ic->exited) {
		if (wait_ms == INDEX_CACHE_WAIT_FOREVER)
			pthread_cond_wait(&ic->cv, &ic->mu);
		else if (pthread_cond_timedwait(&ic->cv, &ic->mu, &until) == ETIMEDOUT)
			break;
	}
	bool exited = ic->exited;
	pthread_mutex_unlock(&ic->mu);
	if (!exited)
		return false;
	pthread_join(ic->thread, NULL);
	ic->started = false;
	return true;
}

void index_cache_free(index_cache *ic)
{
	if (ic == NULL)
		return;
	if (!index_cache_stop(ic, INDEX_CACHE_WAIT_FOREVER))
		return; /* cannot happen: waiting forever */
	if (memo.id == ic->id)
		memo_drop(); /* another thread's goes at its index_cache_thread_end */
	if (ic->client != NULL)
		mongoc_client_destroy(ic->client);
	if (ic->uri != NULL)
		mongoc_uri_destroy(ic->uri);
	lru_map_destroy(&ic->map, entry_free);
	index_landings_clear(&ic->landings);
	pthread_cond_destroy(&ic->cv);
	pthread_mutex_destroy(&ic->mu);
	free(ic);
}

void index_cache_set_error_hook(index_cache *ic, index_cache_error_fn fn, void *arg)
{
	ic->on_error = fn;
	ic->error_arg = arg;
}

/* ---- the side connection and the clients' schema changes ---- */

bool index_cache_side_busy(index_cache *ic, const char *db)
{
	if (ic == NULL || db == NULL)
		return false;
	pthread_mutex_lock(&ic->mu);
	bool busy = side_gates_busy(&ic->gates, db);
	pthread_mutex_unlock(&ic->mu);
	return busy;
}

int index_cache_client_begin(index_cache *ic, const char *db, bool *side_busy)
{
	*side_busy = false;
	if (ic == NULL || db == NULL)
		return -1;
	pthread_mutex_lock(&ic->mu);
	int slot = side_gates_begin(&ic->gates, db);
	*side_busy = side_gates_busy(&ic->gates, db);
	pthread_mutex_unlock(&ic->mu);
	return slot;
}

void index_cache_client_end(index_cache *ic, int slot)
{
	if (ic == NULL)
		return;
	pthread_mutex_lock(&ic->mu);
	if (side_gates_end(&ic->gates, slot))
		pthread_cond_signal(&ic->cv); /* a fetch it kept back may go */
	pthread_mutex_unlock(&ic->mu);
}
