/* unbounded-push: requests that must fire and near-misses that must not,
 * through the whole engine, in log mode and in block mode. Updates come both
 * as a body array and as a kind-1 sequence. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "analyzers/rules/rule_push.h"
#include "fixtures/analyzer_fixture.h"

typedef fx_case pcase;

#define NOSEQ FX_NOSEQ
#define HIT(n, j, ns, cmd, d)                                                                      \
	{                                                                                          \
		n, j, NOSEQ, true, ns, cmd, d                                                      \
	}
#define MISS(n, j)                                                                                 \
	{                                                                                          \
		n, j, NOSEQ, false, NULL, NULL, NULL                                               \
	}
#define UPD(u) "{'update':'posts','updates':[{'q':{'_id':7},'u':" u "}]}"

static const pcase cases[] = {
    /* ---- hits ---- */
    HIT("plain $push, body array", UPD("{'$push':{'comments':'SECRET'}}"), "test.posts", "update",
        "$push to \"comments\" has no $each + $slice"),
    {"plain $push, kind-1 sequence",
     "{'update':'posts','ordered':true}",
     {{"updates", {"{'q':{'_id':7},'u':{'$push':{'comments':{'by':'SECRET','t':1}}}}"}}},
     true,
     "test.posts",
     "update",
     "\"comments\""},
    HIT("$each without $slice", UPD("{'$push':{'tags':{'$each':['SECRET','b']}}}"), "test.posts",
        "update", "has $each but no $slice"),
    HIT("$slice without $each", UPD("{'$push':{'tags':{'$slice':3}}}"), "test.posts", "update",
        "has $slice without $each"),
    HIT("document value", UPD("{'$push':{'log':{'a':1,'b':'SECRET'}}}"), "test.posts", "update",
        "\"log\""),
    HIT("$each + $sort, no $slice", UPD("{'$push':{'s':{'$each':[1],'$sort':{'v':-1}}}}"),
        "test.posts", "update", "has $each but no $slice"),
    HIT("$each + $position, no $slice", UPD("{'$push':{'s':{'$each':[1],'$position':0}}}"),
        "test.posts", "update", "has $each but no $slice"),
    HIT("two fields, one bounded", UPD("{'$push':{'a':1,'b':{'$each':[1],'$slice':-5}}}"),
        "test.posts", "update", "$push to \"a\" has"),
    HIT("two unbounded fields named", UPD("{'$push':{'a':1,'b':2}}"), "test.posts", "update",
        "\"a\", \"b\""),
    /* mongod applies every occurrence of a repeated operator: a bounded
     * first $push must not hide an unbounded second one. */
    HIT("repeated $push, bounded first",
        UPD("{'$push':{'a':{'$each':[1],'$slice':-5}},'$push':{'b':1}}"), "test.posts", "update",
        "$push to \"b\" has no $each + $slice"),
    HIT("repeated $push, $set between", UPD("{'$push':{'a':1},'$set':{'x':1},'$push':{'b':2}}"),
        "test.posts", "update", "\"a\", \"b\""),
    MISS("repeated $push, both bounded",
         UPD("{'$push':{'a':{'$each':[1],'$slice':-5}},'$push':{'b':{'$each':[2],'$slice':-3}}}")),
    HIT("dotted field", UPD("{'$push':{'stats.hits':{'$date':'2024-01-01T00:00:00Z'}}}"),
        "test.posts", "update", "\"stats.hits\""),
    HIT("with $set and $inc", UPD("{'$set':{'x':1},'$inc':{'n':1},'$push':{'h':'SECRET'}}"),
        "test.posts", "update", "\"h\""),
    HIT("upsert",
        "{'update':'posts','updates':[{'q':{'k':'SECRET'},'u':{'$push':{'h':1}},'upsert':true}]}",
        "test.posts", "update", "\"h\""),
    HIT("second op of a batch",
        "{'update':'posts','updates':[{'q':{'_id':1},'u':{'$set':{'a':1}}},{'q':{'_id':2},'u':{"
        "'$push':{'h':1}}}]}",
        "test.posts", "update", "\"h\""),
    HIT("findAndModify", "{'findAndModify':'posts','query':{'_id':1},'update':{'$push':{'h':1}}}",
        "test.posts", "findAndModify", "\"h\""),
    HIT("findandmodify upsert $each",
        "{'findandmodify':'posts','query':{'_id':1},'update':{'$push':{'h':{'$each':[1,2]}}},"
        "'upsert':true,'new':true}",
        "test.posts", "findAndModify", "has $each but no $slice"),
    HIT("bulkWrite body arrays",
        "{'bulkWrite':1,'ops':[{'update':0,'filter':{'_id':1},'updateMods':{'$push':{'h':1}},"
        "'multi':false}],'nsInfo':[{'ns':'blog.posts'}]}",
        "blog.posts", "bulkWrite", "\"h\""),
    {"bulkWrite kind-1 sequences",
     "{'bulkWrite':1,'errorsOnly':true}",
     {{"ops",
       {"{'insert':0,'document':{'a':1}}",
        "{'update':1,'filter':{'_id':1},'updateMods':{'$push':{'h':1}},'upsert':true}"}},
      {"nsInfo", {"{'ns':'blog.a'}", "{'ns':'blog.posts'}"}}},
     true,
     "blog.posts",
     "bulkWrite",
     "\"h\""},
    /* a $cond whose if bounds the array, or a counter the pipeline
     * increments, appends only while that holds */
    MISS("pipeline $cond: append while $size is below a number",
         UPD("[{'$set':{'r':{'$cond':[{'$lt':[{'$size':'$r'},100]},{'$concatArrays':['$r',[1]]},"
             "'$r']}}}]")),
    MISS("pipeline $cond: append while an incremented counter is below a number",
         UPD("[{'$set':{'r':{'$cond':{'if':{'$lt':['$cnt',100]},'then':{'$concatArrays':['$r',"
             "[1]]},'else':'$r'}},'cnt':{'$add':['$cnt',1]}}}]")),
    HIT("pipeline $cond: a counter nothing increments",
        UPD("[{'$set':{'r':{'$cond':{'if':{'$lt':['$cnt',100]},'then':{'$concatArrays':['$r',"
            "[1]]},'else':'$r'}}}}]"),
        "test.posts", "update", "\"r\" is appended to with $concatArrays"),
    HIT("pipeline $cond: the size of another array",
        UPD("[{'$set':{'r':{'$cond':[{'$lt':[{'$size':'$o'},100]},{'$concatArrays':['$r',[1]]},"
            "'$r']}}}]"),
        "test.posts", "update", "\"r\" is appended to with $concatArrays"),
    HIT("pipeline $cond: an append in the else branch",
        UPD("[{'$set':{'r':{'$cond':[{'$lt':[{'$size':'$r'},100]},'$r',{'$concatArrays':['$r',"
            "[1]]}]}}}]"),
        "test.posts", "update", "\"r\" is appended to with $concatArrays"),
    MISS("$push under an $expr counter guard the update increments",
         "{'update':'ev','updates':[{'q':{'s':1,'$expr':{'$lt':['$cnt',50]}},'u':{'$push':{'r':1},"
         "'$inc':{'cnt':1}}}]}"),
    HIT("$push under an $expr counter guard nothing increments",
        "{'update':'ev','updates':[{'q':{'s':1,'$expr':{'$lt':['$cnt',50]}},'u':{'$push':{'r':1}"
        "}}]}",
        "test.ev", "update", "$push to \"r\""),
    HIT("pipeline $set $concatArrays",
        UPD("[{'$set':{'log':{'$concatArrays':['$log',['SECRET']]}}}]"), "test.posts", "update",
        "\"log\" is appended to with $concatArrays"),
    HIT("pipeline $addFields $concatArrays over $ifNull",
        UPD("[{'$addFields':{'log':{'$concatArrays':[{'$ifNull':['$log',[]]},['x']]}}}]"),
        "test.posts", "update", "\"log\""),
    HIT("pipeline nested object path",
        UPD("[{'$set':{'doc':{'list':{'$concatArrays':['$doc.list',[1]]}}}}]"), "test.posts",
        "update", "\"doc.list\""),
    HIT("findAndModify pipeline",
        "{'findAndModify':'posts','query':{'_id':1},'update':[{'$set':{'h':{'$concatArrays':["
        "[0],'$h']}}}]}",
        "test.posts", "findAndModify", "\"h\""),
    /* a path's fate is the last stage's that assigns it */
    HIT("pipeline: a later stage slices another path",
        UPD("[{'$set':{'a':{'$concatArrays':['$a',['SECRET']]}}},{'$set':{'b':{'$slice':['$b',"
            "-10]}}}]"),
        "test.posts", "update", "\"a\" is appended to"),
    HIT("pipeline: a later stage reads the path whole",
        UPD("[{'$set':{'a':{'$concatArrays':['$a',[1]]}}},{'$set':{'a':{'$reverseArray':'$a'}}}]"),
        "test.posts", "update", "\"a\""),
    HIT("pipeline: a later stage slices a sub-path only",
        UPD("[{'$set':{'a':{'$concatArrays':['$a',[1]]}}},{'$set':{'a.x':{'$slice':['$a.x',-1]}}}"
            "]"),
        "test.posts", "update", "\"a\""),
    HIT("pipeline: a later stage appends again, sliced other operand",
        UPD("[{'$set':{'a':{'$concatArrays':['$a',[1]]}}},{'$set':{'a':{'$concatArrays':['$a',{"
            "'$slice':['$b',-1]}]}}}]"),
        "test.posts", "update", "\"a\""),
    HIT("pipeline: $slice of a stage before, then $set from the stored path",
        UPD("[{'$set':{'t':{'$slice':['$a',-3]}}},{'$set':{'a':{'$concatArrays':['$a','$t']}}}]"),
        "test.posts", "update", "\"a\""),
    /* $merge's whenMatched pipeline updates the matching document of `into`
     * on every run: an update of that collection */
    HIT("$merge whenMatched appends",
        "{'aggregate':'events','pipeline':[{'$match':{'k':'SECRET'}},{'$merge':{'into':'c',"
        "'whenMatched':[{'$set':{'tags':{'$concatArrays':['$tags',['$$new.t']]}}}]}}],"
        "'cursor':{}}",
        "test.c", "aggregate", "\"tags\" is appended to with $concatArrays"),
    HIT("$merge into {db, coll}, on, whenNotMatched",
        "{'aggregate':'events','pipeline':[{'$group':{'_id':'$u','t':{'$last':'$t'}}},{'$merge':{"
        "'into':{'db':'stats','coll':'users'},'on':'_id','whenMatched':[{'$addFields':{'seen':{"
        "'$concatArrays':['$seen',['$$new.t']]}}}],'whenNotMatched':'insert'}}],'cursor':{}}",
        "stats.users", "aggregate", "\"seen\""),
    HIT("$merge into {coll} only: the request's database",
        "{'aggregate':'events','pipeline':[{'$merge':{'into':{'coll':'c'},'whenMatched':[{'$set':"
        "{'h':{'$concatArrays':[['$$new.x'],'$h']}}}]}}],'cursor':{}}",
        "test.c", "aggregate", "\"h\""),
    HIT("$merge of a collection-less aggregate",
        "{'aggregate':1,'pipeline':[{'$documents':[{'_id':1,'t':2}]},{'$merge':{'into':'c',"
        "'whenMatched':[{'$set':{'h':{'$concatArrays':['$h',['$$new.t']]}}}]}}],'cursor':{}}",
        "test.c", "aggregate", "\"h\""),
    HIT("explain of an aggregate with $merge (logged)",
        "{'explain':{'aggregate':'events','pipeline':[{'$merge':{'into':'c','whenMatched':[{"
        "'$set':{'h':{'$concatArrays':['$h',[1]]}}}]}}],'cursor':{}},'verbosity':'queryPlanner'}",
        "test.c", "explain", "\"h\""),
    /* ---- guards that do not bound (PROTOCOL.md, "Guards that bound an array") ---- */
    HIT("counter guard inside $or",
        "{'update':'d','updates':[{'q':{'k':1,'$or':[{'n':{'$lt':200}},{'x':1}]},'u':{'$push':{"
        "'r':1},'$inc':{'n':1}},'upsert':true}]}",
        "test.d", "update", "\"r\""),
    HIT("counter guard, counter not incremented",
        "{'update':'d','updates':[{'q':{'k':1,'n':{'$lt':200}},'u':{'$push':{'r':1},'$inc':{"
        "'m':1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("counter guard, negative $inc",
        "{'update':'d','updates':[{'q':{'n':{'$lt':200}},'u':{'$push':{'r':1},'$inc':{'n':-1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("counter guard, $inc 0",
        "{'update':'d','updates':[{'q':{'n':{'$lt':200}},'u':{'$push':{'r':1},'$inc':{'n':0}}}]}",
        "test.d", "update", "\"r\""),
    HIT("counter bounded from below only ($gt)",
        "{'update':'d','updates':[{'q':{'n':{'$gt':200}},'u':{'$push':{'r':1},'$inc':{'n':1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("counter $lt a string, not a number",
        "{'update':'d','updates':[{'q':{'n':{'$lt':'z'}},'u':{'$push':{'r':1},'$inc':{'n':1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("$not {$gte, $lt}: not an upper bound",
        "{'update':'d','updates':[{'q':{'n':{'$not':{'$gte':200,'$lt':500}}},'u':{'$push':{'r':"
        "1},'$inc':{'n':1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("counter incremented by $set, not $inc",
        "{'update':'d','updates':[{'q':{'n':{'$lt':200}},'u':{'$push':{'r':1},'$set':{'n':5}}}]}",
        "test.d", "update", "\"r\""),
    HIT("existence guard on another array",
        "{'update':'d','updates':[{'q':{'other.99':{'$exists':false}},'u':{'$push':{'r':1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("existence guard true",
        "{'update':'d','updates':[{'q':{'r.99':{'$exists':true}},'u':{'$push':{'r':1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("existence guard on a field, not an index",
        "{'update':'d','updates':[{'q':{'r.x':{'$exists':false}},'u':{'$push':{'r':1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("existence guard bounds only its array",
        "{'update':'d','updates':[{'q':{'r.99':{'$exists':false}},'u':{'$push':{'r':1,'s':2}}}]}",
        "test.d", "update", "$push to \"s\""),
    HIT("existence guard inside $nor",
        "{'update':'d','updates':[{'q':{'$nor':[{'r.9':{'$exists':false}}]},'u':{'$push':{'r':1}"
        "}}]}",
        "test.d", "update", "\"r\""),
    HIT("size guard the wrong way ($gt with size first)",
        "{'update':'d','updates':[{'q':{'$expr':{'$gt':[{'$size':'$r'},50]}},'u':{'$push':{'r':"
        "1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("size guard on another array",
        "{'update':'d','updates':[{'q':{'$expr':{'$lt':[{'$size':'$s'},50]}},'u':{'$push':{'r':1}"
        "}}]}",
        "test.d", "update", "\"r\""),
    HIT("size guard against a field, not a constant",
        "{'update':'d','updates':[{'q':{'$expr':{'$lt':[{'$size':'$r'},'$max']}},'u':{'$push':{"
        "'r':1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("size guard inside $expr $or",
        "{'update':'d','updates':[{'q':{'$expr':{'$or':[{'$lt':[{'$size':'$r'},5]},true]}},'u':{"
        "'$push':{'r':1}}}]}",
        "test.d", "update", "\"r\""),
    HIT("guard in arrayFilters is not the filter",
        "{'update':'d','updates':[{'q':{'k':1},'u':{'$push':{'r':1},'$inc':{'n':1}},"
        "'arrayFilters':[{'n':{'$lt':5}}]}]}",
        "test.d", "update", "\"r\""),
    /* a remaining-capacity counter bounds only when the same update
     * decrements the field the filter holds above a constant */
    HIT("capacity guard, counter incremented",
        "{'update':'events','updates':[{'q':{'_id':1,'seatsLeft':{'$gt':0}},'u':{'$push':{"
        "'attendees':'SECRET'},'$inc':{'seatsLeft':1}}}]}",
        "test.events", "update", "\"attendees\""),
    HIT("capacity guard on another field than the one decremented",
        "{'update':'events','updates':[{'q':{'_id':1,'seatsLeft':{'$gt':0}},'u':{'$push':{"
        "'attendees':'SECRET'},'$inc':{'waiting':-1}}}]}",
        "test.events", "update", "\"attendees\""),
    HIT("counter decremented, no guard",
        "{'update':'events','updates':[{'q':{'_id':1},'u':{'$push':{'attendees':'SECRET'},"
        "'$inc':{'seatsLeft':-1}}}]}",
        "test.events", "update", "\"attendees\""),
    HIT("capacity guard inside $or",
        "{'update':'events','updates':[{'q':{'$or':[{'seatsLeft':{'$gt':0}},{'vip':true}]},'u':{"
        "'$push':{'attendees':1},'$inc':{'seatsLeft':-1}}}]}",
        "test.events", "update", "\"attendees\""),
    HIT("capacity guard against a string, not a number",
        "{'update':'events','updates':[{'q':{'seatsLeft':{'$gt':'a'}},'u':{'$push':{"
        "'attendees':1},'$inc':{'seatsLeft':-1}}}]}",
        "test.events", "update", "\"attendees\""),
    /* a set guard bounds only a push of the very values it keeps out */
    HIT("set guard on another value than the one pushed",
        "{'update':'t','updates':[{'q':{'_id':1,'arr':{'$ne':'a'}},'u':{'$push':{'arr':'b'}}}]}",
        "test.t", "update", "\"arr\""),
    HIT("set guard covering one of the two values pushed",
        "{'update':'t','updates':[{'q':{'arr':{'$nin':['a']}},'u':{'$push':{'arr':{'$each':['a',"
        "'b']}}}}]}",
        "test.t", "update", "\"arr\""),
    HIT("set guard on another array",
        "{'update':'t','updates':[{'q':{'other':{'$nin':['a']}},'u':{'$push':{'arr':'a'}}}]}",
        "test.t", "update", "\"arr\""),
    HIT("set guard inside $or",
        "{'update':'t','updates':[{'q':{'$or':[{'arr':{'$ne':'a'}},{'x':1}]},'u':{'$push':{'arr':"
        "'a'}}}]}",
        "test.t", "update", "\"arr\""),
    HIT("set guard of null (a missing field equals null)",
        "{'update':'t','updates':[{'q':{'arr':{'$ne':null}},'u':{'$push':{'arr':null}}}]}",
        "test.t", "update", "\"arr\""),
    HIT("set guard of a number of another type",
        "{'update':'t','updates':[{'q':{'arr':{'$ne':1}},'u':{'$push':{'arr':1.0}}}]}", "test.t",
        "update", "\"arr\""),
    HIT("set guard on a pushed document's key, another key pushed",
        "{'update':'t','updates':[{'q':{'d.name':{'$nin':['x']}},'u':{'$push':{'d':{'$each':[{"
        "'id':'x'}]}}}}]}",
        "test.t", "update", "\"d\""),
    HIT("set guard on a nested key of the pushed document",
        "{'update':'t','updates':[{'q':{'d.a.b':{'$ne':1}},'u':{'$push':{'d':{'a':{'b':1}}}}}]}",
        "test.t", "update", "\"d\""),
    HIT("set guard, empty $each",
        "{'update':'t','updates':[{'q':{'arr':{'$nin':[]}},'u':{'$push':{'arr':{'$each':[]}}}}]}",
        "test.t", "update", "\"arr\""),
    HIT("set guard: $not of $in and another operator (no one value held away)",
        "{'update':'t','updates':[{'q':{'arr':{'$not':{'$in':['a'],'$size':3}}},'u':{'$push':{"
        "'arr':'a'}}}]}",
        "test.t", "update", "\"arr\""),
    HIT("set guard: $not of $in of another value",
        "{'update':'t','updates':[{'q':{'arr':{'$not':{'$in':['b']}}},'u':{'$push':{'arr':'a'}}}]}",
        "test.t", "update", "\"arr\""),
    HIT("explain of update (logged)",
        "{'explain':{'update':'posts','updates':[{'q':{},'u':{'$push':{'a':1}}}]},"
        "'verbosity':'queryPlanner'}",
        "test.posts", "explain", "\"a\""),

    /* ---- near-misses ---- */
    MISS("$each + negative $slice", UPD("{'$push':{'c':{'$each':['SECRET'],'$slice':-50}}}")),
    MISS("$each + $slice 0", UPD("{'$push':{'c':{'$each':[1],'$slice':0}}}")),
    MISS("$each + positive $slice", UPD("{'$push':{'c':{'$each':[1],'$slice':10}}}")),
    MISS("$each + $slice + $sort + $position",
         UPD("{'$push':{'c':{'$each':[1],'$position':0,'$sort':{'t':-1},'$slice':-5}}}")),
    MISS("$addToSet", UPD("{'$addToSet':{'tags':'SECRET'}}")),
    /* $addToSet stays silent: a set is bounded by its domain (the distinct
     * values the application has), which one request does not show */
    MISS("$addToSet $each", UPD("{'$addToSet':{'tags':{'$each':['a','b']}}}")),
    MISS("$addToSet, findAndModify upsert",
         "{'findAndModify':'posts','query':{'_id':1},'update':{'$addToSet':{'tags':'SECRET'}},"
         "'upsert':true}"),
    MISS("pipeline $setUnion (the pipeline's $addToSet)",
         UPD("[{'$set':{'tags':{'$setUnion':['$tags',['SECRET']]}}}]")),
    MISS("$pull", UPD("{'$pull':{'tags':'SECRET'}}")),
    MISS("$pop", UPD("{'$pop':{'tags':1}}")),
    MISS("$set of an array", UPD("{'$set':{'tags':['a','b','c']}}")),
    MISS("$set of a field called $push-like name", UPD("{'$set':{'push':[1]}}")),
    MISS("replacement document", UPD("{'name':'SECRET','list':[1,2]}")),
    MISS("replacement with an embedded $push key", UPD("{'name':'x','meta':{'$push':{'a':1}}}")),
    MISS("insert with a $push field", "{'insert':'posts','documents':[{'$push':{'a':1}}]}"),
    MISS("aggregate $group $push",
         "{'aggregate':'posts','pipeline':[{'$group':{'_id':'$a','all':{'$push':'$b'}}}],"
         "'cursor':{}}"),
    MISS("aggregate $setWindowFields $push",
         "{'aggregate':'posts','pipeline':[{'$setWindowFields':{'sortBy':{'t':1},'output':{"
         "'w':{'$push':'$v','window':{'documents':[-2,0]}}}}}],'cursor':{}}"),
    MISS("pipeline $concatArrays under $slice",
         UPD("[{'$set':{'log':{'$slice':[{'$concatArrays':['$log',['x']]},-10]}}}]")),
    MISS("pipeline field sliced before concatenation",
         UPD("[{'$set':{'log':{'$concatArrays':[{'$slice':['$log',-9]},['x']]}}}]")),
    MISS("pipeline: a later stage slices the appended path",
         UPD("[{'$set':{'a':{'$concatArrays':['$a',['SECRET']]}}},{'$set':{'a':{'$slice':['$a',"
             "-10]}}}]")),
    MISS("pipeline: a later $addFields slices a nested path",
         UPD("[{'$set':{'d':{'l':{'$concatArrays':['$d.l',[1]]}}}},{'$addFields':{'d.l':{'$slice':"
             "['$d.l',5]}}}]")),
    MISS("pipeline: sliced in a stage before the append",
         UPD("[{'$set':{'a':{'$slice':['$a',-9]}}},{'$set':{'a':{'$concatArrays':['$a',[1]]}}}]")),
    MISS("pipeline: a later stage replaces the array",
         UPD("[{'$set':{'a':{'$concatArrays':['$a',[1]]}}},{'$set':{'a':[]}}]")),
    MISS("pipeline: $lastN around the $concatArrays",
         UPD("[{'$set':{'a':{'$lastN':{'input':{'$concatArrays':['$a',[1]]},'n':10}}}}]")),
    MISS("pipeline: a later stage keeps $firstN",
         UPD("[{'$set':{'a':{'$concatArrays':[[1],'$a']}}},{'$set':{'a':{'$firstN':{'input':'$a',"
             "'n':10}}}}]")),
    MISS("pipeline concatenates other fields",
         UPD("[{'$set':{'all':{'$concatArrays':['$a','$b']}}}]")),
    MISS("pipeline $project with $concatArrays",
         UPD("[{'$project':{'log':{'$concatArrays':['$log',['x']]}}}]")),
    MISS("pipeline $literal",
         UPD("[{'$set':{'log':{'$literal':{'$concatArrays':['$log',[1]]}}}}]")),
    MISS("pipeline path prefix is not the field",
         UPD("[{'$set':{'log':{'$concatArrays':['$logs',[1]]}}}]")),
    MISS("$merge whenMatched sliced in a later stage",
         "{'aggregate':'events','pipeline':[{'$merge':{'into':'c','whenMatched':[{'$set':{'tags':{"
         "'$concatArrays':['$tags',['$$new.t']]}}},{'$set':{'tags':{'$slice':['$tags',-50]}}}]}}"
         "],'cursor':{}}"),
    MISS("$merge whenMatched as a word",
         "{'aggregate':'events','pipeline':[{'$merge':{'into':'c','whenMatched':'merge'}}],"
         "'cursor':{}}"),
    MISS("$merge as a string", "{'aggregate':'events','pipeline':[{'$merge':'c'}],'cursor':{}}"),
    MISS("$merge whenMatched sets without appending",
         "{'aggregate':'events','pipeline':[{'$merge':{'into':'c','whenMatched':[{'$set':{'n':"
         "'$$new.n','tags':'$$new.tags'}}]}}],'cursor':{}}"),
    MISS("$out", "{'aggregate':'events','pipeline':[{'$out':'c'}],'cursor':{}}"),
    MISS("findAndModify remove", "{'findAndModify':'posts','query':{'_id':1},'remove':true}"),
    MISS("delete", "{'delete':'posts','deletes':[{'q':{'$push':1},'limit':1}]}"),
    MISS("$push in the filter position", "{'update':'posts','updates':[{'q':{'h':{'$size':3}},"
                                         "'u':{'$inc':{'n':1}}}]}"),
    MISS("bulkWrite insert document",
         "{'bulkWrite':1,'ops':[{'insert':0,'document':{'$push':{'a':1}}}],'nsInfo':[{'ns':"
         "'blog.posts'}]}"),
    MISS("bulkWrite bounded update",
         "{'bulkWrite':1,'ops':[{'update':0,'filter':{},'updateMods':{'$push':{'h':{'$each':[1],"
         "'$slice':-3}}}}],'nsInfo':[{'ns':'blog.posts'}]}"),
    /* ---- guards: the schema guidance's own patterns ---- */
    MISS("bucket pattern (the issue's update)",
         "{'update':'sensorData','updates':[{'q':{'sensorId':'s-42','hour':{'$date':'2024-01-01T"
         "00:00:00Z'},'count':{'$lt':200}},'u':{'$push':{'readings':{'t':1,'v':2}},'$inc':{"
         "'count':1,'sum':2}},'upsert':true}]}"),
    {"bucket pattern, kind-1 sequence",
     "{'update':'sensorData','ordered':true}",
     {{"updates",
       {"{'q':{'sensorId':'s','count':{'$lte':199}},'u':{'$inc':{'count':1},'$push':{'readings':"
        "{'t':1}}},'upsert':true}"}}},
     false,
     NULL,
     NULL,
     NULL},
    MISS("bucket pattern with $not $gte",
         "{'update':'b','updates':[{'q':{'k':1,'n':{'$not':{'$gte':100}}},'u':{'$push':{'r':1},"
         "'$inc':{'n':1}}}]}"),
    MISS("bucket pattern under $and",
         "{'update':'b','updates':[{'q':{'$and':[{'k':1},{'$and':[{'n':{'$lt':100}}]}]},'u':{"
         "'$push':{'r':1},'$inc':{'n':1.5}}}]}"),
    MISS("bucket pattern, counter bounded both ways",
         "{'update':'b','updates':[{'q':{'n':{'$gte':0,'$lt':100}},'u':{'$push':{'r':1,'s':2},"
         "'$inc':{'n':{'$numberLong':'1'}}}}]}"),
    MISS("bucket pattern, findAndModify",
         "{'findAndModify':'b','query':{'k':1,'n':{'$lt':100}},'update':{'$push':{'r':1},"
         "'$inc':{'n':1}},'upsert':true}"),
    MISS("bucket pattern, bulkWrite",
         "{'bulkWrite':1,'ops':[{'update':0,'filter':{'k':1,'n':{'$lt':100}},'updateMods':{"
         "'$push':{'r':{'$each':[1,2]}},'$inc':{'n':2}},'upsert':true}],'nsInfo':[{'ns':'i.b'}]}"),
    MISS("outlier pattern: existence guard",
         "{'update':'books','updates':[{'q':{'_id':1,'customers_purchased.999':{'$exists':false}"
         "},'u':{'$push':{'customers_purchased':'SECRET'}}}]}"),
    MISS("outlier pattern: existence guard {$exists: 0}",
         "{'update':'books','updates':[{'q':{'_id':1,'c.0':{'$exists':0}},'u':{'$push':{'c':1}}"
         "}]}"),
    MISS("outlier pattern: counter guard",
         "{'update':'books','updates':[{'q':{'_id':1,'customers_count':{'$lt':1000}},'u':{"
         "'$push':{'customers_purchased':'SECRET'},'$inc':{'customers_count':1}}}]}"),
    MISS("remaining-capacity counter (updateOne, $gt 0, $inc -1)",
         "{'update':'events','updates':[{'q':{'_id':1,'seatsLeft':{'$gt':0}},'u':{'$push':{"
         "'attendees':'SECRET'},'$inc':{'seatsLeft':-1}}}]}"),
    MISS("remaining-capacity counter, $gte and a fractional decrement",
         "{'update':'events','updates':[{'q':{'seatsLeft':{'$gte':1}},'u':{'$inc':{"
         "'seatsLeft':-0.5},'$push':{'a':1,'b':2}}}]}"),
    MISS("remaining-capacity counter, $not {$lte: 0}",
         "{'update':'events','updates':[{'q':{'seatsLeft':{'$not':{'$lte':0}}},'u':{'$push':{"
         "'attendees':1},'$inc':{'seatsLeft':{'$numberLong':'-1'}}}}]}"),
    MISS("remaining-capacity counter, findAndModify",
         "{'findAndModify':'events','query':{'_id':1,'seatsLeft':{'$gt':0}},'update':{'$push':{"
         "'attendees':1},'$inc':{'seatsLeft':-1}},'new':true}"),
    MISS("remaining-capacity counter, bulkWrite",
         "{'bulkWrite':1,'ops':[{'update':0,'filter':{'seatsLeft':{'$gt':0}},'updateMods':{"
         "'$push':{'attendees':1},'$inc':{'seatsLeft':-1}}}],'nsInfo':[{'ns':'i.events'}]}"),
    MISS("size guard",
         "{'update':'d','updates':[{'q':{'_id':1,'$expr':{'$lt':[{'$size':'$r'},50]}},'u':{"
         "'$push':{'r':1}}}]}"),
    MISS("size guard $lte, array form of $size",
         "{'update':'d','updates':[{'q':{'$expr':{'$lte':[{'$size':['$r']},50]}},'u':{'$push':{"
         "'r':1}}}]}"),
    MISS("size guard swapped ($gt constant first)",
         "{'update':'d','updates':[{'q':{'$expr':{'$gt':[50,{'$size':'$r'}]}},'u':{'$push':{'r':"
         "1}}}]}"),
    MISS("size guard inside $expr $and",
         "{'update':'d','updates':[{'q':{'$expr':{'$and':[{'$eq':['$k',1]},{'$gte':[9,{'$size':"
         "'$a.b'}]}]}},'u':{'$push':{'a.b':1}}}]}"),
    MISS("existence and size guards for two arrays",
         "{'update':'d','updates':[{'q':{'r.9':{'$exists':false},'$expr':{'$lt':[{'$size':'$s'},"
         "3]}},'u':{'$push':{'r':1,'s':2}}}]}"),
    MISS("size guard bounds a pipeline $concatArrays",
         "{'update':'d','updates':[{'q':{'$expr':{'$lt':[{'$size':'$log'},9]}},'u':[{'$set':{"
         "'log':{'$concatArrays':['$log',['x']]}}}]}]}"),
    MISS("subset pattern",
         "{'update':'movies','updates':[{'q':{'_id':1},'u':{'$push':{'reviews':{'$each':[{'r':"
         "'SECRET'}],'$sort':{'t':-1},'$slice':10}}}}]}"),
    MISS("set guard: $ne of the value pushed",
         "{'update':'t','updates':[{'q':{'_id':1,'tags':{'$ne':'SECRET'}},'u':{'$push':{'tags':"
         "'SECRET'}}}]}"),
    MISS("set guard: $nin of every value pushed (mongoose-unique-array)",
         "{'update':'t','updates':[{'q':{'_id':1,'arr':{'$nin':['a','b']}},'u':{'$push':{'arr':{"
         "'$each':['b','a']}},'$inc':{'__v':1}}}]}"),
    MISS("set guard on the pushed documents' key",
         "{'update':'t','updates':[{'q':{'_id':1,'docArr.name':{'$nin':['x','y']}},'u':{'$push':{"
         "'docArr':{'$each':[{'name':'x','n':1},{'n':2,'name':'y'}]}}}}]}"),
    MISS("set guards in $and, one per value",
         "{'update':'t','updates':[{'q':{'$and':[{'arr':{'$ne':'a'}},{'arr':{'$ne':'b'}}]},'u':{"
         "'$push':{'arr':{'$each':['a','b'],'$position':0}}}}]}"),
    MISS("set guard: $not of $in, every value pushed",
         "{'update':'t','updates':[{'q':{'_id':1,'arr':{'$not':{'$in':['a','b']}}},'u':{'$push':{"
         "'arr':{'$each':['a','b']}}}}]}"),
    MISS("set guard: $not of $eq of the value pushed",
         "{'update':'t','updates':[{'q':{'_id':1,'tags':{'$not':{'$eq':'SECRET'}}},'u':{'$push':{"
         "'tags':'SECRET'}}}]}"),
    MISS("set guard, findAndModify",
         "{'findAndModify':'t','query':{'_id':1,'arr':{'$ne':'a'}},'update':{'$push':{'arr':'a'}}"
         "}"),
    MISS("update command name case", "{'Update':'posts','updates':[{'q':{},'u':{'$push':{'a':1"
                                     "}}}]}"),
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static size_t nseqs_of(const pcase *c)
{
	return c->seqs[1].id ? 2 : c->seqs[0].id ? 1 : 0;
}

