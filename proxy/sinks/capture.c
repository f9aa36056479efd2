/* The capture writer (capture.h). One mutex guards the queue and the drop
 * counters; the request path holds it for a pointer append. Everything
 * else (the file, the index-list table, record building) belongs to the
 * writer thread alone. */
#include "proxy/sinks/capture.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analyzers/catalog/index_cache.h"
#include "analyzers/engine/engine.h"
#include "analyzers/planner/index_set.h"
#include "proxy/sinks/log.h"
#include "proxy/stats/reply_scan.h"

#define LOGID_CAPTURE    5000
#define MAX_QUEUED_ITEMS 65536
#define INDEX_SLOTS      8192   /* namespaces whose index lists are followed */
#define INDEX_RECHECK_MS 1000   /* how often a namespace's list is looked at again */
#define EVENT_HOLD_US    100000 /* the longest a list or schema change waits (hold_event) */
#define FILE_PREFIX      "capture-"
#define FILE_SUFFIX      ".bson"

/* ITEM_LIST: an index list that landed in the cache (bytes: its "db.coll",
 * set: a reference to it), written where it landed among the requests.
 * ITEM_FORGET: the cache forgot a list (bytes: "db.coll", or "db" when id
 * is 1: all of it; verdict: why, "schema", "written" or "made"), in its order
 * among those. */
typedef enum { ITEM_REQUEST, ITEM_REPLY, ITEM_LIST, ITEM_FORGET } item_kind;

typedef struct item {
	struct item *next;
	item_kind kind;
	int64_t t_us;
	uint64_t conn;
	int32_t id; /* requestID, or a reply's responseTo */
	size_t len; /* bytes on the wire */
	uint8_t *bytes;
	size_t nbytes; /* bytes held (0: a reply too big to read) */
	char verdict[8];
	/* a request's: index_cache_changes when it was judged (judged: as
	 * block_info.judged_at says; else read after its verdict); a list's
	 * or a schema change's: the change count it made (its stamp) */
	uint64_t changes;
	bool judged;
	bson_t *counts; /* a request's "counts" (engine_counts), or NULL */
	index_set *set; /* ITEM_LIST's */
	char client[80];
	char app[128];
} item;

typedef struct ns_slot {
	char ns[256]; /* "" = free */
	index_set *last;
	int64_t checked_ms;
	uint64_t changes_seen; /* index_cache_changes at its last look */
	bool pending;          /* asked, no list yet */
} ns_slot;

struct capture_sink {
	capture_settings s;
	uint64_t max_file, max_total, queue_budget;
	int64_t event_hold_us; /* EVENT_HOLD_US, or the settings' override */
	char version[64];
	char instance[40];
	bson_t rules;
	index_cache *ic;

	pthread_mutex_t lock;
	pthread_cond_t wake;
	item *head, *tail;
	/* The writer's own: lists and schema changes taken from the queue but
	 * not written yet, oldest first (hold_event) */
	item *held, *held_tail;
	size_t nqueued;
	/* Written under the lock; atomic (relaxed) because the reply path also
	 * reads it without the lock, for its early budget check. A plain size_t
	 * there was a data race (ThreadSanitizer, multi-worker capture). */
	atomic_size_t queued_bytes;
	bool stopping;
	uint64_t dropped; /* since the last gap record */
	int64_t drop_from, drop_to;
	uint64_t dropped_total;
	atomic_uint_fast64_t replies_seen; /* for the reply sample */
	atomic_bool rotate_asked;          /* capture_sink_rotate(); the writer clears it */

	/* the writer's own */
	pthread_t thread;
	bool started;
	FILE *f;
	char path[1200];
	uint64_t file_bytes;
	int64_t file_opened_us;
	unsigned seq;
	ns_slot *slots;
	capture_stats st;
};

