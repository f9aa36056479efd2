/* The one walk of a pipeline's accesses (analyzers/planner/stages.c) that
 * the engine's sub-pipeline queries and the rules' joins and filters
 * share: every access, in stage order, named by the collection it reads,
 * at its nesting depth; a stop; and mongod's nesting limit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyzers/planner/stages.h"
#include "fixtures/analyzer_fixture.h"
#include "protocol/wire_iter.h"

typedef struct trace {
	char text[2048];
	int stop_after; /* 0: never */
	int n;
} trace;

static bool record(void *arg, const pipe_access *a)
{
	static const char *const kinds[] = {"match", "join", "sub", "deep"};
	trace *t = arg;
	size_t len = strlen(t->text);
	snprintf(t->text + len, sizeof(t->text) - len, "%s%s %s %s %d%s", len ? "; " : "",
	         kinds[a->kind], a->stage, a->coll ? a->coll : "-", a->depth,
	         a->kind == PIPE_SUB && a->facet ? " facet" : "");
	if (a->kind == PIPE_JOIN) {
		len = strlen(t->text);
		snprintf(t->text + len, sizeof(t->text) - len, " [%s/%s]",
		         a->join->local ? a->join->local : "-",
		         a->join->foreign ? a->join->foreign : "-");
	}
	return ++t->n != t->stop_after;
}

/* pipeline_walk of pipeline (the array of a {'p': [...]} document). */
static bool walk_with(const char *pipeline, pipe_visit fn, void *arg)
{
	char json[2048];
	snprintf(json, sizeof(json), "{'p':%s}", pipeline);
	bson_t *doc = fx_json(json);
	assert_non_null(doc);
	bson_iter_t it;
	assert_true(bson_iter_init_find(&it, doc, "p"));
	bool done = pipeline_walk(&it, fn, arg);
	bson_destroy(doc);
	return done;
}

/* The trace of pipeline. */
static bool walk(const char *pipeline, trace *t)
{
	return walk_with(pipeline, record, t);
}

static void expect(const char *pipeline, const char *want)
{
	trace t = {{0}, 0, 0};
	assert_true(walk(pipeline, &t));
	if (strcmp(t.text, want) != 0)
		fail_msg("%s\n got: %s\nwant: %s", pipeline, t.text, want);
}

static void test_every_access_in_order(void **state)
{
	expect("[{'$match':{'a':1}},{'$sort':{'b':1}},{'$group':{'_id':'$a'}}]",
	       "match $match - 0");
	/* a join, then its pipeline at from; the concise form has none */
	expect(
	    "[{'$lookup':{'from':'items','localField':'i','foreignField':'o','as':'x'}},"
	    "{'$lookup':{'from':'b','let':{'v':'$a'},'as':'y','pipeline':[{'$match':{'c':1}}]}}]",
	    "join $lookup items 0 [i/o]; join $lookup b 0 [-/-]; sub $lookup b 1; "
	    "match $match b 1");
	/* $graphLookup: a join on connectToField, its restrictSearchWithMatch a
	 * filter at from */
	expect("[{'$graphLookup':{'from':'emp','startWith':'$boss','connectFromField':'boss',"
	       "'connectToField':'name','as':'c','restrictSearchWithMatch':{'active':true}}}]",
	       "join $graphLookup emp 0 [boss/name]; match $graphLookup emp 0");
	/* $unionWith (the string form is an empty pipeline, as mongod reads it:
	 * until stop 40 it was not walked), $facet branches at the input's
	 * collection, $geoNear's query */
	expect("[{'$unionWith':'u'},{'$unionWith':{'coll':'u','pipeline':[{'$match':{'x':1}}]}},"
	       "{'$facet':{'a':[{'$match':{'y':1}}],'b':[{'$sort':{'z':1}}]}},"
	       "{'$geoNear':{'near':[0,0],'distanceField':'d','query':{'k':1}}}]",
	       "sub $unionWith u 1; sub $unionWith u 1; match $match u 1; sub $facet - 1 facet; "
	       "match $match - 1; sub $facet - 1 facet; match $geoNear - 0");
	expect("[{'$unionWith':{'coll':'u'}}]", "sub $unionWith u 1");
	/* nested: a $facet inside a $lookup's pipeline reads from's documents;
	 * a $lookup without from runs against its parent's collection */
	expect("[{'$lookup':{'from':'b','as':'x','pipeline':[{'$facet':{'f':[{'$match':{}}]}},"
	       "{'$lookup':{'as':'y','pipeline':[{'$match':{'q':1}}]}}]}}]",
	       "join $lookup b 0 [-/-]; sub $lookup b 1; sub $facet b 2 facet; match $match b 2; "
	       "join $lookup - 1 [-/-]; sub $lookup b 2; match $match b 2");
}

