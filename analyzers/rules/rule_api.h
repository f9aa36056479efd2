/* Between the engine and the rule files: what a rule's check is given, what
 * it may ask the engine, and how it hands back a finding.
 *
 * The engine finds the parts of a request (filters, updates, pipelines, a
 * sort question) and, for each part, calls the check of every rule in
 * rule_table that reads that part and whose action there is not off, in
 * table order. A check computes its facts once (what matched) and calls
 * rule_report() with them; the engine decides whether the finding changes
 * the verdict or reaches the sink, and only then asks the rule's words()
 * to render detail, fix and suggestion from those facts. So the common
 * case (nothing matches) formats nothing, and a match that is over the
 * per-request report cap formats nothing either.
 *
 * Only the engine and the rule files include this header. */
#ifndef MG_ANALYZERS_RULES_RULE_API_H
#define MG_ANALYZERS_RULES_RULE_API_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "analyzers/engine/facts.h"
#include "analyzers/engine/keys.h" /* key_eq: the checks compare keys as the engine does */
#include "analyzers/catalog/index_cache.h"
#include "analyzers/engine/rule_config.h"
#include "analyzers/engine/shape.h"
#include "analyzers/planner/sort_query.h"
#include "protocol/commands.h"
#include "protocol/key_set.h"
#include "protocol/keyed_filter.h"
#include "protocol/value_filter.h"
#include "protocol/text.h"

/* The engine's per-request state; checks reach it through the functions
 * below only. */
typedef struct rule_ctx rule_ctx;

/* Where a check looks: one filter, update or pipeline of a request. */
typedef struct rule_site {
	const char *db;
	const char *coll;       /* NULL: a collection-less aggregate */
	const char *ns;         /* "db.coll" */
	const rule_action *act; /* each rule's action here, after scopes */
	const uint8_t *sample;  /* each rule's block sample here (rule_config.h) */
	const shape_spec *shape;
	/* The filter of the same statement (update's q, findAndModify's query,
	 * bulkWrite's filter), positioned on it; NULL when there is none. An
	 * update check reads it for guards that bound the write. */
	const bson_iter_t *filter;
	/* The statement's filter and update as the engine read them once
	 * (facts.h), for the checks to read instead of walking them again:
	 * facts->filter describes the filter the filter and query checks are
	 * given, facts->update the update the update checks are given. NULL
	 * (or has_filter / has_update false) where the engine read none: the
	 * checks then read the BSON. */
	const stmt_facts *facts;
	/* The engine's: in a late call, the kinds of check owed here (only
	 * they run). */
	unsigned late_kinds;
	/* The engine's: what mongod parses of the statement before it runs
	 * any of it, each NULL when there is none: the statement's filter (an
	 * iterator on the document), its update, the request's pipeline. A
	 * finding on a statement mongod refuses for an operator it does not
	 * know, anywhere in them, is not reported (verdict.c). */
	const bson_iter_t *parsed_filter, *parsed_update, *parsed_pipeline;
} rule_site;

/* What a query plan is chosen from: the question the collection-scan rule
 * asks of every filter that selects documents, named by the command whose
 * filter it is (its id in protocol/commands.h, so a kind is never a second
 * list of commands). */
typedef enum {
	RULE_QUERY_NONE = CMD_NONE, /* a command that asks none (insert, ...) */
	RULE_QUERY_FIND = CMD_FIND,
	RULE_QUERY_COUNT = CMD_COUNT,
	RULE_QUERY_DISTINCT = CMD_DISTINCT,
	RULE_QUERY_UPDATE = CMD_UPDATE,
	RULE_QUERY_DELETE = CMD_DELETE,
	RULE_QUERY_FIND_AND_MODIFY = CMD_FIND_AND_MODIFY,
	/* the leading $match stages (and the $sort after them) */
	RULE_QUERY_AGGREGATE = CMD_AGGREGATE,
} rule_query_kind;

typedef struct rule_query {
	rule_query_kind kind;
	sort_query q;             /* db, coll, filter (NULL: none), sort, collation, hint */
	int64_t limit;            /* documents the command reads at most; 0: no limit */
	int64_t skip;             /* of them, those a find's skip drops first (in limit) */
	const char *distinct_key; /* distinct's key, or NULL */
	bool min_max;             /* find's min / max: bounds of the hinted index */
	bool counts;              /* an aggregate counting what its $match selects (countDocuments):
	                             an empty $match reads every document too */
	bool reads_all;           /* an aggregate whose later stages read every document its
	                             leading $match selects (leading.h) */
	bool stops_unknown;       /* ... with a leading $sort: a stage after it may stop a read
	                             in the sort's order: no verdict where an index provides it */
	const char *group;        /* ... unless an index leads with this field (leading.h): a
	                             $group by it that may be a DISTINCT_SCAN reads that index */
	const char *via; /* a sub-pipeline's: the stage it is in ("$lookup", "$unionWith") */
} rule_query;

#define RULE_WORDS_LEN 4096

