"""Issue 32, detection round four, on real driver traffic (pymongo) through mongoguard:
unbounded-push reading $merge's whenMatched pipeline, judging an update pipeline by what its
last stage leaves in a path, and counting a remaining-capacity counter as a guard;
case-insensitive-regex leaving collations with caseLevel alone; and the ESR suggestion for an
$elemMatch filter, which must be an index the server accepts.

FerretDB may refuse $merge, an update pipeline or a collation. Where it refuses, the test
asserts that mongoguard did not answer in its place and that the server's own answer reached
the client as it does directly; the rule logic itself is unit-tested through the engine
(tests/unit/test_rule_push.c, test_rule_regex_collation.c, test_esr.c).
"""

from __future__ import annotations

import json
import time

import pytest
from pymongo.collation import Collation
from pymongo.errors import OperationFailure

from test_analyzers import SECRET, assert_blocked, check_finding, config, seed, wait_findings
from test_rules_round2 import rules, until
from test_rules_round3 import not_blocked, outcome


def merge(into, when_matched):
    return [{"$match": {"k": {"$gte": 0}}},
            {"$merge": {"into": into, "on": "_id", "whenMatched": when_matched,
                        "whenNotMatched": "insert"}}]


APPEND = [{"$set": {"tags": {"$concatArrays": ["$tags", ["$$new.t"]]}}}]


# --- unbounded-push --------------------------------------------------------------------

def test_push_round4_block(clients, upstream, start_proxy, dbname):
    seed(clients, dbname, "events", [{"_id": 1, "k": 1, "t": "x", "attendees": [],
                                      "seatsLeft": 2, "tags": []}])
    p = start_proxy(upstream.uri, config(rules(unbounded_push="block")))
    c = clients.via(p, appname="push4")[dbname]["events"]
    ns = f"{dbname}.events"
    before = list(clients.direct()[dbname]["events"].find({}))

    # $merge whenMatched appending to the into collection, named by name or {db, coll}.
    for into, at in (("summary", f"{dbname}.summary"),
                     ({"db": f"{dbname}_out", "coll": "summary"}, f"{dbname}_out.summary")):
        mark = p.log.mark()
        with pytest.raises(OperationFailure) as ei:
            list(c.aggregate(merge(into, APPEND)))
        assert_blocked(ei.value, "unbounded-push")
        assert '"tags" is appended to with $concatArrays' in ei.value.details["errmsg"]
        [f] = wait_findings(p, rule="unbounded-push", ns=at, since=mark)
        check_finding(f, rule="unbounded-push", action="block", ns=at, command="aggregate",
                      app="push4")

    # Update pipelines whose last assignment of the path still appends.
    grown = [
        [{"$set": {"tags": {"$concatArrays": ["$tags", [SECRET]]}}},
         {"$set": {"other": {"$slice": ["$other", -3]}}}],
        [{"$set": {"tags": {"$concatArrays": ["$tags", [1]]}}},
         {"$set": {"tags": {"$reverseArray": "$tags"}}}],
    ]
    for pipe in grown:
        with pytest.raises(OperationFailure) as ei:
            c.update_one({"_id": 1}, pipe)
        assert_blocked(ei.value, "unbounded-push")

    # Counters that do not bound: incremented while held from below, another field
    # decremented, a decrement with no guard.
    near = [
        ({"_id": 1, "seatsLeft": {"$gt": 0}}, {"$inc": {"seatsLeft": 1}}),
        ({"_id": 1, "seatsLeft": {"$gt": 0}}, {"$inc": {"waiting": -1}}),
        ({"_id": 1}, {"$inc": {"seatsLeft": -1}}),
    ]
    for q, inc in near:
        with pytest.raises(OperationFailure) as ei:
            c.update_one(q, {"$push": {"attendees": SECRET}, **inc})
        assert_blocked(ei.value, "unbounded-push")
    # Nothing reached the server.
    assert list(clients.direct()[dbname]["events"].find({})) == before
    fs = wait_findings(p, rule="unbounded-push", ns=ns, n=len(grown) + len(near))
    assert {f["attr"]["command"] for f in fs} == {"update"}


