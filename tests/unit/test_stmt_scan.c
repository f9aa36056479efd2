/* The statement scan (analyzers/engine/stmt_scan.h) against the full read
 * it stands for (body_walk_cur, facts_filter, facts_update, facts_have and
 * stmt_unchecked, as analysers.c runs them): wherever the scan says that
 * no check would be called on a statement, the full read says so too, and
 * the two agree on its upsert, on the template's spans and on what the
 * multikey learning is asked; wherever it says the statement must be read
 * in full, either some check is called on it or it has a form the scan
 * leaves to the full read (told here by libbson's own walk of its keys).
 *
 * Over statements of every form the facts tell apart, each with every
 * byte changed in turn (keys, types, lengths, values), every document in
 * the fuzz corpus, and every gate a target can set. */
#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "analyzers/engine/body.h"
#include "analyzers/engine/commands.h"
#include "analyzers/engine/engine_int.h"
#include "analyzers/engine/facts.h"
#include "analyzers/engine/stmt_scan.h"
#include "fixtures/analyzer_fixture.h"
#include "protocol/frame.h"
#include "protocol/request.h"

/* bulkWrite's op keys (analysers.c) */
#define BULK_UPDATE                                                                                \
	(BK(FILTER) | BK(UPDATE_MODS) | BK(UPSERT) | BK(ARRAY_FILTERS) | BK(MULTI) | BK(HINT) |    \
	 BK(COLLATION) | BK(SORT))

static size_t scanned, passed, compared;

/* Whether the scan leaves the statement to the full read whatever its
 * gate: a wanted key it does not take, a repeated filter (a document) or
 * update, or nothing to walk. By libbson's walk, which stops where the
 * cursors stop. */
static bool left_to_full_read(const uint8_t *doc, uint32_t len, unsigned wanted)
{
	bson_t b;
	bson_iter_t it;
	unsigned filters = 0, updates = 0;
	if (!bson_init_static(&b, doc, len) || !bson_iter_init(&it, &b))
		return true;
	while (bson_iter_next(&it)) {
		body_key k = body_key_of(bson_iter_key(&it));
		if (!(wanted & (1u << k)))
			continue;
		switch (k) {
		case BK_FILTER:
		case BK_QUERY:
		case BK_Q:
			filters += BSON_ITER_HOLDS_DOCUMENT(&it);
			break;
		case BK_UPDATE:
		case BK_U:
		case BK_UPDATE_MODS:
			updates++;
			break;
		case BK_UPSERT:
		case BK_MULTI:
		case BK_LIMIT:
		case BK_SKIP:
			break;
		default:
			return true;
		}
	}
	return filters > 1 || updates > 1;
}

/* One statement, one gate: the scan against the full read (and its
 * learning's test, read_facts' in analysers.c). */
static void compare(const uint8_t *doc, uint32_t len, const stmt_scan_in *in)
{
	wire_cur c;
	wire_cur_init_framed(&c, doc, len);
	facts_spans ref_sp = {.base = doc}, scan_sp = {.base = doc};
	cmd_body b;
	body_init(&b, NULL, NULL);
	assert_true(body_walk_cur(&b, &c, in->wanted));
	stmt_facts f;
	f.has_filter = b.has_filter && in->filter;
	f.has_update = b.has_update && in->update;
	if (f.has_filter)
		facts_filter(&f.filter, &b.filter_at, &ref_sp);
	if (f.has_update)
		facts_update(&f.update, &b.update_at, in->update_spans ? &ref_sp : NULL);
	unsigned have = facts_have(&f, b.q.hint_doc || b.q.hint_name, b.q.collation != NULL);
	bool unchecked = !in->gate_always && !(have & in->gate_when) &&
	                 (!f.has_update || f.update.len < in->gate_floor);
	bool learns = in->learn && f.has_update && engine_arrays_may_learn(&f.update) &&
	              !engine_arrays_passed_over(in->learn, &f.update);

	bool upsert = false;
	bool pass = stmt_scan_run(in, &c, &scan_sp, &upsert);
	scanned++;
	if (!pass) {
		if (unchecked && !learns && !left_to_full_read(doc, len, in->wanted))
			fail_msg("a statement of %u bytes no check is called on and nothing "
			         "learnt from was left to the full read",
			         len);
		return;
	}
	passed++;
	if (!unchecked || learns)
		fail_msg("the scan passed a statement of %u bytes a check is called on (have "
		         "%#x) or the learning reads (%d)",
		         len, have, learns);
	assert_int_equal(upsert, b.upsert);
	assert_int_equal(scan_sp.full, ref_sp.full);
	if (!ref_sp.full) {
		(void)byte_spans_sort(&ref_sp);
		(void)byte_spans_sort(&scan_sp);
		assert_int_equal(scan_sp.n, ref_sp.n);
		for (uint32_t i = 0; i < ref_sp.n; i++) {
			assert_int_equal(scan_sp.s[i].at, ref_sp.s[i].at);
			assert_int_equal(scan_sp.s[i].len, ref_sp.s[i].len);
		}
	}
	compared++;
}

