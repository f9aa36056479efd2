"""Issue 24, detection round three, on real driver traffic (pymongo) through mongoguard:
large-document on the writes that grow a document in place, and case-insensitive-regex on
queries run with a case-insensitive collation that no index with that collation serves.

FerretDB ignores $push's $slice, has no collation indexes and may refuse a collation or an
update pipeline. Where it refuses, the test asserts mongoguard's finding in its log and that
the server's own answer reached the client as it does directly; the rule logic itself is
unit-tested through the engine (tests/unit/test_rule_doc.c,
tests/unit/test_rule_regex_collation.c).
"""

from __future__ import annotations

import io
import time

import gridfs
import pytest
from pymongo import UpdateOne
from pymongo.collation import Collation
from pymongo.errors import BulkWriteError, OperationFailure

from test_analyzers import (SECRET, assert_blocked, check_finding, config, seed,
                            wait_findings)
from test_rules_round2 import blocked_by, rules, until

EN2 = Collation(locale="en", strength=2)


def outcome(fn):
    """What the client saw: ("ok", result) or ("error", code, message)."""
    try:
        return ("ok", fn())
    except OperationFailure as e:
        return ("error", e.code, str(e.details.get("errmsg") if e.details else e))


def not_blocked(fn):
    """fn's outcome, asserting mongoguard did not answer it."""
    got = outcome(fn)
    assert got[0] == "ok" or (got[1] != 96 and "mongoguard" not in got[2]), got
    return got


# --- large-document: writes that grow a document in place ------------------------------

def test_large_document_updates_block(clients, upstream, start_proxy, dbname):
    seed(clients, dbname, "docs", [{"_id": 1, "l": [], "tags": []}])
    p = start_proxy(upstream.uri, config(rules(large_document="block")))
    c = clients.via(p, appname="grow-block")[dbname]["docs"]
    ns = f"{dbname}.docs"
    blocked = [
        ("$push appends 1500 elements to \"l\" in one write ($each with no $slice)",
         lambda: c.update_one({"_id": 1}, {"$push": {"l": {"$each": list(range(1500))}}})),
        ("$addToSet adds up to 1200 elements to \"tags\"",
         lambda: c.update_one({"_id": 1}, {"$addToSet": {"tags": {"$each": list(range(1200))}}})),
        ("$set writes a value of",
         lambda: c.update_one({"_id": 1}, {"$set": {"profile.bio": SECRET * 300000}})),
        ("$setOnInsert writes array \"hist\" of 2000 elements",
         lambda: c.update_one({"_id": 2}, {"$setOnInsert": {"hist": [0] * 2000}}, upsert=True)),
        ("$push appends 1001 elements",
         lambda: c.find_one_and_update({"_id": 1},
                                       {"$push": {"l": {"$each": [SECRET] * 1001}}})),
        ("update pipeline stage $set appends at least 1500 literal elements to \"l\" with "
         "$concatArrays",
         lambda: c.update_one({"_id": 1},
                              [{"$set": {"l": {"$concatArrays": ["$l", list(range(1500))]}}}])),
    ]
    for words, fn in blocked:
        with pytest.raises(OperationFailure) as ei:
            fn()
        assert_blocked(ei.value, "large-document")
        assert words in ei.value.details["errmsg"], ei.value.details["errmsg"]
    with pytest.raises((OperationFailure, BulkWriteError)):
        c.bulk_write([UpdateOne({"_id": 1}, {"$push": {"m": {"$each": list(range(1001))}}})])
    # Nothing reached the server.
    assert list(clients.direct()[dbname]["docs"].find({})) == [{"_id": 1, "l": [], "tags": []}]
    fs = wait_findings(p, rule="large-document", ns=ns, n=len(blocked) + 1)
    check_finding(fs[0], rule="large-document", action="block", ns=ns, command="update",
                  app="grow-block")
    assert fs[0]["attr"]["shape"]["longArray"] == "l", fs[0]["attr"]["shape"]
    assert {f["attr"]["command"] for f in fs} == {"update", "findAndModify"}

    # Near misses pass: a $push capped by $slice (FerretDB ignores the $slice, so the array
    # does grow there), exactly maxArrayLength, the bucket pattern, small $set values.
    mark = p.log.mark()
    c.update_one({"_id": 1}, {"$push": {"l": {"$each": list(range(1500)), "$slice": -5}}})
    c.update_one({"_id": 1}, {"$addToSet": {"tags": {"$each": list(range(1000))}}})
    for i in range(3):
        c.update_one({"sensor": "s", "count": {"$lt": 200}},
                     {"$push": {"readings": {"t": i, "v": SECRET}}, "$inc": {"count": 1}},
                     upsert=True)
    c.update_one({"_id": 1}, {"$set": {"name": SECRET, "n": 1}})
    assert len(clients.direct()[dbname]["docs"].find_one({"_id": 1})["tags"]) == 1000
    time.sleep(0.3)
    assert not p.log.findings("large-document", mark), p.log.findings("large-document", mark)


