/* The statement facts (analyzers/engine/facts.h): what they record of a filter and
 * an update, and that a rule given them decides what it decides without
 * them. The second is checked rule by rule: the same filters and updates,
 * once as update statements through the engine (where the engine reads the
 * facts and the rules read them) and once through the rule's own function
 * on the BSON (rule_regex_filter, rule_push_update, rule_scan_filter). */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "analyzers/engine/facts.h"
#include "protocol/byte_template.h"
#include "analyzers/rules/rule_doc.h"
#include "analyzers/rules/rule_push.h"
#include "analyzers/rules/rule_regex.h"
#include "analyzers/rules/rule_scan.h"
#include "fixtures/analyzer_fixture.h"
#include "protocol/frame.h"
#include "protocol/request.h"
#include "protocol/request_template.h"

/* The facts of the value an iterator is on, as the engine reads them
 * (from a cursor on it). */
static void filter_of_iter(filter_facts *f, const bson_iter_t *it)
{
	wire_cur c;
	wire_cur_of_iter(&c, it);
	facts_filter(f, &c, NULL);
}

static void update_of_iter(update_facts *u, const bson_iter_t *it)
{
	wire_cur c;
	wire_cur_of_iter(&c, it);
	facts_update(u, &c, NULL);
}

static void facts_of(const char *json, filter_facts *f, bson_t **keep)
{
	bson_iter_t it;
	*keep = fx_json(json);
	bson_t *wrap = bson_new();
	BSON_APPEND_DOCUMENT(wrap, "q", *keep);
	bson_destroy(*keep);
	*keep = wrap;
	assert_true(bson_iter_init_find(&it, wrap, "q"));
	filter_of_iter(f, &it);
}

static void test_filter_members(void **state)
{
	static const struct {
		const char *json;
		unsigned n;
		bool complete, regexes, tops, id_eq;
		unsigned ops;
	} rows[] = {
	    {"{'_id': 5}", 1, true, false, false, true, 0},
	    {"{'_id': {'a': 1}}", 1, true, false, false, true, 0},
	    {"{'_id': {'$ref': 'c', '$id': 1}}", 1, true, false, false, true, FOP_OTHER},
	    {"{'_id': {'$gt': 5}}", 1, true, false, false, false, FOP_OTHER},
	    {"{'_id': {'$in': [1, 2]}}", 1, true, false, false, false, FOP_LIST},
	    {"{'a': 1, 'b': {'$in': [1, 2]}, 'c': {'$not': {'$gt': 1}}}", 3, true, false, false,
	     false, FOP_LIST | FOP_NOT},
	    {"{'a': {'$elemMatch': {'x': 1}}, 'b': {'$regex': 'x', '$options': 'i'}}", 2, true,
	     true, false, false, FOP_ELEM_MATCH}, /* test JSON makes a regex value of it */
	    {"{'$or': [{'a': 1}, {'b': 2}]}", 1, true, false, true, false, 0},
	    {"{}", 0, true, false, false, false, 0},
	    {"{'a':1,'b':1,'c':1,'d':1,'e':1,'f':1,'g':1,'h':1}", 8, true, false, false, false, 0},
	    {"{'a':1,'b':1,'c':1,'d':1,'e':1,'f':1,'g':1,'h':1,'i':1}", 8, false, false, false,
	     false, 0},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		filter_facts f;
		bson_t *doc;
		facts_of(rows[i].json, &f, &doc);
		if (f.n != rows[i].n || f.complete != rows[i].complete ||
		    f.regexes != rows[i].regexes || f.tops != rows[i].tops ||
		    f.id_eq != rows[i].id_eq || f.ops != rows[i].ops || !f.viewable)
			fail_msg("%s: n %u complete %d regexes %d tops %d id_eq %d ops %#x",
			         rows[i].json, f.n, f.complete, f.regexes, f.tops, f.id_eq, f.ops);
		bson_destroy(doc);
	}
	/* a regex value: BCON, as test JSON has no regex literal */
	bson_t *d = BCON_NEW("q", "{", "name", BCON_REGEX("^a", "i"), "}");
	bson_iter_t it;
	filter_facts f;
	assert_true(bson_iter_init_find(&it, d, "q"));
	filter_of_iter(&f, &it);
	assert_int_equal(f.n, 1);
	assert_true(f.regexes);
	assert_int_equal(f.m[0].kind, FM_REGEX);
	bson_destroy(d);
	/* $regex as an operator, with $options */
	d = BCON_NEW("q", "{", "name", "{", "$regex", BCON_UTF8("x"), "$options", BCON_UTF8("i"),
	             "}", "}");
	assert_true(bson_iter_init_find(&it, d, "q"));
	filter_of_iter(&f, &it);
	assert_int_equal(f.m[0].kind, FM_OPS);
	assert_int_equal(f.ops, FOP_REGEX | FOP_OPTIONS);
	assert_false(f.regexes);
	bson_destroy(d);
}

