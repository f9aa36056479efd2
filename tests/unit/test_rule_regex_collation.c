/* case-insensitive-regex, its collation form: queries run with a collation
 * of strength 1 or 2 that no index with that collation serves (hits), and
 * the ones an index serves, that have no such collation, or that cannot be
 * judged (near misses), each through the whole engine with an index cache
 * holding listIndexes replies as mongod writes them (an index's collation
 * spelled out with every option). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/rules/rule_regex.h"
#include "fixtures/analyzer_fixture.h"

/* mongod's listIndexes form of {locale: L, strength: S}. */
#define FULL(loc, s, cl)                                                                           \
	"{'locale':'" loc "','caseLevel':" cl ",'caseFirst':'off','strength':" #s                  \
	",'numericOrdering':false,'alternate':'non-ignorable','maxVariable':'punct',"              \
	"'normalization':false,'backwards':false,'version':'57.1'}"
#define EN2    FULL("en", 2, "false")
#define C2     "'collation':{'locale':'en','strength':2}"
#define SECRET "'SECRET'"

static index_cache *the_cache;

static void put(index_cache *ic, const char *coll, const char *const *specs, size_t n)
{
	index_set *s = fx_index_set(specs, n);
	index_set_set_doc_count(s, 50000);
	index_cache_put(ic, "test", coll, s);
	index_set_release(s);
}

static int setup(void **state)
{
	/* users: the simple collection default; email, and a hidden phone
	 * index, with en/2 */
	static const char *const users[] = {
	    "{'v':2,'key':{'_id':1},'name':'_id_'}",
	    "{'v':2,'key':{'name':1},'name':'name_1'}",
	    "{'v':2,'key':{'email':1},'name':'email_ci','collation':" EN2 "}",
	    "{'v':2,'key':{'age':1},'name':'age_1'}",
	    "{'v':2,'key':{'tenant':1,'name':1},'name':'tenant_1_name_1'}",
	    "{'v':2,'key':{'phone':1},'name':'phone_ci','hidden':true,'collation':" EN2 "}",
	    "{'v':2,'key':{'bio':'text'},'name':'bio_text'}",
	};
	/* ci: created with {collation: en/2}: every index inherits it */
	static const char *const ci[] = {
	    "{'v':2,'key':{'_id':1},'name':'_id_','collation':" EN2 "}",
	    "{'v':2,'key':{'name':1},'name':'name_1','collation':" EN2 "}",
	};
	static const char *const fr[] = {
	    "{'v':2,'key':{'_id':1},'name':'_id_'}",
	    "{'v':2,'key':{'name':1},'name':'name_fr1','collation':" FULL("fr", 1, "false") "}",
	};
	static const char *const cl[] = {
	    "{'v':2,'key':{'_id':1},'name':'_id_'}",
	    "{'v':2,'key':{'name':1},'name':'name_cl','collation':" FULL("en", 2, "true") "}",
	};
	static const char *const wild[] = {
	    "{'v':2,'key':{'_id':1},'name':'_id_'}",
	    "{'v':2,'key':{'$**':1},'name':'wild','collation':" EN2 "}",
	};
	/* ck: indexes with the query's collation that some predicates on their
	 * field cannot use (collection-scan's planner model) */
	static const char *const ck[] = {
	    "{'v':2,'key':{'_id':1},'name':'_id_'}",
	    "{'v':2,'key':{'h':'hashed'},'name':'h_ci','collation':" EN2 "}",
	    "{'v':2,'key':{'s':1},'name':'s_ci','sparse':true,'collation':" EN2 "}",
	    "{'v':2,'key':{'p':1},'name':'p_ci','partialFilterExpression':{'flag':true},"
	    "'collation':" EN2 "}",
	};
	index_cache *ic = index_cache_new(NULL, 0, NULL, NULL, NULL, 0);
	put(ic, "users", users, sizeof users / sizeof users[0]);
	put(ic, "ck", ck, 4);
	put(ic, "ci", ci, 2);
	put(ic, "fr", fr, 2);
	put(ic, "cl", cl, 2);
	put(ic, "wild", wild, 2);
	index_set *v = index_set_new_opaque("a view");
	index_cache_put(ic, "test", "view", v);
	index_set_release(v);
	the_cache = ic;
	return 0;
}

static int teardown(void **state)
{
	index_cache_free(the_cache);
	return 0;
}

typedef fx_case ccase;

