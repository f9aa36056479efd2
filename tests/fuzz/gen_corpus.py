#!/usr/bin/env python3
"""Writes the seed corpora under tests/fuzz/corpus/ (standard library only).

fuzz_bson_command seeds are command bodies (BSON, no $db: the target adds
"$db": "test"); a few carry kind-1 sections after the body. fuzz_request
seeds are whole wire messages: the same bodies as OP_MSG, handshakes as
OP_QUERY and OP_MSG, OP_COMPRESSED wrappings, and the real captures from
tests/unit/fixtures/wire_captures.h. Regression inputs found by fuzzing
live next to the seeds as crash-*/timeout-*/leak-* files and are kept.

Run from anywhere: python3 tests/fuzz/gen_corpus.py
"""
import os
import re
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


class Regex:
    def __init__(self, pattern, options=""):
        self.pattern, self.options = pattern, options


class I64(int):
    pass


class Date(int):
    pass


def cstr(s):
    return s.encode() + b"\0"


def element(key, v):
    k = cstr(key)
    if isinstance(v, bool):
        return b"\x08" + k + (b"\x01" if v else b"\x00")
    if isinstance(v, Date):
        return b"\x09" + k + struct.pack("<q", v)
    if isinstance(v, I64):
        return b"\x12" + k + struct.pack("<q", v)
    if isinstance(v, int):
        return b"\x10" + k + struct.pack("<i", v)
    if isinstance(v, float):
        return b"\x01" + k + struct.pack("<d", v)
    if isinstance(v, str):
        b = v.encode() + b"\0"
        return b"\x02" + k + struct.pack("<i", len(b)) + b
    if v is None:
        return b"\x0a" + k
    if isinstance(v, (bytes, bytearray)):
        return b"\x05" + k + struct.pack("<i", len(v)) + b"\x00" + bytes(v)
    if isinstance(v, Regex):
        return b"\x0b" + k + cstr(v.pattern) + cstr(v.options)
    if isinstance(v, dict):
        return b"\x03" + k + doc(v)
    if isinstance(v, (list, tuple)):
        return b"\x04" + k + doc({str(i): x for i, x in enumerate(v)})
    raise TypeError(type(v))


def doc(d):
    body = b"".join(element(k, v) for k, v in d.items())
    return struct.pack("<i", len(body) + 5) + body + b"\0"


def seq(ident, docs):
    payload = cstr(ident) + b"".join(doc(x) for x in docs)
    return b"\x01" + struct.pack("<i", len(payload) + 4) + payload


def header(length, opcode, req=1, resp=0):
    return struct.pack("<iiii", length, req, resp, opcode)


def opmsg(body, seqs=b"", flags=0, req=1, resp=0):
    rest = struct.pack("<I", flags) + b"\x00" + doc(body) + seqs
    return header(16 + len(rest), 2013, req, resp) + rest


def opreply(body, req=1, resp=0, flags=8):
    rest = struct.pack("<iqii", flags, 0, 0, 1) + doc(body)
    return header(16 + len(rest), 1, req, resp) + rest


def opquery(ns, query):
    rest = struct.pack("<i", 0) + cstr(ns) + struct.pack("<ii", 0, -1) + doc(query)
    return header(16 + len(rest), 2004) + rest


def compressed(msg, cid):
    body = msg[16:]
    opcode = struct.unpack("<i", msg[12:16])[0]
    data = body if cid == 0 else zlib.compress(body)
    rest = struct.pack("<iiB", opcode, len(body), cid) + data
    return header(16 + len(rest), 2012) + rest


RE_I = Regex("^SECRET", "i")
PIPE_DEEP = [
    {"$match": {"status": "A", "name": {"$regex": "x", "$options": "i"}}},
    {"$lookup": {"from": "orders", "let": {"id": "$_id"}, "as": "o", "pipeline": [
        {"$match": {"$expr": {"$eq": ["$cid", "$$id"]}}},
        {"$facet": {"a": [{"$sort": {"a": 1, "b": 1}}, {"$limit": 1}],
                    "b": [{"$unionWith": {"coll": "c", "pipeline": [
                        {"$match": {"name": RE_I}},
                        {"$lookup": {"from": "c", "localField": "a",
                                     "foreignField": "b", "as": "z"}}]}}]}}]}},
    {"$graphLookup": {"from": "c", "startWith": "$a", "connectFromField": "a",
                      "connectToField": "b", "as": "g"}},
    {"$group": {"_id": "$a", "l": {"$push": "$b"}}},
    {"$sort": {"status": 1, "created": 1}},
]

