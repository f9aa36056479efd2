/* The report's reader loop and aggregation (report.h says what it does).
 *
 * Two passes over the inputs. The first collects index snapshots only, so
 * a request captured before the writer had learned its collection's index
 * list (the live path waited for that list; the writer asked for it after)
 * is judged against the first list the capture holds. The second decodes
 * every request with request_decode and runs engine_analyze, exactly as a
 * session does; later snapshots replace earlier ones as they are met. A
 * list the engine forgot (a schema change passed) and the capture has not
 * given again: the verdicts owed are judged at the next snapshot, as the
 * live worker's late queue judges them when the list lands (judge()).
 * Replies pair with their request by (instance, connection, requestID).
 *
 * The per-shape table keys shapes as the engine keys findings: the same
 * parts of the same commands rendered by analyzers/engine/shape.h and hashed with
 * shape_hash, so a shape's row and its findings share a shapeHash. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyzers/engine/engine.h"
#include "analyzers/engine/late_queue.h"
#include "analyzers/catalog/index_cache.h"
#include "analyzers/planner/index_set.h"
#include "analyzers/engine/shape.h"
#include "protocol/capture.h"
#include "protocol/request.h"
#include "report/aggregate.h"
#include "report/aggregate_parts.h"
#include "report/grow.h"
#include "report/hash_map.h"
#include "report/housekeeping.h"
#include "report/namespaces.h"
#include "report/recommend.h"
#include "report/relationships.h"
#include "report/sort.h"

/* A request waiting for its reply, keyed by (instance, connection,
 * requestID). */
typedef struct pending {
	uint64_t key;
	size_t shape, ns; /* + 1; 0 = none */
	int64_t t_us;
	uint8_t *ddl; /* a schema change's message, whose reply makes the engine forget */
	size_t ddl_len;
	int write; /* ENGINE_WRITE_*: its reply moves the index cache, as live; its "db.coll": */
	char *write_ns;
	struct pending *next;
} pending;

#define PENDING_BUCKETS 65536

struct aggregator {
	model *m;
	engine *e;
	/* The rules that stay silent on small collections (rules.h,
	 * quiet_below), with that parameter at 0 and every other rule off: asked
	 * only of requests on a collection under quiet_max documents. */
	engine *quiet;
	engine_config quiet_cfg;
	uint32_t quiet_max;
	size_t input; /* the file being read, into m->inputs */
	index_cache *ic;
	hash_map shapes, findings, apps;
	hash_map listed; /* pass 1: namespaces listed, or changed first (note_schema_change) */
	ns_table nss;
	pending *pend[PENDING_BUCKETS];
	uint64_t instance; /* of the file being read */
	/* its requests' literals are placeholders (redaction "shapes", the
	 * default): equal ones are not one value read twice */
	bool placeholders;
	/* What its format version (capture.h) says: its forget records say
	 * where the proxy forgot index lists (3: a DDL's or a write's reply no
	 * longer does); its requests keep the document counts their verdicts
	 * read (4: the replay judges with those, and no insert's or delete's
	 * reply moves a count); its keyed reads' keys were read alone, one
	 * beside other conditions none (5 and older, as the proxy read them). */
	bool forget_records, counts_kept;
	keyed_mode key_mode;
	bool rules_set;
	engine_config cfg;
	rel_tracker *rel; /* client-side joins (relationships.c) */
	/* Requests whose verdicts were owed for a list not known yet (after a
	 * schema change): judged again at each index list met, as the live
	 * worker judges its queue when a list lands. */
	late_queue *late;
	/* Each connection's engine track (engine.h, engine_conn_track), as a
	 * session keeps one, keyed by (instance, connection): the rules that
	 * follow a connection's reads judge the capture as they judged the
	 * traffic. At most AGG_TRACKS at once: past that all are dropped and
	 * start again (a chain open at that moment is lost, memory stays
	 * bounded over any capture). */
	hash_map track_ix;
	engine_conn_track **tracks;
	size_t ntracks;
	const cmdview *cur; /* the request engine_analyze is judging, or NULL */
	bool cur_upsert;    /* the last request judged: block_info.upsert */
	int64_t cur_t;      /* its time */
};

static model_app *app_get(aggregator *a, const char *app)
{
	model *m = a->m;
	uint64_t k = hash_map_str_key(app);
	size_t i = hash_map_get(&a->apps, k);
	if (i)
		return &m->apps[i - 1];
	REPORT_GROW(m->apps, m->napps, m->capapps);
	model_app *p = &m->apps[m->napps++];
	memset(p, 0, sizeof *p);
	snprintf(p->app, sizeof p->app, "%s", app);
	hash_map_put(&a->apps, k, m->napps);
	return p;
}

/* ---- findings: the engine's sink ---- */

/* What a recommendation needs of the request that first gave a finding:
 * the classes of its ESR key (recommend.c). Only while the request is at
 * hand (a->cur): a finding first given late owes them to its next
 * occurrence. */
