/* The report's workload and relationships (report/workload.c,
 * report/relationships.c) over captures built in memory with known counts,
 * times and joins: rates per collection over the covered time (one
 * instance, and a fleet of two merged), projections against document
 * sizes, $addToSet paths with growth evidence, and pairs read together
 * (N+1, populate-style $in, a $lookup, and look-alikes that are no join),
 * each with the advice the method reaches and its evidence. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "protocol/capture.h"
#include "report/aggregate.h"
#include "report/relationships.h"

#define T0  1700000000000000
#define SEC 1000000

typedef struct cap {
	model m;
	aggregator *a;
	int32_t rid;
} cap;

static void cap_open(cap *c)
{
	memset(c, 0, sizeof *c);
	c->a = aggregator_new(&c->m);
	assert_non_null(c->a);
	c->rid = 1;
}

/* A capture's header; redacted: its requests' literals are placeholders
 * (the default capture), else the real values these fixtures write. */
static void header_of(cap *c, const char *instance, bool redacted)
{
	bson_t h;
	capture_build_header(&h, "test", instance, redacted, T0, NULL);
	aggregator_record(c->a, 1, &h);
	aggregator_record(c->a, 2, &h);
	bson_destroy(&h);
}

static void header(cap *c, const char *instance)
{
	header_of(c, instance, false);
}

/* An index snapshot: _id and, when given, one more key (its first field),
 * and the estimated document count. */
static void indexes(cap *c, const char *ns, const char *key, int64_t count)
{
	bson_t rec;
	const bson_t *specs[2];
	bson_t *id =
	    BCON_NEW("v", BCON_INT32(2), "key", "{", "_id", BCON_INT32(1), "}", "name", "_id_");
	bson_t *k =
	    key ? BCON_NEW("v", BCON_INT32(2), "key", "{", key, BCON_INT32(1), "}", "name", "k_1")
	        : NULL;
	specs[0] = id;
	specs[1] = k;
	capture_build_indexes(&rec, T0, ns, specs, k ? 2 : 1, NULL, count);
	aggregator_record(c->a, 1, &rec);
	aggregator_record(c->a, 2, &rec);
	bson_destroy(&rec);
	bson_destroy(id);
	if (k)
		bson_destroy(k);
}

/* A request at t on conn (body consumed), with its keyed values' hashes
 * (vh, n of them; NULL: none); its requestID. */
static int32_t req_vh(cap *c, int64_t conn, int64_t t, bson_t *body, const uint64_t *vh, uint32_t n)
{
	bson_t rec = BSON_INITIALIZER;
	int32_t rid = c->rid++;
	BSON_APPEND_UTF8(&rec, "k", "req");
	BSON_APPEND_INT64(&rec, "t", t);
	BSON_APPEND_INT64(&rec, "conn", conn);
	BSON_APPEND_UTF8(&rec, "client", "127.0.0.1:5000");
	BSON_APPEND_UTF8(&rec, "app", "web");
	BSON_APPEND_INT32(&rec, "rid", rid);
	BSON_APPEND_UTF8(&rec, "db", "shop");
	BSON_APPEND_DOCUMENT(&rec, "body", body);
	if (vh)
		capture_append_hashes(&rec, vh, n);
	aggregator_record(c->a, 2, &rec);
	bson_destroy(&rec);
	bson_destroy(body);
	return rid;
}

static int32_t req(cap *c, int64_t conn, int64_t t, bson_t *body)
{
	return req_vh(c, conn, t, body, NULL, 0);
}

/* Its reply at t with n documents of doc_size bytes each (sampled when
 * doc_size > 0), and arrays {path: len} when path is given. */
static void rep(cap *c, int64_t conn, int32_t rid, int64_t t, int64_t n, int64_t doc_size,
                const char *path, int64_t len)
{
	bson_t rec;
	capture_origin o = {t, (uint64_t)conn, "", ""};
	capture_reply_facts f = {.read = true,
	                         .ok = true,
	                         .n = n,
	                         .sampled = doc_size > 0,
	                         .docs_n = n,
	                         .docs_max = doc_size,
	                         .docs_total = n * doc_size};
	bson_init(&f.arrays);
	if (path)
		BSON_APPEND_INT64(&f.arrays, path, len);
	capture_build_reply(&rec, &o, rid, 100 + (size_t)(n * doc_size), &f);
	aggregator_record(c->a, 2, &rec);
	bson_destroy(&rec);
	bson_destroy(&f.arrays);
}