int64_t capture_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void capture_settings_defaults(capture_settings *s)
{
	memset(s, 0, sizeof *s);
	s->redact_literals = true;
	s->value_hashes = true;
	s->max_file_mb = 256;
	s->rotate_secs = 3600;
	s->max_total_mb = 4096;
	s->queue_mb = 64;
	s->max_reply_kb = 1024;
	s->reply_sample = 10;
}

/* ---- the request path ---- */

/* Appends it, or drops and counts it. Called with nothing held. */
static void item_free(item *it)
{
	if (it->set)
		index_set_release(it->set);
	if (it->counts)
		bson_destroy(it->counts);
	free(it->bytes);
	free(it);
}

static void enqueue(capture_sink *c, item *it)
{
	size_t cost = it->nbytes + sizeof(*it) + (it->counts ? it->counts->len : 0);
	pthread_mutex_lock(&c->lock);
	if (c->stopping || c->nqueued >= MAX_QUEUED_ITEMS ||
	    atomic_load_explicit(&c->queued_bytes, memory_order_relaxed) + cost > c->queue_budget) {
		if (!c->dropped)
			c->drop_from = it->t_us;
		c->drop_to = it->t_us;
		c->dropped++;
		c->dropped_total++;
		pthread_mutex_unlock(&c->lock);
		item_free(it);
		return;
	}
	if (c->tail)
		c->tail->next = it;
	else
		c->head = it;
	c->tail = it;
	c->nqueued++;
	atomic_fetch_add_explicit(&c->queued_bytes, cost, memory_order_relaxed);
	bool wake = c->nqueued == 1;
	pthread_mutex_unlock(&c->lock);
	if (wake)
		pthread_cond_signal(&c->wake);
}

static item *new_item(item_kind kind, const capture_origin *o)
{
	item *it = malloc(sizeof *it);
	if (!it)
		return NULL;
	it->next = NULL;
	it->kind = kind;
	it->t_us = o->t_us;
	it->conn = o->conn;
	it->bytes = NULL;
	it->nbytes = 0;
	it->set = NULL;
	it->counts = NULL;
	it->verdict[0] = '\0';
	snprintf(it->client, sizeof it->client, "%s", o->client ? o->client : "");
	snprintf(it->app, sizeof it->app, "%s", o->app ? o->app : "");
	return it;
}

static void count_drop(capture_sink *c, int64_t t_us)
{
	pthread_mutex_lock(&c->lock);
	if (!c->dropped)
		c->drop_from = t_us;
	c->drop_to = t_us;
	c->dropped++;
	c->dropped_total++;
	pthread_mutex_unlock(&c->lock);
}

void capture_sink_request(capture_sink *c, const capture_origin *o, const uint8_t *msg, size_t len,
                          const char *outcome, uint64_t judged_at, const engine_counts *counts)
{
	item *it = new_item(ITEM_REQUEST, o);
	if (it)
		it->bytes = malloc(len);
	if (!it || !it->bytes) {
		free(it);
		count_drop(c, o->t_us);
		return;
	}
	memcpy(it->bytes, msg, len);
	it->nbytes = it->len = len;
	snprintf(it->verdict, sizeof it->verdict, "%s", outcome);
	/* after the verdict: every list it could have been judged with is
	 * stamped this or less; judged_at says exactly where */
	it->judged = judged_at != 0;
	it->changes = it->judged ? judged_at : index_cache_changes(c->ic);
	if (counts && counts->n) {
		it->counts = bson_new();
		for (unsigned i = 0; i < counts->n && i < ENGINE_COUNTS_MAX; i++)
			BSON_APPEND_INT64(it->counts, counts->at[i].ns, counts->at[i].docs);
	}
	enqueue(c, it);
}

uint8_t *capture_sink_reply_buffer(capture_sink *c, size_t len)
{
	if (len > (size_t)c->s.max_reply_kb * 1024)
		return NULL;
	/* An unlocked look at the budget is enough: enqueue() decides for real. */
	if (atomic_load_explicit(&c->queued_bytes, memory_order_relaxed) + len > c->queue_budget)
		return NULL;
	return malloc(len);
}

