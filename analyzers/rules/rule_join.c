/* client-side-join (rule_join.h): a connection's reads followed through
 * the engine's per-connection hooks, parents and the keyed reads that join
 * them kept in a few fixed slots of the connection's state, so following a
 * read costs a few comparisons and never allocates. */
#include "analyzers/rules/rule_join.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/rules/rule_api.h"

#define JOIN_PARENTS   4 /* recent parent reads of a connection */
#define JOIN_CHILDREN  8 /* chains of keyed reads being counted */
#define JOIN_NS_LEN    128
#define JOIN_FIELD_LEN 64

typedef struct join_parent {
	uint64_t ns_hash, key;
	uint32_t seq;    /* which parent read (0: an empty slot) */
	int64_t n;       /* documents its replies held */
	int64_t last_ms; /* its last reply, or the last read that joined it */
	char ns[JOIN_NS_LEN];
	/* the values its first documents held (value_filter.h): a chain of
	 * keyed reads is its join once one of them reads one (when they are
	 * known), and a read by a value it cannot hold (vals.all) is none */
	bool vals_known;
	value_filter vals;
} join_parent;

typedef struct join_child {
	uint64_t ns_hash, key;
	key_set keys;           /* the values read (rule_read_filter_facts) */
	uint32_t parent_seq;    /* 0: an empty slot */
	uint32_t reads, values; /* keyed reads, and the values they read */
	uint32_t fanout;        /* how many of those are distinct */
	bool placeholders;      /* some values read were placeholders: each counts */
	bool sure;              /* a read by a value of the parent (or none could tell) */
	int64_t last_ms;
	bool done; /* reported, or found already reported */
} join_child;

/* A finding's facts, copied when it is reported: words() reads them. */
typedef struct join_facts {
	char parent_ns[JOIN_NS_LEN];
	char field[JOIN_FIELD_LEN];
	uint64_t parent_key;
	int64_t n;
	uint32_t reads, values, fanout, window_ms;
	bool in;
	bool find; /* the child reads are finds, else aggregates */
} join_facts;

/* The connection's state (rule_checks.conn_size bytes, zeroed). */
typedef struct join_conn {
	/* the last request, whose reply comes next: its kind and "db.coll" */
	rule_read_kind pending;
	bool pend_find;
	uint32_t pend_len;
	char pend_ns[JOIN_NS_LEN];
	/* a parent of enough documents was active at active_ms: a keyed read
	 * within the window after it has its filter read */
	bool active;
	int64_t active_ms;
	uint32_t seq; /* parent reads seen */
	bool held;    /* a parent was kept since the last write or schema change */
	join_parent parents[JOIN_PARENTS];
	join_child children[JOIN_CHILDREN];
	join_facts f;
} join_conn;

/* ---- the pairs reported (per engine) ---- */

typedef struct join_seen {
	pthread_mutex_t lock;
	uint64_t slot[JOIN_DEDUPE_SLOTS]; /* 0: empty */
} join_seen;

