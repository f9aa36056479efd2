/* The rule engine: one entry point the proxy calls for every request.
 *
 * engine_analyze() reads a command view, runs every rule that applies to the
 * request's namespace and client application, reports findings through the
 * sink (deduplicated: the first occurrence of a rule+shape at once, repeats
 * counted and reported by engine_flush_summaries()), and returns what the
 * proxy must do with the request. It is safe to call from many worker
 * threads at once; shared state (the dedupe table, hot-path counters) is
 * behind the engine's own locks, taken only when a rule fires or an
 * aggregation joins. */
#ifndef MG_ANALYZERS_ENGINE_ENGINE_H
#define MG_ANALYZERS_ENGINE_ENGINE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analyzers/engine/finding.h"
#include "analyzers/engine/rule_config.h"
#include "protocol/byte_template.h"
#include "protocol/cmdview.h"
#include "protocol/commands.h"
#include "protocol/keyed_filter.h"
#include "protocol/value_filter.h"

typedef struct index_cache index_cache;
typedef struct engine engine;

/* What the proxy does with the request. */
typedef enum {
	VERDICT_FORWARD,      /* send it on unchanged */
	VERDICT_BLOCK,        /* do not forward; answer with the block error */
	VERDICT_WAIT_INDEXES, /* index list not known yet, and a rule that reads it
	                         could block or dry-run the request: hold it and call
	                         engine_analyze() again once index_cache says it
	                         changed, or with no_wait set when the wait ends */
} verdict;

/* The facts the index-aware rules read (a namespace's index list and
 * document count) are looked up before any check runs. When they are not
 * known yet and none of those rules could block or dry-run the request
 * there, the verdict is given without them and they are owed: the proxy
 * forwards at once, keeps a copy, and calls engine_analyze() again with
 * `late` set once the index cache changes. That call runs only the rules
 * owed, at the namespaces they are owed at, and marks their findings late;
 * it can owe them again (still unknown). A rule owed at a namespace a
 * schema change named after the request went on (a createIndex or a drop
 * passed: index_cache_schema_changed) gives no verdict: the list fetched
 * since need not be the one the request ran with. */
enum { ENGINE_LATE_MAX = 4 };

typedef struct engine_late {
	unsigned n;
	struct {
		uint64_t ns_hash; /* engine_ns_hash("db.coll") */
		uint32_t rules;   /* bit r: rule_id r */
		uint32_t kinds;   /* which of their checks (the engine's own bits) */
	} at[ENGINE_LATE_MAX];
	uint32_t lost;    /* owed where no room was left: never judged (counted) */
	uint32_t changed; /* owed where a schema change passed since: never judged (counted) */
	uint64_t since;   /* index_cache_schema_seq before the request went on */
	/* index_cache_changes then: the late call judges with the first list
	 * that landed after it (index_cache_landed_after) */
	uint64_t since_change;
	/* The lists that were not known (engine_ns_hash of their "db.coll";
	 * more than ENGINE_LATE_MAX: any): a late call runs the rules owed at
	 * a namespace whole, and reports only from a check that read one of
	 * them (or of a rule owed whole, its checks never run on time), so
	 * nothing found on time is found twice. */
	unsigned nwaited;
	bool waited_any;
	uint64_t waited[ENGINE_LATE_MAX];
} engine_late;

uint64_t engine_ns_hash(const char *ns);

/* A connection's repeat: its last query (find, count, distinct,
 * findAndModify) judged without calling any check, a find by _id say, as
 * the template of its next requests. Drivers send a few query shapes over
 * and over with other values. A request whose body has the template's
 * bytes but in the spans the read of its filter and update did not look
 * at (facts.h, facts_spans; matched as protocol/byte_template.h matches a
 * batch's statements) is judged as the template was: forwarded, nothing
 * found, no check called. It is not read at all.
 *
 * The judgement is a function of the body's bytes, the engine (its
 * configuration: a reload makes a new engine) and the application name, so
 * the template is of one engine and one name; OP_MSG bodies of 8 to 512
 * bytes without document sequences; never a late call. The index cache is
 * not among its inputs: with no check called nothing reads the index list
 * (a request that would have waited for one is forwarded at once, with the
 * same verdict). Owned by the connection, which passes its slot in
 * request_ctx.repeat: engine_analyze makes it on first use (one allocation
 * a connection, about 1.2 KiB), engine_repeat_free frees it. */
