/* client-side-join through the engine as the proxy drives it: requests
 * with a connection's track (and its repeat template), replies told with
 * engine_note_reply. The positives (N+1 by _id, by a single key, a
 * populate $in batch, a few $in batches, pagination) and the near misses
 * the rule must stay silent on, the findings' words, the dedupe per pair
 * of shapes, and that reads a repeat template judges are still counted. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "analyzers/rules/rule_join.h"
#include "fixtures/analyzer_fixture.h"

#define J RULE_CLIENT_SIDE_JOIN

typedef struct conn {
	engine_conn_track *track;
	engine_repeat *repeat;
} conn;

typedef struct world {
	engine *e;
	fx_sink sink;
	int64_t t; /* ms */
	unsigned oid;
	bool placeholders; /* requests as a redacted capture's replay gives them */
	bool replay;       /* values never hashed here: only the next request's vh */
	const uint64_t *vh;
	uint32_t nvh;
	keyed_mode key_mode; /* as a capture of which format is replayed */
} world;

static void world_open(world *w, rule_action action)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[J].action = action;
	fx_sink_init(&w->sink);
	w->e = engine_new(&cfg, NULL, fx_sink_fn, &w->sink);
	assert_non_null(w->e);
	w->t = 1000000;
	w->oid = 1;
	w->placeholders = w->replay = false;
	w->vh = NULL;
	w->nvh = 0;
	w->key_mode = KEYED_FLAT;
}

static void conn_close(conn *c)
{
	engine_conn_track_free(c->track);
	engine_repeat_free(c->repeat);
	memset(c, 0, sizeof(*c));
}

static void world_close(world *w)
{
	engine_free(w->e);
	fx_sink_free(&w->sink);
}

/* One request on c at the world's time, then (ndocs >= -1) its reply,
 * whose documents held vals (NULL: not known). */
static verdict send_vals(world *w, conn *c, const char *json, int64_t ndocs,
                         const value_filter *vals)
{
	request_ctx rc = {.app_name = "shop-api",
	                  .client = "127.0.0.1:5000",
	                  .conn = 7,
	                  .now_ms = w->t,
	                  .repeat = &c->repeat,
	                  .track = &c->track,
	                  .placeholders = w->placeholders,
	                  .value_hashes = w->vh,
	                  .nvalue_hashes = w->nvh,
	                  .hashes_only = w->replay,
	                  .key_mode = w->key_mode};
	block_info block;
	verdict v = fx_analyze(w->e, "shop", json, NULL, 0, &rc, &block);
	if (ndocs >= -1) /* the reply, a round trip later */
		engine_note_reply(w->e, c->track, ndocs, vals, ++w->t);
	return v;
}

static verdict send(world *w, conn *c, const char *json, int64_t ndocs)
{
	return send_vals(w, c, json, ndocs, NULL);
}

static void add_value(value_filter *vf, const bson_iter_t *it)
{
	uint8_t t = it->raw[it->type];
	size_t n = it->next_off - it->d1;
	if (value_checkable(t, n))
		value_filter_add(vf, value_hash(t, it->raw + it->d1, n));
}

/* The values of docs (a JSON array of documents) as the proxy reads a
 * reply's first batch: each document's fields and its arrays' elements
 * (the proxy reads two levels down, and only the first few documents:
 * test_proxy_workload.c). all: docs are the whole batch. */
static const value_filter *values_in(value_filter *vf, const char *docs, bool all)
{
	char json[4096];
	snprintf(json, sizeof json, "{'d':%s}", docs);
	bson_t *b = fx_doc(json);
	bson_iter_t it, d, f, a;
	value_filter_clear(vf);
	assert_true(bson_iter_init_find(&it, b, "d") && bson_iter_recurse(&it, &d));
	while (bson_iter_next(&d) && bson_iter_recurse(&d, &f))
		while (bson_iter_next(&f)) {
			add_value(vf, &f);
			if (BSON_ITER_HOLDS_ARRAY(&f) && bson_iter_recurse(&f, &a))
				while (bson_iter_next(&a))
					add_value(vf, &a);
		}
	bson_destroy(b);
	vf->all = all;
	return vf;
}

static const value_filter *values_of(value_filter *vf, const char *docs)
{
	return values_in(vf, docs, true);
}

#define NO_REPLY (-2)

static void find_orders(world *w, conn *c, int64_t n)
{
	send(w, c, "{'find':'orders','filter':{'status':'A'},'sort':{'created':-1},'limit':50}", n);
}

/* A find of coll by field = a fresh ObjectId (a driver's findById). */
static verdict find_by(world *w, conn *c, const char *coll, const char *field)
{
	char json[256];
	snprintf(json, sizeof(json),
	         "{'find':'%s','filter':{'%s':{'$oid':'%024x'}},'limit':1,'singleBatch':true}",
	         coll, field, w->oid++);
	return send(w, c, json, 1);
}

/* A find of coll by _id $in n fresh ObjectIds (populate). */
static void find_in(world *w, conn *c, const char *coll, unsigned n, int64_t ndocs)
{
	char json[4096];
	int at = snprintf(json, sizeof(json), "{'find':'%s','filter':{'_id':{'$in':[", coll);
	for (unsigned i = 0; i < n; i++)
		at += snprintf(json + at, sizeof(json) - at, "%s{'$oid':'%024x'}", i ? "," : "",
		               w->oid++);
	snprintf(json + at, sizeof(json) - at, "]}}}");
	send(w, c, json, ndocs);
}

/* n keyed reads of coll, gap ms apart (the first gap ms after now). */
static void n_plus_one(world *w, conn *c, const char *coll, const char *field, int n, int gap)
{
	for (int i = 0; i < n; i++) {
		w->t += gap;
		assert_int_equal(find_by(w, c, coll, field), VERDICT_FORWARD);
	}
}

static void expect_silent(world *w)
{
	if (fx_sink_count(&w->sink, J) != 0)
		fail_msg("unexpected finding: %s", fx_sink_first(&w->sink, J)->detail);
}

static const fx_finding *expect_one(world *w, const char *ns, const char *detail)
{
	assert_int_equal(fx_sink_count(&w->sink, J), 1);
	const fx_finding *f = fx_sink_first(&w->sink, J);
	if (getenv("FX_VERBOSE"))
		printf("shape       %s\ndetail      %s\nsuggestion  %s\n", f->shape, f->detail,
		       f->suggestion);
	assert_string_equal(f->ns, ns);
	assert_string_equal(f->command, "find");
	if (!strstr(f->detail, detail))
		fail_msg("detail [%s] lacks [%s]", f->detail, detail);
	assert_non_null(strstr(f->suggestion, "$lookup"));
	assert_non_null(strstr(f->suggestion, "extended reference"));
	assert_int_equal(f->repeats, 0);
	assert_null(strstr(f->shape, "0000")); /* redacted: no ObjectId */
	return f;
}