def test_large_document_updates_log(clients, upstream, start_proxy, dbname):
    seed(clients, dbname, "docs", [{"_id": 1, "l": [1]}])
    p = start_proxy(upstream.uri, config(rules(large_document={"action": "log",
                                                               "maxArrayLength": 10})))
    c = clients.via(p, appname="grow-log")[dbname]["docs"]
    d = clients.direct()[dbname]["docs"]
    ns = f"{dbname}.docs"
    # Logged, and the server's own answer comes back as it does directly.
    r = c.update_one({"_id": 1}, {"$push": {"l": {"$each": list(range(11))}}})
    assert r.matched_count == 1 and r.modified_count == 1
    [f] = wait_findings(p, rule="large-document", ns=ns)
    check_finding(f, rule="large-document", action="log", ns=ns, command="update",
                  app="grow-log")
    assert "$push appends 11 elements to \"l\" in one write ($each with no $slice)" in \
        f["attr"]["detail"]
    assert "$slice: -N" in f["attr"]["suggestion"]
    assert len(d.find_one({"_id": 1})["l"]) == 12
    mark = p.log.mark()
    r = c.update_one({"_id": 1}, {"$set": {"m": {"x": list(range(20))}}})
    assert r.modified_count == 1
    [f] = wait_findings(p, rule="large-document", ns=ns, since=mark)
    assert "$set writes array \"m.x\" of 20 elements" in f["attr"]["detail"]
    # An update pipeline: whatever FerretDB answers reaches the client unchanged.
    mark = p.log.mark()
    pipe = [{"$set": {"l": {"$concatArrays": ["$l", list(range(12))]}}}]
    via = not_blocked(lambda: c.update_one({"_id": 1}, pipe).raw_result)
    [f] = wait_findings(p, rule="large-document", ns=ns, since=mark)
    assert "appends at least 12 literal elements to \"l\" with $concatArrays" in \
        f["attr"]["detail"]
    seed(clients, dbname, "docs2", [{"_id": 1, "l": [1]}])
    direct = outcome(lambda: clients.direct()[dbname]["docs2"].update_one({"_id": 1}, pipe)
                     .raw_result)
    assert via[:2] == direct[:2], (via, direct)  # the result, or the error's code


def test_large_document_gridfs_chunks_silent(clients, upstream, start_proxy, dbname):
    """GridFS writes its chunks into <bucket>.chunks: large by design, never a finding."""
    p = start_proxy(upstream.uri, config(rules(large_document="block")))
    db = clients.via(p)[dbname]
    data = bytes(range(256)) * (12 << 12)  # 12 MiB, in chunks of 3 MiB: each over maxBytes
    bucket = gridfs.GridFSBucket(db, bucket_name="photos", chunk_size_bytes=3 << 20)
    fid = bucket.upload_from_stream("big.bin", io.BytesIO(data))
    assert bucket.open_download_stream(fid).read() == data
    assert clients.direct()[dbname]["photos.chunks"].count_documents({}) == 4
    time.sleep(0.3)
    assert not p.log.findings("large-document")
    # The same 3 MiB elsewhere is one.
    with pytest.raises(OperationFailure) as ei:
        db["blobs"].insert_one({"data": data[: 3 << 20]})
    assert_blocked(ei.value, "large-document")


# --- case-insensitive-regex: a collation no index with it serves -----------------------

def seed_users(clients, dbname: str):
    seed(clients, dbname, "users", [{"_id": i, "name": f"N{i}", "age": i % 50}
                                    for i in range(100)])
    d = clients.direct()[dbname]["users"]
    d.create_index("name")
    d.create_index("age")


