"""No way around the rules (issue 12): with `block` rules on, every other way
of sending a blocked request is blocked too.

Each test sends a request a block rule must stop, in some other wire form
(OP_QUERY, OP_COMPRESSED, kind-1 sequences, bulkWrite, w:0, pipelining, field
order, repeated keys, odd BSON types, operator aliases), and checks both ends:
the client got mongoguard's own answer (code 96 with `mongoguardRule`, or the
decoder's refusal, which the log names by requestID), and the request never
reached the server: blocked requests are writes, and a direct read shows the
collection unchanged. Harmless requests in the same forms get the server's
own answers, so a test cannot pass by mongoguard refusing everything.

Requests are hand-made bytes (mgwire) because drivers never produce most of
these forms; test_analyzers.py and test_rules_round2.py cover the same rules
through real drivers. What the upstream does with the odd forms was checked
against FerretDB directly (it reads the last of repeated top-level fields,
closes the connection on repeated nested keys and on the symbol type); the
tests assert only what holds for mongod too, so they run against either.
"""

from __future__ import annotations

import json
import signal
import struct
import threading
import time
import urllib.request

import pytest
from bson.binary import Binary
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument
from bson.regex import Regex
from pymongo.uri_parser import parse_uri

import mgwire as w
from conftest import ProxyFactory, free_port

RULES = ["case-insensitive-regex", "unbounded-push", "hot-path-lookup", "index-mismatched-sort",
         "collection-scan", "large-document", "client-side-join"]
REGEX, PUSH, DOC = "case-insensitive-regex", "unbounded-push", "large-document"
BLOCKED = 96
MAX_DOC = 2048

DOCS = [{"_id": 1, "email": "Bob@x", "items": [], "n": 0},
        {"_id": 2, "email": "bob@y", "items": [], "n": 0},
        {"_id": 3, "email": "carol@z", "items": [], "n": 0}]


def guard_config(admin_port: int, **actions) -> str:
    rules = {r: "off" for r in RULES}
    rules[REGEX] = "block"
    rules[PUSH] = "block"
    rules[DOC] = {"action": "block", "maxBytes": MAX_DOC}
    rules.update(actions)
    return json.dumps({"admin": {"listen": f"127.0.0.1:{admin_port}"},
                       "analysis": {"redactLiterals": True}, "rules": rules}) + "\n"


@pytest.fixture(scope="module")
def guard(request, mongoguard_bin, upstream):
    """One mongoguard with case-insensitive-regex, unbounded-push and
    large-document on `block`, and its admin endpoint."""
    f = ProxyFactory(mongoguard_bin, request.module.__name__)
    port = free_port()
    p = f(upstream.uri, guard_config(port))
    p.admin_port = port
    yield p
    problems = f.stop_all()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


# --- bytes pymongo will not write --------------------------------------------

class Odd:
    """A BSON element of a type pymongo does not write: type byte + payload."""

    def __init__(self, type_byte: int, payload: bytes):
        self.type_byte, self.payload = type_byte, payload


def symbol(s: str) -> Odd:
    b = s.encode() + b"\x00"
    return Odd(0x0E, struct.pack("<i", len(b)) + b)


def raw_doc(*pairs) -> RawBSONDocument:
    """A document with keys in exactly this order, repeats and odd types allowed."""
    body = b""
    for k, v in pairs:
        if isinstance(v, Odd):
            body += bytes([v.type_byte]) + k.encode() + b"\x00" + v.payload
        else:
            body += w.encode({k: v})[4:-1]
    return RawBSONDocument(struct.pack("<i", len(body) + 5) + body + b"\x00")


def section(ident: str, docs) -> bytes:
    """One kind-1 section (mgwire's dict of sequences cannot repeat an id)."""
    payload = ident.encode() + b"\x00" + b"".join(w.encode(d) for d in docs)
    return b"\x01" + struct.pack("<i", 4 + len(payload)) + payload


# --- talking to mongoguard and checking the server -------------------------------

class Conn:
    """A raw connection: send one message, read the reply to it."""

    def __init__(self, port: int):
        self.port = port
        self.s = w.connect(port)

    def close(self):
        self.s.close()

    def send(self, msg: bytes) -> w.Message:
        self.s.sendall(msg)
        r = w.recv_message(self.s)
        assert r.response_to == w.parse_message(msg).request_id, "reply to another request"
        return r

    def cmd(self, body, db: str | None = None, **kw) -> w.Message:
        if db is not None:
            body = {**body, "$db": db}
        return self.send(w.op_msg(body, **kw))


@pytest.fixture
def conn(guard):
    c = Conn(guard.port)
    yield c
    c.close()


def seed(upstream, db: str, coll: str = "c", docs=None) -> list[dict]:
    with upstream.client() as c:
        c[db][coll].insert_many([dict(d) for d in (docs or DOCS)])
    return contents(upstream, db, coll)


def contents(upstream, db: str, coll: str = "c") -> list[dict]:
    with upstream.client() as c:
        return list(c[db][coll].find({}).sort("_id", 1))


def upstream_port(upstream) -> int:
    return parse_uri(upstream.uri)["nodelist"][0][1]