static void classify_esr(aggregator *a, model_finding *mf)
{
	rec_command c;
	mf->esr_owed = !a->cur;
	if (a->cur && rule_table[mf->rule]->fix_esr_index && rec_parse_command(mf->suggestion, &c))
		rec_classify(a->cur, &c, &mf->esr_neq, &mf->esr_nsort);
}

static void note_new_finding(aggregator *a, model_finding *mf)
{
	mf->esr_neq = mf->esr_nsort = -1;
	if (rule_table[mf->rule]->grows_arrays)
		agg_finding_push_paths(mf);
	classify_esr(a, mf);
}

static void on_finding(void *arg, const finding *f)
{
	aggregator *a = arg;
	model *m = a->m;
	uint64_t k = hash_map_fnv(&f->rule, sizeof f->rule, f->shape_hash);
	size_t i = hash_map_get(&a->findings, k);
	model_finding *mf;
	if (i) {
		mf = &m->findings[i - 1];
		if (mf->esr_owed)
			classify_esr(a, mf);
	} else {
		REPORT_GROW(m->findings, m->nfindings, m->capfindings);
		mf = &m->findings[m->nfindings++];
		memset(mf, 0, sizeof *mf);
		mf->rule = f->rule;
		mf->hash = f->shape_hash;
		snprintf(mf->ns, sizeof mf->ns, "%s", f->ns);
		snprintf(mf->command, sizeof mf->command, "%s", f->command);
		snprintf(mf->shape, sizeof mf->shape, "%s", f->shape);
		snprintf(mf->suggestion, sizeof mf->suggestion, "%s", f->suggestion);
		snprintf(mf->detail, sizeof mf->detail, "%s", f->detail);
		mf->input = a->input;
		hash_map_put(&a->findings, k, m->nfindings);
		note_new_finding(a, mf);
	}
	if (f->request_hash && f->request_hash != f->shape_hash) {
		/* a pair's finding (client-side-join): the request it came at
		 * shows the rule, as the live /workload does */
		size_t s = hash_map_get(&a->shapes, f->request_hash);
		if (s)
			m->shapes[s - 1].rules |= 1u << f->rule;
	}
	uint64_t n = f->repeats ? f->repeats : 1;
	mf->count += n;
	m->rule_totals[f->rule] += n;
	size_t j = 0;
	while (j < mf->napps && strcmp(mf->apps[j], f->app_name) != 0)
		j++;
	if (j == mf->napps && j < MODEL_APPS_PER_FINDING)
		snprintf(mf->apps[mf->napps++], sizeof mf->apps[0], "%s", f->app_name);
	if (j < mf->napps)
		mf->app_counts[j] += n;
	app_get(a, f->app_name)->findings[f->rule] += n;
	if (rule_table[f->rule]->profile_row) /* counted per namespace for its profile row */
		ns_table_get(&a->nss, f->ns)->findings[f->rule] += n;
}

/* ---- shapes, as the engine makes them ---- */

/* The shape of a command (or of the command explain wraps), its hash and
 * its namespace: engine_shape(), so a row and its findings share a
 * shapeHash. A body the engine cannot read still gets a row of its own. */
static uint64_t shape_of(const cmdview *v, char *ns, size_t nscap, char *cmd, size_t cmdcap,
                         char *buf)
{
	uint64_t h = 0;
	if (engine_shape(v, ns, nscap, cmd, cmdcap, buf, &h))
		return h;
	snprintf(ns, nscap, "%s.$cmd", v->db ? v->db : "");
	snprintf(cmd, cmdcap, "%s", v->name ? v->name : "");
	snprintf(buf, SHAPE_BUF_LEN, "{}");
	return shape_hash(ns, cmd, buf);
}

static model_shape *shape_get(aggregator *a, uint64_t hash, const char *ns, const char *cmd,
                              const char *text, const char *app)
{
	model *m = a->m;
	size_t i = hash_map_get(&a->shapes, hash);
	if (i)
		return &m->shapes[i - 1];
	REPORT_GROW(m->shapes, m->nshapes, m->capshapes);
	model_shape *s = &m->shapes[m->nshapes++];
	memset(s, 0, sizeof *s);
	s->hash = hash;
	snprintf(s->ns, sizeof s->ns, "%s", ns);
	snprintf(s->command, sizeof s->command, "%s", cmd);
	snprintf(s->shape, sizeof s->shape, "%s", text);
	snprintf(s->app, sizeof s->app, "%s", app);
	hash_map_put(&a->shapes, hash, m->nshapes);
	return s;
}

/* ---- records ---- */

static const char *rec_str(const bson_t *rec, const char *key)
{
	bson_iter_t it;
	return bson_iter_init_find(&it, rec, key) && BSON_ITER_HOLDS_UTF8(&it)
	           ? bson_iter_utf8(&it, NULL)
	           : "";
}

static int64_t rec_int(const bson_t *rec, const char *key, int64_t def)
{
	bson_iter_t it;
	return bson_iter_init_find(&it, rec, key) && BSON_ITER_HOLDS_NUMBER(&it)
	           ? bson_iter_as_int64(&it)
	           : def;
}