/* The learning's targets a statement can meet: none, not looked up yet,
 * no set there, and a set whose learnable keys start with 'a' and 'i'
 * (the tables' arrays), or with any byte. The set itself is never read
 * (engine_arrays_passed_over asks only whether there is one). */
static arrays_target targets[5];

static void targets_init(void)
{
	static int set;
	targets[1].looked = false;
	targets[2].looked = true;
	targets[2].set = NULL;
	for (int i = 3; i < 5; i++) {
		targets[i].looked = true;
		targets[i].set = (index_set *)&set;
		memset(targets[i].firsts, i == 4 ? 0xff : 0, sizeof(targets[i].firsts));
	}
	targets[3].firsts['a' >> 6] |= (uint64_t)1 << ('a' & 63);
	targets[3].firsts['i' >> 6] |= (uint64_t)1 << ('i' & 63);
}

/* The length of the statement's last u or updateMods (a document's or an
 * array's), as the facts take it; 0 for none. */
static uint32_t update_len(const uint8_t *doc, uint32_t len)
{
	bson_t b;
	bson_iter_t it;
	uint32_t n = 0;
	if (!bson_init_static(&b, doc, len) || !bson_iter_init(&it, &b))
		return 0;
	while (bson_iter_next(&it)) {
		const char *k = bson_iter_key(&it);
		const uint8_t *data;
		if ((strcmp(k, "u") == 0 || strcmp(k, "updateMods") == 0) &&
		    (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it))) {
			if (BSON_ITER_HOLDS_DOCUMENT(&it))
				bson_iter_document(&it, &n, &data);
			else
				bson_iter_array(&it, &n, &data);
		}
	}
	return n;
}

/* Every gate a target can set, for each statement key set. */
static void every_gate(const uint8_t *doc, uint32_t len, bool all)
{
	static const unsigned whens[] = {0,
	                                 STMT_PATTERN,
	                                 STMT_PLAN,
	                                 STMT_PUSH,
	                                 STMT_PATTERN | STMT_PUSH,
	                                 STMT_PATTERN | STMT_PLAN | STMT_COLLATED | STMT_PUSH};
	/* no floor, one, and the statement's own update length and one
	 * past it (the floor is a strict bound) */
	uint32_t ulen = update_len(doc, len);
	const uint32_t floors[] = {UINT32_MAX, 40, ulen, ulen + 1};
	static const bool reads[][3] = {{1, 1, 1}, {1, 1, 0}, {0, 1, 0}, {1, 0, 0}};
	unsigned keys[3] = {commands_find("update")->stmt_keys, commands_find("delete")->stmt_keys,
	                    BULK_UPDATE};
	for (int k = 0; k < 3; k++)
		for (size_t r = 0; r < (all ? 4u : 1u); r++)
			for (size_t w = 0; w < sizeof(whens) / sizeof(whens[0]); w++)
				for (size_t fl = 0; fl < (all ? 4u : 1u); fl++) {
					for (int l = 0; l < 5; l++) {
						stmt_scan_in in = {
						    keys[k],     reads[r][0],
						    reads[r][1], reads[r][2],
						    false,       whens[w],
						    floors[fl],  l ? &targets[l] : NULL};
						compare(doc, len, &in);
					}
				}
}