static void test_update_forms(void **state)
{
	static const struct {
		const char *json; /* {u: ...} */
		unsigned form, ops;
	} rows[] = {
	    {"{'u': {'$set': {'a': 1}}}", FU_OPERATORS, UOP_OTHER},
	    {"{'u': {'$set': {'a': 1}, '$push': {'b': 1}}}", FU_OPERATORS,
	     UOP_OTHER | UOP_PUSH | UOP_PUSH_OPEN},
	    /* a $push whose every member bounds its array is not open */
	    {"{'u': {'$push': {'b': {'$each': [1], '$slice': -5}}}}", FU_OPERATORS, UOP_PUSH},
	    {"{'u': {'$push': {'b': {'$slice': -5, 'x': 1, '$each': []}}}}", FU_OPERATORS,
	     UOP_PUSH},
	    {"{'u': {'$push': {'b': {'$each': [1], '$slice': -5}, 'c': {'$each': [1]}}}}",
	     FU_OPERATORS, UOP_PUSH | UOP_PUSH_OPEN},
	    {"{'u': {'$push': {'b': {'$each': [1], '$slice': -5}}, '$push': {'c': 1}}}",
	     FU_OPERATORS, UOP_PUSH | UOP_PUSH_OPEN}, /* a repeated operator */
	    {"{'u': {'$push': {'b': {'$slice': -5}}}}", FU_OPERATORS, UOP_PUSH | UOP_PUSH_OPEN},
	    {"{'u': {'$inc': {'n': 1}}}", FU_OPERATORS, UOP_INC},
	    {"{'u': {'a': 1, '$push': {'b': 1}}}", FU_REPLACEMENT, 0},
	    {"{'u': {}}", FU_EMPTY, 0},
	    {"{'u': [{'$set': {'a': 1}}]}", FU_PIPELINE, 0},
	    {"{'u': 5}", FU_OTHER, 0},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		bson_t *d = fx_json(rows[i].json);
		bson_iter_t it;
		update_facts u;
		assert_true(bson_iter_init_find(&it, d, "u"));
		update_of_iter(&u, &it);
		if (u.form != rows[i].form || u.ops != rows[i].ops)
			fail_msg("%s: form %u ops %#x", rows[i].json, u.form, u.ops);
		uint32_t want = 0;
		if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
			const uint8_t *data;
			if (BSON_ITER_HOLDS_DOCUMENT(&it))
				bson_iter_document(&it, &want, &data);
			else
				bson_iter_array(&it, &want, &data);
		}
		assert_int_equal(u.len, want);
		bson_destroy(d);
	}
}

/* Which members of an update the facts keep as writes (update_facts.writes):
 * every member of $push and $addToSet, and the members of $set and
 * $setOnInsert that can put an array somewhere. */
static void test_update_writes(void **state)
{
	static const struct {
		const char *json;  /* {u: ...} */
		const char *paths; /* the kept paths, in order, space-separated */
		bool complete;
	} rows[] = {
	    {"{'u': {'$set': {'a': 1, 'b': 'x'}}}", "", true},
	    {"{'u': {'$set': {'a': [1], 'b': {'c': 1}, 'd': 2, 'e.$.f': 1, 'g.$[x]': 1}}}",
	     "a b e.$.f g.$[x]", true},
	    {"{'u': {'$set': {'a$b': 1, 'c.d$': 1, '$x': 1}}}", "", true},
	    {"{'u': {'$push': {'a': 1}, '$inc': {'n': 1}, '$addToSet': {'b': 1}, "
	     "'$setOnInsert': {'c': []}, '$unset': {'d': [1]}}}",
	     "a b c", true},
	    {"{'u': {'$push': 5, '$set': 'x'}}", "", true},
	    {"{'u': {'a': [1]}}", "", true},
	    {"{'u': {'$push': {'p0': 1, 'p1': 1, 'p2': 1, 'p3': 1, 'p4': 1, 'p5': 1, 'p6': 1, "
	     "'p7': 1, 'p8': 1, 'p9': 1, 'pa': 1, 'pb': 1, 'pc': 1, 'pd': 1, 'pe': 1, 'pf': 1, "
	     "'pg': 1}}}",
	     "p0 p1 p2 p3 p4 p5 p6 p7 p8 p9 pa pb pc pd pe pf", false},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		bson_t *d = fx_json(rows[i].json);
		bson_iter_t it;
		update_facts u;
		char got[512] = "";
		assert_true(bson_iter_init_find(&it, d, "u"));
		update_of_iter(&u, &it);
		for (unsigned j = 0; j < u.nwrites; j++) {
			const char *k = wire_cur_key(&u.writes[j].at);
			assert_int_equal(u.writes[j].len, strlen(k));
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", j ? " " : "",
			         k);
		}
		if (strcmp(got, rows[i].paths) != 0 || u.writes_complete != rows[i].complete)
			fail_msg("%s: writes [%s] complete %d", rows[i].json, got,
			         u.writes_complete);
		bson_destroy(d);
	}
}

/* Filters of every kind the facts tell apart, regexes among them. */
static const char *const filters[] = {
    "{'_id': 5}",
    "{'_id': 5, 'name': {'$regex': 'x', '$options': 'i'}}",
    "{'name': {'$regex': 'x', '$options': 'i'}}",
    "{'name': {'$regex': '(?i)x'}}",
    "{'name': {'$regex': '^x'}}",
    "{'name': {'$in': ['a', 'b']}}",
    "{'name': {'$not': {'$regex': 'x', '$options': 'i'}}}",
    "{'tags': {'$elemMatch': {'$regex': 'x', '$options': 'i'}}}",
    "{'tags': {'$elemMatch': {'n': {'$regex': 'x', '$options': 'si'}}}}",
    "{'tags': {'$all': [{'$elemMatch': {'n': {'$regex': 'x', '$options': 'i'}}}]}}",
    "{'$or': [{'a': 1}, {'name': {'$regex': 'x', '$options': 'i'}}]}",
    "{'$and': [{'status': 'A'}, {'created': {'$gt': 5}}]}",
    "{'$nor': [{'name': {'$regex': 'x', '$options': 'i'}}]}",
    "{'$expr': {'$regexMatch': {'input': '$name', 'regex': 'x', 'options': 'i'}}}",
    "{'$expr': {'$eq': ['$_id', 5]}}",
    "{'status': 'A'}",
    "{'status': 'A', 'created': {'$lt': 10}}",
    "{'created': {'$gt': 5}}",
    "{'x': {'$ne': 1}}",
    "{'x': {'a': {'$regex': 'x', '$options': 'i'}}}",
    "{'_id': {'$ref': 'c', '$id': 1}, 'name': {'$regex': 'x', '$options': 'i'}}",
    "{'arr.10': {'$exists': false}}",
    "{'n': {'$lt': 10}}",
    "{'a':1,'b':1,'c':1,'d':1,'e':1,'f':1,'g':1,'h':1,'name':{'$regex':'x','$options':'i'}}",
    "{}",
};