/* Counts, sizes and latencies from a record, as the totals may take them:
 * a capture file can hold anything, and a negative or absurd value would
 * make every total it joins meaningless (as uint64_t, a 20-digit number in
 * the JSON report; as int64_t, an overflow). No real reply, batch or wait
 * comes near 2^40. (fuzz_capture: crash-report-negative-time.) */
#define REC_MAX_COUNT ((int64_t)1 << 40)
static int64_t clamp_count(int64_t v)
{
	return v < 0 ? 0 : v > REC_MAX_COUNT ? REC_MAX_COUNT : v;
}

static uint64_t rec_count(const bson_t *rec, const char *key)
{
	return (uint64_t)clamp_count(rec_int(rec, key, 0));
}

/* A record's time, µs since the epoch; before 1970 is corruption. */
static int64_t rec_time(const bson_t *rec)
{
	int64_t t = rec_int(rec, "t", 0);
	return t < 0 ? 0 : t;
}

/* What pairs a request with its reply, read in one pass over the record
 * (each lookup by name is a pass of its own): conn, the request's rid or
 * the reply's rt, and of a reply n and ok; of a request mtc. The first
 * of a key counts, as with a lookup. */
typedef struct rec_ids {
	int64_t conn, id, n; /* n -1: none */
	bool failed, mtc;
} rec_ids;

static void rec_ids_of(const bson_t *rec, const char *idkey, rec_ids *r)
{
	bson_iter_t it;
	unsigned seen = 0;
	*r = (rec_ids){.n = -1};
	if (!bson_iter_init(&it, rec))
		return;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		unsigned bit = !strcmp(k, "conn")  ? 1u
		               : !strcmp(k, idkey) ? 2u
		               : !strcmp(k, "n")   ? 4u
		               : !strcmp(k, "ok")  ? 8u
		               : !strcmp(k, "mtc") ? 16u
		                                   : 0u;
		if (!bit || (seen & bit))
			continue;
		seen |= bit;
		bool num = BSON_ITER_HOLDS_NUMBER(&it);
		if (bit == 1u && num)
			r->conn = bson_iter_as_int64(&it);
		else if (bit == 2u && num)
			r->id = bson_iter_as_int64(&it);
		else if (bit == 4u && num)
			r->n = bson_iter_as_int64(&it);
		else if (bit == 8u)
			r->failed = !bson_iter_as_bool(&it);
		else if (bit == 16u)
			r->mtc = bson_iter_as_bool(&it);
	}
}

static uint64_t pend_key(aggregator *a, int64_t conn, int64_t id)
{
	uint64_t k = hash_map_fnv(&a->instance, sizeof a->instance, HASH_MAP_FNV0);
	k = hash_map_fnv(&conn, sizeof conn, k);
	return hash_map_fnv(&id, sizeof id, k);
}

static void note_time(model *m, int64_t t)
{
	if (!m->t_min || t < m->t_min)
		m->t_min = t;
	if (t > m->t_max)
		m->t_max = t;
}

static void per_second(model *m, int64_t t)
{
	uint64_t sec = (uint64_t)(t / 1000000);
	if (!m->per_sec_base || sec < m->per_sec_base) {
		/* Records come in file order; an earlier second (another
		 * instance's file) shifts the table right. */
		uint64_t shift = m->per_sec_base ? m->per_sec_base - sec : 0;
		if (shift > 31 * 86400)
			return;
		uint64_t *np = calloc(m->nsec + shift + 1, sizeof *np);
		if (!np)
			abort();
		if (m->per_sec)
			memcpy(np + shift, m->per_sec, m->nsec * sizeof *np);
		free(m->per_sec);
		m->per_sec = np;
		m->nsec += shift;
		if (!m->nsec)
			m->nsec = 1;
		m->per_sec_base = sec;
	}
	uint64_t i = sec - m->per_sec_base;
	if (i > 31 * 86400)
		return; /* a month is plenty for one chart */
	if (i >= m->nsec) {
		uint64_t *np = realloc(m->per_sec, (i + 1) * sizeof *np);
		if (!np)
			abort();
		memset(np + m->nsec, 0, (i + 1 - m->nsec) * sizeof *np);
		m->per_sec = np;
		m->nsec = i + 1;
	}
	m->per_sec[i]++;
}

#define AGG_TRACKS 4096

static void tracks_drop(aggregator *a)
{
	for (size_t i = 0; i < a->ntracks; i++)
		engine_conn_track_free(a->tracks[i]);
	a->ntracks = 0;
	hash_map_free(&a->track_ix);
	memset(&a->track_ix, 0, sizeof a->track_ix);
}

