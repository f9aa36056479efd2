/* index-mismatched-sort: can some index provide the sort? A table of
 * queries against index lists, with as many near-misses (sorts an index does
 * provide, often in a non-obvious way) as hits (blocking sorts), and the
 * cases where the rule must decline to judge.
 *
 * JSON here uses single quotes, turned into double quotes before parsing.
 * Every index list gets the _id_ index first, as every collection has it;
 * specs without a name get the server's default name (a_1_b_-1). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/planner/index_set.h"
#include "fixtures/analyzer_fixture.h"
#include "analyzers/rules/rule_sort.h"

#define P  SORT_PROVIDED
#define B  SORT_BLOCKING
#define NV SORT_NO_VERDICT

typedef struct sort_case {
	const char *name;
	const char *indexes; /* JSON array of index specs; _id_ is added */
	const char *filter;  /* NULL: none */
	const char *sort;
	const char *collation;
	const char *hint_doc;
	const char *hint_name;
	sort_verdict want;
} sort_case;

#define ABCD     "[{'key':{'a':1,'b':1,'c':1,'d':1}}]"
#define AB_MIXED "[{'key':{'a':1,'b':-1}}]"
#define FR       "{'locale':'fr'}"
#define CWI      "[{'key':{'a':1,'b':1,'w.$**':1,'c':1}}]"
/* Two $in lists of 15 values: 225 point scans, over the planner's 200. */
#define IN15 "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]"
#define IN120                                                                                      \
	"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,3"         \
	"0,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,"   \
	"59,60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,"  \
	"88,89,90,91,92,93,94,95,96,97,98,99,100,101,102,103,104,105,106,107,108,109,110,111,112," \
	"113,114,115,116,117,118,119,120]"