/* Updates of every form, pushes among them. */
static const char *const updates[] = {
    "{'$set': {'v': 1}}",
    "{'$push': {'items': 1}}",
    "{'$push': {'items': {'$each': [1], '$slice': -5}}}",
    "{'$set': {'v': 1}, '$push': {'items': 1}}",
    "{'$inc': {'n': 1}, '$push': {'items': 1}}",
    "{'items': [1, 2]}",
    "[{'$set': {'items': {'$concatArrays': ['$items', [1]]}}}]",
    "{}",
    /* read from the facts' writes: repeated operators, members in order,
     * $set arrays beside them, and past FACTS_WRITES the rule's own walk */
    "{'$push': {'a': {'$each': [1], '$slice': 5}}, '$set': {'t': [1]}, '$push': {'b': 1}}",
    "{'$push': {'a': 1, 'b': {'$each': [1]}, 'c': {'$slice': 3}}}",
    "{'$addToSet': {'a': 1}, '$set': {'a.$.b': 1}, '$push': 5}",
    "{'$set': {'p0': [], 'p1': [], 'p2': [], 'p3': [], 'p4': [], 'p5': [], 'p6': [], "
    "'p7': [], 'p8': [], 'p9': [], 'pa': [], 'pb': [], 'pc': [], 'pd': [], 'pe': [], "
    "'pf': []}, '$push': {'items': 1}}",
};

/* The filter documents: the JSON list, and $regex in operator form, which
 * test JSON reads as a regex value. */
static bson_t *filter_doc(size_t i)
{
	size_t n = sizeof(filters) / sizeof(filters[0]);
	if (i < n)
		return fx_json(filters[i]);
	switch (i - n) {
	case 0:
		return BCON_NEW("name", "{", "$regex", BCON_UTF8("x"), "$options", BCON_UTF8("i"),
		                "}");
	case 1:
		return BCON_NEW("name", "{", "$regex", BCON_UTF8("^x"), "$options", BCON_UTF8("m"),
		                "}");
	case 2:
		return BCON_NEW("_id", BCON_INT32(1), "name", "{", "$options", BCON_UTF8("i"),
		                "$regex", BCON_UTF8("x"), "}");
	case 3:
		return BCON_NEW("n", "{", "$not", "{", "$regex", BCON_UTF8("(?i)x"), "}", "}");
	case 4:
		return BCON_NEW("n", "{", "$options", BCON_UTF8("i"), "}");
	default:
		return NULL;
	}
}
#define NFILTERS (sizeof(filters) / sizeof(filters[0]) + 5)

static engine *engine_with(rule_id rule, index_cache *ic, fx_sink *sink)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int r = 0; r < RULE_COUNT; r++)
		cfg.rules[r].action = r == (int)rule ? RULE_LOG : RULE_OFF;
	engine *e = engine_new(&cfg, ic, fx_sink_fn, sink);
	assert_non_null(e);
	return e;
}

/* {update: "orders", updates: [{q: filter, u: <update JSON>, multi: true}]}
 * on shop, through a fresh engine with only rule on (a finding of the same
 * shape is not sent twice by one engine); the findings of rule. */
static size_t engine_findings(index_cache *ic, fx_sink *sink, rule_id rule, const bson_t *filter,
                              const char *update)
{
	engine *e = engine_with(rule, ic, sink);
	char json[1024];
	snprintf(json, sizeof(json), "{'u': %s}", update);
	bson_t *u = fx_json(json);
	bson_iter_t it;
	assert_true(bson_iter_init_find(&it, u, "u"));
	bson_t stmt, arr, *body = bson_new();
	BSON_APPEND_UTF8(body, "update", "orders");
	BSON_APPEND_ARRAY_BEGIN(body, "updates", &arr);
	BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
	BSON_APPEND_DOCUMENT(&stmt, "q", filter);
	bson_append_iter(&stmt, "u", 1, &it);
	BSON_APPEND_BOOL(&stmt, "multi", true);
	bson_append_document_end(&arr, &stmt);
	bson_append_array_end(body, &arr);
	BSON_APPEND_UTF8(body, "$db", "shop");
	size_t len = 0, cap = 0;
	uint8_t *buf = NULL;
	fx_msg_head(&buf, &len, &cap, body);
	wire_write_i32(buf, (int32_t)len);
	opmsg m;
	cmdview v;
	wire_error err = {0};
	assert_true(opmsg_parse(buf, len, &m, &err) && cmdview_from_opmsg(&m, &v, &err));
	fx_sink_clear(sink);
	block_info block = {0};
	request_ctx rc = {.app_name = "", .client = "127.0.0.1:50000", .now_ms = 1000000};
	(void)engine_analyze(e, &v, &rc, &block);
	engine_free(e);
	free(buf);
	bson_destroy(body);
	bson_destroy(u);
	return fx_sink_count(sink, rule);
}

static void test_regex_same_with_facts(void **state)
{
	fx_sink sink;
	fx_sink_init(&sink);
	size_t hits = 0;
	for (size_t i = 0; i < NFILTERS; i++) {
		bson_t *f = filter_doc(i);
		bson_t *d = BCON_NEW("q", BCON_DOCUMENT(f));
		char *shown = bson_as_relaxed_extended_json(f, NULL);
		bson_iter_t it;
		assert_true(bson_iter_init_find(&it, d, "q"));
		regex_hit hit;
		bool want = rule_regex_filter(&it, &hit);
		size_t got = engine_findings(NULL, &sink, RULE_CASE_INSENSITIVE_REGEX, f,
		                             "{'$set': {'v': 1}}");
		if (got != (want ? 1u : 0u))
			fail_msg("%s: %zu findings with facts, %d without", shown, got, want);
		if (want &&
		    !strstr(fx_sink_first(&sink, RULE_CASE_INSENSITIVE_REGEX)->detail, hit.how))
			fail_msg("%s: detail [%s] lacks [%s]", shown,
			         fx_sink_first(&sink, RULE_CASE_INSENSITIVE_REGEX)->detail,
			         hit.how);
		hits += want;
		bson_free(shown);
		bson_destroy(d);
		bson_destroy(f);
	}
	assert_true(hits >= 10); /* the list has hits to lose */
	fx_sink_free(&sink);
}

