"""mongoguard in front of a scripted server (fakeserver.py), for frames a
real server will not produce on demand: exhaust getMore streams, streaming
hello, moreToCome requests, malformed replies, a dead or vanishing upstream.

The fake server records the exact bytes it receives, so these tests also
check that mongoguard forwards requests unchanged (the one exception being
the `compression` field it strips from a hello).

Most scenarios run twice, directly against the fake server and through
mongoguard: the direct run proves the script itself is right.
"""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import threading
import time

import pytest
from bson.int64 import Int64
from pymongo import CursorType, MongoClient
from pymongo.errors import AutoReconnect, ConnectionFailure, PyMongoError, ServerSelectionTimeoutError

import mgwire as w
from conftest import free_port, line_text
from fakeserver import FakeServer, cursor_reply


@pytest.fixture
def fake():
    servers = []

    def make(**kw) -> FakeServer:
        s = FakeServer(**kw)
        s.start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


@pytest.fixture(params=["direct", "proxy"])
def target(request, fake, start_proxy):
    """(fake_server, port the client dials, proxy or None)."""
    def make(**kw):
        srv = fake(**kw)
        if request.param == "direct":
            return srv, srv.port, None
        p = start_proxy(srv.uri)
        return srv, p.port, p
    make.mode = request.param
    return make


def client_for(port: int, **kw) -> MongoClient:
    kw.setdefault("serverSelectionTimeoutMS", 5000)
    kw.setdefault("socketTimeoutMS", 10000)
    return MongoClient(f"mongodb://127.0.0.1:{port}/", directConnection=True, **kw)


# --- exhaust cursors -----------------------------------------------------------

def exhaust_script(server: FakeServer, batches: int = 6, per: int = 3):
    """find answers with a first batch and cursor 77; a getMore with
    exhaustAllowed is answered by `batches` replies, all but the last with
    moreToCome, each one's responseTo the previous reply's requestID."""
    ns = "test.exh"
    expected = [{"_id": i} for i in range(per * (batches + 1))]

    async def on_find(conn, msg):
        await conn.reply(msg, cursor_reply(ns, expected[:per], 77, first=True))

    async def on_get_more(conn, msg):
        if not msg.exhaust_allowed:
            # A plain getMore: answer everything that is left at once.
            await conn.reply(msg, cursor_reply(ns, expected[per:], 0, first=False))
            return
        prev = msg.request_id
        for b in range(batches):
            last = b == batches - 1
            batch = expected[per * (b + 1):per * (b + 2)]
            prev = await conn.reply(msg, cursor_reply(ns, batch, 0 if last else 77, first=False),
                                    flags=0 if last else w.MORE_TO_COME, response_to=prev)
            await asyncio.sleep(0.02)

    server.handlers["find"] = on_find
    server.handlers["getMore"] = on_get_more
    return expected


def test_exhaust_stream_pymongo(target):
    srv, port, _ = target()
    expected = exhaust_script(srv)
    with client_for(port, appname="exhaust-py", maxPoolSize=1) as c:
        got = list(c.test.exh.find({}, cursor_type=CursorType.EXHAUST, batch_size=3))
        assert got == expected
        assert c.admin.command("ping")["ok"] == 1  # same connection, still in step
    gms = srv.messages("getMore", app="exhaust-py")
    assert len(gms) == 1 and gms[0].exhaust_allowed


def test_exhaust_stream_raw_bytes(target):
    """Byte-exact: the find and the exhaust getMore reach the server unchanged,
    and every streamed reply reaches the client unchanged and in order."""
    srv, port, _ = target()
    exhaust_script(srv, batches=5)
    s = w.connect(port)
    try:
        hello = w.op_msg({"hello": 1, "$db": "admin",
                          "client": {"application": {"name": "exhaust-raw"}}})
        s.sendall(hello)
        w.recv_message(s)
        find = w.op_msg({"find": "exh", "batchSize": 3, "$db": "test"})
        s.sendall(find)
        first = w.recv_message(s)
        assert first.body["cursor"]["id"] == 77
        gm = w.op_msg({"getMore": Int64(77), "collection": "exh", "$db": "test"},
                      flags=w.EXHAUST_ALLOWED)
        s.sendall(gm)
        replies = []
        while True:
            r = w.recv_message(s, 10)
            replies.append(r)
            if not r.more_to_come:
                break
        assert len(replies) == 5
        # Chain: first answers the getMore, each next one the previous reply.
        gm_id = w.parse_message(gm).request_id
        assert replies[0].response_to == gm_id
        for a, b in zip(replies, replies[1:]):
            assert b.response_to == a.request_id
        conn = srv.client_conns("exhaust-raw")[0]
        assert [m.raw for m in conn.received] == [hello, find, gm]
        assert [r.raw for r in replies] == conn.sent[2:]
        # The connection is usable afterwards.
        assert w.command(s, {"ping": 1}).body["ok"] == 1
    finally:
        s.close()