def is_block(reply: w.Message, rule: str) -> bool:
    b = reply.body or {}
    return (b.get("ok") == 0 and b.get("code") == BLOCKED and b.get("mongoguardRule") == rule
            and "mongoguard blocked" in b.get("errmsg", "") and rule in b.get("errmsg", ""))


def assert_block(reply: w.Message, rule: str):
    assert is_block(reply, rule), f"not mongoguard's {rule} block: {reply.body}"


def refused_by_guard(p, reply: w.Message, request_id: int, code: int, words: str):
    """An error mongoguard's decoder wrote itself: the log names the request."""
    b = reply.body or {}
    assert b.get("ok") == 0 and b.get("code") == code, b
    assert words in b.get("errmsg", ""), b
    p.log.wait_for(lambda ln: ln.get("msg") == "Malformed request"
                   and ln.get("attr", {}).get("requestID") == request_id
                   and ln["attr"].get("code") == code, 5,
                   what=f"mongoguard's log line for request {request_id}")


def blocked_total(p, rule: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{p.admin_port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(f'mongoguard_blocked_total{{rule="{rule}"}} '):
                return float(line.split()[-1])
    return 0.0


# The writes every form below carries. Each must be blocked by its rule; a
# direct read afterwards shows whether it ran.
def blocked_writes(coll: str = "c") -> dict:
    return {
        "regex-update": (REGEX, {"update": coll, "updates": [
            {"q": {"email": Regex("^bob", "i")}, "u": {"$set": {"hit": 1}}, "multi": True}]}),
        "push-update": (PUSH, {"update": coll, "updates": [
            {"q": {"_id": 1}, "u": {"$push": {"items": "pushed"}}}]}),
        "regex-delete": (REGEX, {"delete": coll, "deletes": [
            {"q": {"email": {"$regex": "^bob", "$options": "i"}}, "limit": 0}]}),
        "push-findAndModify": (PUSH, {"findAndModify": coll, "query": {"_id": 2},
                                      "update": {"$push": {"items": 1}}}),
        "regex-findAndModify-remove": (REGEX, {"findAndModify": coll,
                                               "query": {"email": Regex("^carol", "i")},
                                               "remove": True}),
        "large-insert": (DOC, {"insert": coll, "documents": [
            {"_id": 10}, {"_id": 11, "blob": "x" * (MAX_DOC * 2)}]}),
    }


WRITES = list(blocked_writes())


# --- the baseline: plain OP_MSG ------------------------------------------------------

@pytest.mark.parametrize("case", WRITES)
def test_plain_op_msg_is_blocked(guard, conn, upstream, dbname, case):
    before = seed(upstream, dbname)
    rule, body = blocked_writes()[case]
    assert_block(conn.cmd(body, dbname), rule)
    assert contents(upstream, dbname) == before
    # the connection stays in step and harmless traffic gets the server's answers
    r = conn.cmd({"update": "c", "updates": [{"q": {"_id": 3}, "u": {"$set": {"n": 5}}}]}, dbname)
    assert r.body["ok"] == 1 and r.body["nModified"] == 1
    assert contents(upstream, dbname)[2]["n"] == 5


def test_flag_bits_and_fragmentation_change_nothing(guard, conn, upstream, dbname):
    """The same blocked writes with a checksum, with exhaustAllowed, and
    dribbled one byte per TCP segment: framing and flag bits do not matter."""
    before = seed(upstream, dbname)
    for case, (rule, body) in blocked_writes().items():
        assert_block(conn.send(w.op_msg({**body, "$db": dbname}, checksum=True)), rule)
        r = conn.send(w.op_msg({**body, "$db": dbname}, flags=w.EXHAUST_ALLOWED))
        assert_block(r, rule)
        assert not r.more_to_come
    msg = w.op_msg({**blocked_writes()["push-update"][1], "$db": dbname})
    for i in range(len(msg)):
        conn.s.sendall(msg[i:i + 1])
        time.sleep(0.001)
    r = w.recv_message(conn.s)
    assert r.response_to == w.parse_message(msg).request_id
    assert_block(r, PUSH)
    assert contents(upstream, dbname) == before


# --- OP_QUERY on <db>.$cmd -------------------------------------------------------------

@pytest.mark.parametrize("wrap", ["bare", "$query", "query"])
def test_op_query_command_form_is_refused(guard, conn, upstream, dbname, wrap):
    """The legacy command form of every write is refused by mongoguard itself,
    as a 5.1+ server refuses it: nothing is forwarded."""
    before = seed(upstream, dbname)
    for case, (_rule, body) in blocked_writes().items():
        q = body if wrap == "bare" else {wrap: body, "$readPreference": {"mode": "primary"}}
        msg = w.op_query(f"{dbname}.$cmd", q)
        r = conn.send(msg)
        assert r.opcode == w.OP_REPLY, case
        refused_by_guard(guard, r, w.parse_message(msg).request_id, 352,
                         "Unsupported OP_QUERY command: " + next(iter(body)))
        assert "legacy-opcode-removal" in r.body["errmsg"]
    assert contents(upstream, dbname) == before
    # the handshake commands OP_QUERY still carries reach the server
    r = conn.send(w.op_query("admin.$cmd", {"isMaster": 1}))
    assert r.opcode == w.OP_REPLY and r.body["ok"] == 1 and "maxWireVersion" in r.body


def test_op_query_on_a_collection_is_refused(guard, conn, upstream, dbname):
    """A legacy query on a collection (not $cmd) never reaches the server."""
    seed(upstream, dbname)
    msg = w.op_query(f"{dbname}.c", {"email": Regex("^bob", "i")})
    r = conn.send(msg)
    refused_by_guard(guard, r, w.parse_message(msg).request_id, 352, f"{dbname}.c")


# --- OP_COMPRESSED with each compressor ---------------------------------------------------

@pytest.mark.parametrize("compressor", ["snappy", "zlib", "zstd", "noop"])
def test_op_compressed_is_inflated_and_judged(guard, conn, upstream, dbname, compressor):
    before = seed(upstream, dbname)
    for case, (rule, body) in blocked_writes().items():
        inner = w.op_msg({**body, "$db": dbname})
        r = conn.send(w.op_compressed(inner, compressor))
        assert_block(r, rule)
    # OP_QUERY inside OP_COMPRESSED: refused as it is uncompressed
    inner = w.op_query(f"{dbname}.$cmd", blocked_writes()["push-update"][1])
    r = conn.send(w.op_compressed(inner, compressor))
    assert r.opcode == w.OP_REPLY and r.body["code"] == 352, r.body
    # a compressed blocked w:0 write: no reply, dropped; the next request is answered
    mark = blocked_total(guard, PUSH)
    inner = w.op_msg({**blocked_writes()["push-update"][1], "$db": dbname,
                      "writeConcern": {"w": 0}}, flags=w.MORE_TO_COME)
    conn.s.sendall(w.op_compressed(inner, compressor))
    assert conn.cmd({"ping": 1}, "admin").body["ok"] == 1
    assert blocked_total(guard, PUSH) == mark + 1
    assert contents(upstream, dbname) == before


# --- kind-1 document sequences --------------------------------------------------------------

def test_kind1_sequences_are_judged(guard, conn, upstream, dbname):
    before = seed(upstream, dbname)
    harmless = {"q": {"_id": 3}, "u": {"$set": {"n": 7}}}
    cases = [
        (PUSH, {"update": "c", "ordered": True},
         {"updates": [harmless, {"q": {"_id": 1}, "u": {"$push": {"items": "seq"}}}]}),
        (REGEX, {"update": "c"},
         {"updates": [{"q": {"email": {"$options": "i", "$regex": "^b"}},
                       "u": {"$set": {"hit": 1}}, "multi": True}]}),
        (REGEX, {"delete": "c"}, {"deletes": [{"q": {"email": Regex("^b", "i")}, "limit": 0}]}),
        (DOC, {"insert": "c"}, {"documents": [{"_id": 20}, {"_id": 21, "a": ["y" * 100] * 50}]}),
    ]
    for rule, body, seqs in cases:
        assert_block(conn.cmd(body, dbname, sequences=seqs), rule)
    # a batch is blocked whole: the harmless first statement did not run either
    assert contents(upstream, dbname) == before
    # the same statements, harmless, in a sequence reach the server
    r = conn.cmd({"update": "c"}, dbname, sequences={"updates": [harmless]})
    assert r.body["ok"] == 1 and r.body["nModified"] == 1


def test_sequences_that_hide_a_statement_are_refused(guard, conn, upstream, dbname):
    """Two sections with one id, or a section that repeats a body field: the
    server could read either copy, so mongoguard refuses the message."""
    before = seed(upstream, dbname)
    good = [{"q": {"_id": 3}, "u": {"$set": {"n": 1}}}]
    bad = [{"q": {"_id": 1}, "u": {"$push": {"items": "hidden"}}}]
    msgs = [
        w.op_msg({"update": "c", "$db": dbname},
                 extra_sections=section("updates", good) + section("updates", bad)),
        w.op_msg({"update": "c", "updates": good, "$db": dbname},
                 extra_sections=section("updates", bad)),
    ]
    for msg in msgs:
        r = conn.send(msg)
        refused_by_guard(guard, r, w.parse_message(msg).request_id, 17, "updates")
    assert contents(upstream, dbname) == before


# --- bulkWrite (the 8.0 command) ---------------------------------------------------------------

def test_bulk_write_is_judged(guard, conn, upstream, dbname):
    before = seed(upstream, dbname)
    ns = [{"ns": f"{dbname}.c"}]
    ops = {
        PUSH: [{"update": 0, "filter": {"_id": 1}, "updateMods": {"$push": {"items": "bw"}}}],
        REGEX: [{"delete": 0, "filter": {"email": Regex("^b", "i")}, "multi": True}],
        DOC: [{"insert": 0, "document": {"_id": 30, "blob": "z" * (MAX_DOC * 2)}}],
    }
    for rule, op in ops.items():
        # in the body, as an array
        assert_block(conn.cmd({"bulkWrite": 1, "ops": op, "nsInfo": ns}, "admin"), rule)
        # in kind-1 sequences, as drivers send it
        assert_block(conn.cmd({"bulkWrite": 1, "errorsOnly": True}, "admin",
                              sequences={"ops": [{"insert": 0, "document": {"_id": 31}}] + op,
                                         "nsInfo": ns}), rule)
    assert contents(upstream, dbname) == before
    # a harmless bulkWrite is forwarded: the server's own answer comes back
    # (FerretDB has no bulkWrite; mongod 8.0 runs it)
    r = conn.cmd({"bulkWrite": 1, "ops": [{"update": 0, "filter": {"_id": 3},
                                           "updateMods": {"$set": {"n": 9}}}], "nsInfo": ns},
                 "admin")
    assert not is_block(r, PUSH) and r.body.get("code") != BLOCKED, r.body
    if r.body["ok"] == 1:
        assert contents(upstream, dbname)[2]["n"] == 9
    else:
        assert contents(upstream, dbname) == before


# --- explain ---------------------------------------------------------------------------------

@pytest.mark.parametrize("verbosity", ["queryPlanner", "executionStats", "allPlansExecution"])
def test_explain_is_never_blocked_and_never_writes(guard, conn, upstream, dbname, verbosity):
    """README: explain is analysed and logged, never blocked. It is forwarded,
    and the server explains: `explain` of a write is not the write."""
    before = seed(upstream, dbname)
    mark = guard.log.mark()
    explainable = {k: v for k, v in blocked_writes().items() if k != "large-insert"}
    for case, (rule, body) in explainable.items():
        r = conn.cmd({"explain": body, "verbosity": verbosity}, dbname)
        assert r.body.get("code") != BLOCKED, (case, r.body)
        with upstream.client() as c:  # the same answer as directly
            try:
                direct = c[dbname].command({"explain": body, "verbosity": verbosity})
                assert r.body["ok"] == 1, (case, r.body)
                assert set(direct) - {"$clusterTime", "operationTime"} <= set(r.body), case
            except Exception as e:  # noqa: BLE001 -- the server refused: so must the reply say
                assert r.body["ok"] == 0 and r.body.get("code") == getattr(e, "code", None), \
                    (case, r.body, e)
    assert contents(upstream, dbname) == before
    found = guard.log.wait_for(
        lambda ln: ln.get("c") == "ANALYZER" and ln["attr"].get("command") == "explain"
        and ln["attr"].get("ns") == f"{dbname}.c", 10, since=mark, what="explain findings")
    assert all(f["attr"]["action"] == "log" for f in found), [f["attr"] for f in found]


def test_aggregate_explain_flag_only_when_boolean(guard, conn, upstream, dbname):
    """{aggregate, explain: true} explains; explain: false, 0 or a non-boolean
    (which no server takes as explain) is judged as the aggregate it is."""
    seed(upstream, dbname)
    pipeline = [{"$match": {"email": Regex("^bob", "i")}}]
    for flag in (False, 0, Int64(0), "false", "yes", {"a": 1}, [1], None):
        r = conn.cmd({"aggregate": "c", "pipeline": pipeline, "cursor": {}, "explain": flag},
                     dbname)
        assert_block(r, REGEX)
    for flag in (True, 1, 1.0):
        r = conn.cmd({"aggregate": "c", "pipeline": pipeline, "cursor": {}, "explain": flag},
                     dbname)
        assert r.body.get("code") != BLOCKED, r.body


# --- w:0 --------------------------------------------------------------------------------------

def test_unacknowledged_writes_are_dropped(guard, conn, upstream, dbname):
    before = seed(upstream, dbname)
    marks = {r: blocked_total(guard, r) for r in (REGEX, PUSH, DOC)}
    log_mark = guard.log.mark()
    for case, (_rule, body) in blocked_writes().items():
        conn.s.sendall(w.op_msg({**body, "$db": dbname, "writeConcern": {"w": 0}},
                                flags=w.MORE_TO_COME))
    # no reply came for any of them: the first reply is the ping's
    assert conn.cmd({"ping": 1}, "admin").body["ok"] == 1
    counts = {r: 0 for r in marks}
    for rule, _ in blocked_writes().values():
        counts[rule] += 1
    assert {r: blocked_total(guard, r) - marks[r] for r in marks} == counts
    guard.log.wait_for(lambda ln: ln.get("c") == "ANALYZER" and ln["attr"].get("action") ==
                       "block" and ln["attr"].get("ns") == f"{dbname}.c", 10, since=log_mark,
                       what="the w:0 block findings")
    # an unacknowledged harmless write still reaches the server
    conn.s.sendall(w.op_msg({"insert": "c", "documents": [{"_id": 40}], "$db": dbname,
                             "writeConcern": {"w": 0}}, flags=w.MORE_TO_COME))
    deadline = time.monotonic() + 5
    while len(contents(upstream, dbname)) == len(before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert contents(upstream, dbname) == before + [{"_id": 40}]


# --- pipelined requests --------------------------------------------------------------------------

def test_pipelined_blocked_request_in_the_middle(guard, conn, upstream, dbname):
    seed(upstream, dbname)
    writes = blocked_writes()
    batch = [
        ("insert A", {"insert": "c", "documents": [{"_id": 50, "email": "a"}]}, 0),
        ("blocked update", writes["regex-update"][1], 0),
        ("find", {"find": "c", "filter": {"_id": {"$gte": 50}}}, 0),
        ("blocked w:0 push", {**writes["push-update"][1], "writeConcern": {"w": 0}},
         w.MORE_TO_COME),
        ("insert B", {"insert": "c", "documents": [{"_id": 51, "email": "b"}]}, 0),
        ("blocked delete", writes["regex-delete"][1], 0),
        ("count", {"count": "c"}, 0),
    ]
    msgs, expect = [], []
    for name, body, flags in batch:
        rid = w.next_request_id()
        msgs.append(w.op_msg({**body, "$db": dbname}, request_id=rid, flags=flags))
        if not flags:
            expect.append((name, rid))
    conn.s.sendall(b"".join(msgs))  # one write: every request is in the proxy at once
    replies = [w.recv_message(conn.s) for _ in expect]
    assert [r.response_to for r in replies] == [rid for _, rid in expect], "out of order"
    got = dict(zip([n for n, _ in expect], replies))
    assert got["insert A"].body["n"] == 1
    assert_block(got["blocked update"], REGEX)
    assert [d["_id"] for d in got["find"].body["cursor"]["firstBatch"]] == [50]
    assert got["insert B"].body["n"] == 1
    assert_block(got["blocked delete"], REGEX)
    assert got["count"].body["n"] == len(DOCS) + 2
    after = contents(upstream, dbname)
    assert [d["_id"] for d in after] == [1, 2, 3, 50, 51]
    assert all("hit" not in d and d["items"] == [] for d in after if d["_id"] < 50)


# --- field order ------------------------------------------------------------------------------

def test_field_order_does_not_matter(guard, conn, upstream, dbname):
    before = seed(upstream, dbname)
    cases = [
        # $options before $regex
        (REGEX, raw_doc(("update", "c"), ("updates", [{"q": {"email": raw_doc(
            ("$options", "i"), ("$regex", "^bob"))}, "u": {"$set": {"hit": 1}}}]),
            ("$db", dbname))),
        # $db before the other fields (but after the command name)
        (REGEX, raw_doc(("delete", "c"), ("$db", dbname), ("deletes", [
            {"limit": 0, "q": {"email": Regex("^b", "i")}}]))),
        # statement keys in reverse, the operator after others
        (PUSH, raw_doc(("update", "c"), ("$db", dbname), ("ordered", False), ("updates", [
            raw_doc(("upsert", False), ("u", raw_doc(("$set", {"n": 1}), ("$inc", {"m": 1}),
                                                      ("$push", {"items": 1}))),
                    ("q", {"_id": 1}))]))),
        # findAndModify with update before query, and the $push last
        (PUSH, raw_doc(("findAndModify", "c"), ("update", {"$set": {"a": 1},
                                                           "$push": {"items": 2}}),
                       ("query", {"_id": 1}), ("$db", dbname))),
    ]
    for rule, body in cases:
        assert_block(conn.send(w.op_msg(body)), rule)
    # $db first: the command name is the first key, for mongoguard and the
    # server alike; the server answers "no such command" and runs nothing
    r = conn.send(w.op_msg(raw_doc(("$db", dbname), ("update", "c"), ("updates", [
        {"q": {"_id": 1}, "u": {"$push": {"items": "db-first"}}}]))))
    assert r.body["ok"] == 0 and r.body.get("code") != BLOCKED, r.body
    assert contents(upstream, dbname) == before


# --- repeated keys ------------------------------------------------------------------------------

def test_repeated_top_level_fields_are_refused(guard, conn, upstream, dbname):
    """FerretDB reads the last of repeated command fields ($db, the collection,
    filter, updates); mongod refuses them (40413). mongoguard refuses them
    too, before judging either copy."""
    before = seed(upstream, dbname)
    harmless = [{"q": {"_id": 3}, "u": {"$set": {"n": 1}}}]
    pushy = [{"q": {"_id": 1}, "u": {"$push": {"items": "dup"}}}]
    bodies = {
        "update.updates": raw_doc(("update", "c"), ("updates", harmless), ("updates", pushy),
                                  ("$db", dbname)),
        "delete.deletes": raw_doc(("delete", "c"), ("deletes", [{"q": {"_id": 99}, "limit": 1}]),
                                  ("deletes", [{"q": {"email": Regex("^b", "i")}, "limit": 0}]),
                                  ("$db", dbname)),
        "update.$db": raw_doc(("update", "c"), ("updates", pushy), ("$db", "mg_nowhere"),
                              ("$db", dbname)),
        "update.update": raw_doc(("update", "nothing_here"), ("update", "c"),
                                 ("updates", pushy), ("$db", dbname)),
        "find.filter": raw_doc(("find", "c"), ("filter", {"_id": 1}),
                               ("filter", {"email": Regex("^b", "i")}), ("$db", dbname)),
    }
    for field, body in bodies.items():
        msg = w.op_msg(body)
        r = conn.send(msg)
        refused_by_guard(guard, r, w.parse_message(msg).request_id, 40413,
                         f"BSON field '{field}' is a duplicate field")
    assert contents(upstream, dbname) == before
    # compressed, the same
    msg = w.op_msg(bodies["update.updates"])
    r = conn.send(w.op_compressed(msg, "zlib"))
    assert r.body["code"] == 40413, r.body
    assert contents(upstream, dbname) == before


def test_repeated_nested_keys_are_judged_as_the_server_reads_them(guard, conn, upstream, dbname):
    """Inside a statement or an update document every occurrence counts (mongod
    applies every repeated update operator; FerretDB closes the connection).
    Whatever the server does, the write never runs."""
    before = seed(upstream, dbname)
    stmts = {
        "u twice, $push last": raw_doc(("q", {"_id": 1}), ("u", {"$set": {"n": 1}}),
                                       ("u", {"$push": {"items": 1}})),
        "$push twice, bounded first": {"q": {"_id": 1}, "u": raw_doc(
            ("$push", {"ok": {"$each": [1], "$slice": -3}}), ("$push", {"items": 2}))},
        "q twice, regex last": raw_doc(("q", {"_id": 99}), ("q", {"email": Regex("^b", "i")}),
                                       ("u", {"$set": {"hit": 1}}), ("multi", True)),
        "$options i then empty": {"q": {"email": raw_doc(("$regex", "^b"), ("$options", "i"),
                                                         ("$options", ""))},
                                  "u": {"$set": {"hit": 1}}, "multi": True},
        "$options empty then i": {"q": {"email": raw_doc(("$regex", "^b"), ("$options", ""),
                                                         ("$options", "i"))},
                                  "u": {"$set": {"hit": 1}}, "multi": True},
    }
    for name, stmt in stmts.items():
        r = conn.cmd({"update": "c", "updates": [stmt]}, dbname)
        assert r.body.get("code") == BLOCKED, (name, r.body)
    assert contents(upstream, dbname) == before


# --- odd but valid BSON -----------------------------------------------------------------------

def test_regex_spellings_are_all_blocked(guard, conn, upstream, dbname):
    """The deprecated BSON regex type, $regex strings with $options, a BSON
    regex under $regex, an inline (?i) flag: one rule, every spelling."""
    before = seed(upstream, dbname)
    spellings = [
        Regex("^bob", "i"),
        Regex("^bob", "mi"),
        {"$regex": "^bob", "$options": "i"},
        {"$regex": "^bob", "$options": "si"},
        {"$regex": Regex("^bob", "i")},
        {"$regex": "(?i)^bob"},
        {"$regex": Regex("(?i)^bob", "")},
        Regex("(?i:b)ob", ""),
    ]
    for f in spellings:
        r = conn.cmd({"update": "c", "updates": [{"q": {"email": f}, "u": {"$set": {"hit": 1}},
                                                  "multi": True}]}, dbname)
        assert_block(r, REGEX)
    assert contents(upstream, dbname) == before


def test_odd_types_never_run_unjudged(guard, conn, upstream, dbname):
    """A symbol where a string belongs, $options as a non-string: mongod refuses
    them ("$options has to be a string"); mongoguard forwards them, and the
    server's refusal (FerretDB: an error, or closing the connection on the
    symbol type) is what the client sees, exactly as directly. Never a write."""
    before = seed(upstream, dbname)
    filters = {
        "$options symbol": raw_doc(("$regex", "^bob"), ("$options", symbol("i"))),
        "$regex symbol": raw_doc(("$regex", symbol("(?i)^bob"))),
        "$options int": {"$regex": "^bob", "$options": 1},
        "$options array": {"$regex": "^bob", "$options": ["i"]},
        "$options document": {"$regex": "^bob", "$options": {"i": 1}},
    }
    for name, f in filters.items():
        body = {"update": "c", "updates": [{"q": {"email": f}, "u": {"$set": {"hit": 1}},
                                            "multi": True}]}
        outcomes = []
        for port in (guard.port, upstream_port(upstream)):
            c = Conn(port)
            try:
                r = c.cmd(body, dbname)
                outcomes.append(("reply", r.body["ok"], r.body.get("code")))
            except w.Closed:
                outcomes.append(("closed",))
            finally:
                c.close()
        via, direct = outcomes
        assert via == direct, (name, via, direct)
        assert via == ("closed",) or via[1] == 0, (name, via)
    assert contents(upstream, dbname) == before


def test_flag_types_int_double_bool(start_proxy, upstream, dbname):
    """multi as bool, int32, int64 or double means the same to mongoguard as to
    mongod: a multi-document update with an empty filter scans the collection
    (collection-scan blocks it), a single-document one does not."""
    with upstream.client() as c:
        c[dbname].big.insert_many([{"_id": i, "v": i} for i in range(40)])
    rules = {r: "off" for r in RULES}
    rules["collection-scan"] = {"action": "block", "minDocuments": 10}
    p = start_proxy(upstream.uri, json.dumps({"rules": rules}))
    conn = Conn(p.port)
    try:
        # the rule needs the collection's size, learnt off the request path
        deadline = time.monotonic() + 15
        while True:
            r = conn.cmd({"find": "big", "filter": {"v": 3}}, dbname)
            if is_block(r, "collection-scan") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert is_block(r, "collection-scan"), r.body
        for multi in (True, 1, Int64(1), 1.0, -1, 0.5):
            r = conn.cmd({"update": "big", "updates": [{"q": {}, "u": {"$set": {"hit": 1}},
                                                        "multi": multi}]}, dbname)
            assert is_block(r, "collection-scan"), (multi, r.body)
        with upstream.client() as c:
            assert c[dbname].big.count_documents({"hit": 1}) == 0
        for multi in (False, 0, Int64(0), 0.0):
            r = conn.cmd({"update": "big", "updates": [{"q": {}, "u": {"$set": {"one": 1}},
                                                        "multi": multi}]}, dbname)
            assert r.body.get("code") != BLOCKED, (multi, r.body)
    finally:
        conn.close()


def test_collection_named_by_uuid(guard, conn, upstream, dbname):
    """mongod runs find, count and distinct on the collection a UUID names
    (FerretDB refuses them). mongoguard cannot tell which collection that is,
    so with a query rule on block such a request is blocked, and asked to name
    its collection."""
    seed(upstream, dbname)
    with upstream.client() as c:
        info = c[dbname].command("listCollections", filter={"name": "c"})
    uuid = info["cursor"]["firstBatch"][0].get("info", {}).get("uuid") or Binary(b"\x01" * 16, 4)
    for body in ({"find": uuid, "filter": {"email": Regex("^bob", "i")}},
                 {"count": uuid, "query": {"email": Regex("^bob", "i")}},
                 {"distinct": uuid, "key": "email"}):
        r = conn.cmd(body, dbname)
        assert_block(r, REGEX)
        assert "named by UUID" in r.body["errmsg"]
    # explain of it is forwarded, as every explain is
    r = conn.cmd({"explain": {"find": uuid, "filter": {}}}, dbname)
    assert r.body.get("code") != BLOCKED, r.body


def test_view_pipelines_are_judged(guard, conn, upstream, dbname):
    """A view's pipeline runs on every read of the view, so a blocked pattern
    is blocked where the view is defined (create, or collMod of a view);
    otherwise every later find of the view would run it unjudged."""
    seed(upstream, dbname)
    bad = [{"$match": {"email": Regex("^bob", "i")}}]
    for body in ({"create": "v", "viewOn": "c", "pipeline": bad},
                 {"collMod": "v", "viewOn": "c", "pipeline": bad}):
        assert_block(conn.cmd(body, dbname), REGEX)
    with upstream.client() as c:
        assert "v" not in c[dbname].list_collection_names()
    # a harmless view and a plain collection get the server's own answers
    r = conn.cmd({"create": "v2", "viewOn": "c", "pipeline": [{"$match": {"n": 0}}]}, dbname)
    assert r.body.get("code") != BLOCKED, r.body
    r = conn.cmd({"create": "plain"}, dbname)
    assert r.body["ok"] == 1, r.body


def test_upsert_flag_types_change_nothing(guard, conn, upstream, dbname):
    """An upserting $push is blocked whatever type upsert has (bool, int32,
    int64, double, or a type mongod refuses), and upserts nothing."""
    before = seed(upstream, dbname)
    for upsert in (True, 1, Int64(1), 1.0, False, 0, 0.0, "yes", None):
        r = conn.cmd({"update": "c", "updates": [{"q": {"_id": 77}, "u": {"$push": {"items": 1}},
                                                  "upsert": upsert}]}, dbname)
        assert_block(r, PUSH)
        r = conn.cmd({"findAndModify": "c", "query": {"_id": 78},
                      "update": {"$push": {"items": 1}}, "upsert": upsert, "new": upsert}, dbname)
        assert_block(r, PUSH)
    assert contents(upstream, dbname) == before


# --- aliases ------------------------------------------------------------------------------------

def _deep_and(levels: int, inner: dict) -> dict:
    f = inner
    for _ in range(levels):
        f = {"$and": [f]}
    return f


ALIASES = {
    "$in regex": {"email": {"$in": ["nobody", Regex("^bob", "i")]}},
    "$nin regex": {"email": {"$nin": [Regex("^zed", "i")]}},
    "$all regex": {"email": {"$all": [Regex("^bob", "i")]}},
    "$not regex": {"email": {"$not": Regex("^zed", "i")}},
    "$not $regex": {"email": {"$not": {"$regex": "^zed", "$options": "i"}}},
    "$elemMatch value": {"items": {"$elemMatch": {"$regex": "^x", "$options": "i"}}},
    "$elemMatch document": {"items": {"$elemMatch": {"sku": Regex("^x", "i")}}},
    "$all $elemMatch": {"items": {"$all": [{"$elemMatch": {"sku": Regex("^x", "i")}}]}},
    "$nor": {"$nor": [{"email": Regex("^zed", "i")}]},
    "$or": {"$or": [{"_id": 99}, {"email": Regex("^bob", "i")}]},
    "$and nested": {"$and": [{"n": {"$gte": 0}}, {"$or": [{"$and": [{"email": Regex("^b", "i")}]}]}]},
    "$expr $regexMatch": {"$expr": {"$regexMatch": {"input": "$email", "regex": "^bob",
                                                    "options": "i"}}},
    "$expr $regexMatch regex flags": {"$expr": {"$regexMatch": {"input": "$email",
                                                                "regex": Regex("^bob", "i")}}},
    "$expr nested $regexFind": {"$expr": {"$ne": [{"$regexFind": {
        "input": "$email", "regex": "(?i)^bob"}}, None]}},
    "dotted path": {"profile.email": Regex("^bob", "i")},
    "100 $and levels": _deep_and(100, {"email": {"$regex": "^bob", "$options": "i"}}),
    "110 $and levels": _deep_and(110, {"email": Regex("^bob", "i")}),
}


@pytest.mark.parametrize("alias", list(ALIASES))
def test_aliases_are_blocked(guard, conn, upstream, dbname, alias):
    before = seed(upstream, dbname)
    f = ALIASES[alias]
    forms = [
        {"update": "c", "updates": [{"q": f, "u": {"$set": {"hit": 1}}, "multi": True}]},
        {"delete": "c", "deletes": [{"q": f, "limit": 0}]},
        {"findAndModify": "c", "query": f, "remove": True},
        {"aggregate": "c", "pipeline": [{"$match": f}, {"$merge": {"into": "out"}}],
         "cursor": {}},
        {"aggregate": "c", "pipeline": [{"$facet": {"x": [{"$match": f}]}}], "cursor": {}},
    ]
    for body in forms:
        assert_block(conn.cmd(body, dbname), REGEX)
    assert contents(upstream, dbname) == before
    with upstream.client() as c:
        assert "out" not in c[dbname].list_collection_names()


# --- reload races -----------------------------------------------------------------------------

def test_reload_race_every_request_judged_by_one_snapshot(start_proxy, upstream, dbname):
    """A client pipelines $push updates while SIGHUP turns unbounded-push from
    log to block. Every request is judged by the old rules or the new ones:
    its reply is the server's (and its value is in the array) or a block (and
    it is not), replies stay in order, the switch happens once, and nothing
    sent after the reload was logged gets through."""
    seed(upstream, dbname, docs=[{"_id": 1, "items": []}])
    admin = free_port()
    p = start_proxy(upstream.uri, guard_config(admin, **{PUSH: "log"}))
    p.admin_port = admin

    conn = Conn(p.port)
    sent: list[tuple[int, int, float]] = []  # (value, requestID, time the send began)
    replies: list[w.Message] = []
    stop = threading.Event()
    failures: list[str] = []

    def reader():
        try:
            while not stop.is_set() or len(replies) < len(sent):
                if len(replies) < len(sent):  # a reply is owed
                    replies.append(w.recv_message(conn.s, timeout=20))
                else:
                    time.sleep(0.001)
        except Exception as e:  # noqa: BLE001 -- reported below
            failures.append(repr(e))

    def writer():
        i = 0
        while not stop.is_set():
            batch = []
            t = time.monotonic()
            for _ in range(8):
                rid = w.next_request_id()
                batch.append(w.op_msg({"update": "c", "$db": dbname, "updates": [
                    {"q": {"_id": 1}, "u": {"$push": {"items": i}}}]}, request_id=rid))
                sent.append((i, rid, t))
                i += 1
            conn.s.sendall(b"".join(batch))
            while len(sent) - len(replies) > 64 and not failures:  # bounded pipeline
                time.sleep(0.001)

    rt = threading.Thread(target=reader)
    wt = threading.Thread(target=writer)
    rt.start()
    wt.start()
    try:
        while len(replies) < 100:  # the old rules have been answering for a while
            assert not failures, failures
            time.sleep(0.01)
        mark = p.log.mark()
        p.config_path.write_text(guard_config(admin))
        p.proc.send_signal(signal.SIGHUP)
        p.log.wait_for(lambda ln: ln.get("msg") == "Configuration reloaded", 10, since=mark,
                       what="the reload")
        seen_reload = time.monotonic()
        n_at_reload = len(sent)
        while len(sent) < n_at_reload + 200:
            time.sleep(0.01)
    finally:
        stop.set()
        wt.join(10)
        rt.join(30)
        conn.close()
    assert not failures, failures
    assert len(replies) == len(sent)
    assert [r.response_to for r in replies] == [rid for _, rid, _ in sent], "out of order"
    blocked = [is_block(r, PUSH) for r in replies]
    for r, b in zip(replies, blocked):
        assert b or (r.body["ok"] == 1 and r.body["nModified"] == 1), r.body
    first = blocked.index(True)
    print(f"reload race: {len(sent)} pipelined requests, {first} judged by the old rules, "
          f"{sum(1 for (_, _, t) in sent if t > seen_reload)} sent after the reload was logged")
    assert first > 0 and all(blocked[first:]), "the rules changed more than once"
    late = [v for (v, _, t), b in zip(sent, blocked) if t > seen_reload and not b]
    assert not late, f"{len(late)} requests sent after the reload took effect got through"
    applied = contents(upstream, dbname)[0]["items"]
    assert applied == [v for (v, _, _), b in zip(sent, blocked) if not b]
    with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    assert 'mongoguard_config_reloads_total{result="ok"} 1' in text
    assert f'mongoguard_blocked_total{{rule="{PUSH}"}} {len(sent) - first}' in text