static void test_push_same_with_facts(void **state)
{
	fx_sink sink;
	fx_sink_init(&sink);
	size_t hits = 0, misses = 0;
	for (size_t i = 0; i < NFILTERS; i++)
		for (size_t j = 0; j < sizeof(updates) / sizeof(updates[0]); j++) {
			char json[1024];
			snprintf(json, sizeof(json), "{'u': %s}", updates[j]);
			bson_t *f = filter_doc(i), *d = fx_json(json);
			BSON_APPEND_DOCUMENT(d, "q", f);
			bson_iter_t q, u;
			assert_true(bson_iter_init_find(&q, d, "q"));
			assert_true(bson_iter_init_find(&u, d, "u"));
			push_hit hit;
			bool want = rule_push_update(&u, &q, &hit);
			size_t got =
			    engine_findings(NULL, &sink, RULE_UNBOUNDED_PUSH, f, updates[j]);
			if (got != (want ? 1u : 0u))
				fail_msg("filter %zu / %s: %zu findings with facts, %d without", i,
				         updates[j], got, want);
			/* the same fields, in the same order */
			if (want &&
			    !strstr(fx_sink_first(&sink, RULE_UNBOUNDED_PUSH)->detail, hit.fields))
				fail_msg("filter %zu / %s: detail [%s] lacks [%s]", i, updates[j],
				         fx_sink_first(&sink, RULE_UNBOUNDED_PUSH)->detail,
				         hit.fields);
			hits += want;
			misses += !want;
			bson_destroy(d);
			bson_destroy(f);
		}
	assert_true(hits >= 20 && misses >= 20);
	fx_sink_free(&sink);
}

static void test_scan_same_with_facts(void **state)
{
	fx_sink sink;
	fx_sink_init(&sink);
	index_cache *ic = fx_orders_cache();
	index_set *set = NULL;
	assert_int_equal(index_cache_get(ic, "shop", "orders", &set), INDEXES_KNOWN);
	size_t hits = 0, misses = 0;
	for (size_t i = 0; i < NFILTERS; i++) {
		bson_t *f = filter_doc(i);
		bool want = rule_scan_filter(set, f, NULL, NULL) == SCAN_UNBOUNDED;
		size_t got =
		    engine_findings(ic, &sink, RULE_COLLECTION_SCAN, f, "{'$set': {'v': 1}}");
		if (got != (want ? 1u : 0u))
			fail_msg("filter %zu: %zu findings with facts, %d without", i, got, want);
		hits += want;
		misses += !want;
		bson_destroy(f);
	}
	assert_true(hits >= 5 && misses >= 5);
	index_set_release(set);
	index_cache_free(ic);
	fx_sink_free(&sink);
}

/* Every rule at action, with or without statement templates. */
static engine *engine_all(rule_action action, bool no_templates, index_cache *ic, fx_sink *sink)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int r = 0; r < RULE_COUNT; r++)
		cfg.rules[r].action = action;
	cfg.no_templates = no_templates;
	engine *e = engine_new(&cfg, ic, fx_sink_fn, sink);
	assert_non_null(e);
	return e;
}

/* Every rule at log: in one batch, statements no check is called for sit
 * between statements that each rule must still see (the gate is per
 * statement, not per batch), in update and in bulkWrite. */
static void test_gate_per_statement(void **state)
{
	static const char *const bodies[] = {
	    "{'update': 'orders', 'updates': ["
	    "{'q': {'_id': 1}, 'u': {'$set': {'v': 1}}},"
	    "{'q': {'_id': 2}, 'u': {'$push': {'items': 1}}},"
	    "{'q': {'_id': 3}, 'u': {'$set': {'v': 1}}},"
	    "{'q': {'other': 4}, 'u': {'$set': {'v': 1}}, 'multi': true},"
	    "{'q': {'_id': {'$gt': 5}, 'name': {'$regex': 'x', '$options': 'i'}}, 'u': {'$set': "
	    "{'v': 1}}}]}",
	    "{'bulkWrite': 1, 'nsInfo': [{'ns': 'shop.orders'}], 'ops': ["
	    "{'update': 0, 'filter': {'_id': 1}, 'updateMods': {'$set': {'v': 1}}},"
	    "{'update': 0, 'filter': {'_id': 2}, 'updateMods': {'$push': {'items': 1}}},"
	    "{'update': 0, 'filter': {'_id': 3}, 'updateMods': {'$set': {'v': 1}}},"
	    "{'update': 0, 'filter': {'other': 4}, 'updateMods': {'$set': {'v': 1}}, 'multi': "
	    "true},"
	    "{'delete': 0, 'filter': {'_id': {'$gt': 5}, 'name': {'$regex': 'x', '$options': "
	    "'i'}}}]}",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		fx_sink sink;
		fx_sink_init(&sink);
		index_cache *ic = fx_orders_cache();
		engine *e = engine_all(RULE_LOG, false, ic, &sink);
		block_info block = {0};
		(void)fx_analyze(e, i ? "admin" : "shop", bodies[i], NULL, 0, NULL, &block);
		if (fx_sink_count(&sink, RULE_UNBOUNDED_PUSH) != 1 ||
		    fx_sink_count(&sink, RULE_COLLECTION_SCAN) != 1 ||
		    fx_sink_count(&sink, RULE_CASE_INSENSITIVE_REGEX) != 1 || sink.n != 3)
			fail_msg("body %zu: push %zu scan %zu regex %zu of %zu findings", i,
			         fx_sink_count(&sink, RULE_UNBOUNDED_PUSH),
			         fx_sink_count(&sink, RULE_COLLECTION_SCAN),
			         fx_sink_count(&sink, RULE_CASE_INSENSITIVE_REGEX), sink.n);
		engine_free(e);
		index_cache_free(ic);
		fx_sink_free(&sink);
	}
}

/* One update command of the statements docs[0..n) (each lens[i] bytes) on
 * shop.orders, analysed by a fresh engine with every rule at block, with
 * statement templates or without: whether it is blocked, and how many
 * findings the sink got. */