/* The track slot of (the file's instance, conn); NULL when out of memory. */
static engine_conn_track **track_slot(aggregator *a, int64_t conn)
{
	uint64_t k = hash_map_fnv(&conn, sizeof conn, hash_map_fnv(&a->instance, 8, HASH_MAP_FNV0));
	size_t i = hash_map_get(&a->track_ix, k);
	if (i)
		return &a->tracks[i - 1];
	if (a->ntracks == AGG_TRACKS)
		tracks_drop(a);
	if (!a->tracks && !(a->tracks = calloc(AGG_TRACKS, sizeof *a->tracks)))
		return NULL;
	a->tracks[a->ntracks] = NULL;
	hash_map_put(&a->track_ix, k, ++a->ntracks);
	return &a->tracks[a->ntracks - 1];
}

/* The document counts the request's live verdict read (format version 4;
 * not with lists from a server, --indexes-from, whose counts are none):
 * into *out, or NULL. */
static const engine_counts *rec_counts(const aggregator *a, const bson_t *rec, engine_counts *out)
{
	bson_iter_t it, c;
	if (!a->counts_kept || a->m->indexes_live || !bson_iter_init_find(&it, rec, "counts") ||
	    !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &c))
		return NULL;
	out->n = 0;
	while (out->n < ENGINE_COUNTS_MAX && bson_iter_next(&c)) {
		size_t len = strlen(bson_iter_key(&c));
		if (!BSON_ITER_HOLDS_NUMBER(&c) || len >= ENGINE_COUNTS_NS_LEN)
			continue;
		memcpy(out->at[out->n].ns, bson_iter_key(&c), len + 1);
		out->at[out->n++].docs = bson_iter_as_int64(&c);
	}
	return out;
}

/* The request judged by the engine, as a session would; and, on a
 * collection under a quiet rule's parameter, by the quiet engine. ns: the
 * collection's row + 1 (0: none), an index because a finding on a
 * collection not seen yet (a $unionWith's) adds a row and may move them.
 * A list not known (a schema change's made the engine forget it): the
 * verdicts owed wait in a->late for the next list the capture holds, as
 * live; a request the live path held for it was written after its wait,
 * behind the list if it came (proxy/sinks/capture.c), so without one here
 * it gets no verdict, as live. vh: the keyed values' hashes the record
 * kept (nvh; capture_read_hashes), as the live proxy made them. */
static void judge(aggregator *a, const bson_t *rec, const request *r, int64_t t, const char *app,
                  size_t ns, int64_t conn, const uint64_t *vh, uint32_t nvh)
{
	engine_counts counts;
	request_ctx rc = {.app_name = app,
	                  .client = rec_str(rec, "client"),
	                  .conn = (uint64_t)conn,
	                  .now_ms = t / 1000,
	                  .track = track_slot(a, conn),
	                  .placeholders = a->placeholders,
	                  .counts = rec_counts(a, rec, &counts),
	                  .value_hashes = nvh ? vh : NULL,
	                  .nvalue_hashes = nvh,
	                  .hashes_only = true,
	                  .key_mode = a->key_mode};
	block_info b;
	const cmdview *v = &r->view;
	if (!a->e)
		return;
	a->cur = v;
	a->cur_t = t;
	if (engine_analyze(a->e, v, &rc, &b) == VERDICT_WAIT_INDEXES) {
		rc.no_wait = true;
		(void)engine_analyze(a->e, v, &rc, &b);
	}
	a->cur = NULL;
	a->cur_upsert = b.upsert;
	if (b.late.n && a->late)
		late_queue_owe(a->late, r->plain, r->plain_len, &b.late, app, rc.client, rc.conn,
		               rc.now_ms);
	const model_ns *n = ns ? &a->m->nss[ns - 1] : NULL;
	rc.no_wait = true; /* the quiet findings are the report's own: never late */
	if (a->quiet && n && n->doc_count >= 0 && n->doc_count < (int64_t)a->quiet_max)
		(void)engine_analyze(a->quiet, v, &rc, &b);
}

/* What r's reply tells the index cache, as a session works it out
 * (proxy/session/requests.c): an insert's or a delete's documents, or
 * that an upsert's collection exists. */
static void note_write_kind(aggregator *a, const request *r, pending *p)
{
	char ns[256];
	p->write = 0;
	p->write_ns = NULL;
	if (!a->e || a->m->indexes_live)
		return;
	p->write = engine_write_ns(a->e, &r->view, r->cmd, ns, sizeof ns);
	if (!p->write && engine_upsert_ns(a->e, &r->view, r->cmd, a->cur_upsert, ns, sizeof ns))
		p->write = ENGINE_WRITE_UPSERT;
	if (p->write && !(p->write_ns = strdup(ns)))
		abort();
}

/* A reply is owed (not moreToCome): remembered to pair with it. shape and
 * ns: + 1, 0 for none (housekeeping has no row). A schema change (r's
 * command a DDL one) keeps its message: its reply makes the engine forget
 * what it named, as a session's does (engine_note_ddl); a write, its
 * namespace (note_write_kind). */
