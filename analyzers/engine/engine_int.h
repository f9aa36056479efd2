/* What the engine's files share and nothing else reads: the engine and
 * per-request structs, the kinds of check a rule may have (and the one loop
 * that runs them), and each file's entry points.
 *
 *   engine.c         the core: engine_new, classify, dispatch, verdict
 *   commands.c       the engine's columns of the command table
 *   analysers.c      each command's analyser: from a request to its parts
 *   body.c           the body walker
 *   rule_ctx.c       what a check may ask; index lookups and owed verdicts
 *   verdict.c        findings: action, dedupe, shape hashes, words, block message
 *   cache_feed.c     what DDL passing by does to the index cache
 *   conn_track.c     a connection's reads, for the rules that follow them
 *
 * Not for the proxy or the rule files (they read engine.h and rule_api.h). */
#ifndef MG_ANALYZERS_ENGINE_ENGINE_INT_H
#define MG_ANALYZERS_ENGINE_ENGINE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "analyzers/engine/commands.h"
#include "analyzers/engine/engine.h"
#include "analyzers/engine/findings.h"
#include "analyzers/catalog/index_cache.h"
#include "analyzers/rules/rule_api.h"
#include "analyzers/rules/rules.h"

/* A batch with many bad ops reports this many findings, then only decides
 * the verdict: a 100,000-op batch must not render 100,000 shapes. */
#define MAX_REPORTS_PER_REQUEST 32

/* ---- the kinds of check (check_kind and PART_*: commands.h) ---- */

static inline bool check_present(const rule_checks *k, check_kind kind)
{
	switch (kind) {
	case CHECK_SORT:
		return k->sort != NULL;
	case CHECK_FILTER:
		return k->filter != NULL;
	case CHECK_UPDATE:
		return k->update != NULL;
	case CHECK_PIPELINE:
		return k->pipeline != NULL;
	case CHECK_QUERY:
		return k->query != NULL;
	case CHECK_DOCUMENT:
		return k->document != NULL;
	default:
		return false;
	}
}

/* The shape-hash cache: raw parts to redacted shape hash (verdict.c says
 * why and how). */
#define SHAPE_HASH_SLOTS 1024 /* a power of two */

typedef struct shape_hash_slot {
	_Atomic uint64_t key, hash, check;
} shape_hash_slot;

struct engine {
	engine_config cfg;
	index_cache *ic;
	engine_sink_fn sink;
	void *sink_arg;
	engine_tally_fn tally; /* may be NULL */
	void *tally_arg;
	findings_table *findings;
	void *state[RULE_COUNT];    /* each rule's own, from its state_new */
	unsigned parts[RULE_COUNT]; /* PART_*: what each rule's checks read */
	/* PART_SORT | PART_QUERY, of the parts each rule reads, for which it
	 * needs the index list first (rule_def.needs_indexes); else 0. */
	unsigned needs_facts[RULE_COUNT];
	/* The rules (bit r) that need the facts and could hold a request for
	 * them somewhere: at dry-run or block, as their action or a scope's.
	 * 0 in an all-log configuration: facts_ready then looks no further. */
	uint32_t facts_may_hold;
	/* The rules with a check of each kind, in table order, so a request
	 * walks only the checks that exist. */
	rule_id checks[CHECK_KINDS][RULE_COUNT];
	size_t nchecks[CHECK_KINDS];
	/* With no scope on any rule, every namespace gets the same actions:
	 * target_init copies them instead of asking each rule. */
	bool scoped;
	rule_action act[RULE_COUNT], act_explain[RULE_COUNT];
	uint8_t sample[RULE_COUNT];
	unsigned parts_all, parts_explain;
	uint32_t doc_floor; /* the smallest document a document check reports */
	/* Beside checks[kind][i]: the STMT_ bits that check is called for
	 * (rule_checks.*_when; 0: always), and each rule's document_floor
	 * (0: none), which its update check is not called below. */
	unsigned when[CHECK_KINDS][RULE_COUNT];
	uint32_t floor[RULE_COUNT];
	/* Of each kind's checks, on or off: the STMT_ bits one is called for,
	 * and whether one is called whatever the facts (its `when` is 0).
	 * Facts showing none of a kind's bits, with no such check, call none
	 * of its checks (check_skipped), so their loop is not entered:
	 * checks_may_run. */
	unsigned when_any[CHECK_KINDS];
	bool when_always[CHECK_KINDS];
	/* Could a rule block anything, or a command read only by document
	 * checks (insert)? Any scope at block counts. See engine_may_block. */
	bool may_block_any, may_block_documents;
	/* Some rule that reads index lists is on somewhere: the writes are
	 * read for multikey keys (arrays_seen.c). */
	bool learn_arrays;
	shape_hash_slot *shape_hashes; /* SHAPE_HASH_SLOTS */
	uint64_t gen; /* this engine's number, unique in the process: engine_repeat */
	/* The rules that follow a connection's reads (rule_checks.conn_read),
	 * not off anywhere: bit r; where each one's state lies in a
	 * connection's track, and the track's size (conn_track.c). */
	uint32_t conn_rules;
	rule_id conn_list[RULE_COUNT];
	unsigned nconn;
	size_t conn_off[RULE_COUNT], conn_size;
};