/* What a rule says about one finding; the three may point into buf. */
typedef struct rule_words {
	const char *detail;     /* what matched, one sentence (log and error) */
	const char *fix;        /* short, for the error message */
	const char *suggestion; /* for the log, runnable where possible */
	char buf[RULE_WORDS_LEN];
} rule_words;

/* A request as a connection's sequence of reads shows it (the
 * per-connection hooks of rule_checks below): what the engine tells a rule
 * that follows a connection, for every request, matched by a repeat
 * template or not. Only what costs nothing to find is given; a find's
 * filter is read when the rule asks (rule_read_filter). */
typedef enum {
	RULE_READ_NONE,     /* not a read that returns documents (a write, hello, count, ...) */
	RULE_READ_QUERY,    /* a find or an aggregate; as a filter: any other than below */
	RULE_READ_KEYED,    /* a filter by one field's value: {k: v}, {k: {$eq: v}} (and
	                     * conditions beside it: protocol/keyed_filter.h) */
	RULE_READ_KEYED_IN, /* a filter by one field's values: {k: {$in: [...]}} (likewise) */
	RULE_READ_MORE,     /* a getMore: more of a cursor on db.coll */
} rule_read_kind;

typedef struct rule_read {
	rule_read_kind kind; /* NONE, QUERY or MORE */
	bool find;           /* QUERY: a find, else an aggregate (rule_read_filter) */
	bool changes;        /* NONE: a write or a schema change (insert, drop, ...) */
	bool values_known;   /* false: its literals are placeholders (request_ctx) */
	/* Its keyed values' hashes as a capture kept them (request_ctx), or
	 * NULL; hashes_only: no value is hashed here (a replay's salt is not
	 * the live process's), so without them none can be looked up. */
	const uint64_t *hashes;
	uint32_t nhashes;
	bool hashes_only;
	/* How the key is taken among the filter's fields
	 * (protocol/keyed_filter.h): KEYED_FLAT live; a replay reads a
	 * capture as the proxy that wrote it did (KEYED_TOP for format 6:
	 * a top-level $and is no field's; KEYED_ALONE for 5 and older: {k:
	 * v}, not {k: v, deleted: false}). */
	keyed_mode key_mode;
	const char *db;   /* NONE: NULL */
	const char *coll; /* coll_len bytes, not NUL-terminated */
	uint32_t coll_len;
	const void *view; /* the engine's */
} rule_read;

/* A find's filter, or the leading $match of an aggregate whose later
 * stages only shape what it read ($project, $addFields, $set, $unset,
 * $sort, $skip, $limit), read when a rule asks (valid during conn_read):
 * with within, the values a parent read's documents held, of the values
 * read only those it may hold count and are kept (a value that cannot be
 * looked up counts always: a placeholder whose hash the capture did not
 * keep, a value no filter holds); NULL: every one. */
typedef struct rule_read_filter_facts {
	rule_read_kind kind; /* QUERY, KEYED or KEYED_IN */
	uint32_t values;     /* KEYED: 1; KEYED_IN: the $in array's length (of
	                      * them, those `within` may hold; 0: none) */
	uint64_t key;        /* the filter's field names and operators, never its values */
	const char *field;   /* KEYED, KEYED_IN: the field's name */
	key_set keys;        /* KEYED, KEYED_IN: the values read ... */
	bool values_known;   /* ... when they are not placeholders (rule_read) */
	bool checkable;      /* whether `within` could be asked of its values */
} rule_read_filter_facts;

void rule_read_filter(const rule_read *r, const value_filter *within, rule_read_filter_facts *f);

/* Whether a check may have to wait for the index cache. */
typedef enum {
	RULE_READY,
	RULE_WAIT, /* the request is held and analysed again later */
} rule_readiness;