def test_push_round4_bounded_pass(clients, upstream, start_proxy, dbname):
    seed(clients, dbname, "events", [{"_id": 1, "k": 1, "t": "x", "attendees": [],
                                      "seatsLeft": 2, "tags": []}])
    seed(clients, dbname, "events2", [{"_id": 1, "k": 1, "t": "x", "attendees": [],
                                       "seatsLeft": 2, "tags": []}])
    p = start_proxy(upstream.uri, config(rules(unbounded_push="block")))
    c = clients.via(p, appname="push4-ok")[dbname]["events"]
    d = clients.direct()[dbname]["events2"]

    # The remaining-capacity pattern: it runs, and stops at the counter's start.
    for i in range(3):
        r = c.update_one({"_id": 1, "seatsLeft": {"$gt": 0}},
                         {"$push": {"attendees": f"p{i}"}, "$inc": {"seatsLeft": -1}})
        assert r.matched_count == (1 if i < 2 else 0)
    got = clients.direct()[dbname]["events"].find_one({"_id": 1})
    assert got["attendees"] == ["p0", "p1"] and got["seatsLeft"] == 0

    # An update pipeline sliced by a later stage, and an earlier one: whatever the server
    # answers (FerretDB may refuse pipeline updates) reaches the client as it does directly.
    for pipe in (
        [{"$set": {"tags": {"$concatArrays": ["$tags", [SECRET]]}}},
         {"$set": {"tags": {"$slice": ["$tags", -10]}}}],
        [{"$set": {"tags": {"$slice": ["$tags", -9]}}},
         {"$set": {"tags": {"$concatArrays": ["$tags", ["y"]]}}}],
    ):
        via = not_blocked(lambda: c.update_one({"_id": 1}, pipe).raw_result)
        direct = outcome(lambda: d.update_one({"_id": 1}, pipe).raw_result)
        assert via[:2] == direct[:2], (via, direct)

    # $merge whose whenMatched slices the array, or does not append: not answered by
    # mongoguard ($merge may be refused by FerretDB itself).
    sliced = APPEND + [{"$set": {"tags": {"$slice": ["$tags", -50]}}}]
    for when in (sliced, "merge", [{"$set": {"t": "$$new.t"}}]):
        not_blocked(lambda: list(c.aggregate(merge("summary", when))))

    # $addToSet is silent: a set is bounded by its domain.
    c.update_one({"_id": 1}, {"$addToSet": {"tags": SECRET}})

    # So is a $push that a set guard keeps to values not there yet ($ne of the value, $nin
    # of every value, or of the pushed documents' key, as mongoose-unique-array sends):
    # each runs, and a second time matches nothing.
    sets = [
        ({"_id": 1, "tags": {"$ne": "s1"}}, {"$push": {"tags": "s1"}}),
        ({"_id": 1, "tags": {"$nin": ["s2", "s3"]}},
         {"$push": {"tags": {"$each": ["s2", "s3"]}}, "$inc": {"k": 1}}),
        ({"_id": 1, "attendees.name": {"$nin": ["ann"]}},
         {"$push": {"attendees": {"$each": [{"name": "ann", "seat": 3}]}}}),
    ]
    for q, u in sets:
        assert [c.update_one(q, u).matched_count for _ in range(2)] == [1, 0]
    got = clients.direct()[dbname]["events"].find_one({"_id": 1})
    assert [t for t in got["tags"] if t in ("s1", "s2", "s3")] == ["s1", "s2", "s3"]
    assert got["attendees"][-1] == {"name": "ann", "seat": 3}
    time.sleep(0.3)
    assert not p.log.findings("unbounded-push"), p.log.findings("unbounded-push")

    # A guard that keeps out another value than the one pushed bounds nothing.
    with pytest.raises(OperationFailure) as ei:
        c.update_one({"_id": 1, "tags": {"$nin": ["s1"]}}, {"$push": {"tags": "s9"}})
    assert_blocked(ei.value, "unbounded-push")


# --- case-insensitive-regex: caseLevel compares case ------------------------------------

