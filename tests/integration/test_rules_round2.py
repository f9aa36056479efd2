"""Issue 9: guards that bound a $push, collection-scan and large-document, on
real driver traffic (pymongo and the Node.js driver) through mongoguard, in
`log` and `block` mode.

collection-scan needs the index list and the document count of a collection,
which the side channel fetches when a request first asks; the rule never
holds a request for them, so the first requests to a collection pass without
a verdict. Tests therefore repeat a query until the verdict shows (bounded by
a deadline), and use a small `minDocuments` so that a seeded collection of a
few hundred documents counts as large.
"""

from __future__ import annotations

import time

import pytest
from pymongo import ReplaceOne, UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure

from test_analyzers import (RULES, SECRET, assert_blocked, check_finding, config, no_findings,
                            seed, snapshot, wait_findings)

ROUND2 = ["collection-scan", "large-document"]
ALL = RULES + [r for r in ROUND2 if r not in RULES]


def rules(**set_) -> dict:
    """Every rule off except those given (an action or a mapping)."""
    out = {r: "off" for r in ALL}
    for k, v in set_.items():
        out[k.replace("_", "-")] = v
    return out


def until(fn, timeout: float = 10.0):
    """Calls fn until it returns something truthy; returns that."""
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.1)


def blocked_by(fn, rule: str):
    """mongoguard's OperationFailure naming rule; None when fn passed to the server (it
    succeeded, or the server answered an error of its own)."""
    try:
        fn()
    except OperationFailure as e:
        if e.code != 96:
            return None
        assert_blocked(e, rule)
        return e
    return None


# --- unbounded-push: guards ----------------------------------------------------------------

def test_push_guards_block_mode(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(rules(unbounded_push="block")))
    c = clients.via(p, appname="guards")[dbname]["sensorData"]
    # The bucket pattern, as the schema guidance writes it, runs: 3 buckets of at most 2.
    for i in range(5):
        r = c.update_one({"sensorId": "s-42", "count": {"$lt": 2}},
                         {"$push": {"readings": {"t": i, "v": SECRET}}, "$inc": {"count": 1}},
                         upsert=True)
        assert r.upserted_id is not None or r.modified_count == 1
    buckets = list(clients.direct()[dbname]["sensorData"].find({}, {"_id": 0}).sort("count", -1))
    assert [b["count"] for b in buckets] == [2, 2, 1]
    assert all(len(b["readings"]) == b["count"] for b in buckets)
    # The outlier pattern's existence guard and a $size guard run too.
    seed(clients, dbname, "books", [{"_id": 1, "customers": []}])
    b = clients.via(p)[dbname]["books"]
    assert b.update_one({"_id": 1, "customers.999": {"$exists": False}},
                        {"$push": {"customers": "c1"}}).modified_count == 1
    # FerretDB does not implement $lt in $expr: the server's own answer must come back,
    # not a block.
    try:
        r = b.update_one({"_id": 1, "$expr": {"$lt": [{"$size": "$customers"}, 1000]}},
                         {"$push": {"customers": "c2"}})
        assert r.modified_count == 1
    except OperationFailure as e:
        assert e.code != 96 and "mongoguard" not in str(e.details), e.details
    # bulkWrite and findAndModify carry the guard the same way.
    c.bulk_write([UpdateOne({"sensorId": "s-7", "count": {"$lt": 5}},
                            {"$push": {"readings": 1}, "$inc": {"count": 1}}, upsert=True)])
    c.find_one_and_update({"sensorId": "s-7", "count": {"$lt": 5}},
                          {"$push": {"readings": 2}, "$inc": {"count": 1}})
    assert not p.log.findings("unbounded-push")
    # Near misses of a guard are still unbounded: a guard under $or, a counter not $inc'ed.
    for filt, upd in (({"$or": [{"count": {"$lt": 2}}, {"x": 1}]},
                       {"$push": {"readings": 1}, "$inc": {"count": 1}}),
                      ({"count": {"$lt": 2}}, {"$push": {"readings": 1}, "$inc": {"other": 1}}),
                      ({"other.9": {"$exists": False}}, {"$push": {"readings": 1}})):
        with pytest.raises(OperationFailure) as ei:
            c.update_one(filt, upd)
        assert_blocked(ei.value, "unbounded-push")
    fs = wait_findings(p, rule="unbounded-push", ns=f"{dbname}.sensorData", n=3)
    check_finding(fs[0], rule="unbounded-push", action="block", ns=f"{dbname}.sensorData",
                  command="update", app="guards")
    assert "$push to \"readings\" has no $each + $slice" in fs[0]["attr"]["detail"]