BODIES = {
    "find_regex": {"find": "c", "filter": {"name": RE_I, "a": {"$gt": 1}},
                   "sort": {"a": 1, "b": 1}, "limit": 5},
    "find_sort_hint": {"find": "c", "filter": {"a": 5, "$or": [{"b": 1}, {"z": {"$in": [1, 2]}}]},
                       "sort": {"b": -1, "created": 1}, "hint": "a_1_b_-1",
                       "collation": {"locale": "en", "strength": 2}, "projection": {"a": 1}},
    "find_meta": {"find": "c", "filter": {"$text": {"$search": "x"}},
                  "sort": {"score": {"$meta": "textScore"}, "$natural": 1}},
    "find_and": {"find": "orders", "filter": {"$and": [{"status": {"$eq": "A"}},
                 {"$nor": [{"created": {"$lt": 3}}]}, {"name": {"$not": RE_I}},
                 {"x.y": {"$elemMatch": {"q": {"$regex": "a|b"}}}}]},
                 "sort": {"x.y": 1, "z": 1}},
    "aggregate": {"aggregate": "c", "pipeline": PIPE_DEEP, "cursor": {}},
    "aggregate_db": {"aggregate": 1, "pipeline": [{"$currentOp": {}}, {"$sort": {"a": 1}}],
                     "cursor": {}},
    "update_push": {"update": "c", "updates": [
        {"q": {"_id": 1}, "u": {"$push": {"h": 1, "k": {"$each": [1, 2], "$slice": -5,
                                                      "$sort": {"a": 1}, "$position": 0}}}},
        {"q": {"a": RE_I}, "u": {"$addToSet": {"s": {"$each": [1]}}, "$set": {"a": 1}},
         "upsert": True, "multi": True, "arrayFilters": [{"e.a": 1}], "hint": {"a": 1}},
        {"q": {}, "u": [{"$set": {"l": {"$concatArrays": ["$l", [1]]}}}, {"$unset": "x"},
                        {"$replaceWith": "$$ROOT"}]}]},
    "findAndModify": {"findAndModify": "c", "query": {"name": RE_I}, "sort": {"b": 1},
                      "update": {"$push": {"log": {"$each": [1], "$slice": 10}}}, "new": True},
    "findAndModify_pipe": {"findAndModify": "c", "query": {"a": 1},
                           "update": [{"$set": {"h": {"$concatArrays": ["$h", ["$$NOW"]]}}}]},
    "bulkWrite": {"bulkWrite": 1, "ops": [
        {"insert": 0, "document": {"a": 1}},
        {"update": 1, "filter": {"name": RE_I}, "updateMods": {"$push": {"h": 1}},
         "multi": True, "hint": "x", "collation": {"locale": "fr"}},
        {"delete": 0, "filter": {"a": {"$regex": "^a", "$options": "si"}}, "multi": False},
        {"update": 5, "filter": {}, "updateMods": [{"$set": {"a": 1}}]}],
        "nsInfo": [{"ns": "test.c"}, {"ns": "shop.orders"}]},
    "explain": {"explain": {"find": "c", "filter": {"name": RE_I}, "sort": {"a": 1, "b": 1}},
                "verbosity": "queryPlanner"},
    "explain_agg": {"explain": {"aggregate": "c", "pipeline": PIPE_DEEP, "cursor": {}}},
    "count": {"count": "c", "query": {"name": RE_I, "a": {"$in": [1, 2]}}},
    "distinct": {"distinct": "c", "key": "a", "query": {"b": {"$regex": "^x", "$options": "m"}}},
    "delete": {"delete": "c", "deletes": [{"q": {"name": RE_I}, "limit": 0},
                                          {"q": {"a": 1}, "limit": 1, "hint": {"a": 1}}]},
    "insert": {"insert": "c", "documents": [{"_id": 1, "a": [1, 2]}]},
    "createIndexes": {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"}]},
    "drop": {"drop": "orders"},
    "dropDatabase": {"dropDatabase": 1},
    "renameCollection": {"renameCollection": "test.c", "to": "test.d"},
    "hello": {"hello": 1, "client": {"application": {"name": "fuzzapp"}},
              "compression": ["zlib", "snappy"], "loadBalanced": True},
    "getMore": {"getMore": I64(5), "collection": "c"},
    "view": {"find": "view", "filter": {"a": 1}, "sort": {"b": 1}},
    "shop": {"find": "orders", "filter": {"status": "A"}, "sort": {"created": 1}},
    "regex_types": {"find": "c", "filter": {"a": {"$regex": RE_I}, "b": Regex("a", "x"),
                    "c": {"$regex": "\\Aabc", "$options": "m"}, "d": {"$in": [RE_I]},
                    "e": 1.5, "f": None, "g": True}},
}

SEQ_BODIES = {
    "update_seq": ({"update": "c"}, seq("updates", [
        {"q": {"a": 1}, "u": {"$push": {"h": {"$each": [1]}}}},
        {"q": {"n": RE_I}, "u": {"$set": {"b": 2}}}])),
    # a batch of one shape with other values (the statement templates of
    # analysers.c), and statements that differ from it in one byte that
    # matters: a key, a type, a length, an operator
    "update_batch": ({"update": "c"}, seq("updates", [
        {"q": {"_id": 1}, "u": {"$set": {"v": 0}}},
        {"q": {"_id": 2}, "u": {"$set": {"v": 1}}},
        {"q": {"_id": "ab"}, "u": {"$set": {"v": 1}}},
        {"q": {"_id": "cd"}, "u": {"$set": {"v": 2}}},
        {"q": {"_id": 3}, "u": {"$push": {"v": 1}}},
        {"q": {"_id": 4}, "u": {"$set": {"v": 2}}},
        {"q": {"_jd": 5}, "u": {"$set": {"v": 2}}},
        {"q": {"_id": 6}, "u": {"$set": {"v": RE_I}}},
        {"q": {"_id": RE_I}, "u": {"$set": {"v": 2}}}])),
    "insert_seq": ({"insert": "c"}, seq("documents", [{"a": 1}, {"b": 2}])),
    "delete_seq": ({"delete": "c"}, seq("deletes", [{"q": {"n": RE_I}, "limit": 1}])),
    "bulk_seq": ({"bulkWrite": 1, "$db": "admin"},
                 seq("ops", [{"update": 0, "filter": {"a": 1}, "updateMods": {"$push": {"x": 1}}},
                             {"delete": 0, "filter": {"n": RE_I}}])
                 + seq("nsInfo", [{"ns": "test.c"}])),
}


def raw_element(t, key, payload):
    return bytes([t]) + cstr(key) + payload


def raw_doc(elements):
    body = b"".join(elements)
    return struct.pack("<i", len(body) + 5) + body + b"\0"


def bson_validate_seeds():
    """fuzz_bson_validate seeds: documents covering every BSON type, the
    deprecated ones included, plus a few bodies from BODIES."""
    s = lambda v: struct.pack("<i", len(v) + 1) + v + b"\0"
    scope = raw_doc([raw_element(0x10, "x", struct.pack("<i", 1))])
    code = s(b"function() { return x; }")
    every = raw_doc([
        raw_element(0x01, "double", struct.pack("<d", 1.5)),
        raw_element(0x02, "string", s(b"hello")),
        raw_element(0x03, "doc", raw_doc([raw_element(0x12, "i", struct.pack("<q", 7))])),
        raw_element(0x04, "array", raw_doc([raw_element(0x10, "0", struct.pack("<i", 1)),
                                            raw_element(0x02, "1", s(b"two"))])),
        raw_element(0x05, "bin", struct.pack("<i", 3) + b"\x00abc"),
        raw_element(0x05, "bin_old", struct.pack("<i", 7) + b"\x02" + struct.pack("<i", 3) + b"abc"),
        raw_element(0x06, "undefined", b""),
        raw_element(0x07, "oid", bytes(range(12))),
        raw_element(0x08, "bool", b"\x01"),
        raw_element(0x09, "date", struct.pack("<q", 1700000000000)),
        raw_element(0x0A, "null", b""),
        raw_element(0x0B, "regex", b"^a.*\0i\0"),
        raw_element(0x0C, "dbpointer", s(b"db.coll") + bytes(range(12))),
        raw_element(0x0D, "code", s(b"function() {}")),
        raw_element(0x0E, "symbol", s(b"sym")),
        raw_element(0x0F, "cws", struct.pack("<i", 4 + len(code) + len(scope)) + code + scope),
        raw_element(0x10, "int32", struct.pack("<i", -7)),
        raw_element(0x11, "ts", struct.pack("<II", 1, 2)),
        raw_element(0x12, "int64", struct.pack("<q", -1)),
        raw_element(0x13, "dec", bytes(16)),
        raw_element(0x7F, "max", b""),
        raw_element(0xFF, "min", b""),
    ])
    yield "every-type", every
    yield "nested", raw_doc([raw_element(0x03, "a", raw_doc([raw_element(0x04, "b", every)]))])
    yield "empty", raw_doc([])
    yield "utf8-key", raw_doc([bytes([0x10]) + b"k\xff\0" + struct.pack("<i", 1)])
    for name in ("find_regex", "update_push", "bulkWrite", "aggregate"):
        yield "body-" + name, doc(BODIES[name])


def fixtures():
    text = open(os.path.join(HERE, "..", "unit", "fixtures", "wire_captures.h")).read()
    for name, body in re.findall(r"static const uint8_t (\w+)\[\] = \{(.*?)\};", text, re.S):
        yield name, bytes(int(x, 16) for x in re.findall(r"0x[0-9a-fA-F]{2}", body))


def reply_seeds():
    """fuzz_reply seeds: 3 control bytes (fuzz_reply.c), then a reply
    stream: the real FerretDB replies, an exhaust stream, a reply nothing
    waits for, OP_REPLY, OP_COMPRESSED and a hello answered whole."""
    fx = dict(fixtures())
    real = (fx["fx_ferretdb_insert_reply_opmsg"] + fx["fx_ferretdb_find_reply_opmsg"] +
            fx["fx_ferretdb_error_reply_opmsg"])
    yield "ferretdb-replies", bytes([8 | 3, 1, 0]) + real
    yield "ferretdb-ismaster-whole", bytes([8 | 16 | 1, 2, 1]) + fx["fx_ferretdb_ismaster_opreply"]
    more = 2  # moreToCome
    exhaust = (opmsg({"ok": 1, "n": 1}, flags=more, req=300, resp=7) +
               opmsg({"ok": 1, "n": 2}, flags=more, req=301, resp=300) +
               opmsg({"ok": 1, "n": 3}, req=302, resp=301))
    yield "exhaust", bytes([1, 3, 0]) + struct.pack("<i", 7) + exhaust
    stale = opmsg({"ok": 1}, req=200, resp=9) + opmsg({"ok": 1, "x": "y"}, req=201, resp=5)
    yield "stale-then-real", bytes([1, 4, 0]) + struct.pack("<i", 5) + stale
    yield "opreply", bytes([8 | 1, 5, 0]) + opreply({"ok": 1, "ismaster": True}, 2, 11)
    yield "compressed", bytes([8 | 2, 6, 0]) + compressed(
        opmsg({"ok": 1, "cursor": {"id": I64(0), "ns": "test.c", "firstBatch": []}}, resp=4), 2) + \
        compressed(opmsg({"ok": 1}, req=3, resp=5), 0)
    yield "hello-whole", bytes([8 | 16 | 2, 7, 3]) + opmsg(HELLO_RS, resp=1) + opmsg(HELLO_RS, resp=2)


HELLO_RS = {"isWritablePrimary": True, "topologyVersion": {"counter": I64(0)},
            "hosts": ["db1.example:27017", "db2.example:27018", "DB3.example:27017", "db9:1"],
            "passives": ["[::1]:27019"], "arbiters": ["db2.example:27018"],
            "setName": "rs0", "setVersion": 1, "primary": "db1.example:27017",
            "me": "db0.example:27017", "maxWireVersion": 17, "ok": 1.0}


def hello_seeds():
    """fuzz_hello seeds: a control byte (fuzz_hello.c), then a hello reply
    body (or, with bit 6, a whole reply)."""
    fx = dict(fixtures())
    yield "rs-opmsg", bytes([4 | 8]) + doc(HELLO_RS)
    yield "rs-opreply-self", bytes([32 | 3 | 16]) + doc(HELLO_RS)
    yield "rs-checksum", bytes([128 | 4]) + doc(HELLO_RS)
    yield "mongos", bytes([2]) + doc({"ismaster": True, "msg": "isdbgrid", "ok": 1.0})
    yield "lb", bytes([1]) + doc({"ismaster": True, "serviceId": "x", "hosts": ["db1.example"],
                                  "ok": 1.0})
    yield "standalone", bytes([0]) + doc({"ismaster": True, "maxWireVersion": 13, "ok": 1.0})
    yield "ferretdb-raw", bytes([64 | 8]) + fx["fx_ferretdb_ismaster_opreply"]


def req(t, rid, op, ns, **kw):
    """A capture's request record (protocol/capture.h)."""
    r = {"k": "req", "t": I64(t), "conn": I64(1), "client": "127.0.0.1:5000",
         "app": "fuzzapp", "rid": rid, "op": op, "db": ns.split(".")[0], "ns": ns,
         "len": I64(100), "mtc": False, "verdict": "forward"}
    r.update(kw)
    return doc(r)


def rep(t, rt, **kw):
    """A capture's reply record, answering request rt."""
    r = {"k": "reply", "t": I64(t), "conn": I64(1), "rt": rt, "len": I64(60), "ok": True,
         "code": 0, "n": I64(1), "cid": I64(0)}
    r.update(kw)
    return doc(r)


def capture_seeds():
    """fuzz_capture seeds: small capture files (protocol/capture.h): a
    header, index snapshots, requests (whole messages and redacted bodies),
    replies and a gap."""
    fx = dict(fixtures())
    hdr = doc({"k": "header", "format": "mongoguard-capture", "v": 1, "mongoguard": "0.1.0",
               "instance": "fz", "redaction": "none", "start": Date(1700000000000),
               "startUs": I64(1700000000000000),
               "rules": {"case-insensitive-regex": {"action": "block"},
                         "index-mismatched-sort": {"action": "log"}}})
    idx = doc({"k": "indexes", "t": I64(1700000000000001), "ns": "test.c",
               "indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"},
                           {"v": 2, "key": {"a": 1, "b": -1}, "name": "a_1_b_-1"}]})
    opaque = doc({"k": "indexes", "t": I64(1700000000000002), "ns": "test.view",
                  "opaque": "a view"})

    find = fx["fx_pymongo_find_opmsg"]
    sort = opmsg(dict(BODIES["find_sort_hint"], **{"$db": "test"}))
    whole = (hdr + idx + opaque +
             req(1700000000000010, 1, "find", "test.c", msg=find) +
             rep(1700000000000020, 1, docs={"n": I64(1), "max": I64(40), "total": I64(40)},
                 arrays={"tags": I64(3)}) +
             req(1700000000000030, 2, "find", "test.c", msg=sort) +
             rep(1700000000000040, 2, ok=False, code=2) +
             doc({"k": "gap", "t": I64(1700000000000050), "dropped": I64(3),
                  "from": I64(1700000000000041), "to": I64(1700000000000049)}))
    yield "whole-messages", whole
    red = doc({"k": "header", "format": "mongoguard-capture", "v": 1, "mongoguard": "0.1.0",
               "instance": "fz2", "redaction": "shapes", "start": Date(1700000000000),
               "startUs": I64(1700000000000000), "rules": {}})
    body = {"find": "c", "filter": {"name": Regex("^?", "i")}, "sort": {"b": 1}}
    ins_seq = {"documents": [{"_id": 0, "a": "?"}, {"$size": 40}]}
    yield "redacted", (red + idx +
                       req(1700000000000010, 1, "find", "test.c", body=body, seqs={}) +
                       req(1700000000000011, 2, "insert", "test.c", body={"insert": "c"},
                           seqs=ins_seq) +
                       rep(1700000000000020, 1) + rep(1700000000000021, 2))
    yield "header-only", hdr
    yield "cut-short", whole[:len(whole) - 7]
    v3 = doc({"k": "header", "format": "mongoguard-capture", "v": 3, "mongoguard": "0.1.0",
              "instance": "fz3", "redaction": "shapes", "start": Date(1700000000000),
              "startUs": I64(1700000000000000),
              "rules": {"collection-scan": {"action": "log", "minDocuments": 0}}})
    yield "forgets", (v3 + idx +
                      doc({"k": "forget", "t": I64(1700000000000005), "db": "test",
                           "coll": "c", "why": "schema"}) +
                      req(1700000000000010, 1, "find", "test.c", body=body, seqs={}) +
                      doc({"k": "forget", "t": I64(1700000000000012), "db": "test",
                           "why": "schema"}) +
                      doc({"k": "forget", "t": I64(1700000000000013), "db": "test",
                           "coll": "c", "why": "written"}) + idx +
                      rep(1700000000000020, 1))