static const fx_finding *last_join(fx_sink *s)
{
	for (size_t i = s->n; i > 0; i--)
		if (s->f[i - 1].rule == J)
			return &s->f[i - 1];
	fail_msg("no finding");
	return NULL;
}

/* ---- positives ---- */

static void test_defaults(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	assert_string_equal(rule_name(J), "client-side-join");
	assert_int_equal(cfg.rules[J].action, RULE_LOG);
	assert_int_equal(cfg.rules[J].params[JOIN_PARAM_WINDOW_MS], 100);
	assert_int_equal(cfg.rules[J].params[JOIN_PARAM_MIN_FANOUT], 3);
}

static void test_n_plus_one_by_id(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 10);
	n_plus_one(&w, &c, "customers", "_id", 4, 2);
	expect_silent(&w); /* 4 of 10: not yet */
	n_plus_one(&w, &c, "customers", "_id", 1, 2);
	const fx_finding *f = expect_one(
	    &w, "shop.customers",
	    "after a read of \"shop.orders\" returned 10 documents, this connection read "
	    "\"shop.customers\" by \"_id\" 5 times, one find per document (N+1), each within "
	    "100 ms of the last (fan-out 5 of 10)");
	assert_int_equal(f->action, RULE_LOG);
	assert_string_equal(f->app_name, "shop-api");
	n_plus_one(&w, &c, "customers", "_id", 5, 2); /* the rest of the loop: once */
	assert_int_equal(fx_sink_count(&w.sink, J), 1);
	conn_close(&c);
	world_close(&w);
}

/* The reads after the first are judged by the connection's repeat template
 * (no check is called for them): they are counted all the same. */
static void test_repeat_template_reads_counted(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 8);
	n_plus_one(&w, &c, "customers", "_id", 3, 1);
	expect_silent(&w);
	assert_true(engine_repeat_hits(c.repeat) >= 2);
	n_plus_one(&w, &c, "customers", "_id", 1, 1);
	expect_one(&w, "shop.customers", "4 times");
	conn_close(&c);
	world_close(&w);
}

static void test_n_plus_one_by_single_key(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 6);
	n_plus_one(&w, &c, "items", "orderId", 3, 5);
	expect_one(&w, "shop.items",
	           "read \"shop.items\" by \"orderId\" 3 times, one find per document (N+1)");
	conn_close(&c);
	world_close(&w);
}

static void test_eq_operator(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 3);
	for (int i = 0; i < 3; i++) {
		w.t += 3;
		char json[160];
		snprintf(json, sizeof(json), "{'find':'users','filter':{'email':{'$eq':'u%d@x'}}}",
		         i);
		send(&w, &c, json, 1);
	}
	expect_one(&w, "shop.users", "by \"email\" 3 times");
	conn_close(&c);
	world_close(&w);
}

static void test_populate_one_in_batch(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 20);
	w.t += 4;
	find_in(&w, &c, "customers", 20, 20);
	expect_one(&w, "shop.customers",
	           "returned 20 documents, this connection read \"shop.customers\" by \"_id\" in 1 "
	           "$in batch holding 20 keys, each within 100 ms of the last (fan-out 20 of 20)");
	conn_close(&c);
	world_close(&w);
}

/* A world at log whose connection read six orders, then three reads of
 * form (with one %024x: a new ObjectId each), taken as a capture of mode's
 * format was. */
static void three_after_orders(world *w, conn *c, const char *form, keyed_mode mode)
{
	world_open(w, RULE_LOG);
	w->key_mode = mode;
	find_orders(w, c, 6);
	for (int k = 0; k < 3; k++) {
		char json[256];
		snprintf(json, sizeof json, form, w->oid++);
		w->t += 2;
		send(w, c, json, 1);
	}
}

/* A key with conditions beside it (protocol/keyed_filter.h): a
 * soft-delete plugin's populate (mongoose-delete: {_id: {$in: [ids]},
 * deleted: {$ne: false}}), populate's `match` option, a flag beside a
 * key's equality, the key after the condition: each a keyed read, joined
 * as the key alone is. Before, "an $in next to another condition" hid
 * every populate of a soft-deleting model. */
static void test_key_beside_conditions(void **state)
{
	static const char *const forms[] = {
	    "{'find':'customers','filter':{'_id':{'$in':[%s]},'deleted':{'$ne':false}}}",
	    "{'find':'customers','filter':{'deleted':{'$ne':true},'_id':{'$in':[%s]}}}",
	    "{'find':'customers','filter':{'_id':{'$in':[%s]},'status':'published'}}",
	    "{'find':'customers','filter':{'_id':{'$in':[%s]},'deletedAt':null,'n':{'$gt':0}}}",
	    "{'aggregate':'customers','pipeline':[{'$match':{'_id':{'$in':[%s]},'deleted':false}}],"
	    "'cursor':{}}",
	    /* in a top-level $and (test_and_fields_are_the_filters) */
	    "{'find':'customers','filter':{'$and':[{'status':'published'},{'_id':{'$in':[%s]}}]}}",
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		world w;
		conn c = {0};
		char ids[2048], json[4096];
		int at = 0;
		world_open(&w, RULE_LOG);
		find_orders(&w, &c, 8);
		for (int k = 0; k < 8; k++)
			at += snprintf(ids + at, sizeof ids - at, "%s{'$oid':'%024x'}",
			               k ? "," : "", w.oid++);
		snprintf(json, sizeof json, forms[i], ids);
		w.t += 4;
		send(&w, &c, json, 8);
		const fx_finding *f = last_join(&w.sink);
		assert_int_equal(fx_sink_count(&w.sink, J), 1);
		if (!strstr(f->detail, "by \"_id\" in 1 $in batch holding 8 keys"))
			fail_msg("%s: %s", forms[i], f->detail);
		conn_close(&c);
		world_close(&w);
	}
	/* N+1 by _id with a flag beside it, then a populate whose key is the
	 * only equality that is not a flag */
	static const char *const each[] = {
	    "{'find':'customers','filter':{'_id':{'$oid':'%024x'},'deleted':false}}",
	    "{'find':'customers','filter':{'isDeleted':{'$ne':true},'_id':{'$eq':{'$oid':'%024x'}}}"
	    "}",
	};
	for (size_t i = 0; i < sizeof(each) / sizeof(each[0]); i++) {
		world w;
		conn c = {0};
		three_after_orders(&w, &c, each[i], KEYED_FLAT);
		const fx_finding *f = expect_one(&w, "shop.customers", "by \"_id\" 3 times");
		(void)f;
		conn_close(&c);
		world_close(&w);
	}
}

/* The value hashes a capture keeps for find (its key {_id: {$in: ['x',
 * 'y']}} among conditions) are the key's alone: those of the key without
 * them, in order. */
static void hashes_of_the_key_alone(const char *find)
{
	uint64_t a[4], b[4];
	fx_req q;
	assert_true(fx_req_build(&q, "shop", find, NULL, 0));
	assert_int_equal(engine_value_hashes(&q.v, a, 4), 2);
	fx_req_free(&q);
	assert_true(
	    fx_req_build(&q, "shop", "{'find':'c','filter':{'_id':{'$in':['x','y']}}}", NULL, 0));
	assert_int_equal(engine_value_hashes(&q.v, b, 4), 2);
	fx_req_free(&q);
	assert_memory_equal(a, b, sizeof(uint64_t) * 2);
}