static const sort_case cases[] = {
    /* ---- PROTOCOL.md: directions all equal or all inverted ---- */
    {"{a:1,b:-1} serves {a:1,b:-1}", AB_MIXED, NULL, "{'a':1,'b':-1}", NULL, NULL, NULL, P},
    {"{a:1,b:-1} serves {a:-1,b:1}", AB_MIXED, NULL, "{'a':-1,'b':1}", NULL, NULL, NULL, P},
    {"{a:1,b:-1} never serves {a:1,b:1}", AB_MIXED, NULL, "{'a':1,'b':1}", NULL, NULL, NULL, B},
    {"{a:1,b:-1} never serves {a:-1,b:-1}", AB_MIXED, NULL, "{'a':-1,'b':-1}", NULL, NULL, NULL, B},

    /* ---- PROTOCOL.md: prefixes of {a:1,b:1,c:1,d:1} ---- */
    {"prefix {a:1}", ABCD, NULL, "{'a':1}", NULL, NULL, NULL, P},
    {"prefix {a:-1}", ABCD, NULL, "{'a':-1}", NULL, NULL, NULL, P},
    {"prefix {a:1,b:1}", ABCD, NULL, "{'a':1,'b':1}", NULL, NULL, NULL, P},
    {"prefix {a:-1,b:-1}", ABCD, NULL, "{'a':-1,'b':-1}", NULL, NULL, NULL, P},
    {"prefix {a:1,b:1,c:1}", ABCD, NULL, "{'a':1,'b':1,'c':1}", NULL, NULL, NULL, P},
    {"range on a, sort {a,b}", ABCD, "{'a':{'$gt':4}}", "{'a':1,'b':1}", NULL, NULL, NULL, P},
    {"not a prefix: {b:1}", ABCD, NULL, "{'b':1}", NULL, NULL, NULL, B},
    {"gap: {a:1,c:1}", ABCD, NULL, "{'a':1,'c':1}", NULL, NULL, NULL, B},
    {"mixed directions {a:1,b:-1}", ABCD, NULL, "{'a':1,'b':-1}", NULL, NULL, NULL, B},

    /* ---- PROTOCOL.md: equality on the fields before the sort ---- */
    {"find({a:5}).sort({b,c})", ABCD, "{'a':5}", "{'b':1,'c':1}", NULL, NULL, NULL, P},
    {"find({b:3,a:4}).sort({c})", ABCD, "{'b':3,'a':4}", "{'c':1}", NULL, NULL, NULL, P},
    {"find({a:5,b:{$lt:3}}).sort({b})", ABCD, "{'a':5,'b':{'$lt':3}}", "{'b':1}", NULL, NULL, NULL,
     P},
    {"find({a:{$gt:2}}).sort({c})", ABCD, "{'a':{'$gt':2}}", "{'c':1}", NULL, NULL, NULL, B},
    /* PROTOCOL.md says "not served", and so does the planner: {c:5} is not
     * on the index's leading field, so the index is never scanned with
     * bounds, and c's equality only drops it from the sort for an index
     * scan that pins c. The plan is a collection scan plus a blocking sort,
     * even though every result has the same c. With an index on c the sort
     * becomes empty and needs nothing (next case). */
    {"find({c:5}).sort({c}) with {a,b,c,d}", ABCD, "{'c':5}", "{'c':1}", NULL, NULL, NULL, B},
    {"find({c:5}).sort({c}) with {c:1}", "[{'key':{'c':1}}]", "{'c':5}", "{'c':1}", NULL, NULL,
     NULL, P},
    {"equality on a sort field outside the index", "[{'key':{'a':1}}]", "{'a':5,'c':3}", "{'c':1}",
     NULL, NULL, NULL, B},
    {"equality dropped wherever it sits: sort {b,a} with a:5", ABCD, "{'a':5}", "{'b':1,'a':-1}",
     NULL, NULL, NULL, P},
    {"non-leading equality dropped from the index", "[{'key':{'a':1,'b':1,'c':1}}]",
     "{'a':{'$gt':1},'b':5}", "{'a':1,'c':1}", NULL, NULL, NULL, P},

    /* ---- forms of equality ---- */
    {"$eq", ABCD, "{'a':{'$eq':5}}", "{'b':1}", NULL, NULL, NULL, P},
    {"null equality", ABCD, "{'a':null}", "{'b':1}", NULL, NULL, NULL, P},
    {"whole-document equality", ABCD, "{'a':{'x':1,'y':2}}", "{'b':1}", NULL, NULL, NULL, P},
    {"equality inside $and", ABCD, "{'$and':[{'a':5},{'b':6}]}", "{'c':1}", NULL, NULL, NULL, P},
    {"equality inside nested $and", ABCD, "{'$and':[{'$and':[{'a':5}]},{'b':6}]}", "{'c':1}", NULL,
     NULL, NULL, P},
    {"$in of one value", ABCD, "{'a':{'$in':[5]}}", "{'b':1}", NULL, NULL, NULL, P},
    {"$gte and $lte on one value", ABCD, "{'a':{'$gte':5,'$lte':5}}", "{'b':1}", NULL, NULL, NULL,
     P},
    {"$or of one branch is flattened", ABCD, "{'$or':[{'a':5}]}", "{'b':1}", NULL, NULL, NULL, P},
    {"regex value is a range", ABCD, "{'a':{'$regularExpression':{'pattern':'^x','options':''}}}",
     "{'b':1}", NULL, NULL, NULL, B},
    {"$ne is not equality", ABCD, "{'a':{'$ne':5}}", "{'b':1}", NULL, NULL, NULL, B},
    {"$not is not equality", ABCD, "{'a':{'$not':{'$eq':5}}}", "{'b':1}", NULL, NULL, NULL, B},
    {"$nor is not equality", ABCD, "{'$nor':[{'a':5}]}", "{'b':1}", NULL, NULL, NULL, B},
    /* The value form bounds a itself: {$eq: 5} is a point on it
     * (index_bounds_builder), so b follows (was B before round 4). */
    {"$elemMatch {$eq} is a point on the array's key", ABCD, "{'a':{'$elemMatch':{'$eq':5}}}",
     "{'b':1}", NULL, NULL, NULL, P},
    {"$elemMatch range is no point", ABCD, "{'a':{'$elemMatch':{'$gt':5}}}", "{'b':1}", NULL, NULL,
     NULL, B},
    /* mongod rewrites an $expr $eq on a path to an index point
     * ($_internalExprEq); was B before round 4. */
    {"$expr $eq is a point", ABCD, "{'$expr':{'$eq':['$a',5]}}", "{'b':1}", NULL, NULL, NULL, P},
    {"$expr $eq in $and, either order", ABCD, "{'$expr':{'$and':[{'$eq':[5,'$a']}]}}", "{'b':1}",
     NULL, NULL, NULL, P},
    {"$expr $gt is not equality", ABCD, "{'$expr':{'$gt':['$a',5]}}", "{'b':1}", NULL, NULL, NULL,
     B},
    {"$expr comparing two paths bounds nothing", ABCD, "{'$expr':{'$eq':['$a','$z']}}", "{'b':1}",
     NULL, NULL, NULL, B},
    {"equality under a 2-branch $or is not equality", ABCD, "{'$or':[{'a':5},{'z':1}]}", "{'b':1}",
     NULL, NULL, NULL, B},

    /* ---- $in: points that can precede the sort (explode for sort) ---- */
    {"$in of three then sort", ABCD, "{'a':{'$in':[1,2,3]}}", "{'b':1}", NULL, NULL, NULL, P},
    {"array equality is two points", ABCD, "{'a':[1,2]}", "{'b':1}", NULL, NULL, NULL, P},
    {"$in and equality then sort", ABCD, "{'a':{'$in':[1,2]},'b':7}", "{'c':-1}", NULL, NULL, NULL,
     P},
    {"$in is not dropped from the sort", "[{'key':{'a':1,'b':1}}]", "{'a':{'$in':[1,2]}}",
     "{'b':1,'a':1}", NULL, NULL, NULL, B},
    {"$in then a gap", ABCD, "{'a':{'$in':[1,2]}}", "{'c':1}", NULL, NULL, NULL, B},
    {"225 point scans exceed 200", ABCD, "{'a':{'$in':" IN15 "},'b':{'$in':" IN15 "}}", "{'c':1}",
     NULL, NULL, NULL, B},
    {"$in with a regex is a range", ABCD,
     "{'a':{'$in':[1,{'$regularExpression':{'pattern':'x','options':''}}]}}", "{'b':1}", NULL, NULL,
     NULL, B},

    /* ---- $or: merged sorted scans of each branch ---- */
    {"$or, every branch indexed with the sort", "[{'key':{'a':1,'c':1}},{'key':{'b':1,'c':1}}]",
     "{'$or':[{'a':1},{'b':2}]}", "{'c':1}", NULL, NULL, NULL, P},
    {"$or, one branch unindexed", "[{'key':{'a':1,'c':1}},{'key':{'b':1,'c':1}}]",
     "{'$or':[{'a':1},{'x':2}]}", "{'c':1}", NULL, NULL, NULL, B},
    /* explodeForSort sums the scans of every branch (at most 200) */
    {"$or of two exploded branches, 240 scans", "[{'key':{'a':1,'c':1}},{'key':{'b':1,'c':1}}]",
     "{'$or':[{'a':{'$in':" IN120 "}},{'b':{'$in':" IN120 "}}]}", "{'c':1}", NULL, NULL, NULL, B},
    {"$or of two exploded branches, 30 scans", "[{'key':{'a':1,'c':1}},{'key':{'b':1,'c':1}}]",
     "{'$or':[{'a':{'$in':" IN15 "}},{'b':{'$in':" IN15 "}}]}", "{'c':1}", NULL, NULL, NULL, P},
    {"$or of an exploded branch and a point, 121 scans",
     "[{'key':{'a':1,'c':1}},{'key':{'b':1,'c':1}}]", "{'$or':[{'a':{'$in':" IN120 "}},{'b':2}]}",
     "{'c':1}", NULL, NULL, NULL, P},

    /* ---- _id, $natural, $meta, empty ---- */
    {"_id alone", "[]", NULL, "{'_id':1}", NULL, NULL, NULL, P},
    {"_id descending with a filter", "[]", "{'x':{'$gt':1}}", "{'_id':-1}", NULL, NULL, NULL, P},
    {"_id then another field", "[]", NULL, "{'_id':1,'x':1}", NULL, NULL, NULL, B},
    {"$natural sort", "[]", NULL, "{'$natural':-1}", NULL, NULL, NULL, P},
    {"$meta sort", "[]", "{'$text':{'$search':'x'}}", "{'score':{'$meta':'textScore'}}", NULL, NULL,
     NULL, P},
    {"empty sort", "[]", NULL, "{}", NULL, NULL, NULL, P},

    /* ---- unusable and undecidable indexes ---- */
    {"hidden index is not used", "[{'key':{'a':1},'hidden':true}]", NULL, "{'a':1}", NULL, NULL,
     NULL, B},
    /* A sparse index is eligible for a predicate no missing field
     * satisfies (planner_ixselect); was NV before round 4. */
    {"sparse index bounded by a predicate that needs the field", "[{'key':{'a':1},'sparse':true}]",
     "{'a':{'$gt':5}}", "{'a':1}", NULL, NULL, NULL, P},
    {"sparse index with {a: null}: not eligible", "[{'key':{'a':1},'sparse':true}]", "{'a':null}",
     "{'a':1,'b':1}", NULL, NULL, NULL, B},
    {"sparse index with $exists false: not eligible", "[{'key':{'a':1,'b':1},'sparse':true}]",
     "{'a':{'$exists':false}}", "{'b':1}", NULL, NULL, NULL, B},
    {"sparse index with $ne: no verdict", "[{'key':{'a':1},'sparse':true}]", "{'a':{'$ne':5}}",
     "{'a':1}", NULL, NULL, NULL, NV},
    /* The planner never scans a sparse index whole (it would miss
     * documents), so with no predicate there is nothing to be unsure of. */
    {"sparse index is never scanned whole", "[{'key':{'a':1},'sparse':true}]", NULL, "{'a':1}",
     NULL, NULL, NULL, B},
    /* A partial index serves only a filter that implies its expression
     * (was NV whatever the filter before round 4). */
    {"partial index the filter does not imply",
     "[{'key':{'a':1},'partialFilterExpression':{'a':{'$gt':1}}}]", NULL, "{'a':1}", NULL, NULL,
     NULL, B},
    {"partial index the filter implies",
     "[{'key':{'a':1},'partialFilterExpression':{'a':{'$gt':1}}}]", "{'a':{'$gt':5}}", "{'a':1}",
     NULL, NULL, NULL, P},
    {"partial index on another field, implied",
     "[{'key':{'s':1,'t':1},'partialFilterExpression':{'live':true}}]", "{'live':true,'s':'x'}",
     "{'t':-1}", NULL, NULL, NULL, P},
    {"partial index on another field, not implied",
     "[{'key':{'s':1,'t':1},'partialFilterExpression':{'live':true}}]", "{'s':'x'}", "{'t':-1}",
     NULL, NULL, NULL, B},
    {"partial index that would not serve anyway",
     "[{'key':{'a':1},'partialFilterExpression':{'a':{'$gt':1}}}]", NULL, "{'b':1}", NULL, NULL,
     NULL, B},
    /* A wildcard index provides a sort only on a path the filter
     * bounds, never by a whole scan (was NV whatever the query). */
    {"wildcard index, sort field unfiltered", "[{'key':{'$**':1}}]", NULL, "{'a':1}", NULL, NULL,
     NULL, B},
    /* bounds that take in documents make mongod scan the field's sub-paths
     * (WildcardIndexMustUseBlockingSortWithExistsQueries) */
    {"wildcard index, $exists true on the sort field", "[{'key':{'$**':1}}]",
     "{'a':{'$exists':true}}", "{'a':1}", NULL, NULL, NULL, B},
    {"wildcard index, $ne null on the sort field", "[{'key':{'$**':1}}]", "{'a':{'$ne':null}}",
     "{'a':-1}", NULL, NULL, NULL, B},
    {"wildcard index, sort field filtered: no verdict", "[{'key':{'$**':1}}]", "{'a':{'$gt':1}}",
     "{'a':1}", NULL, NULL, NULL, NV},
    /* ... as its expansion for that path, {$_path: 1, a: 1}: one field
     * (was NV whenever the sort's first field had a predicate) */
    {"wildcard index, a sort on two predicated paths", "[{'key':{'$**':1}}]",
     "{'a':{'$gt':1},'b':{'$gt':1}}", "{'a':1,'b':1}", NULL, NULL, NULL, B},
    {"wildcard index, a predicated path then another", "[{'key':{'$**':1}}]", "{'a':{'$gt':1}}",
     "{'a':1,'c':1}", NULL, NULL, NULL, B},
    {"wildcard index, a point on one path, a sort on another predicated: no verdict",
     "[{'key':{'$**':1}}]", "{'a':5,'b':{'$gt':1}}", "{'b':1}", NULL, NULL, NULL, NV},
    {"path wildcard index, other path", "[{'key':{'x.$**':1}}]", "{'a':{'$gt':1}}", "{'a':1}", NULL,
     NULL, NULL, B},
    {"path wildcard index, its path: no verdict", "[{'key':{'x.$**':1}}]", "{'x.a':{'$gt':1}}",
     "{'x.a':1}", NULL, NULL, NULL, NV},
    {"hidden wildcard index is ignored", "[{'key':{'$**':1},'hidden':true}]", NULL, "{'a':1}", NULL,
     NULL, NULL, B},
    /* A compound wildcard index led by regular keys, with no predicate
     * or sort key on a path its wildcard key holds: its generic
     * expansion orders by the regular prefix only, and is sparse
     * (jstests compound_wildcard_index_prefix.js). Was NV before. */
    {"compound wildcard: its regular prefix", CWI, "{'a':5}", "{'b':1}", NULL, NULL, NULL, P},
    {"compound wildcard: a range on its prefix", CWI, "{'a':{'$gt':5}}", "{'a':1,'b':1}", NULL,
     NULL, NULL, P},
    {"compound wildcard: a key after the wildcard", CWI, "{'a':5}", "{'c':1}", NULL, NULL, NULL, B},
    {"compound wildcard: prefix then a key after it", CWI, "{'a':{'$gt':5}}", "{'a':1,'c':1}", NULL,
     NULL, NULL, B},
    {"compound wildcard: never scanned whole (sparse)", CWI, NULL, "{'a':1}", NULL, NULL, NULL, B},
    {"compound wildcard: null on its prefix (sparse)", CWI, "{'a':null}", "{'b':1}", NULL, NULL,
     NULL, B},
    /* With a predicate on a path its wildcard key holds, as that
     * expansion, {a: 1, b: 1, w.x: 1, c: 1}: b unbound orders w.x by b
     * first (this row was NV before), and orders by b whatever w.x holds */
    {"compound wildcard: a predicate on a wildcard path after an unbound key", CWI,
     "{'a':5,'w.x':{'$gt':1}}", "{'w.x':1}", NULL, NULL, NULL, B},
    {"compound wildcard: a predicate on a wildcard path, a sort on the next regular key", CWI,
     "{'a':5,'w.x':{'$gt':1}}", "{'b':1}", NULL, NULL, NULL, P},
    {"compound wildcard: a predicate on a wildcard path, a sort on a key after it", CWI,
     "{'a':5,'w.x':{'$gt':1}}", "{'c':1}", NULL, NULL, NULL, B},
    {"compound wildcard: a sort on the predicated wildcard path: no verdict", CWI,
     "{'a':5,'b':6,'w.x':{'$gt':1}}", "{'w.x':1}", NULL, NULL, NULL, NV},
    {"compound wildcard: a sort on a wildcard path with no predicate on it", CWI, "{'a':5}",
     "{'w.x':1}", NULL, NULL, NULL, B},
    {"unreadable key value: no verdict", "[{'key':{'a':true}}]", NULL, "{'a':1}", NULL, NULL, NULL,
     NV},
    {"$text query: no verdict", ABCD, "{'$text':{'$search':'x'}}", "{'b':1}", NULL, NULL, NULL, NV},
    {"an operator mongod refuses: no verdict", ABCD, "{'a':{'$notAnOperator':1}}", "{'z':1}", NULL,
     NULL, NULL, NV},
    {"a top-level operator mongod refuses: no verdict", ABCD, "{'$invalid':1}", "{'z':1}", NULL,
     NULL, NULL, NV},
    {"an operator mongod refuses in an $or branch: no verdict", ABCD,
     "{'$or':[{'a':1},{'a':{'$bogus':1}}]}", "{'z':1}", NULL, NULL, NULL, NV},
    {"$near query: no verdict", "[{'key':{'loc':'2dsphere'}}]",
     "{'loc':{'$near':{'$geometry':{'type':'Point','coordinates':[0,0]}}}}", "{'b':1}", NULL, NULL,
     NULL, NV},

    /* ---- special keys end the usable key pattern ---- */
    {"hashed prefix pinned by equality", "[{'key':{'a':'hashed','b':1}}]", "{'a':5}", "{'b':1}",
     NULL, NULL, NULL, P},
    /* $exists: false is the null point (SortWhenHashedFieldIsPrefix) */
    {"hashed prefix pinned by $exists false", "[{'key':{'x':'hashed','y':-1,'z':1}}]",
     "{'x':{'$exists':false}}", "{'y':1,'z':-1}", NULL, NULL, NULL, P},
    {"btree prefix pinned by $exists false", "[{'key':{'x':1,'y':1}}]", "{'x':{'$exists':false}}",
     "{'y':-1}", NULL, NULL, NULL, P},
    {"sparse prefix: $exists false cannot use it", "[{'key':{'x':1,'y':1},'sparse':true}]",
     "{'x':{'$exists':false}}", "{'y':1}", NULL, NULL, NULL, B},
    {"hashed prefix without equality", "[{'key':{'a':'hashed','b':1}}]", NULL, "{'b':1}", NULL,
     NULL, NULL, B},
    {"fields after 2dsphere", "[{'key':{'a':1,'loc':'2dsphere','b':1}}]",
     "{'a':5,'loc':{'$geoWithin':{'$centerSphere':[[0,0],1]}}}", "{'b':1}", NULL, NULL, NULL, B},
    {"fields before 2dsphere, with a geo predicate", "[{'key':{'a':1,'loc':'2dsphere','b':1}}]",
     "{'loc':{'$geoWithin':{'$centerSphere':[[0,0],1]}}}", "{'a':-1}", NULL, NULL, NULL, P},
    {"equality before 2dsphere, with a geo predicate", "[{'key':{'a':1,'loc':'2dsphere'}}]",
     "{'a':5,'loc':{'$geoWithin':{'$centerSphere':[[0,0],1]}}}", "{'a':1}", NULL, NULL, NULL, P},
    /* Geo and text indexes are geo-/text-sparse: the planner never scans
     * one whole to provide a sort, nor uses it without its own operator. */
    {"2dsphere index without a geo predicate", "[{'key':{'a':1,'loc':'2dsphere'}}]", "{'a':5}",
     "{'a':1}", NULL, NULL, NULL, B},
    {"2dsphere index is not scanned whole", "[{'key':{'a':1,'loc':'2dsphere'}}]", NULL, "{'a':1}",
     NULL, NULL, NULL, B},
    {"hashed index is scanned whole for its prefix", "[{'key':{'a':1,'h':'hashed'}}]", NULL,
     "{'a':-1}", NULL, NULL, NULL, P},

    /* ---- hints ---- */
    {"hint by name that serves", "[{'key':{'a':1}},{'key':{'b':1}}]", NULL, "{'a':1}", NULL, NULL,
     "a_1", P},
    {"hint by name that does not serve", "[{'key':{'a':1}},{'key':{'b':1}}]", NULL, "{'a':1}", NULL,
     NULL, "b_1", B},
    {"hint by key pattern", "[{'key':{'a':1}},{'key':{'b':1}}]", NULL, "{'b':-1}", NULL, "{'b':1}",
     NULL, P},
    {"hint by key pattern that does not serve", "[{'key':{'a':1}},{'key':{'b':1}}]", NULL,
     "{'a':1}", NULL, "{'b':1}", NULL, B},
    {"hint names no index", "[{'key':{'a':1}}]", NULL, "{'a':1}", NULL, NULL, "nope_1", NV},
    {"hint names a hidden index", "[{'key':{'a':1},'hidden':true}]", NULL, "{'a':1}", NULL, NULL,
     "a_1", NV},
    {"hinted sparse index is used whole", "[{'key':{'a':1},'sparse':true}]", NULL, "{'a':1}", NULL,
     NULL, "a_1", P},
    {"hint $natural forces a collection scan", "[{'key':{'a':1}}]", NULL, "{'a':1}", NULL,
     "{'$natural':1}", NULL, B},
    {"hinted index other than a wildcard", "[{'key':{'$**':1}},{'key':{'a':1}}]", NULL, "{'a':1}",
     NULL, NULL, "a_1", P},

    /* ---- collation ---- */
    {"index collation fr, query simple", "[{'key':{'name':1},'collation':" FR "}]", NULL,
     "{'name':1}", NULL, NULL, NULL, B},
    {"index collation fr, query fr", "[{'key':{'name':1},'collation':" FR "}]", NULL, "{'name':1}",
     FR, NULL, NULL, P},
    {"strength defaults to 3", "[{'key':{'name':1},'collation':{'locale':'fr','strength':3}}]",
     NULL, "{'name':1}", FR, NULL, NULL, P},
    {"strength 2 index, strength 3 query",
     "[{'key':{'name':1},'collation':{'locale':'fr','strength':2}}]", NULL, "{'name':1}", FR, NULL,
     NULL, B},
    {"simple index, query with collation", "[{'key':{'name':1}}]", NULL, "{'name':1}", FR, NULL,
     NULL, B},
    {"locale simple is the simple collation", "[{'key':{'name':1}}]", NULL, "{'name':1}",
     "{'locale':'simple'}", NULL, NULL, P},
    {"collation mismatch, numeric bounds on the sort field", "[{'key':{'n':1},'collation':" FR "}]",
     "{'n':{'$gt':5}}", "{'n':1}", NULL, NULL, NULL, P},
    {"collation mismatch, numeric equality prefix and date range",
     "[{'key':{'status':1,'created':1},'collation':" FR "}]",
     "{'status':3,'created':{'$gt':{'$date':'2024-01-01T00:00:00Z'}}}", "{'created':1}", NULL, NULL,
     NULL, P},
    {"collation mismatch, string equality is no point",
     "[{'key':{'status':1,'created':1},'collation':" FR "}]",
     "{'status':'A','created':{'$gt':{'$date':'2024-01-01T00:00:00Z'}}}", "{'created':1}", NULL,
     NULL, NULL, B},
    {"collation mismatch, sort field unbounded",
     "[{'key':{'status':1,'created':1},'collation':" FR "}]", "{'status':3}", "{'created':1}", NULL,
     NULL, NULL, B},

    /* ---- ESR's own example, before the index exists ---- */
    {"ESR example without its index", "[{'key':{'manufacturer':1}}]",
     "{'manufacturer':'Ford','cost':{'$gt':10000}}", "{'model':1}", NULL, NULL, NULL, B},
    {"ESR example with its index", "[{'key':{'manufacturer':1,'model':1,'cost':1}}]",
     "{'manufacturer':'Ford','cost':{'$gt':10000}}", "{'model':1}", NULL, NULL, NULL, P},
};