/* A request and its reply 1 ms later. */
static void call(cap *c, int64_t conn, int64_t t, bson_t *body, int64_t n, int64_t doc_size)
{
	int32_t rid = req(c, conn, t, body);
	rep(c, conn, rid, t + 1000, n, doc_size, NULL, 0);
}

static bson_t *find_orders(void)
{
	return BCON_NEW("find", "orders", "filter", "{", "status", "?", "}", "$db", "shop");
}

/* A read of one customer by _id: each call another one (a join's fan-out
 * counts distinct values). */
static bson_t *cust_by_id(void)
{
	static int32_t next;
	return BCON_NEW("find", "customers", "filter", "{", "_id", BCON_INT32(next++), "}", "limit",
	                BCON_INT32(1), "$db", "shop");
}

static bson_t *cust_in(int n, bool project)
{
	bson_t *b = BCON_NEW("find", "customers");
	bson_t f, in, arr;
	BSON_APPEND_DOCUMENT_BEGIN(b, "filter", &f);
	BSON_APPEND_DOCUMENT_BEGIN(&f, "_id", &in);
	BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
	for (int i = 0; i < n; i++) {
		char k[16];
		snprintf(k, sizeof k, "%d", i);
		BSON_APPEND_INT32(&arr, k, i);
	}
	bson_append_array_end(&in, &arr);
	bson_append_document_end(&f, &in);
	bson_append_document_end(b, &f);
	if (project) {
		bson_t p;
		BSON_APPEND_DOCUMENT_BEGIN(b, "projection", &p);
		BSON_APPEND_INT32(&p, "name", 1);
		BSON_APPEND_INT32(&p, "email", 1);
		bson_append_document_end(b, &p);
	}
	BSON_APPEND_UTF8(b, "$db", "shop");
	return b;
}

static bson_t *update_customer(void)
{
	return BCON_NEW("update", "customers", "updates", "[", "{", "q", "{", "_id", BCON_INT32(0),
	                "}", "u", "{", "$set", "{", "name", "?", "}", "}", "}", "]", "$db", "shop");
}

static void cap_close(cap *c)
{
	aggregator_finish(c->a);
}

static void cap_free(cap *c)
{
	aggregator_free(c->a);
	model_free(&c->m);
}

static const model_ns *row(const model *m, const char *ns)
{
	for (size_t i = 0; i < m->nnss; i++)
		if (!strcmp(m->nss[i].ns, ns))
			return &m->nss[i];
	return NULL;
}

static const model_rel *pair(const model *m, const char *parent, const char *child)
{
	for (size_t i = 0; i < m->nrels; i++)
		if (!strcmp(m->rels[i].parent, parent) && !strcmp(m->rels[i].child, child))
			return &m->rels[i];
	return NULL;
}

static char *render(const model *m, bool (*w)(const model *, FILE *))
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_true(w(m, f));
	assert_int_equal(fclose(f), 0);
	return text;
}

/* 10 s (the first request to the last reply): 50 finds and 10 inserts on
 * orders, 20 updates on customers. */
static void test_rates_per_collection(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	indexes(&c, "shop.orders", NULL, 5000);
	for (int i = 0; i < 50; i++)
		call(&c, 1, T0 + i * (10 * SEC / 50), find_orders(), 4, 2000);
	for (int i = 0; i < 10; i++)
		call(&c, 2, T0 + i * SEC + 500,
		     BCON_NEW("insert", "orders", "documents", "[", "{", "a", BCON_INT32(1), "}",
		              "]", "$db", "shop"),
		     0, 0);
	for (int i = 0; i < 20; i++)
		call(&c, 3, T0 + i * (SEC / 2) + 700, update_customer(), 0, 0);
	call(&c, 2, T0 + 10 * SEC - 1000, find_orders(), 4, 2000); /* its reply: 10 s */
	cap_close(&c);
	assert_true(c.m.covered_s > 9.999 && c.m.covered_s < 10.001);
	const model_ns *o = row(&c.m, "shop.orders"), *cu = row(&c.m, "shop.customers");
	assert_non_null(o);
	assert_non_null(cu);
	assert_int_equal(o->reads, 51);
	assert_int_equal(o->writes, 10);
	assert_int_equal(cu->writes, 20);
	assert_int_equal(cu->reads, 0);
	char *md = render(&c.m, report_write_md);
	assert_non_null(strstr(md, "## Workload\n\nRates per second over 10.0 s of covered time "
	                           "(1 instance)."));
	/* 51 reads / 10 s, 10 writes / 10 s, 5.1 reads per write, 5000
	 * estimated, 2000 B average; the top shapes with their rates */
	assert_non_null(strstr(md, "| `shop.orders` | 51 | 5.10 | 10 | 1.00 | 5.1 | 5000 | "
	                           "2.0 KiB (largest 2.0 KiB) | find 5.10/s `{\"find\":\"orders\","
	                           "\"filter\":{\"status\":\"?string\"}}`; insert 1.00/s "));
	assert_non_null(strstr(md, "| `shop.customers` | 0 | 0.00 | 20 | 2.00 | 0.0 |  |  | "
	                           "update 2.00/s "));
	free(md);
	char *js = render(&c.m, report_write_json);
	assert_non_null(strstr(js, "\"workload\":{\"coveredSeconds\":10.000,\"instances\":1,"));
	assert_non_null(strstr(js, "{\"ns\":\"shop.orders\",\"reads\":51,\"writes\":10,"
	                           "\"readsPerSecond\":5.100,\"writesPerSecond\":1.000,"
	                           "\"readsPerWrite\":5.100,\"estimatedDocuments\":5000,"));
	assert_non_null(strstr(js, "\"relationships\":{\"params\":{\"windowMs\":100,"));
	free(js);
	cap_free(&c);
}