static const char *const filters[] = {
    "{'_id': 5}",
    "{'_id': 'x'}",
    "{'_id': {'a': 1}}",
    "{'_id': {'$ref': 'c', '$id': 1}}",
    "{'_id': {'$in': [1, 2]}}",
    "{'_id': 5, 'name': {'$regex': 'x', '$options': 'i'}}",
    "{'name': {'$regex': '^x'}}",
    "{'name': {'$in': ['a', 'b']}}",
    "{'name': {'$not': {'$regex': 'x'}}}",
    "{'tags': {'$elemMatch': {'n': 1}}}",
    "{'$or': [{'a': 1}, {'b': 2}]}",
    "{'status': 'A', 'created': {'$lt': 10}}",
    "{'x': {'$ne': 1}, '_id': 3}",
    "{'a':1,'b':1,'c':1,'d':1,'e':1,'f':1,'g':1,'_id':1}",
    "{'a':1,'b':1,'c':1,'d':1,'e':1,'f':1,'g':1,'h':1,'_id':1}",
    "{}",
};

static const char *const updates[] = {
    "{'$set': {'v': 1}}",
    "{'$set': {'v': 'abc', 'w': {'x': 1}, 'a.$.b': 2, 'd': [1]}}",
    "{'$push': {'items': 1}}",
    "{'$push': {'items': {'$each': [1], '$slice': -5}}}",
    "{'$push': {'a': {'$each': [1]}, 'b': {'$slice': 3}}}",
    "{'$inc': {'n': 1}, '$unset': {'x': ''}, '$push': {'items': {'$each': [], '$slice': 1}}}",
    "{'$addToSet': {'a': 1}, '$setOnInsert': {'s': [1]}}",
    "{'items': [1, 2]}",
    "[{'$set': {'items': 1}}]",
    "{}",
    "{'$set': {'p0': [], 'p1': [], 'p2': [], 'p3': [], 'p4': [], 'p5': [], 'p6': [], "
    "'p7': [], 'p8': [], 'p9': [], 'pa': [], 'pb': [], 'pc': [], 'pd': [], 'pe': [], "
    "'pf': [], 'pg': []}, '$push': {'items': 1}}",
    "{'$currentDate': {'t': true}, '$set': {'a': 1, 'b': 2, 'c': 3, 'd': 4, 'e': 5, 'f': 6, "
    "'g': 7, 'h': 8, 'i': 9, 'j': 10, 'k': 11, 'l': 12, 'm': 13, 'n': 14, 'o': 15, "
    "'p': 16, 'q': 17}}",
};

/* The statement forms around a filter f and an update u. */
static bson_t *statement(int form, const bson_t *f, const bson_t *u, bool u_array)
{
	bson_t *s = bson_new();
#define PUT_U(s, key) (u_array ? BSON_APPEND_ARRAY(s, key, u) : BSON_APPEND_DOCUMENT(s, key, u))
	switch (form) {
	case 0:
		BSON_APPEND_DOCUMENT(s, "q", f);
		PUT_U(s, "u");
		break;
	case 1: /* u first, upsert and multi */
		PUT_U(s, "u");
		BSON_APPEND_DOCUMENT(s, "q", f);
		BSON_APPEND_BOOL(s, "upsert", true);
		BSON_APPEND_BOOL(s, "multi", true);
		break;
	case 2: /* a hint: left to the full read */
		BSON_APPEND_DOCUMENT(s, "q", f);
		PUT_U(s, "u");
		BSON_APPEND_UTF8(s, "hint", "_id_");
		break;
	case 3: /* a repeated q, the first not a document */
		BSON_APPEND_INT32(s, "q", 1);
		BSON_APPEND_DOCUMENT(s, "q", f);
		PUT_U(s, "u");
		BSON_APPEND_INT32(s, "upsert", 0);
		break;
	case 4: /* bulkWrite's names, a delete's limit */
		BSON_APPEND_DOCUMENT(s, "filter", f);
		PUT_U(s, "updateMods");
		BSON_APPEND_INT32(s, "limit", 1);
		break;
	case 5: /* two filters, documents both: the last one counts */
		BSON_APPEND_DOCUMENT(s, "q", f);
		BSON_APPEND_DOCUMENT(s, "q", f);
		PUT_U(s, "u");
		break;
	default: /* a repeated u */
		BSON_APPEND_DOCUMENT(s, "q", f);
		PUT_U(s, "u");
		PUT_U(s, "u");
		break;
	}
#undef PUT_U
	return s;
}