/* ---- helpers ---- */

/* The server's default index name: a_1_b_-1, loc_2dsphere. */
static void default_name(const bson_t *key, char *out, size_t len)
{
	bson_iter_t it;
	size_t n = 0;
	out[0] = '\0';
	bson_iter_init(&it, key);
	while (bson_iter_next(&it)) {
		char part[300];
		if (BSON_ITER_HOLDS_UTF8(&it))
			snprintf(part, sizeof part, "%s%s_%s", n ? "_" : "", bson_iter_key(&it),
			         bson_iter_utf8(&it, NULL));
		else
			snprintf(part, sizeof part, "%s%s_%d", n ? "_" : "", bson_iter_key(&it),
			         (int)bson_iter_as_int64(&it));
		strncat(out, part, len - strlen(out) - 1);
		n++;
	}
}

/* _id_ first, then the case's specs, named by default when unnamed. */
static index_set *make_set(const char *json)
{
	bson_t *arr = fx_doc(json);
	bson_t *specs[40];
	size_t n = 0;
	bson_iter_t it;

	specs[n++] = fx_doc("{'v':2,'key':{'_id':1},'name':'_id_'}");
	bson_iter_init(&it, arr);
	while (bson_iter_next(&it)) {
		const uint8_t *data;
		uint32_t len;
		bson_t spec, key;
		bson_iter_t kit;
		bson_iter_document(&it, &len, &data);
		bson_init_static(&spec, data, len);
		bson_t *copy = bson_copy(&spec);
		if (!bson_has_field(&spec, "name") && bson_iter_init_find(&kit, &spec, "key")) {
			char name[256];
			bson_iter_document(&kit, &len, &data);
			bson_init_static(&key, data, len);
			default_name(&key, name, sizeof name);
			BSON_APPEND_UTF8(copy, "name", name);
		}
		specs[n++] = copy;
	}
	index_set *s = index_set_from_specs((const bson_t *const *)specs, n);
	for (size_t i = 0; i < n; i++)
		bson_destroy(specs[i]);
	bson_destroy(arr);
	return s;
}