static bool batch_verdict(bool no_templates, const uint8_t *const *docs, const uint32_t *lens,
                          size_t n, size_t *findings)
{
	fx_sink sink;
	fx_sink_init(&sink);
	index_cache *ic = fx_orders_cache();
	engine *e = engine_all(RULE_BLOCK, no_templates, ic, &sink);
	block_info block = {0};
	bool blocked = fx_update_batch(e, docs, lens, n, &block) == VERDICT_BLOCK;
	*findings = sink.n;
	engine_free(e);
	index_cache_free(ic);
	fx_sink_free(&sink);
	return blocked;
}

/* The statement templates (analysers.c): a batch whose statements
 * share a shape, with one statement changed in one byte at every offset of
 * it in turn (a key, a type, a length, a value), gives the same findings
 * and verdict through an engine that matches statements against a template
 * as through one that reads each of them: statements matched a word at a
 * time and, past 512 bytes, by memcmp. Every rule at block, with the
 * index cache; each byte's batch through fresh engines. */
static void test_templates_same_as_reading(void **state)
{
	bson_t *stmts[8];
	char long_v[521]; /* statements past 512 bytes are matched by memcmp, not by words */
	memset(long_v, 'x', sizeof long_v - 1);
	long_v[sizeof long_v - 1] = 0;
	stmts[0] = BCON_NEW("q", "{", "_id", BCON_INT32(1), "}", "u", "{", "$set", "{", "v",
	                    BCON_INT32(0), "}", "}");
	stmts[1] = BCON_NEW("q", "{", "_id", BCON_INT32(2), "}", "u", "{", "$set", "{", "v",
	                    BCON_INT32(7), "}", "}");
	stmts[2] = BCON_NEW("q", "{", "sku", BCON_UTF8("ab"), "}", "u", "{", "$inc", "{", "n",
	                    BCON_INT32(1), "}", "}");
	stmts[3] = BCON_NEW("q", "{", "sku", BCON_UTF8("cd"), "}", "u", "{", "$inc", "{", "n",
	                    BCON_INT32(2), "}", "}");
	stmts[4] = BCON_NEW("q", "{", "_id", BCON_INT32(1), "}", "u", "{", "$set", "{", "v",
	                    BCON_UTF8(long_v), "}", "}");
	stmts[5] = BCON_NEW("q", "{", "_id", BCON_INT32(3), "}", "u", "{", "$set", "{", "v",
	                    BCON_UTF8(long_v), "}", "}");
	/* a bounded $push: no check is called for it, and it is a template */
	stmts[6] =
	    BCON_NEW("q", "{", "_id", BCON_INT32(1), "}", "u", "{", "$push", "{", "a", "{", "$each",
	             "[", BCON_INT32(1), "]", "$slice", BCON_INT32(-8), "}", "}", "}");
	stmts[7] =
	    BCON_NEW("q", "{", "_id", BCON_INT32(2), "}", "u", "{", "$push", "{", "a", "{", "$each",
	             "[", BCON_INT32(1), "]", "$slice", BCON_INT32(-8), "}", "}", "}");
	for (int which = 0; which < 8; which += 2) {
		const bson_t *base = stmts[which + 1];
		for (uint32_t at = 4; at + 1 < base->len; at++)
			for (int flip = 0; flip < 3; flip++) {
				uint8_t *mut = bson_malloc(base->len);
				memcpy(mut, bson_get_data(base), base->len);
				static const uint8_t to[] = {0x00, 0x02,
				                             0x24}; /* NUL, a type, '$' */
				mut[at] = mut[at] == to[flip] ? 0x01 : to[flip];
				size_t findings[2], blocked[2];
				const uint8_t *docs[] = {bson_get_data(stmts[which]), mut,
				                         bson_get_data(stmts[which])};
				const uint32_t lens[] = {stmts[which]->len, base->len,
				                         stmts[which]->len};
				for (int i = 0; i < 2; i++)
					blocked[i] =
					    batch_verdict(i == 1, docs, lens, 3, &findings[i]);
				if (getenv("FX_VERBOSE"))
					printf("%d %u %#x: %zu %zu %zu %zu\n", which, at, mut[at],
					       findings[0], findings[1], blocked[0], blocked[1]);
				if (findings[0] != findings[1] || blocked[0] != blocked[1])
					fail_msg(
					    "statement %d, byte %u set to %#x: %zu/%zu findings, "
					    "blocked %zu/%zu (template/read)",
					    which + 1, at, mut[at], findings[0], findings[1],
					    blocked[0], blocked[1]);
				bson_free(mut);
			}
	}
	for (int i = 0; i < 8; i++)
		bson_destroy(stmts[i]);
}

/* A batch of mixed shapes (runs of one shape, alternations, a new shape
 * each statement), the template backing off and coming back
 * (analyze_statements), with one statement a rule blocks at each position
 * in turn: judged as with no templates at all. */
static void test_template_backoff_same_as_reading(void **state)
{
	enum { N = 160 };
	bson_t *stmts[N];
	for (int pos = 0; pos < N; pos += 3) {
		for (int i = 0; i < N; i++) {
			/* 0-39 one shape; 40-79 two alternating; 80-119 a new shape
			 * each (8 of them, cycling); 120-159 one shape again */
			int k = i < 40 ? 0 : i < 80 ? i % 2 : i < 120 ? 2 + i % 8 : 1;
			char field[8];
			snprintf(field, sizeof field, "v%d", k);
			stmts[i] = i == pos
			               ? BCON_NEW("q", "{", "name", BCON_REGEX("x", "i"), "}", "u",
			                          "{", "$set", "{", field, BCON_INT32(i), "}", "}")
			               : BCON_NEW("q", "{", "_id", BCON_INT32(i), "}", "u", "{",
			                          "$set", "{", field, BCON_INT32(i), "}", "}");
		}
		const uint8_t *docs[N];
		uint32_t lens[N];
		for (int i = 0; i < N; i++) {
			docs[i] = bson_get_data(stmts[i]);
			lens[i] = stmts[i]->len;
		}
		size_t findings[2];
		bool blocked[2];
		for (int i = 0; i < 2; i++)
			blocked[i] = batch_verdict(i == 1, docs, lens, N, &findings[i]);
		if (!blocked[0] || !blocked[1] || findings[0] != findings[1])
			fail_msg("the regex at statement %d: blocked %d/%d, findings %zu/%zu "
			         "(template/read)",
			         pos, blocked[0], blocked[1], findings[0], findings[1]);
		for (int i = 0; i < N; i++)
			bson_destroy(stmts[i]);
	}
}