/* Whole 64 KiB documents read, and a projection of two fields of them:
 * both bloated; small documents read whole are not. */
static void test_fields_read_against_document_size(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	for (int i = 0; i < 10; i++) {
		call(&c, 1, T0 + i * SEC,
		     BCON_NEW("find", "big", "filter", "{", "k", "?", "}", "$db", "shop"), 2,
		     65536);
		call(&c, 1, T0 + i * SEC + 5000,
		     BCON_NEW("find", "big", "filter", "{", "j", "?", "}", "projection", "{", "a",
		              BCON_INT32(1), "b", BCON_INT32(1), "}", "$db", "shop"),
		     2, 65536);
		call(&c, 1, T0 + i * SEC + 9000,
		     BCON_NEW("find", "small", "filter", "{", "k", "?", "}", "$db", "shop"), 2,
		     300);
	}
	cap_close(&c);
	char *js = render(&c.m, report_write_json);
	assert_non_null(strstr(js, "\"projection\":null,\"fieldsRead\":-1,\"bytesPerRead\":131172,"
	                           "\"averageDocumentBytes\":65536,\"bloated\":true}"));
	assert_non_null(strstr(js, "\"projection\":\"a, b\",\"fieldsRead\":2,"
	                           "\"bytesPerRead\":131172,\"averageDocumentBytes\":65536,"
	                           "\"bloated\":true}"));
	assert_non_null(strstr(js, "\"projection\":null,\"fieldsRead\":-1,\"bytesPerRead\":700,"
	                           "\"averageDocumentBytes\":300,\"bloated\":false}"));
	char *md = render(&c.m, report_write_md);
	assert_non_null(strstr(md, "| whole document | 128.1 KiB | 64.0 KiB | whole large "
	                           "documents returned"));
	free(md);
	free(js);
	cap_free(&c);
}

/* $addToSet paths are listed with the evidence $push paths have: writes,
 * samples, largest, p95, growth. */
static void test_add_to_set_growth(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	for (int i = 0; i < 10; i++) {
		call(&c, 1, T0 + i * SEC,
		     BCON_NEW("update", "posts", "updates", "[", "{", "q", "{", "_id",
		              BCON_INT32(0), "}", "u", "{", "$addToSet", "{", "tags", "?", "}", "}",
		              "}", "]", "$db", "shop"),
		     0, 0);
		int32_t rid = req(&c, 1, T0 + i * SEC + 500,
		                  BCON_NEW("find", "posts", "filter", "{", "_id", BCON_INT32(0),
		                           "}", "$db", "shop"));
		rep(&c, 1, rid, T0 + i * SEC + 900, 1, 500, "tags", 10 + i * 10);
	}
	cap_close(&c);
	char *js = render(&c.m, report_write_json);
	/* first half (t <= 4.5 s) largest 60, second half 100: growth 40 */
	assert_non_null(strstr(js, "\"arrays\":[{\"path\":\"tags\",\"operators\":\"$addToSet\","
	                           "\"writes\":10,\"samples\":10,\"largest\":100,\"p95\":100,"
	                           "\"firstHalfLargest\":50,\"secondHalfLargest\":100,"
	                           "\"growth\":50,\"seenOnlySmall\":false}]"));
	char *md = render(&c.m, report_write_md);
	assert_non_null(strstr(md, "| `shop.posts` | `tags` | $addToSet | 10 | 10 | 100 | 100 | "
	                           "+50 | grows |"));
	free(md);
	free(js);
	cap_free(&c);
}