static void expect_reply(aggregator *a, const rec_ids *ids, const request *r, size_t shape,
                         size_t ns, int64_t t)
{
	if (ids->mtc)
		return;
	uint64_t k = pend_key(a, ids->conn, ids->id);
	pending *p = malloc(sizeof *p);
	if (!p)
		abort();
	p->key = k;
	p->shape = shape;
	p->ns = ns;
	p->t_us = t;
	p->ddl = NULL;
	if (a->e && engine_is_ddl(&r->view, r->cmd)) {
		if (!(p->ddl = malloc(r->plain_len)))
			abort();
		memcpy(p->ddl, r->plain, r->plain_len);
		p->ddl_len = r->plain_len;
	}
	note_write_kind(a, r, p);
	p->next = a->pend[k % PENDING_BUCKETS];
	a->pend[k % PENDING_BUCKETS] = p;
}

static void on_request(aggregator *a, const bson_t *rec)
{
	model *m = a->m;
	size_t len = 0;
	uint8_t *msg = capture_request_message(rec, &len);
	request r;
	wire_error err = {0};
	int64_t t = rec_time(rec);
	const char *app = rec_str(rec, "app");
	rec_ids ids;
	if (!msg)
		return;
	rec_ids_of(rec, "rid", &ids);
	if (request_decode(&r, msg, len, &err) != REQUEST_COMMAND) {
		request_release(&r);
		free(msg);
		return;
	}
	m->requests++;
	note_time(m, t);
	per_second(m, t);
	if (!strcmp(rec_str(rec, "verdict"), "block"))
		m->blocked++;
	char ns[MODEL_NS_LEN], cmd[64], text[SHAPE_BUF_LEN];
	uint64_t h = shape_of(&r.view, ns, sizeof ns, cmd, sizeof cmd, text);
	uint64_t vh[CAPTURE_VALUE_HASHES_MAX];
	uint32_t nvh = capture_read_hashes(rec, vh, CAPTURE_VALUE_HASHES_MAX);
	const char *hk = report_housekeeping(r.view.name, ns);
	if (hk) {
		/* judged still, so the report's findings stay the live log's */
		report_housekeeping_note(m, hk);
		workload_note(m, a->instance, t, &r.view, cmd, 0, 0);
		judge(a, rec, &r, t, app, 0, ids.conn, vh, nvh);
		expect_reply(a, &ids, &r, 0, 0, t);
		request_release(&r);
		free(msg);
		return;
	}
	model_shape *s = shape_get(a, h, ns, cmd, text, app);
	s->count++;
	size_t si = (size_t)(s - m->shapes) + 1;
	app_get(a, app)->ops++;
	/* the row by index: noting the schema and judging may add rows */
	size_t ni = 0;
	if (!strstr(ns, ".$cmd")) {
		model_ns *n = ns_table_get(&a->nss, ns);
		n->ops++;
		ni = ns_table_index(&a->nss, n);
		agg_note_schema(&a->nss, n, &r.view, cmd);
	}
	workload_note(m, a->instance, t, &r.view, cmd, si, ni);
	rel_request(a->rel, m,
	            &(rel_req){a->instance, ids.conn, ids.id, t, &r.view, cmd, ni, h,
	                       m->shapes[si - 1].proj_fields, a->placeholders, nvh ? vh : NULL, nvh,
	                       a->key_mode});
	judge(a, rec, &r, t, app, ni, ids.conn, vh, nvh);
	expect_reply(a, &ids, &r, si, ni, t);
	request_release(&r);
	free(msg);
}

static int bloat_bucket(int64_t size)
{
	static const int64_t edges[] = {1024, 16384, 131072, 1 << 20, 4 << 20, 16 << 20};
	int b = 0;
	while (b < 6 && size >= edges[b])
		b++;
	return b;
}

/* A schema change's reply: the engine forgets what it named; a failed one
 * changed nothing. A capture with forget records says where the proxy
 * forgot instead (on_forget). */
static void ddl_replied(aggregator *a, pending *p, bool failed)
{
	request r;
	wire_error err = {0};
	bool forget = !failed && !a->forget_records;
	if (forget && request_decode(&r, p->ddl, p->ddl_len, &err) == REQUEST_COMMAND)
		engine_note_ddl(a->e, &r.view);
	if (forget)
		request_release(&r);
	free(p->ddl);
}

/* The proxy's index cache forgot db.coll (or all of db) here, among the
 * lists that landed and the requests judged: pass 2 forgets there too, a
 * late verdict owed across a schema change lost as it was live (engine.h,
 * engine_late); pass 1 takes a "made" one as a schema change met first. */
static void on_forget(aggregator *a, int pass, const bson_t *rec)
{
	bson_iter_t it;
	const char *coll = bson_iter_init_find(&it, rec, "coll") && BSON_ITER_HOLDS_UTF8(&it)
	                       ? bson_iter_utf8(&it, NULL)
	                       : NULL,
	           *why = rec_str(rec, "why");
	index_forget f = !strcmp(why, "written") ? INDEX_FORGET_WRITTEN
	                 : !strcmp(why, "made")  ? INDEX_FORGET_MADE
	                                         : INDEX_FORGET_SCHEMA;
	char ns[MODEL_NS_LEN];
	snprintf(ns, sizeof ns, "%s.%s", rec_str(rec, "db"), coll ? coll : "*");
	if (pass == 1 && f == INDEX_FORGET_MADE) /* a schema change, as a drop's request */
		hash_map_put(&a->listed, hash_map_str_key(ns), 1);
	else if (pass == 2 && a->forget_records && rec_str(rec, "db")[0])
		index_cache_forget(a->ic, rec_str(rec, "db"), coll, f);
}