/* A top-level $and's documents are the filter's fields, as mongod reads
 * them: ODMantic sends every query of two conditions so ({$and: [{f: {$eq:
 * v}}, {g: {$eq: w}}]}). An N+1 by _id with a flag beside it and a $and of
 * one document are keyed reads (a populate's $in with a condition in a $and
 * is test_key_beside_conditions'); the hashes a capture keeps are the key's
 * values, equal to those of the key alone. A capture of format 6 took the
 * $and for an operator: its replay
 * (KEYED_TOP) stays silent where that proxy did. */
static void test_and_fields_are_the_filters(void **state)
{
	static const char *const each[] = {
	    "{'find':'customers','filter':{'$and':[{'_id':{'$eq':{'$oid':'%024x'}}},{'deleted':{"
	    "'$eq':false}}]}}",
	    "{'find':'customers','filter':{'$and':[{'_id':{'$oid':'%024x'}}]}}",
	    "{'aggregate':'customers','pipeline':[{'$match':{'$and':[{'deleted':false},{'_id':{"
	    "'$oid':'%024x'}}]}}],'cursor':{}}",
	};
	for (int mode = KEYED_FLAT; mode <= KEYED_TOP; mode++)
		for (size_t i = 0; i < sizeof(each) / sizeof(each[0]); i++) {
			world w;
			conn c = {0};
			three_after_orders(&w, &c, each[i], (keyed_mode)mode);
			if (mode != KEYED_FLAT) {
				expect_silent(&w);
			} else {
				assert_int_equal(fx_sink_count(&w.sink, J), 1);
				if (!strstr(last_join(&w.sink)->detail, "by \"_id\" 3 times"))
					fail_msg("%s: %s", each[i], last_join(&w.sink)->detail);
			}
			conn_close(&c);
			world_close(&w);
		}

	hashes_of_the_key_alone(
	    "{'find':'c','filter':{'$and':[{'deleted':false},{'_id':{'$in':['x','y']}}]}}");
}

/* A capture of format version 5 or older was read live by a key alone:
 * its replay (KEYED_ALONE) reads so, and stays silent where that proxy did;
 * the hashes a capture keeps are the key's values alone, in its order,
 * equal to those of the key without its conditions. */
static void test_key_alone_in_old_captures(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	w.key_mode = KEYED_ALONE;
	find_orders(&w, &c, 6);
	for (int k = 0; k < 6; k++) {
		char json[256];
		snprintf(json, sizeof json,
		         "{'find':'customers','filter':{'_id':%d,'deleted':false}}", k);
		w.t += 2;
		send(&w, &c, json, 1);
	}
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);

	hashes_of_the_key_alone(
	    "{'find':'c','filter':{'deleted':false,'_id':{'$in':['x','y']},'n':3}}");
}

static void test_few_in_batches(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 30);
	for (int i = 0; i < 2; i++) {
		w.t += 10;
		find_in(&w, &c, "customers", 5, 5);
	}
	expect_silent(&w); /* 10 keys of 30 */
	w.t += 10;
	find_in(&w, &c, "customers", 5, 5);
	expect_one(&w, "shop.customers", "in 3 $in batches holding 15 keys");
	conn_close(&c);
	world_close(&w);
}

/* A find's first batch, then a getMore: the parent's documents add up and
 * its chain goes on. */
static void test_pagination(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 4);
	n_plus_one(&w, &c, "customers", "_id", 1, 2);
	w.t += 2;
	send(&w, &c, "{'getMore':{'$numberLong':'123456'},'collection':'orders'}", 16);
	n_plus_one(&w, &c, "customers", "_id", 8, 2);
	expect_silent(&w); /* 9 of 20 */
	n_plus_one(&w, &c, "customers", "_id", 1, 2);
	expect_one(&w, "shop.customers", "returned 20 documents");
	conn_close(&c);
	world_close(&w);
}

/* A cursor read in batches under minFanout (batchSize 2): its first batch
 * is kept, not active, and its getMores fill it up. It was never a
 * parent, so each getMore was one of its own, under minFanout too, and
 * the chain went unreported (held-out set 4, j36). A short first batch
 * never pushes out a parent being joined. */
static void test_pagination_from_a_small_first_batch(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 2);
	for (int i = 0; i < 4; i++) {
		w.t += 2;
		send(&w, &c, "{'getMore':{'$numberLong':'123456'},'collection':'orders'}", 2);
	}
	n_plus_one(&w, &c, "customers", "_id", 5, 2);
	expect_one(&w, "shop.customers", "returned 10 documents");
	conn_close(&c);
	world_close(&w);

	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 6); /* a parent being joined */
	n_plus_one(&w, &c, "customers", "_id", 1, 2);
	const char *others[] = {"a", "b", "c", "d", "e"};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		char json[96];
		snprintf(json, sizeof json, "{'find':'%s','filter':{'k':1}}", others[i]);
		w.t += 1;
		send(&w, &c, json, 2); /* short results: none takes its slot */
	}
	n_plus_one(&w, &c, "customers", "_id", 2, 1);
	expect_one(&w, "shop.customers", "after a read of \"shop.orders\" returned 6");
	conn_close(&c);
	world_close(&w);
}

/* Several parents on one connection: a chain joins the most recent. */
static void test_most_recent_parent(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 6);
	w.t += 2;
	send(&w, &c, "{'find':'invoices','filter':{'due':{'$lt':5}}}", 6);
	n_plus_one(&w, &c, "payments", "invoiceId", 3, 2);
	expect_one(&w, "shop.payments", "after a read of \"shop.invoices\" returned 6");
	conn_close(&c);
	world_close(&w);
}

/* Two child collections per parent document, interleaved. */
static void test_two_children_interleaved(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 4);
	for (int i = 0; i < 2; i++) {
		n_plus_one(&w, &c, "customers", "_id", 1, 2);
		n_plus_one(&w, &c, "products", "_id", 1, 2);
	}
	expect_silent(&w);
	n_plus_one(&w, &c, "customers", "_id", 1, 2);
	n_plus_one(&w, &c, "products", "_id", 1, 2);
	assert_int_equal(fx_sink_count(&w.sink, J), 2);
	assert_string_equal(w.sink.f[0].ns, "shop.customers");
	assert_string_equal(w.sink.f[1].ns, "shop.products");
	conn_close(&c);
	world_close(&w);
}

/* A loop that reads each order's items too (a parent of its own: 3
 * documents each) goes on joining the orders it started with. */
