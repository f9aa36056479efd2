/* The query an aggregation's leading stages make (analyzers/engine/
 * leading.c): the filter and sort mongod's planner gets once its pipeline
 * optimization has moved $match stages before $sort and projection
 * stages and merged them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/engine/leading.h"
#include "fixtures/analyzer_fixture.h"

/* pipeline's leading query, into l; the document l points into, to free
 * after leading_done. */
static bson_t *leading_of(const char *pipeline, leading *l)
{
	char json[2048];
	snprintf(json, sizeof(json), "{'p':%s}", pipeline);
	bson_t *doc = fx_json(json);
	assert_non_null(doc);
	bson_iter_t it;
	assert_true(bson_iter_init_find(&it, doc, "p"));
	leading_stages(&it, l);
	return doc;
}

/* pipeline's leading query as "filter | sort" (canonical extended JSON
 * without spaces; "-" for none). */
static void expect(const char *pipeline, const char *want)
{
	char got[2048];
	leading l;
	bson_t *doc = leading_of(pipeline, &l);
	char *f = l.filter ? bson_as_relaxed_extended_json(l.filter, NULL) : NULL;
	char *s = l.has_sort ? bson_as_relaxed_extended_json(&l.sort, NULL) : NULL;
	snprintf(got, sizeof(got), "%s | %s", f ? f : "-", s ? s : "-");
	bson_free(f);
	bson_free(s);
	leading_done(&l);
	bson_destroy(doc);
	char *w = fx_dequote(want);
	if (strcmp(got, w) != 0)
		fail_msg("%s\n got: %s\nwant: %s", pipeline, got, w);
	free(w);
}

static void test_match_and_sort_run(void **state)
{
	expect("[{'$match':{'a':1}},{'$group':{'_id':'$a'}}]", "{ 'a' : 1 } | -");
	expect("[{'$match':{'a':1}},{'$match':{'b':2}}]", "{ 'a' : 1, 'b' : 2 } | -");
	/* a $match after a $sort moves before it */
	expect("[{'$sort':{'x':1}},{'$match':{'a':1}}]", "{ 'a' : 1 } | { 'x' : 1 }");
	expect("[{'$match':{'a':1}},{'$sort':{'x':1}},{'$match':{'b':2}}]",
	       "{ 'a' : 1, 'b' : 2 } | { 'x' : 1 }");
	/* two $sort stages in a row: the first is dropped */
	expect("[{'$sort':{'x':1}},{'$sort':{'y':-1}},{'$match':{'a':1}}]",
	       "{ 'a' : 1 } | { 'y' : -1 }");
	/* a $limit ends the run: what follows it stays after it */
	expect("[{'$match':{'a':1}},{'$sort':{'x':1}},{'$limit':5},{'$match':{'b':2}}]",
	       "{ 'a' : 1 } | { 'x' : 1 }");
	expect("[{'$group':{'_id':'$a'}},{'$match':{'a':1}}]", "- | -");
}

/* A $sort right after $lookup / $graphLookup stages moves before them
 * when it names no path their as fields write (tryReorderingWithSort); a
 * $lookup that absorbed an $unwind of its as moves nothing. */
static void test_sort_moves_before_joins(void **state)
{
	expect("[{'$match':{'c':1}},{'$lookup':{'from':'i','localField':'_id','foreignField':'o',"
	       "'as':'it'}},{'$sort':{'z':1}}]",
	       "{ 'c' : 1 } | { 'z' : 1 }");
	expect("[{'$lookup':{'from':'i','localField':'_id','foreignField':'o','as':'it'}},"
	       "{'$graphLookup':{'from':'e','startWith':'$b','connectFromField':'b',"
	       "'connectToField':'n','as':'h'}},{'$sort':{'z':-1}}]",
	       "- | { 'z' : -1 }");
	/* a sort key under (or above) the as field: it stays */
	expect("[{'$match':{'c':1}},{'$lookup':{'from':'i','localField':'_id','foreignField':'o',"
	       "'as':'it'}},{'$sort':{'it.n':1}}]",
	       "{ 'c' : 1 } | -");
	expect("[{'$match':{'c':1}},{'$lookup':{'from':'i','localField':'_id','foreignField':'o',"
	       "'as':'it.x'}},{'$sort':{'it':1}}]",
	       "{ 'c' : 1 } | -");
	/* a name that only starts with the as field's is another path */
	expect("[{'$match':{'c':1}},{'$lookup':{'from':'i','localField':'_id','foreignField':'o',"
	       "'as':'it'}},{'$sort':{'items':1}}]",
	       "{ 'c' : 1 } | { 'items' : 1 }");
	/* an $unwind between: absorbed by the $lookup, the sort stays */
	expect("[{'$lookup':{'from':'i','localField':'_id','foreignField':'o','as':'it'}},"
	       "{'$unwind':'$it'},{'$sort':{'z':1}}]",
	       "- | -");
	/* a sort named before, then one after the join: the later one is the sort */
	expect("[{'$sort':{'y':1}},{'$lookup':{'from':'i','localField':'_id','foreignField':'o',"
	       "'as':'it'}},{'$sort':{'z':1}}]",
	       "- | { 'z' : 1 }");
}