def rd_str(b):
    """A string as fuzz_report_diff.c's str() reads it."""
    if isinstance(b, str):
        b = b.encode()
    if len(b) < 255:
        return bytes([len(b)]) + b
    return b"\xff" + struct.pack("<H", len(b)) + b


def rd_model(shapes, findings, redacted=0):
    """A model as fuzz_report_diff.c's write_model() reads it. shapes:
    (pool index, ns, command, shape, count, nlat, mostly_fails, p95 ms,
    total ms); findings: (rule, pool index, ns, command, shape, suggestion,
    detail, count, apps)."""
    out = bytes([redacted, len(shapes)])
    for h, ns, cmd, shape, count, nlat, fails, p95, total in shapes:
        out += bytes([h]) + rd_str(ns) + rd_str(cmd) + rd_str(shape)
        out += bytes([count - 1, nlat | (16 if fails else 0)])
        out += struct.pack("<HH", int(p95 * 8), total)
    out += bytes([len(findings)])
    for rule, h, ns, cmd, shape, fix, detail, count, apps in findings:
        out += bytes([rule, h]) + rd_str(ns) + rd_str(cmd) + rd_str(shape)
        out += rd_str(fix) + rd_str(detail) + bytes([count - 1, len(apps)])
        out += b"".join(rd_str(a) for a in apps)
    return out


