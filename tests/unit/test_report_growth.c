/* The aggregator's rows across growth (report/aggregate.c): a request's
 * collection row is held while its schema is noted and it is judged, and
 * either may add rows (a $lookup's collection not seen before, or a
 * finding on a collection with no row yet), which moves them. Sixteen collections fill the first
 * allocation, so the seventeenth row moves every row; the reply must still
 * land on the request's collection (under ASan, a stale row is a
 * use-after-free). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "protocol/capture.h"
#include "report/aggregate.h"

#define T0 1700000000000000

static void send_request(aggregator *a, int32_t rid, bson_t *body)
{
	bson_t rec = BSON_INITIALIZER;
	BSON_APPEND_UTF8(&rec, "k", "req");
	BSON_APPEND_INT64(&rec, "t", T0 + rid * 10);
	BSON_APPEND_INT64(&rec, "conn", 1);
	BSON_APPEND_UTF8(&rec, "client", "127.0.0.1:5000");
	BSON_APPEND_UTF8(&rec, "app", "web");
	BSON_APPEND_INT32(&rec, "rid", rid);
	BSON_APPEND_UTF8(&rec, "db", "shop");
	BSON_APPEND_DOCUMENT(&rec, "body", body);
	aggregator_record(a, 2, &rec);
	bson_destroy(&rec);
	bson_destroy(body);
}

static void reply(aggregator *a, int32_t rid, int64_t docs)
{
	bson_t rep;
	capture_origin o = {T0 + rid * 10 + 5, 1, "", ""};
	capture_reply_facts fa = {.read = true,
	                          .ok = true,
	                          .n = docs,
	                          .sampled = true,
	                          .docs_n = docs,
	                          .docs_max = 100,
	                          .docs_total = docs * 100};
	bson_init(&fa.arrays);
	capture_build_reply(&rep, &o, rid, 200, &fa);
	aggregator_record(a, 2, &rep);
	bson_destroy(&rep);
	bson_destroy(&fa.arrays);
}

static const model_ns *row(const model *m, const char *ns)
{
	for (size_t i = 0; i < m->nnss; i++)
		if (!strcmp(m->nss[i].ns, ns))
			return &m->nss[i];
	return NULL;
}

static void test_a_row_added_while_judging_keeps_the_reply_on_its_collection(void **state)
{
	(void)state;
	model m;
	memset(&m, 0, sizeof m);
	aggregator *a = aggregator_new(&m);
	bson_t h;
	capture_build_header(&h, "test", "growth", true, T0, NULL);
	aggregator_record(a, 2, &h);
	bson_destroy(&h);
	int32_t rid = 1;
	for (int i = 0; i < 16; i++) {
		char coll[16];
		snprintf(coll, sizeof coll, "c%d", i);
		send_request(a, rid++,
		             BCON_NEW("find", coll, "filter", "{", "_id", BCON_INT32(1), "}", "$db",
		                      "shop"));
	}
	assert_int_equal(m.nnss, 16);
	/* an aggregate on c0 that joins a collection not seen before: its row
	 * is made while c0's is held */
	send_request(a, rid,
	             BCON_NEW("aggregate", "c0", "pipeline", "[", "{", "$lookup", "{", "from",
	                      "fresh", "localField", "a", "foreignField", "b", "as", "j", "}", "}",
	                      "{", "$unionWith", "{", "coll", "other", "pipeline", "[", "{",
	                      "$match", "{", "name", BCON_REGEX("^a", "i"), "}", "}", "]", "}", "}",
	                      "]", "cursor", "{", "}", "$db", "shop"));
	reply(a, rid, 7);
	aggregator_finish(a);
	const model_ns *fresh = row(&m, "shop.fresh");
	assert_non_null(fresh);
	assert_true(m.nnss > 16);
	assert_int_equal(fresh->nused, 1);
	assert_string_equal(fresh->used[0].path, "b");
	const model_ns *c0 = row(&m, "shop.c0");
	assert_non_null(c0);
	assert_int_equal(c0->docs, 7);
	assert_int_equal(c0->ops, 2);
	assert_int_equal(c0->lookups, 1);
	for (size_t i = 0; i < m.nnss; i++)
		if (strcmp(m.nss[i].ns, "shop.c0"))
			assert_int_equal(m.nss[i].docs, 0);
	aggregator_free(a);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_row_added_while_judging_keeps_the_reply_on_its_collection),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