def test_collation_without_index_log(clients, upstream, start_proxy, dbname):
    seed_users(clients, dbname)
    p = start_proxy(upstream.uri, config(rules(case_insensitive_regex="log")))
    c = clients.via(p, appname="coll-log")[dbname]["users"]
    d = clients.direct()[dbname]["users"]
    ns = f"{dbname}.users"
    # The first queries may pass before the side channel knows the index list.
    find = lambda coll: list(coll.find({"name": SECRET}, collation=EN2))  # noqa: E731
    until(lambda: (outcome(lambda: find(c)), p.log.findings("case-insensitive-regex"))[1])
    [f] = p.log.findings("case-insensitive-regex")
    check_finding(f, rule="case-insensitive-regex", action="log", ns=ns, command="find",
                  app="coll-log")
    a = f["attr"]
    assert a["detail"].startswith('"name" is compared case-insensitively with collation '
                                  '{locale: "en", strength: 2}, but no index of ' + ns), a
    assert a["suggestion"].startswith(
        f'db.getSiblingDB("{dbname}").getCollection("users").createIndex({{"name": 1}}, '
        '{collation: {locale: "en", strength: 2}})'), a["suggestion"]
    # The server's answer (rows, or FerretDB's refusal of the collation) is unchanged.
    assert outcome(lambda: find(c)) == outcome(lambda: find(d))
    # Other carriers: count, update, delete, findAndModify, aggregate.
    mark = p.log.mark()
    ops = [
        lambda coll: coll.count_documents({"name": SECRET}, collation=EN2),
        lambda coll: coll.update_one({"name": SECRET}, {"$set": {"x": 1}},
                                     collation=EN2).matched_count,
        lambda coll: coll.delete_one({"name": SECRET}, collation=EN2).deleted_count,
        lambda coll: coll.find_one_and_update({"name": SECRET}, {"$set": {"x": 1}},
                                              collation=EN2),
        lambda coll: list(coll.aggregate([{"$match": {"name": SECRET}}], collation=EN2)),
    ]
    for op in ops:
        assert outcome(lambda: op(c)) == outcome(lambda: op(d))
    fs = wait_findings(p, rule="case-insensitive-regex", ns=ns, n=len(ops), since=mark)
    assert {f["attr"]["command"] for f in fs} == {"aggregate", "update", "delete",
                                                   "findAndModify"}
    # Near misses: no collation, strength 3, a numeric predicate an index bounds.
    mark = p.log.mark()
    list(c.find({"name": SECRET}))
    outcome(lambda: list(c.find({"name": SECRET}, collation=Collation(locale="en", strength=3))))
    outcome(lambda: list(c.find({"age": 7}, collation=EN2)))
    time.sleep(0.3)
    assert not p.log.findings("case-insensitive-regex", mark), \
        p.log.findings("case-insensitive-regex", mark)


def test_collation_without_index_block(clients, upstream, start_proxy, dbname):
    seed_users(clients, dbname)
    p = start_proxy(upstream.uri, config(rules(case_insensitive_regex="block")))
    c = clients.via(p, appname="coll-block")[dbname]["users"]
    ns = f"{dbname}.users"
    e = until(lambda: blocked_by(lambda: list(c.find({"name": SECRET}, collation=EN2)),
                                 "case-insensitive-regex"))
    assert 'createIndex({field: 1}, {collation: {locale: "en", strength: 2}})' in \
        e.details["errmsg"]
    [f] = wait_findings(p, rule="case-insensitive-regex", ns=ns)
    check_finding(f, rule="case-insensitive-regex", action="block", ns=ns, command="find",
                  app="coll-block")
    # A blocked update changed nothing.
    with pytest.raises(OperationFailure) as ei:
        c.update_many({"name": "N3"}, {"$set": {"hit": 1}}, collation=EN2)
    assert_blocked(ei.value, "case-insensitive-regex")
    assert clients.direct()[dbname]["users"].count_documents({"hit": 1}) == 0
    # A /i regex with a collation is one finding, the regex's.
    mark = p.log.mark()
    from bson.regex import Regex
    with pytest.raises(OperationFailure) as ei:
        list(c.find({"name": Regex("^n1", "i")}, collation=EN2))
    [f] = wait_findings(p, rule="case-insensitive-regex", ns=ns, since=mark)
    assert "case-insensitive regex" in f["attr"]["detail"]
    # Queries without a case-insensitive collation pass.
    assert len(list(c.find({"name": "N3"}))) == 1
    assert len(list(c.find({"age": {"$lt": 2}}))) == 4
