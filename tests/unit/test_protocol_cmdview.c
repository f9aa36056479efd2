/* cmdview.c: what analyzers read, from both request forms, without a single
 * allocation. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures/wire_builder.h"
#include "fixtures/wire_captures.h"
#include "protocol/cmdview.h"
#include "protocol/commands.h"

/* The handshake spellings (hello, isMaster, ismaster) are the command
 * table's: the decoder sets request.hello from it (protocol/commands.h). */
static bool is_hello(const cmdview *v)
{
	return cmd_find(v->name) == CMD_HELLO;
}

/* libbson allocation counter: cmdview must never call it. */
static size_t bson_allocs;

static void *count_malloc(size_t n)
{
	bson_allocs++;
	return malloc(n);
}

static void *count_calloc(size_t n, size_t size)
{
	bson_allocs++;
	return calloc(n, size);
}

static void *count_realloc(void *p, size_t n)
{
	bson_allocs++;
	return realloc(p, n);
}

static void *count_aligned_alloc(size_t alignment, size_t n)
{
	bson_allocs++;
	return aligned_alloc(alignment, n);
}

static int count_setup(void **state)
{
	bson_mem_vtable_t vt = {.malloc = count_malloc,
	                        .calloc = count_calloc,
	                        .realloc = count_realloc,
	                        .free = free,
	                        .aligned_alloc = count_aligned_alloc};
	bson_mem_set_vtable(&vt);
	bson_allocs = 0;
	return 0;
}

static int count_teardown(void **state)
{
	bson_mem_restore_vtable();
	return 0;
}

static void view_opmsg(const uint8_t *msg, size_t len, opmsg *m, cmdview *v)
{
	wire_error err = {0};
	if (!opmsg_parse(msg, len, m, &err))
		fail_msg("opmsg_parse: %s", err.msg);
	if (!cmdview_from_opmsg(m, v, &err))
		fail_msg("cmdview_from_opmsg: %s", err.msg);
}

static int32_t doc_int(const bson_t *doc, const char *key)
{
	bson_iter_t it;
	assert_true(bson_iter_init_find(&it, doc, key));
	return bson_iter_as_int64(&it) > INT32_MAX ? -1 : (int32_t)bson_iter_as_int64(&it);
}

/* Guards the guard: the counter sees libbson's allocations. */
static void test_alloc_counter_is_live(void **state)
{
	size_t before = bson_allocs;
	bson_t *b = BCON_NEW("a", BCON_INT32(1));
	assert_true(bson_allocs > before);
	bson_destroy(b);
}

static void test_real_insert_sequence(void **state)
{
	opmsg m;
	cmdview v;
	size_t before = bson_allocs;
	view_opmsg(fx_pymongo_insert_opmsg, sizeof(fx_pymongo_insert_opmsg), &m, &v);
	assert_int_equal(v.origin, CMDVIEW_FROM_OPMSG);
	assert_string_equal(v.db, "fixturedb");
	assert_string_equal(v.name, "insert");
	assert_int_equal(v.nseqs, 1);
	assert_int_equal(v.flags, 0);
	assert_false(is_hello(&v));

	cmdview_docs d;
	bson_t doc;
	cmdview_docs_init(&d, &v, "documents");
	assert_true(d.in_seq);
	assert_true(cmdview_docs_next(&d, &doc));
	assert_int_equal(doc_int(&doc, "_id"), 1);
	assert_true(cmdview_docs_next(&d, &doc));
	assert_int_equal(doc_int(&doc, "_id"), 2);
	assert_false(cmdview_docs_next(&d, &doc));
	assert_false(d.corrupt);
	assert_int_equal(bson_allocs, before);
}