#define NOSEQ FX_NOSEQ
#define HIT(n, j, cmd, d)                                                                          \
	{                                                                                          \
		n, j, NOSEQ, true, "test.users", cmd, d                                            \
	}
#define HIT_NS(n, j, ns, cmd, d)                                                                   \
	{                                                                                          \
		n, j, NOSEQ, true, ns, cmd, d                                                      \
	}
#define MISS(n, j)                                                                                 \
	{                                                                                          \
		n, j, NOSEQ, false, NULL, NULL, NULL                                               \
	}
#define FIND(filter, rest) "{'find':'users','filter':" filter rest "}"
#define NAME_EN2                                                                                   \
	"\"name\" is compared case-insensitively with collation {locale: \"en\", strength: 2}, "   \
	"but no index of test.users with that collation serves the query"

static const ccase cases[] = {
    /* ---- hits ---- */
    HIT("find by equality", FIND("{'name':" SECRET "}", "," C2), "find", NAME_EN2),
    HIT("strength 1", FIND("{'name':" SECRET "}", ",'collation':{'locale':'en','strength':1}"),
        "find", "collation {locale: \"en\", strength: 1}"),
    HIT("count", "{'count':'users','query':{'name':" SECRET "}," C2 "}", "count", NAME_EN2),
    HIT("distinct", "{'distinct':'users','key':'age','query':{'name':" SECRET "}," C2 "}",
        "distinct", NAME_EN2),
    HIT("update statement",
        "{'update':'users','updates':[{'q':{'name':" SECRET "},'u':{'$set':{"
        "'a':1}}," C2 "}]}",
        "update", NAME_EN2),
    {"update in a kind-1 sequence",
     "{'update':'users','ordered':true}",
     {{"updates", {"{'q':{'name':" SECRET "},'u':{'$set':{'a':1}}," C2 "}"}}, {NULL, {NULL}}},
     true,
     "test.users",
     "update",
     NAME_EN2},
    HIT("delete statement",
        "{'delete':'users','deletes':[{'q':{'name':" SECRET "},'limit':1," C2 "}]}", "delete",
        NAME_EN2),
    HIT("findAndModify",
        "{'findAndModify':'users','query':{'name':" SECRET "},'update':{'$set':{'a':1}}," C2 "}",
        "findAndModify", NAME_EN2),
    HIT("aggregate leading $match",
        "{'aggregate':'users','pipeline':[{'$match':{'name':" SECRET "}}],'cursor':{}," C2 "}",
        "aggregate", NAME_EN2),
    HIT("bulkWrite update op",
        "{'bulkWrite':1,'ops':[{'update':0,'filter':{'name':" SECRET "},'updateMods':{'$set':{"
        "'a':1}}," C2 "}],'nsInfo':[{'ns':'test.users'}]}",
        "bulkWrite", NAME_EN2),
    /* $expr's comparisons of a path with a string (rewritten by mongod
     * 5.0+ into index-usable matches) are collated string bounds too */
    HIT("$expr $eq with a string", FIND("{'$expr':{'$eq':['$name'," SECRET "]}}", "," C2), "find",
        NAME_EN2),
    HIT("$expr $gte, constant first, in $and",
        FIND("{'$and':[{'$expr':{'$gte':[" SECRET ",'$name']}}]}", "," C2), "find", NAME_EN2),
    /* an index with the collation leads with the field, but the planner
     * cannot use it for this predicate */
    HIT_NS("a range on a hashed index", "{'find':'ck','filter':{'h':{'$gt':'a'}}," C2 "}",
           "test.ck", "find", "\"h\" is compared case-insensitively"),
    HIT_NS("$in with null on a sparse index",
           "{'find':'ck','filter':{'s':{'$in':[null,'x']}}," C2 "}", "test.ck", "find",
           "\"s\" is compared case-insensitively"),
    HIT_NS("a partial index the filter does not imply", "{'find':'ck','filter':{'p':'x'}," C2 "}",
           "test.ck", "find", "\"p\" is compared case-insensitively"),
    HIT("$in of strings", FIND("{'name':{'$in':[" SECRET ",'b']}}", "," C2), "find", NAME_EN2),
    HIT("string range", FIND("{'name':{'$gte':" SECRET ",'$lt':'n'}}", "," C2), "find", NAME_EN2),
    HIT("string _id on a simple collection", FIND("{'_id':" SECRET "}", "," C2), "find",
        "\"_id\" is compared"),
    HIT("embedded document equality", FIND("{'address':{'city':" SECRET "}}", "," C2), "find",
        "\"address\" is compared"),
    HIT("compound index of the simple collation", FIND("{'tenant':'t','name':" SECRET "}", "," C2),
        "find", "\"tenant\", \"name\" are compared"),
    HIT("another locale than the index's",
        FIND("{'email':" SECRET "}", ",'collation':{'locale':'de','strength':2}"), "find",
        "\"email\" is compared case-insensitively with collation {locale: \"de\", strength: 2}"),
    HIT_NS("another strength than the index's",
           "{'find':'fr','filter':{'name':" SECRET "},'collation':{'locale':'fr','strength':2}}",
           "test.fr", "find", "no index of test.fr with that collation"),
    HIT_NS("another caseLevel than the index's",
           "{'find':'cl','filter':{'name':" SECRET "}," C2 "}", "test.cl", "find",
           "\"name\" is compared"),
    HIT("caseLevel false spelled out, no index",
        FIND("{'name':" SECRET "}", ",'collation':{'locale':'en','strength':2,'caseLevel':false}"),
        "find", NAME_EN2),
    HIT_NS("another strength than the collection default",
           "{'find':'ci','filter':{'name':" SECRET "},'collation':{'locale':'en','strength':1}}",
           "test.ci", "find", "strength: 1"),
    HIT("the matching index is hidden", FIND("{'phone':" SECRET "}", "," C2), "find",
        "\"phone\" is compared"),
    HIT("an $or branch no index serves",
        FIND("{'$or':[{'email':" SECRET "},{'name':" SECRET "}]}", "," C2), "find",
        "\"name\" is compared"),
    HIT("sorted on a simple index", FIND("{'name':" SECRET "}", ",'sort':{'name':1}," C2), "find",
        NAME_EN2),
    HIT("explain", "{'explain':{'find':'users','filter':{'name':" SECRET "}," C2 "}}", "explain",
        NAME_EN2),
    HIT("a case-insensitive regex too: one finding, the regex's",
        FIND("{'name':{'$regularExpression':{'pattern':'SECRET','options':'i'}}}", "," C2), "find",
        "case-insensitive regex"),

    MISS("equality on a hashed index with the collation",
         "{'find':'ck','filter':{'h':'x'}," C2 "}"),
    MISS("equality on a sparse index with the collation",
         "{'find':'ck','filter':{'s':'x'}," C2 "}"),
    MISS("a partial index the filter implies",
         "{'find':'ck','filter':{'p':'x','flag':true}," C2 "}"),
    /* ---- near misses ---- */
    MISS("no collation: the collection default", FIND("{'name':" SECRET "}", "")),
    MISS("$expr $eq on a field an index with the collation leads",
         FIND("{'$expr':{'$eq':['$email'," SECRET "]}}", "," C2)),
    MISS("$expr comparing two fields (no index bounds it)",
         FIND("{'$expr':{'$eq':['$name','$email']}}", "," C2)),
    MISS("$expr $ne with a string (not rewritten for an index)",
         FIND("{'$expr':{'$ne':['$name'," SECRET "]}}", "," C2)),
    MISS("$expr $eq with a number", FIND("{'$expr':{'$eq':['$name',5]}}", "," C2)),
    MISS("strength 3", FIND("{'name':" SECRET "}", ",'collation':{'locale':'en','strength':3}")),
    MISS("strength defaults to 3", FIND("{'name':" SECRET "}", ",'collation':{'locale':'en'}")),
    MISS("the simple collation", FIND("{'name':" SECRET "}", ",'collation':{'locale':'simple'}")),
    MISS("an index with the same collation", FIND("{'email':" SECRET "}", "," C2)),
    MISS("the same collation, caseLevel false spelled out",
         FIND("{'email':" SECRET "}",
              ",'collation':{'locale':'en','strength':2,'caseLevel':false}")),
    /* caseLevel: true compares case at strength 1 and 2: not case-insensitive */
    MISS("strength 2 with caseLevel, no index",
         FIND("{'name':" SECRET "}", ",'collation':{'locale':'en','strength':2,'caseLevel':true}")),
    MISS("strength 1 with caseLevel, no index",
         FIND("{'name':" SECRET "}", ",'collation':{'locale':'en','strength':1,'caseLevel':true}")),
    MISS("strength 2 with caseLevel, an index with that collation",
         "{'find':'cl','filter':{'name':" SECRET "},'collation':{'locale':'en','strength':2,"
         "'caseLevel':true}}"),
    MISS("numbers need no collation", FIND("{'age':5}", "," C2)),
    MISS("a number on a simple compound index's leading field",
         FIND("{'tenant':5,'name':" SECRET "}", "," C2)),
    MISS("ObjectId _id", FIND("{'_id':{'$oid':'0123456789abcdef01234567'}}", "," C2)),
    MISS("the collection's default collation",
         "{'find':'ci','filter':{'name':" SECRET "},'collation':{'locale':'en','strength':2}}"),
    MISS("the collection's default collation, no index on the field",
         "{'find':'ci','filter':{'other':" SECRET "}," C2 "}"),
    MISS("a view", "{'find':'view','filter':{'name':" SECRET "}," C2 "}"),
    MISS("a wildcard index", "{'find':'wild','filter':{'name':" SECRET "}," C2 "}"),
    MISS("a hint", FIND("{'name':" SECRET "}", ",'hint':{'name':1}," C2)),
    MISS("a hint by name", FIND("{'name':" SECRET "}", ",'hint':'email_ci'," C2)),
    MISS("$text", FIND("{'$text':{'$search':" SECRET "}}", "," C2)),
    MISS("every $or branch served", FIND("{'$or':[{'email':" SECRET "},{'age':3}]}", "," C2)),
    MISS("a served field beside an unserved one",
         FIND("{'email':" SECRET ",'name':" SECRET "}", "," C2)),
    MISS("a sort on a field of an index with the collation",
         FIND("{'name':" SECRET "}", ",'sort':{'email':1}," C2)),
    MISS("an empty filter", FIND("{}", "," C2)),
    MISS("no filter", "{'find':'users'," C2 "}"),
    MISS("served delete",
         "{'delete':'users','deletes':[{'q':{'email':" SECRET "},'limit':1," C2 "}]}"),
    MISS("served aggregate",
         "{'aggregate':'users','pipeline':[{'$match':{'email':" SECRET "}}],'cursor':{}," C2 "}"),
    /* a regex ignores the collation, and its bounds fit an index with the
     * simple collation (regex_collations.js); $type and $exists compare no
     * strings */
    MISS("an anchored regex on a simple index",
         FIND("{'name':{'$regularExpression':{'pattern':'^abc','options':''}}}", "," C2)),
    MISS("an anchored $regex on a simple index", FIND("{'name':{'$regex':'^abc'}}", "," C2)),
    MISS("an anchored regex on a simple index beside an unindexed string",
         FIND("{'name':{'$regex':'^abc'},'other':" SECRET "}", "," C2)),
    MISS("$type on a simple index", FIND("{'name':{'$type':'string'}}", "," C2)),
    MISS("$exists on a simple index", FIND("{'name':{'$exists':true}}", "," C2)),
    MISS("a collation with a strength that is not a number",
         FIND("{'name':" SECRET "}", ",'collation':{'locale':'en','strength':'2'}")),
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void run_case(const ccase *c, rule_action action)
{
	fx_expect x = {c->name, c->hit, c->ns, c->command, c->detail, NULL};
	size_t n = c->seqs[1].id ? 2 : c->seqs[0].id ? 1 : 0;
	fx_run_rule_case_ic(RULE_CASE_INSENSITIVE_REGEX, action, the_cache, c->json, c->seqs, n,
	                    &x);
}

FX_TABLE_TESTS(cases, NCASES, run_case)

/* The words: which fields, which collation, and the fix, runnable. */
static void test_words(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = RULE_BLOCK;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, the_cache, fx_sink_fn, &sink);
	block_info block = {0};
	assert_int_equal(
	    fx_analyze(e, "test", FIND("{'name':" SECRET "}", "," C2), NULL, 0, NULL, &block),
	    VERDICT_BLOCK);
	const fx_finding *f = fx_sink_first(&sink, RULE_CASE_INSENSITIVE_REGEX);
	assert_non_null(f);
	assert_string_equal(
	    f->suggestion,
	    "db.getSiblingDB(\"test\").getCollection(\"users\").createIndex({\"name\": "
	    "1}, {collation: {locale: \"en\", strength: 2}}): an index with the "
	    "query's collation whose leading field is one it compares (or run the "
	    "query without a collation against a stored lower-cased copy of the "
	    "field)");
	assert_string_equal(
	    block.errmsg,
	    "mongoguard blocked this find: rule case-insensitive-regex: \"name\" is compared "
	    "case-insensitively with collation {locale: \"en\", strength: 2}, but no index of "
	    "test.users with that collation serves the query, and an index of another collation "
	    "cannot bound string comparisons: the query scans the collection. Fix: create an index "
	    "with the query's collation on a field it compares, e.g. createIndex({field: 1}, "
	    "{collation: {locale: \"en\", strength: 2}}).");
	engine_free(e);
	fx_sink_free(&sink);
}