static const char *verdict_name(sort_verdict v)
{
	return v == P ? "PROVIDED" : v == B ? "BLOCKING" : "NO_VERDICT";
}

static sort_verdict run(const sort_case *c, char *sugg, size_t slen, char *detail, size_t dlen)
{
	index_set *s = make_set(c->indexes);
	bson_t *filter = fx_doc(c->filter), *sort = fx_doc(c->sort), *coll = fx_doc(c->collation),
	       *hint = fx_doc(c->hint_doc);
	sort_query q = {
	    .db = "shop",
	    .coll = "orders",
	    .filter = filter,
	    .sort = sort,
	    .collation = coll,
	    .hint_doc = hint,
	    .hint_name = c->hint_name,
	};
	sort_verdict v = sort_check(s, &q, sugg, slen, detail, dlen);
	if (filter)
		bson_destroy(filter);
	bson_destroy(sort);
	if (coll)
		bson_destroy(coll);
	if (hint)
		bson_destroy(hint);
	index_set_release(s);
	return v;
}

/* ---- tests ---- */

static void test_table(void **state)
{
	size_t n = sizeof cases / sizeof cases[0], failed = 0, provided = 0, blocking = 0;
	for (size_t i = 0; i < n; i++) {
		char sugg[512], detail[512];
		sort_verdict v = run(&cases[i], sugg, sizeof sugg, detail, sizeof detail);
		if (v != cases[i].want) {
			print_error("case \"%s\": want %s, got %s (%s)\n", cases[i].name,
			            verdict_name(cases[i].want), verdict_name(v), detail);
			failed++;
		}
		/* A finding always carries a suggestion; nothing else does. */
		if (v == B && strncmp(sugg, "db.getSiblingDB(\"shop\")", 23) != 0) {
			print_error("case \"%s\": blocking without a suggestion\n", cases[i].name);
			failed++;
		}
		if (v == B && !fx_suggestion_keys_ok(sugg)) {
			print_error("case \"%s\": no valid createIndex: %s\n", cases[i].name, sugg);
			failed++;
		}
		if (v != B && sugg[0] != '\0') {
			print_error("case \"%s\": suggestion without a finding\n", cases[i].name);
			failed++;
		}
		if (detail[0] == '\0') {
			print_error("case \"%s\": no detail\n", cases[i].name);
			failed++;
		}
		provided += cases[i].want == P;
		blocking += cases[i].want == B;
	}
	assert_int_equal(failed, 0);
	assert_true(n >= 30);
	/* The table must test silence at least as hard as alarms. */
	assert_true(provided >= blocking);
}