static void test_scan_same_as_full_read(void **state)
{
	(void)state;
	size_t nf = sizeof(filters) / sizeof(filters[0]), nu = sizeof(updates) / sizeof(updates[0]);
	for (size_t i = 0; i < nf; i++)
		for (size_t j = 0; j < nu; j++)
			for (int form = 0; form < 7; form++) {
				bson_t *f = fx_json(filters[i]);
				bool arr = updates[j][0] == '[';
				bson_t *u = arr ? fx_json("{'0': {'$set': {'items': 1}}}")
				                : fx_json(updates[j]);
				bson_t *s = statement(form, f, u, arr);
				every_gate(bson_get_data(s), s->len, true);
				bson_destroy(s);
				bson_destroy(u);
				bson_destroy(f);
			}
	assert_true(passed > 1000);
}

/* Each statement of the bench's shapes and a few others, every byte
 * changed in turn to a NUL, a document type, a '$' (or to 1). */
static void test_scan_same_as_full_read_mutated(void **state)
{
	(void)state;
	size_t nf = sizeof(filters) / sizeof(filters[0]), nu = sizeof(updates) / sizeof(updates[0]);
	size_t before = passed;
	for (size_t i = 0; i < nf; i += 3)
		for (size_t j = 0; j < nu; j++)
			for (int form = 0; form < 7; form += form == 1 ? 4 : 1) { /* 0, 1, 5, 6 */
				bson_t *f = fx_json(filters[i]);
				bool arr = updates[j][0] == '[';
				bson_t *u = arr ? fx_json("{'0': {'$set': {'items': 1}}}")
				                : fx_json(updates[j]);
				bson_t *s = statement(form, f, u, arr);
				uint8_t *mut = malloc(s->len);
				for (uint32_t at = 4; at + 1 < s->len; at++)
					for (int flip = 0; flip < 3; flip++) {
						static const uint8_t to[] = {0x00, 0x03, 0x24};
						memcpy(mut, bson_get_data(s), s->len);
						mut[at] = mut[at] == to[flip] ? 0x01 : to[flip];
						every_gate(mut, s->len, false);
					}
				free(mut);
				bson_destroy(s);
				bson_destroy(u);
				bson_destroy(f);
			}
	assert_true(passed - before > 1000);
}

/* Every framed document inside every file of the fuzz corpus (bodies,
 * statements, filters, updates, and whatever else frames as one), as a
 * statement. */
static void test_scan_same_as_full_read_corpus(void **state)
{
	(void)state;
	const char *root = MG_SOURCE_DIR "/tests/fuzz/corpus";
	DIR *top = opendir(root);
	assert_non_null(top);
	size_t files = 0, before = compared;
	struct dirent *t;
	while ((t = readdir(top))) {
		if (t->d_name[0] == '.')
			continue;
		char dir[1024];
		snprintf(dir, sizeof dir, "%s/%s", root, t->d_name);
		DIR *d = opendir(dir);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d))) {
			char path[2048];
			snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
			FILE *fp = e->d_name[0] == '.' ? NULL : fopen(path, "rb");
			if (!fp)
				continue;
			static uint8_t buf[1 << 16];
			size_t n = fread(buf, 1, sizeof buf, fp);
			fclose(fp);
			files++;
			for (size_t at = 0; at + 5 <= n; at++) {
				uint32_t len = wire_read_u32(buf + at);
				if (len < 5 || len > n - at || buf[at + len - 1] != 0)
					continue;
				every_gate(buf + at, len, false);
			}
		}
		closedir(d);
	}
	closedir(top);
	assert_true(files > 100);
	assert_true(compared - before > 1000);
}

