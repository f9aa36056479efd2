/* large-document: inserted and replacement documents over maxBytes or with
 * an array over maxArrayLength, and update operators and pipelines that
 * write such a value or append that many elements in one write (hits), and
 * the writes that stay within the limits, are bounded ($slice), are GridFS
 * chunks or are not writes at all (near misses), through the whole engine
 * in log and block mode.
 *
 * Big values are written as placeholders expanded before parsing:
 *   @A<n>  an array of n zeros          @N<n>  an array of n nulls
 *   @D<n>  an array of n {k: 1}         @S<n>  a string of n 'x'
 *   @F<n>  n fields f0..f(n-1) of 100,000-byte strings (inside an object) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "analyzers/rules/rule_doc.h"
#include "fixtures/analyzer_fixture.h"

typedef fx_case dcase;

#define NOSEQ FX_NOSEQ
#define HIT(n, j, cmd, d)                                                                          \
	{                                                                                          \
		n, j, NOSEQ, true, "test.c", cmd, d                                                \
	}
#define MISS(n, j)                                                                                 \
	{                                                                                          \
		n, j, NOSEQ, false, NULL, NULL, NULL                                               \
	}
#define INS(d)         "{'insert':'c','documents':[" d "]}"
#define REPL(d)        "{'update':'c','updates':[{'q':{'_id':1},'u':" d ",'upsert':true}]}"
#define UPD(u)         "{'update':'c','updates':[{'q':{'_id':1},'u':" u "}]}"
#define ARRAY(path, n) "holds array \"" path "\" of " #n " elements, over maxArrayLength 1000"
#define OVER           "bytes for test.c is over maxBytes 2097152"
#define FIELD(path)    "; field \"" path "\" holds "

static const dcase cases[] = {
    /* ---- hits ---- */
    HIT("top-level array", INS("{'_id':1,'tags':@A1001}"), "insert", ARRAY("tags", 1001)),
    HIT("array in a sub-document", INS("{'a':{'b':@A1500}}"), "insert", ARRAY("a.b", 1500)),
    HIT("array in an array element", INS("{'orders':[{'n':1},{'items':@A1001}]}"), "insert",
        ARRAY("orders.1.items", 1001)),
    HIT("array of arrays", INS("{'m':[@A1001]}"), "insert", ARRAY("m.0", 1001)),
    HIT("1,001 nulls (the least bytes)", INS("{'z':@N1001}"), "insert", ARRAY("z", 1001)),
    HIT("array of documents", INS("{'events':@D2000}"), "insert", ARRAY("events", 2000)),
    HIT("deep array", INS("{'a':{'b':{'c':{'d':{'e':@A1001}}}}}"), "insert",
        ARRAY("a.b.c.d.e", 1001)),
    HIT("large string", INS("{'_id':1,'blob':@S3000000}"), "insert", OVER FIELD("blob")),
    HIT("large nested string", INS("{'meta':{'k':1,'payload':@S2500000}}"), "insert",
        FIELD("meta.payload")),
    HIT("many fields, none the culprit", INS("{'f':{@F30}}"), "insert", OVER FIELD("f")),
    HIT("many top-level fields", INS("{@F30}"), "insert", OVER),
    HIT("size before array", INS("{'a':@A5000,'s':@S2200000}"), "insert", OVER FIELD("s")),
    HIT("second document of a batch", INS("{'a':1},{'b':@A1001}"), "insert", ARRAY("b", 1001)),
    {"kind-1 sequence",
     "{'insert':'c','ordered':true}",
     {{"documents", {"{'_id':1}", "{'_id':2,'l':@A1001}"}}, {NULL, {NULL}}},
     true,
     "test.c",
     "insert",
     ARRAY("l", 1001)},
    {"bulkWrite insert op",
     "{'bulkWrite':1}",
     {{"ops", {"{'insert':0,'document':{'l':@A1001}}"}}, {"nsInfo", {"{'ns':'test.c'}"}}},
     true,
     "test.c",
     "bulkWrite",
     ARRAY("l", 1001)},
    HIT("replacement with a long array", REPL("{'name':'x','l':@A1001}"), "update",
        "replacement document for test.c holds array \"l\""),
    HIT("replacement too large", REPL("{'s':@S2100000}"), "update", "replacement document of"),
    HIT("findAndModify replacement",
        "{'findAndModify':'c','query':{'_id':1},'update':{'l':@A1001},'upsert':true}",
        "findAndModify", ARRAY("l", 1001)),
    HIT("bulkWrite replacement",
        "{'bulkWrite':1,'ops':[{'update':0,'filter':{'_id':1},'updateMods':{'l':@A1001}}],"
        "'nsInfo':[{'ns':'test.c'}]}",
        "bulkWrite", ARRAY("l", 1001)),
    HIT("array under a key named like an operator", INS("{'x':{'$each':@A1001}}"), "insert",
        ARRAY("x.$each", 1001)),
    HIT("one statement of several",
        "{'update':'c','updates':[{'q':{},'u':{'$set':{'a':1}}},{'q':{},"
        "'u':{'a':@A1001}}]}",
        "update", ARRAY("a", 1001)),

    /* ---- hits: writes that grow a document in place ---- */
    HIT("$set of a long array", UPD("{'$set':{'l':@A1500}}"), "update",
        "$set writes array \"l\" of 1500 elements for test.c, over maxArrayLength 1000"),
    HIT("$setOnInsert of a long array", UPD("{'$setOnInsert':{'l':@A1500}}"), "update",
        "$setOnInsert writes array \"l\" of 1500"),
    HIT("$set of a large string", UPD("{'$set':{'profile.bio':@S2200000}}"), "update",
        "$set writes a value of 2200005 bytes for test.c, over maxBytes 2097152; field "
        "\"profile.bio\" holds"),
    HIT("$set of a document with a large part",
        UPD("{'$set':{'meta':{'k':1,'payload':@S2500000}}}"), "update",
        "field \"meta.payload\" holds"),
    HIT("$set of a value holding a long array", UPD("{'$set':{'a':{'b':[{'c':@A1001}]}}}"),
        "update", "$set writes array \"a.b.0.c\" of 1001"),
    HIT("$push $each without $slice", UPD("{'$push':{'l':{'$each':@A1500}}}"), "update",
        "$push appends 1500 elements to \"l\" in one write ($each with no $slice) for test.c, "
        "over maxArrayLength 1000"),
    HIT("$push $each with a $slice over the limit",
        UPD("{'$push':{'l':{'$each':@A1500,'$slice':-1200}}}"), "update",
        "$push appends 1500 elements to \"l\" in one write and its $slice: -1200 keeps more "
        "than maxArrayLength 1000, for test.c"),
    HIT("$addToSet $each", UPD("{'$addToSet':{'tags':{'$each':@A1200}}}"), "update",
        "$addToSet adds up to 1200 elements to \"tags\" in one write ($each; $addToSet has "
        "no $slice)"),
    HIT("$push of one large value", UPD("{'$push':{'files':@S2200000}}"), "update",
        "$push appends a value of 2200005 bytes to \"files\" for test.c"),
    HIT("$push $each over maxBytes", UPD("{'$push':{'l':{'$each':[@S1200000,@S1200000]}}}"),
        "update", "bytes to \"l\" in one write ($each)"),
    HIT("$push after a small operator",
        UPD("{'$inc':{'n':1},'$set':{'t':1},'$push':{'l':{'$each':@A1001}}}"), "update",
        "$push appends 1001 elements"),
    {"update statement in a kind-1 sequence",
     "{'update':'c','ordered':true}",
     {{"updates",
       {"{'q':{'_id':1},'u':{'$set':{'a':1}}}",
        "{'q':{'_id':2},'u':{'$push':{'l':{'$each':@A1001}}},'upsert':true}"}},
      {NULL, {NULL}}},
     true,
     "test.c",
     "update",
     "$push appends 1001 elements to \"l\""},
    HIT("findAndModify $push $each",
        "{'findAndModify':'c','query':{'_id':1},'update':{'$push':{'l':{'$each':@A1001}}}}",
        "findAndModify", "$push appends 1001 elements"),
    HIT("findAndModify update pipeline",
        "{'findAndModify':'c','query':{'_id':1},'update':[{'$set':{'l':@A1001}}]}", "findAndModify",
        "update pipeline stage $set writes array \"l\" of 1001"),
    {"bulkWrite updateMods $addToSet",
     "{'bulkWrite':1}",
     {{"ops",
       {"{'update':0,'filter':{'_id':1},'updateMods':{'$addToSet':{'t':{'$each':@A1001}}}}"}},
      {"nsInfo", {"{'ns':'test.c'}"}}},
     true,
     "test.c",
     "bulkWrite",
     "$addToSet adds up to 1001 elements to \"t\""},
    HIT("pipeline $concatArrays literal", UPD("[{'$set':{'l':{'$concatArrays':['$l',@A1500]}}}]"),
        "update",
        "update pipeline stage $set appends at least 1500 literal elements to \"l\" with "
        "$concatArrays for test.c"),
    HIT("pipeline $concatArrays literals summed",
        UPD("[{'$set':{'l':{'$concatArrays':['$l',@A600,{'$literal':@A600}]}}}]"), "update",
        "appends at least 1200 literal elements"),
    HIT("pipeline $literal long array", UPD("[{'$set':{'l':{'$literal':@A1500}}}]"), "update",
        "update pipeline stage $set writes array \"l\" of 1500"),
    HIT("pipeline $addFields object literal", UPD("[{'$addFields':{'stats':{'hist':@A1001}}}]"),
        "update", "update pipeline stage $addFields writes array \"stats.hist\" of 1001"),
    HIT("pipeline $replaceWith too large", UPD("[{'$replaceWith':{'a':1,'blob':@S2200000}}]"),
        "update", "update pipeline stage $replaceWith writes a document of 22000"),
    HIT("pipeline $replaceRoot $mergeObjects",
        UPD("[{'$replaceRoot':{'newRoot':{'%mergeObjects':['$$ROOT',{'l':@A1001}]}}}]"), "update",
        "update pipeline stage $replaceRoot writes array \"l\" of 1001"),
    HIT("pipeline $set of a large string", UPD("[{'$set':{'s':@S2200000}}]"), "update",
        "update pipeline stage $set writes a value of 2200005 bytes"),
    HIT("pipeline second stage", UPD("[{'$unset':'x'},{'$set':{'l':[@A1001]}}]"), "update",
        "writes array \"l.0\" of 1001"),

    /* ---- near misses ---- */
    MISS("array of exactly maxArrayLength", INS("{'tags':@A1000}")),
    MISS("string under maxBytes", INS("{'blob':@S2000000}")),
    MISS("many arrays, each within the limit", INS("{'a':@A1000,'b':@A1000,'c':@A1000}")),
    MISS("nested arrays within the limit", INS("{'m':[@A999,@A999,@A999]}")),
    MISS("subset pattern: the newest ten reviews", INS("{'title':'t','reviews':@D10}")),
    MISS("bucket pattern: a bucket of 200 readings",
         INS("{'sensorId':'s','count':200,'readings':@D200}")),
    MISS("outlier pattern: 1,000 and an overflow flag",
         INS("{'_id':1,'customers':@A1000,'has_extras':true}")),
    MISS("a long string is not an array", INS("{'s':@S50000}")),
    MISS("1,001 small documents in one insert", "{'insert':'c','documents':@D1001}"),
    MISS("a long $in in a filter", "{'find':'c','filter':{'a':{'$in':@A5000}}}"),
    MISS("a long $in in a delete",
         "{'delete':'c','deletes':[{'q':{'a':{'$in':@A5000}},'limit':0}]}"),
    MISS("a long $in in an update filter",
         "{'update':'c','updates':[{'q':{'a':{'$in':@A5000}},'u':{'$set':{'a':1}}}]}"),
    MISS("small replacement", REPL("{'name':'x','l':[1,2,3]}")),
    MISS("small document", INS("{'_id':1,'name':'x'}")),
    MISS("a long string in a short array", INS("{'l':[@S100000]}")),
    MISS("bulkWrite delete", "{'bulkWrite':1,'ops':[{'delete':0,'filter':{'a':{'$in':@A2000}}}],"
                             "'nsInfo':[{'ns':'test.c'}]}"),
    MISS("aggregate $documents",
         "{'aggregate':1,'pipeline':[{'$documents':[{'l':@A2000}]}],'cursor':{}}"),
    /* ---- near misses: updates ---- */
    MISS("$push $each capped by $slice (subset pattern)",
         UPD("{'$push':{'l':{'$each':@A1500,'$slice':-5}}}")),
    MISS("$push $each with $slice of exactly maxArrayLength",
         UPD("{'$push':{'l':{'$each':@A1500,'$slice':1000}}}")),
    MISS("$push $each $slice 0", UPD("{'$push':{'l':{'$each':@A1500,'$slice':0}}}")),
    MISS("$push $each of exactly maxArrayLength", UPD("{'$push':{'l':{'$each':@A1000}}}")),
    MISS("$addToSet $each of exactly maxArrayLength", UPD("{'$addToSet':{'l':{'$each':@A1000}}}")),
    MISS("subset pattern: newest ten reviews, sorted",
         UPD("{'$push':{'reviews':{'$each':[{'r':1}],'$sort':{'t':-1},'$slice':-10}}}")),
    MISS("bucket pattern: a guarded push",
         "{'update':'c','updates':[{'q':{'sensor':'s','count':{'$lt':200}},'u':{'$push':{"
         "'readings':{'t':1,'v':2}},'$inc':{'count':1}},'upsert':true}]}"),
    MISS("outlier pattern: overflow flagged on the parent",
         UPD("{'$push':{'customers':{'$each':@A1000}},'$set':{'has_extras':true}}")),
    MISS("$set of small values", UPD("{'$set':{'a':1,'b':'x','c':[1,2,3]}}")),
    MISS("$set of a string under maxBytes", UPD("{'$set':{'s':@S2000000}}")),
    MISS("$set of many arrays within the limit", UPD("{'$set':{'a':@A1000,'b':@A1000}}")),
    MISS("$push of a small value", UPD("{'$push':{'l':{'k':1}}}")),
    MISS("$pull with a long $in", UPD("{'$pull':{'l':{'$in':@A1500}}}")),
    MISS("$pullAll of a long list", UPD("{'$pullAll':{'l':@A1500}}")),
    MISS("GridFS chunk rewritten", "{'update':'fs.chunks','updates':[{'q':{'files_id':1,'n':0},"
                                   "'u':{'$set':{'data':@S3000000}}}]}"),
    MISS("GridFS chunk inserted, custom bucket and chunk size",
         "{'insert':'photos.chunks','documents':[{'files_id':1,'n':0,'data':@S4000000}]}"),
    MISS("pipeline $concatArrays of exactly maxArrayLength literals",
         UPD("[{'$set':{'l':{'$concatArrays':['$l',@A1000]}}}]")),
    MISS("pipeline $concatArrays capped by $slice",
         UPD("[{'$set':{'l':{'%slice':[{'$concatArrays':['$l',@A1500]},-100]}}}]")),
    MISS("pipeline $in of a long list computes a boolean",
         UPD("[{'$set':{'flag':{'$in':['$x',@A1500]}}}]")),
    MISS("pipeline $unset", UPD("[{'$unset':['a','b']}]")),
    MISS("pipeline $replaceWith a field", UPD("[{'$replaceWith':'$sub'}]")),
    MISS("pipeline $set of small literals", UPD("[{'$set':{'a':[1,2],'b':{'c':'x'}}}]")),
    MISS("aggregate $group $push is an accumulator",
         "{'aggregate':'c','pipeline':[{'$group':{'_id':'$k','all':{'$push':'$v'}}}],"
         "'cursor':{}}"),
    MISS("aggregate $set of a long literal is not a write",
         "{'aggregate':'c','pipeline':[{'$set':{'l':@A1500}}],'cursor':{}}"),
    MISS("bulkWrite updateMods $push capped",
         "{'bulkWrite':1,'ops':[{'update':0,'filter':{'_id':1},'updateMods':{'$push':{'l':{"
         "'$each':@A1500,'$slice':-50}}}}],'nsInfo':[{'ns':'test.c'}]}"),
    MISS("findAndModify $push of one value",
         "{'findAndModify':'c','query':{'_id':1},'update':{'$push':{'l':1}}}"),
    MISS("$setOnInsert of a small document", UPD("{'$setOnInsert':{'created':1,'tags':[]}}")),
    MISS("findAndModify remove",
         "{'findAndModify':'c','query':{'l':{'$in':@A2000}},'remove':true}"),
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	while (*len + n + 1 > *cap) {
		*cap = *cap ? *cap * 2 : 4096;
		*buf = realloc(*buf, *cap);
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
}