static uint64_t pair_hash(uint64_t parent, uint64_t child)
{
	uint64_t h = (parent ^ 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
	h = (h ^ (h >> 33) ^ child) * 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h ? h : 1;
}

/* True the first time a pair is seen (while it is remembered). */
static bool seen_first(join_seen *s, uint64_t pair)
{
	size_t at = pair & (JOIN_DEDUPE_SLOTS - 1);
	bool first = true;
	pthread_mutex_lock(&s->lock);
	size_t i;
	for (i = 0; i < 8; i++) {
		uint64_t *sl = &s->slot[(at + i) & (JOIN_DEDUPE_SLOTS - 1)];
		if (*sl == pair) {
			first = false;
			break;
		}
		if (*sl == 0) {
			*sl = pair;
			break;
		}
	}
	if (i == 8)
		s->slot[at] = pair; /* full here: an older pair is forgotten */
	pthread_mutex_unlock(&s->lock);
	return first;
}

static void *state_new(const rule_config *rc)
{
	(void)rc;
	join_seen *s = calloc(1, sizeof(*s));
	if (s)
		pthread_mutex_init(&s->lock, NULL);
	return s;
}

static void state_free(void *state)
{
	join_seen *s = state;
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- following the reads ---- */

/* "db.coll" of a connection's reads, words at a time. */
static uint64_t ns_hash(const char *s, size_t n)
{
	return hash_words(0x243f6a8885a308d3ull, s, n);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src ? src : "", n);
	dst[n] = '\0';
}

/* The fan-out that reports a parent of n documents (rule_join.h). */
static uint32_t fanout_needed(int64_t n, uint32_t min_fanout)
{
	int64_t half = (n + 1) / 2;
	if (half > JOIN_FANOUT_CAP)
		half = JOIN_FANOUT_CAP;
	return half > (int64_t)min_fanout ? (uint32_t)half : min_fanout;
}

/* The most recent parent not yet tried that a keyed read of r's
 * collection may join: another collection's, of at least min documents,
 * active within the window. */
static join_parent *parent_of(join_conn *j, uint64_t ns, int64_t now, int64_t window, uint32_t min,
                              const join_parent *const *tried, int ntried)
{
	join_parent *best = NULL;
	for (int i = 0; i < JOIN_PARENTS; i++) {
		join_parent *p = &j->parents[i];
		bool was = false;
		for (int k = 0; k < ntried; k++)
			was |= tried[k] == p;
		if (was || !p->seq || p->ns_hash == ns || p->n < (int64_t)min ||
		    now - p->last_ms > window || now < p->last_ms)
			continue;
		if (!best || p->last_ms > best->last_ms)
			best = p;
	}
	return best;
}

/* A chain of these reads still going on (its last read within the
 * window) whose parent is still held, and that parent: a loop that reads
 * other documents too (each order's items, themselves a parent of their
 * own) goes on joining the parent it started with. */
static join_parent *chain_parent(join_conn *j, uint64_t ns, uint64_t key, int64_t now,
                                 int64_t window, const join_child **chain)
{
	for (int i = 0; i < JOIN_CHILDREN; i++) {
		const join_child *c = &j->children[i];
		if (!c->parent_seq || c->key != key || c->ns_hash != ns ||
		    now - c->last_ms > window || now < c->last_ms)
			continue;
		for (int k = 0; k < JOIN_PARENTS; k++)
			if (j->parents[k].seq == c->parent_seq) {
				*chain = c;
				return &j->parents[k];
			}
	}
	return NULL;
}

/* r's chain under parent p: found, or a slot taken (an empty one, else
 * the least recently read). */
static join_child *child_of(join_conn *j, const join_parent *p, uint64_t ns, uint64_t key)
{
	join_child *old = &j->children[0];
	for (int i = 0; i < JOIN_CHILDREN; i++) {
		join_child *c = &j->children[i];
		if (c->parent_seq == p->seq && c->key == key && c->ns_hash == ns)
			return c;
		if (!c->parent_seq || (old->parent_seq && c->last_ms < old->last_ms))
			old = c;
	}
	memset(old, 0, sizeof(*old));
	old->parent_seq = p->seq;
	old->key = key;
	old->ns_hash = ns;
	return old;
}

/* The parent a keyed read r (f: its facts) joins. A chain sure to be its
 * parent's goes on joining it (unless every value of that parent is
 * known, and this read's is none of them); else the chain's parent, then the others
 * from the most recent, are asked whether their first documents held one
 * of its values: the first that did is joined, and *sure set (so too for
 * a parent whose values are not known, or a read whose values are
 * placeholders: nothing to tell, as before values were read). Failing
 * that, the first parent that may hold them among documents it did not
 * read (not vals.all) is joined, not sure. NULL: a read by no value of any
 * parent (close in time to one by chance: django's migrations, then
 * usernames). */
static join_parent *joined_parent(join_conn *j, const rule_config *rc, const rule_read *r,
                                  const rule_read_filter_facts *f, uint64_t ns, uint64_t key,
                                  int64_t now, bool *sure)
{
	int64_t window = rc->params[JOIN_PARAM_WINDOW_MS];
	uint32_t min = rc->params[JOIN_PARAM_MIN_FANOUT];
	const join_parent *tried[JOIN_PARENTS + 1];
	const join_child *chain = NULL;
	join_parent *maybe = NULL;
	int ntried = 0;
	join_parent *p = chain_parent(j, ns, key, now, window, &chain);
	*sure = chain && chain->sure;
	if (*sure && !(p->vals_known && p->vals.all && f->checkable))
		return p; /* its other reads may be by values its documents not read held */
	for (; p || (p = parent_of(j, ns, now, window, min, tried, ntried)); p = NULL) {
		rule_read_filter_facts in;
		*sure = !p->vals_known || !f->checkable;
		if (!*sure) {
			rule_read_filter(r, &p->vals, &in);
			*sure = in.values > 0;
		}
		if (*sure)
			return p;
		if (!maybe && !p->vals.all)
			maybe = p;
		tried[ntried++] = p;
		if (ntried > JOIN_PARENTS)
			break;
	}
	return maybe;
}

/* A find or aggregate of the connection (pend_ns) by one field's value or
 * values (f) while a parent may be active. */
static bool keyed_read(join_conn *j, const rule_config *rc, join_seen *seen, const rule_read *r,
                       const rule_read_filter_facts *f, int64_t now)
{
	int64_t window = rc->params[JOIN_PARAM_WINDOW_MS];
	uint32_t min = rc->params[JOIN_PARAM_MIN_FANOUT];
	uint64_t ns = ns_hash(j->pend_ns, j->pend_len);
	uint64_t key = ns ^ (f->key * 0x9e3779b97f4a7c15ull) ^ (uint64_t)f->kind;
	bool sure;
	join_parent *p = joined_parent(j, rc, r, f, ns, key, now, &sure);
	if (!p)
		return false;
	join_child *c = child_of(j, p, ns, key);
	if (c->reads && now - c->last_ms > window) { /* that chain was over: this one starts */
		c->reads = c->values = 0;
		c->placeholders = c->sure = false;
		key_set_clear(&c->keys);
	}
	c->sure |= sure;
	c->reads++;
	c->values += f->values;
	key_set_union(&c->keys, &f->keys);
	c->placeholders |= !f->values_known;
	uint32_t distinct = key_set_count(&c->keys); /* no more than were read */
	c->fanout = distinct < c->values && !c->placeholders ? distinct : c->values;
	c->last_ms = now;
	p->last_ms = j->active_ms = now;
	if (c->done || !c->sure || c->fanout < fanout_needed(p->n, min))
		return false;
	c->done = true;
	if (!seen || !seen_first(seen, pair_hash(p->key, key)))
		return false;
	copy_str(j->f.parent_ns, sizeof(j->f.parent_ns), p->ns);
	copy_str(j->f.field, sizeof(j->f.field), f->field);
	j->f.parent_key = p->key;
	j->f.n = p->n;
	j->f.reads = c->reads;
	j->f.values = c->values;
	j->f.fanout = c->fanout;
	j->f.window_ms = (uint32_t)window;
	j->f.in = f->kind == RULE_READ_KEYED_IN;
	j->f.find = j->pend_find;
	return true;
}

/* Every request: the read is remembered for its reply, and a find's filter
 * (an aggregate's leading $match) is read only within the window after an
 * active parent. */
static bool conn_read(void *conn, const rule_config *rc, void *state, const rule_read *r,
                      int64_t now_ms)
{
	join_conn *j = conn;
	j->pending = r->kind;
	if (r->kind == RULE_READ_NONE) {
		/* a write or a schema change: what was read before is no page
		 * being joined */
		if (r->changes && j->held) {
			j->active = j->held = false;
			memset(j->parents, 0, sizeof(j->parents));
			memset(j->children, 0, sizeof(j->children));
		}
		return false;
	}
	size_t a = strlen(r->db), b = r->coll_len;
	if (a > JOIN_NS_LEN - 2)
		a = JOIN_NS_LEN - 2;
	if (b > JOIN_NS_LEN - 2 - a)
		b = JOIN_NS_LEN - 2 - a;
	memcpy(j->pend_ns, r->db, a);
	j->pend_ns[a] = '.';
	memcpy(j->pend_ns + a + 1, r->coll, b);
	j->pend_ns[a + 1 + b] = '\0';
	j->pend_len = (uint32_t)(a + 1 + b);
	j->pend_find = r->find;
	if (r->kind != RULE_READ_QUERY || !j->active ||
	    now_ms - j->active_ms > (int64_t)rc->params[JOIN_PARAM_WINDOW_MS])
		return false;
	rule_read_filter_facts f;
	rule_read_filter(r, NULL, &f);
	if (f.kind != RULE_READ_KEYED && f.kind != RULE_READ_KEYED_IN)
		return false;
	return keyed_read(j, rc, state, r, &f, now_ms);
}

/* A read of at most one document only continues a chain: wanted while a
 * parent is active within the window. Skipped otherwise, its reply is not
 * told either (engine_track_wants_count), so the pending read stays the
 * last one given, which only a reply of a wanted read would consume. */
static bool conn_point_wanted(const void *conn, const rule_config *rc, int64_t now_ms)
{
	const join_conn *j = conn;
	return j->active && now_ms - j->active_ms <= (int64_t)rc->params[JOIN_PARAM_WINDOW_MS];
}

/* A parent's slot: an empty one, else the least recently active; for a
 * first batch under min documents (pending), only one that is empty or
 * pending too, so that a short result never pushes out a parent being
 * joined (NULL: none). */
static join_parent *parent_slot(join_conn *j, bool pending, int64_t min)
{
	join_parent *old = NULL;
	for (int i = 0; i < JOIN_PARENTS; i++) {
		join_parent *p = &j->parents[i];
		if (!p->seq)
			return p;
		if ((!pending || p->n < min) && (!old || p->last_ms < old->last_ms))
			old = p;
	}
	return old;
}

static void conn_reply(void *conn, const rule_config *rc, int64_t ndocs, const value_filter *vals,
                       int64_t now_ms)
{
	join_conn *j = conn;
	rule_read_kind k = j->pending;
	if (k != RULE_READ_MORE) /* a getMore's exhaust replies keep coming */
		j->pending = RULE_READ_NONE;
	int64_t min = rc->params[JOIN_PARAM_MIN_FANOUT];
	if (k == RULE_READ_NONE || ndocs < 0 || (k != RULE_READ_MORE && ndocs < min && ndocs < 2))
		return; /* no parent: most replies end here, before any hashing */
	uint64_t ns = ns_hash(j->pend_ns, j->pend_len);
	if (k == RULE_READ_MORE) { /* pagination: more documents of the same parent */
		join_parent *best = NULL;
		for (int i = 0; i < JOIN_PARENTS; i++) {
			join_parent *p = &j->parents[i];
			if (p->seq && p->ns_hash == ns && (!best || p->last_ms > best->last_ms))
				best = p;
		}
		if (best && now_ms - best->last_ms <= (int64_t)rc->params[JOIN_PARAM_WINDOW_MS]) {
			best->n += ndocs;
			best->last_ms = now_ms;
			if (ndocs > 0) /* documents whose values were not read */
				best->vals.all = false;
			if (best->n >= min) {
				j->active = true;
				j->active_ms = now_ms;
			}
			return;
		}
		if (ndocs < min)
			return;
	}
	/* A first batch under min documents is kept, not active: its cursor's
	 * getMores may fill it up (a page read with batchSize 2, then each
	 * document's children). */
	bool pending = ndocs < min;
	join_parent *p = parent_slot(j, pending, min);
	if (!p)
		return;
	p->seq = ++j->seq ? j->seq : ++j->seq;
	j->held = true;
	/* The parent's shape, as far as a pair's dedupe tells them apart: its
	 * namespace and command (its filter is not read, so reading costs
	 * nothing on the request path). */
	p->ns_hash = ns;
	p->key = ns ^ (j->pend_find ? 0x51ull : 0xa7ull);
	p->n = ndocs;
	p->last_ms = now_ms;
	memcpy(p->ns, j->pend_ns, sizeof(p->ns));
	p->vals_known = vals != NULL;
	if (vals)
		p->vals = *vals;
	if (!pending) {
		j->active = true;
		j->active_ms = now_ms;
	}
}

static uint64_t conn_hash(const void *conn, uint64_t shape_hash)
{
	return pair_hash(((const join_conn *)conn)->f.parent_key, shape_hash);
}

/* ---- words ---- */

static void quoted(text_buf *t, const char *s)
{
	text_char(t, '"');
	text_json_str(t, s, strlen(s), 0);
	text_char(t, '"');
}

static void words(const rule_ctx *c, const rule_site *s, const void *facts, rule_words *w)
{
	(void)c;
	const join_facts *f = &((const join_conn *)facts)->f;
	const char *coll = s->coll ? s->coll : s->ns;
	const char *pcoll =
	    strchr(f->parent_ns, '.') ? strchr(f->parent_ns, '.') + 1 : f->parent_ns;
	text_buf t;
	text_init(&t, w->buf, sizeof(w->buf));
	size_t start = text_mark(&t);
	text_str(&t, "after a read of ");
	quoted(&t, f->parent_ns);
	text_printf(&t, " returned %lld documents, this connection read ", (long long)f->n);
	quoted(&t, s->ns);
	text_str(&t, " by ");
	quoted(&t, f->field);
	if (f->in)
		text_printf(&t, " in %u $in batch%s holding %u keys", f->reads,
		            f->reads == 1 ? "" : "es", f->values);
	else
		text_printf(&t, " %u times, one %s per document (N+1)", f->reads,
		            f->find ? "find" : "aggregate");
	text_printf(&t, ", each within %u ms of the last (fan-out %u of %lld)", f->window_ms,
	            f->fanout, (long long)f->n);
	w->detail = rule_words_piece(&t, start);
	start = text_mark(&t);
	text_str(&t, "embed the fields read from ");
	quoted(&t, coll);
	text_str(&t, " in the documents of ");
	quoted(&t, pcoll);
	text_str(&t,
	         ", or keep an extended reference (copy those few fields next to the reference); "
	         "where the data must stay apart, join on the server in one round trip: "
	         "db.getCollection(");
	quoted(&t, pcoll);
	text_str(&t, ").aggregate([{$match: <the same filter>}, {$lookup: {from: ");
	quoted(&t, coll);
	text_str(&t, ", localField: \"<the reference>\", foreignField: ");
	quoted(&t, f->field);
	text_str(&t, ", as: ");
	quoted(&t, coll);
	text_str(&t, "}}])");
	w->suggestion = rule_words_piece(&t, start);
	w->fix = "embed the fields read, keep an extended reference, or join with one $lookup "
	         "where the data must stay apart";
}

static const rule_param params[] = {
    {"windowMS", RULE_PARAM_U32, 100, 1, 60000, JOIN_PARAM_WINDOW_MS,
     "the longest gap, in ms, between a parent read's reply and the keyed reads that join it"},
    {"minFanout", RULE_PARAM_U32, 3, 2, 1000000, JOIN_PARAM_MIN_FANOUT,
     "the fewest documents a parent read returns, and keys read after it, to report"},
};

static const rule_checks checks = {
    .words = words,
    .state_new = state_new,
    .state_free = state_free,
    .conn_size = sizeof(join_conn),
    .conn_read = conn_read,
    .conn_reply = conn_reply,
    .conn_point_wanted = conn_point_wanted,
    .conn_hash = conn_hash,
};

static const char *join_design_pattern(const rule_report_finding *f)
{
	(void)f;
	return "extended reference pattern";
}

const rule_def rule_join_def = {
    .id = RULE_CLIENT_SIDE_JOIN,
    .name = "client-side-join",
    .summary = "a read's documents are joined on the client: one keyed read of another "
               "collection per document, or $in batches (windowMS, minFanout)",
    .fix_kind = "embedding / extended reference / $lookup",
    .design_pattern = join_design_pattern,
    .params = params,
    .nparams = sizeof(params) / sizeof(params[0]),
    .checks = &checks,
};