def test_push_guards_log_mode(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(rules(unbounded_push="log")))
    c = clients.via(p)[dbname]["b"]
    c.update_one({"k": 1, "n": {"$lt": 10}}, {"$push": {"r": 1}, "$inc": {"n": 1}}, upsert=True)
    c.update_one({"k": 1}, {"$push": {"sentinel": 1}})
    [f] = wait_findings(p, rule="unbounded-push", ns=f"{dbname}.b")
    assert "sentinel" in f["attr"]["detail"]
    assert len(p.log.findings("unbounded-push")) == 1
    assert snapshot(clients, dbname, "b")[0]["sentinel"] == [1]


# --- collection-scan ---------------------------------------------------------------------

def seed_scan(clients, dbname: str, coll: str = "orders", n: int = 300):
    docs = [{"_id": i, "status": "AB"[i % 2], "qty": i % 10, "name": f"n{i}"} for i in range(n)]
    seed(clients, dbname, coll, docs)
    clients.direct()[dbname][coll].create_index("status")


SCAN = {"action": "log", "minDocuments": 100}


def test_collection_scan_log(clients, upstream, start_proxy, dbname):
    seed_scan(clients, dbname)
    seed_scan(clients, dbname, "small", 20)
    p = start_proxy(upstream.uri, config(rules(collection_scan=SCAN)))
    c = clients.via(p, appname="scan-log")[dbname]["orders"]
    ns = f"{dbname}.orders"
    # Repeated until the side channel knows the indexes and the count.
    fs = until(lambda: (list(c.find({"qty": 5})), p.log.findings("collection-scan"))[1])
    [f] = fs
    check_finding(f, rule="collection-scan", action="log", ns=ns, command="find", app="scan-log")
    a = f["attr"]
    assert "qty: no usable index leads with it" in a["detail"], a["detail"]
    assert "about 300" in a["detail"] and "status_1" in a["detail"]
    assert a["suggestion"] == (f'db.getSiblingDB("{dbname}").getCollection("orders")'
                               '.createIndex({"qty": 1})')
    # The query itself ran.
    assert len(list(c.find({"qty": 5}))) == 30
    # Other carriers, each a finding of its own shape.
    mark = p.log.mark()
    c.count_documents({"qty": {"$gt": 7}})
    c.update_many({"name": {"$ne": "x"}}, {"$set": {"seen": 1}})
    c.delete_many({"qty": 11})
    list(c.aggregate([{"$match": {"qty": 3}}, {"$group": {"_id": "$status"}}]))
    list(c.find({}))
    fs = wait_findings(p, rule="collection-scan", ns=ns, n=5, since=mark)
    assert {f["attr"]["command"] for f in fs} == {"aggregate", "update", "delete", "find"}
    assert any("an empty filter" in f["attr"]["detail"] for f in fs)
    # $ne is bounded by an index on its field (complemented bounds), and none leads with name
    assert any("name: no usable index leads with it" in f["attr"]["detail"] for f in fs)
    # Near misses: an indexed field, _id, an $or of indexed branches, a small limit, a
    # count of everything from the metadata (countDocuments({}) reads every document: a
    # finding since round four), and a collection below minDocuments.
    mark = p.log.mark()
    list(c.find({"status": "A"}))
    list(c.find({"_id": 5}))
    list(c.find({"$or": [{"status": "A"}, {"_id": 3}]}))
    list(c.find({}).limit(5))
    c.estimated_document_count()
    s = clients.via(p)[dbname]["small"]
    for _ in range(5):
        list(s.find({"qty": 5}))
        time.sleep(0.1)
    time.sleep(0.3)
    assert not p.log.findings("collection-scan", mark), p.log.findings("collection-scan", mark)