/* mongod moves a $sort before an $unwind whose path and includeArrayIndex
 * it names none of (canPushSortBack; with a $limit after it only when the
 * $unwind preserves null and empty arrays), and before no projection: a
 * $sort behind one is the sort, behind it (leading.h's behind). */
static void expect_behind(const char *pipeline, const char *want_sort, const char *want_behind)
{
	leading l;
	bson_t *doc = leading_of(pipeline, &l);
	char *s = l.has_sort ? bson_as_relaxed_extended_json(&l.sort, NULL) : NULL;
	char *w = want_sort ? fx_dequote(want_sort) : NULL;
	if ((s == NULL) != (w == NULL) || (s && strcmp(s, w) != 0) ||
	    (l.behind == NULL) != (want_behind == NULL) ||
	    (l.behind && strcmp(l.behind, want_behind) != 0))
		fail_msg("%s\n got: %s behind %s\nwant: %s behind %s", pipeline, s ? s : "-",
		         l.behind ? l.behind : "-", w ? w : "-", want_behind ? want_behind : "-");
	free(w);
	bson_free(s);
	leading_done(&l);
	bson_destroy(doc);
}

static void test_sort_past_unwind_and_projections(void **state)
{
	expect("[{'$match':{'c':1}},{'$unwind':'$t'},{'$sort':{'z':1}}]",
	       "{ 'c' : 1 } | { 'z' : 1 }");
	expect("[{'$unwind':{'path':'$t','includeArrayIndex':'i'}},{'$sort':{'i':1}}]", "- | -");
	expect("[{'$unwind':'$t'},{'$sort':{'t.x':1}}]", "- | -");
	expect("[{'$unwind':'$t.x'},{'$sort':{'t':1}}]", "- | -");
	/* a $limit after it: the unwind must keep every document */
	expect("[{'$unwind':'$t'},{'$sort':{'z':1}},{'$limit':3}]", "- | -");
	expect("[{'$unwind':{'path':'$t','preserveNullAndEmptyArrays':true}},{'$sort':{'z':1}},"
	       "{'$limit':3}]",
	       "- | { 'z' : 1 }");
	expect("[{'$lookup':{'from':'i','localField':'_id','foreignField':'o','as':'it'}},"
	       "{'$unwind':'$t'},{'$sort':{'z':1}}]",
	       "- | { 'z' : 1 }");
	/* a $lookup that absorbed an $unwind, then a projection: the sort behind it, in memory
	 * whatever the indexes (until stop 44 not judged, though the same without the $unwind was)
	 */
	expect_behind("[{'$lookup':{'from':'i','localField':'b','foreignField':'_id','as':'bb'}},"
	              "{'$unwind':'$bb'},{'$addFields':{'b':'$b'}},{'$sort':{'b':1}}]",
	              "{ 'b' : 1 }", "$addFields");
	expect_behind("[{'$lookup':{'from':'i','localField':'b','foreignField':'_id','as':'bb'}},"
	              "{'$unwind':'$bb'},{'$project':{'b':1,'bb':1}},{'$sort':{'b':1}}]",
	              "{ 'b' : 1 }", "$project");
	expect_behind("[{'$lookup':{'from':'i','localField':'b','foreignField':'_id','as':'bb'}},"
	              "{'$unwind':'$bb'},{'$addFields':{'b':'$b'}},{'$sort':{'bb.n':1}}]",
	              NULL, NULL);
	/* a $match between, a $group, a $limit: not judged */
	expect("[{'$unwind':'$t'},{'$match':{'t':1}},{'$sort':{'z':1}}]", "- | -");
	expect("[{'$group':{'_id':'$a'}},{'$sort':{'_id':1}}]", "- | -");
	expect("[{'$limit':5},{'$sort':{'z':1}}]", "- | -");
	/* behind a projection: the sort, marked */
	expect_behind("[{'$match':{'c':1}},{'$project':{'c':1,'z':1}},{'$sort':{'z':1}}]",
	              "{ 'z' : 1 }", "$project");
	expect_behind("[{'$unwind':'$t'},{'$addFields':{'u':1}},{'$sort':{'z':-1}},{'$limit':2}]",
	              "{ 'z' : -1 }", "$addFields");
	expect_behind("[{'$unset':'q'},{'$set':{'u':1}},{'$sort':{'z':1}}]", "{ 'z' : 1 }",
	              "$unset");
	/* on a field the stage computes, renames or drops: not judged */
	expect_behind("[{'$set':{'z':{'$add':['$b',1]}}},{'$sort':{'z':1}}]", NULL, NULL);
	expect_behind("[{'$project':{'z':'$b'}},{'$sort':{'z':1}}]", NULL, NULL);
	expect_behind("[{'$project':{'a':1}},{'$sort':{'z':1}}]", NULL, NULL);
	expect_behind("[{'$project':{'a':1}},{'$sort':{'s':{'$meta':'textScore'}}}]", NULL, NULL);
	/* a leading sort stays the sort; the later one is in memory, unjudged */
	expect_behind("[{'$sort':{'y':1}},{'$project':{'y':1,'z':1}},{'$sort':{'z':1}}]",
	              "{ 'y' : 1 }", NULL);
	expect_behind("[{'$match':{'c':1}},{'$lookup':{'from':'i','localField':'_id',"
	              "'foreignField':'o','as':'it'}},{'$sort':{'z':1}}]",
	              "{ 'z' : 1 }", NULL);
}