def test_collation_case_level_silent(clients, upstream, start_proxy, dbname):
    seed(clients, dbname, "users", [{"_id": i, "name": f"N{i}"} for i in range(50)])
    clients.direct()[dbname]["users"].create_index("name")
    p = start_proxy(upstream.uri, config(rules(case_insensitive_regex="log")))
    c = clients.via(p, appname="case-level")[dbname]["users"]
    d = clients.direct()[dbname]["users"]
    ns = f"{dbname}.users"
    ci = Collation(locale="en", strength=2, caseLevel=False)
    # The near miss first: caseLevel false is case-insensitive, and reported once the index
    # list is known.
    until(lambda: (outcome(lambda: list(c.find({"name": SECRET}, collation=ci))),
                   p.log.findings("case-insensitive-regex"))[1])
    [f] = p.log.findings("case-insensitive-regex")
    check_finding(f, rule="case-insensitive-regex", action="log", ns=ns, command="find",
                  app="case-level")
    # caseLevel true at strength 1 or 2 compares case: no finding, the server's answer as is.
    mark = p.log.mark()
    for strength in (1, 2):
        cl = Collation(locale="en", strength=strength, caseLevel=True)
        q = lambda coll: list(coll.find({"name": SECRET}, collation=cl))  # noqa: E731
        assert outcome(lambda: q(c)) == outcome(lambda: q(d))
        assert outcome(lambda: c.count_documents({"name": SECRET}, collation=cl)) == \
            outcome(lambda: d.count_documents({"name": SECRET}, collation=cl))
    time.sleep(0.3)
    assert not p.log.findings("case-insensitive-regex", mark), \
        p.log.findings("case-insensitive-regex", mark)


# --- the ESR suggestion for $elemMatch ---------------------------------------------------

def suggested_key(suggestion: str) -> list[tuple[str, int]]:
    """The key document of `...createIndex({...}...)`, in order."""
    start = suggestion.index("createIndex(") + len("createIndex(")
    depth = 0
    for i, ch in enumerate(suggestion[start:], start):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth == 0:
            return list(json.loads(suggestion[start:i + 1]).items())
    raise AssertionError(suggestion)


def test_elem_match_suggestion_is_an_index(clients, upstream, start_proxy, dbname):
    seed(clients, dbname, "items", [{"_id": i, "tags": [{"k": f"k{i % 7}", "n": i % 5}],
                                     "scores": [i % 100, (i * 7) % 100]} for i in range(300)])
    p = start_proxy(upstream.uri, config(rules(collection_scan={"action": "log",
                                                                "minDocuments": 100})))
    c = clients.via(p, appname="elem")[dbname]["items"]
    d = clients.direct()[dbname]["items"]
    ns = f"{dbname}.items"
    # FerretDB may refuse an $elemMatch of several fields: its answer reaches the client.
    q = {"tags": {"$elemMatch": {"n": {"$gt": 1}, "k": SECRET}}}
    [f] = until(lambda: (outcome(lambda: list(c.find(q))),
                         p.log.findings("collection-scan"))[1])
    assert outcome(lambda: list(c.find(q))) == outcome(lambda: list(d.find(q)))
    check_finding(f, rule="collection-scan", action="log", ns=ns, command="find", app="elem")
    sugg = f["attr"]["suggestion"]
    assert sugg == (f'db.getSiblingDB("{dbname}").getCollection("items")'
                    '.createIndex({"tags.k": 1, "tags.n": 1})'), sugg
    mark = p.log.mark()
    outcome(lambda: list(c.find({"scores": {"$elemMatch": {"$gte": 80, "$lt": 85}}})))
    [g] = wait_findings(p, rule="collection-scan", ns=ns, since=mark)
    assert g["attr"]["suggestion"].endswith('.createIndex({"scores": 1})'), g["attr"]
    # What was suggested, the server creates.
    for s in (sugg, g["attr"]["suggestion"]):
        key = suggested_key(s)
        assert key
        d.create_index(key)
    names = {tuple(ix["key"].items()) for ix in d.list_indexes()}
    assert (("tags.k", 1), ("tags.n", 1)) in names and (("scores", 1),) in names