# rule ids in analyzers/rules/rules.h order
RULES = ["case-insensitive-regex", "unbounded-push", "hot-path-lookup", "index-mismatched-sort",
         "collection-scan", "large-document"]


def report_diff_seeds():
    """fuzz_report_diff seeds: a mode byte and the gate's rule bits (see
    fuzz_report_diff.c), then two models written out, or two captures."""
    base = 16  # a baseline
    shape = '{"filter":{"name":{"$regex":"?","$options":"i"}}}'
    now = rd_model(
        [(0, "shop.users", "find", shape, 20, 8, False, 30.0, 600),
         (4, "shop.orders", "update", '{"q":{"a":"?"}}', 3, 5, False, 2.0, 6),
         (5, "shop.new", "aggregate", '{"pipeline":[]}', 1, 0, False, 0, 0)],
        [(0, 0, "shop.users", "find", shape, "store a lower-cased copy", "name: $regex 'i'", 20,
          ["web", "batch"]),
         (1, 6, "shop.orders", "update", '{"u":{"$push":{"h":"?"}}}', "bucket the array",
          "h: $push", 2, ["web"]),
         (0, 6, "shop.orders", "update", '{"q":{"n":{"$regex":"?"}}}', "an index", "n", 2, []),
         (5, 7, "shop.blobs", "insert", '{"insert":"blobs"}', "GridFS", "5 MB", 1, [])])
    before = rd_model(
        [(0, "shop.users", "find", shape, 20, 8, False, 10.0, 200),
         (4, "shop.orders", "update", '{"q":{"a":"?"}}', 3, 5, False, 1.9, 6),
         (3, "shop.old", "count", "{}", 2, 2, False, 1.0, 2)],
        [(0, 0, "shop.users", "find", shape, "store a lower-cased copy", "name", 4, ["web"]),
         (4, 3, "shop.old", "count", "{}", "an index", "no index", 2, [])])
    yield "models-new", bytes([base | 2 << 1, 0]) + now + before
    yield "models-any", bytes([base | 1 << 1, 0]) + now + before
    yield "models-rules", bytes([base | 3 << 1, 1 << 1 | 1 << 5]) + now + before
    yield "models-no-baseline", bytes([3 << 1, 1]) + now
    yield "models-spec", (bytes([base | 4 << 1, 0]) + rd_str("unbounded-push,,large-document") +
                          now + before)
    yield "models-spec-bad", bytes([4 << 1, 0]) + rd_str("case-insensitive-regex,nope") + now
    yield "models-long-list", (bytes([4 << 1, 0]) + rd_str(",".join(RULES * 3)) + now)
    odd = rd_model(
        [(1, "a.<b>&\"'", "find", ']]> \x1b[31m \xef\xbf\xbf \xc2\x9b', 1, 6, True, 1.0, 1),
         (2, "a.\xff\xfe", "\x7f", "\xed\xa0\x80 \xc0\xaf", 255, 15, False, 8191.875,
          65535)],
        [(r, 1 + r % 3, "a.\u2028", "c\nd", "x" * 2047, "<fix>&" * 100, "\t" * 511, 255,
          ["\x00", "app\x01"]) for r in range(6)])
    yield "models-odd-bytes", bytes([base | 1 << 1, 0]) + odd + now
    dollar = rd_model([], [(0, 0, "a.b", "find", "{}", "x", "y", 1, ["$regex", "$date"])])
    yield "models-apps-named-like-extended-json", bytes([0, 0]) + dollar
    yield "models-empty", bytes([base | 2 << 1, 0]) + rd_model([], []) + rd_model([], [])

    hdr = doc({"k": "header", "format": "mongoguard-capture", "v": 1, "mongoguard": "0.1.0",
               "instance": "fz", "redaction": "none", "start": Date(1700000000000),
               "startUs": I64(1700000000000000),
               "rules": {"case-insensitive-regex": {"action": "log"},
                         "unbounded-push": {"action": "log"}}})
    idx = doc({"k": "indexes", "t": I64(1700000000000001), "ns": "test.c",
               "indexes": [{"v": 2, "key": {"_id": 1}, "name": "_id_"}]})
    find = opmsg(dict(BODIES["find_regex"], **{"$db": "test"}))
    batch = opmsg({"update": "c", "$db": "test", "updates": [
        {"q": {"a": 1}, "u": {"$set": {"b": 1}}},
        {"q": {"name": RE_I}, "u": {"$push": {"h": 1}}}]})

    def capture(latency_us, extra=b""):
        out, t = hdr + idx, 1700000000000010
        for rid in range(1, 7):
            out += req(t, rid, "find", "test.c", msg=find) + rep(t + latency_us, rid)
            t += 100000
        return out + extra

    cur = capture(10000, req(1700000000900000, 7, "update", "test.c", msg=batch) +
                  rep(1700000000900500, 7))
    old = capture(1000)

    def pair(mode, a, b):
        return bytes([mode, 0]) + struct.pack("<I", len(a)) + a + struct.pack("<I", len(b)) + b

    yield "captures-regression-new", pair(1 | base | 2 << 1, cur, old)
    yield "captures-any", pair(1 | base | 1 << 1, old, cur)
    yield "captures-no-baseline", pair(1 | 1 << 1, cur, b"")