/* The template's own contract (byte_template.h), for a short statement
 * (matched by words) and a long one (by memcmp): a statement of the same
 * length matches exactly when every byte it changes lies in a span; spans
 * given out of order are sorted, overlapping ones make no template. */
static void test_template_matches_outside_spans_only(void **state)
{
	static const uint32_t lens[] = {8, 13, 64, 67, 512, 513, 900};
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		uint32_t len = lens[k];
		uint8_t *t = malloc(len), *mut = malloc(len);
		for (uint32_t i = 0; i < len; i++)
			t[i] = (uint8_t)(i * 7 + 3);
		/* two spans, the later one first, each with bytes after it */
		byte_spans sp = {.base = t, .n = 2, .full = false};
		sp.s[0].at = len - 4;
		sp.s[0].len = 3;
		sp.s[1].at = 1;
		sp.s[1].len = len / 3;
		byte_template tp;
		assert_true(byte_template_set(&tp, t, len, &sp));
		assert_true(byte_template_matches(&tp, t, len));
		for (uint32_t at = 0; at < len; at++) {
			memcpy(mut, t, len);
			mut[at] ^= 0x5a;
			bool in = (at >= 1 && at < 1 + len / 3) || (at >= len - 4 && at < len - 1);
			if (byte_template_matches(&tp, mut, len) != in)
				fail_msg("length %u, byte %u changed: %s", len, at,
				         in ? "no match inside a span"
				            : "a match outside the spans");
		}
		assert_false(byte_template_matches(&tp, t, len - 1));
		/* one that outlives the bytes: by words only, raw not kept */
		byte_template kept;
		assert_int_equal(byte_template_set_words(&kept, t, len, &sp), len <= 512);
		assert_null(kept.raw);
		if (len <= 512) {
			memcpy(mut, t, len);
			mut[1] ^= 0x5a; /* in a span */
			assert_true(byte_template_matches(&kept, mut, len));
			mut[0] ^= 0x5a; /* outside */
			assert_false(byte_template_matches(&kept, mut, len));
		}
		sp.s[1].len = len; /* overlaps the other */
		assert_false(byte_template_set(&tp, t, len, &sp));
		assert_false(byte_template_matches(&tp, t, len));
		free(t);
		free(mut);
	}
}

/* The connection's repeat (engine.h, engine_repeat): after a query judged
 * with no check called, the same query with one byte of its body changed,
 * at every offset in turn, gets the same verdict and findings through an
 * engine given the connection's repeat slot as through one that reads it,
 * and a change inside the filter's value is judged by the template (the
 * slot counts it). Every rule at block, with the index cache. A changed
 * body the proxy refuses (request_decode) never reaches the engine and is
 * skipped. Then: a template is of one engine and one application name. */
static uint8_t *repeat_msg(const char *json, size_t *len, size_t *body_at)
{
	bson_t *body = fx_json(json);
	BSON_APPEND_UTF8(body, "$db", "shop");
	size_t cap = 0;
	uint8_t *buf = NULL;
	*len = 0;
	fx_msg_head(&buf, len, &cap, body);
	wire_write_i32(buf, (int32_t)*len);
	*body_at = *len - body->len;
	bson_destroy(body);
	return buf;
}

/* msg through e: the verdict; *findings the sink's count after it. */
static verdict repeat_judge(engine *e, const uint8_t *msg, size_t len, const char *app,
                            engine_repeat **slot, bool *refused)
{
	request r;
	wire_error err = {0};
	*refused = request_decode(&r, msg, len, &err) != REQUEST_COMMAND;
	verdict vd = VERDICT_FORWARD;
	if (!*refused) {
		block_info block = {0};
		request_ctx rc = {.app_name = app,
		                  .client = "c",
		                  .now_ms = 1000000,
		                  .no_wait = true,
		                  .repeat = slot};
		vd = engine_analyze(e, &r.view, &rc, &block);
	}
	request_release(&r);
	return vd;
}

/* A fresh engine, every rule at block, with the orders cache and a sink. */
typedef struct repeat_rig {
	fx_sink sink;
	index_cache *ic;
	engine *e;
} repeat_rig;

static void rig_up(repeat_rig *g)
{
	fx_sink_init(&g->sink);
	g->ic = fx_orders_cache();
	g->e = engine_all(RULE_BLOCK, false, g->ic, &g->sink);
}

static void rig_down(repeat_rig *g)
{
	engine_free(g->e);
	index_cache_free(g->ic);
	fx_sink_free(&g->sink);
}