static void test_loop_with_nested_reads(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 8);
	for (int i = 0; i < 3; i++) {
		n_plus_one(&w, &c, "customers", "_id", 1, 2);
		w.t += 2;
		char json[160];
		snprintf(json, sizeof(json), "{'find':'items','filter':{'orderId':%d}}", i);
		send(&w, &c, json, 3);
	}
	expect_silent(&w); /* 3 of 8 each */
	n_plus_one(&w, &c, "customers", "_id", 1, 2);
	expect_one(&w, "shop.customers",
	           "after a read of \"shop.orders\" returned 8 documents, this connection read "
	           "\"shop.customers\" by \"_id\" 4 times");
	w.t += 2;
	send(&w, &c, "{'find':'items','filter':{'orderId':3}}", 3);
	assert_int_equal(fx_sink_count(&w.sink, J), 2);
	assert_string_equal(w.sink.f[1].ns, "shop.items");
	assert_non_null(strstr(w.sink.f[1].detail, "after a read of \"shop.orders\" returned 8"));
	conn_close(&c);
	world_close(&w);
}

/* Once per pair of shapes: the same loop again, on this connection or
 * another, is not reported again; another child shape is. */
static void test_dedupe_per_pair(void **state)
{
	world w;
	conn c = {0}, d = {0};
	world_open(&w, RULE_LOG);
	for (int round = 0; round < 3; round++) {
		w.t += 1000;
		find_orders(&w, &c, 5);
		n_plus_one(&w, &c, "customers", "_id", 5, 1);
		w.t += 1000;
		find_orders(&w, &d, 5);
		n_plus_one(&w, &d, "customers", "_id", 5, 1);
	}
	assert_int_equal(fx_sink_count(&w.sink, J), 1);
	w.t += 1000;
	find_orders(&w, &c, 5);
	w.t += 1;
	find_in(&w, &c, "customers", 5, 5); /* another shape: another pair */
	assert_int_equal(fx_sink_count(&w.sink, J), 2);
	/* The parent's shape is its namespace and command: another find of
	 * orders is the same pair, an aggregate of orders another. */
	w.t += 1000;
	send(&w, &c, "{'find':'orders','filter':{'customer':'x'}}", 5);
	n_plus_one(&w, &c, "customers", "_id", 3, 1);
	assert_int_equal(fx_sink_count(&w.sink, J), 2);
	w.t += 1000;
	send(&w, &c, "{'aggregate':'orders','pipeline':[{'$match':{'a':1}}],'cursor':{}}", 5);
	n_plus_one(&w, &c, "customers", "_id", 3, 1);
	assert_int_equal(fx_sink_count(&w.sink, J), 3);
	assert_string_equal(w.sink.f[2].ns, "shop.customers");
	assert_int_not_equal(w.sink.f[2].shape_hash, w.sink.f[0].shape_hash);
	conn_close(&c);
	conn_close(&d);
	world_close(&w);
}

/* Never a block: at block the finding is a dry run, the read forwarded. */
static void test_block_is_dry_run(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_BLOCK);
	find_orders(&w, &c, 3);
	n_plus_one(&w, &c, "customers", "_id", 3, 1); /* asserts each one forwarded */
	const fx_finding *f = expect_one(&w, "shop.customers", "3 times");
	assert_int_equal(f->action, RULE_DRY_RUN);
	assert_non_null(strstr(f->would_block, "rule client-side-join"));
	/* nothing it reads can be blocked: a large insert may be cut through */
	assert_false(engine_may_block(w.e, "insert"));
	assert_false(engine_may_block(w.e, "find"));
	conn_close(&c);
	world_close(&w);
}

static void test_off_tracks_nothing(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_OFF);
	find_orders(&w, &c, 10);
	n_plus_one(&w, &c, "customers", "_id", 10, 1);
	expect_silent(&w);
	assert_null(c.track);
	conn_close(&c);
	world_close(&w);
}

/* ---- near misses ---- */

static void test_single_lookup(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 10);
	n_plus_one(&w, &c, "customers", "_id", 1, 2);
	w.t += 500;
	find_orders(&w, &c, 2);
	n_plus_one(&w, &c, "customers", "_id", 1, 2);
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

/* A parent of one document: a plain reference lookup, whatever follows;
 * and of none. */
static void test_small_parents(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 1);
	n_plus_one(&w, &c, "customers", "_id", 5, 2);
	w.t += 500;
	find_orders(&w, &c, 0);
	n_plus_one(&w, &c, "customers", "_id", 5, 2);
	w.t += 500;
	find_orders(&w, &c, 2);
	n_plus_one(&w, &c, "customers", "_id", 5, 2);
	w.t += 500;
	find_orders(&w, &c, -1); /* reply not known */
	n_plus_one(&w, &c, "customers", "_id", 5, 2);
	w.t += 500;
	find_orders(&w, &c, NO_REPLY); /* no reply told at all */
	n_plus_one(&w, &c, "customers", "_id", 5, 2);
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

static void test_batch_job_without_parent(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	n_plus_one(&w, &c, "customers", "_id", 200, 1);
	for (int i = 0; i < 5; i++) {
		w.t += 1;
		find_in(&w, &c, "customers", 50, 50);
	}
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

/* The keyed reads start too late after the parent's reply, or are spaced
 * wider than the window. */
static void test_beyond_window(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 10);
	w.t += 150;
	n_plus_one(&w, &c, "customers", "_id", 10, 2);
	w.t += 1000;
	find_orders(&w, &c, 6);
	n_plus_one(&w, &c, "customers", "_id", 6, 101);
	w.t += 1000;
	find_orders(&w, &c, 6);
	n_plus_one(&w, &c, "customers", "_id", 2, 20);
	w.t += 120; /* the chain breaks: the parent is stale too */
	n_plus_one(&w, &c, "customers", "_id", 2, 20);
	/* a chain that broke while its parent stayed active (other keyed
	 * reads joined it): counted afresh */
	w.t += 1000;
	find_orders(&w, &c, 10);
	n_plus_one(&w, &c, "customers", "_id", 2, 2);
	n_plus_one(&w, &c, "products", "_id", 4, 50);
	n_plus_one(&w, &c, "customers", "_id", 3, 2);
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

static void test_writes_are_not_reads(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 10);
	for (int i = 0; i < 10; i++) {
		char json[200];
		w.t += 1;
		snprintf(json, sizeof(json),
		         "{'update':'customers','updates':[{'q':{'_id':%d},'u':{'$inc':{'n':1}}}]}",
		         i);
		send(&w, &c, json, -1);
		snprintf(json, sizeof(json),
		         "{'findAndModify':'stock','query':{'_id':%d},'update':{'$inc':{'n':-1}}}",
		         i);
		send(&w, &c, json, -1);
		snprintf(json, sizeof(json), "{'count':'customers','query':{'_id':%d}}", i);
		send(&w, &c, json, -1);
	}
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

/* The same value read again and again is no join of the parent's
 * documents: a discriminator ({_cls: "Person"}, MongoEngine's) or a
 * counter's _id read in a loop. The fan-out counts distinct values. */
static void test_one_value_repeated(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 10);
	for (int i = 0; i < 8; i++) {
		w.t += 1;
		send(&w, &c, "{'find':'person','filter':{'_cls':'Person'}}", 1);
	}
	w.t += 1;
	send(&w, &c, "{'find':'people','filter':{'_id':{'$in':[7,7,7,7,7,7]}}}", 1);
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

/* In a redacted capture's replay (mongoguard report) every literal is a
 * placeholder of its type: one value repeated cannot be told from many,
 * so each value read counts. */
static void test_placeholders_count_each_read(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	w.placeholders = true;
	find_orders(&w, &c, 6);
	for (int i = 0; i < 3; i++) {
		w.t += 1;
		send(&w, &c, "{'find':'customers','filter':{'_id':0}}", 1);
	}
	expect_one(&w, "shop.customers", "by \"_id\" 3 times");
	conn_close(&c);
	world_close(&w);
}

/* Repeats among distinct values (posts by the same authors): reported when
 * the distinct ones reach the fan-out, with the reads counted. */
static void test_repeats_among_distinct_values(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 6);
	const int ids[] = {1, 2, 1, 2, 1, 3};
	for (int i = 0; i < 6; i++) {
		char json[96];
		w.t += 1;
		snprintf(json, sizeof(json), "{'find':'authors','filter':{'_id':%d}}", ids[i]);
		send(&w, &c, json, 1);
		if (i == 4)
			expect_silent(&w); /* 5 reads, 2 distinct authors */
	}
	expect_one(
	    &w, "shop.authors",
	    "by \"_id\" 6 times, one find per document (N+1), each within 100 ms of the last "
	    "(fan-out 3 of 6)");
	conn_close(&c);
	world_close(&w);
}