def test_collection_scan_block_and_new_index(clients, upstream, start_proxy, dbname):
    seed_scan(clients, dbname)
    p = start_proxy(upstream.uri, config(rules(collection_scan={**SCAN, "action": "block"})))
    c = clients.via(p, appname="scan-block")[dbname]["orders"]
    e = until(lambda: blocked_by(lambda: list(c.find({"qty": 5})), "collection-scan"))
    assert "no index on" in e.details["errmsg"] and "createIndex({\"qty\": 1})" in \
        e.details["errmsg"]
    [f] = wait_findings(p, rule="collection-scan", ns=f"{dbname}.orders")
    check_finding(f, rule="collection-scan", action="block", ns=f"{dbname}.orders",
                  command="find", app="scan-block")
    # A blocked update changed nothing.
    with pytest.raises(OperationFailure) as ei:
        c.update_many({"qty": 5}, {"$set": {"hit": 1}})
    assert_blocked(ei.value, "collection-scan")
    assert clients.direct()[dbname]["orders"].count_documents({"hit": 1}) == 0
    # explain is never blocked.
    assert c.find({"qty": 5}).explain()
    # Indexed queries pass; after the suggested index is created (through the proxy,
    # which drops the cached list), the query passes too.
    assert len(list(c.find({"status": "A"}))) == 150
    c.create_index("qty")
    assert len(until(lambda: (lambda r: r if r is not None else None)(
        _ok(lambda: list(c.find({"qty": 5})))))) == 30


def _ok(fn):
    try:
        return fn()
    except OperationFailure:
        return None


def test_collection_scan_lookup_foreign_side(clients, upstream, start_proxy, dbname):
    seed_scan(clients, dbname)
    seed_scan(clients, dbname, "users")
    p = start_proxy(upstream.uri, config(rules(collection_scan={**SCAN, "action": "block"})))
    c = clients.via(p)[dbname]["orders"]
    pipeline = [{"$match": {"status": "A"}},
                {"$lookup": {"from": "users", "localField": "qty", "foreignField": "qty",
                             "as": "u"}}]
    e = until(lambda: blocked_by(lambda: list(c.aggregate(pipeline)), "collection-scan"))
    assert f"$lookup from {dbname}.users on foreignField \"qty\"" in e.details["errmsg"]
    # logged at the joined collection, the one scanned (until stop 40: at orders)
    [f] = wait_findings(p, rule="collection-scan", ns=f"{dbname}.users")
    assert f["attr"]["suggestion"] == (f'db.getSiblingDB("{dbname}").getCollection("users")'
                                       '.createIndex({"qty": 1})')


# --- large-document ----------------------------------------------------------------------

def test_large_document_block(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(rules(large_document="block")))
    c = clients.via(p, appname="big-block")[dbname]["docs"]
    ns = f"{dbname}.docs"
    with pytest.raises(OperationFailure) as ei:
        c.insert_one({"_id": 1, "events": [{"k": SECRET}] * 1500})
    assert_blocked(ei.value, "large-document")
    assert "holds array \"events\" of 1500 elements" in ei.value.details["errmsg"]
    [f] = wait_findings(p, rule="large-document", ns=ns)
    check_finding(f, rule="large-document", action="block", ns=ns, command="insert",
                  app="big-block")
    with pytest.raises((OperationFailure, BulkWriteError)):
        c.insert_many([{"_id": 2}, {"_id": 3, "blob": "x" * (3 << 20)}])
    # Within the limits: written.
    c.insert_one({"_id": 4, "a": list(range(1000)), "s": "y" * 100000})
    # A replacement document is judged, and so is what an update operator writes.
    with pytest.raises(OperationFailure) as ei:
        c.replace_one({"_id": 4}, {"a": list(range(1001))})
    assert_blocked(ei.value, "large-document")
    with pytest.raises((OperationFailure, BulkWriteError)):
        c.bulk_write([ReplaceOne({"_id": 4}, {"nested": {"deep": [list(range(2000))]}})])
    with pytest.raises(OperationFailure) as ei:
        c.update_one({"_id": 4}, {"$set": {"b": list(range(1500))}})
    assert_blocked(ei.value, "large-document")
    c.update_one({"_id": 4}, {"$set": {"b": list(range(1000))}})
    got = clients.direct()[dbname]["docs"].find({}, {"_id": 1}).sort("_id", 1)
    assert [d["_id"] for d in got] == [4]
    big = clients.direct()[dbname]["docs"].find_one({"_id": 4})
    assert len(big["a"]) == 1000 and len(big["b"]) == 1000
    fs = wait_findings(p, rule="large-document", ns=ns, n=4)
    assert any("over maxBytes 2097152" in f["attr"]["detail"] and '"blob"' in f["attr"]["detail"]
               for f in fs)