static void test_detail_lists_indexes(void **state)
{
	const sort_case c = {"detail",
	                     "[{'key':{'status':1}}]",
	                     "{'status':'A'}",
	                     "{'created':-1}",
	                     NULL,
	                     NULL,
	                     NULL,
	                     B};
	char sugg[512], detail[512];
	assert_int_equal(run(&c, sugg, sizeof sugg, detail, sizeof detail), B);
	assert_string_equal(detail,
	                    "sort {\"created\": -1} on shop.orders: no index provides it (indexes: "
	                    "_id_, status_1)");
	assert_string_equal(
	    sugg, "db.getSiblingDB(\"shop\").getCollection(\"orders\").createIndex({\"status\": 1, "
	          "\"created\": -1})");
}

static void test_detail_never_shows_values(void **state)
{
	const sort_case c = {"values",
	                     "[]",
	                     "{'secret':'TOPSECRET','n':{'$gt':424242}}",
	                     "{'created':-1}",
	                     NULL,
	                     NULL,
	                     NULL,
	                     B};
	char sugg[512], detail[512];
	assert_int_equal(run(&c, sugg, sizeof sugg, detail, sizeof detail), B);
	assert_null(strstr(detail, "TOPSECRET"));
	assert_null(strstr(detail, "424242"));
	assert_null(strstr(sugg, "TOPSECRET"));
	assert_null(strstr(sugg, "424242"));
}

static void test_detail_names_the_cause(void **state)
{
	char sugg[512], detail[512];
	const sort_case coll = {
	    "c", "[{'key':{'name':1},'collation':" FR "}]", NULL, "{'name':1}", NULL, NULL, NULL,
	    B};
	assert_int_equal(run(&coll, sugg, sizeof sugg, detail, sizeof detail), B);
	assert_non_null(strstr(detail, "with the query's collation"));

	const sort_case hint = {
	    "h", "[{'key':{'a':1}},{'key':{'b':1}}]", NULL, "{'a':1}", NULL, NULL, "b_1", B};
	assert_int_equal(run(&hint, sugg, sizeof sugg, detail, sizeof detail), B);
	assert_non_null(strstr(detail, "hinted index b_1"));

	const sort_case nat = {"n", "[]", NULL, "{'a':1}", NULL, "{'$natural':1}", NULL, B};
	assert_int_equal(run(&nat, sugg, sizeof sugg, detail, sizeof detail), B);
	assert_non_null(strstr(detail, "$natural"));

	const sort_case sparse = {
	    "s", "[{'key':{'a':1},'sparse':true}]", "{'a':{'$ne':1}}", "{'a':1}", NULL, NULL, NULL,
	    NV};
	assert_int_equal(run(&sparse, sugg, sizeof sugg, detail, sizeof detail), NV);
	assert_non_null(strstr(detail, "a_1 is sparse"));

	const sort_case by = {"p", ABCD, "{'a':5}", "{'b':1}", NULL, NULL, NULL, P};
	assert_int_equal(run(&by, sugg, sizeof sugg, detail, sizeof detail), P);
	assert_string_equal(detail,
	                    "sort {\"b\": 1} on shop.orders: provided by index a_1_b_1_c_1_d_1");
}