static void test_collation_compare(void **state)
{
	bson_t *en2 = fx_json("{'locale':'en','strength':2}");
	bson_t *full = fx_json(EN2);
	bson_t *en2cl = fx_json("{'locale':'en','strength':2,'caseLevel':true}");
	bson_t *en = fx_json("{'locale':'en'}");
	bson_t *en3 = fx_json("{'locale':'en','strength':3}");
	bson_t *simple = fx_json("{'locale':'simple'}");
	assert_true(index_collation_same(full, en2));
	assert_true(index_collation_same(en2, full));
	assert_false(index_collation_same(en2cl, en2));
	assert_true(index_collation_same(en, en3));
	assert_false(index_collation_same(en2, en3));
	assert_true(index_collation_same(NULL, simple));
	assert_false(index_collation_same(NULL, en2));
	bson_destroy(en2);
	bson_destroy(full);
	bson_destroy(en2cl);
	bson_destroy(en);
	bson_destroy(en3);
	bson_destroy(simple);
}

/* The first collated query to a collection whose index list is not known
 * yet: at log it goes at once and the rule's verdict comes late; at block
 * it is held for the list. A query without a collation never waits for
 * this rule (its regex check reads no index). */
static void test_first_collated_query(void **state)
{
	index_cache *ic = index_cache_new(NULL, 0, NULL, NULL, NULL, 0);
	engine_config cfg;
	rule_config_defaults(&cfg);
	for (int r = 0; r < RULE_COUNT; r++)
		cfg.rules[r].action = RULE_OFF;
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = RULE_LOG;
	fx_sink sink;
	fx_sink_init(&sink);
	engine *e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	const char *q = "{'find':'later','filter':{'name':" SECRET "}," C2 "}";
	block_info b = {0};
	assert_int_equal(fx_analyze(e, "test", q, NULL, 0, NULL, &b), VERDICT_FORWARD);
	assert_int_equal(sink.n, 0);
	assert_int_equal(b.late.n, 1);
	assert_int_equal(b.late.at[0].rules, 1u << RULE_CASE_INSENSITIVE_REGEX);
	static const char *const id_only[] = {"{'v':2,'key':{'_id':1},'name':'_id_'}"};
	put(ic, "later", id_only, 1);
	engine_late owed = b.late;
	request_ctx late = {.app_name = "", .client = "c", .now_ms = 1, .late = &owed};
	assert_int_equal(fx_analyze(e, "test", q, NULL, 0, &late, &b), VERDICT_FORWARD);
	assert_int_equal(b.late.n, 0);
	assert_int_equal(sink.n, 1);
	assert_true(sink.f[0].late);
	/* no collation: no index is read, nothing waits or is owed */
	assert_int_equal(fx_analyze(e, "test", "{'find':'other','filter':{'name':" SECRET "}}",
	                            NULL, 0, NULL, &b),
	                 VERDICT_FORWARD);
	assert_int_equal(b.late.n, 0);
	engine_free(e);
	cfg.rules[RULE_CASE_INSENSITIVE_REGEX].action = RULE_BLOCK;
	e = engine_new(&cfg, ic, fx_sink_fn, &sink);
	assert_int_equal(fx_analyze(e, "test",
	                            "{'find':'later2','filter':{'name':" SECRET "}," C2 "}", NULL,
	                            0, NULL, &b),
	                 VERDICT_WAIT_INDEXES);
	engine_free(e);
	fx_sink_free(&sink);
	index_cache_free(ic);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_is_balanced), cmocka_unit_test(test_table_log),
	    cmocka_unit_test(test_table_block),       cmocka_unit_test(test_words),
	    cmocka_unit_test(test_collation_compare), cmocka_unit_test(test_first_collated_query),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