static void on_reply(aggregator *a, const bson_t *rec)
{
	model *m = a->m;
	m->replies++;
	int64_t t = rec_time(rec);
	note_time(m, t);
	rec_ids ids;
	rec_ids_of(rec, "rt", &ids);
	workload_span(m, a->instance, t);
	value_filter vals;
	bool known = !ids.failed && capture_read_values(rec, &vals);
	rel_reply(a->rel, m, a->instance, ids.conn, ids.id, t, ids.failed ? -1 : ids.n,
	          known ? &vals : NULL);
	engine_conn_track **tr = a->e ? track_slot(a, ids.conn) : NULL;
	if (tr && *tr)
		engine_note_reply(a->e, *tr, ids.failed ? -1 : ids.n, known ? &vals : NULL,
		                  t / 1000);
	uint64_t k = pend_key(a, ids.conn, ids.id);
	pending **pp = &a->pend[k % PENDING_BUCKETS], *p;
	while ((p = *pp) && p->key != k)
		pp = &p->next;
	if (!p)
		return; /* an exhaust stream's later reply, or its request was dropped */
	*pp = p->next;
	m->paired++;
	if (p->ddl)
		ddl_replied(a, p, ids.failed);
	if (p->write_ns) {
		if (p->write == ENGINE_WRITE_UPSERT ||
		    (p->write == ENGINE_WRITE_INSERT && (ids.failed || ids.n <= 0)))
			engine_note_made(a->e, p->write_ns);
		else if (!ids.failed && ids.n > 0 && !a->counts_kept)
			engine_note_docs(a->e, p->write_ns,
			                 p->write == ENGINE_WRITE_DELETE ? -ids.n : ids.n);
		free(p->write_ns);
	}
	if (!p->shape) { /* housekeeping: counted, never a shape's */
		free(p);
		return;
	}
	model_shape *s = &m->shapes[p->shape - 1];
	int64_t lat = clamp_count(t - p->t_us); /* both >= 0: no overflow */
	agg_note_latency(s, p->t_us, lat);
	app_get(a, s->app)->total_us += lat;
	s->bytes += rec_count(rec, "len");
	if (ids.failed || rec_int(rec, "we", 0) > 0)
		agg_note_failure(s, (int32_t)rec_int(rec, "code", 0));
	if (!strcmp(s->command, "find") || !strcmp(s->command, "aggregate") ||
	    !strcmp(s->command, "getMore"))
		s->docs += (uint64_t)clamp_count(ids.n);
	if (p->ns) {
		model_ns *ns = &m->nss[p->ns - 1];
		bson_iter_t d, c;
		if (bson_iter_init_find(&d, rec, "docs") && BSON_ITER_HOLDS_DOCUMENT(&d)) {
			bson_t docs;
			uint32_t l;
			const uint8_t *data;
			bson_iter_document(&d, &l, &data);
			if (bson_init_static(&docs, data, l)) {
				int64_t dn = (int64_t)rec_count(&docs, "n");
				int64_t mx = (int64_t)rec_count(&docs, "max");
				int64_t tot = (int64_t)rec_count(&docs, "total");
				ns->docs += (uint64_t)dn;
				ns->doc_bytes += (uint64_t)tot;
				if (mx > ns->doc_max)
					ns->doc_max = mx;
				if (dn > 0)
					ns->bloat[bloat_bucket(tot / dn)] += (uint64_t)dn;
			}
		}
		if (bson_iter_init_find(&d, rec, "arrays") && bson_iter_recurse(&d, &c))
			while (bson_iter_next(&c))
				agg_array_sample(ns, bson_iter_key(&c), bson_iter_as_int64(&c), t);
	}
	free(p);
}

/* An index list into the cache the engine reads and into the model.
 * specs NULL: the collection has none to reason about (opaque). count: the
 * estimated document count the capture had with it (-1: none, as in a
 * version-1 capture: a rule that reads the count then has no verdict). */