/* N+1: 20 times, a read of 5 orders then 5 reads of customers by _id.
 * Customers never read alone nor written: embed. */
static void n_plus_one(cap *c, int times, int64_t start)
{
	for (int i = 0; i < times; i++) {
		int64_t t = start + i * (SEC / 2);
		call(c, 1, t, find_orders(), 5, 400);
		for (int k = 0; k < 5; k++)
			call(c, 1, t + 2000 + k * 2000, cust_by_id(), 1, 300);
	}
}

/* An int32's value hash, as the live proxy makes it (value_filter.h; a
 * test's salt is 0, as is the report's, which never hashes). */
static uint64_t int_hash(int32_t v)
{
	uint8_t b[4];
	memcpy(b, &v, 4);
	return value_hash(0x10, b, 4);
}

/* Whose values: orders whose first documents held customers 100 to 104
 * (every value of a 5-document batch), then 5 reads of customers by _id.
 * By those ids: the pair. By others (a read close in time by chance):
 * none, as the client-side-join rule decides (rule_join.c). */
static void test_values_decide_the_pair(void **state)
{
	(void)state;
	for (int member = 0; member < 2; member++) {
		cap c;
		cap_open(&c);
		header(&c, "one");
		for (int i = 0; i < 4; i++) {
			int64_t t = T0 + i * SEC;
			int32_t rid = req(&c, 1, t, find_orders());
			capture_origin o = {t + 1000, 1, "", ""};
			capture_reply_facts f = {
			    .read = true, .ok = true, .n = 5, .has_vals = true};
			bson_t rec;
			for (int32_t k = 0; k < 5; k++)
				value_filter_add(&f.vals, int_hash(100 + k));
			f.vals.all = true;
			bson_init(&f.arrays);
			capture_build_reply(&rec, &o, rid, 500, &f);
			aggregator_record(c.a, 2, &rec);
			bson_destroy(&rec);
			bson_destroy(&f.arrays);
			for (int k = 0; k < 5; k++) {
				int32_t id = member ? 100 + k : 200 + 10 * i + k;
				uint64_t h = int_hash(id);
				int32_t r =
				    req_vh(&c, 1, t + 2000 + k * 2000,
				           BCON_NEW("find", "customers", "filter", "{", "_id",
				                    BCON_INT32(id), "}", "$db", "shop"),
				           &h, 1);
				rep(&c, 1, r, t + 3000 + k * 2000, 1, 300, NULL, 0);
			}
		}
		cap_close(&c);
		const model_rel *x = pair(&c.m, "shop.orders", "shop.customers");
		if (member) {
			assert_non_null(x);
			assert_int_equal(x->occurrences, 4);
		} else {
			assert_null(x);
		}
		cap_free(&c);
	}
}

static void test_n_plus_one_embed(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	n_plus_one(&c, 20, T0);
	cap_close(&c);
	assert_int_equal(c.m.nrels, 1);
	const model_rel *x = pair(&c.m, "shop.orders", "shop.customers");
	assert_non_null(x);
	assert_int_equal(x->via, MODEL_REL_CLIENT_EACH);
	assert_string_equal(x->key, "_id");
	assert_int_equal(x->occurrences, 20);
	assert_int_equal(x->parent_reads, 20);
	assert_int_equal(x->child_reads, 100);
	assert_int_equal(x->fanout_max, 5);
	assert_true(x->fanout_avg == 5.0);
	assert_true(x->share == 1.0);
	assert_true(x->child_solo_s == 0 && x->child_writes_s == 0);
	assert_int_equal(x->advice, MODEL_ADVICE_EMBED);
	/* 20 pairs over 9.51 s of covered time: 2.10/s */
	char *md = render(&c.m, report_write_md);
	assert_non_null(strstr(md, "| `shop.orders` | `shop.customers` | client: one read per "
	                           "document (N+1) | `_id` | 2.10 | 100% | 5.0 avg, 5 max | 0.00 | "
	                           "0.00 | whole | **embed** | read together on 100%"));
	free(md);
	cap_free(&c);
}