# --- streaming hello -------------------------------------------------------------

def streaming_hello_script(server: FakeServer, streamed: int, interval: float = 0.1):
    """An awaitable hello with exhaustAllowed gets `streamed` replies with
    moreToCome (topologyVersion counter rising), then one without."""
    async def on_hello(conn, msg):
        body = msg.body or {}
        if not ("topologyVersion" in body and "maxAwaitTimeMS" in body and msg.exhaust_allowed):
            return False  # default handling
        prev = msg.request_id
        for i in range(streamed + 1):
            await asyncio.sleep(interval)
            server.tv_counter += 1
            last = i == streamed
            prev = await conn.reply(msg, server.hello_doc(), response_to=prev,
                                    flags=0 if last else w.MORE_TO_COME)
        return None

    for name in ("hello", "isMaster", "ismaster"):
        server.handlers[name] = on_hello


def test_streaming_hello_raw(target):
    srv, port, _ = target(topology_version=True)
    streaming_hello_script(srv, streamed=3)
    s = w.connect(port)
    try:
        s.sendall(w.op_msg({"hello": 1, "$db": "admin",
                            "client": {"application": {"name": "stream-raw"}}}))
        first = w.recv_message(s)
        tv = first.body["topologyVersion"]
        awaitable = w.op_msg({"hello": 1, "$db": "admin", "topologyVersion": tv,
                              "maxAwaitTimeMS": Int64(10000)}, flags=w.EXHAUST_ALLOWED)
        s.sendall(awaitable)
        replies = []
        while True:
            r = w.recv_message(s, 10)
            replies.append(r)
            if not r.more_to_come:
                break
        assert len(replies) == 4
        assert [r.body["topologyVersion"]["counter"] for r in replies] == [1, 2, 3, 4]
        assert replies[0].response_to == w.parse_message(awaitable).request_id
        for a, b in zip(replies, replies[1:]):
            assert b.response_to == a.request_id
        conn = srv.client_conns("stream-raw")[0]
        assert [r.raw for r in replies] == conn.sent[1:5]
        assert conn.received[1].raw == awaitable
        assert w.command(s, {"ping": 1}).body["ok"] == 1
    finally:
        s.close()


def test_streaming_hello_pymongo(target):
    """pymongo's monitor streams hello (the server advertises topologyVersion):
    every streamed reply reaches the driver, and after the stream ends the
    monitor's next awaitable hello arrives on the same connection."""
    srv, port, _ = target(topology_version=True)
    streaming_hello_script(srv, streamed=4, interval=0.15)
    with client_for(port, appname="stream-py", heartbeatFrequencyMS=500) as c:
        c.admin.command("ping")

        def counter():
            sd = c.topology_description.server_descriptions().get(("127.0.0.1", port))
            tv = sd.topology_version if sd else None
            return tv["counter"] if tv else 0

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and counter() < 5:
            time.sleep(0.05)
        assert counter() >= 5

        def awaitables_on_one_conn():
            for conn in srv.client_conns("stream-py"):
                n = [m for m in conn.received if m.body and "maxAwaitTimeMS" in m.body]
                if len(n) >= 2:
                    return True
            return False

        srv.wait_for(awaitables_on_one_conn, 15, "a second awaitable hello on one connection")
        assert c.admin.command("ping")["ok"] == 1


# --- moreToCome requests -----------------------------------------------------------