/* A write or a schema change after the parent read: what comes next is
 * another operation (a test's set-up, the next request's work), not the
 * parent's documents joined. A handshake or a ping between changes
 * nothing. */
static void test_write_or_ddl_ends_the_parent(void **state)
{
	const char *between[] = {
	    "{'insert':'log','documents':[{'_id':1}]}",
	    "{'drop':'log'}",
	    "{'createIndexes':'log','indexes':[{'key':{'a':1},'name':'a_1'}]}",
	};
	for (size_t k = 0; k < sizeof(between) / sizeof(between[0]); k++) {
		world w;
		conn c = {0};
		world_open(&w, RULE_LOG);
		find_orders(&w, &c, 10);
		w.t += 1;
		send(&w, &c, "{'ping':1}", -1);
		send(&w, &c, between[k], -1);
		n_plus_one(&w, &c, "customers", "_id", 10, 1);
		expect_silent(&w);
		/* a parent read after it starts again */
		find_orders(&w, &c, 10);
		n_plus_one(&w, &c, "customers", "_id", 5, 1);
		assert_int_equal(fx_sink_count(&w.sink, J), 1);
		conn_close(&c);
		world_close(&w);
	}
	/* a ping or a hello alone between: still one join */
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 10);
	send(&w, &c, "{'ping':1}", -1);
	send(&w, &c, "{'hello':1}", -1);
	n_plus_one(&w, &c, "customers", "_id", 5, 1);
	assert_int_equal(fx_sink_count(&w.sink, J), 1);
	conn_close(&c);
	world_close(&w);
}

static void test_same_collection(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 10);
	n_plus_one(&w, &c, "orders", "_id", 10, 1);
	w.t += 1;
	find_in(&w, &c, "orders", 10, 10);
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

/* Reads of another collection by other filters: not keyed by one field. */
static void test_unkeyed_reads(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	static const char *const reads[] = {
	    "{'find':'customers','filter':{'status':'A','tier':2}}",
	    "{'find':'customers','filter':{'age':{'$gt':30}}}",
	    "{'find':'customers','filter':{}}",
	    "{'find':'customers'}",
	    "{'find':'customers','filter':{'_id':{'$in':[1,2,3,4,5,6]},'v':{'$in':[1,2]}}}",
	    "{'find':'customers','filter':{'name':{'$regularExpression':{'pattern':'^a','options':"
	    "''}}}}",
	    "{'aggregate':'customers','pipeline':[{'$match':{'_id':1}},{'$group':{'_id':'$a'}}],"
	    "'cursor':{}}",
	    "{'explain':{'find':'customers','filter':{'_id':1}}}",
	    "{'distinct':'customers','key':'a','query':{'_id':1}}",
	};
	find_orders(&w, &c, 6);
	for (int round = 0; round < 6; round++)
		for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
			w.t += 1;
			send(&w, &c, reads[i], 1);
		}
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

/* Django's ORM (django-mongodb-backend) reads every model with an
 * aggregate: a parent page, then one {$match: {fk: v}}, {$limit: 21} per
 * document (an N+1 without select_related), or one $in of them with a
 * projection and an order (prefetch_related). Each is a child read. */
static void test_aggregate_children(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	send(&w, &c, "{'aggregate':'books','pipeline':[{'$match':{'shelf':'A'}}],'cursor':{}}", 6);
	for (int i = 0; i < 3; i++) {
		char json[256];
		w.t += 2;
		snprintf(json, sizeof(json),
		         "{'aggregate':'authors','pipeline':[{'$match':{'_id':{'$oid':'%024x'}}},"
		         "{'$limit':21}],'cursor':{}}",
		         w.oid++);
		send(&w, &c, json, 1);
	}
	assert_int_equal(fx_sink_count(&w.sink, J), 1);
	const fx_finding *f = fx_sink_first(&w.sink, J);
	assert_string_equal(f->ns, "shop.authors");
	assert_string_equal(f->command, "aggregate");
	assert_non_null(strstr(f->detail, "after a read of \"shop.books\" returned 6 documents, "
	                                  "this connection read \"shop.authors\" by \"_id\" 3 "
	                                  "times, one aggregate per document (N+1)"));
	/* prefetch_related: one $in of the page's keys, shaped and ordered */
	w.t += 500;
	send(&w, &c, "{'aggregate':'books','pipeline':[{'$match':{'shelf':'B'}}],'cursor':{}}", 4);
	w.t += 2;
	send(&w, &c,
	     "{'aggregate':'tags','pipeline':[{'$match':{'book_id':{'$in':[1,2,3,4]}}},"
	     "{'$addFields':{'name':'$name'}},{'$sort':{'name':1}},{'$project':{'name':1}},"
	     "{'$skip':0},{'$set':{'x':1}},{'$unset':'x'}],'cursor':{}}",
	     4);
	assert_int_equal(fx_sink_count(&w.sink, J), 2);
	assert_non_null(strstr(last_join(&w.sink)->detail,
	                       "read \"shop.tags\" by \"book_id\" in 1 $in batch holding 4 keys"));
	conn_close(&c);
	world_close(&w);
}

/* Six reads of customers after a parent of six orders, read i of the
 * request `wrap` around `form` (each with one %d) with value i: a fan-out
 * of six were they keyed reads. Fails naming what when one is reported. */
