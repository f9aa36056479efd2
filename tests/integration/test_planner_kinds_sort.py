"""Issue 32, detection round four: index-mismatched-sort on the index kinds and multikey facts
FerretDB cannot show, end to end through the real proxy with pymongo, in front of the scripted
upstream (fakeserver.py's catalogue: listIndexes, count and the multikey explain answered as
mongod does; every query gets an empty cursor, so the findings are mongoguard's own).

Each hit and each near miss is a verdict mongod's planner gives (query_solution.cpp's
computeSortsForScan, planner_ixselect, query_planner.cpp's whole-index scan for a sort). The
rule's tables are tests/unit/test_sort_kinds.c, test_sort_lookup.c and test_rule_sort.c.
"""

from __future__ import annotations

import json
import time

from bson.objectid import ObjectId
from pymongo import MongoClient

from conftest import free_port
from fakeserver import FakeServer
from test_admin import get, samples
from test_analyzers import check_finding, config, wait_findings
from test_rules_round2 import rules, until

FR = {"locale": "fr", "strength": 2}

CATALOGUE = {
    # items holds arrays: both keys of iq are multikey through "items"
    "shop.items": ([{"key": {"items.sku": 1, "items.qty": 1}, "name": "iq"}], ["items"]),
    # the same index where nothing is an array
    "shop.flat": ([{"key": {"items.sku": 1, "items.qty": 1}, "name": "iq"}], []),
    "shop.kinds": ([
        {"key": {"p": 1}, "name": "p_1", "partialFilterExpression": {"p": {"$gt": 5}}},
        {"key": {"s": 1}, "name": "s_1", "sparse": True},
        {"key": {"h": "hashed"}, "name": "h_hashed"},
        {"key": {"hid": 1}, "name": "hid_1", "hidden": True},
        {"key": {"w.$**": 1}, "name": "w_wild"},
        {"key": {"_fts": "text", "_ftsx": 1}, "name": "body_text", "weights": {"body": 1}},
        {"key": {"loc": "2dsphere"}, "name": "loc_2dsphere"},
        {"key": {"email": 1}, "name": "email_1", "unique": True},
        {"key": {"at": 1}, "name": "at_1", "expireAfterSeconds": 3600},
    ], []),
    # a collection with a default collation: its _id index carries it, as mongod lists it
    "shop.fr": ([{"key": {"_id": 1}, "name": "_id_", "collation": FR},
                 {"key": {"name": 1}, "name": "name_1", "collation": FR}], []),
    "shop.lines": ([{"key": {"order": 1, "at": -1}, "name": "order_1_at_-1"}], []),
    # a compound wildcard index (7.0) led by regular keys
    "shop.cwi": ([{"key": {"tenant": 1, "at": 1, "$**": 1, "rank": 1},
                   "name": "tenant_1_at_1_$**_1_rank_1",
                   "wildcardProjection": {"tenant": 0, "at": 0, "rank": 0}}], []),
}


def scripted(start_proxy, appname: str):
    srv = FakeServer()
    srv.start()
    for ns, (indexes, multikey) in CATALOGUE.items():
        srv.add_collection(ns, indexes=indexes, count=50000, multikey=multikey)
    p = start_proxy(srv.uri, config(rules(index_mismatched_sort="log")))
    client = MongoClient(p.uri, appname=appname, serverSelectionTimeoutMS=10000)
    return srv, p, client


def ready(p, db):
    """Repeats a sort no index provides on each collection until the side connection knows its
    catalogue (the first verdicts are late ones)."""
    for ns in CATALOGUE:
        coll = ns.split(".", 1)[1]
        until(lambda: (list(db[coll].find({}).sort("zz", 1)),
                       [f for f in p.log.findings("index-mismatched-sort")
                        if f["attr"]["ns"] == ns])[1])