static void test_opaque_set_gives_no_verdict(void **state)
{
	index_set *s = index_set_new_opaque("the namespace is a view");
	bson_t *sort = fx_doc("{'a':1}");
	sort_query q = {.db = "shop", .coll = "v", .sort = sort};
	char detail[256];
	assert_int_equal(sort_check(s, &q, NULL, 0, detail, sizeof detail), NV);
	assert_non_null(strstr(detail, "view"));
	/* No index list at all: no verdict either. */
	assert_int_equal(sort_check(NULL, &q, NULL, 0, NULL, 0), NV);
	bson_destroy(sort);
	index_set_release(s);
}

static void test_invalid_sort_gives_no_verdict(void **state)
{
	const sort_case c = {"bad", "[]", NULL, "{'a':'up'}", NULL, NULL, NULL, NV};
	char sugg[64], detail[256];
	assert_int_equal(run(&c, sugg, sizeof sugg, detail, sizeof detail), NV);
}

static void test_too_many_predicates_gives_no_verdict(void **state)
{
	bson_t *filter = bson_new();
	for (int i = 0; i < 70; i++) {
		char k[16];
		snprintf(k, sizeof k, "f%d", i);
		BSON_APPEND_INT32(filter, k, i);
	}
	bson_t *sort = fx_doc("{'zz':1}");
	index_set *s = make_set("[]");
	sort_query q = {.db = "d", .coll = "c", .filter = filter, .sort = sort};
	assert_int_equal(sort_check(s, &q, NULL, 0, NULL, 0), NV);
	index_set_release(s);
	bson_destroy(sort);
	bson_destroy(filter);
}

static void test_index_set_reads_specs(void **state)
{
	char err[128];
	index_set *s = index_set_from_json(
	    "[{\"v\":2,\"key\":{\"_id\":1},\"name\":\"_id_\"},"
	    "{\"key\":{\"a\":1,\"b\":-1.0,\"t\":\"text\",\"n\":{\"$numberLong\":\"-1\"}},\"name\":"
	    "\"x\","
	    "\"sparse\":true,\"hidden\":true,\"collation\":{\"locale\":\"fr\"}},"
	    "{\"key\":{\"s.$**\":1},\"name\":\"w\",\"partialFilterExpression\":{\"a\":1}},"
	    "{\"key\":{\"c\":1},\"name\":\"c\",\"collation\":{\"locale\":\"simple\"}}]",
	    err, sizeof err);
	assert_non_null(s);
	assert_int_equal(index_set_count(s), 4);
	const index_def *x = index_set_get(s, 1);
	assert_string_equal(x->name, "x");
	assert_int_equal(x->nkeys, 4);
	assert_int_equal(x->keys[0].direction, 1);
	assert_int_equal(x->keys[1].direction, -1);
	assert_int_equal(x->keys[2].direction, 0);
	assert_int_equal(x->keys[3].direction, -1);
	assert_true(x->sparse && x->hidden && !x->partial && !x->wildcard && !x->odd && x->plugin);
	assert_non_null(x->collation);
	const index_def *w = index_set_get(s, 2);
	assert_true(w->wildcard && w->partial);
	assert_null(index_set_get(s, 3)->collation); /* simple */
	assert_null(index_set_get(s, 4));
	assert_false(index_set_is_opaque(s, NULL));

	/* Shared by reference: the last release frees. */
	index_set *again = index_set_retain(s);
	assert_ptr_equal(again, s);
	index_set_release(s);
	assert_int_equal(index_set_count(again), 4);
	index_set_release(again);

	assert_null(index_set_from_json("{\"not\": ", err, sizeof err));
	assert_null(index_set_from_json("[1, 2]", err, sizeof err));
}

/* ---- multikey, learned from explain ----
 *
 * Replies recorded in the shape mongod documents for explain with
 * verbosity "queryPlanner" (FerretDB, the test server, answers in its own
 * shape and gives no multikey facts, which the last cases show). */

/* mongod 5.0, classic engine: LIMIT > FETCH > IXSCAN. */
#define EXPLAIN_CLASSIC                                                                            \
	"{'explainVersion':'1','queryPlanner':{'namespace':'shop.orders','indexFilterSet':false,"  \
	"'parsedQuery':{},'winningPlan':{'stage':'LIMIT','limitAmount':1,'inputStage':{'stage':"   \
	"'FETCH','inputStage':{'stage':'IXSCAN','keyPattern':{'a':1,'tags':1},'indexName':"        \
	"'a_1_tags_1','isMultiKey':true,'multiKeyPaths':{'a':[],'tags':['tags']},'isUnique':"      \
	"false,'isSparse':false,'isPartial':false,'indexVersion':2,'direction':'forward',"         \
	"'indexBounds':{'a':['[MinKey, MaxKey]'],'tags':['[MinKey, MaxKey]']}}}},"                 \
	"'rejectedPlans':[]},'ok':1}"
/* mongod 7.0, slot-based engine: the plan under queryPlan. Not multikey. */
#define EXPLAIN_SBE                                                                                \
	"{'explainVersion':'2','queryPlanner':{'namespace':'shop.orders','winningPlan':{"          \
	"'queryPlan':{'stage':'LIMIT','planNodeId':3,'inputStage':{'stage':'FETCH','planNodeId':"  \
	"2,"                                                                                       \
	"'inputStage':{'stage':'IXSCAN','planNodeId':1,'keyPattern':{'a':1,'tags':1},'indexName':" \
	"'a_1_tags_1','isMultiKey':false,'multiKeyPaths':{'a':[],'tags':[]},'direction':"          \
	"'forward'}}},'slotBasedPlan':{'slots':'$$RESULT=s11','stages':'[3] limit 1'}},"           \
	"'rejectedPlans':[]},'ok':1}"
/* mongos: one winning plan per shard; one shard has arrays in tags. */
#define EXPLAIN_MONGOS                                                                             \
	"{'queryPlanner':{'mongosPlannerVersion':1,'winningPlan':{'stage':'SHARD_MERGE','shards':" \
	"["                                                                                        \
	"{'shardName':'s0','winningPlan':{'stage':'IXSCAN','indexName':'a_1_tags_1','isMultiKey':" \
	"false,'multiKeyPaths':{'a':[],'tags':[]}}},{'shardName':'s1','winningPlan':{'stage':"     \
	"'LIMIT','inputStage':{'stage':'IXSCAN','indexName':'a_1_tags_1','isMultiKey':true,"       \
	"'multiKeyPaths':{'a':[],'tags':['tags']}}}}]}},'ok':1}"
/* FerretDB v1.24.2 (SQLite), recorded: its own plan text, no IXSCAN facts. */
#define EXPLAIN_FERRETDB                                                                           \
	"{'queryPlanner':{'Plan':['id=5 parent=0 notused=0 detail=SCAN c_e60c2c52']},"             \
	"'explainVersion':'1','command':{'find':'c','filter':{},'hint':{'a':1,'tags':1},'limit':"  \
	"1,"                                                                                       \
	"'$db':'mg'},'serverInfo':{'host':'vm','version':'7.0.42','gitVersion':'unknown',"         \
	"'ferretdbVersion':'v1.24.2'},'filterPushdown':false,'sortPushdown':false,"                \
	"'limitPushdown':true,'ok':1.0}"