def late_seeds():
    """fuzz_late seeds: two bytes of actions and flags, then operations
    (fuzz_late.c): requests, lists coming, the queue judged, time passing."""
    def rq(body, flags=0):
        b = doc(body)
        return bytes([0, flags]) + struct.pack("<H", len(b)) + b
    come, judge = b"\x01", b"\x02"

    def wait(secs):
        return bytes([3 | secs << 2])
    log_all = 1 | 1 << 2 | 1 << 4 | 64  # regex, sort, scan and the document rules at log
    bulk = {"bulkWrite": 1, "$db": "admin", "ops": [
        {"update": i, "filter": {"name": RE_I}, "updateMods": {"$push": {"h": 1}}}
        for i in range(6)],
        "nsInfo": [{"ns": ns} for ns in ("test.c", "shop.orders", "db.coll", "a.b", "a.c",
                                         "a.d")]}
    yield "log-lists-come", (bytes([log_all, 0]) + rq(BODIES["find_sort_hint"]) +
                             rq(BODIES["shop"]) + rq(BODIES["find_regex"]) + come)
    yield "log-lists-one-by-one", (bytes([log_all, 0]) + rq(BODIES["aggregate"]) +
                                   b"\x05" + b"\x05" + judge + b"\x05" + come)
    yield "block-holds", (bytes([3 | 3 << 2 | 2 << 4, 0]) + rq(BODIES["find_sort_hint"]) +
                          rq(BODIES["count"]) + come + rq(BODIES["shop"]) + wait(1) + come)
    yield "mixed-owes-after-report", (bytes([1 | 3 << 2 | 3 << 4 | 64, 0]) +
                                      rq(BODIES["find_and"]) + rq(BODIES["update_push"]) + come)
    yield "log-judged-again", (bytes([log_all, 0]) + rq(BODIES["find_sort_hint"]) + come +
                               judge + come + judge)
    yield "expired", bytes([log_all, 0]) + rq(BODIES["find_sort_hint"]) + wait(40) + come
    yield "never", bytes([log_all, 0]) + rq(BODIES["find_sort_hint"]) + rq(BODIES["distinct"])
    yield "queue-full", bytes([log_all, 0]) + rq(BODIES["shop"], 7 << 1) + come
    yield "too-large", bytes([log_all, 0]) + rq(BODIES["find_sort_hint"], 1) + come
    yield "bulk-many-namespaces", bytes([log_all, 0]) + rq(bulk) + come + come
    yield "explain-view-delete", (bytes([log_all, 0]) + rq(BODIES["explain"]) +
                                  rq(BODIES["view"]) + rq(BODIES["delete"]) + come)
    yield "analysis-off", bytes([log_all, 1]) + rq(BODIES["find_sort_hint"], 4 << 1)