def test_more_to_come_request_gets_no_reply(target):
    srv, port, _ = target()
    s = w.connect(port)
    try:
        hello = w.op_msg({"hello": 1, "$db": "admin",
                          "client": {"application": {"name": "w0-raw"}}})
        s.sendall(hello)
        w.recv_message(s)
        ins = w.op_msg({"insert": "c", "$db": "test", "writeConcern": {"w": 0}},
                       sequences={"documents": [{"_id": i} for i in range(3)]},
                       flags=w.MORE_TO_COME)
        s.sendall(ins)
        ping = w.op_msg({"ping": 1, "$db": "admin"})
        s.sendall(ping)
        r = w.recv_message(s)
        assert r.response_to == w.parse_message(ping).request_id
        conn = srv.client_conns("w0-raw")[0]
        srv.wait_for(lambda: len(conn.received) >= 3, 5, "ping")
        assert [m.raw for m in conn.received] == [hello, ins, ping]
    finally:
        s.close()


def test_pymongo_w0_through_fake(target):
    srv, port, _ = target()
    with client_for(port, appname="w0-py", maxPoolSize=1, w=0) as c:
        for i in range(20):
            c.test.c.insert_one({"_id": i})
        assert c.admin.command("ping")["ok"] == 1
    ins = srv.messages("insert", app="w0-py")
    assert len(ins) == 20 and all(m.more_to_come for m in ins)


def test_reply_to_more_to_come_request_is_not_relayed(fake, start_proxy):
    """FerretDB v1.24.2 answers moreToCome requests, which the OP_MSG spec
    forbids. The client will never read such a reply; relaying it puts the
    client's connection out of step. mongoguard must drop it."""
    srv = fake()

    async def rude_insert(conn, msg):
        await conn.reply(msg, {"n": 1, "ok": 1.0})  # even with moreToCome set

    srv.handlers["insert"] = rude_insert
    p = start_proxy(srv.uri)
    with client_for(p.port, appname="w0-rude", maxPoolSize=1, w=0) as c:
        for i in range(5):
            c.test.c.insert_one({"_id": i})
        for _ in range(5):
            assert c.admin.command("ping")["ok"] == 1
    # expected traffic (drivers' endSessions meet it on every close), not a
    # fault: no warning, nothing counted as unexpected
    assert not [ln for ln in p.log.lines() if ln.get("s") == "W"], \
        [ln for ln in p.log.lines() if ln.get("s") == "W"]
    assert not any("unexpectedRepliesDropped" in ln.get("attr", {}) for ln in p.log.lines())


def test_owed_replies_decay_in_request_order(fake, start_proxy):
    """A w:0 write owes the upstream's reply nothing, and mongoguard lets one
    stray reply pass quietly per such request while it may still come. The
    upstream answers in order: once a later request's reply has begun, the
    w:0 writes before it can no longer be answered, so a reply answering
    nothing after that is a fault again (a warning, counted), not excused
    by writes long answered or never to be."""
    srv = fake()

    async def ping_twice(conn, msg):
        await conn.reply(msg, {"ok": 1.0})
        await conn.reply(msg, {"ok": 1.0})  # a second reply to the same request

    srv.handlers["ping"] = ping_twice
    p = start_proxy(srv.uri)
    with client_for(p.port, appname="w0-owed", maxPoolSize=1, w=0) as c:
        for i in range(5):
            c.test.c.insert_one({"_id": i})  # polite server: never answered
        assert c.admin.command("ping")["ok"] == 1
        assert c.admin.command("ismaster")["ok"] == 1  # the stray reply did not reach it
    warned = [ln for ln in p.log.lines() if ln.get("s") == "W"
              and "answers no request in flight" in ln.get("msg", "")]
    assert len(warned) == 1, [ln for ln in p.log.lines() if ln.get("s") == "W"]
    ended = p.log.wait_for(lambda ln: ln.get("msg") == "Connection ended"
                           and ln.get("attr", {}).get("appName") == "w0-owed"
                           and "unexpectedRepliesDropped" in ln.get("attr", {}),
                           what="connection end counting the stray reply")
    assert ended[0]["attr"]["unexpectedRepliesDropped"] == 1


# --- compression ---------------------------------------------------------------

@pytest.mark.parametrize("compressor", ["snappy", "zlib", "zstd"])
def test_compression_stripped_from_hello_pymongo(fake, start_proxy, compressor):
    srv = fake()
    p = start_proxy(srv.uri)
    app = f"comp-{compressor}"
    with client_for(p.port, appname=app, compressors=compressor) as c:
        c.test.c.insert_one({"_id": 1})
        assert list(c.test.c.find({})) == []  # the fake server's empty cursor
    hellos = [m for m in srv.messages(app=app) if m.command in ("hello", "isMaster", "ismaster")]
    assert hellos
    for h in hellos:
        assert "compression" not in h.body
        assert h.compressed_from is None
    # Nothing was compressed on the way, since nothing was negotiated.
    assert all(m.compressed_from is None for m in srv.messages(app=app))
    assert srv.messages("insert", app=app)


