/* Live workload statistics: one table per worker, written by its thread
 * alone on the request path and read by the admin endpoint through a copy
 * the worker makes on its own thread (worker_ask). Pure: no I/O, no
 * libevent, no locks.
 *
 * Shapes. A fixed number of entries (workload.shapes), keyed by a 64-bit
 * key (the engine's shape hash mixed with the application's name). When
 * the table is full and a new shape arrives, the entry with the least total
 * time is folded into the table's "other" counters (folded: how many
 * entries went, and their requests and time), and the new one takes its
 * slot with a new generation, so references to the old entry (an in-flight
 * request's) see it gone. Latency is a log-bucketed histogram per entry
 * (four buckets per power of two: a percentile is within 12.5 %).
 *
 * Collections. A fixed number (workload.collections), first come; the rest
 * are counted together as "other". Never evicted, so an index stays valid
 * for the table's life. */
#ifndef MG_PROXY_STATS_WORKLOAD_H
#define MG_PROXY_STATS_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
	WL_HIST = 160,      /* latency buckets: 4 per power of two of nanoseconds */
	WL_ERRS = 4,        /* error codes kept apart per shape; others summed */
	WL_NS_LEN = 128,    /* "db.coll", cut */
	WL_CMD_LEN = 32,    /* the command's name */
	WL_APP_LEN = 64,    /* the client's application name, cut */
	WL_SHAPE_LEN = 384, /* the redacted shape's text, cut */
	WL_COLL_OTHER = 0,  /* collection index 0: everything past the table */
	WL_DEFAULT_SHAPES = 512,
	WL_DEFAULT_COLLS = 256,
	WL_DEFAULT_SAMPLE = 8,
};

typedef enum { WL_KIND_OTHER, WL_KIND_READ, WL_KIND_WRITE } wl_kind;

/* A reference to a shape entry: its slot and generation (0: none). */
typedef struct wl_ref {
	uint32_t slot, gen;
} wl_ref;

typedef struct wl_shape {
	uint64_t key; /* 0: a free slot */
	uint64_t shape_hash;
	uint32_t gen;
	uint16_t coll;
	uint8_t kind;     /* wl_kind */
	bool answer_is_n; /* a count: its reply's n is its answer, not documents */
	uint32_t unread;  /* replies to pass before the next one read (0: read it) */
	char ns[WL_NS_LEN], command[WL_CMD_LEN], app[WL_APP_LEN], shape[WL_SHAPE_LEN];
	int64_t first_ns; /* when it entered the table (monotonic) */
	uint64_t count;   /* requests */
	uint64_t replies; /* replies timed: the histogram's sum, filled by workload_settle */
	uint64_t total_ns;
	uint64_t read_replies; /* replies whose body was read (docs and errors known) */
	uint64_t docs, bytes;
	uint64_t errors, err_other; /* err_other: errors of codes past WL_ERRS */
	struct {
		int32_t code;
		uint32_t n;
	} err[WL_ERRS];
	uint32_t hist[WL_HIST];
} wl_shape;

/* A collection's requests: those of its shapes folded away, and, in a
 * settled copy (workload_settle), those of its live shapes too. */
typedef struct wl_coll {
	char ns[WL_NS_LEN];
	uint64_t reads, writes, other;
} wl_coll;

typedef struct workload {
	unsigned cap, n;  /* shapes: slots, used */
	wl_shape *shapes; /* cap */
	uint32_t *index;  /* open addressing, 2*cap rounded up to a power of two: slot+1 */
	unsigned index_mask;
	unsigned coll_cap, ncoll; /* colls[0] is "other" */
	wl_coll *colls;
	uint64_t folded, folded_count, folded_total_ns; /* shapes folded away */
	uint32_t next_gen;
	int64_t started_ns;
	uint32_t sample; /* the body of one reply in this many is read (not writes': all) */
} workload;

/* What a new entry shows. */
typedef struct wl_desc {
	const char *ns, *command, *app, *shape;
	uint64_t shape_hash;
	wl_kind kind;
} wl_desc;

/* The facts of one reply (its first, for an exhaust cursor). */
typedef struct wl_reply {
	int64_t latency_ns; /* the request read to the reply's header read */
	int64_t bytes;      /* the reply's length */
	bool read;          /* the body was read: ndocs and code below mean something */
	int64_t ndocs;
	int32_t code; /* 0: ok */
} wl_reply;

/* NULL when out of memory. shapes, colls: at least 1 each. The table
 * reads one reply body in WL_DEFAULT_SAMPLE of a shape's until
 * workload_new's caller sets sample (workload.replySample). */
workload *workload_new(unsigned shapes, unsigned colls, int64_t now_ns);
void workload_free(workload *w);

/* Bytes a table of these sizes holds (docs/operations.md states it). */
size_t workload_bytes(unsigned shapes, unsigned colls);

/* The entry of key, as a reference (gen 0 when none). */
wl_ref workload_find(const workload *w, uint64_t key);

/* The entry of key, made when absent (folding the lightest when full). */
wl_ref workload_enter(workload *w, uint64_t key, const wl_desc *d, int64_t now_ns);

/* The live entry r names; NULL when it was folded away. */
static inline wl_shape *workload_at(workload *w, wl_ref r)
{
	if (!r.gen || r.slot >= w->cap || w->shapes[r.slot].gen != r.gen)
		return NULL;
	return &w->shapes[r.slot];
}

/* A request of the entry, counted. Its collection's counts are the sum of
 * its shapes' (workload_settle), so the request path adds one number. */
static inline void workload_count(workload *w, wl_shape *e)
{
	(void)w;
	e->count++;
}

/* An error reply of code (not 0), to the entry's counts by code. */
void workload_error(wl_shape *e, int32_t code);

/* The histogram's bucket of a latency: four a power of two, the first four
 * one nanosecond each. Inline, as the next: on every reply. */
static inline unsigned workload_bucket(int64_t ns)
{
	uint64_t v = ns > 0 ? (uint64_t)ns : 0;
	if (v < 4)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* v in [2^e, 2^(e+1)) */
	unsigned b = (e - 1) * 4 + (unsigned)((v >> (e - 2)) & 3);
	return b < WL_HIST ? b : WL_HIST - 1;
}

/* The middle of a bucket. */
int64_t workload_bucket_mid(unsigned b);

/* A reply's facts, to the entry. */
static inline void workload_reply(wl_shape *e, const wl_reply *r)
{
	e->total_ns += (uint64_t)(r->latency_ns > 0 ? r->latency_ns : 0);
	e->hist[workload_bucket(r->latency_ns)]++;
	e->bytes += (uint64_t)r->bytes;
	if (!r->read)
		return;
	e->read_replies++;
	if (r->ndocs > 0)
		e->docs += (uint64_t)r->ndocs;
	if (r->code)
		workload_error(e, r->code);
}

/* The latency under which a fraction q (0..1) of e's replies came; 0 when
 * none. */
int64_t workload_percentile(const wl_shape *e, double q);

/* Copies w into a table of its size made by workload_new (the admin's
 * snapshot of a worker), settled. */
void workload_copy(workload *to, const workload *from);

/* Fills what the request path leaves to be summed: each entry's replies
 * (its histogram's sum) and each collection's counts (its live shapes'
 * added). For a copy: the live table must not be settled twice. */
void workload_settle(workload *w);

#endif