static void test_stop_and_depth(void **state)
{
	trace t = {{0}, 2, 0};
	assert_false(walk("[{'$match':{}},{'$match':{}},{'$match':{}}]", &t));
	assert_int_equal(t.n, 2);
	/* PIPELINE_MAX_DEPTH nested $unionWith pipelines are walked; one more
	 * is reported as too deep, and not walked */
	char p[4096] = "[{'$match':{'leaf':1}}]";
	for (int i = 0; i < PIPELINE_MAX_DEPTH + 1; i++) {
		char next[4096];
		snprintf(next, sizeof(next), "[{'$unionWith':{'coll':'c','pipeline':%s}}]", p);
		memcpy(p, next, sizeof(p));
	}
	trace d = {{0}, 0, 0};
	assert_true(walk(p, &d));
	assert_non_null(strstr(d.text, "sub $unionWith c 20; deep $unionWith c 21"));
	assert_null(strstr(d.text, "match"));
}

/* For each $match access: its own first key, then "<" and the first
 * keys of the $match stages merged with it. */
typedef struct groups {
	char text[1024];
} groups;

static bool group_member(void *arg, const char *field, const bson_iter_t *member)
{
	groups *g = arg;
	size_t len = strlen(g->text);
	snprintf(g->text + len, sizeof(g->text) - len, " %s", field);
	return false;
}

/* For each $match: its first member's field ("$op" for an operator),
 * "<", then every member landing in the $match where that one lands. */
static bool on_match(void *arg, const pipe_access *a)
{
	groups *g = arg;
	bson_iter_t c;
	if (a->kind != PIPE_MATCH)
		return true;
	size_t len = strlen(g->text);
	const char *k =
	    wire_iter_recurse(a->it, &c) && wire_iter_next(&c) ? wire_iter_key(&c) : "{}";
	snprintf(g->text + len, sizeof(g->text) - len, "%s%s <", len ? "; " : "", k);
	assert_false(pipe_match_members(a, k[0] == '$' ? NULL : k, group_member, g));
	return true;
}

static void expect_groups(const char *pipeline, const char *want)
{
	groups g = {{0}};
	assert_true(walk_with(pipeline, on_match, &g));
	if (strcmp(g.text, want) != 0)
		fail_msg("%s\n got: %s\nwant: %s", pipeline, g.text, want);
}

/* The $match members mongod's optimization makes one $match of: adjacent
 * $match stages, across a $sort that took in no $limit, and the fields a
 * stage before them does not change, under the name a rename before them
 * gives them; anything else parts them. Each member is listed with the
 * others that land with it on other fields. */