/* The same N+1, with customers also read on their own (a profile page,
 * another connection) as often as the pair: reference. */
static void test_n_plus_one_child_read_alone(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	n_plus_one(&c, 20, T0);
	for (int i = 0; i < 30; i++)
		call(&c, 7, T0 + i * (SEC / 3), cust_by_id(), 1, 300);
	cap_close(&c);
	const model_rel *x = pair(&c.m, "shop.orders", "shop.customers");
	assert_non_null(x);
	assert_int_equal(x->occurrences, 20);
	assert_int_equal(x->advice, MODEL_ADVICE_REFERENCE);
	assert_non_null(strstr(x->why, "read on its own"));
	assert_true(x->child_solo_s > 0);
	char *js = render(&c.m, report_write_json);
	assert_non_null(strstr(js, "\"via\":\"client-each\",\"key\":\"_id\",\"occurrences\":20,"));
	assert_non_null(strstr(js, "\"advice\":\"reference\""));
	free(js);
	cap_free(&c);
}

/* populate: a read of 10 orders then one $in of the 6 distinct customers,
 * two fields projected; customers written now and then (0.05 per joint
 * read): extended reference. */
static void test_populate_in_extended_reference(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	for (int i = 0; i < 40; i++) {
		int64_t t = T0 + i * (SEC / 4);
		call(&c, 1, t, find_orders(), 10, 400);
		call(&c, 1, t + 3000, cust_in(6, true), 6, 200);
		if (i % 20 == 0)
			call(&c, 2, t + 9000, update_customer(), 0, 0);
	}
	cap_close(&c);
	assert_int_equal(c.m.nrels, 1);
	const model_rel *x = pair(&c.m, "shop.orders", "shop.customers");
	assert_non_null(x);
	assert_int_equal(x->via, MODEL_REL_CLIENT_IN);
	assert_int_equal(x->occurrences, 40);
	assert_int_equal(x->fanout_max, 6);
	assert_int_equal(x->child_proj_fields, 2);
	assert_int_equal(x->advice, MODEL_ADVICE_EXTENDED_REFERENCE);
	char *html = render(&c.m, report_write_html);
	assert_non_null(strstr(html, "<b>extended reference</b>"));
	assert_non_null(strstr(html, "<section id=\"workload\">"));
	free(html);
	cap_free(&c);
}

/* Look-alikes that are no join: one read by _id after a list (a session
 * lookup), a batch of reads by _id with no read before it, reads spaced
 * past the window, reads of the same collection, reads by a field no
 * index starts with, a range on _id, one value read again and again, and
 * reads after a write that came after the list. */
static void test_look_alikes_are_no_join(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	indexes(&c, "shop.customers", "email", 100);
	for (int i = 0; i < 10; i++) {
		int64_t t = T0 + i * SEC;
		/* conn 1: a list, then one lookup */
		call(&c, 1, t, find_orders(), 8, 400);
		call(&c, 1, t + 2000, cust_by_id(), 1, 300);
		/* conn 2: a batch by _id with no read before */
		for (int k = 0; k < 8; k++)
			call(&c, 2, t + k * 1000, cust_by_id(), 1, 300);
		/* conn 3: a list, then reads 300 ms apart */
		call(&c, 3, t, find_orders(), 3, 400);
		for (int k = 1; k <= 3; k++)
			call(&c, 3, t + k * 300000, cust_by_id(), 1, 300);
		/* conn 4: a list, then reads of the same collection by _id */
		call(&c, 4, t, find_orders(), 4, 400);
		for (int k = 0; k < 4; k++)
			call(&c, 4, t + 2000 + k * 2000,
			     BCON_NEW("find", "orders", "filter", "{", "_id", BCON_INT32(0), "}",
			              "$db", "shop"),
			     1, 400);
		/* conn 5: a list, then reads by an unindexed field */
		call(&c, 5, t, find_orders(), 4, 400);
		for (int k = 0; k < 4; k++)
			call(&c, 5, t + 2000 + k * 2000,
			     BCON_NEW("find", "customers", "filter", "{", "city", "?", "}", "$db",
			              "shop"),
			     1, 300);
		/* conn 6: a list, then ranges on _id */
		call(&c, 6, t, find_orders(), 4, 400);
		for (int k = 0; k < 4; k++)
			call(&c, 6, t + 2000 + k * 2000,
			     BCON_NEW("find", "customers", "filter", "{", "_id", "{", "$gte",
			              BCON_INT32(0), "$lt", BCON_INT32(0), "}", "}", "$db", "shop"),
			     1, 300);
		/* conn 7: a list, then one value read again and again (a
		 * discriminator, a counter's _id) */
		call(&c, 7, t, find_orders(), 4, 400);
		for (int k = 0; k < 4; k++)
			call(&c, 7, t + 2000 + k * 2000,
			     BCON_NEW("find", "customers", "filter", "{", "_id", BCON_INT32(-1),
			              "}", "$db", "shop"),
			     1, 300);
		/* conn 8: a list, a write (another operation's work), then reads
		 * by _id */
		call(&c, 8, t, find_orders(), 4, 400);
		call(&c, 8, t + 1000,
		     BCON_NEW("insert", "log", "documents", "[", "{", "a", BCON_INT32(1), "}", "]",
		              "$db", "shop"),
		     1, 100);
		for (int k = 0; k < 4; k++)
			call(&c, 8, t + 2000 + k * 2000, cust_by_id(), 1, 300);
	}
	cap_close(&c);
	assert_int_equal(c.m.nrels, 0);
	char *md = render(&c.m, report_write_md);
	assert_non_null(strstr(md, "## Relationships\n\nNo collections were read together.\n"));
	free(md);
	cap_free(&c);
}