def log_text_seeds():
    """fuzz_log_text seeds: a mode byte (fuzz_log_text.c), then a log line
    (mode 0), or the fields of a finding (1) or of another line (3)."""
    head = '{"t":{"$date":"2026-12-02T13:53:45.123Z"},"s":"W","c":"ANALYZER","id":4000,'
    yield "line-finding", b"\x00" + (
        head + '"ctx":"main","msg":"Query anti-pattern","attr":{"rule":"case-insensitive-regex",'
        '"action":"block","ns":"shop.users","command":"find","shapeHash":"00ff","shape":'
        '{"filter":{"name":{"$regex":"?"}}},"suggestion":"store a lower-cased copy\\u00e9",'
        '"appName":"","repeats":0}}').encode()
    yield "line-summary", b"\x00" + (
        head + '"ctx":"main","msg":"m","attr":{"rule":"r","action":"log","ns":"a.b",'
        '"shape":"x","appName":"app","repeats":12}}').encode()
    yield "line-other", (b'\x00{"t":{"$date":"T"},"s":"I","c":"NETWORK","id":2000,"ctx":"conn7",'
                         b'"msg":"Connection accepted","attr":{"remote":"1.2.3.4:5",'
                         b'"appName":"","why":"a b","n":3,"ok":true,"o":{"k":[1,"\\u001b"]}}}')
    yield "line-controls", (b'\x00{"t":{"$date":"T"},"s":"E","c":"NETWORK","id":1,"ctx":"main",'
                            b'"msg":"x\\u001b[2Jy\\n\\u009b\\ud83d\\ude00\xc2\x9d",'
                            b'"attr":{"app":"\\u001b]0;pwn\\u0007\x7f"}}')
    yield "line-no-attr", b'\x00{"t":{"$date":"T"},"s":"I","c":"CONTROL","id":1,"msg":"m"}'

    def s(b):
        b = b if isinstance(b, bytes) else b.encode()
        return (bytes([len(b)]) if len(b) < 255 else b"\xff" + struct.pack("<H", len(b))) + b
    fields = (s("shop.users") + s("find") + b"\x01" + s("filter") + s("name") + b"\x01" +
              s("an index on {name: 1}") + s("name: $regex 'i'") + s("127.0.0.1:50012") +
              s("billing") + s("mongoguard blocked this find"))
    yield "finding-block", b"\x01" + fields + bytes([3 | 8, 0, 7])
    yield "finding-summary-late", b"\x01" + fields + bytes([1 | 4 | 32, 3, 9, 12])
    odd = (s("a.\xff\x1b[31m") + s("f\x00ind") + b"\x00" + s("{not json") + s("") +
           s("\xc2\x9b" * 20) + s("\n") + s("app\xef\xbf\xbf") + s("x" * 3000))
    yield "finding-odd-bytes", b"\x01" + odd + bytes([2 | 8 | 16, 4, 1])
    yield "other-line", b"\x03" + fields + bytes([2, 0, 0, 1, 5, 0, 0, 1, 1, 7, 2, 2, 1, 3, 3, 4,
                                                  4, 9])
    yield "other-line-long", b"\x03" + s("n" * 60000) + fields + bytes([0, 1, 0, 0, 2, 0, 0])