void capture_sink_reply(capture_sink *c, const capture_origin *o, int32_t response_to, size_t len,
                        uint8_t *bytes)
{
	item *it = new_item(ITEM_REPLY, o);
	if (!it) {
		free(bytes);
		count_drop(c, o->t_us);
		return;
	}
	it->id = response_to;
	it->len = len;
	it->bytes = bytes;
	it->nbytes = bytes ? len : 0;
	enqueue(c, it);
}

/* ---- files ---- */

static void log_capture(log_severity sev, const char *msg, const char *path, const char *why)
{
	log_line *l = log_begin(sev, "CONTROL", LOGID_CAPTURE, NULL, msg);
	if (path)
		log_attr_str(l, "path", path);
	if (why)
		log_attr_str(l, "reason", why);
	log_end(l);
}

static void write_doc(capture_sink *c, const bson_t *b)
{
	if (!c->f)
		return;
	if (fwrite(bson_get_data(b), 1, b->len, c->f) != b->len) {
		log_capture(LOG_ERROR, "Capture file write failed; capture stops", c->path,
		            strerror(errno));
		fclose(c->f);
		c->f = NULL;
		return;
	}
	c->file_bytes += b->len;
	c->st.records++;
}

/* The listIndexes documents the index set was read from, as the server
 * gave them (index_def.spec), so that index_set_from_specs rebuilds in the
 * report the very definitions the live path judged with: until stop 44
 * they were rebuilt from the definitions and lost `unique`, the partial
 * filter, a 2dsphere key's kind, the wildcard projection, the TTL. A
 * redacted capture gets the partial filter's values replaced, as a
 * request's (capture_redact_index_spec). Each index's multikey facts from
 * explain follow (INDEX_SPEC_MULTIKEY), which listIndexes does not give. */
static size_t specs_of(const index_set *s, bool redact, bson_t **out)
{
	size_t n = index_set_count(s);
	for (size_t i = 0; i < n; i++) {
		const index_def *d = index_set_get(s, i);
		bson_t *b = bson_new();
		if (d->spec && redact)
			capture_redact_index_spec(d->spec, b);
		else if (d->spec)
			bson_concat(b, d->spec);
		if (d->multikey_known)
			BSON_APPEND_INT64(b, INDEX_SPEC_MULTIKEY, d->multikey_keys);
		out[i] = b;
	}
	return n;
}

static void write_snapshot(capture_sink *c, const char *ns, const index_set *s)
{
	const char *why = NULL;
	bson_t rec;
	if (index_set_is_opaque(s, &why)) {
		capture_build_indexes(&rec, capture_now_us(), ns, NULL, 0, why ? why : "opaque",
		                      -1);
	} else {
		size_t n = index_set_count(s);
		bson_t **specs = calloc(n ? n : 1, sizeof *specs);
		if (!specs)
			return;
		specs_of(s, c->s.redact_literals, specs);
		/* the count it landed with, as a late call reads it; a request
		 * judged on time has the count it read in its own record */
		capture_build_indexes(&rec, capture_now_us(), ns, (const bson_t *const *)specs, n,
		                      NULL, index_set_read_count(s));
		for (size_t i = 0; i < n; i++)
			bson_destroy(specs[i]);
		free(specs);
	}
	write_doc(c, &rec);
	bson_destroy(&rec);
}

typedef struct cap_file {
	char name[512];
	time_t mtime;
	off_t size;
} cap_file;

static int cmp_files(const void *a, const void *b)
{
	const cap_file *x = a, *y = b;
	if (x->mtime != y->mtime)
		return x->mtime < y->mtime ? -1 : 1;
	return strcmp(x->name, y->name);
}

static bool is_capture_name(const char *n)
{
	size_t l = strlen(n), sl = strlen(FILE_SUFFIX);
	return strncmp(n, FILE_PREFIX, strlen(FILE_PREFIX)) == 0 && l > sl &&
	       strcmp(n + l - sl, FILE_SUFFIX) == 0;
}