/* In a redacted capture every literal is a placeholder of its type, so
 * without the values' hashes (a capture before version 5) reads of one
 * value cannot be told from reads of many: each value read counts, and
 * the loop is a pair. With them (vh), the one value read again and again
 * is one, as the live rule counts it: no pair. */
static void test_placeholders_count_each_read(void **state)
{
	(void)state;
	for (int hashed = 0; hashed < 2; hashed++) {
		cap c;
		uint64_t h = int_hash(42);
		cap_open(&c);
		header_of(&c, "one", true);
		for (int i = 0; i < 4; i++) {
			int64_t t = T0 + i * SEC;
			call(&c, 1, t, find_orders(), 4, 400);
			for (int k = 0; k < 4; k++) {
				int32_t r =
				    req_vh(&c, 1, t + 2000 + k * 2000,
				           BCON_NEW("find", "customers", "filter", "{", "_id",
				                    BCON_INT32(0), "}", "$db", "shop"),
				           hashed ? &h : NULL, 1);
				rep(&c, 1, r, t + 3000 + k * 2000, 1, 300, NULL, 0);
			}
		}
		cap_close(&c);
		const model_rel *x = pair(&c.m, "shop.orders", "shop.customers");
		if (hashed) {
			assert_null(x);
		} else {
			assert_non_null(x);
			assert_int_equal(x->occurrences, 4);
		}
		cap_free(&c);
	}
}

/* A read by the first key of an index is a key read: N+1 by orderId. */
static void test_n_plus_one_by_indexed_key(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	indexes(&c, "shop.items", "orderId", 100);
	for (int i = 0; i < 5; i++) {
		int64_t t = T0 + i * SEC;
		call(&c, 1, t, find_orders(), 4, 400);
		for (int k = 0; k < 4; k++)
			call(&c, 1, t + 2000 + k * 2000,
			     BCON_NEW("find", "items", "filter", "{", "orderId", BCON_INT32(k), "}",
			              "$db", "shop"),
			     3, 100);
	}
	cap_close(&c);
	const model_rel *x = pair(&c.m, "shop.orders", "shop.items");
	assert_non_null(x);
	assert_string_equal(x->key, "orderId");
	assert_int_equal(x->occurrences, 5);
	cap_free(&c);
}

/* ODMantic's find_one of a soft-deleted model: {$match: {$and: [{_id: v},
 * {deleted: false}]}}, {$limit: 1}; or, grouped, a $group after the $match
 * (no key read). Each call another _id. */
static bson_t *cust_by_aggregate(bool grouped)
{
	static int32_t next;
	int32_t id = next++;
	if (grouped)
		return BCON_NEW("aggregate", "customers", "pipeline", "[", "{", "$match", "{",
		                "_id", BCON_INT32(id), "}", "}", "{", "$group", "{", "_id", "$x",
		                "}", "}", "]", "cursor", "{", "}", "$db", "shop");
	return BCON_NEW("aggregate", "customers", "pipeline", "[", "{", "$match", "{", "$and", "[",
	                "{", "_id", BCON_INT32(id), "}", "{", "deleted", BCON_BOOL(false), "}", "]",
	                "}", "}", "{", "$limit", BCON_INT32(1), "}", "]", "cursor", "{", "}", "$db",
	                "shop");
}