def findings_query_seeds():
    """fuzz_findings_query seeds: a store-size byte (0: admin.c's 1024),
    then a /findings query string."""
    for name, q in (("all", "rule=case-insensitive-regex&ns=shop.*&app=web&since=0&limit=2"),
                    ("iso", "since=2026-12-02T13:53:45.123Z&limit=1000000"),
                    ("before-1970", "since=1969-12-31T23:59:59Z&ns=crm.%2A"),
                    ("encoded", "ns=%2Fa%00b&app=x+y%26z&rule=collection-scan"),
                    ("unknown", "bogus=1"), ("limit-0", "limit=0"),
                    ("limit-over", "limit=1000001"), ("bad-since", "since=yesterday"),
                    ("empty-values", "ns=&app=&limit=3"), ("no-value", "ns&rule"),
                    ("repeated", "ns=a*&ns=shop.*&limit=1&limit=8"),
                    ("glob", "app=[bw]*&ns=shop.[ou]*")):
        yield name, b"\x00" + q.encode()
    yield "small-store", b"\x05ns=shop.users&app=web"


def config_seeds():
    """fuzz_config seeds: the shipped configs/*.yaml, plus one that sets
    members, scopes and the sinks."""
    d = os.path.join(HERE, "..", "..", "configs")
    for name in sorted(os.listdir(d)):
        if name.endswith(".yaml"):
            yield name[:-5], open(os.path.join(d, name), "rb").read()
    yield "members-scopes", b"""net:
  listen: 127.0.0.1:27018
upstream:
  uri: mongodb://db1.example:27017/?replicaSet=rs0
  members:
    - host: db1.example:27017
      listen: 127.0.0.1:27101
    - {host: "db2.example:27017", listen: "127.0.0.1:27102"}
rules:
  case-insensitive-regex:
    action: block
    scopes:
      - namespaces: ["shop.*"]
        apps: [web*]
        action: dry-run
  large-document: {action: log, maxBytes: 1048576}
"""