def test_compression_strip_is_byte_exact(fake, start_proxy):
    """The forwarded hello is the client's hello minus `compression`, nothing
    else changed (ids, field order, other fields); an OP_MSG checksum is
    dropped along with its flag since the bytes changed."""
    srv = fake()
    p = start_proxy(srv.uri)
    s = w.connect(p.port)
    try:
        body = {"hello": 1, "helloOk": True,
                "client": {"application": {"name": "strip-msg"}, "driver": {"name": "raw"}},
                "compression": ["zstd", "zlib", "snappy"], "saslSupportedMechs": "admin.u",
                "$db": "admin"}
        rid = w.next_request_id()
        s.sendall(w.op_msg(body, request_id=rid, checksum=True))
        r = w.recv_message(s)
        assert r.response_to == rid and "compression" not in r.body
        got = srv.client_conns("strip-msg")[0].received[0].raw
        stripped = {k: v for k, v in body.items() if k != "compression"}
        assert got == w.op_msg(stripped, request_id=rid)
    finally:
        s.close()
    s = w.connect(p.port)
    try:
        q = {"isMaster": 1, "helloOk": True, "compression": ["zlib"],
             "client": {"application": {"name": "strip-query"}}}
        rid = w.next_request_id()
        s.sendall(w.op_query("admin.$cmd", q, request_id=rid))
        r = w.recv_message(s)
        assert r.opcode == w.OP_REPLY and r.response_to == rid
        got = srv.client_conns("strip-query")[0].received[0].raw
        assert got == w.op_query("admin.$cmd", {k: v for k, v in q.items() if k != "compression"},
                                 request_id=rid)
    finally:
        s.close()


@pytest.mark.parametrize("compressor", ["snappy", "zlib", "zstd", "noop"])
def test_unnegotiated_op_compressed_forwarded_unchanged(fake, start_proxy, compressor):
    srv = fake()
    p = start_proxy(srv.uri)
    s = w.connect(p.port)
    try:
        app = f"opc-{compressor}"
        s.sendall(w.op_msg({"hello": 1, "$db": "admin", "client": {"application": {"name": app}}}))
        w.recv_message(s)
        inner = w.op_msg({"find": "c", "filter": {"a": 1}, "$db": "test"})
        msg = w.op_compressed(inner, compressor)
        s.sendall(msg)
        r = w.recv_message(s)
        assert r.response_to == w.parse_message(inner).request_id and r.body["ok"] == 1
        got = srv.client_conns(app)[0].received[1]
        assert got.raw == msg and got.compressed_from == w.COMPRESSOR_IDS[compressor]
    finally:
        s.close()


# --- bytes forwarded --------------------------------------------------------------

def test_requests_forwarded_byte_for_byte(fake, start_proxy):
    srv = fake()
    p = start_proxy(srv.uri)
    s = w.connect(p.port)
    sent = []
    try:
        def send(m):
            sent.append(m)
            s.sendall(m)
            return w.recv_message(s)

        send(w.op_query("admin.$cmd", {"isMaster": 1, "helloOk": True,
                                       "client": {"application": {"name": "bytes"}}}))
        send(w.op_msg({"hello": 1, "$db": "admin"}))
        send(w.op_msg({"insert": "c", "$db": "test", "ordered": False},
                      sequences={"documents": [{"_id": i, "v": "x" * i} for i in range(50)]}))
        send(w.op_msg({"update": "c", "$db": "test"},
                      sequences={"updates": [{"q": {"_id": 1}, "u": {"$set": {"v": 2}}}]},
                      checksum=True))
        send(w.op_msg({"find": "c", "filter": {"v": {"$gt": 1}}, "sort": {"v": -1}, "$db": "test"},
                      flags=1 << 20))  # an unknown optional bit: must be ignored, not refused
        send(w.op_msg({"aggregate": "c", "pipeline": [{"$match": {"a": 1}}], "cursor": {},
                       "$db": "test"}, checksum=True))
        conn = srv.client_conns("bytes")[0]
        srv.wait_for(lambda: len(conn.received) == len(sent), 5, "all requests")
        assert [m.raw for m in conn.received] == sent
    finally:
        s.close()