static void test_real_find(void **state)
{
	opmsg m;
	cmdview v;
	size_t before = bson_allocs;
	view_opmsg(fx_pymongo_find_opmsg, sizeof(fx_pymongo_find_opmsg), &m, &v);
	assert_string_equal(v.db, "fixturedb");
	assert_string_equal(v.name, "find");
	assert_int_equal(v.nseqs, 0);
	assert_true(bson_has_field(&v.body, "filter"));

	/* an absent field: nothing to iterate, nothing wrong */
	cmdview_docs d;
	bson_t doc;
	cmdview_docs_init(&d, &v, "documents");
	assert_false(cmdview_docs_next(&d, &doc));
	assert_false(d.corrupt);
	/* a present field that is not an array of documents is corrupt */
	cmdview_docs_init(&d, &v, "filter");
	assert_false(cmdview_docs_next(&d, &doc));
	assert_true(d.corrupt);
	assert_int_equal(bson_allocs, before);
}

/* A whole OP_MSG of one body section. */
static void build_opmsg(wb *b, const bson_t *body)
{
	wb_header(b, 1, 0, OP_MSG);
	wb_i32(b, 0);
	wb_u8(b, 0);
	wb_doc(b, body);
	wb_finish(b);
}

/* The view of an OP_MSG of one body section, built in b. */
static void view_body(wb *b, const bson_t *body, opmsg *m, cmdview *v)
{
	build_opmsg(b, body);
	view_opmsg(b->buf, b->n, m, v);
}

static void test_body_array(void **state)
{
	bson_t *body =
	    BCON_NEW("update", "c", "updates", "[", "{", "q", "{", "}", "u", "{", "$set", "{", "a",
	             BCON_INT32(1), "}", "}", "}", "{", "q", "{", "}", "u", "{", "$inc", "{", "n",
	             BCON_INT32(2), "}", "}", "}", "]", "$db", "test");
	wb b;
	opmsg m;
	cmdview v;
	view_body(&b, body, &m, &v);
	size_t before = bson_allocs;
	cmdview_docs d;
	bson_t doc;
	int n = 0;
	for (cmdview_docs_init(&d, &v, "updates"); cmdview_docs_next(&d, &doc); n++)
		assert_true(bson_has_field(&doc, "u"));
	assert_int_equal(n, 2);
	assert_false(d.in_seq);
	assert_false(d.corrupt);
	assert_int_equal(bson_allocs, before);
	bson_destroy(body);
}

static void test_body_array_with_non_document(void **state)
{
	bson_t *body = BCON_NEW("delete", "c", "deletes", "[", "{", "q", "{", "}", "}",
	                        BCON_INT32(5), "{", "q", "{", "}", "}", "]", "$db", "test");
	wb b;
	opmsg m;
	cmdview v;
	view_body(&b, body, &m, &v);
	cmdview_docs d;
	bson_t doc;
	cmdview_docs_init(&d, &v, "deletes");
	assert_true(cmdview_docs_next(&d, &doc));
	assert_false(cmdview_docs_next(&d, &doc));
	assert_true(d.corrupt);
	assert_false(cmdview_docs_next(&d, &doc)); /* stays stopped */
	bson_destroy(body);
}

static void test_bulkwrite_two_sequences(void **state)
{
	bson_t *body = BCON_NEW("bulkWrite", BCON_INT32(1), "$db", "admin");
	bson_t *op = BCON_NEW("insert", BCON_INT32(0), "document", "{", "x", BCON_INT32(1), "}");
	bson_t *ns = BCON_NEW("ns", "test.c");
	wb b;
	wb_header(&b, 1, 0, OP_MSG);
	wb_i32(&b, 0);
	size_t s = wb_seq_begin(&b, "nsInfo");
	wb_doc(&b, ns);
	wb_seq_end(&b, s);
	wb_u8(&b, 0);
	wb_doc(&b, body);
	s = wb_seq_begin(&b, "ops");
	for (int i = 0; i < 3; i++)
		wb_doc(&b, op);
	wb_seq_end(&b, s);
	wb_finish(&b);
	opmsg m;
	cmdview v;
	view_opmsg(b.buf, b.n, &m, &v);
	assert_string_equal(v.db, "admin");
	assert_string_equal(v.name, "bulkWrite");
	cmdview_docs d;
	bson_t doc;
	int n = 0;
	for (cmdview_docs_init(&d, &v, "ops"); cmdview_docs_next(&d, &doc); n++)
		assert_true(bson_has_field(&doc, "document"));
	assert_int_equal(n, 3);
	n = 0;
	for (cmdview_docs_init(&d, &v, "nsInfo"); cmdview_docs_next(&d, &doc); n++)
		assert_true(bson_has_field(&doc, "ns"));
	assert_int_equal(n, 1);
	bson_destroy(body);
	bson_destroy(op);
	bson_destroy(ns);
}