/* mongod 3.2: isMultiKey without multiKeyPaths does not say which field. */
#define EXPLAIN_OLD                                                                                \
	"{'queryPlanner':{'winningPlan':{'stage':'FETCH','inputStage':{'stage':'IXSCAN',"          \
	"'indexName':'a_1_tags_1','isMultiKey':true}}},'ok':1}"
/* The winning plan is a collection scan; the IXSCAN is only rejected. */
#define EXPLAIN_REJECTED                                                                           \
	"{'queryPlanner':{'winningPlan':{'stage':'COLLSCAN'},'rejectedPlans':[{'stage':'IXSCAN',"  \
	"'indexName':'a_1_tags_1','isMultiKey':true,'multiKeyPaths':{'tags':['tags']}}]},'ok':1}"

static index_set *multikey_set(const char *explain, bool *learned)
{
	index_set *s = make_set("[{'key':{'a':1,'tags':1}}]");
	bson_t *reply = fx_doc(explain);
	*learned = index_set_learn_multikey(s, 1, reply);
	bson_destroy(reply);
	return s;
}

static sort_verdict judge(const index_set *s, const char *filter_json, const char *sort_json)
{
	bson_t *filter = fx_doc(filter_json), *sort = fx_doc(sort_json);
	sort_query q = {.db = "shop", .coll = "orders", .filter = filter, .sort = sort};
	sort_verdict v = sort_check(s, &q, NULL, 0, NULL, 0);
	if (filter)
		bson_destroy(filter);
	bson_destroy(sort);
	return v;
}

static void test_multikey_from_explain(void **state)
{
	bool learned;
	index_set *s = multikey_set(EXPLAIN_CLASSIC, &learned);
	const index_def *d = index_set_get(s, 1);
	assert_true(learned && d->multikey_known);
	assert_int_equal(d->multikey_keys, 2u); /* tags, not a */
	/* tags restricted and sorted on: no order from the index */
	assert_int_equal(judge(s, "{'a':5,'tags':'x'}", "{'tags':1}"), B);
	assert_int_equal(judge(s, "{'a':5,'tags':{'$in':['x','y']}}", "{'tags':-1}"), B);
	/* tags unrestricted: the scan delivers it in order */
	assert_int_equal(judge(s, "{'a':5}", "{'tags':1}"), P);
	assert_int_equal(judge(s, NULL, "{'a':1,'tags':1}"), P);
	/* restricted but not sorted on: fine */
	assert_int_equal(judge(s, "{'a':5,'tags':'x'}", "{'a':1}"), P);
	index_set_release(s);

	/* The same queries with the index not multikey, or unknown: provided. */
	const char *const unknown[] = {EXPLAIN_SBE, EXPLAIN_FERRETDB, EXPLAIN_OLD, EXPLAIN_REJECTED,
	                               "{'ok':0,'errmsg':'hint provided does not correspond'}"};
	const bool knows[] = {true, false, false, false, false};
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		s = multikey_set(unknown[i], &learned);
		assert_int_equal(learned, knows[i]);
		assert_int_equal(index_set_get(s, 1)->multikey_keys, 0);
		assert_int_equal(judge(s, "{'a':5,'tags':'x'}", "{'tags':1}"), P);
		index_set_release(s);
	}

	/* mongos: any shard with arrays makes the field multikey. */
	s = multikey_set(EXPLAIN_MONGOS, &learned);
	assert_true(learned);
	assert_int_equal(index_set_get(s, 1)->multikey_keys, 2u);
	assert_int_equal(judge(s, "{'a':5,'tags':'x'}", "{'tags':1}"), B);
	index_set_release(s);
}

static void test_key_pattern_for_the_hint(void **state)
{
	index_set *s = make_set("[{'key':{'a':1,'b':-1}},{'key':{'h':'hashed'}}]");
	bson_t kp;
	index_def_key_pattern(index_set_get(s, 1), &kp);
	char *json = bson_as_relaxed_extended_json(&kp, NULL);
	assert_string_equal(json, "{ \"a\" : 1, \"b\" : -1 }");
	bson_free(json);
	bson_destroy(&kp);
	index_def_key_pattern(index_set_get(s, 2), &kp);
	json = bson_as_relaxed_extended_json(&kp, NULL);
	assert_string_equal(json, "{ \"h\" : \"hashed\" }");
	bson_free(json);
	bson_destroy(&kp);
	index_set_release(s);
}

/* ---- through the engine: where a request holds a sort ---- */

static index_cache *forms_cache(void)
{
	static const char *const specs[][2] = {
	    {"orders", "[{'key':{'_id':1},'name':'_id_'},{'key':{'a':1,'b':1},'name':'a_1_b_1'}]"},
	    {"other", "[{'key':{'_id':1},'name':'_id_'},{'key':{'x':1},'name':'x_1'}]"},
	};
	return fx_cache_of(specs, sizeof(specs) / sizeof(specs[0]), 100);
}

#define AGG(stages) "{'aggregate':'orders','pipeline':[" stages "],'cursor':{}}"
#define MOVE        "move the $sort"

static const fx_expect form_cases[] = {
    {"$sort inside $facet", true, "test.orders", "aggregate",
     "sort {\"b\": 1} on test.orders: inside $facet", MOVE},
    {"$sort inside $facet, after a leading $sort an index provides", true, "test.orders",
     "aggregate", "inside $facet, where no index can provide it", MOVE},
    {"$facet without a $sort", false, NULL, NULL, NULL, NULL},
    {"$unionWith: a leading $sort no index on its collection provides", true, "test.other",
     "aggregate", "sort {\"y\": 1} on test.other: no index provides it",
     "getCollection(\"other\").createIndex({\"w\": 1, \"y\": 1})"},
    {"$unionWith: a leading $sort its collection's index provides", false, NULL, NULL, NULL, NULL},
    {"updateOne's sort no index provides", true, "test.orders", "update",
     "sort {\"c\": 1} on test.orders: no index provides it", "createIndex({\"a\": 1, \"c\": 1})"},
    {"updateOne's sort an index provides", false, NULL, NULL, NULL, NULL},
    {"bulkWrite updateOne's sort no index provides", true, "test.orders", "bulkWrite",
     "sort {\"c\": -1} on test.orders", NULL},
    /* a $match after a $sort moves before it: its equality is the index's
     * prefix (before round 4 the sort was judged with no filter) */
    {"$sort then $match: the equality prefix provides it", false, NULL, NULL, NULL, NULL},
    {"two $sort stages: the last is the sort", false, NULL, NULL, NULL, NULL},
    {"$sort, $limit, then $match: the limit ends the run", true, "test.orders", "aggregate",
     "sort {\"b\": 1} on test.orders", NULL},
    {"$sort, $project, then $match: the match moves before both", false, NULL, NULL, NULL, NULL},
    /* a $sort right after a $lookup moves before it (tryReorderingWithSort) */
    {"$lookup then a $sort no index provides", true, "test.orders", "aggregate",
     "sort {\"z\": 1} on test.orders: no index provides it", NULL},
    {"$lookup then a $sort the equality prefix provides", false, NULL, NULL, NULL, NULL},
    {"$lookup then a $sort on its as field: in memory after the join, not judged", false, NULL,
     NULL, NULL, NULL},
    /* a $facet's input is what the leading filter selects: _id points
     * bound it to a few documents, as in a find */
    {"$facet after an _id point: a few documents", false, NULL, NULL, NULL, NULL},
    {"$facet after an _id point and an $unwind", true, "test.orders", "aggregate", "inside $facet",
     MOVE},
    /* mongod moves no $sort before a $project / $addFields / $set /
     * $unset (a single-document transformation swaps with $skip only):
     * until stop 40 this sort was not judged */
    {"$project then a $sort an index would provide: in memory", true, "test.orders", "aggregate",
     "sort {\"b\": 1} on test.orders: after $project, which mongod moves no $sort ahead of",
     "move the $sort (and a $limit after it) before $project"},
    {"$addFields then a $sort no index provides: in memory", true, "test.orders", "aggregate",
     "after $addFields", "before $addFields"},
    {"$set then a $sort on the field it computes: not judged", false, NULL, NULL, NULL, NULL},
    {"$project then a $sort after _id points: a few documents", false, NULL, NULL, NULL, NULL},
    /* and it moves one before an $unwind whose path it does not name
     * (canPushSortBack): judged as the leading sort */
    {"$unwind then a $sort the equality prefix provides", false, NULL, NULL, NULL, NULL},
    {"$unwind then a $sort no index provides", true, "test.orders", "aggregate",
     "sort {\"z\": 1} on test.orders: no index provides it", "createIndex({\"a\": 1, \"z\": 1})"},
    {"$unwind then a $sort on the unwound path: not judged", false, NULL, NULL, NULL, NULL},
    {"$group then a $sort: not judged", false, NULL, NULL, NULL, NULL},
};