static void run_case(const pcase *c, rule_action action)
{
	fx_expect x = {c->name, c->hit, c->ns, c->command, c->detail, "$slice"};
	fx_run_rule_case(RULE_UNBOUNDED_PUSH, action, c->json, c->seqs, nseqs_of(c), &x);
}

/* test_table_log, test_table_block, test_table_is_balanced */
FX_TABLE_TESTS(cases, NCASES, run_case)

/* The error message the brief quotes, word for word where it matters. */
static void test_block_message(void **state)
{
	engine_config cfg;
	rule_config_defaults(&cfg);
	cfg.rules[RULE_UNBOUNDED_PUSH].action = RULE_BLOCK;
	engine *e = engine_new(&cfg, NULL, NULL, NULL);
	block_info block = {0};
	assert_int_equal(
	    fx_analyze(e, "test", UPD("{'$push':{'comments':'x'}}"), NULL, 0, NULL, &block),
	    VERDICT_BLOCK);
	assert_string_equal(block.errmsg,
	                    "mongoguard blocked this update: rule unbounded-push: $push to "
	                    "\"comments\" has no $each + $slice, so the array grows without "
	                    "bound. Fix: push with {$each: [...], $slice: -N} (subset pattern), "
	                    "bucket the array, or move the items to a child collection.");
	engine_free(e);
}