def test_large_document_log(clients, upstream, start_proxy, dbname):
    p = start_proxy(upstream.uri, config(rules(large_document={"action": "log",
                                                               "maxArrayLength": 10})))
    c = clients.via(p)[dbname]["docs"]
    c.insert_one({"_id": 1, "orders": [{"items": list(range(11))}]})
    c.insert_one({"_id": 2, "orders": [{"items": list(range(10))}]})
    [f] = wait_findings(p, rule="large-document", ns=f"{dbname}.docs")
    check_finding(f, rule="large-document", action="log", ns=f"{dbname}.docs", command="insert")
    assert "holds array \"orders.0.items\" of 11 elements, over maxArrayLength 10" in \
        f["attr"]["detail"]
    assert "subset pattern" in f["attr"]["suggestion"]
    assert clients.direct()[dbname]["docs"].count_documents({}) == 2
    no_findings(p, rule="unbounded-push", ns=f"{dbname}.docs")


# --- the Node.js driver ------------------------------------------------------------------

def _node(node_modules, uri, db):
    from test_clients import node
    return node(node_modules, uri, db, "round2", {"appName": "node-round2"})


def test_node_round2_log_mode(node_modules, clients, upstream, start_proxy, dbname):
    seed_scan(clients, dbname, "scan")
    cfg = config(rules(unbounded_push="log", large_document="log", collection_scan=SCAN))
    p = start_proxy(upstream.uri, cfg)
    until(lambda: (list(clients.via(p)[dbname]["scan"].find({"qty": 5})),
                   p.log.findings("collection-scan"))[1])
    seed_scan(clients, dbname + "_d", "scan")
    direct = _node(node_modules, upstream.uri, dbname + "_d")
    via = _node(node_modules, p.uri, dbname)
    assert via == direct
    assert via["bucket"] == 1 and via["push"] == 1 and via["large"] is True and via["scan"] == 30
    push = wait_findings(p, rule="unbounded-push", ns=f"{dbname}.buckets")
    assert len(push) == 1 and "\"log\"" in push[0]["attr"]["detail"]  # the bucket push is silent
    [big] = wait_findings(p, rule="large-document", ns=f"{dbname}.docs")
    check_finding(big, rule="large-document", action="log", ns=f"{dbname}.docs",
                  command="insert", app="node-round2")


def test_node_round2_block_mode(node_modules, clients, upstream, start_proxy, dbname):
    seed_scan(clients, dbname, "scan")
    cfg = config(rules(unbounded_push="block", large_document="block",
                       collection_scan={**SCAN, "action": "block"}))
    p = start_proxy(upstream.uri, cfg)
    until(lambda: blocked_by(lambda: list(clients.via(p)[dbname]["scan"].find({"qty": 5})),
                             "collection-scan"))
    via = _node(node_modules, p.uri, dbname)
    assert via["bucket"] == 1, via["bucket"]  # the guarded push is not blocked
    for key, rule in (("push", "unbounded-push"), ("large", "large-document"),
                      ("scan", "collection-scan")):
        assert via[key]["code"] == 96 and via[key]["blocked"] and via[key]["rule"] == rule, \
            via[key]
    assert via["docs"] == 0
    assert via["buckets"] == [{"sensor": "s", "count": 1, "readings": [1]}]
    wait_findings(p, rule="large-document", ns=f"{dbname}.docs", action="block")