def config_dict():
    """config.dict for fuzz_config: every key the loader compares
    (proxy/runtime/config.c), the rule names and parameter names
    (analyzers/rule_*.c), the keys of configs/*.yaml, the actions, and YAML
    syntax."""
    root = os.path.join(HERE, "..", "..")
    words = set()
    src = open(os.path.join(root, "proxy", "runtime", "config.c")).read()
    words.update(re.findall(r'strcmp\((?:key|s), "([^"]+)"\)', src))
    words.update(re.findall(r'get_\w+\(x, v, "([A-Za-z][^" ]*)"', src))
    adir = os.path.join(root, "analyzers")
    for name in os.listdir(adir):
        if name.startswith("rule_") and name.endswith(".c"):
            text = open(os.path.join(adir, name)).read()
            words.update(re.findall(r'\.name = "([^"]+)"', text))
            words.update(re.findall(r'\{"([A-Za-z]+)", RULE_PARAM_', text))
    cdir = os.path.join(root, "configs")
    for name in os.listdir(cdir):
        if name.endswith(".yaml"):
            words.update(re.findall(r"^\s*-?\s*([A-Za-z][\w.-]*):", open(os.path.join(cdir, name)).read(),
                                    re.M))
    words.update(["off", "log", "dry-run", "block", "true", "false", "127.0.0.1:27017",
                  "mongodb://", "mongodb+srv://", "shop.*"])
    syntax = [": ", "\\x0a", "\\x0a  ", "- ", "[", "]", "{", "}", "&a", "*a", "!!str", "---", "'", "\\\"", "|", ">"]
    lines = ["# fuzz_config: keys and values the loader reads (written by gen_corpus.py)"]
    lines += ['"%s"' % w for w in sorted(words)]
    lines += ['"%s"' % w for w in syntax]
    with open(os.path.join(HERE, "config.dict"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def main():
    for name, body in BODIES.items():
        write("fuzz_bson_command", name, doc(body))
        full = dict(body)
        full.setdefault("$db", "test")
        write("fuzz_request", "opmsg-" + name, opmsg(full))
    for name, (body, seqs) in SEQ_BODIES.items():
        write("fuzz_bson_command", name, doc(body) + seqs)
        full = dict(body)
        full.setdefault("$db", "test")
        write("fuzz_request", "opmsg-" + name, opmsg(full, seqs))
    hello = {"isMaster": 1, "helloOk": True, "client": {"application": {"name": "fuzzapp"}},
             "compression": ["zstd"]}
    write("fuzz_request", "opquery-ismaster", opquery("admin.$cmd", hello))
    write("fuzz_request", "opquery-wrapped",
          opquery("admin.$cmd", {"$query": hello, "$readPreference": {"mode": "primary"}}))
    find = opmsg(dict(BODIES["find_regex"], **{"$db": "test"}))
    write("fuzz_request", "compressed-noop", compressed(find, 0))
    write("fuzz_request", "compressed-zlib", compressed(find, 2))
    write("fuzz_request", "compressed-zlib-hello",
          compressed(opquery("admin.$cmd", hello), 2))
    for name, data in bson_validate_seeds():
        write("fuzz_bson_validate", name, data)
    for name, data in fixtures():
        write("fuzz_request", "fixture-" + name, data)

    for name, data in reply_seeds():
        write("fuzz_reply", name, data)
    for name, data in hello_seeds():
        write("fuzz_hello", name, data)
    for name, data in capture_seeds():
        write("fuzz_capture", name, data)
    for name, data in report_diff_seeds():
        write("fuzz_report_diff", name, data)
    for name, data in late_seeds():
        write("fuzz_late", name, data)
    for name, data in log_text_seeds():
        write("fuzz_log_text", name, data)
    for name, data in findings_query_seeds():
        write("fuzz_findings_query", name, data)
    for name, data in config_seeds():
        write("fuzz_config", name, data)
    config_dict()
    # the per-rule targets read command bodies, as fuzz_bson_command does
    for rule in ("regex", "push", "lookup", "sort", "scan", "doc"):
        for name, body in BODIES.items():
            write("fuzz_rule_" + rule, name, doc(body))
        for name, (body, seqs) in SEQ_BODIES.items():
            write("fuzz_rule_" + rule, name, doc(body) + seqs)


if __name__ == "__main__":
    main()