static void put_indexes(aggregator *a, const char *ns, const bson_t *const *specs, size_t n,
                        const char *opaque, int64_t count)
{
	const char *dot = strchr(ns, '.');
	char db[128];
	if (!dot || (size_t)(dot - ns) >= sizeof db)
		return;
	memcpy(db, ns, (size_t)(dot - ns));
	db[dot - ns] = '\0';
	index_set *set = opaque ? index_set_new_opaque(opaque) : index_set_from_specs(specs, n);
	if (!set)
		return;
	if (!opaque)
		index_set_set_doc_count(set, count);
	index_cache_put(a->ic, db, dot + 1, set);
	if (report_housekeeping(NULL, ns)) { /* no collection of the application's */
		index_set_release(set);
		return;
	}
	model_ns *mn = ns_table_get(&a->nss, ns);
	if (!opaque)
		mn->doc_count = count;
	if (opaque) {
		index_set_release(set);
		return;
	}
	free(mn->indexes);
	mn->indexes = calloc(n ? n : 1, sizeof *mn->indexes);
	if (!mn->indexes)
		abort();
	mn->nindexes = n;
	mn->have_indexes = true;
	for (size_t i = 0; i < n; i++) {
		model_index *mi = &mn->indexes[i];
		const index_def *def = index_set_get(set, i);
		snprintf(mi->name, sizeof mi->name, "%s", def->name);
		snprintf(mi->first, sizeof mi->first, "%s", def->nkeys ? def->keys[0].field : "");
		mi->ops = -1;
		ns_index_spec_facts(specs[i], mi);
		bson_iter_t ki;
		uint32_t l;
		const uint8_t *d;
		bson_t kd;
		if (bson_iter_init_find(&ki, specs[i], "key") && BSON_ITER_HOLDS_DOCUMENT(&ki)) {
			bson_iter_document(&ki, &l, &d);
			if (bson_init_static(&kd, d, l)) {
				char *j = bson_as_relaxed_extended_json(&kd, NULL);
				snprintf(mi->key, sizeof mi->key, "%s", j ? j : "{}");
				bson_free(j);
			}
		}
	}
	index_set_release(set);
}

void aggregator_put_indexes(aggregator *a, const char *ns, const bson_t *const *specs, size_t n)
{
	put_indexes(a, ns, specs, n, NULL, -1);
}

/* A snapshot record; ignored when the indexes come from --indexes-from. */
static void on_indexes(aggregator *a, const bson_t *rec)
{
	bson_iter_t it, e;
	const bson_t *specs[256];
	bson_t docs[256];
	size_t n = 0;
	if (a->m->indexes_live)
		return;
	if (bson_iter_init_find(&it, rec, "opaque")) {
		put_indexes(a, rec_str(rec, "ns"), NULL, 0, rec_str(rec, "opaque"), -1);
		return;
	}
	if (!bson_iter_init_find(&it, rec, "indexes") || !bson_iter_recurse(&it, &e))
		return;
	while (bson_iter_next(&e) && n < 256) {
		uint32_t l;
		const uint8_t *d;
		if (!BSON_ITER_HOLDS_DOCUMENT(&e))
			continue;
		bson_iter_document(&e, &l, &d);
		if (bson_init_static(&docs[n], d, l)) {
			specs[n] = &docs[n];
			n++;
		}
	}
	put_indexes(a, rec_str(rec, "ns"), specs, n, NULL, rec_int(rec, "count", -1));
}

aggregator *aggregator_new(model *m)
{
	aggregator *a = calloc(1, sizeof *a);
	if (!a)
		return NULL;
	a->m = m;
	a->nss.m = m;
	a->ic = index_cache_new(NULL, 0, NULL, NULL, NULL, 0);
	a->rel = rel_tracker_new();
	if (!a->rel)
		abort();
	rule_config_defaults(&a->cfg);
	return a;
}

/* The engine's tally: a finding at the time of the request judged. */
static void tally(void *arg, rule_id rule, rule_action action)
{
	aggregator *a = arg;
	(void)action;
	agg_tally_at(a->m, a->cur_t, rule);
}

/* The quiet engine's sink: the shape would be reported once its
 * collection grows past the rule's parameter. */
static void on_quiet_finding(void *arg, const finding *f)
{
	aggregator *a = arg;
	size_t i = hash_map_get(&a->shapes, f->shape_hash);
	if (i)
		a->m->shapes[i - 1].quiet_rules |= 1u << f->rule;
}

/* The engines are made at the first request, once a header said which
 * rules the capture ran with. */
static void ensure_engine(aggregator *a)
{
	if (!a->e) {
		a->e = engine_new(&a->cfg, a->ic, on_finding, a);
		a->late = late_queue_new(NULL, NULL);
		if (a->e)
			engine_set_tally(a->e, tally, a);
		if (a->quiet_max)
			a->quiet = engine_new(&a->quiet_cfg, a->ic, on_quiet_finding, a);
	}
}

/* Pass 1: a schema change (rec a request) met before a namespace's first
 * list makes that list no good for the requests before it (live, they had
 * another or none): they are judged with the lists met in their place.
 * "db.*" keys a change to more than one collection. */
static void note_schema_change(aggregator *a, const bson_t *rec)
{
	int scope = engine_ddl_scope(rec_str(rec, "op"));
	char key[MODEL_NS_LEN];
	snprintf(key, sizeof key, scope == ENGINE_DDL_ONE ? "%s" : "%s.*",
	         rec_str(rec, scope == ENGINE_DDL_ONE ? "ns" : "db"));
	if (scope)
		hash_map_put(&a->listed, hash_map_str_key(key), 1);
}