static char *expand(const char *in)
{
	char *out = NULL;
	size_t len = 0, cap = 0;
	put(&out, &len, &cap, "", 0);
	for (const char *p = in; *p;) {
		if (*p != '@') {
			put(&out, &len, &cap, p++, 1);
			continue;
		}
		char kind = p[1];
		char *end;
		long n = strtol(p + 2, &end, 10);
		p = end;
		if (kind == 'S') {
			put(&out, &len, &cap, "'", 1);
			for (long i = 0; i < n; i++)
				put(&out, &len, &cap, "x", 1);
			put(&out, &len, &cap, "'", 1);
			continue;
		}
		if (kind == 'F') {
			for (long i = 0; i < n; i++) {
				char key[32];
				snprintf(key, sizeof key, "%s'f%ld':'", i ? "," : "", i);
				put(&out, &len, &cap, key, strlen(key));
				for (int k = 0; k < 100000; k++)
					put(&out, &len, &cap, "y", 1);
				put(&out, &len, &cap, "'", 1);
			}
			continue;
		}
		const char *el = kind == 'A' ? "0" : kind == 'N' ? "null" : "{'k':1}";
		put(&out, &len, &cap, "[", 1);
		for (long i = 0; i < n; i++) {
			if (i)
				put(&out, &len, &cap, ",", 1);
			put(&out, &len, &cap, el, strlen(el));
		}
		put(&out, &len, &cap, "]", 1);
	}
	return out;
}

