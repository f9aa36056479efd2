/* The planner question of collection-scan alone (rule_scan_filter_collated,
 * ixselect.h): which filters an index of each kind can bound, per operator,
 * as mongod's planner_ixselect decides; $or branch by branch; hints; the
 * query's collation against each index's, and the collection's default.
 * One row per case, each naming what it checks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "analyzers/planner/index_set.h"
#include "analyzers/rules/rule_scan.h"
#include "fixtures/analyzer_fixture.h"

/* One index of each kind (m_1 learns it is multikey on m below). */
#define KINDS                                                                                      \
	"[{'key':{'_id':1},'name':'_id_'},"                                                        \
	"{'key':{'a':1},'name':'a_1'},"                                                            \
	"{'key':{'s':1},'name':'s_1','sparse':true},"                                              \
	"{'key':{'h':'hashed'},'name':'h_hashed'},"                                                \
	"{'key':{'hs':'hashed'},'name':'hs_hashed','sparse':true},"                                \
	"{'key':{'k':1,'z':'hashed'},'name':'k_1_z_hashed'},"                                      \
	"{'key':{'created':1},'name':'created_1','expireAfterSeconds':3600},"                      \
	"{'key':{'hid':1},'name':'hid_1','hidden':true},"                                          \
	"{'key':{'c':1},'name':'c_ci','collation':{'locale':'en','strength':2}},"                  \
	"{'key':{'loc':'2dsphere','cat':1},'name':'loc_cat','2dsphereIndexVersion':3},"            \
	"{'key':{'pt':'2d'},'name':'pt_2d'},"                                                      \
	"{'key':{'t':'text'},'name':'t_text'},"                                                    \
	"{'key':{'doc.$**':1},'name':'doc_wild'},"                                                 \
	"{'key':{'arr.b':1},'name':'arr.b_1'},"                                                    \
	"{'key':{'sp.b':1},'name':'sp.b_1','sparse':true},"                                        \
	"{'key':{'ar.r.b':1},'name':'ar.r.b_1'},"                                                  \
	"{'key':{'m':1},'name':'m_1'}]"

/* A collection whose default collation is case-insensitive: its _id index
 * and the indexes created without one carry it; b_1 was given simple. */
#define DEFAULT_CI                                                                                 \
	"[{'key':{'_id':1},'name':'_id_','collation':{'locale':'en','strength':2}},"               \
	"{'key':{'a':1},'name':'a_1','collation':{'locale':'en','strength':2}},"                   \
	"{'key':{'b':1},'name':'b_1'}]"

#define WILD_ALL "[{'key':{'_id':1},'name':'_id_'},{'key':{'$**':1},'name':'w'}]"
#define WILD_INCL                                                                                  \
	"[{'key':{'_id':1},'name':'_id_'},{'key':{'$**':1},'name':'w',"                            \
	"'wildcardProjection':{'a':1}}]"
#define WILD_EXCL                                                                                  \
	"[{'key':{'_id':1},'name':'_id_'},{'key':{'$**':1},'name':'w',"                            \
	"'wildcardProjection':{'a':0}}]"
#define WILD_COMPOUND                                                                              \
	"[{'key':{'_id':1},'name':'_id_'},{'key':{'x':1,'$**':1},'name':'xw',"                     \
	"'wildcardProjection':{'x':0}}]"
#define WILD_COMPOUND_LEAD                                                                         \
	"[{'key':{'_id':1},'name':'_id_'},{'key':{'doc.$**':1,'p':1},'name':'dw_p'}]"
#define SPHERE_V1                                                                                  \
	"[{'key':{'_id':1},'name':'_id_'},"                                                        \
	"{'key':{'cat':1,'loc':'2dsphere'},'name':'cat_loc','2dsphereIndexVersion':1}]"

#define B       SCAN_BOUNDED
#define U       SCAN_UNBOUNDED
#define X       SCAN_UNKNOWN
#define RE(p)   "{'$regularExpression':{'pattern':'" p "','options':''}}"
#define GEOJSON "{'$geometry':{'type':'Point','coordinates':[0,0]}}"