static void test_merged_matches(void **state)
{
	expect_groups("[{'$match':{'a':1}},{'$match':{'b':1}},{'$match':{'c':1}}]",
	              "a < b c; b < a c; c < a b");
	expect_groups("[{'$match':{'a':1}},{'$sort':{'x':1}},{'$match':{'b':1}}]", "a < b; b < a");
	/* a $limit after the $sort goes into it: the $match stays after it */
	expect_groups("[{'$match':{'a':1}},{'$sort':{'x':1}},{'$limit':5},{'$match':{'b':1}}]",
	              "a <; b <");
	expect_groups("[{'$match':{'a':1}},{'$group':{'_id':'$a'}},{'$match':{'b':1}},"
	              "{'$project':{'b':1,'d':1}},{'$match':{'c':1,'d':2}}]",
	              "a <; b < d; c <");
	/* a field a projection does not change moves before it, one it sets
	 * stays: the members of one $match part */
	expect_groups("[{'$match':{'_id':1}},{'$addFields':{'t':1}},{'$match':{'n':1,'t':2}}]",
	              "_id < n; n < _id");
	expect_groups("[{'$match':{'_id':1}},{'$addFields':{'t':1}},{'$match':{'t':2,'n':1}}]",
	              "_id < n; t <");
	/* renamed: a $group's _id, a projection's "$m" */
	expect_groups("[{'$match':{'a':1}},{'$group':{'_id':'$k'}},{'$match':{'_id':5}}]",
	              "a < k; _id < a");
	expect_groups("[{'$match':{'_id':1}},{'$project':{'n':'$m'}},{'$match':{'n':2}}]",
	              "_id < m; n < _id");
	/* ... but not a $match naming $exists (or $type) past a $group */
	expect_groups("[{'$match':{'a':1}},{'$group':{'_id':'$k'}},"
	              "{'$match':{'_id':{'$exists':true}}}]",
	              "a <; _id <");
	/* an operator member moves only past $match and $sort; $and's members
	 * are read one by one */
	expect_groups("[{'$match':{'a':1}},{'$set':{'t':1}},{'$match':{'$or':[{'x':1}],'y':2}}]",
	              "a < y; $or <");
	expect_groups("[{'$match':{'$and':[{'a':1},{'$and':[{'b':2}]}]}},{'$sort':{'s':1}},"
	              "{'$match':{'c':3}}]",
	              "$and < a b c; c < a b");
	/* in a sub-pipeline, its own stages; a $geoNear's query is no $match */
	expect_groups("[{'$match':{'a':1}},{'$lookup':{'from':'b','as':'x','pipeline':["
	              "{'$match':{'p':1}},{'$match':{'q':1}}]}},{'$match':{'c':1}}]",
	              "a < c; p < q; q < p; c < a");
	expect_groups("[{'$geoNear':{'near':[0,0],'distanceField':'d','query':{'k':1}}},"
	              "{'$match':{'m':1}}]",
	              "k <; m <");
}

/* Whether a stage after the index-th is a $match, by pipeline_match_after. */
static bool match_after(const char *pipeline, unsigned index)
{
	char json[2048];
	snprintf(json, sizeof(json), "{'p':%s}", pipeline);
	bson_t *doc = fx_json(json);
	assert_non_null(doc);
	bson_iter_t it, s;
	assert_true(bson_iter_init_find(&it, doc, "p") && bson_iter_recurse(&it, &s));
	for (unsigned i = 0; i <= index; i++)
		assert_true(bson_iter_next(&s));
	bool r = pipeline_match_after(&s);
	bson_destroy(doc);
	return r;
}

static void test_match_after(void **state)
{
	const char *p = "[{'$match':{'a':1}},{'$group':{'_id':'$a'}},{'$match':{'_id':1}},"
	                "{'$sort':{'x':1}},{'$limit':2}]";
	assert_true(match_after(p, 0));
	assert_true(match_after(p, 1));
	assert_false(match_after(p, 2)); /* its own is not after it */
	assert_false(match_after(p, 4));
	/* a stage that is no document: maybe */
	assert_true(match_after("[{'$sort':{'x':1}},5]", 0));
	assert_false(match_after("[{'$sort':{'x':1}},{'$matchX':{}},{}]", 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_access_in_order),
	    cmocka_unit_test(test_stop_and_depth),
	    cmocka_unit_test(test_merged_matches),
	    cmocka_unit_test(test_match_after),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