/* The total cap: oldest capture files first, never the one being written. */
static void enforce_cap(capture_sink *c)
{
	DIR *d = opendir(c->s.dir);
	if (!d)
		return;
	cap_file *files = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!is_capture_name(e->d_name))
			continue;
		char p[1600];
		struct stat sb;
		snprintf(p, sizeof p, "%s/%s", c->s.dir, e->d_name);
		if (stat(p, &sb) != 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			cap_file *nf = realloc(files, cap * sizeof *files);
			if (!nf)
				break;
			files = nf;
		}
		snprintf(files[n].name, sizeof files[n].name, "%s", e->d_name);
		files[n].mtime = sb.st_mtime;
		files[n].size = sb.st_size;
		total += (uint64_t)sb.st_size;
		n++;
	}
	closedir(d);
	qsort(files, n, sizeof *files, cmp_files);
	for (size_t i = 0; i < n && total > c->max_total; i++) {
		char p[1600];
		snprintf(p, sizeof p, "%s/%s", c->s.dir, files[i].name);
		if (strcmp(p, c->path) == 0)
			continue;
		if (unlink(p) == 0) {
			total -= (uint64_t)files[i].size;
			c->st.deleted++;
			log_capture(LOG_INFO, "Capture file deleted (capture.maxTotalSizeMB)", p,
			            NULL);
		}
	}
	free(files);
}

/* A new file: the header first, then every index list known so far, so
 * each file can be read alone. */
static void open_file(capture_sink *c)
{
	if (c->f)
		fclose(c->f);
	int64_t now = capture_now_us();
	time_t secs = (time_t)(now / 1000000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	snprintf(c->path, sizeof c->path,
	         "%s/" FILE_PREFIX "%04d%02d%02dT%02d%02d%02d-%ld-%04u" FILE_SUFFIX, c->s.dir,
	         tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
	         (long)getpid(), c->seq++);
	c->f = fopen(c->path, "wb");
	c->file_bytes = 0;
	c->file_opened_us = now;
	if (!c->f) {
		log_capture(LOG_ERROR, "Cannot open a capture file; capture stops", c->path,
		            strerror(errno));
		return;
	}
	c->st.files++;
	bson_t h;
	capture_build_header(&h, c->version, c->instance, c->s.redact_literals, now, &c->rules);
	capture_header_value_hashes(&h, c->s.value_hashes);
	write_doc(c, &h);
	bson_destroy(&h);
	for (size_t i = 0; c->slots && i < INDEX_SLOTS; i++)
		if (c->slots[i].ns[0] && c->slots[i].last)
			write_snapshot(c, c->slots[i].ns, c->slots[i].last);
	enforce_cap(c);
}

static void maybe_rotate(capture_sink *c)
{
	if (!c->f)
		return;
	bool by_size = c->file_bytes >= c->max_file;
	bool by_age = c->s.rotate_secs &&
	              capture_now_us() - c->file_opened_us >= (int64_t)c->s.rotate_secs * 1000000;
	bool asked = atomic_exchange(&c->rotate_asked, false);
	if (by_size || by_age || asked)
		open_file(c);
}

void capture_sink_rotate(capture_sink *c)
{
	if (!c)
		return;
	atomic_store(&c->rotate_asked, true);
	pthread_mutex_lock(&c->lock);
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->lock);
}

/* ---- index lists ---- */

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Whether ns ("db.coll") is an application's, whose lists are followed:
 * none of system.*, nor of the admin, config and local databases. */
static bool followed(const capture_sink *c, const char *ns)
{
	const char *dot = strchr(ns, '.');
	return c->slots && dot && strncmp(dot + 1, "system.", 7) != 0 &&
	       strncmp(ns, "admin.", 6) != 0 && strncmp(ns, "config.", 7) != 0 &&
	       strncmp(ns, "local.", 6) != 0;
}