static void test_repeat_same_as_reading(void **state)
{
	static const char *const bodies[] = {
	    "{'find': 'orders', 'filter': {'_id': 7}, 'limit': 1, 'singleBatch': true}",
	    "{'find': 'orders', 'filter': {'_id': {'$oid': '65a1b2c3d4e5f60718293a4b'}}}",
	    "{'count': 'orders', 'query': {'_id': 'ab12'}}",
	    "{'findAndModify': 'orders', 'query': {'_id': 3}, 'update': {'$set': {'v': 1}}}",
	};
	static const char *const app = "app", *const other_app = "other";
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		size_t len, at0;
		uint8_t *t = repeat_msg(bodies[i], &len, &at0);
		uint8_t *mut = malloc(len);
		uint64_t hits = 0;
		size_t judged = 0;
		for (size_t at = at0 + 4; at + 1 < len; at++)
			for (int flip = 0; flip < 3; flip++) {
				static const uint8_t to[] = {0x00, 0x02,
				                             0x24}; /* NUL, a type, '$' */
				memcpy(mut, t, len);
				mut[at] = mut[at] == to[flip] ? 0x01 : to[flip];
				verdict vd[2];
				size_t findings[2];
				bool refused = false;
				for (int k = 0; k < 2; k++) {
					repeat_rig g;
					rig_up(&g);
					engine *e = g.e;
					engine_repeat *slot = NULL;
					bool no;
					if (repeat_judge(e, t, len, app, k ? NULL : &slot, &no) !=
					        VERDICT_FORWARD ||
					    no || g.sink.n != 0)
						fail_msg("body %zu: the template itself was not "
						         "forwarded "
						         "clean",
						         i);
					if (!k && !slot)
						fail_msg("body %zu: no template made", i);
					vd[k] = repeat_judge(e, mut, len, app, k ? NULL : &slot,
					                     &refused);
					findings[k] = g.sink.n;
					hits += engine_repeat_hits(slot);
					engine_repeat_free(slot);
					rig_down(&g);
				}
				if (refused)
					continue;
				judged++;
				if (vd[0] != vd[1] || findings[0] != findings[1])
					fail_msg("body %zu, byte %zu set to %#x: verdict %d/%d, "
					         "%zu/%zu findings (repeat/read)",
					         i, at - at0, mut[at], vd[0], vd[1], findings[0],
					         findings[1]);
			}
		if (getenv("FX_VERBOSE"))
			printf("body %zu: %zu changed bodies judged, %" PRIu64 " by the template\n",
			       i, judged, hits);
		if (hits == 0 || judged == 0)
			fail_msg("body %zu: %zu changed bodies judged, %" PRIu64 " by the template",
			         i, judged, hits);

		/* one engine, one name: the same value change after the template */
		size_t at_value = 0;
		for (size_t at = at0 + 4; at + 1 < len && !at_value; at++) {
			memcpy(mut, t, len);
			mut[at] ^= 0x01;
			repeat_rig g;
			rig_up(&g);
			engine_repeat *slot = NULL;
			bool no;
			(void)repeat_judge(g.e, t, len, app, &slot, &no);
			(void)repeat_judge(g.e, mut, len, app, &slot, &no);
			if (engine_repeat_hits(slot) == 1)
				at_value = at;
			engine_repeat_free(slot);
			rig_down(&g);
		}
		assert_true(at_value != 0);
		repeat_rig g;
		rig_up(&g);
		engine *e = g.e;
		engine *e2 = engine_all(RULE_BLOCK, false, g.ic, &g.sink);
		engine_repeat *slot = NULL;
		bool no;
		(void)repeat_judge(e, t, len, app, &slot, &no);
		(void)repeat_judge(e, mut, len, other_app, &slot, &no);
		assert_int_equal(engine_repeat_hits(slot), 0);
		(void)repeat_judge(e, t, len, app, &slot, &no);
		(void)repeat_judge(e2, mut, len, app, &slot, &no);
		assert_int_equal(engine_repeat_hits(slot), 0);
		/* that last one, read, is e2's template now */
		(void)repeat_judge(e2, t, len, app, &slot, &no);
		assert_int_equal(engine_repeat_hits(slot), 1);
		(void)repeat_judge(e2, mut, len, app, &slot, &no);
		assert_int_equal(engine_repeat_hits(slot), 2);
		engine_repeat_free(slot);
		engine_free(e2);
		rig_down(&g);
		free(mut);
		free(t);
	}
}

/* The repeat compared only where the decoder's template lets two requests
 * differ (request_ctx.decoded_gen): after the query, and the query again
 * through the decoder's template (which leaves the repeat comparing only
 * that template's spans), each one-byte change of it that still matches
 * the decoder's template (a change inside one of its fixed-size values) is
 * a repeat exactly when the whole comparison says so, and gets the same
 * verdict and findings as a fresh engine reading it. The last body's
 * values lie in more words than the repeat keeps (REPEAT_NARROW): its
 * requests are compared whole. */
static verdict narrow_judge(engine *e, request *r, engine_repeat **slot, const request_template *rt,
                            bool by_template)
{
	block_info block = {0};
	request_ctx rc = {.app_name = "app",
	                  .client = "c",
	                  .now_ms = 1000000,
	                  .no_wait = true,
	                  .repeat = slot,
	                  .decoded_gen = by_template ? request_template_sets(rt) : 0,
	                  .decoded_spans = by_template ? request_template_body_spans(rt) : NULL};
	return engine_analyze(e, &r->view, &rc, &block);
}

/* t, then t again through the decoder's template, then mut (which matches
 * that template) with the repeat narrowed or (whole) not: whether mut was a
 * repeat; its verdict and the findings so far in *vd, *findings. */
static bool narrow_run(const uint8_t *t, const uint8_t *mut, size_t len, bool whole, verdict *vd,
                       size_t *findings)
{
	repeat_rig g;
	rig_up(&g);
	engine_repeat *slot = NULL;
	request_template *rt = NULL;
	request r;
	wire_error err = {0};
	assert_int_equal(request_decode(&r, t, len, &err), REQUEST_COMMAND);
	request_template_keep(&rt, &r);
	assert_int_equal(narrow_judge(g.e, &r, &slot, rt, false), VERDICT_FORWARD);
	request_release(&r);
	assert_true(request_decode_repeat(&r, t, len, rt));
	assert_int_equal(narrow_judge(g.e, &r, &slot, rt, true), VERDICT_FORWARD);
	if (engine_repeat_hits(slot) != 1 || g.sink.n != 0)
		fail_msg("the query again was not a clean repeat");
	assert_true(request_decode_repeat(&r, mut, len, rt));
	*vd = narrow_judge(g.e, &r, &slot, rt, !whole);
	*findings = g.sink.n;
	bool hit = engine_repeat_hits(slot) == 2;
	request_template_free(rt);
	engine_repeat_free(slot);
	rig_down(&g);
	return hit;
}