static void test_opmsg_refusals(void **state)
{
	const struct {
		bson_t *body;
		const char *says;
	} cases[] = {
	    {bson_new(), "OP_MSG command document is empty"},
	    {BCON_NEW("find", "c"), "OP_MSG command 'find' has no $db field"},
	    {BCON_NEW("find", "c", "$db", BCON_INT32(1)), "has a $db that is not a non-empty"},
	    {BCON_NEW("find", "c", "$db", ""), "has a $db that is not a non-empty"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		wb b;
		build_opmsg(&b, cases[i].body);
		opmsg m;
		cmdview v;
		wire_error err = {0};
		assert_true(opmsg_parse(b.buf, b.n, &m, &err));
		assert_false(cmdview_from_opmsg(&m, &v, &err));
		assert_wire_error(err, WIRE_ERR_BAD_VALUE, cases[i].says);
		bson_destroy(cases[i].body);
	}
}

/* The view keeps the body's top-level keys (the first CMDVIEW_TOP_KEYS,
 * counting all) and finds $db among them, or past them: the first $db
 * either way, the same element a walk of the body finds first. */
static void test_top_keys_and_db(void **state)
{
	const int fill[] = {0,
	                    5,
	                    CMDVIEW_TOP_KEYS - 2,
	                    CMDVIEW_TOP_KEYS - 1,
	                    CMDVIEW_TOP_KEYS,
	                    CMDVIEW_TOP_KEYS + 7};
	for (size_t t = 0; t < sizeof(fill) / sizeof(fill[0]); t++) {
		/* find, fill keys, then $db twice: "d" first, "e" second */
		bson_t *body = BCON_NEW("find", "c");
		char key[16];
		for (int k = 0; k < fill[t]; k++) {
			snprintf(key, sizeof(key), "k%d", k);
			BSON_APPEND_INT32(body, key, k);
		}
		BSON_APPEND_UTF8(body, "$db", "d");
		BSON_APPEND_UTF8(body, "$db", "e");
		wb b;
		opmsg m;
		cmdview v;
		view_body(&b, body, &m, &v);
		assert_string_equal(v.db, "d");
		assert_int_equal(v.ntop, (size_t)fill[t] + 3);
		bson_iter_t it;
		size_t i = 0;
		assert_true(bson_iter_init(&it, body));
		while (bson_iter_next(&it) && i < CMDVIEW_TOP_KEYS) {
			assert_string_equal(v.top_keys[i], bson_iter_key(&it));
			assert_int_equal(v.top_lens[i], strlen(bson_iter_key(&it)));
			i++;
		}
		bson_destroy(body);
	}
}

static void view_opquery(const uint8_t *msg, size_t len, opquery *q, cmdview *v)
{
	wire_error err = {0};
	if (!opquery_parse(msg, len, q, &err))
		fail_msg("opquery_parse: %s", err.msg);
	if (!cmdview_from_opquery(q, v, &err))
		fail_msg("cmdview_from_opquery: %s", err.msg);
}

static void test_real_ismaster_opquery(void **state)
{
	opquery q;
	cmdview v;
	size_t before = bson_allocs;
	view_opquery(fx_pymongo_ismaster_opquery, sizeof(fx_pymongo_ismaster_opquery), &q, &v);
	assert_int_equal(v.origin, CMDVIEW_FROM_OPQUERY);
	assert_string_equal(v.db, "admin");
	assert_ptr_equal(v.db, v.db_buf);
	assert_string_equal(v.name, "ismaster");
	assert_null(v.seqs);
	assert_int_equal(v.nseqs, 0);
	assert_true(is_hello(&v));
	assert_int_equal(bson_allocs, before);
}

static void test_query_wrappers(void **state)
{
	const char *wrappers[] = {"$query", "query"};
	for (size_t i = 0; i < 2; i++) {
		bson_t *query = BCON_NEW(wrappers[i], "{", "isMaster", BCON_INT32(1), "helloOk",
		                         BCON_BOOL(true), "}", "$readPreference", "{", "mode",
		                         "primaryPreferred", "}");
		wb b;
		wb_opquery(&b, 1, 0, "test.$cmd", query);
		opquery q;
		cmdview v;
		view_opquery(b.buf, b.n, &q, &v);
		assert_string_equal(v.db, "test");
		assert_string_equal(v.name, "isMaster");
		assert_true(bson_has_field(&v.body, "helloOk"));
		assert_false(bson_has_field(&v.body, "$readPreference"));
		assert_true(is_hello(&v));
		bson_destroy(query);
	}
	/* a first key "query" that is not a document is the command itself */
	bson_t *query = BCON_NEW("query", BCON_INT32(1));
	wb b;
	wb_opquery(&b, 1, 0, "admin.$cmd", query);
	opquery q;
	cmdview v;
	view_opquery(b.buf, b.n, &q, &v);
	assert_string_equal(v.name, "query");
	bson_destroy(query);
}

static void test_opquery_refusals(void **state)
{
	bson_t *hello = BCON_NEW("hello", BCON_INT32(1));
	wb b;
	opquery q;
	cmdview v;
	wire_error err = {0};

	wb_opquery(&b, 1, 0, "test.coll", hello);
	assert_true(opquery_parse(b.buf, b.n, &q, &err));
	assert_false(cmdview_from_opquery(&q, &v, &err));
	assert_wire_error(err, WIRE_ERR_UNSUPPORTED_OPQUERY,
	                  "OP_QUERY on 'test.coll' is not a "
	                  "command");

	char ns[200];
	memset(ns, 'd', 128);
	strcpy(ns + 128, ".$cmd");
	wb_opquery(&b, 1, 0, ns, hello);
	assert_true(opquery_parse(b.buf, b.n, &q, &err));
	assert_false(cmdview_from_opquery(&q, &v, &err));
	assert_wire_error(err, WIRE_ERR_BAD_VALUE, "database name of 128 bytes is longer than 127");
	/* 127 fits */
	strcpy(ns + 127, ".$cmd");
	wb_opquery(&b, 1, 0, ns, hello);
	assert_true(opquery_parse(b.buf, b.n, &q, &err));
	assert_true(cmdview_from_opquery(&q, &v, &err));
	assert_int_equal(strlen(v.db), 127);

	bson_t *empty = bson_new();
	wb_opquery(&b, 1, 0, "admin.$cmd", empty);
	assert_true(opquery_parse(b.buf, b.n, &q, &err));
	assert_false(cmdview_from_opquery(&q, &v, &err));
	assert_wire_error(err, WIRE_ERR_BAD_VALUE, "OP_QUERY command document is empty");
	bson_destroy(empty);
	bson_destroy(hello);
}

static void test_is_hello(void **state)
{
	const char *yes[] = {"hello", "isMaster", "ismaster"};
	const char *no[] = {"Hello", "ISMASTER", "find", "helloOk", ""};
	cmdview v = {0};
	assert_false(is_hello(&v));
	for (size_t i = 0; i < 3; i++) {
		v.name = yes[i];
		assert_true(is_hello(&v));
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		v.name = no[i];
		assert_false(is_hello(&v));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_alloc_counter_is_live),
	    cmocka_unit_test(test_real_insert_sequence),
	    cmocka_unit_test(test_real_find),
	    cmocka_unit_test(test_body_array),
	    cmocka_unit_test(test_body_array_with_non_document),
	    cmocka_unit_test(test_bulkwrite_two_sequences),
	    cmocka_unit_test(test_opmsg_refusals),
	    cmocka_unit_test(test_top_keys_and_db),
	    cmocka_unit_test(test_real_ismaster_opquery),
	    cmocka_unit_test(test_query_wrappers),
	    cmocka_unit_test(test_opquery_refusals),
	    cmocka_unit_test(test_is_hello),
	};
	return cmocka_run_group_tests(tests, count_setup, count_teardown);
}