/* ns's slot, taken on first use; NULL when every slot is taken (namespaces
 * beyond INDEX_SLOTS are not followed). */
static ns_slot *slot_of(capture_sink *c, const char *ns)
{
	size_t i = fnv(ns) % INDEX_SLOTS, probes = 0;
	while (c->slots[i].ns[0] && strcmp(c->slots[i].ns, ns) != 0) {
		if (++probes == INDEX_SLOTS)
			return NULL;
		i = (i + 1) % INDEX_SLOTS;
	}
	if (!c->slots[i].ns[0])
		snprintf(c->slots[i].ns, sizeof c->slots[i].ns, "%s", ns);
	return &c->slots[i];
}

/* s (a reference the slot takes) as sl's list: written when it is not the
 * one written last. Its count is the one it landed with, which never
 * moves: the writes relayed since move the proxy's estimate at moments no
 * record's place can stand for, and the requests keep what they read. */
static void note_list(capture_sink *c, ns_slot *sl, index_set *s)
{
	if (s == sl->last) {
		index_set_release(s);
		return;
	}
	if (sl->last)
		index_set_release(sl->last);
	sl->last = s;
	write_snapshot(c, sl->ns, s);
}

/* Looks at ns's list now and then; a list not seen before is written. The
 * look is due when a second has passed, or at once when lists have landed
 * since the last (changes, a request's or the writer's): a list that
 * landed between a request's judgement and this look stays unwritten
 * until a request judged after it comes (its stamp is above changes), so
 * the report judges each request with the list its verdict had. */
static void check_indexes(capture_sink *c, const char *db, const char *coll, uint64_t changes)
{
	char ns[256];
	if (!c->ic || !db[0] || !coll[0])
		return;
	snprintf(ns, sizeof ns, "%s.%s", db, coll);
	if (!followed(c, ns))
		return;
	ns_slot *sl = slot_of(c, ns);
	if (!sl)
		return;
	/* never ahead of a list or schema change still held (hold_event) */
	if (c->held && c->held->changes <= changes)
		changes = c->held->changes - 1;
	int64_t now = mono_ms();
	if (sl->changes_seen == changes && now - sl->checked_ms < INDEX_RECHECK_MS)
		return;
	sl->checked_ms = now;
	sl->changes_seen = changes;
	index_set *s = NULL;
	index_lookup r = index_cache_get(c->ic, db, coll, &s);
	sl->pending = r == INDEXES_PENDING;
	if (r != INDEXES_KNOWN)
		return;
	if (index_set_stamp(s) > changes) {
		index_set_release(s);
		return;
	}
	note_list(c, sl, s);
}

/* A list that landed in the cache (the cache's hook enqueued it where it
 * landed among the requests): written, so a late verdict given with it is
 * judged with it offline even when a schema change made the cache forget it
 * before the writer looked again. */
static void write_list(capture_sink *c, const char *ns, index_set *s)
{
	if (!followed(c, ns))
		return;
	ns_slot *sl = slot_of(c, ns);
	if (!sl)
		return;
	sl->pending = false;
	note_list(c, sl, index_set_retain(s));
}

/* Namespaces asked about but not answered yet get another look. changes:
 * index_cache_changes when the batch just written was taken; every request
 * judged before then was in it. */
static void recheck_pending(capture_sink *c, uint64_t changes)
{
	for (size_t i = 0; c->slots && i < INDEX_SLOTS; i++) {
		ns_slot *sl = &c->slots[i];
		if (!sl->ns[0] ||
		    (!sl->pending && mono_ms() - sl->checked_ms < 10 * INDEX_RECHECK_MS))
			continue;
		char db[128];
		const char *dot = strchr(sl->ns, '.');
		if (!dot || (size_t)(dot - sl->ns) >= sizeof db)
			continue;
		memcpy(db, sl->ns, (size_t)(dot - sl->ns));
		db[dot - sl->ns] = '\0';
		check_indexes(c, db, dot + 1, changes);
	}
}