/* An aggregate that reads as a find is a child read, as the live rule
 * takes it. Before (stop 52's held-out probe of ODMantic), the rule
 * reported every such N+1 and the relationships table showed no pair. */
static void test_n_plus_one_by_aggregate(void **state)
{
	(void)state;
	for (int grouped = 0; grouped < 2; grouped++) {
		cap c;
		cap_open(&c);
		header(&c, "one");
		for (int i = 0; i < 5; i++) {
			int64_t t = T0 + i * SEC;
			call(&c, 1, t, find_orders(), 4, 400);
			for (int k = 0; k < 4; k++)
				call(&c, 1, t + 2000 + k * 2000, cust_by_aggregate(grouped), 1,
				     300);
		}
		cap_close(&c);
		const model_rel *x = pair(&c.m, "shop.orders", "shop.customers");
		if (grouped) {
			assert_null(x);
		} else {
			assert_non_null(x);
			assert_string_equal(x->key, "_id");
			assert_int_equal(x->occurrences, 5);
		}
		cap_free(&c);
	}
}

/* A cursor iterated: 3 orders, their customers, a getMore of 3 more,
 * theirs: 6 children of one parent read of 6 documents. */
static void test_n_plus_one_over_get_more(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	for (int i = 0; i < 4; i++) {
		int64_t t = T0 + i * SEC;
		call(&c, 1, t, find_orders(), 3, 400);
		for (int k = 0; k < 3; k++)
			call(&c, 1, t + 2000 + k * 2000, cust_by_id(), 1, 300);
		call(&c, 1, t + 9000,
		     BCON_NEW("getMore", BCON_INT64(77), "collection", "orders", "$db", "shop"), 3,
		     400);
		for (int k = 0; k < 3; k++)
			call(&c, 1, t + 12000 + k * 2000, cust_by_id(), 1, 300);
		/* another collection's getMore is not the parent's */
		call(&c, 1, t + 30000,
		     BCON_NEW("getMore", BCON_INT64(78), "collection", "other", "$db", "shop"), 50,
		     400);
	}
	cap_close(&c);
	const model_rel *x = pair(&c.m, "shop.orders", "shop.customers");
	assert_non_null(x);
	assert_int_equal(x->occurrences, 4);
	assert_int_equal(x->fanout_max, 6);
	assert_int_equal(x->child_reads, 24);
	cap_free(&c);
}

/* A $lookup: every aggregate reads both; its fan-out is its output
 * array's length in sampled replies (3, 5, 7: avg 5, max 7). */
static void test_lookup_pair(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	for (int i = 0; i < 12; i++) {
		int32_t rid =
		    req(&c, 1, T0 + i * SEC,
		        BCON_NEW("aggregate", "orders", "pipeline", "[", "{", "$match", "{", "_id",
		                 BCON_INT32(0), "}", "}", "{", "$lookup", "{", "from", "items",
		                 "localField", "_id", "foreignField", "orderId", "as", "lines", "}",
		                 "}", "]", "cursor", "{", "}", "$db", "shop"));
		rep(&c, 1, rid, T0 + i * SEC + 2000, 1, 900, "lines", 3 + (i % 3) * 2);
	}
	cap_close(&c);
	const model_rel *x = pair(&c.m, "shop.orders", "shop.items");
	assert_non_null(x);
	assert_int_equal(x->via, MODEL_REL_LOOKUP);
	assert_string_equal(x->key, "orderId");
	assert_int_equal(x->occurrences, 12);
	assert_true(x->share == 1.0);
	assert_int_equal(x->fanout_max, 7);
	assert_true(x->fanout_avg == 5.0);
	assert_int_equal(x->advice, MODEL_ADVICE_EMBED);
	char *js = render(&c.m, report_write_json);
	assert_non_null(strstr(js, "\"via\":\"lookup\",\"key\":\"orderId\",\"occurrences\":12,"));
	assert_non_null(strstr(js, "\"fanoutAvg\":5.000,\"fanoutMax\":7,"));
	free(js);
	cap_free(&c);
}

/* A fleet: two instances over the same 10 s, each with its own N+1 on
 * connection 1 (the same id: chains are per instance) and 10 customer
 * writes. Merged: pair counts and rates add up; a third instance an hour
 * later adds its own 10 s, not the hour between. */