/* An $expr member moves when no stage before it changes a field it names
 * (pushMatchBefore splits a $match by its expressions' dependencies):
 * held-out set 5's $lookup pipelines, [{$addFields: {id: "$_id"}},
 * {$match: {$expr: {$eq: ["$$id", "$owner"]}}}], which mongod runs as a
 * leading $match on owner. Until stop 40 it stayed. */
static void test_expr_moves_when_its_fields_do(void **state)
{
	expect("[{'$addFields':{'id':'$_id'}},{'$match':{'$expr':{'$eq':['$$id','$owner']}}}]",
	       "{ '$expr' : { '$eq' : [ '$$id', '$owner' ] } } | -");
	expect("[{'$match':{'a':1}},{'$unwind':'$t'},{'$match':{'$expr':{'$lt':['$b',{'$add':["
	       "'$c',1]}]}}}]",
	       "{ 'a' : 1, '$expr' : { '$lt' : [ '$b', { '$add' : [ '$c', 1 ] } ] } } | -");
	/* a field a stage changes or renames, a whole document, a bare name */
	expect("[{'$addFields':{'id':'$_id'}},{'$match':{'$expr':{'$eq':['$id',5]}}}]", "- | -");
	expect("[{'$unwind':'$t'},{'$match':{'$expr':{'$eq':['$t.x',5]}}}]", "- | -");
	expect("[{'$addFields':{'u':1}},{'$match':{'$expr':{'$eq':['$$ROOT.a',5]}}}]", "- | -");
	expect("[{'$addFields':{'u':1}},{'$match':{'$expr':{'$eq':[{'$getField':'u'},5]}}}]",
	       "- | -");
	/* past a $group: an operator member stays (groupMatchSwapVerified) */
	expect("[{'$group':{'_id':'$a'}},{'$match':{'$expr':{'$eq':['$_id',5]}}}]", "- | -");
}