/* ---- records ---- */

static void write_request(capture_sink *c, const item *it)
{
	request r;
	wire_error err = {0};
	if (request_decode(&r, it->bytes, it->nbytes, &err) == REQUEST_COMMAND) {
		/* its collection's list first: one that landed before its
		 * verdict precedes it (check_indexes) */
		bson_iter_t bi;
		if (r.view.db && bson_iter_init(&bi, &r.view.body) && bson_iter_next(&bi) &&
		    BSON_ITER_HOLDS_UTF8(&bi))
			check_indexes(c, r.view.db, bson_iter_utf8(&bi, NULL), it->changes);
		capture_origin o = {it->t_us, it->conn, it->client, it->app};
		bson_t rec;
		capture_build_request(&rec, &o, &r, c->s.redact_literals, it->verdict);
		if (it->counts)
			BSON_APPEND_DOCUMENT(&rec, "counts", it->counts);
		/* a keyed read's values, as client-side-join looks them up in
		 * a parent's (salted hashes: never the values), unless the
		 * operator left them out (capture.valueHashes: false) */
		uint64_t vh[CAPTURE_VALUE_HASHES_MAX];
		uint32_t nvh = c->s.value_hashes
		                   ? engine_value_hashes(&r.view, vh, CAPTURE_VALUE_HASHES_MAX)
		                   : 0;
		if (nvh)
			capture_append_hashes(&rec, vh, nvh);
		write_doc(c, &rec);
		bson_destroy(&rec);
	}
	request_release(&r);
}

static void write_reply(capture_sink *c, const item *it)
{
	capture_origin o = {it->t_us, it->conn, it->client, it->app};
	capture_reply_facts f;
	bson_t rec;
	bool sample = false;
	if (it->bytes) {
		uint64_t nth = atomic_fetch_add(&c->replies_seen, 1);
		sample = c->s.reply_sample <= 1 || nth % c->s.reply_sample == 0;
		capture_reply_inspect(it->bytes, it->nbytes, sample, &f);
		/* the values client-side-join was told, as the live proxy read
		 * them (replies.c, batch_values): salted hashes' bits; none with
		 * capture.valueHashes: false */
		reply_scan sc;
		if (c->s.value_hashes && reply_scan_read(it->bytes, it->nbytes, &sc) && sc.ok &&
		    sc.n >= 2)
			f.has_vals = reply_scan_values(&sc, &f.vals);
	}
	capture_build_reply(&rec, &o, it->id, it->len, it->bytes ? &f : NULL);
	write_doc(c, &rec);
	bson_destroy(&rec);
	if (it->bytes)
		capture_reply_facts_free(&f);
}

static void write_forget(capture_sink *c, const item *it)
{
	char *ns = (char *)it->bytes, *dot = strchr(ns, '.');
	bson_t rec;
	if (!it->id && dot)
		*dot = '\0'; /* db, then coll */
	capture_build_forget(&rec, it->t_us, ns, !it->id && dot ? dot + 1 : NULL, it->verdict);
	write_doc(c, &rec);
	bson_destroy(&rec);
}

static void write_gap(capture_sink *c, uint64_t dropped, int64_t from, int64_t to)
{
	bson_t rec;
	capture_build_gap(&rec, capture_now_us(), dropped, from, to);
	write_doc(c, &rec);
	bson_destroy(&rec);
	log_line *l = log_begin(LOG_WARNING, "CONTROL", LOGID_CAPTURE, NULL,
	                        "Capture queue full: records dropped (traffic unaffected)");
	log_attr_int(l, "dropped", (int64_t)dropped);
	log_attr_str(l, "path", c->path);
	log_end(l);
}

/* A list that landed or a schema change comes off the queue: it waits
 * there until a request judged after it comes (its judged_at at or above
 * the event's stamp), so a request judged before it, which its worker
 * queued a moment after the event, is written before it; or until it has
 * waited EVENT_HOLD_US, when every request judged before it has long
 * been queued. Stamps grow in queue order (both are queued under the
 * cache's lock), so what is written is always the oldest held. */