static void silent_after_parent(const char *wrap, const char *form, const char *what)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 6);
	for (int v = 0; v < 6; v++) {
		char part[256], json[512];
		w.t += 1;
		snprintf(part, sizeof(part), form, v);
		snprintf(json, sizeof(json), wrap, part);
		send(&w, &c, json, 1);
	}
	if (fx_sink_count(&w.sink, J) != 0)
		fail_msg("%s: %s", what, fx_sink_first(&w.sink, J)->detail);
	conn_close(&c);
	world_close(&w);
}

#define AGGREGATE_OF "{'aggregate':'customers','pipeline':%s,'cursor':{}}"
#define MATCH_OF     "{'aggregate':'customers','pipeline':[{'$match':%s}],'cursor':{}}"
#define FIND_OF      "{'find':'customers','filter':%s}"

/* Aggregates that read otherwise than by the key, each with values that
 * would make a fan-out: a join, a grouping, another collection's union, a
 * facet, a $match of two fields or behind another stage, a stage of two
 * keys, an $out, an explain. */
static void test_aggregate_look_alikes(void **state)
{
	static const char *const forms[] = {
	    "[{'$match':{'k':%d}},{'$lookup':{'from':'x','localField':'a','foreignField':'b',"
	    "'as':'j'}}]",
	    "[{'$match':{'k':%d}},{'$group':{'_id':'$a'}}]",
	    "[{'$match':{'k':%d}},{'$unionWith':'x'}]",
	    "[{'$match':{'k':%d}},{'$facet':{'a':[{'$limit':1}]}}]",
	    "[{'$match':{'k':%d,'tenant':'t1'}}]",
	    "[{'$project':{'k':1}},{'$match':{'k':%d}}]",
	    "[{'$match':{'k':{'$gt':%d}}}]",
	    "[{'$match':{'k':%d},'$limit':1}]",
	    "[{'$match':{'k':%d}},{'$out':'x'}]",
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++)
		silent_after_parent(AGGREGATE_OF, forms[i], forms[i]);
	silent_after_parent("{'aggregate':'customers','pipeline':%s,'cursor':{},'explain':true}",
	                    "[{'$match':{'k':%d}}]", "explain");
}

/* A filter whose only top-level key is an operator reads by no one
 * field's value, whatever the values inside it: {$and: [{_id: v}, ...]}
 * with two equalities or an operator among its fields (one key among them
 * is test_and_fields_are_the_filters'), {$nor: [{x: v}]} (every
 * document but one), $comment, $expr, $where, $jsonSchema. Each read with
 * a value of its own, so that taking the operator for the field would
 * make a fan-out; as finds and as aggregates' $match. */
static void test_top_level_operators(void **state)
{
	static const char *const filters[] = {
	    "{'$and':[{'_id':%d},{'x':1}]}", "{'$and':[{'_id':%d},{'$or':[{'x':1},{'y':1}]}]}",
	    "{'$or':[{'_id':%d},{'x':1}]}",  "{'$nor':[{'x':%d}]}",
	    "{'$comment':'req-%d'}",         "{'$expr':{'$eq':['$x',%d]}}",
	    "{'$where':'this.x == %d'}",     "{'$jsonSchema':{'required':['x%d']}}",
	};
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
		silent_after_parent(FIND_OF, filters[i], filters[i]);
		silent_after_parent(MATCH_OF, filters[i], filters[i]);
	}
}

/* Filters of several fields with no one key: two $in, two equalities to
 * values that may be references ({tenant, customerId}), a top-level
 * operator beside a key, an $in beside a second operator of its own. */
static void test_no_one_key_beside(void **state)
{
	static const char *const forms[] = {
	    "{'_id':{'$in':[%d]},'tag':{'$in':['a','b']}}",
	    "{'tenant':'t1','customerId':%d}",
	    "{'_id':%d,'$comment':'by id'}",
	    "{'_id':{'$in':[%d],'$ne':0},'deleted':false}",
	    "{'_id':%d,'name':{'$eq':'x'}}",
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		silent_after_parent(FIND_OF, forms[i], forms[i]);
		silent_after_parent(MATCH_OF, forms[i], forms[i]);
	}
}

/* Too few keyed reads for the parent's documents: a few lookups that
 * happen to follow a large read, or an $in far smaller than the page. */
static void test_fanout_short_of_parent(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 100);
	n_plus_one(&w, &c, "customers", "_id", 20, 2);
	w.t += 1000;
	find_orders(&w, &c, 20);
	w.t += 1;
	find_in(&w, &c, "customers", 2, 2);
	w.t += 1000;
	find_orders(&w, &c, 10);
	n_plus_one(&w, &c, "customers", "_id", 2, 2);
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

/* The parent's reads on one connection, the keyed reads on another. */
static void test_other_connection(void **state)
{
	world w;
	conn c = {0}, d = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 10);
	n_plus_one(&w, &d, "customers", "_id", 10, 1);
	expect_silent(&w);
	conn_close(&c);
	conn_close(&d);
	world_close(&w);
}

/* A reload: a track made by another engine starts afresh. */
static void test_new_engine_resets(void **state)
{
	world w;
	conn c = {0};
	world_open(&w, RULE_LOG);
	find_orders(&w, &c, 10);
	engine *old = w.e;
	engine_config cfg;
	rule_config_defaults(&cfg);
	w.e = engine_new(&cfg, NULL, fx_sink_fn, &w.sink);
	engine_note_reply(old, c.track, 10, NULL, w.t); /* old engine, new track: ignored later */
	n_plus_one(&w, &c, "customers", "_id", 10, 1);
	expect_silent(&w);
	engine_free(old);
	conn_close(&c);
	world_close(&w);
}

/* ---- the values a parent's documents held ---- */

/* django's test run: 5 migrations read, then 3 usernames looked up 5
 * times within the window. None of the usernames was a value of the
 * migrations: no join. Told no values, the same reads are one (as before
 * the values were read). */
static const char MIGRATIONS[] =
    "[{'_id':1,'app':'contenttypes','name':'0001_initial'},"
    "{'_id':2,'app':'auth','name':'0001_initial'},"
    "{'_id':3,'app':'auth','name':'0002_alter_permission_name_max_length'},"
    "{'_id':4,'app':'admin','name':'0001_initial'},"
    "{'_id':5,'app':'sessions','name':'0001_initial'}]";

/* n finds of coll by field = each of vals (JSON values), 3 ms apart. */
static void reads_by(world *w, conn *c, const char *coll, const char *field,
                     const char *const *vals, int n)
{
	for (int i = 0; i < n; i++) {
		char json[160];
		snprintf(json, sizeof json, "{'find':'%s','filter':{'%s':%s}}", coll, field,
		         vals[i]);
		w->t += 3;
		send(w, c, json, 1);
	}
}

/* The finds of customers by _id from .. to, 3 ms apart. */
static void customers_from(world *w, conn *c, int from, int to)
{
	for (int i = from; i <= to; i++) {
		char v[16];
		const char *vals[] = {v};
		snprintf(v, sizeof v, "%d", i);
		reads_by(w, c, "customers", "_id", vals, 1);
	}
}