static void run_case(const dcase *c, rule_action action)
{
	fx_seq seqs[2];
	char *owned[2 * FX_MAX_SEQ_DOCS] = {0};
	size_t nowned = 0, n = 0;
	for (size_t s = 0; s < 2 && c->seqs[s].id; s++, n++) {
		seqs[s].id = c->seqs[s].id;
		for (size_t d = 0; d < FX_MAX_SEQ_DOCS; d++) {
			seqs[s].docs[d] = c->seqs[s].docs[d]
			                      ? (owned[nowned++] = expand(c->seqs[s].docs[d]))
			                      : NULL;
		}
	}
	char *json = expand(c->json);
	fx_expect x = {c->name, c->hit, c->ns, c->command, c->detail, NULL};
	fx_run_rule_case(RULE_LARGE_DOCUMENT, action, json, seqs, n, &x);
	free(json);
	for (size_t i = 0; i < nowned; i++)
		free(owned[i]);
}

FX_TABLE_TESTS(cases, NCASES, run_case)

static bson_t *doc_of(const char *json)
{
	char *j = expand(json);
	bson_t *b = fx_json(j);
	free(j);
	return b;
}

/* The parameters are the rule's; the walk reports sizes exactly. */
static void test_limits(void **state)
{
	doc_hit hit;
	bson_t *d = doc_of("{'a':@A11}");
	assert_false(rule_doc_check(d, 1000000, 11, &hit));
	assert_true(rule_doc_check(d, 1000000, 10, &hit));
	assert_false(hit.too_big);
	assert_string_equal(hit.path, "a");
	assert_int_equal(hit.size, 11);
	assert_true(rule_doc_check(d, d->len - 1, 1000, &hit));
	assert_true(hit.too_big);
	assert_int_equal(hit.bytes, d->len);
	assert_false(rule_doc_check(d, d->len, 1000, &hit));
	bson_destroy(d);

	engine_config cfg;
	rule_config_defaults(&cfg);
	assert_int_equal(cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_BYTES], 2097152);
	assert_int_equal(cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_ARRAY_LENGTH], 1000);
	cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_ARRAY_LENGTH] = 3;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	fx_analyze(e, "test", "{'insert':'c','documents':[{'a':[1,2,3]},{'b':[1,2,3,4]}]}", NULL, 0,
	           NULL, NULL);
	assert_int_equal(fx_sink_count(&sink, RULE_LARGE_DOCUMENT), 1);
	assert_non_null(strstr(fx_sink_first(&sink, RULE_LARGE_DOCUMENT)->detail,
	                       "holds array \"b\" of 4 elements, over maxArrayLength 3"));
	engine_free(e);
	fx_sink_free(&sink);
}