static void hold_event(capture_sink *c, item *it)
{
	it->next = NULL;
	if (c->held_tail)
		c->held_tail->next = it;
	else
		c->held = it;
	c->held_tail = it;
}

/* Writes the held events stamped upto or less, or held since before_us. */
static void write_held(capture_sink *c, uint64_t upto, int64_t before_us)
{
	while (c->held && (c->held->changes <= upto || c->held->t_us <= before_us)) {
		item *it = c->held;
		c->held = it->next;
		if (!c->held)
			c->held_tail = NULL;
		if (it->kind == ITEM_LIST)
			write_list(c, (const char *)it->bytes, it->set);
		else
			write_forget(c, it);
		item_free(it);
		maybe_rotate(c);
	}
}

static void *writer_main(void *arg)
{
	capture_sink *c = arg;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->head && !c->stopping && !c->dropped && !atomic_load(&c->rotate_asked)) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			if (pthread_cond_timedwait(&c->wake, &c->lock, &ts) == ETIMEDOUT)
				break;
		}
		item *batch = c->head;
		/* every request judged before this read is in the batch, but one
		 * whose worker read the count and had not taken the lock yet: a
		 * moment's race, after which its record may follow a list that
		 * landed after its verdict */
		uint64_t changes = index_cache_changes(c->ic);
		c->head = c->tail = NULL;
		c->nqueued = 0;
		atomic_store_explicit(&c->queued_bytes, 0, memory_order_relaxed);
		uint64_t dropped = c->dropped;
		int64_t from = c->drop_from, to = c->drop_to;
		c->dropped = 0;
		bool stop = c->stopping;
		pthread_mutex_unlock(&c->lock);

		while (batch) {
			item *next = batch->next;
			if (batch->kind == ITEM_LIST || batch->kind == ITEM_FORGET) {
				hold_event(c, batch);
				batch = next;
				continue;
			}
			if (batch->kind == ITEM_REQUEST) {
				if (batch->judged)
					write_held(c, batch->changes, 0);
				write_request(c, batch);
			} else {
				write_reply(c, batch);
			}
			item_free(batch);
			batch = next;
			maybe_rotate(c);
		}
		write_held(c, stop ? UINT64_MAX : 0, capture_now_us() - c->event_hold_us);
		if (dropped)
			write_gap(c, dropped, from, to);
		recheck_pending(c, changes);
		maybe_rotate(c);
		if (c->f)
			fflush(c->f);
		pthread_mutex_lock(&c->lock);
		if (stop && !c->head)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	index_cache_thread_end(); /* the reference its last look kept */
	return NULL;
}

/* ---- life ---- */

/* An item for one of the index cache's hooks: ns copied, its stamp.
 * NULL when out of memory. */
static item *cache_event(item_kind kind, const char *ns, uint64_t stamp)
{
	capture_origin o = {capture_now_us(), 0, NULL, NULL};
	item *it = new_item(kind, &o);
	if (it && !(it->bytes = (uint8_t *)strdup(ns))) {
		free(it);
		return NULL;
	}
	if (it) {
		it->nbytes = strlen(ns) + 1;
		it->changes = stamp;
	}
	return it;
}

/* The index cache's landed hook (index_cache_set_hooks), on its thread
 * under its lock: the list goes to the queue like a request. */
static void on_landed(void *arg, const char *ns, index_set *set)
{
	item *it = cache_event(ITEM_LIST, ns, index_set_stamp(set));
	if (!it) {
		index_set_release(set);
		return;
	}
	it->set = set;
	enqueue(arg, it);
}

/* Its forget hook, on the thread that made the cache forget, under the
 * cache's lock. */