static bool changed_first(aggregator *a, const char *ns)
{
	char key[MODEL_NS_LEN];
	snprintf(key, sizeof key, "%.*s.*", (int)strcspn(ns, "."), ns);
	return hash_map_get(&a->listed, hash_map_str_key(key)) != 0;
}

void aggregator_set_input(aggregator *a, size_t input)
{
	a->input = input;
}

void aggregator_record(aggregator *a, int pass, const bson_t *rec)
{
	switch (capture_kind(rec)) {
	case CAPTURE_REC_HEADER:
		a->instance = hash_map_str_key(rec_str(rec, "instance"));
		a->placeholders = strcmp(rec_str(rec, "redaction"), "none") != 0;
		a->forget_records = capture_header_version(rec) >= 3;
		a->counts_kept = capture_header_version(rec) >= 4;
		a->key_mode = capture_header_version(rec) < 6   ? KEYED_ALONE
		              : capture_header_version(rec) < 7 ? KEYED_TOP
		                                                : KEYED_FLAT;
		index_cache_set_replay(a->ic, a->forget_records);
		if (!a->rules_set) {
			agg_rules_from_header(a->m, rec, &a->cfg, &a->quiet_cfg, &a->quiet_max);
			a->rules_set = true;
		}
		break;
	case CAPTURE_REC_INDEXES: {
		/* pass 1: the first list of each namespace, "does not exist"
		 * included (the list a first request's late verdict met), unless a
		 * schema change came first; pass 2: each in its place */
		uint64_t k = hash_map_str_key(rec_str(rec, "ns"));
		if (pass == 1 &&
		    (hash_map_get(&a->listed, k) || changed_first(a, rec_str(rec, "ns"))))
			break;
		if (pass == 1)
			hash_map_put(&a->listed, k, 1);
		on_indexes(a, rec);
		if (pass == 2 && a->late) {
			int64_t now_ms = rec_time(rec) / 1000;
			late_queue_expire(a->late, now_ms);
			late_queue_judge(a->late, a->e, now_ms);
		}
		break;
	}
	case CAPTURE_REC_REQUEST:
		if (pass == 1)
			note_schema_change(a, rec);
		if (pass == 2) {
			ensure_engine(a);
			on_request(a, rec);
		}
		break;
	case CAPTURE_REC_REPLY:
		if (pass == 2)
			on_reply(a, rec);
		break;
	case CAPTURE_REC_FORGET:
		on_forget(a, pass, rec);
		break;
	case CAPTURE_REC_GAP:
		if (pass == 2) {
			a->m->gaps++;
			a->m->dropped += rec_count(rec, "dropped");
		}
		break;
	default:
		break;
	}
}

static double pct(const int64_t *v, size_t n, double q)
{
	if (!n)
		return 0;
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return (double)v[i] / 1000.0;
}

void aggregator_finish(aggregator *a)
{
	model *m = a->m;
	if (a->e)
		engine_flush_summaries(a->e);
	if (a->quiet)
		engine_flush_summaries(a->quiet);
	report_housekeeping_finish(m);
	for (size_t i = 0; i < m->nfindings; i++) {
		size_t s = hash_map_get(&a->shapes, m->findings[i].hash);
		if (s)
			m->shapes[s - 1].rules |= 1u << m->findings[i].rule;
	}
	report_timeline_build(m); /* while lat_us still pairs with lat_t */
	for (size_t i = 0; i < m->nshapes; i++) {
		model_shape *s = &m->shapes[i];
		if (s->nlat > 1) /* lat_us is NULL for a shape no reply timed */
			sort_i64(s->lat_us, s->nlat);
		s->p50 = pct(s->lat_us, s->nlat, 0.50);
		s->p95 = pct(s->lat_us, s->nlat, 0.95);
		s->p99 = pct(s->lat_us, s->nlat, 0.99);
		agg_finish_failures(s);
		app_get(a, s->app)->shapes++;
	}
	for (size_t i = 0; i < m->nnss; i++)
		ns_mark_used(&m->nss[i]);
	report_arrays_finish(m); /* before the recommendations: a push's pattern reads it */
	workload_finish(m);      /* the covered time, which the relationships' rates need */
	rel_finish(a->rel, m);
	report_recommend_build(m);
}

void aggregator_free(aggregator *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < PENDING_BUCKETS; i++)
		for (pending *p = a->pend[i], *n; p; p = n) {
			n = p->next;
			free(p->ddl);
			free(p->write_ns);
			free(p);
		}
	if (a->e)
		engine_free(a->e);
	if (a->quiet)
		engine_free(a->quiet);
	if (a->ic)
		index_cache_free(a->ic);
	rel_tracker_free(a->rel);
	late_queue_free(a->late);
	tracks_drop(a);
	free(a->tracks);
	hash_map_free(&a->shapes);
	hash_map_free(&a->findings);
	hash_map_free(&a->apps);
	hash_map_free(&a->listed);
	ns_table_free(&a->nss);
	free(a);
}