static void test_match_moves_before_projections(void **state)
{
	/* a field $addFields / $set does not assign moves; one it does stays */
	expect("[{'$addFields':{'t':{'$add':['$q',1]}}},{'$match':{'a':1,'t':2}}]",
	       "{ 'a' : 1 } | -");
	expect("[{'$set':{'a.b':1}},{'$match':{'a.c':1,'a':2,'a.b.c':3}}]", "{ 'a.c' : 1 } | -");
	/* $unset and an exclusion $project remove their fields */
	expect("[{'$unset':['x','y']},{'$match':{'x':1,'z':2}}]", "{ 'z' : 2 } | -");
	expect("[{'$project':{'x':0}},{'$match':{'x':1,'z':2}}]", "{ 'z' : 2 } | -");
	/* an inclusion $project keeps its fields and _id, computes the rest;
	 * a field it computes as "$b" is b before it */
	expect("[{'$project':{'a':1,'c':'$b'}},{'$match':{'a':1,'c':2,'b':3,'_id':4}}]",
	       "{ 'a' : 1, 'b' : 2, '_id' : 4 } | -");
	expect("[{'$project':{'a':1,'c':{'$toLower':'$b'},'d':'$b.x','e':'$$ROOT'}},"
	       "{'$match':{'c':1,'d':2,'e':3}}]",
	       "- | -");
	expect("[{'$project':{'_id':0,'a.b':1}},{'$match':{'a.b.c':1,'a':2,'_id':3}}]",
	       "{ 'a.b.c' : 1 } | -");
	/* {_id: 1} alone keeps _id alone; {_id: 0} alone removes it, {} nothing */
	expect("[{'$project':{'_id':1}},{'$match':{'_id':1,'x':2}}]", "{ '_id' : 1 } | -");
	expect("[{'$project':{'_id':0}},{'$match':{'_id':1,'x':2}}]", "{ 'x' : 2 } | -");
	/* after the leading run, and past a $sort in it */
	expect("[{'$match':{'a':1}},{'$sort':{'x':1}},{'$project':{'a':1,'b':1,'x':1}},"
	       "{'$match':{'b':2}}]",
	       "{ 'a' : 1, 'b' : 2 } | { 'x' : 1 }");
	/* operators stay where they are; so does everything past another
	 * stage, or a projection not understood */
	expect("[{'$addFields':{'t':1}},{'$match':{'$or':[{'a':1},{'b':1}],'c':1}}]",
	       "{ 'c' : 1 } | -");
	/* $unwind and $lookup change their path, index and `as` only */
	expect("[{'$addFields':{'t':1}},{'$unwind':'$t'},{'$match':{'a':1,'t':2}}]",
	       "{ 'a' : 1 } | -");
	expect(
	    "[{'$unwind':{'path':'$t','includeArrayIndex':'i'}},{'$match':{'t.x':1,'i':2,'u':3}}]",
	    "{ 'u' : 3 } | -");
	expect("[{'$lookup':{'from':'o','localField':'k','foreignField':'_id','as':'j'}},"
	       "{'$match':{'j.x':1,'k':2}}]",
	       "{ 'k' : 2 } | -");
	expect("[{'$addFields':{'t':1}},{'$group':{'_id':'$a'}},{'$match':{'a':1}}]", "- | -");
	expect("[{'$project':{'a':{'b':1}}},{'$match':{'a.b':1}}]", "- | -");
}

/* mongod moves a $match on a field a stage computes as "$a" before that
 * stage, as a $match on a: $addFields / $set / $project renames, and the
 * fields a $group's _id names (DocumentSourceGroup::getModifiedPaths). */