static void usernames(world *w, conn *c)
{
	const char *names[] = {"'ada'", "'bob'", "'cy'", "'ada'", "'bob'"};
	reads_by(w, c, "auth_user", "username", names, 5);
}

static void test_values_coincidence(void **state)
{
	world w;
	conn c = {0};
	value_filter vf;
	world_open(&w, RULE_LOG);
	send_vals(&w, &c, "{'find':'django_migrations','filter':{}}", 5,
	          values_of(&vf, MIGRATIONS));
	usernames(&w, &c);
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);

	world_open(&w, RULE_LOG);
	send(&w, &c, "{'find':'django_migrations','filter':{}}", 5);
	usernames(&w, &c);
	expect_one(&w, "shop.auth_user", "by \"username\" 3 times");
	conn_close(&c);
	world_close(&w);
}

/* Reads by the parent's values are joins, whatever the number's type the
 * driver sends (an int32 5, an int64 5 and a double 5.0 are one value to
 * mongod), and a value from an array of the parent's documents counts. */
static void test_values_members(void **state)
{
	world w;
	conn c = {0};
	value_filter vf;
	world_open(&w, RULE_LOG);
	send_vals(&w, &c, "{'find':'orders','filter':{'status':'A'}}", 4,
	          values_of(&vf,
	                    "[{'_id':1,'customer':101},{'_id':2,'customer':102},"
	                    "{'_id':3,'customer':103,'tags':[7,8]},{'_id':4,'customer':104}]"));
	const char *reads[] = {"{'$numberLong':'101'}", "999", "102.0", "8"};
	reads_by(&w, &c, "customers", "_id", reads, 3);
	expect_silent(&w); /* 999 was no value of the orders */
	reads_by(&w, &c, "customers", "_id", reads + 3, 1);
	expect_one(&w, "shop.customers", "by \"_id\" 3 times");
	conn_close(&c);
	world_close(&w);
}

/* A read by values of an older parent joins that one, not the most recent
 * parent, which held none of them (a pooled connection's other work). */
static void test_values_pick_the_parent(void **state)
{
	world w;
	conn c = {0};
	value_filter vo, vm;
	world_open(&w, RULE_LOG);
	send_vals(&w, &c, "{'find':'orders','filter':{'status':'A'}}", 4,
	          values_of(&vo, "[{'_id':1,'customer':'c1'},{'_id':2,'customer':'c2'},"
	                         "{'_id':3,'customer':'c3'},{'_id':4,'customer':'c4'}]"));
	w.t += 2;
	send_vals(&w, &c, "{'find':'django_migrations','filter':{}}", 5,
	          values_of(&vm, MIGRATIONS));
	const char *ids[] = {"'c1'", "'c2'", "'x'", "'c3'"};
	reads_by(&w, &c, "customers", "_id", ids, 4);
	expect_one(&w, "shop.customers",
	           "after a read of \"shop.orders\" returned 4 documents, this connection read "
	           "\"shop.customers\" by \"_id\" 3 times");
	conn_close(&c);
	world_close(&w);
}

/* An $in batch: one that holds none of the parent's values joins nothing;
 * one that holds some is the parent's, every key of it counted. */
static void test_values_in_batches(void **state)
{
	world w;
	conn c = {0};
	value_filter vf;
	const char *posts = "[{'_id':1,'author':11},{'_id':2,'author':12},{'_id':3,'author':13},"
	                    "{'_id':4,'author':14},{'_id':5,'author':15},{'_id':6,'author':16}]";
	world_open(&w, RULE_LOG);
	send_vals(&w, &c, "{'find':'posts','filter':{}}", 6, values_of(&vf, posts));
	w.t += 2;
	send(&w, &c, "{'find':'authors','filter':{'_id':{'$in':[90,91,92,93,94,95]}}}", 6);
	expect_silent(&w);
	w.t += 2;
	send(&w, &c, "{'find':'authors','filter':{'_id':{'$in':[11,12,13,100,101,102]}}}", 3);
	expect_one(&w, "shop.authors", "in 1 $in batch holding 6 keys");
	conn_close(&c);
	world_close(&w);
}

/* A parent of more documents than were read (a first batch's first ones,
 * or a find and its getMores): a chain by values none of them held is
 * counted but not reported, since they may be the others'; once a read
 * by one of theirs shows whose it is, it is reported (a loop that read the
 * others first: here from the last document back). */
static void test_values_of_a_larger_parent(void **state)
{
	world w;
	conn c = {0};
	value_filter v1;
	const char *more = "{'getMore':{'$numberLong':'123456'},'collection':'orders'}";
	world_open(&w, RULE_LOG);
	send_vals(&w, &c, "{'find':'orders','filter':{'status':'A'},'batchSize':2}", 2,
	          values_of(&v1, "[{'_id':1,'c':'a'},{'_id':2,'c':'b'}]"));
	w.t += 2;
	send(&w, &c, more, 2); /* {c: 'd'}, {c: 'e'} */
	const char *ids[] = {"'e'", "'d'", "'zz'", "'b'", "'a'"};
	reads_by(&w, &c, "customers", "_id", ids, 3);
	expect_silent(&w); /* 3 of 4, whose no one knows yet */
	reads_by(&w, &c, "customers", "_id", ids + 3, 2);
	expect_one(&w, "shop.customers", "by \"_id\" 4 times");
	conn_close(&c);
	world_close(&w);

	/* a first batch of 20, its first few read: an N+1 from the first */
	world_open(&w, RULE_LOG);
	send_vals(&w, &c, "{'find':'orders','filter':{'status':'A'}}", 20,
	          values_in(&v1,
	                    "[{'c':1},{'c':2},{'c':3},{'c':4},{'c':5},{'c':6},{'c':7},{'c':8}]",
	                    false));
	customers_from(&w, &c, 1, 20);
	expect_one(&w, "shop.customers", "by \"_id\" 10 times");
	conn_close(&c);
	world_close(&w);

	/* ... and reads by none of their values, or the migrations' usernames */
	world_open(&w, RULE_LOG);
	send_vals(&w, &c, "{'find':'orders','filter':{'status':'A'}}", 20,
	          values_in(&v1, "[{'c':1},{'c':2},{'c':3},{'c':4}]", false));
	customers_from(&w, &c, 101, 120);
	expect_silent(&w);
	conn_close(&c);
	world_close(&w);
}

/* A redacted capture's replay: its placeholders are looked up by the
 * hashes the capture kept of the values (engine_value_hashes, as the
 * writer calls it on the request it redacts), never hashed here. Without
 * them (a capture older than version 5) none can be looked up, and each
 * read counts, as before the values were read. */
/* Finds of auth_user by each of names (n), replayed: their literals
 * placeholders, each with its value's hash as the capture keeps it
 * (with_hashes), or none (a capture older than version 5). */