static const char *const form_json[] = {
    AGG("{'$match':{'a':1}},{'$facet':{'top':[{'$match':{'z':'SECRET'}},{'$sort':{'b':1}},"
        "{'$limit':5}],'n':[{'$count':'n'}]}}"),
    AGG("{'$sort':{'a':1}},{'$facet':{'x':[{'$sort':{'a':1}},{'$limit':5}]}}"),
    AGG("{'$match':{'a':1}},{'$facet':{'n':[{'$count':'n'}],'g':[{'$group':{'_id':'$b'}}]}}"),
    AGG("{'$match':{'a':1}},{'$unionWith':{'coll':'other','pipeline':[{'$match':{'w':"
        "'SECRET'}},{'$sort':{'y':1}}]}}"),
    AGG("{'$match':{'a':1}},{'$unionWith':{'coll':'other','pipeline':[{'$match':{'x':{'$gt':"
        "1}}},{'$sort':{'x':-1}}]}}"),
    "{'update':'orders','updates':[{'q':{'a':'SECRET'},'u':{'$set':{'z':1}},'sort':{'c':1}}]}",
    "{'update':'orders','updates':[{'q':{'a':'SECRET'},'u':{'$set':{'z':1}},'sort':{'b':-1}}]}",
    "{'bulkWrite':1,'ops':[{'update':0,'filter':{'a':1},'updateMods':{'$set':{'z':1}},'sort':{"
    "'c':-1}}],'nsInfo':[{'ns':'test.orders'}]}",
    AGG("{'$sort':{'b':1}},{'$match':{'a':'SECRET'}}"),
    AGG("{'$sort':{'z':1}},{'$match':{'a':'SECRET'}},{'$sort':{'b':1}}"),
    AGG("{'$sort':{'b':1}},{'$limit':5},{'$match':{'a':'SECRET'}}"),
    AGG("{'$sort':{'b':1}},{'$project':{'a':1,'b':1}},{'$match':{'a':'SECRET'}}"),
    AGG("{'$match':{'a':'SECRET'}},{'$lookup':{'from':'other','localField':'k',"
        "'foreignField':'x','as':'j'}},{'$sort':{'z':1}}"),
    AGG("{'$match':{'a':'SECRET'}},{'$lookup':{'from':'other','localField':'k',"
        "'foreignField':'x','as':'j'}},{'$sort':{'b':1}}"),
    AGG("{'$match':{'a':'SECRET'}},{'$lookup':{'from':'other','localField':'k',"
        "'foreignField':'x','as':'j'}},{'$sort':{'j.x':1}}"),
    AGG("{'$match':{'_id':5}},{'$facet':{'f':[{'$sort':{'b':1}}]}}"),
    AGG("{'$match':{'_id':5}},{'$unwind':'$items'},{'$facet':{'f':[{'$sort':{'b':1}}]}}"),
    AGG("{'$match':{'a':'SECRET'}},{'$project':{'a':1,'b':1}},{'$sort':{'b':1}},{'$limit':5}"),
    AGG("{'$match':{'a':'SECRET'}},{'$addFields':{'t':1}},{'$sort':{'z':-1}}"),
    AGG("{'$match':{'a':'SECRET'}},{'$set':{'z':{'$add':['$b',1]}}},{'$sort':{'z':1}}"),
    AGG("{'$match':{'_id':{'$in':[1,2]}}},{'$project':{'b':1}},{'$sort':{'b':1}}"),
    AGG("{'$match':{'a':'SECRET'}},{'$unwind':'$items'},{'$sort':{'b':1}}"),
    AGG("{'$match':{'a':'SECRET'}},{'$unwind':'$items'},{'$sort':{'z':1}}"),
    AGG("{'$match':{'a':'SECRET'}},{'$unwind':'$items'},{'$sort':{'items.q':1}}"),
    AGG("{'$match':{'a':'SECRET'}},{'$group':{'_id':'$b','n':{'$sum':1}}},{'$sort':{'_id':1}}"),
};

static void test_forms_through_the_engine(void **state)
{
	index_cache *ic = forms_cache();
	size_t n = sizeof(form_cases) / sizeof(form_cases[0]);
	assert_int_equal(n, sizeof(form_json) / sizeof(form_json[0]));
	for (size_t i = 0; i < n; i++) {
		fx_run_rule_case_ic(RULE_INDEX_MISMATCHED_SORT, RULE_LOG, ic, form_json[i], NULL, 0,
		                    &form_cases[i]);
		fx_run_rule_case_ic(RULE_INDEX_MISMATCHED_SORT, RULE_BLOCK, ic, form_json[i], NULL,
		                    0, &form_cases[i]);
	}
	index_cache_free(ic);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_detail_lists_indexes),
	    cmocka_unit_test(test_detail_never_shows_values),
	    cmocka_unit_test(test_detail_names_the_cause),
	    cmocka_unit_test(test_opaque_set_gives_no_verdict),
	    cmocka_unit_test(test_invalid_sort_gives_no_verdict),
	    cmocka_unit_test(test_too_many_predicates_gives_no_verdict),
	    cmocka_unit_test(test_index_set_reads_specs),
	    cmocka_unit_test(test_multikey_from_explain),
	    cmocka_unit_test(test_key_pattern_for_the_hint),
	    cmocka_unit_test(test_forms_through_the_engine),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