/* ---- per-request state ---- */

#define LOOKUP_NS_LEN     512 /* the index cache's own limit on "db.coll" */
#define ENGINE_ARRAYS_MAX 8   /* (index, keys) pairs a request's writes mark at most */

struct rule_ctx {
	engine *e;
	const request_ctx *rc;
	block_info *block;
	const char *db;
	const command_def *cmd; /* the analysed command (inside explain, the inner one) */
	bool explain;           /* never blocked, never counted as an execution */
	verdict verdict;        /* FORWARD or BLOCK */
	unsigned nreported;     /* findings sent this request */
	bool late_call;         /* rc->late: only the rules owed run (target_init) */
	/* A late call: the check (its ncalled) that read a list not known on
	 * time (engine_late.waited; rule_ctx_indexes): what it finds is new
	 * (verdict.c). 0: none. */
	unsigned waited_call;
	/* The check running now (run_checks), for rule_ctx_indexes: a rule
	 * that finds the index list not known yet owes its verdict. */
	rule_id cur_rule;
	unsigned cur_kind; /* PART_* */
	const rule_site *cur_site;
	/* A check at dry-run or block found a list not known yet before
	 * anything was reported: the request waits, and nothing more is
	 * reported by this call (it is analysed again from the start). */
	bool wait;
	/* engine_lookup's one-entry cache: the last namespace looked up, and
	 * its answer; the set is released when the request is done. */
	bool lookup_done;
	index_lookup lookup_r;
	index_set *lookup_set;
	/* the schema count the list looked up was judged against: the one at
	 * its landing for a late call's landed list, else every one so far */
	uint64_t lookup_until;
	/* where the cache stood at the last lookup made (index_cache_get_at;
	 * zero before the first): what an owe counts from, and the request's
	 * block_info.judged_at */
	index_cache_at lookup_at;
	char lookup_ns[LOOKUP_NS_LEN];
	/* the document counts read so far (rule_ctx_doc_count): the block's,
	 * written in place for the capture, or the call's own */
	engine_counts *counts;
	/* The connection's repeat (engine.h, engine_repeat): the checks called
	 * so far, whether the analyser judged the whole request from its bytes
	 * and the engine alone (analyze_query), and the bytes of the body its
	 * read did not look at (NULL: no template will be made). */
	unsigned ncalled;
	bool repeatable;
	/* Set around a report whose hash is not the request's shape's
	 * (conn_track_report): the request's, for finding.request_hash. */
	uint64_t own_hash;
	facts_spans *spans;
	/* Keys the request's writes put arrays under (arrays_seen.c), marked
	 * on their sets when the request is forwarded. */
	unsigned narrays;
	struct {
		index_set *set; /* retained */
		size_t index;
		uint32_t mask;
	} arrays[ENGINE_ARRAYS_MAX];
};

/* arrays_seen.c: what a forwarded write says about multikey keys of
 * db.coll; doc an inserted document. engine_arrays_apply marks what was
 * seen when the request was written (forwarded) and forgets it either
 * way. */
void engine_arrays_from_doc(rule_ctx *ax, const char *db, const char *coll, const bson_t *doc);
void engine_arrays_apply(rule_ctx *ax, bool written);

/* The updates of one command at one namespace (a bulk update's
 * statements): the namespace's index list is looked up once, by the first
 * statement that could put an array anywhere, and kept (retained) for the
 * others; NULL when no key there can still learn. */