static void test_match_renamed_before_stages(void **state)
{
	expect("[{'$addFields':{'b':'$a'}},{'$match':{'b':1}}]", "{ 'a' : 1 } | -");
	expect("[{'$set':{'b':'$a','a':5}},{'$match':{'b':1,'a':2}}]", "{ 'a' : 1 } | -");
	/* under the renamed field, or a dotted one: not moved */
	expect("[{'$addFields':{'b':'$a','c.d':'$e'}},{'$match':{'b.x':1,'c.d':2}}]", "- | -");
	/* renames compose, stage by stage back */
	expect("[{'$project':{'b':'$a'}},{'$addFields':{'c':'$b'}},{'$match':{'c':1}}]",
	       "{ 'a' : 1 } | -");
	/* $group: _id is the field it names, _id.x the member's; nothing else */
	expect("[{'$group':{'_id':'$userId','n':{'$sum':1}}},{'$match':{'_id':42,'n':3}}]",
	       "{ 'userId' : 42 } | -");
	expect("[{'$match':{'s':'A'}},{'$group':{'_id':{'x':'$a','y':{'$year':'$d'}}}},"
	       "{'$match':{'_id.x':1,'_id.y':2,'_id':3}}]",
	       "{ 's' : 'A', 'a' : 1 } | -");
	expect("[{'$group':{'_id':{'$toLower':'$a'}}},{'$match':{'_id':'x'}}]", "- | -");
	expect("[{'$group':{'_id':null,'t':{'$sum':'$q'}}},{'$match':{'t':1}}]", "- | -");
	/* past a $group, a $match naming $exists or $type, or an operator at
	 * its top level, stays whole (groupMatchSwapVerified) */
	expect("[{'$group':{'_id':'$a'}},{'$match':{'_id':{'$exists':true}}}]", "- | -");
	expect("[{'$group':{'_id':'$a'}},{'$match':{'_id':{'$not':{'$type':'string'}}}}]", "- | -");
	expect("[{'$group':{'_id':'$a'}},{'$match':{'_id':1,'$expr':{'$eq':['$_id',1]}}}]",
	       "- | -");
	/* and past what follows the $group, renamed there first */
	expect("[{'$group':{'_id':'$a'}},{'$project':{'k':'$_id'}},{'$match':{'k':7}}]",
	       "{ 'a' : 7 } | -");
}

/* A leading $sort over an empty filter: what the stages after it read in
 * its order (count_limit), which the rule reads when an index provides
 * the sort: the first $limit's reach before a stage that takes its whole
 * input, every document without one (0), -1 at a stage it does not know
 * (stops_unknown). */
static void expect_in_order(const char *pipeline, int64_t want)
{
	leading l;
	bson_t *doc = leading_of(pipeline, &l);
	bool reads_all = l.reads_all;
	int64_t got = l.stops_unknown ? -1 : l.count_limit;
	leading_done(&l);
	bson_destroy(doc);
	if (!reads_all || got != want)
		fail_msg("%s\n got: reads_all %d, %lld\nwant: %lld", pipeline, reads_all,
		         (long long)got, (long long)want);
}

static void test_limit_after_a_leading_sort(void **state)
{
	expect_in_order("[{'$sort':{'a':1}},{'$limit':5}]", 5);
	expect_in_order("[{'$sort':{'a':1}},{'$skip':10},{'$project':{'a':1}},{'$limit':20}]", 30);
	expect_in_order("[{'$sort':{'a':1}},{'$group':{'_id':'$a','n':{'$sum':1}}},{'$limit':5}]",
	                0);
	expect_in_order("[{'$match':{}},{'$sort':{'a':1}},{'$project':{'a':1}}]", 0);
	expect_in_order("[{'$sort':{'a':1}},{'$sample':{'size':3}}]", -1);
	expect_in_order("[{'$sort':{'a':1}},{'$group':{'_id':'$a','f':{'$first':'$b'}}}]", -1);
	expect_in_order("[{'$sort':{'a':1}},{'$group':{'_id':{'k':'$a','j':'$c'}}}]", -1);
	/* grouped by another key: no DISTINCT_SCAN of the sort's index (a
	 * helper's probe at stop 41) */
	expect_in_order("[{'$sort':{'a':1}},{'$group':{'_id':'$b'}},{'$limit':2}]", 0);
	expect_in_order("[{'$sort':{'a':1}},{'$limit':'x'}]", -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_match_and_sort_run),
	    cmocka_unit_test(test_sort_moves_before_joins),
	    cmocka_unit_test(test_sort_past_unwind_and_projections),
	    cmocka_unit_test(test_expr_moves_when_its_fields_do),
	    cmocka_unit_test(test_match_moves_before_projections),
	    cmocka_unit_test(test_match_renamed_before_stages),
	    cmocka_unit_test(test_limit_after_a_leading_sort),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