def test_index_kinds_and_multikey_sorts(start_proxy):
    srv, p, client = scripted(start_proxy, "round4-kinds")
    try:
        db = client["shop"]
        ready(p, db)
        assert srv.messages("listIndexes") and srv.messages("explain")
        hits = [
            # a bound on items.sku, which shares the array "items" with items.qty
            ("shop.items", 'sort {"items.qty": 1} on shop.items: no index provides it',
             lambda: list(db.items.find({"items.sku": "x"}).sort("items.qty", 1))),
            ("shop.items", 'sort {"items.qty": 1} on shop.items',
             lambda: list(db.items.find({"items": {"$elemMatch": {"sku": "x"}}})
                          .sort("items.qty", 1))),
            # a partial index the filter does not imply
            ("shop.kinds", 'sort {"p": 1} on shop.kinds: no index provides it',
             lambda: list(db.kinds.find({"p": {"$gt": 1}}).sort("p", 1))),
            # a sparse index with a predicate a missing field satisfies
            ("shop.kinds", 'sort {"s": 1} on shop.kinds',
             lambda: list(db.kinds.find({"s": None}).sort("s", 1))),
            ("shop.kinds", 'sort {"h": 1} on shop.kinds',
             lambda: list(db.kinds.find({}).sort("h", 1))),
            ("shop.kinds", 'sort {"hid": 1} on shop.kinds',
             lambda: list(db.kinds.find({}).sort("hid", 1))),
            # a wildcard index gives no order to a path the filter does not bound
            ("shop.kinds", 'sort {"w.a": 1} on shop.kinds',
             lambda: list(db.kinds.find({}).sort("w.a", 1))),
            ("shop.kinds", 'sort {"loc": 1} on shop.kinds',
             lambda: list(db.kinds.find({}).sort("loc", 1))),
            # a compound wildcard index orders by its regular prefix only, and is sparse
            ("shop.cwi", 'sort {"rank": 1} on shop.cwi: no index provides it',
             lambda: list(db.cwi.find({"tenant": 5}).sort("rank", 1))),
            ("shop.cwi", 'sort {"tenant": 1} on shop.cwi: no index provides it',
             lambda: list(db.cwi.find({}).sort("tenant", 1))),
            # a wildcard index sorts as its expansion for a predicated path: that path,
            # after a compound one's regular keys (here at, unbound, orders first)
            ("shop.kinds", 'sort {"w.a": 1, "w.b": 1} on shop.kinds',
             lambda: list(db.kinds.find({"w.a": {"$gt": 1}, "w.b": {"$gt": 1}})
                          .sort([("w.a", 1), ("w.b", 1)]))),
            ("shop.cwi", 'sort {"color": 1} on shop.cwi: no index provides it',
             lambda: list(db.cwi.find({"tenant": 5, "color": {"$gt": "a"}}).sort("color", 1))),
            # a $lookup sub-pipeline's $sort, judged at the foreign namespace
            ("shop.lines", 'sort {"qty": 1} on shop.lines: no index provides it',
             lambda: list(db.kinds.aggregate([{"$lookup": {
                 "from": "lines", "let": {"o": "$_id"},
                 "pipeline": [{"$match": {"$expr": {"$eq": ["$order", "$$o"]}}},
                              {"$sort": {"qty": 1}}], "as": "l"}}]))),
        ]
        for ns, words, fn in hits:
            mark = p.log.mark()
            fn()
            [f] = wait_findings(p, rule="index-mismatched-sort", ns=ns, since=mark)
            assert words in f["attr"]["detail"], (words, f["attr"]["detail"])
        check_finding(f, rule="index-mismatched-sort", action="log", ns="shop.lines",
                      command="aggregate", app="round4-kinds")
        assert 'createIndex({"order": 1, "qty": 1})' in f["attr"]["suggestion"]

        # Near misses: sorts mongod's plan provides (or bounds to a few documents).
        mark = p.log.mark()
        list(db.items.find({}).sort([("items.sku", 1), ("items.qty", 1)]))
        list(db.flat.find({"items.sku": "x"}).sort("items.qty", 1))
        list(db.flat.find({"items": {"$elemMatch": {"sku": "x"}}}).sort("items.qty", 1))
        list(db.kinds.find({"p": {"$gt": 6}}).sort("p", 1))
        list(db.kinds.find({"s": {"$gt": 1}}).sort("s", 1))
        list(db.kinds.find({}).sort("at", -1))
        list(db.kinds.find({"email": "a@b"}).sort("name", 1))
        list(db.kinds.find({"_id": {"$in": [ObjectId() for _ in range(20)]}}).sort("name", 1))
        list(db.fr.find({}).sort("name", 1))
        list(db.cwi.find({"tenant": 5}).sort("at", 1))
        list(db.cwi.find({"tenant": {"$gt": 1}}).sort([("tenant", 1), ("at", 1)]))
        list(db.cwi.find({"tenant": 5, "color": "red"}).sort("at", 1))
        list(db.cwi.find({"tenant": 5, "at": 3, "color": {"$gt": "a"}}).sort("color", 1))
        list(db.lines.find({"$expr": {"$eq": ["$order", 5]}}).sort("at", -1))
        list(db.kinds.aggregate([{"$lookup": {
            "from": "lines", "let": {"o": "$_id"},
            "pipeline": [{"$match": {"$expr": {"$eq": ["$order", "$$o"]}}},
                         {"$sort": {"at": -1}}], "as": "l"}}]))
        list(db.kinds.aggregate([{"$lookup": {
            "from": "lines", "localField": "_id", "foreignField": "order",
            "pipeline": [{"$sort": {"at": -1}}], "as": "l"}}]))
        time.sleep(0.5)
        assert not p.log.findings("index-mismatched-sort", mark), \
            [f["attr"]["detail"] for f in p.log.findings("index-mismatched-sort", mark)]
    finally:
        client.close()
        srv.stop()