static void names_replayed(world *w, conn *c, const char *const *names, int n, bool with_hashes)
{
	for (int i = 0; i < n; i++) {
		char clear[128];
		uint64_t h[4];
		snprintf(clear, sizeof clear, "{'find':'auth_user','filter':{'username':'%s'}}",
		         names[i]);
		fx_req q;
		assert_true(fx_req_build(&q, "shop", clear, NULL, 0));
		assert_int_equal(engine_value_hashes(&q.v, h, 4), 1);
		fx_req_free(&q);
		w->vh = with_hashes ? h : NULL;
		w->nvh = with_hashes ? 1 : 0;
		w->t += 3;
		send(w, c, "{'find':'auth_user','filter':{'username':'?'}}", 1);
	}
	w->vh = NULL;
	w->nvh = 0;
}

static void usernames_replayed(world *w, conn *c, bool with_hashes)
{
	const char *names[] = {"ada", "bob", "cy", "ada", "bob"};
	names_replayed(w, c, names, 5, with_hashes);
}

static void test_values_in_a_replay(void **state)
{
	world w;
	conn c = {0};
	value_filter vf;
	for (int with_hashes = 0; with_hashes < 2; with_hashes++) {
		world_open(&w, RULE_LOG);
		w.placeholders = w.replay = true;
		send_vals(&w, &c, "{'find':'django_migrations','filter':{}}", 5,
		          values_of(&vf, MIGRATIONS));
		usernames_replayed(&w, &c, with_hashes);
		if (with_hashes)
			expect_silent(&w);
		else
			expect_one(&w, "shop.auth_user", "by \"username\" 3 times");
		conn_close(&c);
		world_close(&w);
	}
	/* one value read again and again (a discriminator): the hashes tell
	 * the replay it is one, as the live proxy knew; without them each
	 * read counted (placeholders) */
	for (int with_hashes = 0; with_hashes < 2; with_hashes++) {
		const char *same[] = {"Person", "Person", "Person", "Person"};
		world_open(&w, RULE_LOG);
		w.placeholders = w.replay = true;
		find_orders(&w, &c, 6);
		names_replayed(&w, &c, same, 4, with_hashes);
		if (with_hashes)
			expect_silent(&w);
		else
			expect_one(&w, "shop.auth_user", "by \"username\" 3 times");
		conn_close(&c);
		world_close(&w);
	}
	/* a replay's join: the customers' hashes are the orders' values */
	world_open(&w, RULE_LOG);
	w.placeholders = w.replay = true;
	send_vals(&w, &c, "{'find':'orders','filter':{'status':'A'}}", 3,
	          values_of(&vf, "[{'_id':1,'c':'a'},{'_id':2,'c':'b'},{'_id':3,'c':'d'}]"));
	const char *ids[] = {"a", "b", "d"};
	for (int i = 0; i < 3; i++) {
		char clear[128];
		uint64_t h[4];
		snprintf(clear, sizeof clear,
		         "{'find':'customers','filter':{'_id':{'$in':['%s']}}}", ids[i]);
		fx_req q;
		assert_true(fx_req_build(&q, "shop", clear, NULL, 0));
		assert_int_equal(engine_value_hashes(&q.v, h, 4), 1);
		fx_req_free(&q);
		w.vh = h;
		w.nvh = 1;
		w.t += 3;
		send(&w, &c, "{'find':'customers','filter':{'_id':{'$in':['?']}}}", 1);
	}
	expect_one(&w, "shop.customers", "in 3 $in batches holding 3 keys");
	conn_close(&c);
	world_close(&w);
}

/* Three ids of a populate, two of them on one bit of the key set (their
 * hashes as a capture kept them): a fan-out of 3, not 2. The bits alone
 * counted 2, under the 3 a parent of 3 documents wants, and lost the join
 * (a helper's held-out mongoose-delete run lost both of a run's populate
 * findings so, once in three runs). */
static void test_values_on_one_bit(void **state)
{
	world w;
	conn c = {0};
	uint64_t vh[3] = {(47ull << 40) | 1, (47ull << 40) | 2, (229ull << 40) | 3};
	world_open(&w, RULE_LOG);
	w.placeholders = w.replay = true;
	send(&w, &c, "{'find':'orders','filter':{'status':'?'}}", 3);
	w.vh = vh;
	w.nvh = 3;
	w.t += 3;
	send(&w, &c, "{'find':'customers','filter':{'_id':{'$in':['?','?','?']}}}", 3);
	expect_one(&w, "shop.customers", "in 1 $in batch holding 3 keys");
	conn_close(&c);
	world_close(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_n_plus_one_by_id),
	    cmocka_unit_test(test_repeat_template_reads_counted),
	    cmocka_unit_test(test_n_plus_one_by_single_key),
	    cmocka_unit_test(test_eq_operator),
	    cmocka_unit_test(test_populate_one_in_batch),
	    cmocka_unit_test(test_key_beside_conditions),
	    cmocka_unit_test(test_no_one_key_beside),
	    cmocka_unit_test(test_key_alone_in_old_captures),
	    cmocka_unit_test(test_and_fields_are_the_filters),
	    cmocka_unit_test(test_few_in_batches),
	    cmocka_unit_test(test_pagination),
	    cmocka_unit_test(test_pagination_from_a_small_first_batch),
	    cmocka_unit_test(test_most_recent_parent),
	    cmocka_unit_test(test_two_children_interleaved),
	    cmocka_unit_test(test_loop_with_nested_reads),
	    cmocka_unit_test(test_dedupe_per_pair),
	    cmocka_unit_test(test_block_is_dry_run),
	    cmocka_unit_test(test_off_tracks_nothing),
	    cmocka_unit_test(test_single_lookup),
	    cmocka_unit_test(test_small_parents),
	    cmocka_unit_test(test_batch_job_without_parent),
	    cmocka_unit_test(test_beyond_window),
	    cmocka_unit_test(test_writes_are_not_reads),
	    cmocka_unit_test(test_one_value_repeated),
	    cmocka_unit_test(test_placeholders_count_each_read),
	    cmocka_unit_test(test_repeats_among_distinct_values),
	    cmocka_unit_test(test_write_or_ddl_ends_the_parent),
	    cmocka_unit_test(test_same_collection),
	    cmocka_unit_test(test_unkeyed_reads),
	    cmocka_unit_test(test_aggregate_children),
	    cmocka_unit_test(test_aggregate_look_alikes),
	    cmocka_unit_test(test_top_level_operators),
	    cmocka_unit_test(test_fanout_short_of_parent),
	    cmocka_unit_test(test_other_connection),
	    cmocka_unit_test(test_new_engine_resets),
	    cmocka_unit_test(test_values_coincidence),
	    cmocka_unit_test(test_values_members),
	    cmocka_unit_test(test_values_pick_the_parent),
	    cmocka_unit_test(test_values_in_batches),
	    cmocka_unit_test(test_values_of_a_larger_parent),
	    cmocka_unit_test(test_values_in_a_replay),
	    cmocka_unit_test(test_values_on_one_bit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