/* {u: [{$set: {a: {a: ... {a: {$concatArrays: [path, [1]]}}}}}]} with
 * `levels` object-literal levels under $set, each key `key`. */
static bson_t *deep_set(int levels, const char *key, bool appends)
{
	char path[4096] = "$";
	for (int i = 0; i < levels; i++)
		snprintf(path + strlen(path), sizeof(path) - strlen(path), "%s%s", i ? "." : "",
		         key);
	bson_t *cur = bson_new(), arr, one;
	if (appends) {
		BSON_APPEND_ARRAY_BEGIN(cur, "$concatArrays", &arr);
		BSON_APPEND_UTF8(&arr, "0", path);
		BSON_APPEND_ARRAY_BEGIN(&arr, "1", &one);
		BSON_APPEND_INT32(&one, "0", 1);
		bson_append_array_end(&arr, &one);
		bson_append_array_end(cur, &arr);
	} else {
		BSON_APPEND_UTF8(cur, "$toUpper", "$name");
	}
	for (int i = 0; i < levels; i++) {
		bson_t *up = bson_new();
		BSON_APPEND_DOCUMENT(up, key, cur);
		bson_destroy(cur);
		cur = up;
	}
	bson_t *stage = bson_new();
	BSON_APPEND_DOCUMENT(stage, "$set", cur);
	bson_destroy(cur);
	bson_t *out = bson_new();
	BSON_APPEND_ARRAY_BEGIN(out, "u", &arr);
	BSON_APPEND_DOCUMENT(&arr, "0", stage);
	bson_append_array_end(out, &arr);
	bson_destroy(stage);
	return out;
}