def test_pipelined_requests_keep_order(fake, start_proxy):
    """Several requests written at once: replies come back in order, each
    addressed to its request."""
    srv = fake()
    p = start_proxy(srv.uri)
    s = w.connect(p.port)
    try:
        msgs = [w.op_msg({"ping": 1, "$db": "admin", "seq": i}) for i in range(50)]
        s.sendall(b"".join(msgs))
        ids = [w.parse_message(m).request_id for m in msgs]
        got = [w.recv_message(s).response_to for _ in msgs]
        assert got == ids
    finally:
        s.close()


# --- malformed replies and upstream failures -----------------------------------------

BAD_REPLIES = {
    "short-length": lambda rid: struct.pack("<iiii", 10, 5, rid, w.OP_MSG),
    "huge-length": lambda rid: struct.pack("<iiii", 60_000_000, 5, rid, w.OP_MSG),
    "truncated-then-close": lambda rid: w.op_msg({"ok": 1.0}, response_to=rid)[:-5],
}


@pytest.mark.parametrize("kind", list(BAD_REPLIES))
def test_malformed_reply_closes_client_only(fake, start_proxy, kind):
    srv = fake()

    async def bad(conn, msg):
        await conn.send_raw(BAD_REPLIES[kind](msg.request_id))
        await conn.close()

    srv.handlers["find"] = bad
    p = start_proxy(srv.uri)
    healthy = client_for(p.port, appname="healthy")
    try:
        assert healthy.admin.command("ping")["ok"] == 1
        s = w.connect(p.port)
        victim_port = s.getsockname()[1]
        try:
            s.sendall(w.op_msg({"find": "c", "$db": "test"}))
            t0 = time.monotonic()
            got = w.wait_closed(s, 10)
            assert time.monotonic() - t0 < 10
            bad_sent = [b for c in srv.conns for b in c.sent]
            if got and kind == "truncated-then-close" and \
                    any(b.startswith(got) for b in bad_sent):
                # Replies stream through: the part that arrived before the
                # upstream vanished may reach the client, then the close.
                got = b""
            if got:  # an error reply before closing is fine; a forwarded bad frame is not
                try:
                    r = w.parse_message(got)
                except Exception as e:
                    raise AssertionError(f"client received unparseable bytes {got[:40]!r}: "
                                         f"the malformed reply was relayed") from e
                assert r.length == len(got) and r.body["ok"] == 0
        finally:
            s.close()
        # A pymongo client sees an error promptly, not a hang.
        with client_for(p.port, appname="victim", socketTimeoutMS=20000) as c:
            t0 = time.monotonic()
            with pytest.raises(PyMongoError):
                c.test.c.find_one({})
            assert time.monotonic() - t0 < 10
        assert healthy.admin.command("ping")["ok"] == 1
        assert healthy.test.c.insert_one({"_id": 1}).acknowledged
        reason = re.compile(r"upstream|reply|length|truncat|malformed|invalid", re.I)
        deadline = time.monotonic() + 5
        while not any(reason.search(line_text(ln)) for ln in p.log.about_client(victim_port)) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        about = p.log.about_client(victim_port)
        assert any(reason.search(line_text(ln)) for ln in about), \
            f"no log line says why client :{victim_port} was closed: {about}"
    finally:
        healthy.close()


def test_dead_upstream(start_proxy):
    port = free_port()  # nothing listens here
    p = start_proxy(f"mongodb://127.0.0.1:{port}/")
    s = w.connect(p.port)
    try:
        rid = w.next_request_id()
        s.sendall(w.op_msg({"hello": 1, "$db": "admin"}, request_id=rid))
        t0 = time.monotonic()
        # Nothing ever reached a server, so this is the one case mongoguard
        # answers itself: HostUnreachable naming the upstream (the driver then
        # shows why), and the connection closes after it.
        r = w.recv_message(s, 15)
        assert r.response_to == rid and r.body["ok"] == 0
        assert r.body.get("code") == 6 and r.body.get("codeName") == "HostUnreachable"
        assert f"127.0.0.1:{port}" in r.body["errmsg"]
        assert w.wait_closed(s, 5) == b""
        assert time.monotonic() - t0 < 10
    finally:
        s.close()
    with client_for(p.port, serverSelectionTimeoutMS=3000) as c:
        t0 = time.monotonic()
        with pytest.raises((ServerSelectionTimeoutError, AutoReconnect, ConnectionFailure)):
            c.admin.command("ping")
        assert time.monotonic() - t0 < 10
    assert p.alive()
    p.log.wait_for(lambda ln: str(port) in line_text(ln) and ln.get("s") in ("W", "E"), 5,
                   what="a log line naming the unreachable upstream")


