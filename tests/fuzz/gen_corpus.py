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


def cstr(s):
    return s.encode() + b"\0"


def element(key, v):
    k = cstr(key)
    if isinstance(v, bool):
        return b"\x08" + k + (b"\x01" if v else b"\x00")
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


def opmsg(body, seqs=b"", flags=0):
    rest = struct.pack("<I", flags) + b"\x00" + doc(body) + seqs
    return header(16 + len(rest), 2013) + rest


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


if __name__ == "__main__":
    main()