struct rule_checks {
	/* Each NULL when the rule does not read that part. The sort check runs
	 * before every other check of a request: it alone may answer
	 * RULE_WAIT, and nothing may be reported before the engine knows the
	 * request does not wait. It is given only a non-empty sort, and only
	 * when the engine has an index cache. */
	rule_readiness (*sort)(rule_ctx *c, const rule_site *s, const sort_query *q);
	void (*filter)(rule_ctx *c, const rule_site *s, const bson_iter_t *filter);
	void (*update)(rule_ctx *c, const rule_site *s, const bson_iter_t *update);
	void (*pipeline)(rule_ctx *c, const rule_site *s, const bson_iter_t *pipeline);
	/* Every filter that selects documents, with what else decides its plan
	 * (after the sort checks; never waits). */
	void (*query)(rule_ctx *c, const rule_site *s, const rule_query *q);
	/* Each inserted document (insert's documents, bulkWrite's insert ops). */
	void (*document)(rule_ctx *c, const rule_site *s, const bson_t *doc);
	/* With document: the fewest bytes a document must have for the check
	 * to report it under these parameters. An insert whose documents are
	 * all smaller (the whole request is) is not walked at all. With update
	 * too: an update whose document or pipeline is smaller (facts.h,
	 * update_facts.len) is not given to the update check. */
	uint32_t (*document_floor)(const rule_config *rc);
	/* Where the engine read the statement (rule_site.facts): the STMT_
	 * bits (facts.h) of which the statement must have one for the check
	 * to be called; 0: called whatever the facts show. A rule names here
	 * only what its check would return on at once without it, so the
	 * verdict is the same either way; the engine then does not call, and
	 * does not build a query for, checks that could find nothing. */
	unsigned filter_when, update_when, query_when;
	/* Renders the words of a finding from the facts the check reported. */
	void (*words)(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w);
	/* State kept per connection, for a rule that follows a connection's
	 * reads (client-side-join): conn_size bytes, zeroed when the
	 * connection's first request comes (and when a reload makes a new
	 * engine), given to conn_read for every request before any check
	 * (of a run of requests that are not reads, the first: conn_read
	 * must do the same for each), and to conn_reply for every reply the
	 * proxy (or the report's replay) tells the engine of after a read:
	 * the documents it held (-1: not known) and the values they held (NULL:
	 * not known; engine.h, engine_note_reply). When
	 * conn_read answers true the engine reports a finding of the rule at
	 * the request's own site, with the connection's state as the facts
	 * words() renders (never a block: a block is taken as dry-run). rc is
	 * the rule's configuration, state its per-engine state. */
	size_t conn_size;
	bool (*conn_read)(void *conn, const rule_config *rc, void *state, const rule_read *r,
	                  int64_t now_ms);
	void (*conn_reply)(void *conn, const rule_config *rc, int64_t ndocs,
	                   const value_filter *vals, int64_t now_ms);
	/* Whether a read of at most one document (a find with limit 1, or by
	 * an _id value) matters now: false lets the engine skip conn_read for
	 * it (such a read starts nothing; it can only continue what is under
	 * way). NULL: always given. */
	bool (*conn_point_wanted)(const void *conn, const rule_config *rc, int64_t now_ms);
	/* The shapeHash of a finding conn_read completed, from the request's
	 * (NULL: the request's own): client-side-join's is its pair's, the
	 * parent read's shape mixed in, so each pair is a finding of its own
	 * for the dedupe, the summaries and the report. */
	uint64_t (*conn_hash)(const void *conn, uint64_t shape_hash);
	/* State kept per engine (hot-path counters), or NULL. state_new
	 * returns NULL when out of memory. */
	void *(*state_new)(const rule_config *rc);
	void (*state_free)(void *state);
};

/* Whether a finding of rule r here could still change anything (a first
 * block, or the sink under the per-request cap). Per-statement checks ask
 * before walking, so a batch past the cap is not walked for nothing. */
bool rule_wanted(const rule_ctx *c, const rule_site *s, rule_id r);

/* Reports a finding of r with the check's facts (valid during the call). */
void rule_report(rule_ctx *c, const rule_site *s, rule_id r, const void *facts);
/* The same, with the redacted shape and its hash already rendered (a rule
 * that needs the hash to decide, like hot-path-lookup). */
void rule_report_shaped(rule_ctx *c, const rule_site *s, rule_id r, const void *facts,
                        const char *shape, uint64_t hash);

/* The site's shape with literals replaced (buf: SHAPE_BUF_LEN), and its hash. */
uint64_t rule_shape_redacted(const rule_ctx *c, const rule_site *s, char *buf);

const rule_config *rule_ctx_config(const rule_ctx *c, rule_id r);
void *rule_ctx_state(const rule_ctx *c, rule_id r);
bool rule_ctx_explain(const rule_ctx *c); /* explain: nothing runs */
int64_t rule_ctx_now_ms(const rule_ctx *c);
bool rule_ctx_no_wait(const rule_ctx *c);
index_cache *rule_ctx_index_cache(const rule_ctx *c);

/* The index list of db.coll, as index_cache_get answers (INDEXES_*; a
 * lookup without an index cache answers INDEXES_UNAVAILABLE). Looked up
 * once per request and shared by every rule that asks: the sort and the
 * collection-scan checks of one find pay for one lookup. *out stays valid
 * until the next call for another namespace or the end of the request;
 * the engine releases it. */
index_lookup rule_ctx_indexes(rule_ctx *c, const char *db, const char *coll, const index_set **out);

/* The estimated document count of db.coll, whose list rule_ctx_indexes
 * gave as set, as this request's verdict reads it (engine_counts): the
 * first read of the collection in the request, the one the live verdict
 * read when the report replays a capture that kept it, the count the list
 * landed with in a late call; else the set's count now
 * (index_set_doc_count). -1: unknown. */
int64_t rule_ctx_doc_count(rule_ctx *c, const char *db, const char *coll, const index_set *set);

/* For words(): ends the piece of w->buf started at `start` and returns it
 * ("" if the words did not fit). */
static inline const char *rule_words_piece(text_buf *t, size_t start)
{
	text_put(t, "", 1); /* the piece's NUL; the next one starts after it */
	return t->overflow ? "" : t->p + start;
}

#endif