typedef struct pcase {
	const char *name;
	const char *set; /* NULL: KINDS */
	const char *filter;
	const char *collation;
	const char *hint; /* a key pattern, or a name when it does not start with { */
	scan_verdict want;
} pcase;

static const pcase cases[] = {
    /* hashed: equality and $in bound it; ranges do not; $exists false is
     * the null point; $exists true every key unless the index is sparse */
    {"hashed: equality", NULL, "{'h':5}", NULL, NULL, B},
    {"hashed: $in", NULL, "{'h':{'$in':[1,2,3]}}", NULL, NULL, B},
    {"hashed: null", NULL, "{'h':null}", NULL, NULL, B},
    {"hashed: range", NULL, "{'h':{'$gt':1}}", NULL, NULL, U},
    {"hashed: $in with a regex", NULL, "{'h':{'$in':[" RE("^a") "]}}", NULL, NULL, U},
    {"hashed: $exists false", NULL, "{'h':{'$exists':false}}", NULL, NULL, B},
    {"hashed: $exists true, not sparse", NULL, "{'h':{'$exists':true}}", NULL, NULL, U},
    {"hashed: $exists true, sparse", NULL, "{'hs':{'$exists':true}}", NULL, NULL, B},
    {"hashed: null, sparse", NULL, "{'hs':null}", NULL, NULL, U},
    {"hashed: $ne", NULL, "{'h':{'$ne':1}}", NULL, NULL, U},
    {"hashed: anchored regex", NULL, "{'h':" RE("^ab") "}", NULL, NULL, U},
    {"compound hashed: its btree prefix takes a negation", NULL, "{'k':{'$ne':1}}", NULL, NULL, B},
    /* wildcard "doc.$**": a single field under its path */
    {"wildcard: a field under the path", NULL, "{'doc.x':5}", NULL, NULL, B},
    {"wildcard: the path itself", NULL, "{'doc':5}", NULL, NULL, B},
    {"wildcard: $elemMatch on values", NULL, "{'doc.x':{'$elemMatch':{'$gt':1}}}", NULL, NULL, B},
    /* WildcardDoesNotSupportNegationPredicateInsideElemMatch */
    {"wildcard: $ne inside a value $elemMatch", NULL, "{'doc.x':{'$elemMatch':{'$ne':5}}}", NULL,
     NULL, U},
    {"wildcard: $nin inside a value $elemMatch", NULL, "{'doc.x':{'$elemMatch':{'$nin':[5]}}}",
     NULL, NULL, U},
    {"wildcard: range", NULL, "{'doc.x':{'$gt':5}}", NULL, NULL, B},
    {"wildcard: anchored regex", NULL, "{'doc.x':" RE("^ab") "}", NULL, NULL, B},
    {"wildcard: $exists true", NULL, "{'doc.x':{'$exists':true}}", NULL, NULL, B},
    {"wildcard: $ne null", NULL, "{'doc.x':{'$ne':null}}", NULL, NULL, B},
    {"wildcard: equality to an empty object", NULL, "{'doc.x':{}}", NULL, NULL, B},
    {"wildcard: not outside the path", NULL, "{'docs.x':5}", NULL, NULL, U},
    {"wildcard: not null", NULL, "{'doc.x':null}", NULL, NULL, U},
    {"wildcard: not $exists false", NULL, "{'doc.x':{'$exists':false}}", NULL, NULL, U},
    {"wildcard: not $ne", NULL, "{'doc.x':{'$ne':3}}", NULL, NULL, U},
    {"wildcard: not $nin", NULL, "{'doc.x':{'$nin':[3]}}", NULL, NULL, U},
    {"wildcard: not $not", NULL, "{'doc.x':{'$not':{'$gt':3}}}", NULL, NULL, U},
    {"wildcard: not an object", NULL, "{'doc.x':{'p':1}}", NULL, NULL, U},
    {"wildcard: not an array", NULL, "{'doc.x':[1,2]}", NULL, NULL, U},
    {"wildcard: not $in with an object", NULL, "{'doc.x':{'$in':[1,{'p':1}]}}", NULL, NULL, U},
    {"$**: any field", WILD_ALL, "{'q.r':5}", NULL, NULL, B},
    {"$**: not _id", WILD_ALL, "{'_id':{'$ne':5}}", NULL, NULL, B}, /* the _id index */
    {"$** with an inclusion projection: a field it holds", WILD_INCL, "{'a.c':1}", NULL, NULL, B},
    {"$** with an inclusion projection: one it does not", WILD_INCL, "{'b':1}", NULL, NULL, U},
    {"$** with an exclusion projection: an excluded field", WILD_EXCL, "{'a.c':1}", NULL, NULL, U},
    {"$** with an exclusion projection: another field", WILD_EXCL, "{'b':1}", NULL, NULL, B},
    /* compound wildcard (7.0), a regular key first: used for a predicate on
     * that key only, as a sparse key never multikey; a wildcard path alone
     * does not use it */
    {"compound wildcard: its regular prefix", WILD_COMPOUND, "{'x':5}", NULL, NULL, B},
    {"compound wildcard: a range on its prefix", WILD_COMPOUND, "{'x':{'$gt':5}}", NULL, NULL, B},
    {"compound wildcard: prefix and a path", WILD_COMPOUND, "{'x':5,'q':1}", NULL, NULL, B},
    {"compound wildcard: a wildcard path alone", WILD_COMPOUND, "{'q':1}", NULL, NULL, U},
    {"compound wildcard: null on the prefix (sparse)", WILD_COMPOUND, "{'x':null}", NULL, NULL, U},
    {"compound wildcard: $ne on the prefix (sparse)", WILD_COMPOUND, "{'x':{'$ne':3}}", NULL, NULL,
     U},
    {"compound wildcard: $exists false on the prefix", WILD_COMPOUND, "{'x':{'$exists':false}}",
     NULL, NULL, U},
    {"compound wildcard: $ne null on the prefix (never multikey)", WILD_COMPOUND,
     "{'x':{'$ne':null}}", NULL, NULL, B},
    /* the wildcard key first: a path it holds, as a single-field wildcard
     * index; a regular key after it alone does not use it */
    {"compound wildcard led by its wildcard: a path", WILD_COMPOUND_LEAD, "{'doc.a':5}", NULL, NULL,
     B},
    {"compound wildcard led by its wildcard: the key after it", WILD_COMPOUND_LEAD, "{'p':5}", NULL,
     NULL, U},
    {"compound wildcard led by its wildcard: null", WILD_COMPOUND_LEAD, "{'doc.a':null}", NULL,
     NULL, U},
    /* text: only $text, which needs it (or fails) */
    {"text: an equality on its field", NULL, "{'t':'x'}", NULL, NULL, U},
    {"text: $text", NULL, "{'$text':{'%search':'x'}}", NULL, NULL, X},
    /* geo */
    {"2dsphere: $geoWithin $geometry", NULL, "{'loc':{'$geoWithin':" GEOJSON "}}", NULL, NULL, B},
    {"2dsphere: $geoIntersects", NULL, "{'loc':{'$geoIntersects':" GEOJSON "}}", NULL, NULL, B},
    {"2dsphere: $geoWithin $centerSphere", NULL,
     "{'loc':{'$geoWithin':{'$centerSphere':[[0,0],0.1]}}}", NULL, NULL, B},
    {"2dsphere: not $box (flat)", NULL, "{'loc':{'$geoWithin':{'$box':[[0,0],[1,1]]}}}", NULL, NULL,
     U},
    {"2dsphere v2+: not its non-geo field alone", NULL, "{'cat':1}", NULL, NULL, U},
    {"2dsphere v2+: its non-geo field with a geo predicate", NULL,
     "{'cat':1,'loc':{'$geoWithin':" GEOJSON "}}", NULL, NULL, B},
    {"2dsphere v1: not judged", SPHERE_V1, "{'cat':1}", NULL, NULL, X},
    {"2d: $geoWithin $box", NULL, "{'pt':{'$geoWithin':{'$box':[[0,0],[1,1]]}}}", NULL, NULL, B},
    {"2d: not $geoIntersects", NULL, "{'pt':{'$geoIntersects':" GEOJSON "}}", NULL, NULL, U},
    {"2d: not an equality", NULL, "{'pt':[0,0]}", NULL, NULL, U},
    {"btree: not a geo predicate", NULL, "{'a':{'$geoWithin':" GEOJSON "}}", NULL, NULL, U},
    {"$near: needs its index or fails", NULL, "{'loc':{'$near':" GEOJSON "}}", NULL, NULL, X},
    /* hidden, sparse, TTL */
    {"hidden: never", NULL, "{'hid':1}", NULL, NULL, U},
    {"hidden: a hint to it is refused", NULL, "{'hid':1}", NULL, "hid_1", X},
    {"sparse: equality", NULL, "{'s':1}", NULL, NULL, B},
    {"sparse: not null", NULL, "{'s':null}", NULL, NULL, U},
    {"sparse: not $in with null", NULL, "{'s':{'$in':[1,null]}}", NULL, NULL, U},
    {"sparse: not $exists false", NULL, "{'s':{'$exists':false}}", NULL, NULL, U},
    {"sparse: not $gte null", NULL, "{'s':{'$gte':null}}", NULL, NULL, U},
    {"sparse: $ne null", NULL, "{'s':{'$ne':null}}", NULL, NULL, B},
    {"sparse: not another negation", NULL, "{'s':{'$ne':1}}", NULL, NULL, U},
    {"TTL: a btree like any", NULL, "{'created':{'$lt':{'$date':'2026-01-01T00:00:00Z'}}}", NULL,
     NULL, B},
    /* negations on a btree key: complemented bounds */
    {"$ne", NULL, "{'a':{'$ne':1}}", NULL, NULL, B},
    {"$nin", NULL, "{'a':{'$nin':[1,2]}}", NULL, NULL, B},
    {"$not $eq", NULL, "{'a':{'$not':{'$eq':1}}}", NULL, NULL, B},
    {"$not $in", NULL, "{'a':{'$not':{'$in':[1,2]}}}", NULL, NULL, B},
    {"$not $gt", NULL, "{'a':{'$not':{'$gt':1}}}", NULL, NULL, B},
    {"$not $exists true is $exists false", NULL, "{'a':{'$not':{'$exists':true}}}", NULL, NULL, B},
    {"$ne null, not multikey", NULL, "{'a':{'$ne':null}}", NULL, NULL, B},
    {"not: $not of a regex", NULL, "{'a':{'$not':" RE("^x") "}}", NULL, NULL, U},
    {"not: $not of $mod", NULL, "{'a':{'$not':{'$mod':[2,0]}}}", NULL, NULL, U},
    {"not: $not of $elemMatch", NULL, "{'a':{'$not':{'$elemMatch':{'$gt':1}}}}", NULL, NULL, U},
    {"not: $ne of an array", NULL, "{'a':{'$ne':[1]}}", NULL, NULL, U},
    {"not: $nin with an array", NULL, "{'a':{'$nin':[[1],2]}}", NULL, NULL, U},
    {"not: $nin with a regex", NULL, "{'a':{'$nin':[" RE("^x") "]}}", NULL, NULL, U},
    /* $nin: [] excludes nothing (mongod drops it: MongoEngine's delete
     * rules send it beside the field they look up) */
    {"not: $nin of nothing", NULL, "{'a':{'$nin':[]}}", NULL, NULL, U},
    {"not: $not of an empty $in", NULL, "{'a':{'$not':{'$in':[]}}}", NULL, NULL, U},
    {"not: $nin of nothing on _id beside an unindexed $in", NULL,
     "{'z':{'$in':[1]},'_id':{'$nin':[]}}", NULL, NULL, U},
    {"not: $ne null on a multikey key", NULL, "{'m':{'$ne':null}}", NULL, NULL, U},
    {"not: $nin with null on a multikey key", NULL, "{'m':{'$nin':[null,1]}}", NULL, NULL, U},
    {"$ne on a multikey key", NULL, "{'m':{'$ne':1}}", NULL, NULL, B},
    {"not: $nor", NULL, "{'$nor':[{'a':1}]}", NULL, NULL, U},
    /* $or branch by branch, inside $and too */
    {"$or: every branch bounded, by different kinds", NULL, "{'$or':[{'a':1},{'h':2},{'s':3}]}",
     NULL, NULL, B},
    {"$or: one branch unbounded", NULL, "{'$or':[{'a':1},{'q':2}]}", NULL, NULL, U},
    {"$or: a branch bounded only by a negation", NULL, "{'$or':[{'a':{'$ne':1}},{'s':2}]}", NULL,
     NULL, B},
    {"$and of an $or and an unbounded conjunct", NULL,
     "{'$and':[{'$or':[{'a':1},{'s':2}]},{'q':1}]}", NULL, NULL, B},
    {"$and of an unbounded $or and an unbounded conjunct", NULL,
     "{'$and':[{'$or':[{'a':1},{'q':2}]},{'q':1}]}", NULL, NULL, U},
    {"$or in an $or branch", NULL, "{'$or':[{'$or':[{'a':1},{'s':1}]},{'h':1}]}", NULL, NULL, B},
    {"$or in an $and in an $or branch, unbounded", NULL,
     "{'$or':[{'a':1},{'$and':[{'q':1},{'$or':[{'s':1},{'r':1}]}]}]}", NULL, NULL, U},
    {"$or branch bounded by the enclosing conjunct", NULL, "{'a':1,'$or':[{'q':1},{'r':2}]}", NULL,
     NULL, B},
    /* arrays */
    {"$all of $elemMatch on a sub-field", NULL, "{'arr':{'$all':[{'$elemMatch':{'b':1}}]}}", NULL,
     NULL, B},
    {"$elemMatch on a sub-field", NULL, "{'arr':{'$elemMatch':{'b':1,'c':2}}}", NULL, NULL, B},
    {"$elemMatch: what it puts on the sub-field", NULL, "{'arr':{'$elemMatch':{'b':{'$gt':1}}}}",
     NULL, NULL, B},
    {"$elemMatch: not another sub-field", NULL, "{'arr':{'$elemMatch':{'c':1}}}", NULL, NULL, U},
    {"$all of $elemMatch: not another sub-field", NULL, "{'arr':{'$all':[{'$elemMatch':{'c':1}}]}}",
     NULL, NULL, U},
    {"$elemMatch: $nor inside it bounds nothing (ElemMatchIndexedNestedNor)", NULL,
     "{'arr':{'$elemMatch':{'$nor':[{'b':2},{'b':3}]}}}", NULL, NULL, U},
    {"$elemMatch: $nor beside a bound", NULL, "{'arr':{'$elemMatch':{'b':1,'$nor':[{'b':3}]}}}",
     NULL, NULL, B},
    {"$elemMatch: $exists false on a sparse key", NULL,
     "{'sp':{'$elemMatch':{'b':{'$exists':false}}}}", NULL, NULL, U},
    {"$elemMatch: equality on a sparse key", NULL, "{'sp':{'$elemMatch':{'b':1}}}", NULL, NULL, B},
    {"$elemMatch: a geo predicate on a btree key", NULL,
     "{'arr':{'$elemMatch':{'b':{'$geoWithin':" GEOJSON "}}}}", NULL, NULL, U},
    {"$elemMatch: a negated regex", NULL, "{'arr':{'$elemMatch':{'b':{'$not':" RE("^x") "}}}}",
     NULL, NULL, U},
    {"$elemMatch: an $or inside is not read (no claim)", NULL,
     "{'arr':{'$elemMatch':{'$or':[{'b':1},{'b':2}]}}}", NULL, NULL, B},
    {"$elemMatch in an $elemMatch: not read (no claim)", NULL,
     "{'ar':{'$elemMatch':{'r':{'$elemMatch':{'b':1}}}}}", NULL, NULL, B},
    {"$elemMatch: under $and", NULL, "{'arr':{'$elemMatch':{'$and':[{'c':1},{'b':2}]}}}", NULL,
     NULL, B},
    {"$elemMatch on values", NULL, "{'a':{'$elemMatch':{'$gt':1,'$lt':5}}}", NULL, NULL, B},
    {"$elemMatch on values with $size", NULL, "{'a':{'$elemMatch':{'$size':1}}}", NULL, NULL, U},
    {"$all of values", NULL, "{'a':{'$all':[1,2]}}", NULL, NULL, B},
    {"$all of nothing matches nothing", NULL, "{'h':{'$all':[]}}", NULL, NULL, B},
    {"$size", NULL, "{'a':{'$size':2}}", NULL, NULL, U},
    /* $expr comparisons match a missing field as null: mongod keeps them
     * off a sparse index it chooses, and takes a hinted one's bounds
     * (nodeSupportedBySparseIndex; sparse_index_internal_expr.js) */
    {"$expr $lt, sparse", NULL, "{'$expr':{'$lt':['$s','r']}}", NULL, NULL, U},
    {"$expr $eq, sparse hashed", NULL, "{'$expr':{'$eq':['$hs',5]}}", NULL, NULL, U},
    {"$expr $lt, sparse, hinted", NULL, "{'$expr':{'$lt':['$s','r']}}", NULL, "s_1", B},
    {"$expr $eq, sparse hashed, hinted", NULL, "{'$expr':{'$eq':['$hs',5]}}", NULL,
     "{'hs':'hashed'}", B},
    {"$expr $lt, not sparse", NULL, "{'$expr':{'$lt':['$a','r']}}", NULL, NULL, B},
    {"$expr $eq, hashed", NULL, "{'$expr':{'$eq':['$h',5]}}", NULL, NULL, B},
    /* hints */
    {"hint by key pattern, bounded", NULL, "{'a':1}", NULL, "{'a':1}", B},
    {"hint by name, not bounded by the filter", NULL, "{'a':1}", NULL, "s_1", U},
    {"hint to a hashed index, equality", NULL, "{'h':1}", NULL, "{'h':'hashed'}", B},
    {"hint $natural", NULL, "{'a':1}", NULL, "{'$natural':1}", U},
    {"hint naming no index", NULL, "{'a':1}", NULL, "nope", X},
    {"hint to a 2dsphere index: not judged", NULL, "{'a':1}", NULL, "loc_cat", X},
    {"hint to a wildcard index: not judged", NULL, "{'doc.x':1}", NULL, "doc_wild", X},
    /* collation: the index's against the query's (a simple one when none) */
    {"collation: a string on an index of another collation", NULL, "{'c':'x'}", NULL, NULL, U},
    {"collation: a number on it", NULL, "{'c':5}", NULL, NULL, B},
    {"collation: $in of numbers", NULL, "{'c':{'$in':[1,2]}}", NULL, NULL, B},
    {"collation: $in with a string", NULL, "{'c':{'$in':[1,'x']}}", NULL, NULL, U},
    {"collation: a regex", NULL, "{'c':" RE("^x") "}", NULL, NULL, U},
    {"collation: $in of a regex", NULL, "{'c':{'$in':[" RE("^x") "]}}", NULL, NULL, U},
    {"collation: $type", NULL, "{'c':{'$type':'string'}}", NULL, NULL, B},
    {"collation: $ne of a string", NULL, "{'c':{'$ne':'x'}}", NULL, NULL, U},
    {"collation: the query's, a string", NULL, "{'c':'x'}", "{'locale':'en','strength':2}", NULL,
     B},
    {"collation: the query's, on a simple index", NULL, "{'a':'x'}", "{'locale':'en','strength':2}",
     NULL, U},
    {"collation: the query's, a number on a simple index", NULL, "{'a':5}",
     "{'locale':'en','strength':2}", NULL, B},
    {"collation: another strength", NULL, "{'c':'x'}", "{'locale':'en','strength':1}", NULL, U},
    {"default collation: an index that inherits it", DEFAULT_CI, "{'a':'x'}", NULL, NULL, B},
    {"default collation: a simple index", DEFAULT_CI, "{'b':'x'}", NULL, NULL, U},
    {"default collation: a simple query on a simple index", DEFAULT_CI, "{'b':'x'}",
     "{'locale':'simple'}", NULL, B},
    {"default collation: a simple query on an inheriting index", DEFAULT_CI, "{'a':'x'}",
     "{'locale':'simple'}", NULL, U},
    /* a regex's bounds are raw strings: an index with the simple collation
     * holds them whatever the query's collation, another never
     * (regex_collations.js) */
    {"collation: an anchored regex, the query's collation, a simple index", NULL,
     "{'a':" RE("^x") "}", "{'locale':'en','strength':2}", NULL, B},
    {"collation: an anchored $regex, the query's collation, a simple index", NULL,
     "{'a':{'$regex':'^x'}}", "{'locale':'en','strength':2}", NULL, B},
    {"collation: an anchored regex on an index of the query's collation", NULL,
     "{'c':" RE("^x") "}", "{'locale':'en','strength':2}", NULL, U},
    {"collation: $in of regexes, the query's collation, a simple index", NULL,
     "{'a':{'$in':[" RE("^x") "]}}", "{'locale':'en','strength':2}", NULL, B},
    {"collation: $in of a regex and a string, the query's collation, a simple index", NULL,
     "{'a':{'$in':[" RE("^x") ",'y']}}", "{'locale':'en','strength':2}", NULL, U},
    {"default collation: an anchored regex on an inheriting index", DEFAULT_CI,
     "{'a':" RE("^x") "}", NULL, NULL, U},
    {"default collation: an anchored regex on a simple index", DEFAULT_CI, "{'b':" RE("^x") "}",
     NULL, NULL, B},
    /* negations below a value $elemMatch bound with their complement,
     * multikey or not (query_planner_array_test NegationBelowElemMatchValue) */
    {"$elemMatch: $ne below it, multikey", NULL, "{'m':{'$elemMatch':{'$ne':2}}}", NULL, NULL, B},
    {"$elemMatch: $nin below it, multikey", NULL, "{'m':{'$elemMatch':{'$nin':['x','y']}}}", NULL,
     NULL, B},
    {"$elemMatch: $ne null below it, multikey", NULL, "{'m':{'$elemMatch':{'$ne':null}}}", NULL,
     NULL, B},
    {"$elemMatch: $ne of an array below it", NULL, "{'m':{'$elemMatch':{'$ne':[1]}}}", NULL, NULL,
     U},
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static index_set *load(const char *specs)
{
	char err[128];
	char *json = fx_dequote(specs);
	index_set *s = index_set_from_json(json, err, sizeof err);
	free(json);
	if (!s)
		fail_msg("bad specs: %s", err);
	return s;
}

/* KINDS, with m_1 multikey on m as explain reports it. */
static index_set *kinds(void)
{
	index_set *s = load(KINDS);
	size_t m = index_set_count(s) - 1;
	bson_t *reply = fx_json("{'queryPlanner':{'winningPlan':{'stage':'FETCH','inputStage':{"
	                        "'stage':'IXSCAN','keyPattern':{'m':1},'indexName':'m_1',"
	                        "'isMultiKey':true,'multiKeyPaths':{'m':['m']}}}},'ok':1}");
	assert_true(index_set_learn_multikey(s, m, reply));
	bson_destroy(reply);
	return s;
}

static scan_verdict ask(const index_set *s, const pcase *c)
{
	bson_t *filter = fx_json(c->filter);
	bson_t *coll = fx_doc(c->collation);
	bson_t *hint_doc = c->hint && c->hint[0] == '{' ? fx_json(c->hint) : NULL;
	const char *hint_name = c->hint && c->hint[0] != '{' ? c->hint : NULL;
	scan_verdict v = rule_scan_filter_collated(s, filter, coll, hint_doc, hint_name);
	bson_destroy(filter);
	if (coll)
		bson_destroy(coll);
	if (hint_doc)
		bson_destroy(hint_doc);
	return v;
}

static void test_table(void **state)
{
	(void)state;
	index_set *k = kinds();
	int bad = 0;
	for (size_t i = 0; i < NCASES; i++) {
		const pcase *c = &cases[i];
		index_set *s = c->set ? load(c->set) : index_set_retain(k);
		scan_verdict v = ask(s, c);
		if (v != c->want) {
			fprintf(stderr, "case \"%s\": %d, expected %d\n", c->name, v, c->want);
			bad++;
		}
		index_set_release(s);
	}
	index_set_release(k);
	assert_int_equal(bad, 0);
}

/* $in bounds whatever its length (the explode limit matters for sorts). */
static void test_long_in(void **state)
{
	(void)state;
	index_set *s = kinds();
	bson_t filter = BSON_INITIALIZER, child, arr;
	char key[16];
	BSON_APPEND_DOCUMENT_BEGIN(&filter, "a", &child);
	BSON_APPEND_ARRAY_BEGIN(&child, "$in", &arr);
	for (int i = 0; i < 500; i++) {
		snprintf(key, sizeof key, "%d", i);
		BSON_APPEND_INT32(&arr, key, i);
	}
	bson_append_array_end(&child, &arr);
	bson_append_document_end(&filter, &child);
	assert_int_equal(rule_scan_filter(s, &filter, NULL, NULL), SCAN_BOUNDED);
	bson_destroy(&filter);
	index_set_release(s);
}

/* What listIndexes says of each key and of a wildcard index's coverage. */
static void test_index_kinds_read(void **state)
{
	(void)state;
	index_set *s = kinds();
	const index_def *h = index_set_get(s, 3), *geo = index_set_get(s, 9);
	const index_def *w = index_set_get(s, 12);
	assert_int_equal(h->keys[0].type, INDEX_KEY_HASHED);
	assert_false(h->plugin);
	assert_int_equal(geo->keys[0].type, INDEX_KEY_2DSPHERE);
	assert_int_equal(geo->keys[1].type, INDEX_KEY_BTREE);
	assert_true(geo->plugin && !geo->sphere_v1);
	assert_int_equal(index_set_get(s, 10)->keys[0].type, INDEX_KEY_2D);
	assert_int_equal(index_set_get(s, 11)->keys[0].type, INDEX_KEY_TEXT);
	assert_true(index_def_wildcard_covers(w, "doc"));
	assert_true(index_def_wildcard_covers(w, "doc.x.y"));
	assert_false(index_def_wildcard_covers(w, "docs"));
	assert_false(index_def_wildcard_covers(index_set_get(s, 1), "a")); /* not wildcard */
	index_set_release(s);
	s = load(WILD_ALL);
	assert_false(index_def_wildcard_covers(index_set_get(s, 1), "_id"));
	assert_true(index_def_wildcard_covers(index_set_get(s, 1), "q"));
	index_set_release(s);
	s = load("[{'key':{'$**':1},'name':'w','wildcardProjection':{'_id':1,'a':1}}]");
	assert_true(index_def_wildcard_covers(index_set_get(s, 0), "_id"));
	assert_true(index_def_wildcard_covers(index_set_get(s, 0), "a"));
	assert_false(index_def_wildcard_covers(index_set_get(s, 0), "ab"));
	index_set_release(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_long_in),
	    cmocka_unit_test(test_index_kinds_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