typedef struct arrays_target {
	bool looked;
	index_set *set;
	/* Bit c: some key of set that could still learn when it was looked
	 * up starts with byte c. A write's path must start with a key's first
	 * byte to put an array under it (write_puts_array), and keys only stop
	 * learning, so a statement none of whose writes starts with one is
	 * passed over without the loop over indexes, keys and writes. */
	uint64_t firsts[4];
} arrays_target;

/* Whether an update of facts u can put an array anywhere the multikey
 * learning reads: a replacement document, or operators whose writes the
 * facts kept, all of them. A pipeline computes its values (not read), and
 * past FACTS_WRITES nothing is learned (a finding can be missed on such a
 * key, none invented). Inline: most statements of a bulk update ($inc,
 * $unset, scalar $sets) end here. */
static inline bool engine_arrays_may_learn(const update_facts *u)
{
	return u->form == FU_REPLACEMENT ||
	       (u->form == FU_OPERATORS && u->nwrites > 0 && u->writes_complete);
}

/* Whether engine_arrays_from_update would return at once for u, at a
 * target already looked up: no set there, or operators none of whose
 * writes starts with a byte some learnable key starts with. Inline, ahead
 * of the call, for the statements of a batch that write elsewhere. */
static inline bool engine_arrays_passed_over(const arrays_target *at, const update_facts *u)
{
	if (!at->looked)
		return false;
	if (!at->set)
		return true;
	if (u->form != FU_OPERATORS)
		return false;
	for (unsigned j = 0; j < u->nwrites; j++) {
		uint8_t c = (uint8_t)wire_cur_key(&u->writes[j].at)[0];
		if (at->firsts[c >> 6] >> (c & 63) & 1)
			return false;
	}
	return true;
}

/* An update statement's writes, as its facts read them (facts.h:
 * update_facts.writes; update a cursor on the update's value, for a
 * replacement document); only one engine_arrays_may_learn passes. */
void engine_arrays_from_update(rule_ctx *ax, arrays_target *at, const char *db, const char *coll,
                               const wire_cur *update, const update_facts *u);
/* Releases what at holds. */
void engine_arrays_target_done(arrays_target *at);

/* The command's name as findings and shapes show it. */
static inline const char *rule_ctx_command(const rule_ctx *ax)
{
	return ax->explain ? "explain" : command_name(ax->cmd);
}

/* Each check of one kind, for the rules not off at the site (and not
 * skipped by the facts), in table order; part is what that kind of check
 * is given (rule_checks). Only the
 * sort checks can answer false (the request waits), and then the checks
 * after them do not run. always_inline: kind is a constant at every call,
 * so each call is the plain loop over one list. */
/* Whether the i-th check of kind is not called at s: its rule is off
 * there, or the statement's facts show it could find nothing. */
static inline __attribute__((always_inline)) bool check_skipped(const engine *e, const rule_site *s,
                                                                check_kind kind, size_t i)
{
	rule_id r = e->checks[kind][i];
	if (s->act[r] == RULE_OFF)
		return true;
	if (!s->facts)
		return false;
	unsigned when = e->when[kind][i];
	if (when && !(when & s->facts->have))
		return true;
	return kind == CHECK_UPDATE && s->facts->update.len < e->floor[r];
}

/* False when no check of kind can be called on a statement whose facts
 * show the STMT_ bits `have`, whatever the site (engine.when_any). */
static inline bool checks_may_run(const engine *e, check_kind kind, unsigned have)
{
	return e->when_always[kind] || (have & e->when_any[kind]);
}

/* Whether some check of kind would be called at s (run_checks). */
static inline __attribute__((always_inline)) bool any_check(const rule_ctx *ax, const rule_site *s,
                                                            check_kind kind)
{
	const engine *e = ax->e;
	if (ax->late_call && !(s->late_kinds & (1u << kind)))
		return false;
	for (size_t i = 0; i < e->nchecks[kind]; i++)
		if (!check_skipped(e, s, kind, i))
			return true;
	return false;
}