def test_upstream_lost_mid_session(fake, start_proxy):
    srv = fake()

    async def vanish(conn, msg):
        await conn.close()

    srv.handlers["find"] = vanish
    p = start_proxy(srv.uri)
    s = w.connect(p.port)
    try:
        assert w.command(s, {"ping": 1}).body["ok"] == 1
        rid = w.next_request_id()
        s.sendall(w.op_msg({"find": "c", "$db": "test"}, request_id=rid))
        # The server closed with the find forwarded: the client sees a close,
        # exactly as it would directly, and no reply of mongoguard's (a
        # synthesized command error made drivers keep their pool).
        assert w.wait_closed(s, 10) == b""
    finally:
        s.close()
    with client_for(p.port) as c:
        assert c.admin.command("ping")["ok"] == 1
    p.log.wait_for(lambda ln: "closed by the server" in line_text(ln), 5,
                   what="a log line saying the upstream closed")


@pytest.mark.parametrize("how", ["close", "reset"])
def test_upstream_end_passed_on(target, how):
    """The upstream closing or resetting a connection with a request
    forwarded reaches the client as the same close or reset, directly and
    through mongoguard alike."""
    srv, port, p = target()

    async def vanish(conn, msg):
        if how == "reset":
            sock = conn.writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await conn.close()

    srv.handlers["find"] = vanish
    s = w.connect(port)
    try:
        assert w.command(s, {"ping": 1}).body["ok"] == 1
        s.sendall(w.op_msg({"find": "c", "$db": "test"}))
        s.settimeout(10)
        if how == "reset":
            with pytest.raises(ConnectionResetError):
                while s.recv(65536):
                    pass
        else:
            assert s.recv(65536) == b""
    finally:
        s.close()
    if p is not None:
        p.log.wait_for(lambda ln: ln.get("msg") == "Connection ended" and
                       ("reset" in line_text(ln)) == (how == "reset"), 5,
                       what="the connection-ended line")


# --- backpressure ------------------------------------------------------------------

def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_slow_reader_backpressure(fake, start_proxy):
    """A client that stops reading an exhaust stream makes mongoguard stop
    reading the server: the server's writes stall and mongoguard's memory
    stays bounded; when the client reads again, every byte arrives intact."""
    srv = fake()
    replies, size = 200, 1 << 20
    progress = {"sent": 0}

    async def on_get_more(conn, msg):
        prev = msg.request_id
        blob = b"\x00" * size
        for i in range(replies):
            last = i == replies - 1
            prev = await conn.reply(msg, {"cursor": {"id": Int64(0 if last else 9), "ns": "t.c",
                                                     "nextBatch": [{"_id": i, "b": blob}]},
                                          "ok": 1.0},
                                    flags=0 if last else w.MORE_TO_COME, response_to=prev)
            progress["sent"] = i + 1

    srv.handlers["getMore"] = on_get_more
    p = start_proxy(srv.uri)
    rss0 = _rss_kib(p.proc.pid)
    s = w.connect(p.port)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    try:
        s.sendall(w.op_msg({"getMore": Int64(9), "collection": "c", "$db": "t"},
                           flags=w.EXHAUST_ALLOWED))
        time.sleep(2.0)  # the client reads nothing
        stalled_at = progress["sent"]
        print(f"server stalled after {stalled_at} MiB")
        grown = _rss_kib(p.proc.pid) - rss0
        assert stalled_at < replies // 2, \
            f"the server wrote {stalled_at} MiB to a client that reads nothing"
        assert grown < 64 * 1024, f"mongoguard grew by {grown} KiB for one slow reader"
        n = 0
        while True:
            r = w.recv_message(s, 30)
            assert r.body["cursor"]["nextBatch"][0]["_id"] == n
            n += 1
            if not r.more_to_come:
                break
        assert n == replies
    finally:
        s.close()