/* The shape names the field: two problems of one collection are two
 * findings, the same problem again is a repeat. */
static void test_shape_names_the_field(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_LARGE_DOCUMENT].params[DOC_PARAM_MAX_ARRAY_LENGTH] = 2;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, NULL, fx_sink_fn, &sink);
	fx_analyze(e, "test",
	           "{'insert':'c','documents':[{'a':[1,2,3]},{'b':{'c':[1,2,3]}},{'a':[4,5,6,7]}]}",
	           NULL, 0, NULL, NULL);
	assert_int_equal(fx_sink_count(&sink, RULE_LARGE_DOCUMENT), 2);
	assert_string_equal(sink.f[0].shape, "{\"insert\":\"c\",\"longArray\":\"a\"}");
	assert_string_equal(sink.f[1].shape, "{\"insert\":\"c\",\"longArray\":\"b.c\"}");
	engine_free(e);
	fx_sink_free(&sink);
}

/* The walk reads raw bytes: every BSON type must be stepped over by its
 * exact length, or the array after it is never reached. */
static void test_every_type_is_stepped_over(void **state)
{
	bson_t *d = bson_new(), scope = BSON_INITIALIZER, arr;
	bson_oid_t oid;
	bson_decimal128_t dec;
	bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
	bson_decimal128_from_string("1.5", &dec);
	BSON_APPEND_DOUBLE(d, "double", 1.5);
	BSON_APPEND_UTF8(d, "string", "xyz");
	BSON_APPEND_BINARY(d, "binary", BSON_SUBTYPE_BINARY, (const uint8_t *)"abcd", 4);
	BSON_APPEND_UNDEFINED(d, "undefined");
	BSON_APPEND_OID(d, "oid", &oid);
	BSON_APPEND_BOOL(d, "bool", true);
	BSON_APPEND_DATE_TIME(d, "date", 1700000000000);
	BSON_APPEND_NULL(d, "null");
	BSON_APPEND_REGEX(d, "regex", "^a.c", "im");
	BSON_APPEND_DBPOINTER(d, "dbpointer", "db.coll", &oid);
	BSON_APPEND_CODE(d, "code", "function () {}");
	BSON_APPEND_SYMBOL(d, "symbol", "sym");
	BSON_APPEND_INT32(&scope, "x", 1);
	BSON_APPEND_CODE_WITH_SCOPE(d, "codews", "return x", &scope);
	BSON_APPEND_INT32(d, "int32", 7);
	BSON_APPEND_TIMESTAMP(d, "timestamp", 1, 2);
	BSON_APPEND_INT64(d, "int64", 8);
	BSON_APPEND_DECIMAL128(d, "decimal", &dec);
	BSON_APPEND_MAXKEY(d, "max");
	BSON_APPEND_MINKEY(d, "min");
	BSON_APPEND_ARRAY_BEGIN(d, "last", &arr);
	for (int i = 0; i < 3; i++)
		BSON_APPEND_INT32(&arr, i == 0 ? "0" : i == 1 ? "1" : "2", i);
	bson_append_array_end(d, &arr);
	doc_hit hit;
	assert_true(rule_doc_check(d, 1000000, 2, &hit));
	assert_string_equal(hit.path, "last");
	assert_int_equal(hit.size, 3);
	/* The same types as array elements are counted one each. */
	bson_t *a = bson_new(), el;
	bson_iter_t it;
	BSON_APPEND_ARRAY_BEGIN(a, "mixed", &el);
	assert_true(bson_iter_init(&it, d));
	int n = 0;
	while (bson_iter_next(&it)) {
		char key[16];
		snprintf(key, sizeof key, "%d", n++);
		bson_append_iter(&el, key, -1, &it);
	}
	bson_append_array_end(a, &el);
	assert_true(rule_doc_check(a, 1000000, (uint32_t)n - 1, &hit));
	assert_string_equal(hit.path, "mixed");
	assert_int_equal(hit.size, n);
	assert_false(rule_doc_check(a, 1000000, (uint32_t)n, &hit));
	bson_destroy(a);
	/* A length that lies ends the walk: nothing is reported. */
	bson_t *lie = bson_copy(d);
	uint8_t *raw = (uint8_t *)bson_get_data(lie);
	raw[4 + 1 + strlen("double") + 1 + 8 + 1 + strlen("string") + 1 + 3] = 0x7f; /* 2 GB */
	assert_false(rule_doc_check(lie, 1000000, 2, &hit));
	bson_destroy(lie);
	bson_destroy(d);
	bson_destroy(&scope);
}

static void test_block_message(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_LARGE_DOCUMENT].action = RULE_BLOCK;
	engine *e = engine_new(&cfg, NULL, NULL, NULL);
	block_info block = {0};
	char *json = expand(INS("{'tags':@A1001}"));
	assert_int_equal(fx_analyze(e, "test", json, NULL, 0, NULL, &block), VERDICT_BLOCK);
	free(json);
	assert_string_equal(
	    block.errmsg, "mongoguard blocked this insert: rule large-document: inserted document "
	                  "for test.c holds array \"tags\" of 1001 elements, over maxArrayLength "
	                  "1000. Fix: keep the newest N elements (subset pattern), bucket the "
	                  "items, or move the overflow to extra documents (outlier pattern).");
	engine_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_is_balanced),
	    cmocka_unit_test(test_table_log),
	    cmocka_unit_test(test_table_block),
	    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_block_message),
	    cmocka_unit_test(test_shape_names_the_field),
	    cmocka_unit_test(test_every_type_is_stepped_over),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