def test_held_out_explode_and_all(start_proxy):
    """Held-out cases from mongod's jstests (session of 2026-12-06): the merged scans of an
    exploded $in give no order past a multikey key (explodeForSort; SERVER-56865,
    explode_for_sort_multikey.js), so the sort is done in memory (it was silent); $all of values
    is an $and of equalities, one of which pins the field (explode_for_sort_equality_to_array.js),
    so the order after it is provided (it was reported)."""
    srv = FakeServer()
    srv.start()
    srv.add_collection("shop.xm", count=50000, multikey=["m"],
                       indexes=[{"key": {"a": 1, "m": 1}, "name": "a_1_m_1"}])
    srv.add_collection("shop.xe", count=50000,
                       indexes=[{"key": {"t": 1, "n": 1}, "name": "t_1_n_1"}])
    p = start_proxy(srv.uri, config(rules(index_mismatched_sort="log")))
    client = MongoClient(p.uri, appname="held-out-sort", serverSelectionTimeoutMS=10000)
    try:
        db = client["shop"]
        for coll in ("xm", "xe"):  # the catalogue known (first verdicts are late)
            until(lambda: (list(db[coll].find({}).sort("zz", 1)),
                           [f for f in p.log.findings("index-mismatched-sort")
                            if f["attr"]["ns"] == "shop." + coll])[1])
        for ns, fn in [
            ("shop.xm", lambda: list(db.xm.find({"a": {"$in": [1, 2]}}).sort("m", 1))),
            ("shop.xe", lambda: list(db.xe.find({"t": {"$all": [{"$elemMatch": {"$gt": 1}}]}})
                                 .sort("n", 1))),
        ]:
            mark = p.log.mark()
            fn()
            wait_findings(p, rule="index-mismatched-sort", ns=ns, since=mark)
        mark = p.log.mark()
        list(db.xm.find({"a": 1}).sort("m", 1))  # one point: the scan orders by m
        list(db.xm.find({"a": {"$in": [1, 2]}}).sort("a", 1))
        list(db.xe.find({"t": {"$all": [1, 2]}}).sort("n", 1))
        list(db.xe.find({"t": {"$all": [1]}}).sort("n", 1))
        list(db.xe.find({"t": {"$all": [[1], [2]]}}).sort("n", 1))  # two points: merged
        time.sleep(0.5)
        got = p.log.findings("index-mismatched-sort", mark)
        assert not got, [(f["attr"]["shape"], f["attr"]["detail"]) for f in got]
    finally:
        client.close()
        srv.stop()


def test_late_call_counts_each_finding_once(start_proxy):
    """One aggregate, sent once, whose leading $sort waits for the collection's index list (a
    late verdict) and whose $facet sorts need none (reported at once): the late call judges the
    sort rule again and found the $facet's sorts again, counting them in
    mongoguard_findings_total and as repeats in the log (3 for one request: helper, held-out
    set 3). Each is counted once, and the leading $sort's own late finding counts too, though
    it has the same shape as the others."""
    srv = FakeServer()
    srv.start()
    srv.add_collection("shop.fac", count=50000, indexes=[])
    port = free_port()
    cfg = {"admin": {"listen": f"127.0.0.1:{port}"},
           "analysis": {"summaryIntervalSecs": 1},
           "rules": rules(index_mismatched_sort="log")}
    p = start_proxy(srv.uri, json.dumps(cfg) + "\n")
    client = MongoClient(p.uri, appname="late-once", serverSelectionTimeoutMS=10000)
    key = 'mongoguard_findings_total{rule="index-mismatched-sort",action="log"}'
    try:
        list(client["shop"]["fac"].aggregate([
            {"$sort": {"a": 1}},
            {"$facet": {"x": [{"$sort": {"a": 1}}], "y": [{"$sort": {"b": 1}}]}}]))
        until(lambda: samples(get(port, "/metrics")[2])[key] >= 3)  # the late one
        time.sleep(1.5)  # anything counted twice would be by now, and a summary interval
        assert samples(get(port, "/metrics")[2])[key] == 3
        got = p.log.findings("index-mismatched-sort")
        assert sum(f["attr"]["repeats"] or 1 for f in got) == 3, [f["attr"] for f in got]
    finally:
        client.close()
        srv.stop()