typedef struct engine_repeat engine_repeat;

void engine_repeat_free(engine_repeat *r);

/* How many requests r's templates judged (NULL: 0). */
uint64_t engine_repeat_hits(const engine_repeat *r);

/* How many times r's template was made anew (NULL: 0): a request that
 * changed it is the one the next hits repeat, so a caller that keys
 * something on the request (the workload's shape) keeps that key for them. */
uint64_t engine_repeat_sets(const engine_repeat *r);

/* A connection's reads in order, for the rules that follow them
 * (client-side-join: a read of one collection, then one keyed read of
 * another per document it returned). Owned by the connection, which passes
 * its slot in request_ctx.track: engine_analyze makes it on first use (one
 * allocation a connection, under 2 KiB) when such a rule is not off, and
 * describes every request to it, one a repeat template judges included.
 * When a reply to a request comes back, the connection tells the engine
 * how many documents it held (a find's or aggregate's first batch, a
 * getMore's next batch; -1 when not known or not a cursor), and, for a
 * first batch of two or more, the values its first documents held
 * (protocol/value_filter.h; NULL when not known: a reply that streamed
 * uncaptured, a getMore's, one of a capture older than version 5):
 * engine_note_reply, with the engine that analysed the request (a track
 * made by an earlier engine is ignored until the next request resets it).
 * The report's replay does the same from a capture's records. Not
 * thread-safe: one connection, one thread at a time, as the repeat. */
typedef struct engine_conn_track engine_conn_track;

void engine_conn_track_free(engine_conn_track *t);
void engine_note_reply(engine *e, engine_conn_track *t, int64_t ndocs, const value_filter *vals,
                       int64_t now_ms);
/* Whether the last request's reply count is worth telling: it was a read,
 * and not one of at most one document (a find with limit 1 or by an _id
 * value, which can start no join). False for NULL. The caller skips reading
 * the reply otherwise. */
bool engine_track_wants_count(const engine_conn_track *t);

/* The document counts a request's verdict read (the collection-scan rule
 * weighs a collection's estimated count against minDocuments), one per
 * collection: the first read of each stands for the request's later ones.
 * The estimate moves at every insert's and delete's reply, on any worker,
 * so no order of a capture's records can say which of those moves a
 * request read before: the live path keeps the counts it read
 * (block_info.counts), the capture writes them with the request, and the
 * report's replay judges with them (request_ctx.counts). A late call reads
 * the count its list landed with instead (index_set_read_count), which is
 * the one the capture's snapshot of that list holds. Beyond
 * ENGINE_COUNTS_MAX collections a request's further counts are read and
 * not kept. */
enum { ENGINE_COUNTS_MAX = 4, ENGINE_COUNTS_NS_LEN = 256 };

typedef struct engine_counts {
	unsigned n;
	struct {
		char ns[ENGINE_COUNTS_NS_LEN]; /* "db.coll" (the server allows 255 bytes) */
		int64_t docs;                  /* -1: unknown */
	} at[ENGINE_COUNTS_MAX];
} engine_counts;

/* Who sent the request. */
typedef struct request_ctx {
	const char *app_name;      /* from the handshake, "" if none */
	const char *client;        /* "host:port" */
	uint64_t conn;             /* the connection's number (its log lines' "connN"); 0: none */
	int64_t now_ms;            /* monotonic milliseconds */
	bool no_wait;              /* true: an unknown index list means "no verdict", never WAIT */
	const engine_late *late;   /* non-NULL: a late call (see engine_late) */
	engine_repeat **repeat;    /* the connection's repeat slot (see above), or NULL: none */
	engine_conn_track **track; /* the connection's reads (see above), or NULL: none */
	/* The request's literals are placeholders (a redacted capture's
	 * replay): two equal ones are not two reads of one value. */
	bool placeholders;
	/* The counts the live verdict read (a capture's replay), or NULL: a
	 * collection's count is read from its index list (engine_counts). */
	const engine_counts *counts;
	/* The hashes of the values a keyed read looks up, as the capture kept
	 * them (engine_value_hashes, its record's `vh`), or NULL; hashes_only
	 * (a replay): values are never hashed here, the live process's salt
	 * being its secret (value_filter.h). */
	const uint64_t *value_hashes;
	uint32_t nvalue_hashes;
	bool hashes_only;
	/* How a keyed read's key is taken: as live (0), or as the proxy that
	 * wrote a replayed capture took it (its format version;
	 * protocol/keyed_filter.h, rule_api.h). */
	keyed_mode key_mode;
	/* The decoder's template the request matched (request_template.h), or
	 * 0: decoded_gen names it (unique on the connection, never 0), and
	 * decoded_spans (offsets into the body) are where two requests that
	 * matched it may differ. Every other byte of their bodies is the
	 * same, so the repeat template, once a request that matched both
	 * showed it, compares only those spans' bytes. */
	uint64_t decoded_gen;
	const byte_spans *decoded_spans;
	/* The caller's clock (monotonic ns), or NULL: read once the request
	 * is known not to be judged as its template was (block_info.started_ns),
	 * for a caller whose last reading is shared with requests before. */
	int64_t (*clock_ns)(void);
} request_ctx;