static void test_fleet_merged(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "a");
	n_plus_one(&c, 20, T0);
	for (int i = 0; i < 10; i++)
		call(&c, 2, T0 + i * SEC + 100, update_customer(), 0, 0);
	call(&c, 3, T0 + 10 * SEC - 1000, find_orders(), 1, 400);
	header(&c, "b");
	n_plus_one(&c, 20, T0 + 250000); /* interleaved in time with a's */
	for (int i = 0; i < 10; i++)
		call(&c, 2, T0 + i * SEC + 200, update_customer(), 0, 0);
	call(&c, 3, T0 + 10 * SEC - 1000, find_orders(), 1, 400);
	cap_close(&c);
	assert_true(c.m.covered_s > 9.999 && c.m.covered_s < 10.001);
	assert_int_equal(c.m.nspans, 2);
	const model_rel *x = pair(&c.m, "shop.orders", "shop.customers");
	assert_non_null(x);
	assert_int_equal(x->occurrences, 40);
	assert_true(x->rate > 3.999 && x->rate < 4.001);
	assert_true(x->child_writes_s > 1.999 && x->child_writes_s < 2.001);
	/* 2 writes/s against 4 joint reads/s: changes often */
	assert_int_equal(x->advice, MODEL_ADVICE_REFERENCE);
	assert_non_null(strstr(x->why, "changes often"));
	const model_ns *cu = row(&c.m, "shop.customers");
	assert_int_equal(cu->writes, 20);
	cap_free(&c);

	cap_open(&c);
	header(&c, "a");
	call(&c, 1, T0, find_orders(), 1, 400);
	call(&c, 1, T0 + 10 * SEC - 1000, find_orders(), 1, 400);
	header(&c, "b");
	call(&c, 1, T0 + 3600LL * SEC, find_orders(), 1, 400);
	call(&c, 1, T0 + 3610LL * SEC - 1000, find_orders(), 1, 400);
	cap_close(&c);
	assert_true(c.m.covered_s > 19.999 && c.m.covered_s < 20.001);
	char *js = render(&c.m, report_write_json);
	assert_non_null(strstr(js, "\"coveredSeconds\":20.000,\"instances\":2,"));
	assert_non_null(strstr(js, "\"reads\":4,\"writes\":0,\"readsPerSecond\":0.200,"));
	/* the query shapes' rates too: 4 over 20 s, not over 3,610 s */
	assert_non_null(strstr(js, "\"count\":4,\"ratePerSec\":0.200,"));
	free(js);
	cap_free(&c);
}

/* A long capture: the tracker forgets idle connections every 65,536
 * requests (relationships.c, REL_SWEEP_EVERY); a chain open at that
 * moment is kept and still judged. 65,533 single reads on connections of
 * their own, then an N+1 whose second child read is the 65,536th. */
static void test_chain_open_across_a_sweep(void **state)
{
	(void)state;
	cap c;
	cap_open(&c);
	header(&c, "one");
	for (int i = 0; i < 65533; i++)
		call(&c, 1000 + i, T0 + i, find_orders(), 1, 0);
	int64_t t = T0 + SEC;
	call(&c, 1, t, find_orders(), 4, 0);
	for (int k = 0; k < 4; k++)
		call(&c, 1, t + 2000 + k * 2000, cust_by_id(), 1, 0);
	cap_close(&c);
	const model_rel *x = pair(&c.m, "shop.orders", "shop.customers");
	assert_non_null(x);
	assert_int_equal(x->occurrences, 1);
	assert_int_equal(x->child_reads, 4);
	cap_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rates_per_collection),
	    cmocka_unit_test(test_fields_read_against_document_size),
	    cmocka_unit_test(test_add_to_set_growth),
	    cmocka_unit_test(test_values_decide_the_pair),
	    cmocka_unit_test(test_n_plus_one_embed),
	    cmocka_unit_test(test_n_plus_one_child_read_alone),
	    cmocka_unit_test(test_populate_in_extended_reference),
	    cmocka_unit_test(test_look_alikes_are_no_join),
	    cmocka_unit_test(test_placeholders_count_each_read),
	    cmocka_unit_test(test_n_plus_one_by_indexed_key),
	    cmocka_unit_test(test_n_plus_one_by_aggregate),
	    cmocka_unit_test(test_n_plus_one_over_get_more),
	    cmocka_unit_test(test_lookup_pair),
	    cmocka_unit_test(test_fleet_merged),
	    cmocka_unit_test(test_chain_open_across_a_sweep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