/* A pipeline update the walk cannot finish (nested past MAX_DEPTH, or an
 * assigned path longer than its buffer) is a hit, never a pass: mongod
 * runs those, so passing over them let an unbounded append through. */
static void test_unwalkable_pipeline_fails_closed(void **state)
{
	static const char long_key[] = "a_field_name_long_enough_to_overflow_the_path_buffer_"
	                               "when_two_of_them_are_joined_by_a_dot_and_then_some_"
	                               "more_characters_to_be_sure";
	static const struct {
		int levels;
		const char *key;
		bool appends, hit, unjudged;
	} rows[] = {
	    {3, "a", true, true, false},     {3, "a", false, false, false},
	    {60, "a", true, true, false},    {60, "a", false, false, false},
	    {120, "a", true, true, true},    {120, "a", false, true, true},
	    {2, long_key, true, true, true}, {1, long_key, false, false, false},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		bson_t *doc = deep_set(rows[i].levels, rows[i].key, rows[i].appends);
		bson_iter_t it;
		assert_true(bson_iter_init_find(&it, doc, "u"));
		push_hit hit;
		bool got = rule_push_update(&it, NULL, &hit);
		if (got != rows[i].hit || (got && hit.unjudged != rows[i].unjudged))
			fail_msg("row %zu (%d levels): hit %d unjudged %d", i, rows[i].levels, got,
			         got && hit.unjudged);
		bson_destroy(doc);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_is_balanced),
	    cmocka_unit_test(test_table_log),
	    cmocka_unit_test(test_table_block),
	    cmocka_unit_test(test_block_message),
	    cmocka_unit_test(test_unwalkable_pipeline_fails_closed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