/* The next request of a pipelined run, whose body (its kind-0 section's
 * document, len bytes) matched the decoder's template rc->decoded_gen
 * names, as the request before it did: true when engine_analyze would
 * judge it as its template was (block_info.by_template) without reading
 * it, and counted as engine_analyze counts that (the repeat's hit, the
 * track's point); false, with nothing changed, when that cannot be told
 * from its narrowed words alone: engine_analyze judges it then. noted:
 * the request before it, in the same read and with the same rc, was judged
 * so here: the track's point it noted stands, since nothing has read the
 * track since, and is not asked again. */
bool engine_repeat_again(engine *e, const request_ctx *rc, const uint8_t *body, uint32_t len,
                         bool noted);

/* The hashes (value_filter.h, value_hash; 0 for a value no filter holds)
 * of the values v looks up, in its filter's order, when it is a find or
 * aggregate by one field's value or values, as client-side-join reads it
 * (rule_api.h, rule_read_filter); at most max kept: how many. What a
 * capture keeps of a request so that the report asks a parent's values
 * what the live proxy asked, without the values. */
uint32_t engine_value_hashes(const cmdview *v, uint64_t *out, uint32_t max);

/* What comes with a verdict: for VERDICT_BLOCK, what the client is told;
 * with any verdict, the rules owed late and those given no verdict for
 * good (their facts did not come within the wait: no_wait). */
typedef struct block_info {
	rule_id rule;
	char errmsg[1024];
	engine_late late;
	uint32_t skipped; /* bit r: rule r gave no verdict, its facts unknown */
	/* an update statement the engine read says upsert: true (a batch's
	 * statements a template stood for are not read: its first is) */
	bool upsert;
	/* index_cache_changes at the last index list the request was judged
	 * with (read under the cache's lock; 0: it looked none up): the
	 * capture writes the request after every list landing and schema
	 * change up to it, before any later one (proxy/sinks/capture.h) */
	uint64_t judged_at;
	/* the document counts the verdict read (not a late call's), for the
	 * capture (engine_counts) */
	engine_counts counts;
	/* judged as the connection's template was, unread (engine_repeat):
	 * mongoguard_analysis_repeats_total, and not timed */
	bool by_template;
	/* request_ctx.clock_ns's reading where the analysis began (not
	 * by_template), or 0: none was asked for */
	int64_t started_ns;
} block_info;

/* cfg is copied. ic may be NULL (index-aware rules then give no verdict). */
engine *engine_new(const engine_config *cfg, index_cache *ic, engine_sink_fn sink, void *sink_arg);
void engine_free(engine *e);

/* Counts every finding when it happens (finding.h); call before the engine
 * is shared. */
void engine_set_tally(engine *e, engine_tally_fn fn, void *arg);

verdict engine_analyze(engine *e, const cmdview *v, const request_ctx *rc, block_info *block);

/* Could engine_analyze() answer VERDICT_BLOCK under this configuration for
 * a command of this name (NULL: not known yet)? An `insert` is read only by
 * document checks, so it can be blocked only when one of those is at block;
 * anything else, when any rule is. A rule counts when its action or any of
 * its scopes' is block. The proxy relays a large request while it is still
 * arriving only when the answer is no (proxy/session/session.c). */