/* One update command of the statements docs[0..n) on shop.orders, through
 * a fresh engine with every rule at `action`, templates on, the orders
 * index cache (multikey learning on): whether it is blocked, how many
 * findings the sink got, and whether the block says upsert. */
static bool batch(rule_action action, const bson_t *const *docs, size_t n, size_t *findings,
                  bool *upsert)
{
	fx_sink sink;
	fx_sink_init(&sink);
	index_cache *ic = fx_orders_cache();
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int r = 0; r < RULE_COUNT; r++)
		cfg.rules[r].action = action;
	engine *e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	assert_non_null(e);
	const uint8_t *raw[64];
	uint32_t lens[64];
	assert_true(n <= 64);
	for (size_t j = 0; j < n; j++) {
		raw[j] = bson_get_data(docs[j]);
		lens[j] = docs[j]->len;
	}
	block_info block = {0};
	bool blocked = fx_update_batch(e, raw, lens, n, &block) == VERDICT_BLOCK;
	*findings = sink.n;
	*upsert = block.upsert;
	engine_free(e);
	index_cache_free(ic);
	fx_sink_free(&sink);
	return blocked;
}

/* Through the engine: a statement after one no check is called on is
 * scanned (analysers.c), the first of a batch is read in full at once. So
 * each statement of the tables, put after such a one and before it,
 * gives the same verdict, findings and upsert both ways, at log and at
 * block, the multikey learning on. */
static void test_engine_scanned_same_as_read(void **state)
{
	(void)state;
	bson_t *plain = fx_json("{'q': {'_id': 1}, 'u': {'$set': {'v': 1}}}");
	size_t nf = sizeof(filters) / sizeof(filters[0]), nu = sizeof(updates) / sizeof(updates[0]);
	for (size_t i = 0; i < nf; i++)
		for (size_t j = 0; j < nu; j++)
			for (int form = 0; form < 7; form++) {
				bson_t *f = fx_json(filters[i]);
				bool arr = updates[j][0] == '[';
				bson_t *u = arr ? fx_json("{'0': {'$set': {'items': 1}}}")
				                : fx_json(updates[j]);
				bson_t *st = statement(form, f, u, arr);
				const bson_t *after[] = {plain, st}, *first[] = {st, plain};
				for (int a = 0; a < 2; a++) {
					rule_action act = a ? RULE_BLOCK : RULE_LOG;
					size_t n[2];
					bool up[2], blocked[2];
					blocked[0] = batch(act, after, 2, &n[0], &up[0]);
					blocked[1] = batch(act, first, 2, &n[1], &up[1]);
					if (blocked[0] != blocked[1] || n[0] != n[1] ||
					    up[0] != up[1])
						fail_msg(
						    "filter %zu, update %zu, form %d, action %d: "
						    "blocked %d/%d, findings %zu/%zu, upsert %d/%d "
						    "(scanned/read)",
						    i, j, form, act, blocked[0], blocked[1], n[0],
						    n[1], up[0], up[1]);
				}
				bson_destroy(st);
				bson_destroy(u);
				bson_destroy(f);
			}
	bson_destroy(plain);
}

int main(void)
{
	targets_init();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scan_same_as_full_read),
	    cmocka_unit_test(test_scan_same_as_full_read_mutated),
	    cmocka_unit_test(test_scan_same_as_full_read_corpus),
	    cmocka_unit_test(test_engine_scanned_same_as_read),
	};
	int r = cmocka_run_group_tests(tests, NULL, NULL);
	printf("# statements scanned %zu, passed %zu, compared %zu\n", scanned, passed, compared);
	return r;
}