static void on_forget(void *arg, const char *ns, bool whole_db, uint64_t stamp, index_forget why)
{
	item *it = cache_event(ITEM_FORGET, ns, stamp);
	if (!it) {
		count_drop(arg, capture_now_us());
		return;
	}
	it->id = whole_db;
	snprintf(it->verdict, sizeof it->verdict, "%s",
	         why == INDEX_FORGET_SCHEMA ? "schema"
	         : why == INDEX_FORGET_MADE ? "made"
	                                    : "written");
	enqueue(arg, it);
}

capture_sink *capture_sink_new(const capture_settings *s, const char *version, const bson_t *rules,
                               index_cache *ic, char *err, size_t errlen)
{
	if (mkdir(s->dir, 0755) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "capture directory %s: %s", s->dir, strerror(errno));
		return NULL;
	}
	struct stat sb;
	if (stat(s->dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(s->dir, W_OK) != 0) {
		snprintf(err, errlen, "capture directory %s is not a writable directory", s->dir);
		return NULL;
	}
	capture_sink *c = calloc(1, sizeof *c);
	if (!c || !(c->slots = calloc(INDEX_SLOTS, sizeof *c->slots))) {
		free(c);
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	c->s = *s;
	c->max_file = s->max_file_bytes ? s->max_file_bytes : (uint64_t)s->max_file_mb << 20;
	c->max_total = s->max_total_bytes ? s->max_total_bytes : (uint64_t)s->max_total_mb << 20;
	c->queue_budget = s->queue_bytes ? s->queue_bytes : (uint64_t)s->queue_mb << 20;
	c->event_hold_us = s->event_hold_us ? (int64_t)s->event_hold_us : EVENT_HOLD_US;
	snprintf(c->version, sizeof c->version, "%s", version);
	snprintf(c->instance, sizeof c->instance, "%ld-%lld", (long)getpid(),
	         (long long)capture_now_us());
	if (rules)
		bson_copy_to(rules, &c->rules);
	else
		bson_init(&c->rules);
	c->ic = ic;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	if (ic)
		index_cache_set_hooks(ic, on_landed, on_forget, c);
	return c;
}

bool capture_sink_start(capture_sink *c, char *err, size_t errlen)
{
	open_file(c);
	if (!c->f) {
		snprintf(err, errlen, "cannot create a capture file in %s: %s", c->s.dir,
		         strerror(errno));
		return false;
	}
	if (pthread_create(&c->thread, NULL, writer_main, c) != 0) {
		snprintf(err, errlen, "cannot start the capture writer thread");
		return false;
	}
	c->started = true;
	char what[160];
	snprintf(what, sizeof what, "%s%s",
	         c->s.redact_literals ? "redacted shapes (capture.redactLiterals: true)"
	                              : "whole requests (capture.redactLiterals: false)",
	         c->s.value_hashes ? "" : "; no value hashes (capture.valueHashes: false)");
	log_capture(LOG_INFO, "Capturing traffic", c->path, what);
	return true;
}

void capture_sink_get_stats(capture_sink *c, capture_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	st->dropped = c->dropped_total;
	pthread_mutex_unlock(&c->lock);
}

void capture_sink_free(capture_sink *c, capture_stats *final)
{
	if (!c)
		return;
	if (c->ic) /* a metadata thread still out (abandoned) calls it no more */
		index_cache_set_hooks(c->ic, NULL, NULL, NULL);
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_mutex_unlock(&c->lock);
	pthread_cond_signal(&c->wake);
	if (c->started)
		pthread_join(c->thread, NULL);
	for (item *it = c->head, *next; it; it = next) {
		next = it->next;
		item_free(it);
	}
	if (c->f)
		fclose(c->f);
	if (final) {
		*final = c->st;
		final->dropped = c->dropped_total;
	}
	for (size_t i = 0; i < INDEX_SLOTS; i++)
		if (c->slots[i].last)
			index_set_release(c->slots[i].last);
	free(c->slots);
	bson_destroy(&c->rules);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->wake);
	free(c);
}