bool engine_may_block(const engine *e, const char *command);

/* Tells the engine a command that changes indexes or collections has
 * completed, so the index cache drops what it knew about ns ("db.coll", or
 * "db" for a whole database). Called by the proxy when the reply passes. */
void engine_note_ddl(engine *e, const cmdview *v);

/* The three below take the command's table id as the request was decoded
 * with it (cmd_find of v->name, looked up once: request.cmd), so a
 * command the table knows costs no name lookup; CMD_NONE for a name it
 * does not know. */

/* True for the commands engine_note_ddl() acts on (createIndexes,
 * dropIndexes / deleteIndexes, drop, collMod, create, convertToCapped,
 * cloneCollectionAsCapped, dropDatabase, renameCollection; an unknown name
 * is compared without case), so the proxy can tell which replies to
 * report. */
bool engine_is_ddl(const cmdview *v, cmd_id id);

/* What a command named `name` changes, when engine_note_ddl() acts on it:
 * one collection, its first value (ENGINE_DDL_ONE), or more (a database;
 * a rename's or a clone's two: ENGINE_DDL_WIDER). 0 for any other. */
enum { ENGINE_DDL_ONE = 1, ENGINE_DDL_WIDER = 2 };
int engine_ddl_scope(const char *name);

/* Writes the index cache's document counts follow: for an insert
 * (ENGINE_WRITE_INSERT) or a delete (_DELETE), "db.coll" into ns (cap
 * bytes); 0 for anything else, or without an index cache. The proxy reads
 * n from the write's reply and calls engine_note_docs(e, ns, +n or -n). */
enum {
	ENGINE_WRITE_DELETE = -1,
	ENGINE_WRITE_INSERT = 1,
	ENGINE_WRITE_UPSERT = 2, /* engine_upsert_ns's (below): the proxy's and the replay's kind */
};
int engine_write_ns(const engine *e, const cmdview *v, cmd_id id, char *ns, size_t cap);
/* An upsert (a findAndModify with upsert true, or an update whose
 * statements say upsert: true as its judgement read them, read_upsert:
 * block_info.upsert), asked after the request was judged: "db.coll" into
 * ns. When its reply passes, the proxy calls engine_note_made(e, ns): the
 * collection exists now, so a list that says it does not, or one fetched
 * while the upsert was on its way, is not kept (index_cache_note_made). Its
 * reply is not read: a findAndModify's may hold a large document. */
bool engine_upsert_ns(const engine *e, const cmdview *v, cmd_id id, bool read_upsert, char *ns,
                      size_t cap);
/* The index cache when v changes its database's schema (a DDL command, or
 * an insert, which may create the collection; an upsert may too, but an
 * update is not held for it) and must not overlap the
 * cache's side connection in that database (index_cache.h,
 * index_cache_side_busy); NULL otherwise. */
index_cache *engine_side_gate(const engine *e, const cmdview *v, cmd_id id);
void engine_note_docs(engine *e, const char *ns, int64_t delta);
void engine_note_made(engine *e, const char *ns);

/* The shape of a request as the engine keys findings on it (the same parts,
 * redacted, the same hash), for a command whether or not a rule fires: the
 * offline report's per-shape rows use it, so a row and its findings share a
 * shapeHash. shape holds SHAPE_BUF_LEN bytes (analyzers/engine/shape.h); ns and
 * command get "db.coll" and the command's name ("explain" for explained
 * ones). False when the body cannot be read. Pure. */
bool engine_shape(const cmdview *v, char *ns, size_t nscap, char *command, size_t cmdcap,
                  char *shape, uint64_t *hash);

/* The same; *values says whether any of it (the shape, or whether it is an
 * explain) was read from a fixed-size value (shape_render_values): when
 * not, a request that differs from v only in such values has the same
 * shape, ns and command, and the proxy's workload keeps it for the
 * requests that match the decoder's template of v. */
bool engine_shape_values(const cmdview *v, char *ns, size_t nscap, char *command, size_t cmdcap,
                         char *shape, uint64_t *hash, bool *values);

/* Reports, through the sink, every rule+shape repeated since the last flush
 * (finding.repeats = count), and forgets the counts. */
void engine_flush_summaries(engine *e);

#endif