static void test_repeat_narrowed_same_as_reading(void **state)
{
	static const char *const bodies[] = {
	    "{'find': 'orders', 'filter': {'_id': 7}, 'limit': 1, 'singleBatch': true}",
	    "{'find': 'orders', 'filter': {'_id': {'$oid': '65a1b2c3d4e5f60718293a4b'}}, "
	    "'lsid': {'id': {'$binary': {'base64': 'AAECAwQFBgcICQoLDA0ODw==', 'subType': '04'}}}}",
	    "{'findAndModify': 'orders', 'query': {'_id': 3}, 'update': {'$set': {'v': 1}}}",
	    "{'find': 'orders', 'filter': {'_id': 7}, 'limit': 1, 'xa': 1.5, 'skip': 2, 'xb': 2.5, "
	    "'batchSize': 3, 'xc': 3.5, 'maxTimeMS': 4, 'xd': 4.5, 'ntoreturn': 5, 'xe': 5.5, "
	    "'xf': 6.5, 'xg': 7.5, 'xh': 8.5}",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		size_t len, at0;
		uint8_t *t = repeat_msg(bodies[i], &len, &at0);
		uint8_t *mut = malloc(len);
		size_t narrowed = 0, compared = 0;
		request_template *rt = NULL;
		request r;
		wire_error err = {0};
		assert_int_equal(request_decode(&r, t, len, &err), REQUEST_COMMAND);
		request_template_keep(&rt, &r);
		request_release(&r);
		for (size_t at = at0 + 4; at + 1 < len; at++)
			for (int flip = 0; flip < 3; flip++) {
				static const uint8_t to[] = {0x00, 0x02, 0x80};
				memcpy(mut, t, len);
				mut[at] = mut[at] == to[flip] ? 0x01 : to[flip];
				request m;
				if (!request_decode_repeat(&m, mut, len, rt))
					continue; /* outside the decoder's spans: compared whole */
				verdict vd, whole_vd;
				size_t n, whole_n;
				bool hit = narrow_run(t, mut, len, false, &vd, &n);
				bool whole_hit = narrow_run(t, mut, len, true, &whole_vd, &whole_n);
				repeat_rig fresh;
				rig_up(&fresh);
				bool no;
				verdict want = repeat_judge(fresh.e, mut, len, "app", NULL, &no);
				if (no || hit != whole_hit || vd != want || n != fresh.sink.n)
					fail_msg(
					    "body %zu, byte %zu set to %#x: repeat %d/%d (narrowed/"
					    "whole), verdict %d/%d, %zu/%zu findings "
					    "(narrowed/read)",
					    i, at - at0, mut[at], hit, whole_hit, vd, want, n,
					    fresh.sink.n);
				rig_down(&fresh);
				narrowed += hit;
				compared += !hit;
			}
		if (getenv("FX_VERBOSE"))
			printf(
			    "body %zu: %zu changes in the decoder's spans judged by the narrowed "
			    "repeat, %zu read\n",
			    i, narrowed, compared);
		if (narrowed == 0)
			fail_msg("body %zu: no change judged by the narrowed repeat", i);
		request_template_free(rt);
		free(mut);
		free(t);
	}
}

/* The caller's clock (request_ctx.clock_ns) is read once a request is
 * known to be read, where its analysis begins, and never for one judged as
 * its template was: a run of pipelined requests shares one reading, and a
 * request of it that is read is timed from its own start. */
static int64_t fake_ns;
static unsigned fake_reads;

static int64_t fake_clock(void)
{
	fake_reads++;
	return fake_ns += 1000;
}

static void test_clock_read_where_the_analysis_begins(void **state)
{
	size_t len, at0;
	uint8_t *t = repeat_msg("{'find': 'orders', 'filter': {'_id': 7}}", &len, &at0);
	repeat_rig g;
	rig_up(&g);
	engine_repeat *slot = NULL;
	int64_t started[2];
	bool by_template[2];
	fake_reads = 0;
	for (int k = 0; k < 2; k++) {
		request r;
		wire_error err = {0};
		assert_int_equal(request_decode(&r, t, len, &err), REQUEST_COMMAND);
		block_info block = {0};
		request_ctx rc = {.app_name = "app",
		                  .client = "c",
		                  .now_ms = 1000000,
		                  .no_wait = true,
		                  .repeat = &slot,
		                  .clock_ns = fake_clock};
		assert_int_equal(engine_analyze(g.e, &r.view, &rc, &block), VERDICT_FORWARD);
		started[k] = block.started_ns;
		by_template[k] = block.by_template;
		request_release(&r);
	}
	assert_false(by_template[0]); /* read: timed from the clock's reading */
	assert_true(started[0] == fake_ns);
	assert_true(by_template[1]); /* its template: no reading at all */
	assert_true(started[1] == 0);
	assert_int_equal(fake_reads, 1);
	engine_repeat_free(slot);
	rig_down(&g);
	free(t);
}

/* A query a check is called for (a regex filter, a collection scan) makes
 * no template: each of its repeats is read and reported. */
static void test_repeat_not_of_checked_queries(void **state)
{
	static const char *const bodies[] = {
	    "{'find': 'orders', 'filter': {'name': {'$regex': 'x', '$options': 'i'}}}",
	    "{'find': 'orders', 'filter': {'other': 4}}",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		size_t len, at0;
		uint8_t *t = repeat_msg(bodies[i], &len, &at0);
		repeat_rig g;
		rig_up(&g);
		engine_repeat *slot = NULL;
		bool no;
		for (int n = 0; n < 3; n++)
			assert_int_equal(repeat_judge(g.e, t, len, "", &slot, &no), VERDICT_BLOCK);
		assert_int_equal(engine_repeat_hits(slot), 0);
		assert_true(g.sink.n >= 1);
		engine_repeat_free(slot);
		rig_down(&g);
		free(t);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_filter_members),
	    cmocka_unit_test(test_template_matches_outside_spans_only),
	    cmocka_unit_test(test_update_forms),
	    cmocka_unit_test(test_update_writes),
	    cmocka_unit_test(test_regex_same_with_facts),
	    cmocka_unit_test(test_push_same_with_facts),
	    cmocka_unit_test(test_scan_same_with_facts),
	    cmocka_unit_test(test_gate_per_statement),
	    cmocka_unit_test(test_templates_same_as_reading),
	    cmocka_unit_test(test_template_backoff_same_as_reading),
	    cmocka_unit_test(test_repeat_same_as_reading),
	    cmocka_unit_test(test_repeat_narrowed_same_as_reading),
	    cmocka_unit_test(test_clock_read_where_the_analysis_begins),
	    cmocka_unit_test(test_repeat_not_of_checked_queries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