static inline __attribute__((always_inline)) bool run_checks(rule_ctx *ax, const rule_site *s,
                                                             check_kind kind, const void *part)
{
	const engine *e = ax->e;
	if (ax->late_call && !(s->late_kinds & (1u << kind)))
		return true; /* not owed here */
	ax->cur_kind = 1u << kind;
	ax->cur_site = s;
	for (size_t i = 0; i < e->nchecks[kind]; i++) {
		rule_id r = e->checks[kind][i];
		if (check_skipped(e, s, kind, i))
			continue;
		ax->cur_rule = r;
		ax->ncalled++;
		const rule_checks *k = rule_table[r]->checks;
		switch (kind) {
		case CHECK_SORT:
			if (k->sort(ax, s, part) == RULE_WAIT) {
				ax->cur_site = NULL;
				return false;
			}
			break;
		case CHECK_FILTER:
			k->filter(ax, s, part);
			break;
		case CHECK_UPDATE:
			k->update(ax, s, part);
			break;
		case CHECK_PIPELINE:
			k->pipeline(ax, s, part);
			break;
		case CHECK_QUERY:
			k->query(ax, s, part);
			break;
		case CHECK_DOCUMENT:
			k->document(ax, s, part);
			break;
		default:
			break;
		}
	}
	ax->cur_site = NULL; /* s is the caller's: never kept past the checks */
	return true;
}

/* ---- names ---- */

/* "db.coll", truncated to fit; on every request, so no snprintf. */
static inline void ns_join(char *out, size_t cap, const char *db, const char *coll)
{
	size_t a = strlen(db), b = strlen(coll);
	if (a > cap - 2)
		a = cap - 2;
	if (b > cap - 2 - a)
		b = cap - 2 - a;
	memcpy(out, db, a);
	out[a] = '.';
	memcpy(out + a + 1, coll, b);
	out[a + 1 + b] = '\0';
}

/* "db.coll" into db (cap bytes) and the collection after the first dot.
 * False when there is no dot or the database name does not fit. */
static inline bool split_ns(const char *ns, char *db, size_t cap, const char **coll)
{
	const char *dot = strchr(ns, '.');
	if (!dot || (size_t)(dot - ns) >= cap)
		return false;
	memcpy(db, ns, (size_t)(dot - ns));
	db[dot - ns] = '\0';
	*coll = dot + 1;
	return true;
}

/* ---- analysers.c: the analysers of the rows (declared in commands.h) ---- */

/* ---- rule_ctx.c ---- */

/* The index list of db.coll, looked up once per request (rule_ctx_indexes
 * without owing anything). */
index_lookup engine_lookup(rule_ctx *ax, const char *db, const char *coll, const index_set **out);

/* rules (bit r) owe their verdict at ns, for the check kinds in kinds
 * (engine_late). */
/* kinds for a rule owed whole: turned off where it was owed, none of its
 * checks ran on time (analysers.c, skip_and_owe) */
#define OWE_EVERY_CHECK (~0u)
uint64_t engine_owe(rule_ctx *ax, const char *ns, uint32_t rules, unsigned kinds);

/* ---- conn_track.c ---- */

/* Sets e's conn_rules and layout (engine_new). */
void conn_track_layout(engine *e);

/* The connection's track for this request, made or reset for e as needed
 * (NULL: none followed, or no memory). */
engine_conn_track *conn_track_of(engine *e, const request_ctx *rc);

/* Describes the request v to each rule that follows t: the rules (bit r)
 * whose conn_read answered true, to be reported at v (conn_track_report). */
/* A request the connection's repeat template judges, when the template
 * was a read of at most one document and no rule wants such a read now:
 * noted as such, nothing more read (true). False: read it with
 * conn_track_read. conn_track_template_set: the request just read made
 * the template. */
bool conn_track_repeat_point(engine *e, engine_conn_track *t, int64_t now_ms);
/* For engine_repeat_again: true when engine_analyze, for a request its
 * repeat template matched, would read nothing into the connection's track:
 * there is none, or conn_track_repeat_point (then noted). False, with the
 * track unchanged: engine_analyze must see the request. */
bool conn_track_point_again(engine *e, const request_ctx *rc);
void conn_track_template_set(engine_conn_track *t);
uint32_t conn_track_read(engine *e, engine_conn_track *t, const cmdview *v, cmd_id id,
                         const request_ctx *rc);

/* Reports the findings of `rules` at the request ax analyses. */
void conn_track_report(rule_ctx *ax, engine_conn_track *t, const cmdview *v, uint32_t rules);

/* ---- verdict.c ---- */

/* The block of a query that names its collection by UUID, by rule r. */
void engine_block_uuid(rule_ctx *ax, rule_id r);

#endif
